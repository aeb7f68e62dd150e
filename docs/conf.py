"""Sphinx configuration of afa's documentation site.

Build (from the repository root, after ``pip install -e '.[docs]'``)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The Markdown pages of ``docs/`` are read by MyST as they are; the notebooks of ``notebooks/`` are
rendered from their stored outputs (never executed), through the ``docs/notebooks`` symlink; the API
reference is generated from the numpy-style docstrings of the checkout being built.
"""

from __future__ import annotations

import importlib.util
import os
import pkgutil
import re
import sys
from pathlib import Path

# Document the checkout this file sits in, not whichever afa happens to be installed.
sys.path.insert(0, os.path.abspath(".."))

import afa  # noqa: E402

project = "afa"
author = "the afa authors"
copyright = "the afa authors; Apache-2.0"
version = release = afa.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
]

root_doc = "index"
exclude_patterns = [
    "_build",
    "**/.ipynb_checkpoints",
    # notebooks/README.md is shown through docs/notebooks.md, which includes it and adds the toctree.
    "notebooks/README.md",
]
templates_path = ["_templates"]

# --- MyST and MyST-NB -------------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
# GitHub-style anchors for headings, so links such as guide.md#methods resolve as they do on GitHub.
myst_heading_anchors = 3
# The stored notebooks carry their outputs; rendering them never runs a kernel.
nb_execution_mode = "off"
nb_merge_streams = True

# --- API reference -----------------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autosummary_ignore_module_all = False  # a module's __all__ says what it exports


def _homes() -> dict[str, str]:
    """Where each public name of afa's modules is documented, when not on its module's own page.

    Keys are ``module.name``; values the name to link to, relative to the module.  The names afa
    exports at the top level have a page each (``afa.Name``); a name a module re-exports from
    another module that lists it in ``__all__`` is documented there.  Names missing here are
    documented on their module's page.
    """
    homes = {}
    for info in pkgutil.walk_packages(afa.__path__, "afa."):
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            try:
                obj = getattr(module, name)
            except ImportError:  # a name built on first use from an optional dependency
                continue
            home = None
            if name in afa.__all__ and getattr(afa, name) is obj:
                home = f"afa.{name}"
            else:
                owner = getattr(obj, "__module__", None)
                if isinstance(owner, str) and owner != info.name and owner.startswith("afa."):
                    if name in getattr(importlib.import_module(owner), "__all__", ()):
                        home = f"{owner}.{name}"
            if home is not None:
                prefix = info.name + "."
                homes[prefix + name] = home[len(prefix):] if home.startswith(prefix) else home
    return homes


autosummary_context = {"afa_homes": _homes()}
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
numpydoc_show_class_members = False  # the autosummary class template lists the members
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = set()

# --- Math, rendered offline ----------------------------------------------------------------------
# MathJax's default source is a CDN, which a machine without internet access cannot reach.  The
# sphinx-mathjax-offline package (in the 'docs' extra) ships MathJax 3's files; they are copied to
# _static/mathjax and served with the site.
_mathjax_spec = importlib.util.find_spec("sphinx-mathjax-offline")
if _mathjax_spec is None or not _mathjax_spec.submodule_search_locations:
    raise RuntimeError("the docs need MathJax served locally: pip install -e '.[docs]' (sphinx-mathjax-offline)")
_mathjax_static = Path(list(_mathjax_spec.submodule_search_locations)[0]) / "static"
mathjax_path = "mathjax/tex-chtml.js"

# --- HTML ----------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"afa {release}"
html_static_path = [str(_mathjax_static)]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
}
html_show_sourcelink = False
# Pages without sub-pages have nothing to show in the left sidebar.
html_sidebars = {page: [] for page in ("index", "getting-started", "theory", "benchmarks", "bibliography")}

# --- Links between the repository's Markdown files -----------------------------------------------
# The pages in docs/ link to files outside docs/ with paths that work on GitHub.  On the site those
# files are pages of their own (docs/benchmarks.md includes benchmarks/RESULTS.md, docs/notebooks.md
# includes notebooks/README.md), so the links are pointed there while the pages are read.
_REPOSITORY_LINKS = {
    "../benchmarks/RESULTS.md": "benchmarks.md",
    "../notebooks/README.md": "notebooks.md",
}
_LINK = re.compile(r"\]\((" + "|".join(re.escape(k) for k in _REPOSITORY_LINKS) + r")(#[^)]*)?\)")


def _site_links(text: str) -> str:
    return _LINK.sub(lambda m: f"]({_REPOSITORY_LINKS[m.group(1)]}{m.group(2) or ''})", text)


def _rewrite_source(app, docname, source):
    source[0] = _site_links(source[0])


def _rewrite_include(app, relative_path, parent_docname, content):
    content[0] = _site_links(content[0])


def setup(app):
    app.connect("source-read", _rewrite_source)
    app.connect("include-read", _rewrite_include)
