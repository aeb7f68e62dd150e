"""Time and memory budgets of one query.

A query (``Accountant.epsilon_result``, ``delta_result``, a calibration, a CLI
call) runs inside :func:`limits`, which sets a deadline and a memory ceiling
for the current thread of execution (a :class:`contextvars.ContextVar`, so
concurrent queries in other threads or tasks keep their own).  Long loops in
the engines call :func:`check` and large allocations call :func:`reserve`;
either raises :class:`BudgetExceededError` -- a refusal, so ``method='auto'``
moves on to the next engine -- naming what was being done.

Nested :func:`limits` never extend an outer budget: the inner deadline is the
earlier of the two, so ``auto`` can give one engine a share of what is left
without letting it spend more than the whole.
"""

from __future__ import annotations

import contextvars
import math
import numbers
import time
from dataclasses import dataclass

from .results import AccuracyError


class BudgetExceededError(AccuracyError):
    """A query ran out of its time or memory budget (see :class:`Budget`).

    The message names what was being computed and the budget; raise the budget
    (``Accountant(budget=Budget(seconds=...))``) or choose another ``method``.  An
    :class:`afa.AccuracyError`: a refusal, so ``method='auto'`` moves on to the next engine.

    Examples
    --------
    >>> import afa
    >>> issubclass(afa.BudgetExceededError, afa.AccuracyError)
    True
    """


@dataclass(frozen=True)
class Budget:
    """Limits of one query.

    Parameters
    ----------
    seconds : float
        Wall-clock time one query may take, in (0, inf]; default 30 s.
    memory_bytes : float
        Largest single working array an engine may allocate, in bytes, in (0, inf];
        default 2 GiB.  Engines estimate the size before allocating and refuse
        beyond it.

    Raises
    ------
    ValueError
        A limit that is NaN or <= 0.
    TypeError
        A limit that is not a real number (booleans included).

    Examples
    --------
    >>> import afa
    >>> afa.Budget(seconds=60)
    Budget(seconds=60.0, memory_bytes=2147483648.0)
    >>> accountant = afa.Accountant(budget=afa.Budget(seconds=60))
    """

    seconds: float = 30.0
    memory_bytes: float = 2.0 * 2 ** 30

    def __post_init__(self):
        for name in ("seconds", "memory_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"Budget.{name} must be a positive number, got {value!r}")
            value = float(value)
            if math.isnan(value) or value <= 0:
                raise ValueError(f"Budget.{name} must be in (0, inf], got {value}")
            object.__setattr__(self, name, value)


@dataclass(frozen=True)
class _Limits:
    deadline: float
    memory_bytes: float
    seconds: float


_current: contextvars.ContextVar[_Limits | None] = contextvars.ContextVar("afa_budget", default=None)


class limits:  # noqa: N801 -- used as a function: ``with budget.limits(...)``
    """Run the body under ``budget`` (or a share of ``seconds`` of the current one), never beyond an outer budget.

    Parameters
    ----------
    budget : Budget, optional
        The limits to set; None leaves time and memory unlimited except by ``seconds`` and an outer budget.
    seconds : float, optional
        At most this many seconds from now.

    Notes
    -----
    The deadline and memory ceiling are the smallest of those given and those of an enclosing
    :func:`limits`; they hold for the current thread or task only (a context variable).

    Examples
    --------
    >>> import afa
    >>> from afa import budget
    >>> with budget.limits(afa.Budget(seconds=10)):
    ...     with budget.limits(seconds=60):
    ...         budget.remaining() <= 10
    True
    """

    __slots__ = ("_budget", "_seconds", "_token")

    def __init__(self, budget: Budget | None = None, *, seconds: float | None = None):
        self._budget = budget
        self._seconds = seconds
        self._token: contextvars.Token | None = None

    def __enter__(self) -> None:
        outer = _current.get()
        now = time.monotonic()
        budget, seconds = self._budget, self._seconds
        if budget is not None:
            deadline, memory, total = now + budget.seconds, budget.memory_bytes, budget.seconds
        else:
            deadline, memory, total = math.inf, math.inf, math.inf
        if seconds is not None:
            deadline, total = min(deadline, now + seconds), min(total, seconds)
        if outer is not None:
            deadline, memory, total = min(deadline, outer.deadline), min(memory, outer.memory_bytes), \
                min(total, outer.seconds)
        self._token = _current.set(_Limits(deadline, memory, total))

    def __exit__(self, *exc_info) -> None:
        if self._token is not None:
            _current.reset(self._token)
            self._token = None


def remaining() -> float:
    """Seconds left of the current budget (inf outside any).

    Examples
    --------
    >>> from afa import budget
    >>> budget.remaining()
    inf
    """
    current = _current.get()
    return math.inf if current is None else current.deadline - time.monotonic()


def check(what: str) -> None:
    """Raise :class:`BudgetExceededError` if the current deadline has passed.

    Parameters
    ----------
    what : str
        What is being computed, for the message ("... exceeded while {what}").
    """
    current = _current.get()
    if current is not None and time.monotonic() > current.deadline:
        raise BudgetExceededError(f"time budget ({current.seconds:.3g} s) exceeded while {what}; "
                                  "raise it with Accountant(budget=afa.Budget(seconds=...)) or choose another method")


def reserve(nbytes: float, what: str) -> None:
    """Raise :class:`BudgetExceededError` if one array of ``nbytes`` would exceed the memory budget.

    Parameters
    ----------
    nbytes : float
        The size of the array about to be allocated, in bytes.
    what : str
        What needs it, for the message.

    Notes
    -----
    Outside any budget the limit is the default 2 GiB.
    """
    current = _current.get()
    limit = 2.0 * 2 ** 30 if current is None else current.memory_bytes
    if nbytes > limit:
        raise BudgetExceededError(f"{what} needs about {nbytes / 2 ** 20:.4g} MiB, above the memory budget "
                                  f"({limit / 2 ** 20:.4g} MiB); raise it with "
                                  "Accountant(budget=afa.Budget(memory_bytes=...)) or choose another method")
