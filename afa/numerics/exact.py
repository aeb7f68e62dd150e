"""Closed-form ground truth: exact privacy profiles δ(ε) of a few compositions.

* Composed Gaussian mechanisms: Sommer, Meiser & Mohammadi 2019, Theorem 5
  (equivalently Google DP team 2025, Sec. 3.2.1, eq. (1)).
* n-fold binary randomized response and approximate randomized response:
  Sommer, Meiser & Mohammadi 2019, Example 1 and Appendix A.1.
* Finite discrete privacy losses convolved with a Gaussian one, e.g. Gaussian ×
  randomized response compositions: Zhu, Dong & Wang 2022, Sec. 5, Exp 2.
* One use of Gaussian noise with a data-dependent variance, N(0, σ1²) vs N(Δ, σ2²):
  Zhu, Dong & Wang 2022, App. A, Example 15 (a quadratic privacy loss).

Everything is evaluated in log space and keeps relative accuracy close to machine
precision far into the tails (δ ≈ 1e-300 and below, ε in the thousands).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .. import _validation as check
from .._accurate import LOG_SQRT_2PI, binomial_log_pmf, two_prod, two_sum
from .._lazy import mpmath, special
from ..limits import LOG_NEGLIGIBLE
from .atoms import log_hockey_stick

__all__ = [
    "GaussianSearchPoint",
    "approximate_rr_delta",
    "data_dependent_gaussian_delta",
    "data_dependent_gaussian_log_delta",
    "discrete_gaussian_mixture_delta",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_epsilon_search",
    "gaussian_log_delta",
    "gaussian_mu",
    "randomized_response_delta",
]

_SQRT_HALF_PI = math.sqrt(0.5 * math.pi)
_SQRT_HALF = math.sqrt(0.5)
# Quadrature: Gauss-Legendre nodes on [-1, 1]; integrands are cut where they fall
# below e^-_TAIL of their peak.
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(48)
_HALF_NODES = 0.5 * (_NODES + 1.0)  # the nodes on [0, 1]
_HALF_NODES_SQUARED = _HALF_NODES * _HALF_NODES
_TAIL = 45.0
# Switch from the closed form to quadrature when its cancellation would amplify
# rounding errors by more than this factor.
_MAX_AMPLIFICATION = 8.0
# The lower tail's difference R(x) − R(x + μ) of Mills ratios from their asymptotic series where x is at least
# this (its terms then shrink, by factors (2n + 1) / x² < 1, over the first _SERIES_TERMS), to relative 2^-60.
_SERIES_FROM = 10.0
_SERIES_TERMS = 40
_SERIES_RTOL = 2.0 ** -60
# Elements per block when forming (epsilon × atoms) matrices.
_BLOCK = 1 << 18
# A mixture's Gaussian term is the point mass's (1 - e^y) where Φ(μ - a) <= e^_LOG_POINT_MASS (1 - e^y); terms
# whose bound w Φ(a) is e^_MIXTURE_CUT below the largest are left out while their bounds add up to at most
# e^_LOG_DROPPED_RTOL of the sum.
_LOG_POINT_MASS = math.log(1e-17)
_MIXTURE_CUT = 60.0
_LOG_DROPPED_RTOL = math.log(1e-17)
# Newton's method for ε(δ) stops when a step is below this relative size (quadratic convergence leaves the
# root a few ulps away), or after this many steps (a bisection halves the bracket at each).
_NEWTON_RTOL = 1e-15
# Up to this many values, log δ(ε) is evaluated one by one in Python floats (each a few microseconds;
# the array steps cost some hundreds of microseconds whatever the size).
_SCALAR_LOOP = 16
_NEWTON_STEPS = 2_200
# |log δ − log target| below which a step smaller than _NEWTON_RTOL ends the search; a larger excess with so
# small a step means a slope lost to cancellation (μ = 1e150: log δ ~ −1e298), and bisection goes on.
_CONVERGED_LOG_EXCESS = 1e-9



#: Below this log a delta underflows to 0 (the log of the smallest subnormal double, less a margin).
_LOG_SMALLEST = -746.0


def _epsilon_array(epsilon: ArrayLike) -> tuple[NDArray[np.float64], bool]:
    """``epsilon`` as a float64 array and whether it was a scalar."""
    eps = check.real_array("epsilon", epsilon)
    return eps, eps.ndim == 0


def _result(values: NDArray[np.float64], scalar: bool) -> float | NDArray[np.float64]:
    return float(values) if scalar else values


def _a_double(eps: NDArray, mu: float) -> tuple[NDArray, NDArray]:
    """a = μ/2 − ε/μ as an unevaluated sum hi + lo (lo = 0 where |a| is huge)."""
    with np.errstate(over="ignore"):
        q = eps / mu
    small = (np.abs(q) < 1e290) & (mu < 1e290)
    qs = np.where(small, q, 0.0)
    ms = np.where(small, mu, 1.0)
    p, p_err = two_prod(qs, ms)
    q_err = ((np.where(small, eps, 0.0) - p) - p_err) / ms
    s, s_err = two_sum(0.5 * ms, -qs)
    a_hi, a_lo = two_sum(s, s_err - q_err)
    return np.where(small, a_hi, 0.5 * mu - q), np.where(small, a_lo, 0.0)


# --------------------------------------------------------------------------
# Gaussian privacy loss N(μ²/2, μ²)


def _log_mills(y: NDArray) -> NDArray:
    """log R(y), R(y) = Φ(−y)/φ(y) = sqrt(π/2)·erfcx(y/√2) (y >= 0)."""
    return np.log(_SQRT_HALF_PI * special.erfcx(_SQRT_HALF * y))


def _lower_tail_quadrature(x: NDArray, mu: float) -> NDArray:
    """R(x) − R(x+μ) = ∫_0^∞ exp(−xt − t²/2)·(1 − e^{−μt}) dt for x > 0."""
    length = 2.0 * _TAIL / (np.sqrt(x * x + 2.0 * _TAIL) + x)
    t = 0.5 * length[:, None] * (_NODES + 1.0)
    f = np.exp(-t * (x[:, None] + 0.5 * t)) * -np.expm1(-mu * t)
    return 0.5 * length * (f @ _WEIGHTS)


def _lower_tail_quadrature_scalar(x: float, mu: float) -> float:
    """:func:`_lower_tail_quadrature` at one x, t·(x + t/2) formed from the nodes' fixed parts (fewer array steps)."""
    length = 2.0 * _TAIL / (math.sqrt(x * x + 2.0 * _TAIL) + x)
    f = np.exp(_HALF_NODES * (-length * x) + _HALF_NODES_SQUARED * (-0.5 * length * length))
    f *= np.expm1(_HALF_NODES * (-mu * length))
    return -0.5 * length * float(f @ _WEIGHTS)


def _upper_quadrature_scalar(a: float, mu: float) -> float:
    """:func:`_upper_quadrature` at one a >= 0."""
    cut = math.sqrt(2.0 * _TAIL)
    half = 0.5 * (min(a, cut) + cut)
    u = -cut + half * (_NODES + 1.0)
    f = np.exp(-0.5 * u * u - LOG_SQRT_2PI)
    f *= np.expm1(-mu * (a - u))
    return -half * float(f @ _WEIGHTS)


def _mills_difference_series(x: float, mu: float) -> float | None:
    """R(x) − R(x + μ) for x >= 1, μ > 0 from the asymptotic series R(y) = Σ_n (−1)^n (2n − 1)!! / y^(2n+1);
    None where its terms do not fall below _SERIES_RTOL of the sum within _SERIES_TERMS.

    Term n of the difference is (2n − 1)!! x^−(2n+1) (1 − (1 + μ/x)^−(2n+1)), its bracket formed as −expm1 (no
    cancellation).  R(y) = ∫_0^∞ e^{−yt} e^{−t²/2} dt and the Taylor remainder of e^{−t²/2} after N terms has the
    sign of the next term and at most its size, so the difference's remainder after N terms is at most its
    term N: the sum stops at the first term below _SERIES_RTOL of the sum so far.
    """
    log_ratio = math.log1p(mu / x)
    step = 1.0 / (x * x)
    scale = 1.0 / x  # (2n - 1)!! / x^(2n+1)
    total = 0.0
    for n in range(_SERIES_TERMS):
        term = scale * -math.expm1(-(2 * n + 1) * log_ratio)
        if n and term <= _SERIES_RTOL * total:
            return total
        total += -term if n % 2 else term
        scale *= (2 * n + 1) * step
    return None


def _upper_quadrature(a: NDArray, mu: float) -> NDArray:
    """δ = ∫_{−∞}^{a} φ(u)·(1 − e^{−μ(a−u)}) du for a >= 0."""
    cut = math.sqrt(2.0 * _TAIL)
    top = np.minimum(a, cut)
    u = -cut + 0.5 * (top + cut)[:, None] * (_NODES + 1.0)
    f = np.exp(-0.5 * u * u - LOG_SQRT_2PI) * -np.expm1(-mu * (a[:, None] - u))
    return 0.5 * (top + cut) * (f @ _WEIGHTS)


def _gaussian_log_delta_parts(eps: NDArray, mu: float) -> tuple[NDArray, NDArray]:
    """log δ(ε) = hi + lo for the privacy loss N(μ²/2, μ²), Sommer, Meiser & Mohammadi 2019, Thm 5.

    With a = −ε/μ + μ/2 and b = a − μ one has e^ε φ(b) = φ(a), hence
    δ = Φ(a) − φ(a)·R(−b) = φ(a)·[R(−a) − R(−b)] with the Mills ratio R.
    For a < 0, hi = −a²/2 exactly (a in double-double) and lo = log(φ(a)e^{a²/2}
    ·[R(−a) − R(−b)]); for a >= 0, hi = 0 and lo = log Φ(a) + log(1 − e^z) with
    e^z = e^ε Φ(b)/Φ(a).  Where the difference cancels, it is replaced by a
    cancellation-free quadrature of the hockey-stick integral.
    """
    a_hi, a_lo = _a_double(eps, mu)
    hi = np.zeros_like(a_hi)
    lo = np.empty_like(a_hi)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        neg = a_hi < 0
        a, c = a_hi[neg], a_lo[neg]
        moderate = a > -1e150
        am = np.where(moderate, a, 0.0)
        sq, sq_err = two_prod(am, am)
        hi[neg] = np.where(moderate, -0.5 * sq, -np.inf)
        x = -a
        rx = special.erfcx(_SQRT_HALF * x)
        diff = rx - special.erfcx(_SQRT_HALF * (x + mu))
        quad = (_MAX_AMPLIFICATION * diff < rx) & moderate
        diff[quad] = _lower_tail_quadrature(x[quad], mu) / _SQRT_HALF_PI
        lo[neg] = np.where(
            moderate,
            (-0.5 * sq_err - am * c) - LOG_SQRT_2PI + np.log(_SQRT_HALF_PI * diff),
            0.0,
        )

        pos = ~neg
        a, c, e = a_hi[pos], a_lo[pos], eps[pos]
        b = (a - mu) + c
        log_phi_a = special.log_ndtr(a)
        tail = b <= 0
        # log(e^ε Φ(b)) = log(φ(a) R(−b)) for b <= 0, else ε + log Φ(b)
        log_second = np.where(
            tail,
            -0.5 * a * a - a * c - LOG_SQRT_2PI + _log_mills(np.where(tail, -b, 0.0)),
            e + special.log_ndtr(b),
        )
        z = np.minimum(log_second - log_phi_a, 0.0)
        # magnitude of the terms cancelling in z: its rounding error is ~ulp(size)
        size = np.where(tail, 0.5 * a * a + 1.0, np.abs(e))
        size = size + np.abs(log_second) + np.abs(log_phi_a)
        one_minus = -np.expm1(z)
        quad = size * np.exp(z) > _MAX_AMPLIFICATION * one_minus
        value = log_phi_a + np.log(one_minus)
        value[quad] = np.log(_upper_quadrature(a[quad], mu))
        lo[pos] = np.minimum(value, 0.0)
    return hi, lo


def _log_or_minus_inf(x: float) -> float:
    return math.log(x) if x > 0.0 else -math.inf


def _gaussian_log_delta_scalar(eps: float, mu: float) -> float:
    """log δ(ε) of N(μ²/2, μ²) for one finite ε and μ > 0 (:func:`_gaussian_log_delta_and_slope`'s first)."""
    return _gaussian_log_delta_and_slope(eps, mu)[0]


def _gaussian_log_delta_and_slope(eps: float, mu: float) -> tuple[float, float]:
    """(log δ(ε), log(−dδ/dε)) of N(μ²/2, μ²) for one finite ε and μ > 0: :func:`_gaussian_log_delta_parts` in
    Python floats, with the log of the second term e^ε Φ(b) = −dδ/dε that the closed form forms on the way.

    The same branches and the same double-double steps, with Python's float arithmetic and scalar special
    functions instead of array operations (a few microseconds instead of a few hundred); where the closed form's
    difference cancels, the lower tail's difference comes from the Mills ratio's asymptotic series for x >= 10
    (:func:`_mills_difference_series`), else, like the upper tail's, from the one-point quadratures.  The second
    term is as accurate as its pieces' rounding (about b² ulps in its log), enough for the search's steps and
    for the tangent bracket, which bounds that rounding.
    """
    q = eps / mu
    if abs(q) < 1e290 and mu < 1e290:
        p, p_err = two_prod(q, mu)
        q_err = ((eps - p) - p_err) / mu
        s, s_err = two_sum(0.5 * mu, -q)
        a, c = two_sum(s, s_err - q_err)
    else:
        a, c = 0.5 * mu - q, 0.0
    if a < 0:
        if not a > -1e150:
            return -math.inf, -math.inf
        sq, sq_err = two_prod(a, a)
        x = -a
        rx = float(special.erfcx(_SQRT_HALF * x))
        r_second = float(special.erfcx(_SQRT_HALF * (x + mu)))
        diff = rx - r_second
        if _MAX_AMPLIFICATION * diff < rx:
            series = _mills_difference_series(float(x), mu) if x >= _SERIES_FROM else None
            difference = series if series is not None else _lower_tail_quadrature_scalar(float(x), mu)
            diff = difference / _SQRT_HALF_PI
        log_phi = (-0.5 * sq_err - a * c) - LOG_SQRT_2PI  # log φ(a) + a²/2 (a²/2 in double-double)
        value = float(-0.5 * sq + (log_phi + _log_or_minus_inf(_SQRT_HALF_PI * diff)))
        # e^ε Φ(b) = φ(a) R(x + μ)
        return value, float(-0.5 * sq + (log_phi + _log_or_minus_inf(_SQRT_HALF_PI * r_second)))
    b = (a - mu) + c
    log_phi_a = float(special.log_ndtr(a))
    if b <= 0:  # log(e^ε Φ(b)) = log(φ(a) R(−b))
        log_second = (-0.5 * a * a - a * c - LOG_SQRT_2PI
                      + math.log(_SQRT_HALF_PI * float(special.erfcx(-_SQRT_HALF * b))))
        size = 0.5 * a * a + 1.0
    else:
        log_second = eps + float(special.log_ndtr(b))
        size = abs(eps)
    z = min(log_second - log_phi_a, 0.0)
    size += abs(log_second) + abs(log_phi_a)
    one_minus = -math.expm1(z)
    if size * math.exp(z) > _MAX_AMPLIFICATION * one_minus:
        value = _log_or_minus_inf(_upper_quadrature_scalar(float(a), mu))
    else:
        value = log_phi_a + math.log(one_minus)
    return min(value, 0.0), float(log_second)


def gaussian_mu(
    sigmas: ArrayLike,
    counts: ArrayLike | None = None,
    sensitivities: ArrayLike | None = None,
) -> float:
    """μ = sqrt(Σ_i k_i Δ_i² / σ_i²) of a composition of Gaussian mechanisms.

    Parameters
    ----------
    sigmas : array_like
        The noise standard deviations σ_i: a number or a non-empty 1-d array of finite numbers > 0.
    counts : array_like, optional
        The uses k_i, one integer >= 1 per sigma (floats with an integral value are accepted); default 1
        each.  They may be huge integers.
    sensitivities : array_like, optional
        The sensitivities Δ_i, one finite number >= 0 per sigma; default 1 each.

    Returns
    -------
    float
        μ >= 0 (0.0 when every sensitivity is 0), computed with the largest Δ_i/σ_i factored out so that
        tiny ratios do not underflow.

    Raises
    ------
    ValueError
        ``sigmas`` empty, not 1-d or not > 0; ``counts`` or ``sensitivities`` of another shape than
        ``sigmas`` or out of range; a non-finite value.
    TypeError
        A value that is not a real number, or a count that is not an integer.

    Notes
    -----
    The composed privacy loss is N(μ²/2, μ²) (Sommer, Meiser & Mohammadi 2019, Theorem 5 and its proof).

    Examples
    --------
    >>> from afa import exact
    >>> exact.gaussian_mu(10.0, counts=100)
    1.0
    >>> round(exact.gaussian_mu([1.0, 2.0], counts=[4, 4]), 6)
    2.236068
    """
    rule = "a non-empty 1-d array of finite numbers > 0"
    sig = np.atleast_1d(check.real_array("sigmas", sigmas))
    if sig.ndim != 1 or sig.size == 0 or not np.all(sig > 0):
        raise ValueError(f"sigmas must be {rule}, got {sigmas!r}")
    if counts is None:
        k = np.ones_like(sig)
    else:
        raw = np.atleast_1d(np.asarray(counts, dtype=object))
        if raw.shape != sig.shape:
            raise ValueError(f"counts must have one entry per sigma ({sig.size}), got {counts!r}")
        k = np.array([check.positive_integer("counts", v) for v in raw], dtype=np.float64)
    if sensitivities is None:
        sens = np.ones_like(sig)
    else:
        rule = f"finite numbers >= 0, one per sigma ({sig.size})"
        sens = np.atleast_1d(check.real_array("sensitivities", sensitivities))
        if sens.shape != sig.shape or not np.all(sens >= 0):
            raise ValueError(f"sensitivities must be {rule}, got {sensitivities!r}")
    ratio = sens / sig
    scale = ratio.max()
    if scale == 0.0:
        return 0.0
    return float(scale * math.sqrt(float(np.sum(k * (ratio / scale) ** 2))))


def gaussian_log_delta(epsilon: ArrayLike, mu: float) -> float | NDArray[np.float64]:
    """log δ(ε) of the privacy loss N(μ²/2, μ²) (Sommer, Meiser & Mohammadi 2019, Theorem 5), any real ε.

    Parameters
    ----------
    epsilon : float or array_like
        A finite real number, or an array of them of any shape.
    mu : float
        The Gaussian parameter μ > 0 (:func:`gaussian_mu` of a composition).

    Returns
    -------
    float or ndarray
        log δ(ε): a float for a number, an array of ``epsilon``'s shape for an array.

    Raises
    ------
    ValueError
        ``mu`` not > 0, or a non-finite value.
    TypeError
        An argument that is not real numbers.

    Notes
    -----
    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), evaluated in log space: relative
    error below 1e-14 in δ for δ >= 1e-300 (against 50-digit mpmath), and a
    logarithm accurate to a few ulps far below that.

    Examples
    --------
    >>> from afa import exact
    >>> round(exact.gaussian_log_delta(1.0, 1.0), 6)
    -2.064066
    >>> round(exact.gaussian_log_delta(1000.0, 1.0), 2)  # δ = e^-499514.86 underflows; its log does not
    -499514.86
    """
    mu = check.positive("mu", mu)
    if type(epsilon) is float and math.isfinite(epsilon):  # one Python float: no array to build
        return _gaussian_log_delta_scalar(epsilon, mu)
    eps, scalar = _epsilon_array(epsilon)
    if scalar:
        return _gaussian_log_delta_scalar(float(eps), mu)
    if eps.size <= _SCALAR_LOOP:  # a few values: cheaper one by one than through the array steps
        return np.array([_gaussian_log_delta_scalar(e, mu) for e in eps.ravel().tolist()]).reshape(eps.shape)
    hi, lo = _gaussian_log_delta_parts(eps, mu)
    return _result(hi + lo, scalar)


def gaussian_delta(epsilon: ArrayLike, mu: float) -> float | NDArray[np.float64]:
    """δ(ε) of the privacy loss N(μ²/2, μ²) (Sommer, Meiser & Mohammadi 2019, Theorem 5), any real ε.

    Parameters
    ----------
    epsilon : float or array_like
        A finite real number, or an array of them of any shape.
    mu : float
        The Gaussian parameter μ > 0 (:func:`gaussian_mu` of a composition).

    Returns
    -------
    float or ndarray
        δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), from :func:`gaussian_log_delta`: a float for a number, an
        array of ``epsilon``'s shape for an array.

    Raises
    ------
    ValueError
        ``mu`` not > 0, or a non-finite value.
    TypeError
        An argument that is not real numbers.

    Examples
    --------
    100 uses of the Gaussian mechanism with σ = 10 have μ = 1:

    >>> from afa import exact
    >>> round(exact.gaussian_delta(1.0, 1.0), 6)
    0.126937
    >>> exact.gaussian_delta([0.0, 1.0, 2.0], 1.0).round(6)
    array([0.382925, 0.126937, 0.020924])
    """
    mu = check.positive("mu", mu)
    eps, scalar = _epsilon_array(epsilon)
    hi, lo = _gaussian_log_delta_parts(eps, mu)
    with np.errstate(over="ignore", invalid="ignore"):
        values = np.where(hi + lo < _LOG_SMALLEST, 0.0, np.exp(hi) * np.exp(lo))
    return _result(values, scalar)


@dataclass(frozen=True)
class GaussianSearchPoint:
    """Where the search for ε(δ) of N(μ²/2, μ²) stopped (:func:`gaussian_epsilon_search`).

    Attributes
    ----------
    estimate : float
        The root: the search's (Halley) step from ``point``, or ``point`` itself when it solved exactly.
    point : float
        The last ε at which log δ was evaluated (nan when the search evaluated none).
    log_delta : float
        log δ(``point``) from the closed form.
    log_slope : float
        log(−d log δ / dε) at ``point``; nan when the search ended by bisection (no usable slope).

    Examples
    --------
    >>> import math
    >>> from afa import exact
    >>> found = exact.gaussian_epsilon_search(1e-5, 1.0, resolved=1e-9)
    >>> round(found.estimate, 4), abs(found.log_delta - math.log(1e-5)) <= 1e-9
    (4.3772, True)
    """

    estimate: float
    point: float
    log_delta: float
    log_slope: float


def gaussian_epsilon(delta: float, mu: float) -> float:
    """Smallest ε >= 0 with δ(ε) <= ``delta`` for the privacy loss N(μ²/2, μ²).

    Parameters
    ----------
    delta : float
        A number in (0, 1).
    mu : float
        The Gaussian parameter μ > 0.

    Returns
    -------
    float
        The root of log δ(ε) = log(delta) (Sommer, Meiser & Mohammadi 2019, Theorem 5), found by Halley's
        method on log δ safeguarded by bisection, to a few ulps of ε beyond the error of the closed form
        itself; 0.0 if δ(0) <= delta.

    Raises
    ------
    ValueError
        ``delta`` outside (0, 1), ``mu`` not > 0, or ``mu`` so large that ε(δ) exceeds the float range.
    TypeError
        An argument that is not a real number.

    Notes
    -----
    d log δ / dε = −e^ε Φ(−μ/2 − ε/μ) / δ(ε) (the derivative of Theorem 5's formula; the φ terms cancel).
    With x = ε/μ − μ/2, δ = Φ(−x)(1 − R(x + μ)/R(x)) (R the Mills ratio): the search starts where that is
    ``delta`` with the ratio taken at the upper bound ε at which Φ(−x) = ``delta`` (δ(ε) <= Φ(−x)), and keeps
    a bracket [lower, upper] of the root: a step leaving it is replaced by the bracket's midpoint.

    Examples
    --------
    >>> from afa import exact
    >>> round(exact.gaussian_epsilon(1e-5, 1.0), 4)
    4.3772
    """
    return gaussian_epsilon_search(delta, mu).estimate


def _first_guess(delta: float, mu: float, tail: float, upper: float) -> float:
    """A start for the search of ε(δ) in (0, ``upper``]: with x = ε/μ − μ/2, δ = Φ(−x) (1 − R(x + μ)/R(x))
    (R the Mills ratio), the ratio taken at ``tail`` = x of ``upper`` (where Φ(−x) = δ) and Φ(−x) solved."""
    if tail <= 0:
        return upper
    ratio = float(special.erfcx(_SQRT_HALF * (tail + mu))) / float(special.erfcx(_SQRT_HALF * tail))
    level = delta / (1.0 - ratio) if ratio < 1.0 else math.inf
    if not level < 0.5:
        return upper
    guess = mu * (0.5 * mu - float(special.ndtri(level)))
    return guess if 0.0 < guess < upper else upper


def gaussian_epsilon_search(delta: float, mu: float, resolved: float = 0.0) -> GaussianSearchPoint:
    """:func:`gaussian_epsilon`'s search, with the last point it evaluated.

    Parameters
    ----------
    delta, mu : float
        As for :func:`gaussian_epsilon`.
    resolved : float, default 0.0
        Stop at the first evaluated point where log δ is within this of log ``delta`` (the step from it
        is then the estimate); 0 searches until the step is below a few ulps of ε.

    Returns
    -------
    GaussianSearchPoint
        The root and the last evaluated point with its log δ and log slope (estimate 0.0 and point nan
        when δ(0) <= ``delta``).

    Raises
    ------
    ValueError, TypeError
        As :func:`gaussian_epsilon`; ``resolved`` not a number >= 0.

    Notes
    -----
    Each step is Halley's (Newton's with the second derivative (log δ)'' = −s − s² + φ(a)/(μ δ), s the slope of
    −log δ and a = μ/2 − ε/μ), kept inside the bracket of the root like :func:`gaussian_epsilon`'s.

    Examples
    --------
    >>> from afa import exact
    >>> found = exact.gaussian_epsilon_search(1e-5, 1.0)
    >>> found.estimate == exact.gaussian_epsilon(1e-5, 1.0), round(found.point, 4)
    (True, 4.3772)
    """
    delta = check.in_interval("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    mu = check.positive("mu", mu)
    resolved = check.non_negative("resolved", resolved)
    target = math.log(delta)
    if _log_or_minus_inf(math.erf(mu / (2 * math.sqrt(2.0)))) <= target:  # δ(0) = Φ(μ/2) − Φ(−μ/2)
        return GaussianSearchPoint(0.0, math.nan, math.nan, math.nan)
    # δ(ε) <= Φ(a): the ε at which Φ(a) = delta is an upper bound.
    tail = -float(special.ndtri(delta))
    upper = max(mu * (0.5 * mu + tail), mu)
    lower, x = 0.0, _first_guess(delta, mu, tail, upper)
    log_delta, log_second = _gaussian_log_delta_and_slope(x, mu)
    if x < upper and log_delta > target:
        lower = x
    else:
        upper = x
        while log_delta > target:
            upper *= 2.0
            log_delta, log_second = _gaussian_log_delta_and_slope(upper, mu) if math.isfinite(upper) \
                else (-math.inf, -math.inf)
        if not math.isfinite(upper):
            raise ValueError(f"mu = {mu!r} is too large: ε(δ = {delta!r}) exceeds the float range")
        x = upper
    for _ in range(_NEWTON_STEPS):
        excess = log_delta - target
        log_slope = log_second - log_delta  # log(−d log δ / dε)
        if excess == 0.0:
            return GaussianSearchPoint(x, x, log_delta, log_slope)
        if excess > 0.0:
            lower = x
        else:
            upper = x
        slope = math.exp(max(min(log_slope, 700.0), -700.0))
        step = excess / slope
        # Halley's correction: (log δ)'' = −s − s² + φ(a)/(μ δ) with s = −(log δ)' (its φ(b) e^ε terms are φ(a))
        a = 0.5 * mu - x / mu
        curvature = math.exp(max(min(-0.5 * a * a - LOG_SQRT_2PI - math.log(mu) - log_delta, 700.0), -700.0)) \
            - slope - slope * slope
        denominator = 1.0 - 0.5 * step * curvature / slope
        if denominator > 0.5:
            step /= denominator
        after = x + step
        if abs(excess) <= resolved and lower <= after <= upper:
            return GaussianSearchPoint(after, x, log_delta, log_slope)
        if abs(after - x) <= _NEWTON_RTOL * abs(after) and abs(excess) <= _CONVERGED_LOG_EXCESS \
                and lower <= after <= upper:
            # converged (at the root's ulps a step can land on the bracket's end it came from)
            return GaussianSearchPoint(after, x, log_delta, log_slope)
        if not lower < after < upper:  # off the bracket (or not a number): bisect
            after = lower + 0.5 * (upper - lower)
        if abs(after - x) <= _NEWTON_RTOL * abs(after) or not lower < after < upper:
            return GaussianSearchPoint(after if lower <= after <= upper else x, x, log_delta, math.nan)
        x = after
        log_delta, log_second = _gaussian_log_delta_and_slope(x, mu)
    return GaussianSearchPoint(x, x, log_delta, math.nan)


# --------------------------------------------------------------------------
# discrete privacy losses


def mixture_log_delta(
    eps: NDArray, losses: NDArray, log_weights: NDArray, mu: float
) -> NDArray:
    """log Σ_j w_j δ_μ(ε − ℓ_j): δ_μ the Gaussian N(μ²/2, μ²) profile, or for μ = 0
    the point-mass profile (1 − e^{ε−ℓ})_+ (Google DP team 2025, PLD supplement Sec. 2 and 5.1).

    Inputs are not validated (the engines pass checked arrays); ``eps`` is an array.  With
    y = ε − ℓ and a = μ/2 − y/μ, δ_μ(y) = Φ(a) − e^y Φ(a − μ) (Sommer, Meiser & Mohammadi 2019,
    Thm 5) is formed in closed form only where it matters: where Φ(μ − a) <= 1e-17 (1 − e^y) the
    term is the point mass's (1 − e^y) to that relative accuracy, and terms whose bound w Φ(a)
    is below e^-_MIXTURE_CUT of the largest such bound are left out, unless what they add up to
    could exceed 1e-17 of the sum (then every term is formed).  A mixture over many atoms then
    costs the closed form of the few next to ε.
    """
    keep = log_weights > LOG_NEGLIGIBLE
    losses, log_weights = losses[keep], log_weights[keep]
    if mu == 0.0 or losses.size == 0:
        return log_hockey_stick(losses, log_weights, eps)
    flat = eps.ravel()
    out = np.empty(flat.shape)
    rows = max(1, _BLOCK // losses.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        for start in range(0, flat.size, rows):
            gap = flat[start:start + rows, None] - losses[None, :]
            a = mu / 2 - gap / mu
            log_point = np.log(-np.expm1(np.minimum(gap, 0.0)))  # -inf for y >= 0
            point = special.log_ndtr(mu - a) <= _LOG_POINT_MASS + log_point
            bound = log_weights + special.log_ndtr(a)
            top = np.max(np.where(point, log_weights + log_point, bound), axis=1, keepdims=True)
            closed = ~point & (bound >= top - _MIXTURE_CUT)
            left_out = ~point & ~closed
            terms = np.where(point, log_weights + log_point, -np.inf)
            if np.any(closed):
                rows_c, cols_c = np.nonzero(closed)
                hi, lo = _gaussian_log_delta_parts(gap[rows_c, cols_c], mu)
                terms[rows_c, cols_c] = hi + lo + log_weights[cols_c]
            value = special.logsumexp(terms, axis=1)
            dropped = special.logsumexp(np.where(left_out, bound, -np.inf), axis=1)
            redo = np.flatnonzero(dropped > value + _LOG_DROPPED_RTOL)
            if redo.size:
                hi, lo = _gaussian_log_delta_parts(gap[redo], mu)
                value[redo] = special.logsumexp(hi + lo + log_weights, axis=1)
            out[start:start + rows] = value
    return out.reshape(eps.shape)


def _binomial_rr_delta(
    eps: NDArray, n: int, xi: float, p: float, q: float, log_p: float, log_q: float,
    log_finite: float = 0.0,
) -> NDArray:
    """e^{log_finite}·δ(ε) of n-fold binary RR: loss ±ξ, +ξ w.p. p (Sommer, Meiser & Mohammadi 2019, App. A.1)."""
    # Chernoff + Pinsker: log P(J = j) <= 0.09 − 2(j − np)²/n < LOG_NEGLIGIBLE outside.
    half_width = math.sqrt(0.5 * (0.09 - LOG_NEGLIGIBLE) * n) + 1.0
    lo = max(0, math.floor(n * p - half_width))
    hi = min(n, math.ceil(n * p + half_width))
    j = np.arange(lo, hi + 1, dtype=np.float64)
    log_w = binomial_log_pmf(j, n, p, q, log_p, log_q) + log_finite
    log_delta = mixture_log_delta(eps, xi * (2.0 * j - n), log_w, 0.0)
    return np.exp(np.minimum(log_delta, log_finite))


def randomized_response_delta(
    epsilon: ArrayLike, p: float, n: int = 1
) -> float | NDArray[np.float64]:
    """Exact δ(ε) of n-fold binary randomized response (true bit reported w.p. p).

    Parameters
    ----------
    epsilon : float or array_like
        A finite real number, or an array of them of any shape.
    p : float
        The probability of reporting the true bit, in [0.5, 1).
    n : int, default 1
        The number of uses, an integer >= 1.

    Returns
    -------
    float or ndarray
        δ(ε): a float for a number, an array of ``epsilon``'s shape for an array.

    Raises
    ------
    ValueError
        ``p`` outside [0.5, 1), ``n`` < 1, or a non-finite value.
    TypeError
        An argument that is not real numbers, or an ``n`` that is not an integer.

    Notes
    -----
    The privacy loss is ξ(2J − n), ξ = log(p/(1−p)), J ~ Binomial(n, p), so
    δ(ε) = Σ_{ξ(2j−n) > ε} C(n,j) p^j (1−p)^{n−j} (1 − e^{ε−ξ(2j−n)})
    (Sommer, Meiser & Mohammadi 2019, Example 1 / App. A.1 with δ0 = 0).  p = 1/2 gives (1 − e^ε)_+.

    Examples
    --------
    >>> from afa import exact
    >>> round(exact.randomized_response_delta(1.0, 0.6, n=20), 6)
    0.441944
    >>> exact.randomized_response_delta([0.0, 0.2, 0.5], 0.6).round(6)
    array([0.2     , 0.111439, 0.      ])
    """
    p = check.in_interval("p", p, 0.5, 1.0, high_open=True)
    n = check.positive_integer("n", n)
    eps, scalar = _epsilon_array(epsilon)
    q = 1.0 - p
    xi = math.log1p((2.0 * p - 1.0) / q)
    delta = _binomial_rr_delta(eps, n, xi, p, q, math.log(p), math.log(q))
    return _result(delta, scalar)


def approximate_rr_delta(
    epsilon: ArrayLike, xi: float, delta0: float, n: int = 1
) -> float | NDArray[np.float64]:
    """Exact δ(ε) of n-fold approximate randomized response, the worst-case
    (ξ, δ0)-DP mechanism (Sommer, Meiser & Mohammadi 2019, Example 1 and App. A.1).

    Parameters
    ----------
    epsilon : float or array_like
        A finite real number, or an array of them of any shape.
    xi : float
        The mechanism's ε, ξ >= 0.
    delta0 : float
        The mechanism's δ, in [0, 1].
    n : int, default 1
        The number of uses, an integer >= 1.

    Returns
    -------
    float or ndarray
        δ(ε), at most 1: a float for a number, an array of ``epsilon``'s shape for an array.

    Raises
    ------
    ValueError
        ``xi`` < 0, ``delta0`` outside [0, 1], ``n`` < 1, or a non-finite value.
    TypeError
        An argument that is not real numbers, or an ``n`` that is not an integer.

    Notes
    -----
    δ(ε) = 1 − (1−δ0)^n + (1−δ0)^n Σ_{k: ξ(2k−n) > ε} C(n,k) p^k (1−p)^{n−k}
    (1 − e^{ε−ξ(2k−n)}) with p = e^ξ/(1+e^ξ).  (The paper prints the weight as
    e^{ξ(n−k)}/(1+e^ξ)^n; e^{ξk}/(1+e^ξ)^n is the one that matches its own
    distribution (12)-(16) and the n = 1 mechanism.)

    Examples
    --------
    >>> from afa import exact
    >>> exact.approximate_rr_delta([0.0, 0.5], 0.5, 1e-6, n=3).round(6)
    array([0.360034, 0.152454])
    >>> x = exact.approximate_rr_delta(2.0, 0.5, 1e-6, n=3)  # ε > nξ: only 1 − (1 − δ0)^n is left
    >>> import math
    >>> math.isclose(x, -math.expm1(3 * math.log1p(-1e-6)), rel_tol=1e-12)
    True
    """
    xi = check.non_negative("xi", xi)
    delta0 = check.in_interval("delta0", delta0, 0.0, 1.0)
    n = check.positive_integer("n", n)
    eps, scalar = _epsilon_array(epsilon)
    log_finite = n * math.log1p(-delta0) if delta0 < 1.0 else -math.inf
    log_p = -math.log1p(math.exp(-xi))
    log_q = log_p - xi
    finite = _binomial_rr_delta(
        eps, n, xi, math.exp(log_p), math.exp(log_q), log_p, log_q, log_finite
    )
    return _result(np.minimum(-math.expm1(log_finite) + finite, 1.0), scalar)


def discrete_gaussian_mixture_delta(
    epsilon: ArrayLike,
    losses: ArrayLike,
    weights: ArrayLike,
    inf_mass: float = 0.0,
    mu: float = 0.0,
) -> float | NDArray[np.float64]:
    """Exact δ(ε) of a finite discrete privacy loss convolved with N(μ²/2, μ²).

    Parameters
    ----------
    epsilon : float or array_like
        A finite real number, or an array of them of any shape.
    losses : array_like
        The atoms ℓ_j of the discrete loss: a number or a 1-d array of finite numbers.
    weights : array_like
        Their probabilities w_j, finite numbers >= 0, one per loss.
    inf_mass : float, default 0.0
        The probability of the loss +∞, in [0, 1]; ``weights`` and ``inf_mass`` must sum to 1 (within 1e-9).
    mu : float, default 0.0
        The Gaussian parameter μ >= 0 (0: no Gaussian).

    Returns
    -------
    float or ndarray
        δ(ε), at most 1: a float for a number, an array of ``epsilon``'s shape for an array.

    Raises
    ------
    ValueError
        ``losses`` not 1-d, ``weights`` of another shape or negative, weights and ``inf_mass`` not summing
        to 1, ``inf_mass`` outside [0, 1], ``mu`` < 0, or a non-finite value.
    TypeError
        An argument that is not real numbers.

    Notes
    -----
    The discrete part has atoms ``losses`` with probabilities ``weights`` plus
    probability ``inf_mass`` at +∞; δ(ε) = inf_mass + Σ_j w_j δ_μ(ε − ℓ_j) with
    δ_μ the Gaussian profile (Sommer, Meiser & Mohammadi 2019, Thm 5) or, for μ = 0, (1 − e^{ε−ℓ_j})_+.
    E.g. Gaussian × randomized response compositions (Zhu, Dong & Wang 2022, Sec. 5, Exp 2).

    Examples
    --------
    >>> from afa import exact
    >>> round(exact.discrete_gaussian_mixture_delta(1.0, [-0.5, 0.5], [0.5, 0.5], mu=1.0), 6)
    0.147559
    >>> exact.discrete_gaussian_mixture_delta(1.0, [-0.5, 0.5], [0.25, 0.25], inf_mass=0.5)
    0.5
    """
    mu = check.non_negative("mu", mu)
    inf_mass = check.in_interval("inf_mass", inf_mass, 0.0, 1.0)
    rule = "a 1-d array of finite numbers"
    ell = np.atleast_1d(check.real_array("losses", losses))
    if ell.ndim != 1:
        raise ValueError(f"losses must be {rule}, got {losses!r}")
    rule = f"finite numbers >= 0, one per loss ({ell.size})"
    w = np.atleast_1d(check.real_array("weights", weights))
    if w.shape != ell.shape or not np.all(w >= 0):
        raise ValueError(f"weights must be {rule}, got {weights!r}")
    total = math.fsum(w.tolist()) + inf_mass
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"weights and inf_mass must sum to 1 (within 1e-9), got {total!r}")
    eps, scalar = _epsilon_array(epsilon)
    with np.errstate(divide="ignore"):
        log_w = np.log(w)
    finite = np.exp(mixture_log_delta(eps, ell, log_w, mu))
    return _result(np.minimum(inf_mass + finite, 1.0), scalar)


# --------------------------------------------------------------------------
# Gaussian noise with a data-dependent variance (Zhu, Dong & Wang 2022, App. A, Example 15)

_DDG_DIRECTIONS = ("remove", "add")
# Fallback quadrature of one piece: composite Gauss-Legendre, panels doubling in width
# from the scale of the factor 1 - e^{-g} and then uniform, on the range where the
# Gaussian weight is above e^-_DDG_TAIL of its peak.
_DDG_GEOMETRIC, _DDG_UNIFORM = 12, 8
_DDG_NODES, _DDG_WEIGHTS = np.polynomial.legendre.leggauss(24)
_DDG_TAIL = 50.0
# Keep a piece's closed form while its estimated relative error is below this many
# rounding units; beyond, integrate the (positive) hockey-stick integrand instead.
_DDG_MAX_AMPLIFICATION = 16.0


def log_normal_mass(low: NDArray | float, high: NDArray | float) -> tuple[NDArray, NDArray]:
    """log(Φ(high) − Φ(low)) for low <= high (±inf allowed) and the error its difference adds.

    The second value counts rounding units of the result's relative error beyond those of
    log Φ itself: the difference of two tails amplifies their absolute errors (about one
    unit of |log Φ|) by e^d / (1 − e^d), d the log ratio of the two.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        upper = low > 0  # both ends in the upper half: work with upper tails
        lower = high < 0
        big = np.where(upper, special.log_ndtr(-low), special.log_ndtr(high))
        small = np.where(upper, special.log_ndtr(-high), special.log_ndtr(low))
        d = np.minimum(small - big, 0.0)
        ratio = np.exp(d)
        one_minus = -np.expm1(d) + 0.0
        tail_value = big + np.log(one_minus)
        tail_cond = np.where(ratio > 0, (1.0 + np.abs(big) + np.abs(small)) * ratio / one_minus, 0.0)
        left, right = special.log_ndtr(low), special.log_ndtr(-high)
        outside = np.logaddexp(left, right)  # log(Φ(low) + Φ(−high)) < 0 when low < 0 < high
        mid_value = np.log(-np.expm1(outside))
        weight = np.exp(outside)
        mid_cond = (1.0 + np.where(np.isfinite(left), np.abs(left), 0.0)
                          + np.where(np.isfinite(right), np.abs(right), 0.0)) * weight / (1.0 - weight)
        tail = upper | lower
        return np.where(tail, tail_value, mid_value), np.where(tail, tail_cond, mid_cond)


def _ddg_piece_quadrature(root: NDArray, direction: NDArray, length: NDArray, gamma: float,
                          half_width: NDArray) -> NDArray:
    """log ∫ φ(z)(1 − e^{−g(z)}) dz over one piece of A = {g > 0}, g = L − ε, by quadrature.

    The piece runs from the root z = ``root`` over z = root + direction·u, 0 <= u <= ``length``;
    there g = γu² + 2|γ|·half_width·u >= 0 (a tail beyond a root for γ > 0, the half of the
    interval between a root and the vertex for γ < 0).  The integrand is positive: no
    cancellation, so the result is accurate relative to the piece.  Integrated over the range
    where the Gaussian weight φ(root + direction·u) is above e^{−_DDG_TAIL} of its peak (the
    factor 1 − e^{−g} increases with u, so nothing below the peak's side is lost).
    """
    kappa = -direction * root  # log φ(root + direction u) = log φ(root) + κu − u²/2
    peak = np.clip(kappa, 0.0, length)
    spread = np.sqrt((peak - kappa) ** 2 + 2.0 * _DDG_TAIL)
    with np.errstate(invalid="ignore", divide="ignore"):
        high = np.where(kappa < 0, 2.0 * _DDG_TAIL / (spread - kappa), kappa + spread)
        beyond = np.maximum(kappa - length, 0.0)
        low = np.where(kappa > length, length - 2.0 * _DDG_TAIL / (spread + beyond), kappa - spread)
    low, high = np.maximum(low, 0.0), np.minimum(high, length)
    # g reaches 1 within about `scale` of the root: panels double in width from there on
    # (zero-width panels past `high` add nothing), then uniform panels cover the rest.
    scale = 1.0 / (2.0 * abs(gamma) * half_width + math.sqrt(abs(gamma)))
    span = high - low
    geometric = np.minimum(span[:, None], scale[:, None] * (2.0 ** np.arange(_DDG_GEOMETRIC + 1) - 1.0))
    uniform = geometric[:, -1:] + (span - geometric[:, -1])[:, None] * np.arange(1, _DDG_UNIFORM + 1) / _DDG_UNIFORM
    edges = low[:, None] + np.concatenate((geometric, uniform), axis=1)
    half = 0.5 * np.diff(edges, axis=1)
    u = (edges[:, :-1, None] + half[:, :, None] * (_DDG_NODES + 1.0)).reshape(root.size, -1)
    weights = (half[:, :, None] * _DDG_WEIGHTS).reshape(root.size, -1)
    log_weight = -0.5 * (u - peak[:, None]) * (u + peak[:, None] - 2.0 * kappa[:, None])
    factor = -np.expm1(-(gamma * u + 2.0 * abs(gamma) * half_width[:, None]) * u)
    total = np.sum(weights * np.exp(log_weight) * factor, axis=1)
    z_peak = root + direction * peak
    with np.errstate(divide="ignore"):
        return -0.5 * z_peak * z_peak - LOG_SQRT_2PI + np.log(total)


@dataclass(frozen=True)
class QuadraticLoss:
    """The loss of the pair P = N(0, own²), Q = N(shift, other²), own != other (Zhu, Dong & Wang 2022, App. A, Example
    15).

    In z = x/own, P = N(0, 1) and Q = N(μ, ρ²) with μ = shift/own, ρ = other/own; the loss
    L(z) = log(p/q) = α + βz + γz² = γ(z − z*)² + L*, with z* = μ/(1 − ρ²) and the extreme value
    L* = log ρ − μ²/(2(1 − ρ²)).  α = L(0) and L* are formed in 40-digit arithmetic and kept as
    hi + lo, so that ε − L* is accurate next to a bounded loss's upper end.
    """

    mu: float
    rho: float
    gamma: float
    alpha: float
    alpha_lo: float
    vertex: float
    extreme: float
    extreme_lo: float

    @classmethod
    def of(cls, own: float, other: float, shift: float) -> QuadraticLoss:
        # The coefficients in 40-digit arithmetic (no overflow, no cancellation near ρ = 1).
        mu = shift / own
        with mpmath.workdps(40):
            rho_mp = mpmath.mpf(other) / own
            mu_mp = mpmath.mpf(shift) / own
            one_minus_rho2 = 1 - rho_mp ** 2
            extreme_mp = mpmath.log(rho_mp) - mu_mp ** 2 / (2 * one_minus_rho2)
            rho, gamma = float(rho_mp), float(one_minus_rho2 / (2 * rho_mp ** 2))
            alpha_mp = mpmath.log(rho_mp) + (mu_mp / rho_mp) ** 2 / 2  # L(0)
            alpha = float(alpha_mp)
            alpha_lo = float(alpha_mp - alpha) if math.isfinite(alpha) else 0.0
            vertex = float(mu_mp / one_minus_rho2)
            extreme = float(extreme_mp)
            extreme_lo = float(extreme_mp - extreme) if math.isfinite(extreme) else 0.0
        if not all(math.isfinite(v) and v != 0 for v in (rho, gamma)) or not all(
                math.isfinite(v) for v in (mu, alpha, vertex, extreme)):
            raise ValueError(f"sigma1, sigma2 and sensitivity are too far apart in scale (own={own}, other={other}, "
                             f"sensitivity={shift}): the privacy loss's coefficients overflow")
        return cls(mu, rho, gamma, alpha, alpha_lo, vertex, extreme, extreme_lo)

    def gap(self, eps: NDArray) -> NDArray:
        """ε − L*."""
        return (eps - self.extreme) - self.extreme_lo

    def roots(self, e: NDArray, gap: NDArray) -> tuple[NDArray, tuple[NDArray, NDArray], tuple[NDArray, NDArray]]:
        """h, (z1, z2) and (w1, w2) for ε = ``e`` strictly inside the loss's range (``gap`` = ε − L*).

        A = {L > ε} is the complement of (z1, z2) (γ > 0) or (z1, z2) (γ < 0), z1,2 = z* ∓ h,
        h = sqrt((ε − L*)/γ); the root nearer 0 is formed as g(0)/(γ · the other), without
        cancellation.  w = (z − μ)/ρ is z standardized under Q.
        """
        h = np.sqrt(gap / self.gamma)
        far = self.vertex + (h if self.vertex >= 0 else -h)
        # z1 z2 = g(0)/γ, g(0) = L(0) − ε with L(0) as hi + lo (consistent with ε − L* next to the vertex).
        near = ((self.alpha - e) + self.alpha_lo) / (self.gamma * far)
        z1, z2 = np.minimum(near, far), np.maximum(near, far)
        return h, (z1, z2), ((z1 - self.mu) / self.rho, (z2 - self.mu) / self.rho)

    def pieces(self, e: NDArray, gap: NDArray) -> tuple[NDArray, list]:
        """h and the pieces of A = {L > ε} (see :meth:`roots`): each is (root, direction, length, z-range,
        w-range), the two tails outwards from z1 and z2 (γ > 0) or the halves (z1, z*) and (z*, z2)
        inwards from them (γ < 0)."""
        h, (z1, z2), (w1, w2) = self.roots(e, gap)
        infinite = np.full(e.shape, np.inf)
        if self.gamma > 0:  # the two tails, outwards from z1 and z2
            return h, [(z1, -1.0, infinite, (-infinite, z1), (-infinite, w1)),
                       (z2, 1.0, infinite, (z2, infinite), (w2, infinite))]
        zv, wv = np.full(e.shape, self.vertex), np.full(e.shape, (self.vertex - self.mu) / self.rho)
        return h, [(z1, 1.0, h, (z1, np.maximum(zv, z1)), (w1, np.maximum(wv, w1))),
                   (z2, -1.0, h, (np.minimum(zv, z2), z2), (np.minimum(wv, w2), w2))]


def ddg_log_delta(eps: NDArray, own: float, other: float, shift: float, force_quadrature: bool = False) -> NDArray:
    """log δ(ε) of the pair P = N(0, own²), Q = N(shift, other²) (the remove direction's pair).

    With the loss L of :class:`QuadraticLoss`, A = {L > ε} is everything (γ > 0, ε <= L*:
    δ = 1 − e^ε), empty (γ < 0, ε >= L*), or the pieces of :meth:`QuadraticLoss.pieces`.
    δ is a sum of pieces P(piece) − e^ε Q(piece) >= 0; each is
    log P(piece) + log(1 − e^{ε + log Q(piece) − log P(piece)}) from log Φ, or, where that
    cancels, the quadrature of its positive integrand.
    """
    mu = shift / own
    if not math.isfinite(mu):
        raise ValueError(f"sensitivity / sigma overflows (sensitivity={shift}, sigma={own})")
    if own == other:  # a Gaussian shift (γ = 0): Sommer, Meiser & Mohammadi 2019, Thm 5
        if mu == 0.0:
            with np.errstate(divide="ignore"):
                return np.log(-np.expm1(np.minimum(eps, 0.0)))
        hi, lo = _gaussian_log_delta_parts(eps, mu)
        return hi + lo
    loss = QuadraticLoss.of(own, other, shift)
    gamma = loss.gamma
    out = np.full(eps.shape, -np.inf)
    gap = loss.gap(eps)
    if gamma > 0:
        everything = gap <= 0
        with np.errstate(divide="ignore"):
            out[everything] = np.log(-np.expm1(eps[everything]))
        inside = ~everything
    else:
        inside = gap < 0
    if not np.any(inside):
        return out
    e = eps[inside]
    h, pieces = loss.pieces(e, gap[inside])
    total = np.full(e.shape, -np.inf)
    for root, direction, length, p_range, q_range in pieces:
        log_p, cond_p = log_normal_mass(*p_range)
        log_q, cond_q = log_normal_mass(*q_range)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            d = np.minimum(e + log_q - log_p, 0.0)
            ratio = np.exp(d)
            one_minus = -np.expm1(d) + 0.0  # (no -0.0 at d = 0: the amplification is then +inf)
            value = log_p + np.log(one_minus)
            # Relative error (in rounding units) the cancellations add to the piece: that of the
            # masses, and that of e^d (absolute errors of its log terms) amplified by e^d/(1 - e^d).
            size = 1.0 + np.abs(e) + np.abs(log_p) + np.abs(log_q) + cond_p + cond_q
            amplification = cond_p + size * ratio / one_minus
        quad = ~(amplification <= _DDG_MAX_AMPLIFICATION) | force_quadrature
        if np.any(quad):
            value[quad] = _ddg_piece_quadrature(root[quad], direction, length[quad], gamma, h[quad])
        total = np.logaddexp(total, value)
    out[inside] = np.minimum(total, 0.0)
    return out


def data_dependent_gaussian_log_delta(
    epsilon: ArrayLike, sigma1: float, sigma2: float, sensitivity: float = 0.0, direction: str = "remove",
) -> float | NDArray[np.float64]:
    """log δ(ε) of one use of :class:`afa.DataDependentGaussian` (see :func:`data_dependent_gaussian_delta`).

    Parameters
    ----------
    epsilon : float or array_like
        A finite real number, or an array of them of any shape.
    sigma1, sigma2 : float
        The standard deviations of the two distributions, each > 0.
    sensitivity : float, default 0.0
        The shift of the second distribution's mean, >= 0.
    direction : {"remove", "add"}, default "remove"
        H_{e^ε}(P‖Q) ("remove") or H_{e^ε}(Q‖P) ("add").

    Returns
    -------
    float or ndarray
        log δ(ε) (-inf where δ = 0): a float for a number, an array of ``epsilon``'s shape for an array.

    Raises
    ------
    ValueError
        A σ not > 0, ``sensitivity`` < 0, an unknown ``direction``, a non-finite value, or σ1, σ2 and
        ``sensitivity`` so far apart in scale that the privacy loss's coefficients overflow.
    TypeError
        An argument that is not real numbers.

    Examples
    --------
    >>> from afa import exact
    >>> round(exact.data_dependent_gaussian_log_delta(1.0, 1.0, 2.0, sensitivity=1.0, direction="add"), 6)
    -1.303377
    """
    own, other, shift, direction = _ddg_arguments(sigma1, sigma2, sensitivity, direction)
    eps, scalar = _epsilon_array(epsilon)
    return _result(ddg_log_delta(eps, own, other, shift), scalar)


def data_dependent_gaussian_delta(
    epsilon: ArrayLike, sigma1: float, sigma2: float, sensitivity: float = 0.0, direction: str = "remove",
) -> float | NDArray[np.float64]:
    """Exact δ(ε) of one use of Gaussian noise with a data-dependent variance (Zhu, Dong & Wang 2022, App. A Example
    15).

    The pair is P = N(0, σ1²), Q = N(sensitivity, σ2²); ``direction="remove"`` gives
    H_{e^ε}(P‖Q) = P(A) − e^ε Q(A), A = {x: log(p/q)(x) > ε}, and ``"add"`` the swapped pair
    H_{e^ε}(Q‖P).  log(p/q) is quadratic in x, so A is everything, empty, an interval or the
    complement of one; each piece is evaluated in log space (``log_ndtr``, ``log1p``/``expm1``)
    and, where its difference would cancel, by quadrature of its positive integrand, so that δ
    keeps its relative accuracy far into the tails (about 1e-13 down to δ ≈ 1e-300, against
    40-digit quadrature of the hockey-stick integral).  The direction whose own σ is the smaller
    has a loss bounded above by L* (δ = 0 for ε >= L*, and δ ~ (L* − ε)^{3/2} just below it); L*
    is formed to 40 digits, so relative accuracy holds up to the last floating-point ε below it.
    σ1 = σ2 is the Gaussian mechanism (:func:`gaussian_delta` with μ = sensitivity/σ).

    Parameters
    ----------
    epsilon : float or array_like
        A finite real number, or an array of them of any shape.
    sigma1, sigma2 : float
        The standard deviations σ1 of P and σ2 of Q, each > 0.
    sensitivity : float, default 0.0
        The mean of Q, >= 0.
    direction : {"remove", "add"}, default "remove"
        H_{e^ε}(P‖Q) ("remove") or H_{e^ε}(Q‖P) ("add").

    Returns
    -------
    float or ndarray
        δ(ε): a float for a number, an array of ``epsilon``'s shape for an array.

    Raises
    ------
    ValueError
        A σ not > 0, ``sensitivity`` < 0, an unknown ``direction``, a non-finite value, or σ1, σ2 and
        ``sensitivity`` so far apart in scale that the privacy loss's coefficients overflow.
    TypeError
        An argument that is not real numbers.

    Examples
    --------
    With σ1 < σ2 the remove direction's loss is bounded above (L* = log 2 + 1/6 here):

    >>> from afa import exact
    >>> exact.data_dependent_gaussian_delta([0.0, 0.2, 1.0], 1.0, 2.0, sensitivity=1.0).round(6)
    array([0.390066, 0.294267, 0.      ])
    >>> round(exact.data_dependent_gaussian_delta(1.0, 1.0, 2.0, sensitivity=1.0, direction="add"), 6)
    0.271613
    >>> a = exact.data_dependent_gaussian_delta(1.0, 2.0, 2.0, sensitivity=1.0)
    >>> b = exact.gaussian_delta(1.0, 0.5)
    >>> abs(a - b) <= 1e-14 * b
    True
    """
    own, other, shift, direction = _ddg_arguments(sigma1, sigma2, sensitivity, direction)
    eps, scalar = _epsilon_array(epsilon)
    return _result(np.exp(ddg_log_delta(eps, own, other, shift)), scalar)


def _ddg_arguments(sigma1, sigma2, sensitivity, direction) -> tuple[float, float, float, str]:
    """Checked (σ of the direction's own distribution, the other σ, sensitivity, direction)."""
    sigma1 = check.positive("sigma1", sigma1)
    sigma2 = check.positive("sigma2", sigma2)
    sensitivity = check.non_negative("sensitivity", sensitivity)
    direction = check.choice("direction", direction, _DDG_DIRECTIONS)
    # The add direction is the swapped pair; by translation and reflection, N(sensitivity, σ2²)
    # against N(0, σ1²) is N(0, σ2²) against N(sensitivity, σ1²).
    own, other = (sigma1, sigma2) if direction == "remove" else (sigma2, sigma1)
    return own, other, sensitivity, direction
