"""The real-line inversion against the exact Gaussian formula (Sommer, Meiser & Mohammadi 2019, Thm 5).

Ground truth is :mod:`afa.numerics.exact` (closed form in log space, itself checked
against mpmath in test_exact.py) and scipy's normal CDF; the inversion never
uses either.
"""

import math

import numpy as np
import pytest
from scipy.stats import norm

import afa
from afa.numerics import exact

SIGMAS = (0.5, 1, 2, 5, 50, 100)
COUNTS = (1, 10, 100, 10_000, 1_000_000)
GRID = [(s, k) for s in SIGMAS for k in COUNTS if 0.01 <= math.sqrt(k) / s <= 2]
EPSILONS = np.linspace(0.0, 6.0, 25)


def composed(sigma, count):
    return afa.Accountant().compose(afa.Gaussian(sigma), times=count)


def test_grid_covers_the_acceptance_range():
    mus = sorted(math.sqrt(k) / s for s, k in GRID)
    assert len(GRID) >= 14 and mus[0] == pytest.approx(0.01) and mus[-1] == pytest.approx(2.0)


@pytest.mark.parametrize("sigma,count", GRID)
def test_delta_profile_matches_exact_formula(sigma, count):
    mu = math.sqrt(count) / sigma
    profile = composed(sigma, count).privacy_profile(EPSILONS, method="quadrature")
    truth = exact.gaussian_delta(EPSILONS, mu)
    assert np.max(np.abs(profile - truth)) <= 1e-12


@pytest.mark.parametrize("sigma,count", GRID)
@pytest.mark.parametrize("delta", [1e-3, 1e-5])
def test_epsilon_matches_exact_formula(sigma, count, delta):
    mu = math.sqrt(count) / sigma
    result = composed(sigma, count).epsilon_result(delta, method="quadrature")
    truth = exact.gaussian_epsilon(delta, mu)
    assert result.value == pytest.approx(truth, rel=1e-6, abs=1e-12)
    assert result.lower <= truth * (1 + 1e-12) + 1e-15 and truth <= result.upper * (1 + 1e-12) + 1e-15


@pytest.mark.parametrize("sigma,count", [(1, 1), (5, 10), (50, 10_000), (100, 1)])
def test_cdf_is_the_normal_cdf(sigma, count):
    mu = math.sqrt(count) / sigma
    acc = composed(sigma, count)
    xs = mu ** 2 / 2 + mu * np.linspace(-6, 6, 49)
    for direction in acc.directions:
        assert np.max(np.abs(acc.cdf(xs, direction) - norm.cdf(xs, loc=mu ** 2 / 2, scale=mu))) <= 1e-13


def test_count_is_a_multiplier_not_a_loop():
    """10^9 uses cost one symbolic term; the answer is the exact one for mu = sqrt(1e9)/sigma."""
    acc = composed(30_000.0, 1_000_000_000)
    assert len(acc.log_phi["remove"].args) <= 2  # one polynomial in t, not 10^9 terms
    mu = math.sqrt(1e9) / 30_000.0
    assert acc.delta(1.0, method="quadrature") == pytest.approx(exact.gaussian_delta(1.0, mu), abs=1e-12)


def test_exact_method_is_the_closed_form_for_mixed_sigmas():
    acc = afa.Accountant().compose(afa.Gaussian(2.0), times=7).compose(afa.Gaussian(3.0, sensitivity=2.0), times=5)
    mu = math.sqrt(7 / 4 + 5 * 4 / 9)
    assert acc.delta_result(0.5).method == "exact"
    assert acc.delta(0.5) == pytest.approx(exact.gaussian_delta(0.5, mu), rel=1e-14)
    assert acc.epsilon(1e-8) == pytest.approx(exact.gaussian_epsilon(1e-8, mu), rel=1e-13)


def test_tiny_delta_is_refused_by_the_real_line_method_with_advice():
    acc = composed(1.0, 1)
    with pytest.raises(afa.AccuracyError, match="reliable for delta"):
        acc.epsilon(1e-20, method="quadrature")
    # ... and the exact method answers it.
    assert acc.epsilon(1e-20) == pytest.approx(exact.gaussian_epsilon(1e-20, 1.0), rel=1e-12)


def test_epsilon_far_outside_the_loss_is_refused_not_guessed():
    acc = afa.Accountant().compose(afa.Gaussian(1.0)).compose(afa.Laplace(3.0))
    with pytest.raises(afa.AccuracyError, match="too far"):
        acc.delta(1e6, method="quadrature")
    far = acc.delta_result(50.0, method="quadrature")
    assert far.value == 0.0 and far.upper >= exact.gaussian_delta(50.0 - 1 / 3.0, 1.0)  # Laplace shifts loss by <= 1/3
