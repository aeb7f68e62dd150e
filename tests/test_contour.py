"""The contour-shifted inversion: relative accuracy of delta down to 1e-300.

Ground truth: afa.exact (composed Gaussian in log space, checked against
50-digit mpmath in test_exact.py; the discrete x Gaussian mixture for
papers/002 Exp 2).  The contour engine shares nothing with either but the
mechanisms' log-CF templates.
"""

import math

import numpy as np
import pytest

import afa
from afa import exact

# (sigma, count) with mu = sqrt(count) / sigma from 0.01 to 1000 and counts up to 10^12.
GAUSSIANS = [(100.0, 1), (10.0, 1), (1.0, 1), (1e6, 10**12), (1.0, 100), (0.01, 100), (1e3, 10**12)]


@pytest.mark.parametrize("sigma,count", GAUSSIANS)
def test_gaussian_delta_is_relatively_accurate_to_1e_300(sigma, count):
    mu = math.sqrt(count) / sigma
    acc = afa.Accountant().compose(afa.Gaussian(sigma), times=count)
    epsilons = np.linspace(0.0, exact.gaussian_epsilon(1e-300, mu), 13)
    profile = acc.privacy_profile(epsilons, method="contour")
    truth = exact.gaussian_delta(epsilons, mu)
    assert np.min(truth) < 1e-290  # the grid really reaches the bottom of the double range
    assert np.max(np.abs(profile / truth - 1)) <= 1e-10


@pytest.mark.parametrize("sigma,count", GAUSSIANS)
@pytest.mark.parametrize("delta", [1e-5, 1e-30, 1e-100, 1e-300])
def test_gaussian_epsilon_is_relatively_accurate(sigma, count, delta):
    mu = math.sqrt(count) / sigma
    result = afa.Accountant().compose(afa.Gaussian(sigma), times=count).epsilon_result(delta, method="contour")
    truth = exact.gaussian_epsilon(delta, mu)
    assert result.value == pytest.approx(truth, rel=1e-10)
    assert result.lower * (1 - 1e-12) <= truth <= result.upper * (1 + 1e-12)  # containment


def test_exp2_composition_down_to_1e_30():
    acc = afa.Accountant().compose(afa.Gaussian(5.0), times=500).compose(afa.RandomizedResponse(0.52), times=500)
    epsilons = np.array([0.0, 2.0, 10.0, 30.0, 50.0, exact_epsilon := acc.epsilon(1e-30, method="exact")])
    contour = acc.privacy_profile(epsilons, method="contour")
    truth = acc.privacy_profile(epsilons, method="exact")
    assert truth[-1] == pytest.approx(1e-30, rel=1e-9)
    assert np.max(np.abs(contour / truth - 1)) <= 1e-10
    assert acc.epsilon(1e-30, method="contour") == pytest.approx(exact_epsilon, rel=1e-10)


def test_contour_and_real_line_agree_where_both_are_valid():
    acc = afa.Accountant().compose(afa.Gaussian(3.0), times=10).compose(afa.Laplace(4.0), times=5)
    for eps in (0.0, 1.0, 2.5, 4.0):
        contour, real_line = acc.delta_result(eps, method="contour"), acc.delta_result(eps, method="quadrature")
        assert abs(contour.value - real_line.value) <= real_line.error + contour.error


def test_contour_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="atoms"):
        afa.Accountant().compose(afa.Laplace(1.0)).delta(1.0, method="contour")
    with pytest.raises(ValueError, match="closed-form"):
        afa.Accountant().compose(afa.MixtureOfGaussians([1.0, 2.0], [0.5, 0.5], 1.0)).delta(1.0, method="contour")
