"""f-DP trade-off curves from the privacy profile and back (Zhu, Dong & Wang 2022, App. B, Lemmas 20-21).

References (computed here, not by afa):
* the Gaussian trade-off function G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu) (Dong, Roth & Su 2022);
* Neyman-Pearson for a finite pair: T[P, Q] is the piecewise-linear curve through
  (sum_{j<=k} P_j, 1 - sum_{j<=k} Q_j), outputs sorted by decreasing Q_j / P_j;
  its hockey-stick divergences by direct summation;
* the numbers printed in Zhu, Dong & Wang 2022, Sec. 3 (with Fig. 1): the Gaussian mechanism with sigma = 1
  is (0.277, 0.3)-DP; randomized response with p = e/(1+e) is (eps, 0.3)-DP for no eps < 0.471.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtr, ndtri

import afa
from afa.views.tradeoff import privacy_profile_from_tradeoff, tradeoff_curve, tradeoff_from_profile

ALPHAS = np.concatenate(([0.0, 1e-300, 1e-12, 1e-6], np.linspace(0.001, 0.999, 41), [1 - 1e-9, 1.0]))


def gaussian_tradeoff(alphas, mu):
    return ndtr(-ndtri(alphas) - mu)  # Phi(Phi^{-1}(1 - alpha) - mu) without forming 1 - alpha


@pytest.mark.parametrize("sigma, count", [(10.0, 1), (1.0, 1), (2.0, 4), (0.5, 9), (0.2, 1)])
def test_composed_gaussian_is_g_mu(sigma, count):
    mu = math.sqrt(count) / sigma
    acc = afa.Accountant().compose(afa.Gaussian(sigma), times=count)
    curve, error = tradeoff_curve(acc, ALPHAS, with_error=True)
    truth = gaussian_tradeoff(ALPHAS, mu)
    assert np.all(curve <= truth + 1e-15)  # built from upper bounds on delta: below the true curve
    assert np.all(truth <= curve + error + 1e-15)  # the stated error bounds the distance
    assert np.max(error) <= 2e-7
    # a coarse grid: a larger error, still a true bound
    coarse, coarse_error = tradeoff_curve(acc, ALPHAS, points=16, with_error=True)
    assert np.all(coarse <= truth + 1e-15) and np.all(truth <= coarse + coarse_error + 1e-15)


def test_golden_section_route_is_accurate_to_1e_10():
    """tradeoff_from_profile maximises each alpha's bracket: 1e-10 of G_mu from the closed-form profile."""
    mu = 1.5
    curve = tradeoff_from_profile(lambda eps: afa.numerics.exact.gaussian_delta(eps, mu), ALPHAS)
    truth = gaussian_tradeoff(ALPHAS, mu)
    assert np.max(np.abs(curve - truth)) <= 1e-10


def test_curve_from_an_upper_bound_on_delta_lies_below():
    """Any delta' >= delta gives a valid, lower curve (the safe direction)."""
    mu = 1.0
    profile = lambda eps: afa.numerics.exact.gaussian_delta(eps, mu)
    loose = tradeoff_from_profile(lambda eps: np.minimum(profile(eps) + 1e-3, 1.0), ALPHAS)
    assert np.all(loose <= gaussian_tradeoff(ALPHAS, mu))
    assert np.max(gaussian_tradeoff(ALPHAS, mu) - loose) > 5e-4


def _random_composition(seed: int) -> afa.Accountant:
    rng = np.random.default_rng(seed)
    acc = afa.Accountant()
    acc.compose(afa.Gaussian(float(rng.uniform(1.0, 4.0))), int(rng.integers(1, 4)))
    for _ in range(2):
        acc.compose(afa.Laplace(float(rng.uniform(0.5, 5.0))), int(rng.integers(1, 5)))
        acc.compose(afa.RandomizedResponse(float(rng.uniform(0.5, 0.9))), int(rng.integers(1, 5)))
    return acc


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_compositions_give_trade_off_functions(seed):
    """Convex, non-increasing, 0 <= f <= 1 - alpha, f(0) = 1 and f(1) = 0 (Dong et al. Prop. 2.2)."""
    acc = _random_composition(seed)
    alphas = np.linspace(0, 1, 201)
    curve, error = tradeoff_curve(acc, alphas, with_error=True)
    assert np.all(curve >= 0) and np.all(curve <= 1 - alphas + 1e-15)
    assert np.all(np.diff(curve) <= 1e-12)
    assert np.all(np.diff(curve, 2) >= -1e-10)
    assert curve[0] == pytest.approx(1.0, abs=1e-9) and curve[-1] == 0.0
    assert np.all(error >= 0) and np.max(error) <= 1e-3


@pytest.mark.parametrize("build", [
    lambda: afa.Accountant().compose(afa.Gaussian(1.5), 3),
    lambda: _random_composition(3),
])
def test_lemma_20_recovers_the_privacy_profile(build):
    acc = build()
    epsilons = np.array([-1.0, 0.0, 0.3, 1.0, 2.5, 4.0])
    # the curve once, densely (both ends resolved geometrically), interpolated linearly between its points
    dense = np.unique(np.concatenate((np.geomspace(1e-12, 0.5, 2000), 1 - np.geomspace(1e-12, 0.5, 2000),
                                      np.linspace(0, 1, 2001))))
    curve = tradeoff_curve(acc, dense)
    recovered = privacy_profile_from_tradeoff(lambda a: np.interp(a, dense, curve), epsilons)
    assert np.max(np.abs(recovered - acc.privacy_profile(epsilons))) <= 1e-4


def _hockey_stick(p, q, epsilon):
    with np.errstate(over="ignore"):
        return float(np.sum(np.maximum(np.where(q > 0, p - np.exp(epsilon) * np.where(q > 0, q, 1.0), p), 0.0)))


def _neyman_pearson(p, q, alphas):
    order = np.argsort(-(q / np.where(p > 0, p, 1e-300)))  # reject where Q is most likely relative to P
    type_one = np.concatenate(([0.0], np.cumsum(p[order])))
    type_two = np.concatenate(([1.0], 1 - np.cumsum(q[order])))
    return np.interp(alphas, type_one, type_two)


def test_asymmetric_pair_uses_each_direction_in_its_term():
    """T[P, Q] needs H(Q||P) in the first term of Lemma 21 and H(P||Q) in the second."""
    p, q = np.array([0.6, 0.3, 0.1, 0.0]), np.array([0.05, 0.25, 0.4, 0.3])
    forward = np.vectorize(lambda e: _hockey_stick(p, q, e))
    reverse = np.vectorize(lambda e: _hockey_stick(q, p, e))
    alphas = np.linspace(0, 1, 51)
    curve = tradeoff_from_profile(forward, alphas, delta_reverse=reverse)
    assert np.max(np.abs(curve - _neyman_pearson(p, q, alphas))) <= 1e-11
    swapped = tradeoff_from_profile(reverse, alphas, delta_reverse=forward)
    assert np.max(np.abs(swapped - _neyman_pearson(q, p, alphas))) <= 1e-11
    assert np.max(np.abs(curve - swapped)) > 0.05
    # Lemma 20 from T[P, Q] gives H(Q||P)
    epsilons = np.array([-0.5, 0.0, 0.5, 1.5])
    back = privacy_profile_from_tradeoff(lambda a: _neyman_pearson(p, q, a), epsilons)
    assert np.allclose(back, reverse(epsilons), atol=1e-12, rtol=0)


def test_fig1_printed_numbers():
    """Zhu, Dong & Wang 2022, Sec. 3: GM (sigma = 1) is (0.277, 0.3)-DP; RR (p = e/(1+e)) is (eps, 0.3)-DP for no eps
    < 0.471.

    Through the f-DP route: the trade-off curve of each, converted back with Lemma 20.  eps(0.3)
    rounds to 0.277 for GM (delta(0.2765) > 0.3 >= delta(0.2775)) and truncates to 0.471 for RR.
    """
    gaussian = afa.Accountant().compose(afa.Gaussian(1.0))
    rr = afa.Accountant().compose(afa.RandomizedResponse(math.e / (1 + math.e)))
    for acc, (low, high) in ((gaussian, (0.2765, 0.2775)), (rr, (0.471, 0.472))):
        curve = lambda a, acc=acc: tradeoff_from_profile(acc.privacy_profile, a)
        profile = privacy_profile_from_tradeoff(curve, [low, high])
        assert profile[0] > 0.3 >= profile[1]
        assert low <= acc.epsilon(0.3) < high


def test_validation():
    acc = afa.Accountant().compose(afa.Gaussian(1.0))
    with pytest.raises(ValueError, match="alphas"):
        tradeoff_curve(acc, [0.5, 1.5])
    with pytest.raises(ValueError, match="alphas"):
        tradeoff_curve(acc, [math.nan])
    with pytest.raises(TypeError, match="accountant"):
        tradeoff_curve(afa.Gaussian(1.0), [0.5])
    with pytest.raises(ValueError, match="epsilons"):
        privacy_profile_from_tradeoff(lambda a: 1 - a, [math.inf])
    assert tradeoff_curve(acc, np.full((2, 3), 0.25)).shape == (2, 3)


def test_accountant_directions_give_each_ordered_pair():
    """tradeoff_curve(direction=...) of an accountant: T[P, Q] for the first direction (the composed pair
    (P, Q), here one use of a finite pair) and T[Q, P] for the second, against Neyman-Pearson; the default
    symmetric curve lies below both."""
    p, q = np.array([0.6, 0.3, 0.1, 0.0]), np.array([0.05, 0.25, 0.4, 0.3])
    acc = afa.Accountant().compose(afa.DiscreteMechanism(p, q))
    alphas = np.linspace(0, 1, 21)
    forward, forward_error = tradeoff_curve(acc, alphas, method="exact", direction="remove", with_error=True)
    reverse, reverse_error = tradeoff_curve(acc, alphas, method="exact", direction="add", with_error=True)
    for curve, error, truth in ((forward, forward_error, _neyman_pearson(p, q, alphas)),
                                (reverse, reverse_error, _neyman_pearson(q, p, alphas))):
        assert np.all(curve <= truth + 1e-12) and np.all(truth <= curve + error + 1e-12)
        assert np.max(error) <= 5e-6  # the kinks of the profile are approached by bisecting the grid
    symmetric = tradeoff_curve(acc, alphas, method="exact")
    assert np.all(symmetric <= np.minimum(forward, reverse) + 1e-12)
    with pytest.raises(ValueError, match="direction"):
        tradeoff_curve(acc, alphas, direction="forward")


def test_grid_curve_of_dp_sgd_against_the_golden_section_on_the_contour():
    """A subsampled Gaussian: the default curve (the PLD's certified profile on a grid) lies below the
    golden-section maximisation of the contour method's profile (a second engine, accurate to about
    1e-12), within its stated error."""
    acc = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.05), 100)
    alphas = np.array([0.01, 0.3])
    curve, error = tradeoff_curve(acc, alphas, with_error=True)
    slow = tradeoff_from_profile(lambda eps: acc.privacy_profile(eps, method="contour", estimate=True), alphas)
    assert np.all(curve <= slow + 1e-10)
    assert np.all(slow <= curve + error + 1e-10)
    assert np.max(error) <= 1e-5


def test_curve_options_are_checked():
    acc = afa.Accountant().compose(afa.Gaussian(1.0))
    with pytest.raises(ValueError, match="points"):
        tradeoff_curve(acc, [0.5], points=3)
    with pytest.raises(TypeError, match="points"):
        tradeoff_curve(acc, [0.5], points=100.5)
    with pytest.raises(ValueError, match="method"):
        tradeoff_curve(acc, [0.5], method="fft")
