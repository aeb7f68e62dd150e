"""afa.progress: silent off a terminal, advancing when forced; calibration reports through it."""

from __future__ import annotations

import io
import sys

import pytest

import afa
from afa import progress as bars


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_nothing_is_printed_when_not_a_terminal():
    stream = io.StringIO()
    with bars.progress(total=5, description="work", stream=stream) as bar:
        for _ in range(5):
            bar.update()
    assert bar.count == 5 and stream.getvalue() == ""


def test_forced_bar_advances_plain_line(monkeypatch):
    """Without tqdm: a line rewritten in place, ending with the final count and a newline."""
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    stream = io.StringIO()
    with bars.progress(total=3, description="work", stream=stream, enabled=True, redraw=0.0) as bar:
        for _ in range(3):
            bar.update()
    lines = stream.getvalue().split("\r")
    assert bar.count == 3
    assert [line.strip() for line in lines if line.strip()] == ["work: 1/3", "work: 2/3", "work: 3/3", "work: 3/3"]


def test_forced_bar_uses_tqdm_when_installed():
    pytest.importorskip("tqdm")
    stream = io.StringIO()
    with bars.progress(total=3, description="work", stream=stream, enabled=True) as bar:
        bar.update(3)
    assert bar.count == 3 and "work" in stream.getvalue() and "/3" in stream.getvalue()


def test_terminal_draws_unless_silenced_or_disabled():
    assert bars.wanted(None, Terminal()) is True
    assert bars.wanted(False, Terminal()) is False
    with bars.silenced():
        assert bars.wanted(None, Terminal()) is False
    with pytest.raises(TypeError, match="progress"):
        bars.wanted("yes")


def test_delay_hides_short_blocks():
    stream = Terminal()
    with bars.progress(total=2, stream=stream, enabled=True, delay=60.0) as bar:
        bar.update(2)
    assert stream.getvalue() == ""


def test_calibration_counts_its_evaluations(capsys):
    result = afa.calibrate_sigma(1.0, 1e-5, steps=10, progress=False)
    assert capsys.readouterr().err == ""
    assert result.epsilon_upper <= 1.0
