"""Argument checks shared by every public entry point.

Each check raises ``ValueError`` (or ``TypeError`` for a value of the wrong
kind) naming the parameter and the allowed range, so that bad input never
reaches the numerics.
"""

from __future__ import annotations

import math
import numbers
import reprlib
import warnings

import numpy as np

#: The largest count (``times``, ``steps``, ``k``) accepted: 2**53, the last integer every count
#: below which is exact as a float (the engines multiply log-MGFs by counts in floating point).
MAX_COUNT = 2 ** 53
#: The largest privacy-loss magnitude accepted, per use and composed (a loss value, its mean or its
#: variance): the engines add, scale and exponentiate losses in double precision, and 1e300 leaves
#: them a margin of 1e8 below overflow.
MAX_LOSS = 1e300


def real_number(name: str, value) -> float:
    """Return ``value`` as a finite float, or raise naming ``name``."""
    if type(value) is float:  # the common case, without the abstract-class checks below
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value}")
        return value
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    try:
        value = float(value)
    except OverflowError:
        raise ValueError(f"{name} must be a finite number, got an integer too large for a float") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def positive(name: str, value) -> float:
    """A finite real number > 0."""
    value = real_number(name, value)
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def non_negative(name: str, value) -> float:
    """A finite real number >= 0."""
    value = real_number(name, value)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def in_interval(name: str, value, low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> float:
    """A finite real number in the interval between ``low`` and ``high``."""
    value = real_number(name, value)
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high:
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        raise ValueError(f"{name} must be in {left}{low:g}, {high:g}{right}, got {value}")
    return value


def positive_integer(name: str, value, minimum: int = 1, maximum: int | None = None) -> int:
    """An integer in [``minimum``, ``maximum``] (floats with an integral value are accepted)."""
    if type(value) is int:  # the common case, without the abstract-class checks below
        result = value
    elif isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    elif isinstance(value, (numbers.Integral, np.integer)):
        result = int(value)
    elif isinstance(value, (numbers.Real, np.floating)) and math.isfinite(value) and float(value).is_integer():
        result = int(float(value))
    else:
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if result < minimum or (maximum is not None and result > maximum):
        allowed = f">= {minimum}" if maximum is None else f"in [{minimum}, {_integer_text(maximum)}]"
        raise ValueError(f"{name} must be an integer {allowed}, got {_integer_text(result)}")
    return result


def _integer_text(value: int) -> str:
    """``value`` in full when short, else in scientific notation (a 400-digit count is not read)."""
    text = str(value)
    if len(text) <= 20:
        return text if value != MAX_COUNT else "2**53"
    return f"about 1e{len(text.lstrip('-')) - 1}" if value > 0 else f"about -1e{len(text) - 2}"


def real_array(name: str, values) -> np.ndarray:
    """A numpy float array with no NaN or infinity (of any shape; booleans, strings and None are refused)."""
    try:
        raw = np.asarray(values)
    except ValueError as error:  # ragged nesting
        raise TypeError(f"{name} must be an array of real numbers, got {reprlib.repr(values)}") from error
    if raw.dtype.kind == "O":
        reals = all(isinstance(value, (numbers.Real, np.floating, np.integer)) and not isinstance(value, bool)
                    for value in raw.flat)
    else:
        reals = raw.dtype.kind in "iuf"
    if not reals:
        raise TypeError(f"{name} must be real numbers, got {reprlib.repr(values)}")
    try:
        array = raw.astype(float)
    except OverflowError as error:  # an integer beyond the float range
        raise ValueError(f"{name} must be finite (no NaN or infinity), got {reprlib.repr(values)}") from error
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite (no NaN or infinity), got {reprlib.repr(values)}")
    return array


def probability_vector(name: str, values) -> np.ndarray:
    """A 1-d array of probabilities in [0, 1] summing to 1 (to 1e-9)."""
    array = real_array(name, values)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d sequence of probabilities")
    if np.any(array < 0) or np.any(array > 1):
        raise ValueError(f"{name} must contain probabilities in [0, 1], got {reprlib.repr(values)}")
    total = float(array.sum())
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"{name} must sum to 1, sums to {total!r}")
    return array


def choice(name: str, value, allowed: tuple[str, ...]) -> str:
    """One of the strings in ``allowed``."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {reprlib.repr(value)}")
    return value


def assign(instance, **values) -> None:
    """Store validated values on a frozen dataclass instance (from its ``__post_init__``)."""
    for name, value in values.items():
        object.__setattr__(instance, name, value)


def renamed(name: str, value, old_name: str, old_value, depth: int = 1):
    """The value of a keyword given as ``name`` or by its deprecated ``old_name`` (which warns, pointing
    ``depth`` frames above its caller: at the user's call), not both; None if neither is given."""
    if old_value is None:
        return value
    warnings.warn(f"the keyword {old_name} is deprecated: use {name}", DeprecationWarning, stacklevel=2 + depth)
    if value is not None:
        raise TypeError(f"give {name} once (not also as {old_name})")
    return old_value
