"""Closed-form ground truth: exact privacy profiles δ(ε) of a few compositions.

* Composed Gaussian mechanisms: papers/004_d41287a43ce5d174.txt, Theorem 5
  (equivalently papers/003_83ef780bcc67edb1.txt, Sec. 3.2.1, eq. (1)).
* n-fold binary randomized response and approximate randomized response:
  papers/004, Example 1 and Appendix A.1.
* Finite discrete privacy losses convolved with a Gaussian one, e.g. Gaussian ×
  randomized response compositions: papers/002_658ea0213f8272c6.txt, Sec. 5, Exp 2.

Everything is evaluated in log space and keeps relative accuracy close to machine
precision far into the tails (δ ≈ 1e-300 and below, ε in the thousands).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq
from scipy.special import erfcx, log_ndtr, logsumexp, ndtri

from . import _validation as check
from .discrete import log_hockey_stick
from ._accurate import LOG_SQRT_2PI, binomial_log_pmf, two_prod, two_sum

__all__ = [
    "approximate_rr_delta",
    "discrete_gaussian_mixture_delta",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_log_delta",
    "gaussian_mu",
    "randomized_response_delta",
]

_SQRT_HALF_PI = math.sqrt(0.5 * math.pi)
_SQRT_HALF = math.sqrt(0.5)
# Quadrature: Gauss-Legendre nodes on [-1, 1]; integrands are cut where they fall
# below e^-_TAIL of their peak.
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(48)
_TAIL = 45.0
# Switch from the closed form to quadrature when its cancellation would amplify
# rounding errors by more than this factor.
_MAX_AMPLIFICATION = 8.0
# Atoms of a discrete privacy loss with log-probability below this cannot change
# a double-precision δ.
_LOG_NEGLIGIBLE = -800.0
# Elements per block when forming (epsilon × atoms) matrices.
_BLOCK = 1 << 18



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
    return np.log(_SQRT_HALF_PI * erfcx(_SQRT_HALF * y))


def _lower_tail_quadrature(x: NDArray, mu: float) -> NDArray:
    """R(x) − R(x+μ) = ∫_0^∞ exp(−xt − t²/2)·(1 − e^{−μt}) dt for x > 0."""
    length = 2.0 * _TAIL / (np.sqrt(x * x + 2.0 * _TAIL) + x)
    t = 0.5 * length[:, None] * (_NODES + 1.0)
    f = np.exp(-t * (x[:, None] + 0.5 * t)) * -np.expm1(-mu * t)
    return 0.5 * length * (f @ _WEIGHTS)


def _upper_quadrature(a: NDArray, mu: float) -> NDArray:
    """δ = ∫_{−∞}^{a} φ(u)·(1 − e^{−μ(a−u)}) du for a >= 0."""
    cut = math.sqrt(2.0 * _TAIL)
    top = np.minimum(a, cut)
    u = -cut + 0.5 * (top + cut)[:, None] * (_NODES + 1.0)
    f = np.exp(-0.5 * u * u - LOG_SQRT_2PI) * -np.expm1(-mu * (a[:, None] - u))
    return 0.5 * (top + cut) * (f @ _WEIGHTS)


def _gaussian_log_delta_parts(eps: NDArray, mu: float) -> tuple[NDArray, NDArray]:
    """log δ(ε) = hi + lo for the privacy loss N(μ²/2, μ²), papers/004 Thm 5.

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
        rx = erfcx(_SQRT_HALF * x)
        diff = rx - erfcx(_SQRT_HALF * (x + mu))
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
        log_phi_a = log_ndtr(a)
        tail = b <= 0
        # log(e^ε Φ(b)) = log(φ(a) R(−b)) for b <= 0, else ε + log Φ(b)
        log_second = np.where(
            tail,
            -0.5 * a * a - a * c - LOG_SQRT_2PI + _log_mills(np.where(tail, -b, 0.0)),
            e + log_ndtr(b),
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


def gaussian_mu(
    sigmas: ArrayLike,
    counts: ArrayLike | None = None,
    sensitivities: ArrayLike | None = None,
) -> float:
    """μ = sqrt(Σ_i k_i Δ_i² / σ_i²) of a composition of Gaussian mechanisms.

    The composed privacy loss is N(μ²/2, μ²) (papers/004, Theorem 5 and its proof).
    ``counts`` default to 1 and may be huge integers; ``sensitivities`` default to 1.
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
    """log δ(ε) of the privacy loss N(μ²/2, μ²) (papers/004, Theorem 5), any real ε.

    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), evaluated in log space: relative
    error below 1e-14 in δ for δ >= 1e-300 (against 50-digit mpmath), and a
    logarithm accurate to a few ulps far below that.
    """
    mu = check.positive("mu", mu)
    eps, scalar = _epsilon_array(epsilon)
    hi, lo = _gaussian_log_delta_parts(eps, mu)
    return _result(hi + lo, scalar)


def gaussian_delta(epsilon: ArrayLike, mu: float) -> float | NDArray[np.float64]:
    """δ(ε) of the privacy loss N(μ²/2, μ²) (papers/004, Theorem 5), any real ε."""
    mu = check.positive("mu", mu)
    eps, scalar = _epsilon_array(epsilon)
    hi, lo = _gaussian_log_delta_parts(eps, mu)
    return _result(np.exp(hi) * np.exp(lo), scalar)


def gaussian_epsilon(delta: float, mu: float) -> float:
    """Smallest ε >= 0 with δ(ε) <= ``delta`` for the privacy loss N(μ²/2, μ²).

    Root of log δ(ε) = log(delta) (papers/004, Theorem 5); 0.0 if δ(0) <= delta.
    """
    delta = check.in_interval("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    mu = check.positive("mu", mu)
    target = math.log(delta)

    def excess(e: float) -> float:
        hi, lo = _gaussian_log_delta_parts(np.array([e]), mu)
        return float(hi[0] + lo[0]) - target

    if excess(0.0) <= 0.0:
        return 0.0
    # δ(ε) <= Φ(a): the ε at which Φ(a) = delta is an upper bound.
    upper = max(mu * (0.5 * mu - float(ndtri(delta))), mu)
    while excess(upper) > 0.0:
        upper *= 2.0
    if not math.isfinite(upper):
        raise ValueError(f"mu = {mu!r} is too large: ε(δ = {delta!r}) exceeds the float range")
    return float(brentq(excess, 0.0, upper, xtol=1e-300, rtol=1e-14, maxiter=500))


# --------------------------------------------------------------------------
# discrete privacy losses


def mixture_log_delta(
    eps: NDArray, losses: NDArray, log_weights: NDArray, mu: float
) -> NDArray:
    """log Σ_j w_j δ_μ(ε − ℓ_j): δ_μ the Gaussian N(μ²/2, μ²) profile, or for μ = 0
    the point-mass profile (1 − e^{ε−ℓ})_+ (papers/003, Observation 2 and Sec. 5.1).

    Inputs are not validated (the engines pass checked arrays); ``eps`` is an array.
    """
    keep = log_weights > _LOG_NEGLIGIBLE
    losses, log_weights = losses[keep], log_weights[keep]
    if mu == 0.0 or losses.size == 0:
        return log_hockey_stick(losses, log_weights, eps)
    flat = eps.ravel()
    out = np.empty(flat.shape)
    rows = max(1, _BLOCK // losses.size)
    for start in range(0, flat.size, rows):
        hi, lo = _gaussian_log_delta_parts(flat[start:start + rows, None] - losses[None, :], mu)
        out[start:start + rows] = logsumexp(hi + lo + log_weights, axis=1)
    return out.reshape(eps.shape)


def _binomial_rr_delta(
    eps: NDArray, n: int, xi: float, p: float, q: float, log_p: float, log_q: float,
    log_finite: float = 0.0,
) -> NDArray:
    """e^{log_finite}·δ(ε) of n-fold binary RR: loss ±ξ, +ξ w.p. p (papers/004, App. A.1)."""
    # Chernoff + Pinsker: log P(J = j) <= 0.09 − 2(j − np)²/n < _LOG_NEGLIGIBLE outside.
    half_width = math.sqrt(0.5 * (0.09 - _LOG_NEGLIGIBLE) * n) + 1.0
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

    The privacy loss is ξ(2J − n), ξ = log(p/(1−p)), J ~ Binomial(n, p), so
    δ(ε) = Σ_{ξ(2j−n) > ε} C(n,j) p^j (1−p)^{n−j} (1 − e^{ε−ξ(2j−n)})
    (papers/004, Example 1 / App. A.1 with δ0 = 0).  p = 1/2 gives (1 − e^ε)_+.
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
    (ξ, δ0)-DP mechanism (papers/004, Example 1 and App. A.1).

    δ(ε) = 1 − (1−δ0)^n + (1−δ0)^n Σ_{k: ξ(2k−n) > ε} C(n,k) p^k (1−p)^{n−k}
    (1 − e^{ε−ξ(2k−n)}) with p = e^ξ/(1+e^ξ).  (The paper prints the weight as
    e^{ξ(n−k)}/(1+e^ξ)^n; e^{ξk}/(1+e^ξ)^n is the one that matches its own
    distribution (12)-(16) and the n = 1 mechanism.)
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

    The discrete part has atoms ``losses`` with probabilities ``weights`` plus
    probability ``inf_mass`` at +∞; δ(ε) = inf_mass + Σ_j w_j δ_μ(ε − ℓ_j) with
    δ_μ the Gaussian profile (papers/004, Thm 5) or, for μ = 0, (1 − e^{ε−ℓ_j})_+.
    E.g. Gaussian × randomized response compositions (papers/002, Sec. 5, Exp 2).
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
