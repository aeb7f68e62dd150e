"""What every engine returns: a value with its bounds, its error and how it was obtained."""

from __future__ import annotations

from dataclasses import dataclass


class AccuracyError(ArithmeticError):
    """The requested quantity cannot be computed to a known accuracy by the chosen method.

    The message says which range is reliable and which method to use instead.  ``bracket`` is what
    was still certified (a :class:`Result` whose ``upper`` may be +inf, e.g. a certified lower bound
    on epsilon with no finite upper bound), or None.
    """

    def __init__(self, *args, bracket: "Result | None" = None):
        super().__init__(*args)
        self.bracket = bracket


class ValidationError(AccuracyError):
    """Two independent engines disagree: an estimate lies outside another engine's certified bracket."""


@dataclass(frozen=True)
class Result:
    """A numeric answer and what is known about its error.

    ``lower <= truth <= upper`` holds up to ``error``'s own nature: when
    ``certified`` is False the bounds come from an error *estimate* (e.g. the
    difference of two quadrature rules) that the engine checked at run time,
    not from a proof.  ``value`` is the best estimate; ``float(result)`` is
    ``upper``, the number to report (as ``Accountant.epsilon``/``delta`` do).
    """

    value: float
    lower: float
    upper: float
    error: float
    method: str
    certified: bool = False

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
