"""What every engine returns: a value with its bounds, its error and how it was obtained."""

from __future__ import annotations

from dataclasses import dataclass, field


class AccuracyError(ArithmeticError):
    """The requested quantity cannot be computed to a known accuracy by the chosen method.

    The message says which range is reliable and which method to use instead.  ``bracket`` is what
    was still certified (a :class:`Result` whose ``upper`` may be +inf, e.g. a certified lower bound
    on epsilon with no finite upper bound), or None.
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
    """


class ValidationError(AccuracyError):
    """Two independent engines disagree: an estimate lies outside another engine's certified bracket."""


@dataclass(frozen=True)
class Attempt:
    """One engine's try at a query.

    ``outcome`` is "answered" (the result's method), "refused" (the engine declared it cannot answer to
    a known accuracy: ``reason`` says why), "out of time" (its share of the budget ran out),
    "wide bracket" (a certified answer kept while another engine tried for a tighter one) or
    "passed over" (not tried: it refused this composition before, or building it ran out of time).
    ``method`` names the engine (the contour's retry with a larger node budget is
    "contour (wide node budget)"); ``seconds`` is the wall-clock time it took.
    """

    method: str
    outcome: str
    reason: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class Result:
    """A numeric answer and what is known about its error.

    ``lower <= truth <= upper`` holds up to ``error``'s own nature: when
    ``certified`` is False the bounds come from an error *estimate* (e.g. the
    difference of two quadrature rules) that the engine checked at run time,
    not from a proof.  ``value`` is the best estimate; ``float(result)`` is
    ``upper``, the number to report (as ``Accountant.epsilon``/``delta`` do).  ``attempts``
    records how the answer was reached (not part of equality).
    """

    value: float
    lower: float
    upper: float
    error: float
    method: str
    certified: bool = False
    #: Every engine tried, in order, ending with the one that answered (see :class:`Attempt`).
    attempts: tuple[Attempt, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self):
        for name in ("value", "lower", "upper", "error"):  # plain floats, whatever numpy scalar an engine gave
            object.__setattr__(self, name, float(getattr(self, name)))

    def __float__(self) -> float:
        return self.upper


@dataclass(frozen=True)
class Validation:
    """An answer checked by a second, independent engine (``Accountant.validate``).

    ``estimate`` is the answer of the requested method; ``bracket`` the discretized PLD's
    certified (lower, upper); the estimate's value lies inside it (else ValidationError).
    """

    estimate: Result
    bracket: Result
