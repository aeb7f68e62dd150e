"""The README's examples: its doctest blocks and the ``afa`` commands it shows.

The doctest blocks print rounded numbers; each is checked against the installed afa here, so a change
that moves a number the front page quotes fails the test run instead of leaving the README stale.
"""

from __future__ import annotations

import doctest
import re
import shlex
from pathlib import Path

import pytest

from afa.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CLI_DOC = ROOT / "docs" / "cli.md"


def afa_commands(path: Path) -> list[list[str]]:
    """The arguments of every ``afa ...`` command in the file's ```bash blocks (comments dropped)."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S):
        for line in block.splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                if words[:1] == ["afa"]:
                    commands.append(words[1:])
    return commands


def test_readme_doctests_pass():
    result = doctest.testfile(str(README), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0


def test_readme_shows_the_setup_command():
    assert ["epsilon", "--mechanism", "gaussian", "--sigma", "50", "--compositions", "1000",
            "--delta", "1e-5"] in afa_commands(README)


@pytest.mark.parametrize("args", afa_commands(README), ids=" ".join)
def test_readme_afa_commands_run(args, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(args) == 0
    assert capsys.readouterr().out.strip()


@pytest.mark.parametrize("args", afa_commands(CLI_DOC), ids=" ".join)
def test_cli_page_commands_run(args, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)  # the spec file example names a path relative to the repository
    written = None
    if args[0] == "plot":  # the figure goes to the test's temporary folder, not into the repository
        pytest.importorskip("matplotlib")
        at = args.index("-o") + 1
        written = tmp_path / Path(args[at]).name
        args = args[:at] + [str(written)] + args[at + 1:]
    assert main(args) == 0
    assert capsys.readouterr().out.strip()
    assert written is None or written.stat().st_size > 0
