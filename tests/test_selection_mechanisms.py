"""Permute-and-flip and the exponential mechanism: their pairs against the exact output laws of small instances.

Independent truth: the output distribution of permute-and-flip (McKenna & Sheldon 2020) enumerated over every
visiting order, and of the exponential mechanism from its weights, on small utility vectors and their
neighbours (every utility moved by at most the sensitivity 1); the Laplace profile and the bounded-range
profile H of Dong, Durfee & Rogers 2020 in closed form with mpmath; the pure epsilon-DP pair's profile in
closed form.
"""

from __future__ import annotations

import itertools
import math
import pickle

import mpmath
import numpy as np
import pytest

import afa

mpmath.mp.dps = 40


def permute_and_flip(utilities, epsilon):
    """Exact output law: visit the candidates in each of the m! orders, accept r w.p. exp(eps (u_r - u*) / 2)."""
    u = np.asarray(utilities, dtype=float)
    accept = np.exp(epsilon * (u - u.max()) / 2)
    out = np.zeros(u.size)
    for order in itertools.permutations(range(u.size)):
        survive = 1.0
        for r in order:
            out[r] += survive * accept[r]
            survive *= 1 - accept[r]
    return out / math.factorial(u.size)


def exponential_mechanism(utilities, epsilon):
    weights = np.exp(epsilon * np.asarray(utilities, dtype=float) / 2)
    return weights / weights.sum()


def hockey_stick(p, q, eps):
    return float(np.maximum(np.asarray(p) - math.exp(eps) * np.asarray(q), 0.0).sum())


def laplace_profile(a, eps):
    """delta(eps) of the Laplace pair with sensitivity / scale = a (symmetric loss; 1 - e^eps + e^eps delta(-eps))."""
    a, eps = mpmath.mpf(a), mpmath.mpf(eps)
    if eps >= a:
        return mpmath.mpf(0)
    if eps <= -a:
        return 1 - mpmath.exp(eps)
    if eps >= 0:
        return 1 - mpmath.exp((eps - a) / 2)
    return 1 - mpmath.exp(eps) + mpmath.exp(eps) * (1 - mpmath.exp((-eps - a) / 2))


def bounded_range_profile(epsilon, eps):
    """H(eps) = max over t of the binary epsilon-BR pair's profile (Dong, Durfee & Rogers 2020), in closed form."""
    epsilon, eps = mpmath.mpf(epsilon), mpmath.mpf(eps)
    if eps >= epsilon:
        return mpmath.mpf(0)
    if eps <= -epsilon:
        return 1 - mpmath.exp(eps)
    return (1 - mpmath.exp((eps - epsilon) / 2)) ** 2 / (1 - mpmath.exp(-epsilon))


def binary_bounded_range_profile(epsilon, t, eps):
    """The binary pair with losses t + epsilon and t (P-mass p on the first, E_P[e^-L] = 1), by enumeration."""
    p = (1 - math.exp(t)) / (1 - math.exp(-epsilon))
    return hockey_stick([p, 1 - p], [p * math.exp(-t - epsilon), (1 - p) * math.exp(-t)], eps)


def pure_dp_profile(epsilon, eps):
    epsilon, eps = mpmath.mpf(epsilon), mpmath.mpf(eps)
    if eps >= epsilon:
        return mpmath.mpf(0)
    if eps <= -epsilon:
        return 1 - mpmath.exp(eps)
    return (mpmath.exp(epsilon) - mpmath.exp(eps)) / (1 + mpmath.exp(epsilon))


def neighbours(rng, count):
    """(u, u') pairs of small utility vectors with |u_r - u'_r| <= 1, vertices of the cube and interior points."""
    cases = []
    for _ in range(count):
        m = int(rng.integers(2, 6))
        u = rng.integers(-2, 3, size=m).astype(float) if rng.random() < 0.5 else rng.normal(size=m)
        shift = rng.integers(-1, 2, size=m).astype(float) if rng.random() < 0.7 else rng.uniform(-1, 1, size=m)
        cases.append((u, u + shift))
    cases.append((np.array([0.0, 0.0]), np.array([1.0, -1.0])))
    return cases


EPSILONS = [0.3, 1.0, 2.5]
GRID = np.linspace(-3.0, 3.0, 25)


def pair_profile(mechanism, eps):
    pair = mechanism.dominating_pair("add_remove")
    return hockey_stick(np.exp(pair.log_p), np.exp(pair.log_q), eps)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_permute_and_flip_is_dominated_by_the_laplace_pair(epsilon):
    rng = np.random.default_rng(int(epsilon * 100))
    mechanism = afa.PermuteAndFlip(epsilon)
    accountant = afa.Accountant().compose(mechanism)
    afa_profile = accountant.privacy_profile(GRID)
    for eps, value in zip(GRID, afa_profile):
        assert value == pytest.approx(float(laplace_profile(epsilon, eps)), rel=1e-9, abs=1e-12)
    worst = 0.0
    for u, v in neighbours(rng, 150):
        p, q = permute_and_flip(u, epsilon), permute_and_flip(v, epsilon)
        for eps, value in zip(GRID, afa_profile):
            for a, b in ((p, q), (q, p)):
                assert hockey_stick(a, b, eps) <= value + 1e-12
                worst = max(worst, hockey_stick(a, b, eps) / max(value, 1e-300))
    # Two candidates moved apart by the sensitivity attain the Laplace profile at eps = 0.
    p, q = permute_and_flip([1.0, 0.0], epsilon), permute_and_flip([0.0, 1.0], epsilon)
    assert hockey_stick(p, q, 0.0) == pytest.approx(float(laplace_profile(epsilon, 0.0)), rel=1e-12)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_permute_and_flip_lies_below_the_pure_dp_pair(epsilon):
    flip = afa.Accountant().compose(afa.PermuteAndFlip(epsilon), 5).privacy_profile(GRID)
    pure = afa.Accountant().compose(afa.ApproxDP(epsilon, 0.0), 5).privacy_profile(GRID)
    assert np.all(flip <= pure + 1e-12)
    assert flip[12] < pure[12]  # eps = 0


@pytest.mark.parametrize("epsilon", EPSILONS + [0.01, 40.0])
def test_exponential_mechanism_pair_dominates_the_bounded_range_profile(epsilon):
    mechanism = afa.ExponentialMechanism(epsilon)
    n = mechanism.intervals
    grid_points = epsilon * (2.0 * np.arange(n + 1) / n - 1.0)
    for eps in grid_points[::7]:
        assert pair_profile(mechanism, eps) == pytest.approx(float(bounded_range_profile(epsilon, eps)),
                                                             rel=1e-9, abs=1e-15)
    between = np.linspace(-1.2 * epsilon, 1.2 * epsilon, 301)
    for eps in between:
        truth = float(bounded_range_profile(epsilon, eps))
        value = pair_profile(mechanism, eps)
        assert value >= truth - 1e-15 * max(1.0, truth)
        # The chords stay close to H: measured 2.5e-7 (epsilon = 0.01) to 4e-5 (epsilon = 1) absolutely, at most
        # 3.6% relatively where H > 1e-3 (the top end, where H vanishes quadratically and the chord linearly).
        assert value - truth <= 5e-5
        assert value - truth <= 0.05 * truth or truth <= 1e-3
        # H is the largest of the binary bounded-range profiles (a few t checked against it).
        for t in np.linspace(-epsilon, 0.0, 9)[1:-1]:
            assert binary_bounded_range_profile(epsilon, t, eps) <= truth + 1e-12


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_exponential_mechanism_instances_and_pure_dp_bound(epsilon):
    rng = np.random.default_rng(int(epsilon * 1000))
    mechanism = afa.ExponentialMechanism(epsilon)
    profile = afa.Accountant().compose(mechanism).privacy_profile(GRID)
    pure = afa.Accountant().compose(afa.ApproxDP(epsilon, 0.0)).privacy_profile(GRID)
    assert np.all(profile <= pure + 1e-12)
    assert profile[12] == pytest.approx(math.tanh(epsilon / 4), rel=1e-6)  # eps = 0 is a grid point of the pair
    assert pure[12] == pytest.approx(math.tanh(epsilon / 2), rel=1e-9)
    for u, v in neighbours(rng, 200):
        p, q = exponential_mechanism(u, epsilon), exponential_mechanism(v, epsilon)
        for eps, value in zip(GRID, profile):
            assert hockey_stick(p, q, eps) <= value + 1e-12
            assert hockey_stick(q, p, eps) <= value + 1e-12


def test_exponential_mechanism_composed_dominates_a_composed_instance_and_stays_below_pure_dp():
    epsilon = 1.0
    u, v = np.array([0.0, 0.3, 1.0]), np.array([1.0, -0.7, 0.0])
    p, q = exponential_mechanism(u, epsilon), exponential_mechanism(v, epsilon)
    p3, q3 = np.einsum("i,j,k->ijk", p, p, p).ravel(), np.einsum("i,j,k->ijk", q, q, q).ravel()
    composed = afa.Accountant().compose(afa.ExponentialMechanism(epsilon), 3)
    pure = afa.Accountant().compose(afa.ApproxDP(epsilon, 0.0), 3)
    grid = np.linspace(-1.0, 3.0, 9)
    afa_profile, pure_profile = composed.privacy_profile(grid), pure.privacy_profile(grid)
    for eps, value, bound in zip(grid, afa_profile, pure_profile):
        assert hockey_stick(p3, q3, eps) <= value + 1e-12
        assert value <= bound + 1e-12
    assert composed.delta_result(1.0).tight is False


@pytest.mark.parametrize("cls", [afa.PermuteAndFlip, afa.ExponentialMechanism])
def test_selection_mechanisms_serialise_validate_and_serve_every_relation(cls):
    mechanism = cls(epsilon=0.7)
    assert afa.Mechanism.from_dict(mechanism.to_dict()) == mechanism
    assert pickle.loads(pickle.dumps(mechanism)) == mechanism
    assert mechanism.tight is False
    assert mechanism.relations == afa.mechanisms.catalog.NEIGHBORING_RELATIONS
    deltas = {rel: afa.Accountant(rel).compose(mechanism, 2).delta(0.5) for rel in mechanism.relations}
    assert len(set(deltas.values())) == 1
    for bad in (0.0, -1.0, math.nan, math.inf, 1e301):
        with pytest.raises(ValueError, match="epsilon"):
            cls(epsilon=bad)
    with pytest.raises(TypeError, match="epsilon"):
        cls(epsilon="1")


def test_exponential_mechanism_epsilon_limit():
    assert afa.ExponentialMechanism(100.0).intervals == 10_000
    with pytest.raises(ValueError, match="epsilon"):
        afa.ExponentialMechanism(101.0)
