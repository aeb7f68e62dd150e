"""Calibration: the smallest sigma, or the most steps, or the largest sampling rate meeting (epsilon, delta).

DP-SGD users fix the privacy target and ask for the noise.  Every answer here is
*monotone-safe*: the returned parameter's **upper** bound on epsilon(delta) is at
most the target (never a value that overshoots it, as an estimate-based search
can), and a parameter ``rtol`` less private is shown to miss it (by its *lower*
bound), so the answer is tight to ``rtol``.  The search brackets the parameter
geometrically and runs Brent's method on log delta(target_epsilon) - log delta, a
smooth monotone function of log sigma, with the fast analytic estimate; only the two
final checks use the certifying method (the PLD's pessimistic and optimistic bounds).

For composed Gaussian mechanisms without subsampling the closed form applies
(papers/004_d41287a43ce5d174.txt Thm 5 and the calibration after Cor. 5.1, the
"analytic Gaussian mechanism" of Balle and Wang 2018): delta depends on mu =
sqrt(steps) sensitivity / sigma only, so one root in mu gives sigma
(:func:`gaussian_sigma`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

from scipy.optimize import brentq

from . import _validation as check
from . import exact
from .accountant import Accountant
from .mechanisms import NEIGHBORING_RELATIONS, Gaussian
from .results import AccuracyError

#: PLD grid step for the search's estimates (the final checks use the accountant's default).
SEARCH_INTERVAL = 1e-3
#: Bracket growth factor and the most growth steps before giving up.
GROWTH, MAX_GROWTH = 2.0, 60


@dataclass(frozen=True)
class Calibration:
    """A calibrated parameter and the evidence that it is safe and tight.

    ``value`` meets the target: its upper epsilon(delta) is ``epsilon_upper`` <= target.
    ``rejected`` is a value within ``rtol`` of it (less private) whose *lower* epsilon was
    checked to exceed the target.  ``certified`` says whether the upper bounds are certified
    (closed form up to rounding, or the PLD backend's pessimistic estimate) or estimated.
    """

    value: float
    epsilon_upper: float
    rejected: float
    rtol: float
    method: str
    certified: bool

    def __float__(self) -> float:
        return float(self.value)


def gaussian_sigma(epsilon: float, delta: float, steps: int = 1, sensitivity: float = 1.0) -> float:
    """The smallest sigma with which ``steps`` Gaussian mechanisms satisfy (epsilon, delta)-DP (closed form).

    Solves delta_Gauss(epsilon; mu) = delta for mu (papers/004 Thm 5; delta increases with mu)
    and returns sensitivity sqrt(steps) / mu, to about 1e-12 relative.
    """
    epsilon = check.non_negative("epsilon", epsilon)
    delta = check.in_interval("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    steps = check.positive_integer("steps", steps)
    sensitivity = check.positive("sensitivity", sensitivity)
    log_delta = math.log(delta)

    def gap(log_mu: float) -> float:
        return float(exact.gaussian_log_delta(epsilon, math.exp(log_mu))) - log_delta

    low, high = _bracket(gap, 0.0, increasing=True)
    log_mu = brentq(gap, low, high, xtol=1e-14, rtol=1e-15)
    return sensitivity * math.sqrt(steps) / math.exp(log_mu)


def calibrate_sigma(target_epsilon: float, delta: float, steps: int, sampling_probability: float | None = None, *,
                    sensitivity: float = 1.0, neighboring: str = "add_remove", method: str | None = None,
                    rtol: float = 1e-3) -> Calibration:
    """The smallest sigma (to ``rtol``) whose upper epsilon(delta) after ``steps`` uses is <= ``target_epsilon``.

    The mechanism is Gaussian(sigma, sensitivity), Poisson-subsampled with ``sampling_probability``
    if given (DP-SGD).  ``method`` defaults to "exact" without subsampling (closed form) and "pld"
    with it (the pessimistic discretized PLD: a certified upper bound); any accountant method may be
    named, and the answer is then as safe as that method's upper bound.
    """
    steps = check.positive_integer("steps", steps)
    target_epsilon, delta, rtol, method, build = _common(target_epsilon, delta, sampling_probability, sensitivity,
                                                         neighboring, method, rtol)

    def accountant(sigma: float, interval: float | None = None) -> Accountant:
        return build(sigma, steps, interval)

    start = gaussian_sigma(max(target_epsilon, 1e-3), delta, steps, sensitivity)
    if sampling_probability is not None:
        start *= sampling_probability  # privacy amplification: roughly q times less noise
    return _calibrate(accountant, target_epsilon, delta, math.log(start), rtol, method, increasing=False)


def calibrate_steps(target_epsilon: float, delta: float, sigma: float, sampling_probability: float | None = None, *,
                    sensitivity: float = 1.0, neighboring: str = "add_remove", method: str | None = None,
                    rtol: float = 1e-3) -> Calibration:
    """The most steps (an integer, to ``rtol``) of Gaussian(sigma) (Poisson-subsampled with
    ``sampling_probability``) whose upper epsilon(delta) is <= ``target_epsilon``; see :func:`calibrate_sigma`.

    ``rejected`` is a step count at most about rtol more whose *lower* epsilon exceeds the target.
    """
    sigma = check.positive("sigma", sigma)
    target_epsilon, delta, rtol, method, build = _common(target_epsilon, delta, sampling_probability, sensitivity,
                                                         neighboring, method, rtol)
    # Plain Gaussians: steps uses of sigma act like one of sigma / sqrt(steps); subsampling at q about like q^2 fewer.
    one_step = gaussian_sigma(max(target_epsilon, 1e-3), delta, 1, sensitivity)
    start = (sigma / one_step) ** 2 / (sampling_probability or 1.0) ** 2
    result = _calibrate(lambda steps, interval=None: build(sigma, max(1, int(steps)), interval), target_epsilon,
                        delta, math.log(max(start, 1.0)), rtol, method, increasing=True)
    if result.value < 1:
        raise ValueError(f"even one step of Gaussian(sigma={sigma:g}) exceeds target_epsilon={target_epsilon:g}")
    # The search ran on the integer counts (piecewise constant in x), so Brent's root is a jump: the safe and
    # rejected ends straddle it and are the counts that were checked.
    return dataclasses.replace(result, value=float(int(result.value)), rejected=float(int(result.rejected)))


def calibrate_sampling_rate(target_epsilon: float, delta: float, sigma: float, steps: int, *,
                            sensitivity: float = 1.0, neighboring: str = "add_remove", method: str = "pld",
                            rtol: float = 1e-3) -> Calibration:
    """The largest Poisson sampling rate q <= 1 (to ``rtol``) at which ``steps`` uses of Gaussian(sigma) have
    upper epsilon(delta) <= ``target_epsilon``; see :func:`calibrate_sigma`.  q = 1 if even that meets it."""
    sigma = check.positive("sigma", sigma)
    steps = check.positive_integer("steps", steps)
    target_epsilon, delta, rtol, method, build = _common(target_epsilon, delta, 0.5, sensitivity, neighboring,
                                                         method, rtol)

    def accountant(q: float, interval: float | None = None) -> Accountant:
        return build(sigma, steps, interval, min(q, 1.0))

    full = accountant(1.0).epsilon_result(delta, method=method)
    if full.upper <= target_epsilon:
        return Calibration(1.0, float(full.upper), math.inf, rtol, method, full.certified or full.method == "exact")
    # Amplification: rate q needs about q times the noise of the full batch.
    start = math.log(min(sigma / gaussian_sigma(max(target_epsilon, 1e-3), delta, steps, sensitivity), 0.5))
    return _calibrate(accountant, target_epsilon, delta, start, rtol, method, increasing=True)


def _common(target_epsilon, delta, sampling_probability, sensitivity, neighboring, method, rtol):
    """Validated (target_epsilon, delta, rtol, method) and a builder (sigma, steps, interval[, q]) -> Accountant."""
    target_epsilon = check.non_negative("target_epsilon", target_epsilon)
    delta = check.in_interval("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    sensitivity = check.positive("sensitivity", sensitivity)
    check.choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
    rtol = check.in_interval("rtol", rtol, 1e-10, 0.5)
    if sampling_probability is not None:
        sampling_probability = check.in_interval("sampling_probability", sampling_probability, 0.0, 1.0,
                                                 low_open=True)
    if method is None:
        method = "exact" if sampling_probability is None else "pld"

    def build(sigma: float, steps: int, interval: float | None = None, q: float | None = sampling_probability):
        mechanism = Gaussian(sigma, sensitivity)
        if q is not None:
            mechanism = mechanism.poisson_subsampled(q)
        return Accountant(neighboring, value_discretization_interval=interval).compose(mechanism, steps)

    return target_epsilon, delta, rtol, method, build


def _calibrate(accountant: Callable[[float], Accountant], target_epsilon: float, delta: float, start: float,
               rtol: float, method: str, increasing: bool) -> Calibration:
    """Search with the fast analytic estimate, then certify both ends with ``method``, over x = log(parameter).

    Brent's method on log delta(target_epsilon) - log delta (the 'auto' estimate) gives the crossing;
    the returned parameter is rtol / 4 beyond it on the safe side, moved on until ``method``'s
    *upper* delta at target_epsilon is <= delta (so its upper epsilon(delta) is <= target), and
    the rejected one rtol before it is checked to have ``method``'s *lower* delta above delta.
    ``increasing``: whether delta grows with the parameter (steps, q) or falls (sigma).
    """
    log_delta = math.log(delta)

    def gap(x: float, use: str = "auto", side: str = "value") -> float:
        # The search may fall back to a coarse PLD (its midpoint is estimate enough); the checks use the default grid.
        interval = SEARCH_INTERVAL if use == "auto" else None
        result = accountant(math.exp(x), interval).delta_result(target_epsilon, method=use)
        gap.certified = gap.certified and (result.certified or result.method == "exact")
        return math.log(max(getattr(result, side), 1e-320)) - log_delta
    gap.certified = True

    low, high = _bracket(gap, start, increasing)
    root = brentq(gap, low, high, xtol=rtol / 8, rtol=1e-15)
    toward_safety = -rtol / 4 if increasing else rtol / 4
    safe = root + toward_safety
    gap.certified = True  # only the certifying evaluations count from here
    for _ in range(MAX_GROWTH):
        if gap(safe, method, "upper") <= 0:
            break
        safe += toward_safety
    else:
        raise AccuracyError(f"method={method!r} does not certify the target near the estimated crossing")
    unsafe = safe - 4 * toward_safety
    if not gap(unsafe, method, "lower") > 0:
        raise AccuracyError(f"calibration did not isolate the target to rtol={rtol:g}: method={method!r} "
                            "brackets delta too loosely here (a coarse discretization?); use a larger rtol")
    value = math.exp(safe)
    epsilon_upper = float(accountant(value).epsilon_result(delta, method=method).upper)
    return Calibration(value, epsilon_upper, math.exp(unsafe), rtol, method, gap.certified)


def _bracket(gap: Callable[[float], float], start: float, increasing: bool) -> tuple[float, float]:
    """(low, high) around the root of a monotone ``gap`` (increasing or not), grown geometrically from ``start``."""
    low, high = start - math.log(GROWTH), start + math.log(GROWTH)
    for _ in range(MAX_GROWTH):
        g_low, g_high = gap(low), gap(high)
        if (g_low > 0) != (g_high > 0):
            return low, high
        width = high - low
        if (g_low > 0) == increasing:  # both above the root's level on its rising side: go down
            low, high = low - width, high - width
        else:
            low, high = low + width, high + width
    raise ValueError("no parameter meets the target within e^60 of the start; check target_epsilon and delta")
