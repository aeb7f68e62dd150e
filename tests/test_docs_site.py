"""The documentation site in a real browser, and the getting-started page's examples.

The browser tests open the built site (``python -m sphinx -W --keep-going -b html docs docs/_build/html``)
in headless Chromium through Playwright, served from a local port, and check what a reader sees: the
front page, an API page with its formulas typeset by the locally served MathJax, and a notebook's
figures.  They are skipped when the site has not been built, or Playwright or Chromium is missing; CI
builds the site and runs them after the test suite with AFA_DOCS_SITE_REQUIRED=1, which turns those skips
into failures.  Playwright drives the system's Chromium and never
downloads a browser.
"""

from __future__ import annotations

import doctest
import functools
import http.server
import os
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "docs" / "_build" / "html"
CHROMIUM = os.environ.get("AFA_DOCS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: CI sets this after building the site: then a missing site, Chromium or Playwright fails the tests.
REQUIRED = os.environ.get("AFA_DOCS_SITE_REQUIRED") == "1"
#: Milliseconds to wait for a page's load and for MathJax to typeset it.
TIMEOUT_MS = 30_000


def test_getting_started_examples():
    """The examples of docs/getting-started.md print what the page says they print."""
    failures, tried = doctest.testfile(str(ROOT / "docs" / "getting-started.md"), module_relative=False,
                                       optionflags=doctest.ELLIPSIS)
    assert tried >= 6
    assert failures == 0


def _missing(reason: str):
    if REQUIRED:
        pytest.fail(reason)
    pytest.skip(reason)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="module")
def site_url():
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def requested() -> list[str]:
    """Every URL the browser asked for, to show that the pages need nothing beyond the local server."""
    return []


@pytest.fixture(scope="module")
def page(requested):
    if not (SITE / "index.html").is_file():
        _missing("needs the built site: python -m sphinx -W --keep-going -b html docs docs/_build/html")
    if not os.access(CHROMIUM, os.X_OK):
        _missing(f"needs Chromium at {CHROMIUM} (Debian: apt-get install chromium)")
    try:
        from playwright import sync_api
    except ImportError:
        _missing("needs playwright: pip install -e '.[docs]'")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = chromium.new_context(viewport={"width": 1280, "height": 900})
            tab = context.new_page()
            tab.set_default_timeout(TIMEOUT_MS)
            tab.on("request", lambda request: requested.append(request.url))
            yield tab
        finally:
            chromium.close()


def _open(page, url: str) -> None:
    response = page.goto(url, wait_until="load")
    assert response is not None and response.ok, url


def test_front_page(page, site_url):
    _open(page, f"{site_url}/index.html")
    assert "afa" in page.title()
    heading = page.locator("h1").first.inner_text()
    assert "exact differential-privacy accounting" in heading
    links = {page.locator("article a", has_text=text).first.get_attribute("href")
             for text in ("Getting started", "Theory", "API reference", "Notebooks", "Benchmarks")}
    assert {"getting-started.html", "theory.html", "api/index.html", "notebooks.html", "benchmarks.html"} <= links
    # Each of those links leads to a page that exists.
    for href in sorted(links):
        response = page.request.get(f"{site_url}/{href}")
        assert response.ok, href
    page.screenshot(path=str(SITE / "front-page.png"), full_page=False)


def test_api_page_renders_class_methods_and_math(page, site_url, requested):
    _open(page, f"{site_url}/api/generated/afa.Accountant.html")
    signature = page.locator("dt.sig#afa\\.Accountant")
    assert signature.count() == 1
    assert "class afa.Accountant" in " ".join(signature.inner_text().split())
    for method in ("compose", "epsilon", "delta", "epsilon_result", "privacy_profile", "validate"):
        assert page.locator(f"dt.sig#afa\\.Accountant\\.{method}").count() == 1, method
    # MathJax, served from _static, typesets the docstring's display formulas.
    page.wait_for_selector("mjx-container", timeout=TIMEOUT_MS)
    typeset = page.locator("div.math mjx-container")
    assert typeset.count() >= 2
    box = typeset.first.bounding_box()
    assert box is not None and box["width"] > 50 and box["height"] > 10
    assert page.locator("mjx-merror").count() == 0
    assert page.evaluate("() => typeof MathJax !== 'undefined' && MathJax.version.startsWith('3')")
    elsewhere = [url for url in requested if not url.startswith((site_url, "data:", "blob:"))]
    assert not elsewhere


def test_theory_page_math(page, site_url):
    _open(page, f"{site_url}/theory.html")
    page.wait_for_selector("mjx-container", timeout=TIMEOUT_MS)
    assert page.locator("mjx-container[display='true']").count() >= 10
    assert page.locator("mjx-merror").count() == 0  # every formula parsed (MathJax marks TeX errors so)
    text = page.locator("article").inner_text()
    assert "$" not in text and "\\frac" not in text  # no formula left as source text
    assert page.locator("article a[href='bibliography.html']").count() >= 5


def test_notebook_page_shows_figures(page, site_url):
    _open(page, f"{site_url}/notebooks/afa_paper.html")
    assert "Optimal Accounting of Differential Privacy" in page.locator("h1").first.inner_text()
    images = page.locator("div.cell_output img")
    assert images.count() >= 3
    images.first.scroll_into_view_if_needed()
    widths = page.evaluate(
        "() => Array.from(document.querySelectorAll('div.cell_output img'), img => img.complete ? img.naturalWidth : 0)")
    assert all(width > 0 for width in widths), widths
