"""What every engine returns: a value with its bounds, its error and how it was obtained."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


class AccuracyError(ArithmeticError):
    """The requested quantity cannot be computed to a known accuracy by the chosen method.

    The message says which range is reliable and which method to use instead.

    Parameters
    ----------
    *args
        The message (as for any exception).
    bracket : Result, optional
        What was still certified, stored as the attribute ``bracket`` (None if nothing).
    attempts : tuple of Attempt, optional
        What each engine tried before the refusal, stored as the attribute ``attempts``.

    Attributes
    ----------
    bracket : Result or None
        What was still certified: a :class:`Result` whose ``upper`` may be +inf (e.g. a certified lower
        bound on epsilon with no finite upper bound), or None.
    attempts : tuple of Attempt
        What each engine tried before the refusal (``method="auto"``), as on :attr:`Result.attempts`.

    Examples
    --------
    >>> import afa
    >>> accountant = afa.Accountant().compose(afa.Gaussian(1.0))
    >>> try:
    ...     accountant.epsilon(1e-20, method="quadrature")
    ... except afa.AccuracyError as refusal:
    ...     print(refusal.bracket, "method='exact'" in str(refusal))
    None True
    >>> round(accountant.epsilon(1e-20), 4)  # the engine the message suggests answers
    9.5109
    """

    def __init__(self, *args, bracket: Result | None = None, attempts: tuple[Attempt, ...] = ()):
        super().__init__(*args)
        self.bracket = bracket
        #: What each engine tried before the refusal (``method="auto"``), as on :attr:`Result.attempts`.
        self.attempts = tuple(attempts)


class UnsupportedCompositionError(ValueError):
    """A method cannot serve this composition at all (e.g. the contour method without a continuous part).

    A declared refusal: under ``method="auto"`` the next candidate is tried; with a method named by the
    user it is a ValueError saying which methods can serve.  Any other exception from an engine is a bug
    and propagates.

    Examples
    --------
    >>> import afa
    >>> issubclass(afa.UnsupportedCompositionError, ValueError)
    True
    """


class ValidationError(AccuracyError):
    """Two independent engines disagree: an estimate lies outside another engine's certified bracket.

    Raised by :meth:`afa.Accountant.validate`; an :class:`AccuracyError`.

    Examples
    --------
    >>> import afa
    >>> issubclass(afa.ValidationError, afa.AccuracyError)
    True
    >>> accountant = afa.Accountant().compose(afa.RandomizedResponse(0.75), 3)
    >>> try:
    ...     check = accountant.validate(epsilon=1.0)
    ... except afa.ValidationError as disagreement:
    ...     print("the engines disagree:", disagreement)
    ... else:
    ...     print("agree:", check.estimate.method, "inside", check.bracket.method)
    agree: exact inside pld
    """


@dataclass(frozen=True)
class Attempt:
    """One engine's try at a query.

    Attributes
    ----------
    method : str
        The engine (the contour's retry with a larger node budget is "contour (wide node budget)").
    outcome : str
        "answered" (the result's method), "refused" (the engine declared it cannot answer to
        a known accuracy: ``reason`` says why), "out of time" (its share of the budget ran out),
        "wide bracket" (a certified answer kept while another engine tried for a tighter one) or
        "passed over" (not tried: it refused this composition before, or building it ran out of time).
    reason : str
        Why the engine refused (empty otherwise).
    seconds : float
        The wall-clock time it took.

    Examples
    --------
    >>> import afa
    >>> attempt = afa.Accountant().compose(afa.Gaussian(1.0), 4).delta_result(1.0).attempts[-1]
    >>> attempt.method, attempt.outcome
    ('exact', 'answered')
    """

    method: str
    outcome: str
    reason: str = ""
    seconds: float = 0.0


@dataclass(frozen=True, eq=False)
class Result:
    """A numeric answer and what is known about its error (one value, or an array of them).

    ``lower <= truth <= upper`` holds up to ``error``'s own nature: when
    ``certified`` is False the bounds come from an error *estimate* (e.g. the
    difference of two quadrature rules) that the engine checked at run time,
    not from a proof.  ``float(result)`` is ``upper``, the number to report (as
    ``Accountant.epsilon``/``delta`` do).

    Attributes
    ----------
    value : float or ndarray
        The best estimate (an array, of the query's shape, when the query was given an array).
    lower, upper : float or ndarray
        The bounds on the truth.
    error : float or ndarray
        The error (estimate or bound) behind them.
    method : str
        The engine that answered (for an array, the engines that answered its values, joined by "+").
    certified : bool
        Whether the bounds are proved (True) or come from a run-time error estimate (False).
    tight : bool
        Whether every mechanism of the composition has a tight dominating pair (:attr:`afa.Mechanism.tight`).
        When False, ``upper`` still bounds the truth but ``value`` and ``lower`` describe the dominating
        pair only: ``lower`` (certified or not) is not a lower bound on the mechanisms' true epsilon or delta.
    attempts : tuple of Attempt
        Every engine tried, in order, ending with the one that answered: how the answer was reached
        (not part of equality).

    Notes
    -----
    The four numbers are stored as plain floats, whatever numpy scalar an engine gave, or as read-only
    float arrays.  ``float(result)`` needs a single value.

    Examples
    --------
    >>> import afa
    >>> result = afa.Accountant().compose(afa.Gaussian(1.0), 4).delta_result(1.0)
    >>> round(result.value, 6), result.method
    (0.509862, 'exact')
    >>> result.lower <= result.value <= result.upper == float(result)
    True
    """

    value: Any
    lower: Any
    upper: Any
    error: Any
    method: str
    certified: bool = False
    #: Whether ``lower`` bounds the mechanisms' truth (every pair tight), not only their dominating pair's.
    tight: bool = True
    #: Every engine tried, in order, ending with the one that answered (see :class:`Attempt`).
    attempts: tuple[Attempt, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self):
        for name in ("value", "lower", "upper", "error"):  # plain floats, whatever numpy scalar an engine gave
            given = getattr(self, name)
            if type(given) is float:
                continue
            values = np.array(given, dtype=float)
            if values.ndim == 0:
                object.__setattr__(self, name, float(values))
            else:
                values.setflags(write=False)
                object.__setattr__(self, name, values)

    def __float__(self) -> float:
        if isinstance(self.upper, np.ndarray):
            raise TypeError(f"a Result of {self.upper.size} values has no single float: read .upper")
        return self.upper

    def __eq__(self, other) -> bool:
        if not isinstance(other, Result):
            return NotImplemented
        return (self.method == other.method and self.certified == other.certified and self.tight == other.tight
                and all(np.array_equal(getattr(self, name), getattr(other, name))
                        for name in ("value", "lower", "upper", "error")))

    __hash__ = None  # type: ignore[assignment]  # mutable-looking arrays: results are compared, not hashed


@dataclass(frozen=True)
class Validation:
    """An answer checked by a second, independent engine (``Accountant.validate``).

    Attributes
    ----------
    estimate : Result
        The answer of the requested method.
    bracket : Result
        The discretized PLD's certified (lower, upper); the estimate's value lies inside it (else
        :meth:`afa.Accountant.validate` raises :class:`ValidationError`).

    Examples
    --------
    >>> import afa
    >>> validation = afa.Accountant().compose(afa.RandomizedResponse(0.75), 3).validate(epsilon=1.0)
    >>> validation.estimate.method, validation.bracket.method
    ('exact', 'pld')
    >>> validation.bracket.lower <= validation.estimate.value <= validation.bracket.upper
    True
    """

    estimate: Result
    bracket: Result
