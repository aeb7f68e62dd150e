"""Tests for the discretized PLD / FFT backend (afa/engines/pld.py).

Every expected value comes from an independent source: the closed-form privacy profile of the
composed Gaussian mechanism (Sommer, Meiser & Mohammadi 2019, Thm 5), exact binomial sums for
randomized response and for the (eps, delta)-DP pair of Google DP team 2025, Sec. 3.7,
closed-form Laplace hockey-stick curves, and brute-force convolution (numpy) of small grid PMFs.
Pessimistic answers must be >= the truth and optimistic ones <= it (certified, rounding included).
"""

from __future__ import annotations

import logging
import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq
from scipy.special import log_ndtr, logsumexp
from scipy.stats import binom

import afa
from afa import options as afa_options
from afa._fft import power_rounding
from afa.engines import pld
from afa.engines.base import PLDEngine
from afa.engines.pld import (
    DiscretePLD,
    PLDTooLargeError,
    connect_the_dots,
    greedy_hull_optimistic,
    privacy_buckets,
)
from afa.mechanisms.loss_tails import LossTails

# ----- mechanisms (one direction of a dominating pair, seen through its loss tails) --------

class GaussianTails(LossTails):
    """L ~ N(mu^2/2, mu^2) under P, N(-mu^2/2, mu^2) under Q (Sommer, Meiser & Mohammadi 2019, Sec. 5)."""

    inf_mass = 0.0
    loss_range = (-math.inf, math.inf)

    def __init__(self, mu: float):
        self.mu = mu

    def log_tails(self, epsilons):
        epsilons = np.asarray(epsilons, dtype=float)
        return log_ndtr(self.mu / 2 - epsilons / self.mu), log_ndtr(-self.mu / 2 - epsilons / self.mu)


class AtomTails(LossTails):
    """Finitely many losses with P-masses; Q-mass p e^{-loss}; ``inf_mass`` at +inf."""

    def __init__(self, losses, p_masses, inf_mass=0.0):
        self.losses, self.p = np.asarray(losses, float), np.asarray(p_masses, float)
        self.inf_mass = inf_mass
        self.loss_range = (float(self.losses.min()), float(self.losses.max()))

    def log_tails(self, epsilons):
        above = np.asarray(epsilons, dtype=float)[..., None] < self.losses
        p_tail = np.sum(np.where(above, self.p, 0.0), axis=-1)
        q_tail = np.sum(np.where(above, self.p * np.exp(-self.losses), 0.0), axis=-1)
        with np.errstate(divide="ignore"):
            return np.log(p_tail), np.log(q_tail)


def randomized_response(p: float) -> AtomTails:
    c = math.log(p / (1 - p))
    return AtomTails([-c, c], [1 - p, p])


def approximate_dp(epsilon: float, delta: float) -> AtomTails:
    """The dominating pair of any (epsilon, delta)-DP algorithm (Google DP team 2025, Sec. 3.7, Thm 1)."""
    weight = (1 - delta) / (1 + math.exp(epsilon))
    return AtomTails([-epsilon, epsilon], [weight, weight * math.exp(epsilon)], inf_mass=delta)


class LaplaceTails(LossTails):
    """Laplace noise of scale b, sensitivity 1: P = Lap(0, b), Q = Lap(1, b), L in [-1/b, 1/b]."""

    inf_mass = 0.0

    def __init__(self, b: float):
        self.b = b
        self.loss_range = (-1 / b, 1 / b)

    def log_tails(self, epsilons):
        epsilons = np.asarray(epsilons, dtype=float)
        b = self.b
        clipped = np.clip(epsilons, -1 / b, 1 / b)
        # L > eps  <=>  o < (1 - b eps) / 2 for the P-sample o
        log_p = np.log(1 - 0.5 * np.exp(-(1 - b * clipped) / (2 * b)))
        log_q = math.log(0.5) - (1 + b * clipped) / (2 * b)
        inside = lambda value: np.where(epsilons < -1 / b, 0.0, np.where(epsilons >= 1 / b, -np.inf, value))
        return inside(log_p), inside(log_q)


class SubsampledGaussianTails(LossTails):
    """Poisson-subsampled Gaussian, remove direction: P = (1-q) N(0, s^2) + q N(1, s^2), Q = N(0, s^2)."""

    inf_mass = 0.0

    def __init__(self, q: float, sigma: float):
        self.q, self.sigma = q, sigma
        self.loss_range = (math.log1p(-q), math.inf)

    def log_tails(self, epsilons):
        epsilons = np.asarray(epsilons, dtype=float)
        q, s = self.q, self.sigma
        with np.errstate(over="ignore"):
            ratio = np.expm1(epsilons) + q  # L > eps  <=>  q e^{(o - 1/2)/s^2} > ratio (inf: no o)
        with np.errstate(divide="ignore", invalid="ignore"):
            threshold = 0.5 + s * s * np.log(ratio / q)
            log_q = np.where(ratio > 0, log_ndtr(-threshold / s), 0.0)
            log_shifted = np.where(ratio > 0, log_ndtr((1 - threshold) / s), 0.0)
        return np.logaddexp(math.log1p(-q) + log_q, math.log(q) + log_shifted), log_q


# ----- independent truths ---------------------------------------------------------------------

def gaussian_log_delta(mu: float, epsilons) -> np.ndarray:
    """log delta(eps) of the Gaussian pair with mu = sensitivity / sigma (Sommer, Meiser & Mohammadi 2019, Thm 5):
    delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), in log space."""
    epsilons = np.asarray(epsilons, dtype=float)
    upper, lower = log_ndtr(mu / 2 - epsilons / mu), log_ndtr(-mu / 2 - epsilons / mu)
    return upper + np.log(-np.expm1(epsilons + lower - upper))


def gaussian_delta(mu: float, epsilons) -> np.ndarray:
    return np.exp(gaussian_log_delta(mu, epsilons))


def gaussian_epsilon(mu: float, delta: float) -> float:
    return brentq(lambda e: float(gaussian_log_delta(mu, e)) - math.log(delta), 0.0, 80.0, xtol=1e-13)


def atoms_delta(losses, log_masses, inf_mass, epsilons) -> np.ndarray:
    """inf_mass + sum_j w_j (1 - e^{eps - l_j})_+ by direct summation."""
    epsilons = np.asarray(epsilons, dtype=float)[:, None]
    terms = np.exp(log_masses) * -np.expm1(np.minimum(epsilons - losses, 0.0))
    return inf_mass + terms.sum(axis=1)


def two_atom_power_delta(low, high, p_high, inf_mass, count, epsilons) -> np.ndarray:
    """delta of the count-fold composition of {low: (1-a)(1-p), high: (1-a)p, +inf: a}: binomial sum."""
    j = np.arange(count + 1)
    log_pmf = binom.logpmf(j, count, p_high)
    log_masses = log_pmf - logsumexp(log_pmf) + count * math.log1p(-inf_mass)  # scipy's pmf is off by ~k u
    return atoms_delta(j * high + (count - j) * low, log_masses, -math.expm1(count * math.log1p(-inf_mass)), epsilons)


def laplace_delta(b: float, epsilons) -> np.ndarray:
    """Hockey-stick divergence of Lap(0, b) against Lap(1, b), closed form."""
    epsilons = np.asarray(epsilons, dtype=float)
    inside = 1 - np.exp((epsilons - 1 / b) / 2)
    return np.where(epsilons >= 1 / b, 0.0, np.where(epsilons <= -1 / b, -np.expm1(epsilons), inside))


def grid_power_delta(probs, offset, inf_mass, interval, count, epsilons) -> np.ndarray:
    """delta of the count-fold self-convolution of a grid PMF by repeated numpy convolution."""
    result = np.array([1.0])
    for _ in range(count):
        result = np.convolve(result, probs)
    losses = interval * (count * offset + np.arange(result.size))
    with np.errstate(divide="ignore"):
        log_masses = np.log(result)
    # composed mass at +inf: (F + a)^count - F^count = (F + a)^count (1 - (1 - a / (F + a))^count), formed
    # without the cancellation of the plain difference (which is off by ~1e-16 absolute, 1e-6 of a 1e-9 mass)
    total = float(np.sum(probs)) + inf_mass
    composed_inf = total ** count * -math.expm1(count * math.log1p(-inf_mass / total)) if inf_mass else 0.0
    return atoms_delta(losses, log_masses, composed_inf, epsilons)


BUILDERS = {
    "buckets_pessimistic": (lambda t, h, m=pld.DEFAULT_TAIL_MASS: privacy_buckets(t, h, True, m), True),
    "buckets_optimistic": (lambda t, h, m=pld.DEFAULT_TAIL_MASS: privacy_buckets(t, h, False, m), False),
    "connect_the_dots": (connect_the_dots, True),
    "greedy_hull": (greedy_hull_optimistic, False),
}


def assert_bracket(bound, exact, pessimistic, what=""):
    bound, exact = np.asarray(bound), np.asarray(exact)
    if pessimistic:
        assert np.all(bound >= exact), (what, np.min(bound - exact))
    else:
        assert np.all(bound <= exact), (what, np.max(bound - exact))


# ----- single mechanisms ---------------------------------------------------------------------

EPSILONS = np.array([-1.0, -0.2, 0.0, 0.3, 1.0, 2.0, 3.5, 5.0])


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("interval", [1e-2, 1e-3, 1e-4])
@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
def test_single_gaussian_bracket(builder, interval, mu):
    build, pessimistic = BUILDERS[builder]
    bound = build(GaussianTails(mu), interval).delta(EPSILONS)
    exact = gaussian_delta(mu, EPSILONS)
    assert_bracket(bound, exact, pessimistic, builder)
    # The error is first order in the interval for buckets, second order for the other two.
    order = 1 if builder.startswith("buckets") else 2
    assert np.all(np.abs(bound - exact) <= 2 * (10 * interval) ** order * exact + 1e-12)


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("tails, exact", [
    (LaplaceTails(1.0), lambda e: laplace_delta(1.0, e)),
    (LaplaceTails(0.4), lambda e: laplace_delta(0.4, e)),
    (randomized_response(0.8), lambda e: two_atom_power_delta(-math.log(4), math.log(4), 0.8, 0.0, 1, e)),
    (approximate_dp(1.0, 1e-3), lambda e: two_atom_power_delta(-1.0, 1.0, math.e / (1 + math.e), 1e-3, 1, e)),
])
@pytest.mark.parametrize("interval", [0.05, 1e-3])
def test_single_atom_and_laplace_bracket(builder, tails, exact, interval):
    build, pessimistic = BUILDERS[builder]
    epsilons = np.linspace(-3, 3, 121)
    assert_bracket(build(tails, interval).delta(epsilons), exact(epsilons), pessimistic, builder)


# ----- compositions ----------------------------------------------------------------------------

@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("interval", [1e-2, 1e-3, 1e-4])
@pytest.mark.parametrize("mu, count", [(0.3, 10), (0.1, 100), (0.02, 2500), (0.01, 10_000)])
def test_composed_gaussian_bracket(builder, interval, mu, count):
    build, pessimistic = BUILDERS[builder]
    composed = build(GaussianTails(mu), interval).self_compose(count)
    epsilons = np.array([0.0, 0.5, 1.0, 2.0, 3.0, 4.0])
    total_mu = mu * math.sqrt(count)
    assert_bracket(composed.delta(epsilons), gaussian_delta(total_mu, epsilons), pessimistic, builder)


def test_composed_gaussian_brackets_shrink_with_interval():
    epsilons = np.array([0.0, 1.0, 3.0])
    exact = gaussian_delta(1.0, epsilons)
    widths = []
    for interval in (1e-2, 1e-3, 1e-4):
        upper = connect_the_dots(GaussianTails(0.1), interval).self_compose(100).delta(epsilons)
        lower = greedy_hull_optimistic(GaussianTails(0.1), interval).self_compose(100).delta(epsilons)
        widths.append(np.max((upper - lower) / exact))
    # second order: ten times finer, a hundred times narrower
    assert widths[0] < 0.05 and widths[1] < widths[0] / 80 and widths[2] < widths[1] / 80, widths


def test_compose_two_different_gaussians():
    # Gaussians with mu_1, mu_2 compose to one with sqrt(mu_1^2 + mu_2^2) (Sommer, Meiser & Mohammadi 2019, Thm 5).
    epsilons = np.array([0.0, 1.0, 2.5])
    exact = gaussian_delta(math.hypot(0.6, 0.8), epsilons)
    for builder, (build, pessimistic) in BUILDERS.items():
        composed = build(GaussianTails(0.6), 1e-3).compose(build(GaussianTails(0.8), 1e-3))
        assert_bracket(composed.delta(epsilons), exact, pessimistic, builder)
        tolerance = 1e-2 if builder.startswith("buckets") else 2e-5  # first / second order in the interval
        assert np.all(np.abs(composed.delta(epsilons) / exact - 1) < tolerance)


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("p, count", [(0.6, 40), (0.9, 7), (0.75, 300)])
@pytest.mark.parametrize("interval", [1e-2, 1e-3])
def test_randomized_response_against_binomial(builder, p, count, interval):
    build, pessimistic = BUILDERS[builder]
    c = math.log(p / (1 - p))
    epsilons = np.linspace(0, count * c, 9)[:-1]
    exact = two_atom_power_delta(-c, c, p, 0.0, count, epsilons)
    assert_bracket(build(randomized_response(p), interval).self_compose(count).delta(epsilons), exact, pessimistic)


@pytest.mark.parametrize("builder", BUILDERS)
def test_approximate_dp_keeps_mass_at_infinity(builder):
    build, pessimistic = BUILDERS[builder]
    count, epsilon, delta = 30, 0.5, 1e-4
    composed = build(approximate_dp(epsilon, delta), 1e-3).self_compose(count)
    epsilons = np.array([0.0, 1.0, 3.0, 6.0, 20.0])
    exact = two_atom_power_delta(-epsilon, epsilon, math.exp(epsilon) / (1 + math.exp(epsilon)), delta, count, epsilons)
    assert_bracket(composed.delta(epsilons), exact, pessimistic, builder)
    # Beyond count * epsilon only the mass at +inf is left, and every builder keeps it (to rounding).
    assert composed.delta(20.0) == pytest.approx(-math.expm1(count * math.log1p(-delta)), rel=1e-9)


def test_epsilon_is_infinite_below_the_mass_at_infinity():
    composed = connect_the_dots(approximate_dp(0.5, 1e-4), 1e-3).self_compose(10)
    assert composed.epsilon(5e-4) == math.inf  # 1 - (1 - 1e-4)^10 ~ 1e-3 > 5e-4
    assert math.isfinite(composed.epsilon(2e-3))


# ----- grid PMFs: the FFT (and the direct convolution of small powers) against brute force --------

# (PLDOptions.direct_power_limit, rounding_tolerance) for each path of _self_power: the direct convolution is taken
# only where the FFT's rounding would exceed the rounding tolerance.
POWER_PATHS = {"fft": (0, None), "direct": (10 ** 12, 1e-300)}


@pytest.mark.parametrize("path", POWER_PATHS)
@pytest.mark.parametrize("pessimistic", [True, False])
@pytest.mark.parametrize("count", [3, 1000, 10 ** 6])
def test_two_atom_grid_power_against_binomial(pessimistic, count, path, active_options):
    if path == "direct" and count > 1000:
        pytest.skip("a direct power of 10^6 uses is beyond any cost limit")
    limit, rounding_tolerance = POWER_PATHS[path]
    active_options(pld=afa.PLDOptions(direct_power_limit=limit))
    interval, low, high, p_high, inf_mass = 0.01, -3, 5, 0.3, 1e-9
    probs = np.zeros(high - low + 1)
    probs[0], probs[-1] = (1 - inf_mass) * (1 - p_high), (1 - inf_mass) * p_high
    base = DiscretePLD(interval, low, probs, inf_mass, pessimistic)
    composed = base.self_compose(count, 1e-12, rounding_tolerance)
    if path == "direct":  # taken: no absolute rounding slack, only underflow
        assert composed.tilt == 0 and composed.error < 1e-300
    mean = count * interval * (low + (high - low) * p_high)
    spread = math.sqrt(count) * interval * (high - low)
    epsilons = mean + spread * np.array([-1.0, 0.0, 1.0, 2.0, 4.0])
    exact = two_atom_power_delta(low * interval, high * interval, p_high, inf_mass, count, epsilons)
    bound = composed.delta(epsilons)
    assert_bracket(bound, exact, pessimistic)
    # the certified FFT rounding bound grows like count * 1e-13
    assert np.all(np.abs(bound - exact) <= 1e-6 * exact + 2e-12 + count * 5e-13)


@pytest.mark.parametrize("path", POWER_PATHS)
@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=7), st.integers(-6, 3), st.integers(1, 12),
       st.booleans(), st.floats(0.0, 0.01))
def test_grid_self_compose_against_convolution(path, weights, offset, count, pessimistic, inf_mass):
    limit, rounding_tolerance = POWER_PATHS[path]
    with afa_options.using(afa_options.current().replace(pld=afa.PLDOptions(direct_power_limit=limit))):
        check_self_compose_against_convolution(weights, offset, count, pessimistic, inf_mass, rounding_tolerance)


def check_self_compose_against_convolution(weights, offset, count, pessimistic, inf_mass, rounding_tolerance):
    weights = np.asarray(weights)
    if weights.sum() == 0:
        weights[0] = 1.0
    probs = (1 - inf_mass) * weights / weights.sum()
    interval = 0.25
    base = DiscretePLD(interval, offset, probs, inf_mass, pessimistic)
    epsilons = np.linspace(-2.0, 6.0, 17)
    exact = grid_power_delta(probs, offset, inf_mass, interval, count, epsilons)
    composed = base.self_compose(count, 1e-13, rounding_tolerance)
    if rounding_tolerance is not None and count > 1:  # the direct convolution was taken
        assert composed.error < 1e-300
    bound = composed.delta(epsilons)
    slack = 1e-15 + 1e-12 * exact  # the brute-force truth is itself rounded
    assert_bracket(bound + (slack if pessimistic else -slack), exact, pessimistic)
    assert np.all(np.abs(bound - exact) <= 1e-10 + 1e-9 * exact)
    twice = base.compose(base, tail_mass_truncation=1e-13).delta(epsilons)
    assert np.all(np.abs(twice - grid_power_delta(probs, offset, inf_mass, interval, 2, epsilons)) <= 1e-10)


def test_direct_power_is_relatively_accurate_in_the_far_tail():
    """A small power (within DIRECT_POWER_LIMIT) is a direct convolution: every output mass lies within the
    reported relative error of the exact convolution (Python fractions) -- masses from 1e-100 down to 1e-300
    included, where an FFT's rounding is absolute (about 1e-16 of the total mass) -- plus the underflow
    bound (products below the normal range, ~1e-320)."""
    from fractions import Fraction
    probs = np.exp(-np.linspace(0.0, 26.0, 40) ** 2)
    probs /= probs.sum()
    assert probs.min() < 1e-290
    base = DiscretePLD(0.1, -5, probs, 0.0, True)
    composed = base.self_compose(3, tail_mass_truncation=1e-300)
    exact = [Fraction(1)]
    for _ in range(3):
        exact = [sum((exact[j] * Fraction(float(probs[i - j])) for j in range(len(exact)) if 0 <= i - j < probs.size),
                     Fraction(0)) for i in range(len(exact) + probs.size - 1)]
    assert composed.offset == -15 and composed.probs.size == len(exact)
    assert pld._direct_power_cost(probs.size, 3) == probs.size ** 2 + probs.size * (2 * probs.size - 1)
    assert 0 < composed.relative_error < 1e-13 and composed.error < 1e-300
    for value, truth in zip(composed.probs, exact):  # (below ~1e-308 products underflow: the absolute error)
        assert abs(Fraction(float(value)) - truth) <= composed.relative_error * truth + Fraction(composed.error)
    tiny = [float(abs(Fraction(float(v)) - e) / e) for v, e in zip(composed.probs, exact) if 1e-300 < e < 1e-100]
    assert len(tiny) > 10 and max(tiny) <= composed.relative_error


def test_delta_of_composition_equals_convolution():
    epsilons = np.array([-0.5, 0.0, 0.4, 1.0, 2.0, 3.0])
    for build, pessimistic in BUILDERS.values():
        first, second = build(GaussianTails(0.7), 1e-3), build(LaplaceTails(1.5), 1e-3)
        direct = first.delta_of_composition(second, epsilons)
        convolved = first.compose(second).delta(epsilons)
        assert np.allclose(direct, convolved, rtol=1e-9, atol=1e-11)  # compose adds its FFT rounding bound
        # and brute force on the stored PMFs (numpy's direct convolution)
        losses = first.interval * (first.offset + second.offset + np.arange(first.probs.size + second.probs.size - 1))
        with np.errstate(divide="ignore"):
            log_masses = np.log(np.convolve(first.probs, second.probs))
        brute = atoms_delta(losses, log_masses, 0.0, epsilons)
        assert np.allclose(direct, brute, rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("builder", BUILDERS)
def test_truncation_moves_mass_the_safe_way(builder):
    build, pessimistic = BUILDERS[builder]
    full = build(GaussianTails(1.0), 1e-3, 1e-300)
    epsilons = np.linspace(-4, 8, 25).reshape(5, 5)
    before, after = full.delta(epsilons), full.truncated(1e-6).delta(epsilons)
    assert after.shape == (5, 5) and full.truncated(1e-6).probs.size < full.probs.size
    slack = 1e-10  # the certified bounds' rounding terms shrink with the number of grid points
    if pessimistic:
        assert np.all(before <= after + slack) and np.all(after <= before + 1e-6)
    else:
        assert np.all(after <= before + slack) and np.all(before <= after + 1e-6)
    assert np.any(np.abs(after - before) > 1e-8)


# ----- the three builders against each other --------------------------------------------------

@pytest.mark.parametrize("tails, strict", [
    (GaussianTails(0.5), True), (GaussianTails(2.0), True), (LaplaceTails(1.0), True),
    (SubsampledGaussianTails(0.1, 1.0), True), (randomized_response(0.7), True),
    (approximate_dp(1.0, 1e-3), False),  # atoms on the grid: both are exact
])
@pytest.mark.parametrize("interval", [0.05, 1e-3])
@pytest.mark.parametrize("count", [1, 20])
def test_connect_the_dots_below_privacy_buckets(tails, strict, interval, count):
    """Doroshenko et al. 2022, Cor. 4.3 (and composition preserves it)."""
    epsilons = np.linspace(-1, 4, 51)
    dots = connect_the_dots(tails, interval).self_compose(count).delta(epsilons)
    buckets = privacy_buckets(tails, interval, True).self_compose(count).delta(epsilons)
    assert np.all(dots <= buckets * (1 + 1e-9) + 1e-15)  # the atoms' rounding bounds differ slightly
    assert np.any(dots < buckets - 1e-9) == strict


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("interval", [1e-2, 1e-3])
@pytest.mark.parametrize("count", [1, 10])
def test_greedy_hull_between_optimistic_buckets_and_truth(mu, interval, count):
    epsilons = np.linspace(0, 4 * mu * math.sqrt(count), 21)
    hull = greedy_hull_optimistic(GaussianTails(mu), interval).self_compose(count).delta(epsilons)
    buckets = privacy_buckets(GaussianTails(mu), interval, False).self_compose(count).delta(epsilons)
    exact = gaussian_delta(mu * math.sqrt(count), epsilons)
    assert np.all(buckets <= hull) and np.all(hull <= exact)


class AtomlessGaussianTails(GaussianTails):
    """The same tails, declared atomless: the greedy hull then takes Q[L >= x] from Q[L > x]."""

    atomless = True


@pytest.mark.parametrize("mu, interval, count", [(0.5, 1e-3, 1), (1.0, 1e-2, 10), (2.0, 1e-3, 10)])
def test_greedy_hull_of_atomless_tails_reuses_the_grid_tails(mu, interval, count):
    """With ``atomless`` the greedy hull evaluates the tails once on the grid instead of twice (at and just below
    each point): still below the closed-form truth and within 1e-12 relative of the two-evaluation hull."""
    epsilons = np.linspace(0, 4 * mu * math.sqrt(count), 21)
    atomless = greedy_hull_optimistic(AtomlessGaussianTails(mu), interval).self_compose(count).delta(epsilons)
    twice = greedy_hull_optimistic(GaussianTails(mu), interval).self_compose(count).delta(epsilons)
    exact = gaussian_delta(mu * math.sqrt(count), epsilons)
    assert np.all(atomless <= exact)
    np.testing.assert_allclose(atomless, twice, rtol=1e-12, atol=1e-300)


def brute_force_lower_hull(alphas: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The lower convex hull at each alpha_i: the lowest of the point values there and of every chord
    between points on both sides (O(n^3))."""
    hull = np.empty(alphas.size)
    for i, alpha in enumerate(alphas):
        best = values[alphas == alpha].min()
        for j in np.flatnonzero(alphas < alpha):
            right = np.flatnonzero(alphas > alpha)
            chords = values[j] + (values[right] - values[j]) * (alpha - alphas[j]) / (alphas[right] - alphas[j])
            best = min(best, chords.min(initial=np.inf))
        hull[i] = best
    return hull


@pytest.mark.parametrize("seed", range(8))
def test_lower_hull_against_brute_force(seed):
    """The hull of the greedy builder (pooled slopes; with equal alphas, the monotone chain) against all chords:
    random points, a convex curve with noise, and a convex curve ending at 0 (the builder's top point, which the
    hull joins by one long chord)."""
    rng = np.random.default_rng(seed)
    size = 40
    losses = np.sort(rng.uniform(-3, 2, size)) if seed % 2 else np.linspace(-3, 2, size)
    if seed == 7:  # a grid finer than the rounding of e^x: equal alphas
        losses = np.concatenate((losses[:20], [1e-17, 2e-17, 3e-17], losses[23:] + 1))
    shape = seed % 3
    if shape == 0:
        candidates = rng.random(size)
    else:
        candidates = np.maximum(1 - 0.2 * np.exp(losses), 0) + 1e-3 * rng.random(size) * (shape == 1)
        candidates[-1] = 0.0
    origin = 1.0 + rng.random()
    alphas = np.concatenate(([0.0], np.exp(losses)))
    expected = brute_force_lower_hull(alphas, np.concatenate(([origin], candidates)))[1:]
    hull = pld._lower_hull_at_grid(origin, candidates, losses)
    np.testing.assert_allclose(hull, expected, rtol=1e-12, atol=1e-15)
    assert np.all(hull <= candidates + 1e-15)


def test_greedy_hull_does_not_collapse_on_coarse_grids():
    """Subsampled Gaussian (q = 0.01, sigma = 1, remove direction), 100 steps, eps(1e-5).

    At interval 1e-2 the loss is spread over about one grid step; optimistic buckets lose most of
    eps and Algorithm 2's left tangents give 0.  The fine-grid bracket (interval 1e-4) holds the truth.
    """
    tails, count, delta = SubsampledGaussianTails(0.01, 1.0), 100, 1e-5
    fine_lower = greedy_hull_optimistic(tails, 1e-4).self_compose(count).epsilon(delta)
    fine_upper = connect_the_dots(tails, 1e-4).self_compose(count).epsilon(delta)
    assert fine_upper - fine_lower < 1e-3
    coarse_hull = greedy_hull_optimistic(tails, 1e-2).self_compose(count).epsilon(delta)
    coarse_buckets = privacy_buckets(tails, 1e-2, False).self_compose(count).epsilon(delta)
    assert coarse_buckets < coarse_hull <= fine_upper
    assert coarse_hull > 0.6 * fine_lower
    medium_hull = greedy_hull_optimistic(tails, 1e-3).self_compose(10 * count).epsilon(delta)
    assert 0.99 * connect_the_dots(tails, 1e-4).self_compose(10 * count).epsilon(delta) < medium_hull


# ----- epsilon(delta) --------------------------------------------------------------------------

@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("interval", [1e-2, 1e-3])
@pytest.mark.parametrize("delta", [1e-2, 1e-5, 1e-9])
def test_epsilon_consistent_with_delta_and_exact(builder, interval, delta):
    build, pessimistic = BUILDERS[builder]
    composed = build(GaussianTails(0.2), interval).self_compose(50)
    epsilon = composed.epsilon(delta)
    assert composed.delta(epsilon) <= delta
    assert composed.delta(epsilon - 1e-9 * max(1.0, epsilon)) > delta
    exact = gaussian_epsilon(0.2 * math.sqrt(50), delta)
    assert (epsilon >= exact) if pessimistic else (epsilon <= exact)
    tolerance = 60 * interval if builder.startswith("buckets") else 4 * interval ** 2 * 50 + 1e-9
    assert abs(epsilon - exact) < tolerance


def test_epsilon_is_zero_when_delta_at_zero_is_small_enough():
    composed = connect_the_dots(GaussianTails(0.1), 1e-3)
    assert composed.epsilon(0.5) == 0.0
    assert composed.delta(0.0) <= 0.5


@pytest.mark.parametrize("delta", [1e-16, 1e-30])
def test_tiny_delta_certified_with_scaled_tail_tolerance(delta):
    """eps(delta) for 10 composed Gaussians (mu = 1 in total) at deltas below the FFT rounding."""
    count, mu, tolerance = 10, 1 / math.sqrt(10), 1e-3 * delta
    upper = connect_the_dots(GaussianTails(mu), 1e-3, tolerance / count).self_compose(count, tolerance)
    lower = greedy_hull_optimistic(GaussianTails(mu), 1e-3, tolerance / count).self_compose(count, tolerance)
    exact = gaussian_epsilon(1.0, delta)
    assert lower.epsilon(delta) <= exact <= upper.epsilon(delta) < exact + 1e-3
    assert lower.epsilon(delta) > exact - 1e-3
    exact_delta = math.exp(float(gaussian_log_delta(1.0, exact)))
    assert lower.delta(exact) <= exact_delta <= upper.delta(exact) <= 1.01 * exact_delta
    assert lower.delta(exact) >= 0.99 * exact_delta


def test_default_tolerance_cannot_certify_tiny_delta():
    upper = connect_the_dots(GaussianTails(1 / math.sqrt(10)), 1e-3).self_compose(10)
    assert upper.epsilon(1e-30) == math.inf


# ----- tilted powers: a smaller tail tolerance must never widen the bracket ----------------------

def engine_bracket(tails, interval, count, delta, tolerance):
    """(lower, upper) eps(delta) from the PLDs afa.engines.base.PLDEngine builds for one mechanism used
    count times with tail tolerance ``tolerance`` (it asks for 1e-7 * delta), and the two PLDs."""
    arguments = (count, tolerance / 4, PLDEngine.ROUNDING_SLACK * tolerance / 4)
    upper = connect_the_dots(tails, interval, tolerance / (4 * count)).self_compose(*arguments)
    lower = greedy_hull_optimistic(tails, interval, tolerance / (4 * count)).self_compose(*arguments)
    return lower.epsilon(delta), upper.epsilon(delta), lower, upper


@pytest.mark.parametrize("mu, count, delta, tolerances", [
    (0.02, 2500, 1e-16, (1e-19, 1e-23)),
    (0.05, 400, 1e-10, (1e-13, 1e-19)),
])
def test_tilted_power_keeps_composed_gaussian_bracket(mu, count, delta, tolerances):
    """Regression: with a tolerance far below delta the tilted power took over only above a point
    where its error reached the tolerance; that point rose above eps(delta), where the plain FFT
    rounding (~1e-10) then ruled: [6.51, 8.68] around 8.45 (first case, 1e-23), 0.066 wide around 6.55
    (second case, 1e-19)."""
    exact = gaussian_epsilon(mu * math.sqrt(count), delta)
    widths = []
    for tolerance in tolerances:
        lower, upper, optimistic, pessimistic = engine_bracket(GaussianTails(mu), 1e-4, count, delta, tolerance)
        assert lower <= exact <= upper, (tolerance, lower, exact, upper)
        widths.append(upper - lower)
    assert max(widths) < 3e-5 * exact, widths  # measured <= 8.5e-6 relative
    assert widths[-1] <= 1.1 * widths[0], widths
    # The last PLDs use the tilted power (slack decaying above decay_start): certified and monotone
    # curves over the whole range, and epsilon() consistent with delta() on both sides.
    assert pessimistic.tilt > 0 and optimistic.tilt > 0
    epsilons = np.linspace(-0.5, 3 * exact, 2001)
    truth = np.exp(gaussian_log_delta(mu * math.sqrt(count), epsilons))
    for pld_, sign in ((pessimistic, 1), (optimistic, -1)):
        curve = pld_.delta(epsilons)
        assert np.all(sign * (curve - truth) >= -1e-12 * truth) and np.all(np.diff(curve) <= 0)
        for target in (1e-3, delta, 1e3 * delta):
            epsilon = pld_.epsilon(target)
            assert pld_.delta(epsilon) <= target < pld_.delta(epsilon - 1e-9 * max(1.0, epsilon))


def test_rounding_tolerance_decides_the_tilted_power():
    """The tilted power is formed only when the plain power's FFT rounding would exceed rounding_tolerance / 4.
    Without it the window is the plain one (the tilted measure's tails widen it) and the bracket stays
    certified against the closed form; it is wider only by the plain rounding's slack (measured 2.1e-11,
    2e-6 of delta), which moves eps by at most about slack / |d delta / d eps|."""
    mu, count, delta, tolerance = 0.05, 400, 1e-5, 1e-13
    exact = gaussian_epsilon(mu * math.sqrt(count), delta)
    slope = math.exp(exact + float(log_ndtr(-exact / (mu * math.sqrt(count)) - mu * math.sqrt(count) / 2)))
    pairs = {}
    for rounding_tolerance in (None, 1e-8):
        pairs[rounding_tolerance] = [builder(GaussianTails(mu), 1e-4, tolerance / count).self_compose(
            count, tolerance, rounding_tolerance) for builder in (connect_the_dots, greedy_hull_optimistic)]
    tilted, plain = pairs[None], pairs[1e-8]
    assert all(p.tilt > 0 for p in tilted) and all(p.tilt == 0 for p in plain)
    assert all(p.probs.size < t.probs.size for p, t in zip(plain, tilted))
    slack = max(p.max_error for p in plain)
    assert 0 < slack < 1e-8 / 4
    (upper, lower), (tilted_upper, tilted_lower) = ([p.epsilon(delta) for p in pair] for pair in (plain, tilted))
    assert lower <= exact <= upper < exact + 1e-5
    assert tilted_upper <= upper <= tilted_upper + 2 * slack / slope
    assert tilted_lower - 2 * slack / slope <= lower <= tilted_lower


def afa_subsampled_gaussian(sigma, q):
    import afa
    return afa.Gaussian(sigma).poisson_subsampled(q)


def analytic_epsilon(sigma, q, count, delta, method):
    """eps(delta) from afa's analytic engines (contour / real-line quadrature of the composed loss):
    an independent computation, not a discretized PLD."""
    import afa
    return afa.Accountant().compose(afa_subsampled_gaussian(sigma, q), count).epsilon(delta, method=method)


# sigma, q, count, delta, truth (None: computed), relative bracket width reached at interval 1e-4,
# tolerances from delta * 1e-3 (or the 1e-8) down to below the engine's 1e-7 * delta.  The widths
# of the last two are the builders' discretization error (it falls ~ interval^2; mostly the optimistic
# side), the same with or without tilting.
SUBSAMPLED_CASES = {
    "q0.01-k3000": (2.0, 0.01, 3000, 1e-16, "contour", 3e-4, (1e-19, 1e-23)),
    "q0.001-k1000": (2.0, 0.001, 1000, 1e-6, "quadrature", 2e-2, (1e-9, 1e-13, 1e-15)),
    # truth: method='quadrature' (0.14096601087516217, error 2.4e-9; 17 s, too slow to recompute here)
    "q0.001-k100": (0.8, 0.001, 100, 1e-5, 0.14096601087516217, 3e-3, (1e-8, 1e-14)),
}


@pytest.mark.parametrize("case", SUBSAMPLED_CASES)
def test_tilted_power_keeps_subsampled_gaussian_bracket(case):
    """Regression: the tilted power's wrapped-mass bound used Chernoff orders sized for the plain
    measure; the tilted subsampled loss has far heavier tails, the bound fell back to the trivial 1,
    and an optimistic PLD got an error of 1e-2: eps lower bound 0 (third case, tolerance 1e-12)."""
    sigma, q, count, delta, truth, relative_width, tolerances = SUBSAMPLED_CASES[case]
    if isinstance(truth, str):
        truth = analytic_epsilon(sigma, q, count, delta, truth)
    tails = afa_subsampled_gaussian(sigma, q).loss_tails("add_remove")[0]
    widths = []
    for tolerance in tolerances:
        lower, upper, optimistic, pessimistic = engine_bracket(tails, 1e-4, count, delta, tolerance)
        assert lower <= truth <= upper, (tolerance, lower, truth, upper)
        widths.append(upper - lower)
        # delta at the true eps: the optimistic bound no longer collapses to 0 (measured >= 0.86 delta,
        # the discretization of the second case), the pessimistic one stays close (<= 1.04 delta)
        assert 0.8 * delta < optimistic.delta(truth) <= delta <= pessimistic.delta(truth) < 1.25 * delta
    assert max(widths) < relative_width * truth, widths
    assert widths[-1] <= 1.1 * widths[0], widths


def test_accountant_pld_bracket_at_engine_tolerance():
    """The issue's accountant case (method='pld' asks for tolerance 1e-7 * delta = 1e-12): the lower
    end was 0.0; the truth is the quadrature value of SUBSAMPLED_CASES."""
    import afa
    sigma, q, count, delta, truth, relative_width, _ = SUBSAMPLED_CASES["q0.001-k100"]
    accountant = afa.Accountant(value_discretization_interval=1e-4).compose(afa_subsampled_gaussian(sigma, q), count)
    result = accountant.epsilon_result(delta, method="pld")
    assert result.lower <= truth <= result.upper, result
    assert result.upper - result.lower < relative_width * truth, result


# ----- limits and validation ---------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_blockwise_log_mgf_is_the_direct_log_sum_exp(seed):
    """The Chernoff windows' K(t), summed blockwise (one matrix product for the inner sums of all orders)
    or, for |t| interval BLOCK beyond BLOCK_REACH, directly, equals scipy's logsumexp over the points
    within the rounding its magnitude() admits (8 u magnitude; measured <= 1.8 u magnitude): masses from
    e^-700 to 1 with zeros (empty blocks), orders from 1e-3 to 1e6 of both signs."""
    rng = np.random.default_rng(seed)
    size, interval, first = int(rng.integers(1, 5000)), 10 ** rng.uniform(-5, -1), int(rng.integers(-3000, 3000))
    masses = np.exp(rng.uniform(-700, 0, size)) * (rng.random(size) < 0.9)
    masses[rng.integers(size)] = 1.0
    masses[: size // 3 if seed % 2 else 0] = 0.0  # a run of empty blocks
    mgf = pld._LogMGF(masses, interval, first)
    orders = np.concatenate((-np.geomspace(1e-3, 1e6, 30), [0.0], np.geomspace(1e-3, 1e6, 30)))
    assert np.any(np.abs(orders) * interval * mgf.BLOCK > mgf.BLOCK_REACH)  # both paths run
    support = np.flatnonzero(masses)
    for order, value in zip(orders, mgf(orders)):
        direct = logsumexp(np.log(masses[support]) + order * interval * (first + support))
        assert abs(value - direct) <= 8 * pld.U * mgf.magnitude(order), (order, value, direct)


@pytest.mark.parametrize("builder", [connect_the_dots, greedy_hull_optimistic])
def test_bounds_at_the_grid_skip_the_search_and_agree(builder):
    """The envelope's bounds at the grid points take each point's index for the search's answer (the first point
    above x_i is x_{i+1}); bit for bit what the search gives, plain and tilted powers alike."""
    for tolerance in (1e-12, 1e-30):
        composed = builder(GaussianTails(0.8), 1e-3).self_compose(30, tolerance)
        assert np.array_equal(composed._certified(composed.losses, at_grid=True), composed._certified(composed.losses))


@pytest.mark.parametrize("count", [1, 2, 3, 10, 37, 1023])
def test_power_by_squaring_within_its_rounding_bound(count):
    """z^k by binary powering (counts below SQUARING_LIMIT) against 40-digit mpmath: within (k - 1) sqrt(5) u |z|^k
    plus subnormal spacings, which the FFT model's power rounding, POWER_ERROR_CONSTANT u (1 + k (pi + |log|z||))
    |z|^k, covers."""
    import mpmath as mp
    rng = np.random.default_rng(count)
    z = rng.uniform(0.2, 1.0, 200) * np.exp(1j * rng.uniform(-math.pi, math.pi, 200))
    z[:3] = [1.0, -1.0, 1e-3j]
    power = pld._power_by_squaring(z, count)
    with mp.workdps(40):
        exact = [complex(mp.mpc(value.real, value.imag) ** count) for value in z]
    bound = (count - 1) * math.sqrt(5) * pld.U * np.abs(exact) * 1.01 + 4 * count * pld.SUBNORMAL
    assert np.all(np.abs(power - exact) <= bound)
    assert np.all(bound <= power_rounding(count, np.log(np.abs(z)), np.abs(exact)) + 4 * count * pld.SUBNORMAL)


def test_too_many_grid_points():
    with pytest.raises(PLDTooLargeError, match="value_discretization_interval.*method='contour'"):
        connect_the_dots(GaussianTails(1.0), 1e-9)
    assert issubclass(PLDTooLargeError, ValueError)


def test_too_large_composition(active_options):
    base = connect_the_dots(GaussianTails(0.5), 1e-2)
    active_options(pld=afa.PLDOptions(max_grid_points=4 * base.probs.size))
    base.self_compose(2)
    with pytest.raises(PLDTooLargeError, match="100-fold"):
        base.self_compose(100)
    with pytest.raises(PLDTooLargeError):
        base.self_compose(50).compose(base.self_compose(50))


@pytest.mark.parametrize("call, error, name", [
    (lambda: connect_the_dots(GaussianTails(1.0), 0.0), ValueError, "interval"),
    (lambda: connect_the_dots(GaussianTails(1.0), float("nan")), ValueError, "interval"),
    (lambda: connect_the_dots(GaussianTails(1.0), "0.1"), TypeError, "interval"),
    (lambda: privacy_buckets(GaussianTails(1.0), 0.1, True, 1.0), ValueError, "tail_mass"),
    (lambda: privacy_buckets(GaussianTails(1.0), 0.1, "yes"), TypeError, "pessimistic"),
    (lambda: greedy_hull_optimistic(GaussianTails(1.0), 0.1, 0.0), ValueError, "tail_mass"),
    (lambda: greedy_hull_optimistic(object(), 0.1), TypeError, "tails"),
    (lambda: connect_the_dots(GaussianTails(1.0), 0.1).self_compose(2.5), TypeError, "count"),
    (lambda: connect_the_dots(GaussianTails(1.0), 0.1).self_compose(0), ValueError, "count"),
    (lambda: connect_the_dots(GaussianTails(1.0), 0.1).self_compose(3, 0.0), ValueError, "tail_mass_truncation"),
    (lambda: connect_the_dots(GaussianTails(1.0), 0.1).self_compose(3, 1e-9, 0.0), ValueError, "rounding_tolerance"),
    (lambda: connect_the_dots(GaussianTails(1.0), 0.1).self_compose(3, 1e-9, "1"), TypeError, "rounding_tolerance"),
    (lambda: connect_the_dots(GaussianTails(1.0), 0.1).epsilon(1.0), ValueError, "delta"),
    (lambda: connect_the_dots(GaussianTails(1.0), 0.1).epsilon(0.0), ValueError, "delta"),
    (lambda: connect_the_dots(GaussianTails(1.0), 0.1).delta([0.0, float("nan")]), ValueError, "epsilons"),
    (lambda: connect_the_dots(GaussianTails(1.0), 0.1).compose(connect_the_dots(GaussianTails(1.0), 0.2)),
     ValueError, "interval"),
    (lambda: connect_the_dots(GaussianTails(1.0), 0.1).compose(greedy_hull_optimistic(GaussianTails(1.0), 0.1)),
     ValueError, "optimistic"),
    (lambda: connect_the_dots(GaussianTails(1.0), 0.1).compose("pld"), TypeError, "other"),
    (lambda: DiscretePLD(0.1, 0, [0.5, -0.1], 0.0, True), ValueError, "probs"),
    (lambda: DiscretePLD(0.1, 0.5, [1.0], 0.0, True), TypeError, "offset"),
    (lambda: DiscretePLD(0.1, 0, [1.0], 1.5, True), ValueError, "inf_mass"),
    (lambda: DiscretePLD(0.1, 0, [1.0], 0.0, True, tilt=-1.0), ValueError, "tilt"),
    (lambda: DiscretePLD(0.1, 0, [1.0], 0.0, False, error=1e-9, tilt=1.0, decay_start=math.inf), ValueError,
     "decay_start"),
    (lambda: DiscretePLD(0.1, 0, [1.0], 0.0, True, relative_error=0.5), ValueError, "relative_error"),
])
def test_validation(call, error, name):
    with pytest.raises(error, match=name):
        call()


# ----- peer library (optional) ------------------------------------------------------------------

def test_connect_the_dots_agrees_with_dp_accounting():
    dp_pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        peer = dp_pld.from_gaussian_mechanism(2.0, pessimistic_estimate=True, value_discretization_interval=1e-3,
                                              use_connect_dots=True).self_compose(10)
    finally:
        root.setLevel(level)
    epsilons = np.array([0.0, 1.0, 2.0, 3.0])
    ours = connect_the_dots(GaussianTails(0.5), 1e-3).self_compose(10).delta(epsilons)
    theirs = np.array([peer.get_delta_for_epsilon(e) for e in epsilons])
    exact = gaussian_delta(0.5 * math.sqrt(10), epsilons)
    assert np.all(ours >= exact) and np.all(theirs >= exact)
    assert np.all(np.abs(ours - theirs) <= 1e-6 * exact)


@pytest.mark.parametrize("size", [1, 2, 5, 15, 16, 17, 64, 1000, 5000])
@pytest.mark.parametrize("decay, gain", [(math.exp(-1e-4), 1.0), (0.5, 1.0), (0.9, 0.8), (1.0, 1.0), (0.0, 1.0),
                                         (1e-200, 1.0), (math.exp(-0.5), 1.0), (math.exp(-3.0), 1.0)])
def test_suffix_recurrence_is_the_weighted_suffix_sum(size, decay, gain):
    """y_c = gain (v_c + decay y_{c+1}) against the same recurrence in 30-digit mpmath, to (3n + 10) u (the
    rounding the PLD's delta allows its suffix sums); a ratio above 1 is refused."""
    from afa._accurate import suffix_recurrence
    values = np.random.default_rng(size).random(size) * np.exp(-40 * np.random.default_rng(1).random(size))
    values[::3] *= 1e-290  # masses near the bottom of the normal range (a PLD at delta = 1e-300) stay accurate
    result = suffix_recurrence(values, decay, gain)
    with mp.workdps(30):
        exact = mp.mpf(0)
        for c in reversed(range(size)):  # the recurrence itself, at 30 digits
            exact = mp.mpf(gain) * (mp.mpf(float(values[c])) + mp.mpf(decay) * exact)
            assert abs(result[c] - exact) <= (3 * size + 10) * 2 ** -53 * exact
    with pytest.raises(ValueError, match="gain \\* decay"):
        suffix_recurrence(values, 1.5, 1.0)


@pytest.mark.parametrize("decay", [math.exp(-1e-6), math.exp(-1e-4), 0.5])
def test_suffix_recurrence_on_a_long_grid(decay):
    """On 2^20 entries (three levels of blocks) each checked entry equals sum_{i >= c} decay^(i - c) v_i summed
    exactly (math.fsum of the terms, each formed by one correctly rounded power) to 1e-12 relative: far
    inside the (3n + 10) u the PLD allows."""
    from afa._accurate import suffix_recurrence
    n = 1 << 20
    rng = np.random.default_rng(3)
    values = rng.random(n) * np.exp(-30 * rng.random(n))
    result = suffix_recurrence(values, decay)
    for c in (0, 12345, n // 2 + 7, n - 65, n - 64, n - 63, n - 1):
        powers = np.power(decay, np.arange(n - c, dtype=float))
        exact = math.fsum(values[c:] * powers)
        assert abs(result[c] / exact - 1) <= 1e-12, c
