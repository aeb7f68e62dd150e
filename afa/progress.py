"""Progress bars for long computations: calibration searches, large PLD builds, sweeps.

:func:`progress` is a context manager yielding a :class:`Progress` with ``update(n)`` and ``describe(text)``.
It draws on stderr only when stderr is a terminal (or when forced with ``enabled=True``): with tqdm if it is
installed (the optional extra ``afa[progress]``), else a minimal line rewritten in place.  Anywhere else --
a pipe, a log file, a notebook without a terminal, ``enabled=False`` -- it prints nothing and costs nothing.

Examples
--------
>>> from afa.progress import progress
>>> with progress(total=3, description="steps", enabled=False) as bar:
...     for _ in range(3):
...         bar.update()
>>> bar.count
3
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import time
from collections.abc import Iterator
from typing import TextIO

__all__ = ["Progress", "progress", "silenced", "wanted"]

#: Whether bars are silenced for the current context (:func:`silenced`, the CLI's ``--quiet``).
_SILENCED: contextvars.ContextVar[bool] = contextvars.ContextVar("afa_progress_silenced", default=False)


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """No progress bar inside the block unless one is forced with ``enabled=True`` (the CLI's ``--quiet``).

    Examples
    --------
    >>> import sys
    >>> from afa.progress import silenced, wanted
    >>> with silenced():
    ...     wanted(None, sys.stderr), wanted(True)
    (False, True)
    """
    token = _SILENCED.set(True)
    try:
        yield
    finally:
        _SILENCED.reset(token)


def wanted(enabled: bool | None = None, stream: TextIO | None = None) -> bool:
    """Whether a progress bar should be drawn.

    Parameters
    ----------
    enabled : bool, optional
        True or False decide; None (default) draws only when ``stream`` is a terminal (and not inside
        :func:`silenced`).
    stream : file, optional
        Where the bar goes (default ``sys.stderr``).

    Returns
    -------
    bool

    Examples
    --------
    >>> import io
    >>> from afa.progress import wanted
    >>> wanted(None, io.StringIO()), wanted(True, io.StringIO()), wanted(False)
    (False, True, False)
    """
    if enabled is not None:
        if not isinstance(enabled, bool):
            raise TypeError(f"progress must be True, False or None, got {enabled!r}")
        return enabled
    if _SILENCED.get():
        return False
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


class Progress:
    """A counter that a bar shows (tqdm, a plain line, or nothing).

    Attributes
    ----------
    count : int
        Steps done so far.
    total : int or None
        Steps expected (None: unknown).
    description : str
        What is being done.
    """

    def __init__(self, total: int | None, description: str, stream: TextIO | None, drawn: bool,
                 delay: float = 0.0, redraw: float = 0.2):
        self.count, self.total, self.description = 0, total, description
        self._stream = sys.stderr if stream is None else stream
        self._tqdm = None
        self._drawn = drawn
        self._shown = False  # whether the plain line was written (it waits for ``delay``)
        self._start = time.monotonic()
        self._delay, self._redraw = delay, redraw
        self._last = 0.0
        if drawn:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self._tqdm = tqdm(total=total, desc=description, file=self._stream, leave=False, delay=delay)

    def update(self, steps: int = 1) -> None:
        """Count ``steps`` more steps done (and redraw)."""
        self.count += steps
        if self._tqdm is not None:
            self._tqdm.update(steps)
        elif self._drawn:
            self._line()

    def describe(self, description: str) -> None:
        """Change the text shown beside the count."""
        self.description = description
        if self._tqdm is not None:
            self._tqdm.set_description(description)
        elif self._drawn:
            self._line(force=True)

    def _line(self, force: bool = False) -> None:
        now = time.monotonic()
        if now - self._start < self._delay or (not force and now - self._last < self._redraw):
            return
        self._last, self._shown = now, True
        of = "" if self.total is None else f"/{self.total}"
        self._stream.write(f"\r{self.description}: {self.count}{of}")
        self._stream.flush()

    def close(self) -> None:
        """Remove the bar (the plain line is ended with a newline)."""
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None
        elif self._drawn:
            if self._shown:
                self._line(force=True)
                self._stream.write("\n")
                self._stream.flush()
            self._drawn = False


@contextlib.contextmanager
def progress(total: int | None = None, description: str = "", *, enabled: bool | None = None,
             stream: TextIO | None = None, delay: float = 0.0, redraw: float = 0.2) -> Iterator[Progress]:
    """A progress bar for the block (see the module docstring).

    Parameters
    ----------
    total : int, optional
        Steps expected (None: unknown, a count without a bar).
    description : str, default ""
        What is being done.
    enabled : bool, optional
        None (default): draw only when ``stream`` is a terminal; True: draw; False: never draw.
    stream : file, optional
        Where to draw (default ``sys.stderr``).
    delay : float, default 0.0
        Seconds before anything is drawn (a block that ends sooner leaves no trace).
    redraw : float, default 0.2
        The least time between two redraws of the plain-text line, in seconds (tqdm keeps its own pace).

    Yields
    ------
    Progress
        Call ``update()`` per step done.

    Examples
    --------
    >>> import io
    >>> from afa.progress import progress
    >>> with progress(total=2, description="sigma", stream=io.StringIO()) as bar:  # not a terminal: silent
    ...     bar.update(2)
    >>> bar.count
    2
    """
    bar = Progress(total, description, stream, wanted(enabled, stream), delay, redraw)
    try:
        yield bar
    finally:
        bar.close()
