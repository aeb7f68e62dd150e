"""The two-factor (meet-in-the-middle) evaluation of delta(eps) for a sum of two finite losses.

Against an mpmath double sum over every pair of atoms (30 digits, no afa code): the value lies within its
stated error, the error is small, the slope is the derivative, and the root is the crossing.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from afa.engines.two_factor import TwoFactorSum, blocked_suffix_logsumexp
from afa.numerics.atoms import LossAtoms, epsilon_bounds_for_delta, hockey_stick_with_error


def random_atoms(rng, size: int, spread: float) -> LossAtoms:
    log_masses = rng.normal(0, 6, size)
    log_masses -= np.logaddexp.reduce(log_masses)
    return LossAtoms.from_atoms(rng.normal(0, spread, size), log_masses)


def mp_delta(first: LossAtoms, second: LossAtoms, eps: float) -> mp.mpf:
    """sum over pairs with a + b > eps of w v (1 - e^{eps - a - b}), the atoms taken as exact."""
    with mp.workdps(30):
        e = mp.mpf(eps)
        return mp.fsum(mp.exp(mp.mpf(wa) + mp.mpf(wb)) * -mp.expm1(e - mp.mpf(a) - mp.mpf(b))
                       for a, wa in zip(first.losses, first.log_masses)
                       for b, wb in zip(second.losses, second.log_masses) if mp.mpf(a) + mp.mpf(b) > e)


@pytest.mark.parametrize("seed", range(6))
def test_value_within_its_error_of_the_mpmath_double_sum(seed):
    rng = np.random.default_rng(seed)
    first = random_atoms(rng, int(rng.integers(1, 12)), 3.0)
    second = random_atoms(rng, int(rng.integers(1, 1200)), 5.0)  # up to three blocks of the suffix sums
    split = TwoFactorSum(first, second)
    epsilons = np.sort(rng.uniform(-8, 20, 4))
    values, errors, slopes = split.evaluate(epsilons)
    for eps, value, error in zip(epsilons, values, errors):
        truth = mp_delta(first, second, eps)
        assert abs(value - truth) <= error, (eps, value, error, mp.nstr(truth, 20))
        assert error <= 1e-9 * truth + 1e-300, (eps, error, mp.nstr(truth, 20))
    # The slope is -d delta / d eps: against a central difference of the double sum away from atoms.
    eps = float(epsilons[2])
    h = 1e-7
    with mp.workdps(30):
        numeric = -(mp_delta(first, second, eps + h) - mp_delta(first, second, eps - h)) / (2 * h)
    assert abs(slopes[2] - numeric) <= 1e-5 * abs(numeric) + 1e-300


def test_agrees_with_the_enumerated_convolution_and_its_error():
    rng = np.random.default_rng(20)
    first, second = random_atoms(rng, 40, 2.0), random_atoms(rng, 300, 2.0)
    epsilons = np.linspace(-3, 8, 23)
    enumerated, enumerated_error = hockey_stick_with_error(first.convolve(second), epsilons)
    values, errors, _ = TwoFactorSum(first, second).evaluate(epsilons)
    assert np.all(np.abs(values - enumerated) <= errors + enumerated_error)


def binomial_atoms(count: int, p: float, step: float) -> LossAtoms:
    """The loss of ``count`` randomized responses with log-ratio ``step`` (binomial masses, log space)."""
    i = np.arange(count + 1)
    log_masses = (math.lgamma(count + 1) - np.array([math.lgamma(k + 1) + math.lgamma(count - k + 1) for k in i])
                  + i * math.log(p) + (count - i) * math.log1p(-p))
    return LossAtoms.from_atoms((2 * i - count) * step, log_masses)


def test_terms_left_out_in_the_far_tail_stay_within_the_error():
    """Far in the upper tail, most atoms of the smaller factor add nothing measurable (their prefix mass times
    the largest S they meet is below e^-OMIT of the value): they are left out of the sum and their bound joins
    the error.  The value stays within its error of the enumerated convolution and of the mpmath double sum."""
    first, second = binomial_atoms(300, 0.6, 0.31), binomial_atoms(400, 0.7, 0.45)
    split = TwoFactorSum(first, second)
    epsilons = np.array([120.0, 160.0, 200.0])
    assert np.all(split._values_omitting(epsilons)[2] > 0)  # some terms are left out at each eps
    values, errors, _ = split.evaluate(epsilons)
    enumerated, enumerated_error = hockey_stick_with_error(first.convolve(second), epsilons)
    assert np.all(np.abs(values - enumerated) <= errors + enumerated_error)
    assert np.all(errors <= 1e-9 * values)
    truth = mp_delta(first, second, 200.0)
    assert abs(values[2] - truth) <= errors[2], (values[2], errors[2], mp.nstr(truth, 20))


def test_masses_spanning_more_than_the_double_range_sum_within_the_error():
    """The weighted tails are summed in linear scale, each row scaled by its largest term: with masses from 1
    down to e^-1400 (terms more than e^745 apart, so the lightest underflow after scaling) and values from
    about 0.6 down to about 1e-300, every value stays within its stated error of the mpmath double sum,
    and that error within 1e-9 of it; below the double range (a truth of 1e-357) the value 0 is within its
    error, the smallest subnormal."""
    losses_a = np.linspace(-2.0, 6.0, 9)
    losses_b = np.linspace(-3.0, 9.0, 700)
    log_a = -np.linspace(0.0, 700.0, 9)
    log_b = -np.linspace(0.0, 700.0, 700)
    first = LossAtoms.from_atoms(losses_a, log_a - np.logaddexp.reduce(log_a))
    second = LossAtoms.from_atoms(losses_b, log_b - np.logaddexp.reduce(log_b))
    split = TwoFactorSum(first, second)
    epsilons = np.array([-6.0, -5.0, -3.0, 2.0, 6.0, 8.0])
    values, errors, _ = split.evaluate(epsilons)
    for eps, value, error in zip(epsilons, values, errors):
        truth = mp_delta(first, second, float(eps))
        assert abs(value - truth) <= error, (eps, value, error, mp.nstr(truth, 20))
        if truth > 1e-300:
            assert 0 < error <= 1e-9 * truth, (eps, error, mp.nstr(truth, 20))
    assert 1e-300 < values[-2] < 1e-250 and values[-1] == 0.0 and errors[-1] == 5e-324


def test_root_and_verified_bounds_bracket_the_mpmath_crossing():
    rng = np.random.default_rng(3)
    first, second = random_atoms(rng, 8, 4.0), random_atoms(rng, 700, 6.0)
    split = TwoFactorSum(first, second)
    for delta in (1e-2, 1e-6, 1e-12):
        estimate, lower, upper = epsilon_bounds_for_delta(split, 0.0, delta)
        assert lower <= estimate <= upper
        assert upper - lower <= 1e-9 * max(1.0, abs(upper))
        assert mp_delta(first, second, upper) <= delta
        assert lower == 0 or mp_delta(first, second, lower) > delta


@pytest.mark.parametrize("hint_offset", [0.0, 0.3, 5.0, -0.5])
def test_a_hint_above_the_crossing_starts_the_search_there(hint_offset):
    """With ``hint`` (an eps at or above the crossing, e.g. a Chernoff ceiling) the root comes from Newton steps
    down from it; a hint below the crossing (negative offset) only narrows the bracket.  Either way the root is
    the no-hint root to a few ulps, and the verified bounds around it bracket the mpmath crossing."""
    rng = np.random.default_rng(3)
    first, second = random_atoms(rng, 8, 4.0), random_atoms(rng, 700, 6.0)
    split = TwoFactorSum(first, second)
    for delta in (1e-2, 1e-6, 1e-12):
        plain = split.root(delta, 0.0)
        hinted = split.root(delta, 0.0, plain + hint_offset)
        assert abs(hinted - plain) <= 64 * np.finfo(float).eps * abs(plain)
        estimate, lower, upper = epsilon_bounds_for_delta(split, 0.0, delta, hint=plain + hint_offset)
        assert mp_delta(first, second, upper) <= delta
        assert lower == 0 or mp_delta(first, second, lower) > delta


def test_dropped_mass_and_empty_factors_count_in_the_error():
    rng = np.random.default_rng(4)
    atoms = random_atoms(rng, 30, 2.0)
    dropped = LossAtoms(atoms.losses, atoms.log_masses, atoms.loss_errors, atoms.log_mass_error,
                        log_dropped=math.log(1e-6))
    _, error, _ = TwoFactorSum(atoms, dropped).evaluate(np.array([50.0]))  # beyond every pair: value 0
    assert error[0] >= 1e-6
    empty = LossAtoms(np.empty(0), np.empty(0))
    value, error, slope = TwoFactorSum(empty, atoms).evaluate(np.array([0.0, 1.0]))
    assert np.all(value == 0) and np.all(error == 0) and np.all(slope == 0)


def test_blocked_suffix_sums_match_math_fsum():
    rng = np.random.default_rng(5)
    values = rng.normal(0, 30, 3000)
    sums, chain = blocked_suffix_logsumexp(values)
    for k in (0, 1, 511, 512, 513, 2047, 2999):
        with mp.workdps(30):
            truth = mp.log(mp.fsum(mp.exp(mp.mpf(v)) for v in values[k:]))
        assert abs(sums[k] - truth) <= 4 * chain * np.finfo(float).eps * (abs(float(truth)) + 2)


def test_cumulative_bounds_lie_just_above_math_fsum():
    """The prefix-mass bounds that decide which atoms an evaluation leaves out: at or above the exact prefix
    sums (mpmath), within 1e-12 relative, also across 600 nats and below the underflow of exp."""
    from afa.engines.two_factor import _log_cumulative_bound

    rng = np.random.default_rng(11)
    values = np.concatenate((rng.normal(-5, 3, 400), rng.normal(-700, 5, 200), [-2000.0, 0.0]))
    bounds = _log_cumulative_bound(values)
    assert bounds.size == values.size + 1 and bounds[0] == -np.inf
    for i in (1, 2, 399, 400, 401, 600, 601, 602):
        with mp.workdps(40):
            truth = mp.log(mp.fsum(mp.exp(mp.mpf(v)) for v in values[:i]))
        assert truth <= bounds[i] <= truth + 1e-12 * (abs(float(truth)) + 1), (i, bounds[i], mp.nstr(truth, 20))


def test_search_from_nearby_indices_equals_numpys_search():
    """The look-up started from indices of nearby points (right, stale, at both ends, or of other points
    altogether) gives numpy's searchsorted exactly, for points below, inside, on and above the larger factor's
    losses."""
    rng = np.random.default_rng(3)
    small = LossAtoms.from_atoms(np.sort(rng.normal(size=50)), np.full(50, -math.log(50)))
    large = LossAtoms.from_atoms(np.sort(rng.normal(size=400)) * 3, np.full(400, -math.log(400)))
    pair = TwoFactorSum(small, large)
    b = pair.large.losses
    x = np.concatenate([[-100.0, b[0], b[-1], 100.0], b[::7], rng.normal(size=300) * 4])
    truth = np.searchsorted(b, x, side="right")
    for near in (truth, np.searchsorted(b, x + 1e-3, side="right"), np.zeros_like(truth),
                 np.full_like(truth, b.size), rng.integers(0, b.size + 1, truth.size)):
        assert np.array_equal(pair._search(x, near), truth)
    assert np.array_equal(pair._search(x[None, :], truth[-1]), np.searchsorted(b, x[None, :], side="right"))
