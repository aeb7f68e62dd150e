"""DiscreteGaussian's truncated support against an untruncated reference at tiny delta.

afa sends the discrete Gaussian's tail beyond +-tau to +infinity (Google DP team 2025, Sec. 3.5); at
delta = 1e-30 a cut at tail mass 1e-30 made eps too high (+3.9e-5 for sigma = 2 x 100) with
brackets excluding the truth.  The reference here does not import afa: the per-use pmf of
N_Z(0, sigma^2) from mpmath (normaliser summed over all integers, support cut only where the
mass is below 1e-100), the k-fold sum S by direct (not FFT) convolution of positive
long-double arrays (relative error <= levels * length * 2^-64, about 1e-15 here).  With
P = N_Z(1, sigma^2), Q = N_Z(0, sigma^2), k uses give the loss L = (2 S + k) / (2 sigma^2),
S ~ N_Z(0)^{*k}, and delta(eps) = sum_S Pr[S] (1 - e^{eps - L})_+ (both add/remove
directions coincide by symmetry).  With a Gaussian part of mu = sqrt(sum k_g) / sigma_g the
hockey stick of each S is the Gaussian one at eps - L (Sommer, Meiser & Mohammadi 2019, Thm 5) in mpmath.

A method's eps bracket [lower, upper] contains the truth iff delta(lower) >= delta >= delta(upper).
"""

from __future__ import annotations

import functools
import math

import mpmath as mp
import numpy as np
import pytest

import afa

TAIL_DIGITS = 100
REFERENCE_RTOL = 1e-14


@functools.cache
def sum_pmf(sigma: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(S values, Pr[S]) of the sum of k independent N_Z(0, sigma^2)."""
    with mp.workdps(40):
        two_var = 2 * mp.mpf(sigma) ** 2
        tau = int(math.ceil(sigma * math.sqrt(2 * TAIL_DIGITS * math.log(10)))) + 2
        norm = mp.nsum(lambda x: mp.exp(-x ** 2 / two_var), [-mp.inf, mp.inf])
        one = np.array([mp.exp(-mp.mpf(x) ** 2 / two_var) / norm for x in range(-tau, tau + 1)], dtype=np.longdouble)
    result, power, n = np.ones(1, dtype=np.longdouble), one, k
    while n:
        if n & 1:
            result = np.convolve(result, power)
        n >>= 1
        if n:
            power = np.convolve(power, power)
    return np.arange(-k * tau, k * tau + 1), result


def delta_discrete(epsilon: float, sigma: float, k: int) -> float:
    s, pmf = sum_pmf(sigma, k)
    gap = np.longdouble(epsilon) - (2 * s.astype(np.longdouble) + k) / (2 * np.longdouble(sigma) ** 2)
    keep = gap < 0
    return float(np.sum(pmf[keep] * -np.expm1(gap[keep])))


def delta_with_gaussian(epsilon: float, sigma: float, k: int, mu: float) -> float:
    s, pmf = sum_pmf(sigma, k)
    with mp.workdps(30):
        mu = mp.mpf(mu)
        total = mp.mpf(0)
        for value, mass in zip(s, pmf):
            if mass < 1e-80:
                continue
            e = mp.mpf(epsilon) - mp.mpf(2 * int(value) + k) / (2 * mp.mpf(sigma) ** 2)
            total += mp.mpf(float(mass)) * (mp.ncdf(-e / mu + mu / 2) - mp.exp(e) * mp.ncdf(-e / mu - mu / 2))
        return float(total)


def assert_contains_truth(accountant, delta, methods, reference):
    answered = 0
    for method in methods:
        try:
            result = accountant.epsilon_result(delta, method=method)
        except afa.AccuracyError:
            continue  # refusing is allowed; a wrong bracket is not
        answered += 1
        assert reference(result.lower) >= delta * (1 - REFERENCE_RTOL), (method, result)
        # (an infinite upper end is a valid, if useless, bound)
        assert result.upper == math.inf or reference(result.upper) <= delta * (1 + REFERENCE_RTOL), (method, result)
    assert answered


@pytest.mark.parametrize("sigma, k", [(1.0, 1), (1.0, 10), (2.0, 3), (2.0, 100)])
@pytest.mark.parametrize("delta", [1e-30, 1e-10])
def test_discrete_gaussian_brackets_contain_untruncated_truth(sigma, k, delta):
    accountant = afa.Accountant().compose(afa.DiscreteGaussian(sigma), k)
    assert_contains_truth(accountant, delta, ("exact", "pld"),
                          lambda eps: delta_discrete(eps, sigma, k))


@pytest.mark.parametrize("delta", [1e-30, 1e-10])
def test_discrete_gaussian_with_gaussian_every_engine(delta):
    """The lattice contour, the real line, the exact convolution and the PLD see the same truncated support."""
    accountant = afa.Accountant().compose(afa.DiscreteGaussian(1.0), 10).compose(afa.Gaussian(3.0), 4)
    assert_contains_truth(accountant, delta, ("exact", "contour", "pld", "quadrature"),
                          lambda eps: delta_with_gaussian(eps, 1.0, 10, 2 / 3.0))


def test_delta_bounds_include_truncated_mass():
    """delta(eps)'s lower bound allows for the mass sent to +infinity by the truncation."""
    accountant = afa.Accountant().compose(afa.DiscreteGaussian(2.0), 100)
    epsilon = 69.3
    truth = delta_discrete(epsilon, 2.0, 100)
    for method in ("exact", "pld"):
        result = accountant.delta_result(epsilon, method=method)
        assert result.lower <= truth * (1 + REFERENCE_RTOL) and truth * (1 - REFERENCE_RTOL) <= result.upper


def test_coarse_cut_is_covered_by_the_bounds():
    """With a coarse cut (tail mass 1e-30) eps(1e-30) is too high, but the bounds allow for the cut mass."""
    mechanism = afa.DiscreteGaussian(2.0, tail_mass=1e-30)
    assert 1e-60 < mechanism.truncated_mass <= 1e-30
    accountant = afa.Accountant().compose(mechanism, 100)
    assert_contains_truth(accountant, 1e-30, ("exact", "pld"), lambda eps: delta_discrete(eps, 2.0, 100))
    result = accountant.epsilon_result(1e-30, method="exact")
    assert delta_discrete(result.value, 2.0, 100) < 0.999 * 1e-30  # the value itself stays pessimistic


def test_tail_mass_is_validated_and_written_only_when_not_the_default():
    """tail_mass lies in [1e-300, 1e-6]; to_dict writes it only when it is not the default, and from_dict
    reads it back."""
    for bad in (0.0, 1e-5, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="tail_mass"):
            afa.DiscreteGaussian(2.0, tail_mass=bad)
    with pytest.raises(TypeError, match="tail_mass"):
        afa.DiscreteGaussian(2.0, tail_mass="1e-30")
    assert "tail_mass" not in afa.DiscreteGaussian(2.0).to_dict()
    coarse = afa.DiscreteGaussian(2.0, tail_mass=1e-30)
    assert coarse.to_dict()["tail_mass"] == 1e-30
    assert afa.Mechanism.from_dict(coarse.to_dict()) == coarse
