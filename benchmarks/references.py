"""Reference values the benchmarks measure errors against, each computed apart from the engine under test.

* Composed Gaussians: ``afa.numerics.exact``'s closed form (Sommer, Meiser & Mohammadi 2019, Thm 5, in log space), each value
re-checked with
  mpmath at 60 digits (:func:`gaussian_reference` returns the relative residual of delta there).
* Binary and k-ary randomized response (substitution) and the discrete Gaussian: the composed loss lives on a
  lattice; its law is enumerated exactly -- binomial / trinomial masses in log space (``scipy.special.gammaln``),
  or the k-fold sum of discrete-Gaussian noise by repeated direct convolution (no FFT: every term is positive,
  so tail masses keep their relative accuracy) -- and eps(delta) is solved by Brent's method on
  delta(eps) = sum over losses L > eps of mass * (1 - e^(eps - L)).
* Laplace: the exact mpmath enumeration ``tests/_reference.laplace_delta_mpmath`` (delta(eps) only), inverted
  by one Newton step in log delta from an estimate of eps (:func:`newton_epsilon`); the step's first-order
  formula is :func:`relative_epsilon_offset`.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import mpmath
import numpy as np
from scipy.optimize import brentq
from scipy.special import gammaln, logsumexp

from afa.numerics import exact

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _reference import laplace_delta_mpmath  # noqa: E402,F401  (re-exported for the benchmark scripts)

# --------------------------------------------------------------------------- Gaussians

def gaussian_delta_mpmath(epsilon: float, mu: float, dps: int = 60) -> mpmath.mpf:
    """delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu) of a Gaussian loss N(mu^2/2, mu^2)."""
    with mpmath.workdps(dps):
        eps, mu = mpmath.mpf(epsilon), mpmath.mpf(mu)
        return mpmath.ncdf(mu / 2 - eps / mu) - mpmath.exp(eps) * mpmath.ncdf(-mu / 2 - eps / mu)


def gaussian_reference(delta: float, mu: float) -> tuple[float, float]:
    """(eps, residual): the closed-form eps(delta) and |delta_mpmath(eps) / delta - 1| at that eps."""
    epsilon = exact.gaussian_epsilon(delta, mu)
    return epsilon, abs(float(gaussian_delta_mpmath(epsilon, mu) / mpmath.mpf(delta)) - 1)


# --------------------------------------------------------------------------- lattice laws

class LatticeLoss:
    """A composed privacy loss with finitely many values ``losses`` of masses exp(``log_masses``)."""

    def __init__(self, losses: np.ndarray, log_masses: np.ndarray):
        keep = np.isfinite(log_masses)
        self.losses, self.log_masses = np.asarray(losses, float)[keep], np.asarray(log_masses, float)[keep]

    def delta(self, epsilon: float) -> float:
        above = self.losses > epsilon
        if not np.any(above):
            return 0.0
        terms = self.log_masses[above] + np.log(-np.expm1(epsilon - self.losses[above]))
        return float(np.exp(logsumexp(terms)))

    def epsilon(self, delta: float) -> float:
        """The smallest eps >= 0 with delta(eps) <= delta (delta(eps) is continuous and decreasing)."""
        if self.delta(0.0) <= delta:
            return 0.0
        top = float(np.max(self.losses))
        return brentq(lambda eps: self.delta(eps) - delta, 0.0, top, xtol=1e-15 * max(1.0, top), rtol=1e-15,
                      maxiter=500)


def randomized_response_loss(p: float, count: int) -> LatticeLoss:
    """count uses of binary randomized response (true bit with probability p > 1/2), substitution: each use's
    loss is +a (mass p) or -a (mass 1 - p), a = log(p / (1 - p))."""
    a = math.log(p / (1 - p))
    up = np.arange(count + 1)
    log_masses = (gammaln(count + 1) - gammaln(up + 1) - gammaln(count - up + 1)
                  + up * math.log(p) + (count - up) * math.log1p(-p))
    return LatticeLoss(a * (2 * up - count), log_masses)


def kary_randomized_response_loss(buckets: int, p: float, count: int) -> LatticeLoss:
    """count uses of k-ary randomized response (true value with probability p, each other value with
    r = (1 - p) / (buckets - 1)), substitution: loss +a (mass p), -a (mass r), 0 (mass 1 - p - r), a = log(p / r).
    The composed law is trinomial in (ups, downs); masses are summed per net loss a * (ups - downs)."""
    r = (1 - p) / (buckets - 1)
    rest = 1 - p - r
    ups, downs = np.meshgrid(np.arange(count + 1), np.arange(count + 1), indexing="ij")
    valid = ups + downs <= count
    ups, downs = ups[valid], downs[valid]
    log_masses = (gammaln(count + 1) - gammaln(ups + 1) - gammaln(downs + 1) - gammaln(count - ups - downs + 1)
                  + ups * math.log(p) + downs * math.log(r)
                  + ((count - ups - downs) * math.log(rest) if rest > 0 else np.where(ups + downs == count, 0.0, -np.inf)))
    net = ups - downs
    order = np.argsort(net, kind="stable")
    net, log_masses = net[order], log_masses[order]
    values, starts = np.unique(net, return_index=True)
    summed = np.array([logsumexp(part) for part in np.split(log_masses, starts[1:])])
    return LatticeLoss(math.log(p / r) * values, summed)


def discrete_gaussian_loss(sigma: float, count: int) -> LatticeLoss:
    """count uses of the discrete Gaussian (integer noise with mass proportional to exp(-x^2 / 2 sigma^2)),
    sensitivity 1: one use's loss is (1 + 2x) / (2 sigma^2) with x the noise; the noise is cut at
    |x| <= 15 sigma + 3 (mass beyond ~1e-49 per use), and the sum of count noises is enumerated by repeated
    squaring with direct convolution."""
    bound = math.ceil(15 * sigma + 3)
    support = np.arange(-bound, bound + 1)
    weights = np.exp(-support.astype(float) ** 2 / (2 * sigma ** 2))
    one = weights / weights.sum()
    total, power, remaining = np.ones(1), one, count
    while remaining:
        if remaining & 1:
            total = np.convolve(total, power)
        remaining >>= 1
        if remaining:
            power = np.convolve(power, power)
    sums = np.arange(total.size) - bound * count
    with np.errstate(divide="ignore"):
        return LatticeLoss((count + 2 * sums) / (2 * sigma ** 2), np.log(total))


# --------------------------------------------------------------------------- inverting a reference delta(eps)

def delta_slope(delta_function, epsilon: float, value: float | None = None, step: float = 1e-7) -> float:
    """-d log delta / d eps at ``epsilon`` by a one-sided difference (``value`` = delta_function(epsilon))."""
    value = delta_function(epsilon) if value is None else value
    return (math.log(delta_function(epsilon * (1 - step))) - math.log(value)) / (step * epsilon)


def relative_epsilon_offset(reference_delta: float, target: float, epsilon: float, slope: float) -> float:
    """(eps - eps*) / eps* to first order, for an eps at which the reference gives delta ``reference_delta``
    instead of ``target`` (``slope`` from :func:`delta_slope`)."""
    return -(reference_delta / target - 1) / (epsilon * slope)


def newton_epsilon(delta_function, epsilon: float, target: float, step: float = 1e-7) -> float:
    """eps* with delta_function(eps*) = target, by one Newton step in log delta from a close estimate ``epsilon``."""
    value = delta_function(epsilon)
    offset = relative_epsilon_offset(value, target, epsilon, delta_slope(delta_function, epsilon, value, step))
    return epsilon * (1 - offset)
