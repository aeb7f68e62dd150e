"""Tests for afa.engines.certified: the certified delta bracket of Zhu, Dong & Wang 2022
App. E (Algorithm 2, Lemma 40, Corollary 41, Theorem 44).

Ground truth: the exact composed Gaussian (Sommer, Meiser & Mohammadi 2019, Thm 5) in 40-digit
mpmath; the exact single Laplace use and the exact k-fold Laplace composition
(tests/_reference.py); the one-use subsampled delta by mpmath quadrature
(tests/_subsampling_reference.py); the literature eps(1e-5) of the Poisson-subsampled Gaussian.

Measured with the default cells = 2**18 (2 shared cores, numpy 2.4):

* Poisson-subsampled Gaussian, q = 0.01, sigma = 1, max over remove / add at the reference eps:
  k = 100,  eps = 0.718036: delta in [9.999842e-06, 9.999989e-06], relative width 1.5e-5
  (the literature eps is 0.718036 to 6 decimals; the bracket gives eps(1e-5) in
  [0.7180345, 0.7180359]), 0.7 - 0.8 s a direction;
  k = 1000, eps = 1.828237: delta in [9.999704e-06, 1.000024e-05], relative width 5.4e-5
  (eps(1e-5) in [1.828233, 1.828240]), 0.5 - 0.6 s a direction.
* Gaussian, mu = sqrt(k) / sigma = 1, eps in [0, 4]: absolute width <= 7e-8 (k = 1),
  2.4e-7 (k = 10), 9e-7 (k = 1000), 8e-6 (k = 10 000); relative width at delta = 4.7e-5:
  1.6e-6, 3.6e-6, 4.1e-5, 3.9e-4.
* Laplace, b = 1: width 2e-8 (k = 1), 5e-8 (k = 10).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest

from afa.engines.certified import _GridMeasure, _LossGrid, certified_delta
from afa.mechanisms.noise_pair import NoiseMixturePair

sys.path.insert(0, str(Path(__file__).parent))
from _reference import laplace_delta_mpmath  # noqa: E402
from _subsampling_reference import delta_one_use_mpmath  # noqa: E402

FAST = 2 ** 16  # cells for the quick tests


def gaussian_pair(sigma: float) -> NoiseMixturePair:
    return NoiseMixturePair("gaussian", sigma, (1.0,), (0.0,), (0.0,), (0.0,))


def laplace_pair(scale: float, shift: float = 1.0) -> NoiseMixturePair:
    return NoiseMixturePair("laplace", scale, (shift,), (0.0,), (0.0,), (0.0,))


def poisson_remove_pair(noise: str, scale: float, q: float) -> NoiseMixturePair:
    """A = (1 - q) mu + q mu(. - 1), B = mu: the remove direction; .swapped() is add."""
    return NoiseMixturePair(noise, scale, (0.0, 1.0), (math.log1p(-q), math.log(q)), (0.0,), (0.0,))


def exact_gaussian_delta(epsilons, mu: float) -> np.ndarray:
    """Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) in 40-digit arithmetic."""
    with mp.workdps(40):
        m = mp.mpf(mu)
        return np.array([float(mp.ncdf(-mp.mpf(e) / m + m / 2) - mp.exp(e) * mp.ncdf(-mp.mpf(e) / m - m / 2))
                         for e in np.ravel(epsilons)])


def assert_contains(lower, exact, upper):
    assert np.all(lower <= exact), (lower, exact)
    assert np.all(exact <= upper), (exact, upper)


# -- Gaussian: exact composed delta --------------------------------------------------------


@pytest.mark.parametrize("count, sigma, width", [(1, 1.0, 1e-6), (10, 3.0, 2e-6), (1000, 30.0, 3e-5)])
def test_gaussian_bracket_contains_exact_composition(count, sigma, width):
    eps = np.array([-0.5, 0.0, 0.5, 1.0, 2.0, 4.0, 8.0])
    lower, upper = certified_delta(gaussian_pair(sigma), count, eps, cells=FAST)
    exact = exact_gaussian_delta(eps, math.sqrt(count) / sigma)
    assert_contains(lower, exact, upper)
    assert np.max(upper - lower) < width


def test_gaussian_ten_thousand_compositions():
    eps = np.array([0.0, 1.0, 3.0])
    lower, upper = certified_delta(gaussian_pair(100.0), 10_000, eps, cells=FAST)
    assert_contains(lower, exact_gaussian_delta(eps, 1.0), upper)
    assert np.max(upper - lower) < 3e-4


def test_gaussian_width_shrinks_as_cells_grow():
    eps = np.array([0.0, 1.0, 2.0])
    exact = exact_gaussian_delta(eps, 1.0)
    widths = []
    for cells in (2 ** 10, 2 ** 12, 2 ** 14, 2 ** 16):
        lower, upper = certified_delta(gaussian_pair(math.sqrt(10)), 10, eps, cells=cells)
        assert_contains(lower, exact, upper)
        widths.append(np.max(upper - lower))
    assert all(finer < coarser / 3 for coarser, finer in zip(widths, widths[1:])), widths


# -- Laplace ---------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [0.5, 1.0, 2.0])
def test_laplace_single_use_exact(scale):
    a = 1 / scale
    eps = np.linspace(0.0, a, 7)
    lower, upper = certified_delta(laplace_pair(scale), 1, eps, cells=2 ** 14)
    assert_contains(lower, -np.expm1((eps - a) / 2), upper)
    assert np.max(upper - lower) < 1e-6


def test_laplace_composition_contains_exact_reference():
    eps = np.array([0.0, 0.5, 1.0, 2.5])
    lower, upper = certified_delta(laplace_pair(1.0), 10, eps, cells=FAST)
    exact = np.array([laplace_delta_mpmath(e, 10, 1.0) for e in eps])
    assert_contains(lower, exact, upper)
    assert np.max(upper - lower) < 1e-6


def test_laplace_negative_shift_single_use_exact():
    eps = np.linspace(0.0, 1.0, 5)
    lower, upper = certified_delta(laplace_pair(1.0, shift=-1.0), 1, eps, cells=2 ** 14)
    assert_contains(lower, -np.expm1((eps - 1.0) / 2), upper)


# -- Poisson subsampling ---------------------------------------------------------------------


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_subsampled_single_use_contains_mpmath(noise, direction):
    pair = poisson_remove_pair(noise, 1.0, 0.1)
    pair = pair if direction == "remove" else pair.swapped()
    eps = np.array([0.02, 0.15])
    lower, upper = certified_delta(pair, 1, eps, cells=FAST)
    exact = np.array([float(delta_one_use_mpmath(e, noise, 1.0, 0.1, relation=direction)) for e in eps])
    assert_contains(lower, exact, upper)
    assert np.max(upper - lower) < 1e-6


@pytest.mark.parametrize("count, reference_epsilon, relative_width",
                         [(100, 0.718036, 3e-5), (1000, 1.828237, 1e-4)])
def test_poisson_subsampled_gaussian_reference_epsilon(count, reference_epsilon, relative_width):
    """q = 0.01, sigma = 1: eps(1e-5) = 0.718036 (k = 100), 1.828237 (k = 1000), to 6 decimals.

    delta is decreasing, so a reference rounded to 6 decimals means
    delta(eps_ref + 5e-7) <= 1e-5 <= delta(eps_ref - 5e-7) for the max over the directions.
    Measured (default cells): k = 100: [9.999843e-06, 9.999989e-06] at eps_ref;
    k = 1000: [9.999712e-06, 1.000024e-05].
    """
    remove = poisson_remove_pair("gaussian", 1.0, 0.01)
    eps = reference_epsilon + np.array([-5e-7, 0.0, 5e-7])
    bounds = [certified_delta(pair, count, eps) for pair in (remove, remove.swapped())]
    lower = np.maximum(bounds[0][0], bounds[1][0])
    upper = np.maximum(bounds[0][1], bounds[1][1])
    assert lower[2] <= 1e-5 <= upper[0]
    assert (upper[1] - lower[1]) / 1e-5 < relative_width


# -- invariants, rounding, shapes ------------------------------------------------------------


def test_bounds_are_ordered_and_valid():
    eps = np.linspace(-3.0, 6.0, 19)
    for pair in (poisson_remove_pair("gaussian", 0.8, 0.05), poisson_remove_pair("laplace", 0.7, 0.2)):
        for direction in (pair, pair.swapped()):
            lower, upper = certified_delta(direction, 20, eps, cells=2 ** 12)
            assert np.all(0 <= lower) and np.all(lower <= upper) and np.all(upper <= 1)
            assert np.all(lower >= -np.expm1(np.minimum(eps, 0.0)))  # delta >= (1 - e^eps)_+


def test_identical_sides_give_the_trivial_profile():
    pair = NoiseMixturePair("gaussian", 1.0, (0.3,), (0.0,), (0.3,), (0.0,))
    lower, upper = certified_delta(pair, 50, [-1.0, 0.0, 1.0], cells=2 ** 12)
    assert lower[0] == pytest.approx(-math.expm1(-1.0), abs=1e-12)
    assert np.all(upper[1:] < 1e-10) and np.all(lower[1:] == 0)


def test_zero_weight_component_is_ignored():
    with_empty = NoiseMixturePair("gaussian", 2.0, (0.0, 1.0), (-math.inf, 0.0), (0.0,), (0.0,))
    eps = np.array([0.0, 0.5, 1.0])
    lower, upper = certified_delta(with_empty, 5, eps, cells=FAST)
    assert_contains(lower, exact_gaussian_delta(eps, math.sqrt(5) / 2), upper)


@pytest.mark.parametrize("size, count", [(50, 1), (40, 10), (30, 100), (8, 1000)])
def test_the_powers_of_the_grid_measures_bracket_the_exact_convolution(size, count):
    """The k-fold power of a one-step grid measure (the discretized PLD's FFT power) bounds delta of the exact
    k-fold convolution of that measure (repeated in long double): from above for the upper bound's
    (pessimistic) measure, from below for the lower bound's (optimistic)."""
    rng = np.random.default_rng(3)
    masses = rng.random(size) ** 8
    masses /= masses.sum() * (1 + 1e-9)
    grid = _LossGrid(0.0, 2.0 ** -6)
    eps = np.linspace(-0.2, 0.6, 9) * count ** 0.5
    for pessimistic in (True, False):
        measure = _GridMeasure.of(np.arange(size) - size // 2, masses, 0.0, grid, pessimistic)
        exact = np.array([1.0], dtype=np.longdouble)
        for _ in range(count):
            exact = np.convolve(exact, measure.pld.probs.astype(np.longdouble))
        losses = grid.step * (count * measure.pld.offset + np.arange(exact.size))
        truth = np.array([np.sum(exact * -np.expm1(np.minimum(e - losses, 0.0).astype(np.longdouble)))
                          for e in eps], dtype=float)
        bound = measure.power(count, 1e-25, None).delta(eps)
        if pessimistic:
            assert np.all(bound >= truth * (1 - 1e-12))
        else:
            assert np.all(bound <= truth * (1 + 1e-12))


def test_shapes_follow_epsilons():
    pair = gaussian_pair(1.0)
    lower, upper = certified_delta(pair, 2, 0.5, cells=2 ** 10)
    assert lower.shape == upper.shape == ()
    lower, upper = certified_delta(pair, 2, [[0.0, 1.0], [2.0, 3.0]], cells=2 ** 10)
    assert lower.shape == upper.shape == (2, 2)
    lower, upper = certified_delta(pair, 2, [], cells=2 ** 10)
    assert lower.shape == upper.shape == (0,)


@pytest.mark.parametrize("kwargs, name", [
    ({"count": 0}, "count"), ({"count": -3}, "count"), ({"count": 2.5}, "count"), ({"count": True}, "count"),
    ({"cells": 1}, "cells"), ({"cells": 100.5}, "cells"),
    ({"reach": 0.0}, "reach"), ({"reach": -1.0}, "reach"), ({"reach": math.nan}, "reach"),
    ({"reach": math.inf}, "reach"),
    ({"epsilons": [0.0, math.nan]}, "epsilons"), ({"epsilons": [math.inf]}, "epsilons"),
])
def test_invalid_arguments_name_the_parameter(kwargs, name):
    arguments = {"pair": gaussian_pair(1.0), "count": 3, "epsilons": [0.0], "cells": 2 ** 10} | kwargs
    with pytest.raises(ValueError, match=name):
        certified_delta(**arguments)


def test_pair_must_be_a_noise_mixture_pair():
    with pytest.raises(TypeError, match="pair"):
        certified_delta((1.0, 0.0), 3, [0.0])


# -- random mixtures against quadrature -------------------------------------------------------


def test_random_mixtures_single_use_against_quadrature():
    """Random Gaussian / Laplace mixture pairs, one use: integral of (A - e^eps B)_+ split at the roots."""
    from scipy import integrate, optimize
    from scipy.special import logsumexp

    rng = np.random.default_rng(11)
    eps = np.array([-0.5, 0.0, 0.3, 1.0])
    for trial in range(16):
        noise = ("gaussian", "laplace")[trial % 2]
        scale = float(np.exp(rng.uniform(math.log(0.3), math.log(3.0))))
        sides = []
        for _side in range(2):
            n = int(rng.integers(1, 4))
            log_w = np.log(rng.random(n) + 0.05)
            sides += [tuple(float(c) for c in rng.uniform(0.0, 2.0, n).round(3)), tuple(log_w - logsumexp(log_w))]
        pair = NoiseMixturePair(noise, scale, *sides)
        lower, upper = certified_delta(pair, 1, eps, cells=2 ** 14)
        for e, low, high in zip(eps, lower, upper):
            exact = _single_use_delta(pair, e, integrate, optimize)
            assert low <= exact + 1e-12 and exact <= high + 1e-12, (pair, e, low, exact, high)


def _single_use_delta(pair: NoiseMixturePair, eps: float, integrate, optimize) -> float:
    """int (A - e^eps B)_+ by quad between the roots of L(o) = eps and the kinks."""
    def density(o, shifts, log_weights):
        return sum(math.exp(w + float(pair.log_mu(o - c))) for c, w in zip(shifts, log_weights))

    def excess(o):
        return density(o, pair.a_shifts, pair.a_log_weights) - math.exp(eps) * density(o, pair.b_shifts,
                                                                                        pair.b_log_weights)

    far = 60 * pair.scale + 3
    grid = np.linspace(-far, far, 24001)
    gap = pair.privacy_loss(grid) - eps
    roots = [optimize.brentq(lambda o: float(pair.privacy_loss(np.array([o]))[0]) - eps, grid[i], grid[i + 1])
             for i in np.flatnonzero(np.sign(gap[:-1]) * np.sign(gap[1:]) < 0)]
    breaks = sorted(set(roots) | set(pair.a_shifts) | set(pair.b_shifts))
    pieces = list(zip([-np.inf] + breaks, breaks + [np.inf]))
    total = 0.0
    for low, high in pieces:
        middle = (low + high) / 2 if np.isfinite(low + high) else (high - 1 if np.isfinite(high) else low + 1)
        if excess(middle) > 0:
            total += integrate.quad(excess, low, high, limit=200, epsabs=1e-15, epsrel=1e-13)[0]
    return total


@pytest.mark.slow
def test_tiny_delta_keeps_a_finite_certified_lower_epsilon():
    """At delta = 1e-30 the certified bracket stays finite at both ends (its truncated mass follows delta and
    its powers are tilted), without overflow warnings, and holds the contour method's 7.8134519 (an
    independent engine, wide node budget) and overlaps the PLD's certified bracket."""
    import warnings

    import afa

    acc = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01), 100)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = acc.epsilon_result(1e-30, method="certified")
    assert result.certified and math.isfinite(result.lower) and math.isfinite(result.upper)
    assert result.lower <= 7.8134519 <= result.upper and result.upper - result.lower < 1e-4
    pld = acc.epsilon_result(1e-30, method="pld")
    assert pld.lower <= result.upper and result.lower <= pld.upper
