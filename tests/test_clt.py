"""CLT views (Sommer, Meiser & Mohammadi 2019): privacy-loss classes, delta_CLT, Berry-Esseen, Markov-ADP, GDP mu.

References (computed here, not by afa):
* Sommer, Meiser & Mohammadi 2019, Lemma 11 / Thm 5: k Gaussian mechanisms with mu_1 = sensitivity / sigma have the
class
  (k mu_1^2 / 2, k mu_1^2, 0) and delta(eps) = [erfc((eps - m)/(sqrt(2) s)) - e^eps erfc((eps + m)/(sqrt(2) s))] / 2,
  m = k mu_1^2 / 2, s^2 = k mu_1^2 (evaluated in mpmath);
* third absolute moments: E|Z|^3 = 2 sqrt(2/pi) for Z ~ N(0, 1); Laplace's loss (atoms +-a with masses 1/2,
  e^-a/2, density e^{(l-a)/2}/4 on (-a, a)) and the subsampled Gaussian's (integral over the output),
  both by scipy quadrature; randomized response by direct summation;
* the tight delta of afa's Accountant, whose own accuracy is tested elsewhere against closed forms;
* Dong, Roth, Su 2022 Cor. 5.4: Poisson-subsampled Gaussian, mu -> q sqrt(T (e^{1/sigma^2} - 1)).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import integrate

import afa
from afa.views import clt
from afa.views.rdp import RdpAccountant

EPSILONS = np.array([0.0, 0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0])


def thm5_delta(epsilon, m, s):
    with mpmath.workdps(40):
        e = mpmath.mpf(epsilon)
        return float((mpmath.erfc((e - m) / (mpmath.sqrt(2) * s))
                      - mpmath.exp(e) * mpmath.erfc((e + m) / (mpmath.sqrt(2) * s))) / 2)


@pytest.mark.parametrize("sigma, sensitivity, count", [(2.0, 1.0, 8), (0.5, 1.0, 2), (4.0, 2.0, 32)])
def test_composed_gaussian_class_is_exact(sigma, sensitivity, count):
    mu1 = sensitivity / sigma  # dyadic, so the class is exact in floating point
    acc = afa.Accountant().compose(afa.Gaussian(sigma, sensitivity), times=count)
    expected = clt.LossClass(count * mu1 ** 2 / 2, count * mu1 ** 2, 0.0)
    assert clt.privacy_loss_class(acc) == {"remove": expected, "add": expected}
    for estimate in clt.GDP_ESTIMATES:
        assert clt.gdp_mu(acc, estimate) == pytest.approx(math.sqrt(count) * mu1, rel=1e-15)


@pytest.mark.parametrize("mu", [0.3, 1.0, 4.0])
def test_clt_delta_of_gaussians_is_theorem_5(mu):
    acc = afa.Accountant().compose(afa.Gaussian(3.0 / mu), times=9)
    got = clt.clt_delta(acc, EPSILONS)
    expected = np.array([thm5_delta(e, mu ** 2 / 2, mu) for e in EPSILONS])
    assert np.allclose(got, expected, rtol=1e-12, atol=0)


def integral(function, low, high, **options) -> float:
    return integrate.quad(function, low, high, epsabs=0, epsrel=1e-11, limit=400, **options)[0]


def test_third_absolute_moment_of_gaussian_and_randomized_response():
    assert clt.third_absolute_moments(afa.Gaussian(2.0)) == pytest.approx((2 * math.sqrt(2 / math.pi) / 8,) * 2,
                                                                          rel=1e-9)
    p = 0.8
    xi = math.log(p / (1 - p))
    mean = (2 * p - 1) * xi
    third = p * abs(xi - mean) ** 3 + (1 - p) * abs(-xi - mean) ** 3
    assert clt.third_absolute_moments(afa.RandomizedResponse(p)) == pytest.approx((third, third), rel=1e-12)


def test_third_absolute_moment_of_laplace():
    a = 0.7  # sensitivity / scale: atoms +a (mass 1/2), -a (mass e^-a / 2), density e^{(l-a)/2}/4 on (-a, a)
    high, low = 0.5, math.exp(-a) / 2
    density = lambda l: math.exp((l - a) / 2) / 4
    mean = high * a - low * a + integral(lambda l: l * density(l), -a, a)
    third = (high * abs(a - mean) ** 3 + low * abs(a + mean) ** 3
             + integral(lambda l: abs(l - mean) ** 3 * density(l), -a, a, points=[mean]))
    assert clt.third_absolute_moments(afa.Laplace(1.0, sensitivity=a)) == pytest.approx((third, third), rel=1e-9)


def test_third_absolute_moment_of_subsampled_gaussian():
    q, sigma = 0.05, 0.9
    ell = lambda o: math.log1p(q * math.expm1((2 * o - 1) / (2 * sigma ** 2)))  # log(A/Q)
    normal = lambda o, c: math.exp(-(o - c) ** 2 / (2 * sigma ** 2)) / (sigma * math.sqrt(2 * math.pi))
    mixture = lambda o: (1 - q) * normal(o, 0) + q * normal(o, 1)
    got = clt.third_absolute_moments(afa.Gaussian(sigma).poisson_subsampled(q))
    for value, weight, loss in ((got[0], mixture, ell), (got[1], lambda o: normal(o, 0), lambda o: -ell(o))):
        mean = integral(lambda o: weight(o) * loss(o), -40, 41)
        assert value == pytest.approx(integral(lambda o: weight(o) * abs(loss(o) - mean) ** 3, -40, 41), rel=1e-8)


@pytest.mark.parametrize("build", [
    lambda: afa.Accountant().compose(afa.Laplace(10.0), 500),
    lambda: afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.02), 2000),
    lambda: afa.Accountant().compose(afa.Laplace(5.0), 100).compose(afa.RandomizedResponse(0.6), 50)
                                .compose(afa.Gaussian(3.0), 10),
])
def test_berry_esseen_interval_contains_the_tight_delta(build):
    acc = build()
    truth = acc.privacy_profile(EPSILONS)
    lower, upper = clt.berry_esseen_bounds(acc, EPSILONS)
    assert np.all(lower <= truth) and np.all(truth <= upper)
    assert np.min(upper - lower) < 0.15  # informative, not [0, 1]
    estimate = clt.clt_delta(acc, EPSILONS)
    assert np.all(lower <= estimate) and np.all(estimate <= upper)


@pytest.mark.parametrize("build", [
    lambda: afa.Accountant().compose(afa.Gaussian(2.0), 8),
    lambda: afa.Accountant().compose(afa.Laplace(2.0), 40),
    lambda: afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.02), 2000),
    lambda: afa.Accountant().compose(afa.RandomizedResponse(0.7), 30).compose(afa.ApproxDP(0.1, 1e-4), 5)
                                .compose(afa.Gaussian(4.0), 3),
])
def test_markov_adp_bounds_the_tight_delta_and_improves_on_rdp(build):
    """Thm 3: an upper bound, no larger than the RDP (moments accountant) bound it refines."""
    acc = build()
    truth = acc.privacy_profile(EPSILONS)
    markov = clt.markov_delta(acc, EPSILONS)
    assert np.all(truth <= markov * (1 + 1e-9))
    rdp = RdpAccountant.from_accountant(acc)
    assert np.all(markov <= [rdp.delta(e, "standard") for e in EPSILONS])


def test_mass_at_infinity_enters_the_class():
    acc = afa.Accountant().compose(afa.ApproxDP(1.0, 1e-3), 10)
    for loss_class in clt.privacy_loss_class(acc).values():
        assert loss_class.inf_mass == pytest.approx(1 - (1 - 1e-3) ** 10, rel=1e-12)
    assert np.all(clt.clt_delta(acc, [50.0]) >= 1 - (1 - 1e-3) ** 10)


def test_gdp_mu_of_dp_sgd_is_dong_roth_su():
    """The limit q -> 0 with q sqrt(T) fixed; at q = 5e-4 the estimates are within O(q) of it."""
    q, sigma, steps = 5e-4, 1.0, 320_000
    acc = afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), steps)
    expected = q * math.sqrt(steps * math.expm1(1 / sigma ** 2))
    for estimate in clt.GDP_ESTIMATES:
        assert clt.gdp_mu(acc, estimate) == pytest.approx(expected, rel=1e-3)


def test_validation():
    with pytest.raises(ValueError, match="empty"):
        clt.clt_delta(afa.Accountant(), [1.0])
    with pytest.raises(ValueError, match="estimate"):
        clt.gdp_mu(afa.Accountant().compose(afa.Gaussian(1.0)), "kl")
    with pytest.raises(TypeError, match="accountant"):
        clt.markov_delta(afa.Gaussian(1.0), [1.0])
    with pytest.raises(ValueError, match="epsilons"):
        clt.berry_esseen_bounds(afa.Accountant().compose(afa.Gaussian(1.0)), [math.nan])
    with pytest.raises(ValueError, match="zero variance"):
        clt.clt_delta(afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.0)), [1.0])
