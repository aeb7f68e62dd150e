"""Finite privacy-loss distributions (afa.engines.discrete) against brute force.

Ground truth is computed here without the library: convolutions by
enumerating pairs into Python dicts, powers by repeated brute-force
convolution and by the binomial / multinomial law in mpmath, the hockey
stick by direct summation, characteristic functions by direct sums.
"""

from __future__ import annotations

import cmath
import itertools
import math
from collections import defaultdict

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import afa
from afa.numerics.atoms import CompositionTooLargeError, LossAtoms, epsilon_for_delta, hockey_stick

mpmath.mp.dps = 40


# ---------------------------------------------------------------------------
# Brute-force helpers
# ---------------------------------------------------------------------------

def make(atoms: dict) -> LossAtoms:
    """A LossAtoms from {loss: mass} (masses as probabilities)."""
    losses = list(atoms)
    return LossAtoms.from_atoms(losses, np.log([atoms[l] for l in losses]))


def as_dict(pld: LossAtoms) -> dict:
    return dict(zip(pld.losses.tolist(), np.exp(pld.log_masses).tolist()))


def brute_convolve(a: dict, b: dict) -> dict:
    """Exact when every loss is a small dyadic rational (sums are exact floats)."""
    terms = defaultdict(list)
    for (la, wa), (lb, wb) in itertools.product(a.items(), b.items()):
        terms[la + lb].append(wa * wb)
    return {loss: math.fsum(ws) for loss, ws in terms.items()}


def brute_power(a: dict, count: int) -> dict:
    result = {0.0: 1.0}
    for _ in range(count):
        result = brute_convolve(result, a)
    return result


def assert_pld_equal(pld: LossAtoms, expected: dict, rel=1e-12):
    expected = {l: w for l, w in expected.items() if w > 0}
    keys = sorted(expected)
    assert pld.size == len(keys), (pld.losses, keys)
    scale = 1.0 + max(abs(k) for k in keys)
    np.testing.assert_allclose(pld.losses, keys, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(np.exp(pld.log_masses), [expected[k] for k in keys], rtol=rel, atol=0)


def direct_hockey_stick(atoms: dict, eps: float) -> float:
    return math.fsum(w * -math.expm1(eps - l) for l, w in atoms.items() if l > eps)


def direct_cf(atoms: dict, t: float) -> complex:
    terms = [w * cmath.exp(1j * t * l) for l, w in atoms.items()]
    return complex(math.fsum(z.real for z in terms), math.fsum(z.imag for z in terms))


def mp_multinomial_power(losses, masses, count):
    """{loss: (mpf mass)} of the count-fold convolution by the multinomial law (exact losses)."""
    out = defaultdict(lambda: mpmath.mpf(0))
    k = len(losses)
    for combo in itertools.product(range(count + 1), repeat=k - 1):
        if sum(combo) > count:
            continue
        powers = combo + (count - sum(combo),)
        coefficient = mpmath.factorial(count)
        weight = mpmath.mpf(1)
        loss = mpmath.mpf(0)
        for n_i, l_i, w_i in zip(powers, losses, masses):
            coefficient /= mpmath.factorial(n_i)
            weight *= mpmath.mpf(w_i) ** n_i
            loss += n_i * mpmath.mpf(l_i)
        out[float(loss)] += coefficient * weight
    return out


RR = {math.log(3.0): 0.75, -math.log(3.0): 0.25}
SUB = {1.0: 0.6, -1.0: 0.3}                                   # sub-probability (0.1 at +infinity)
GRID3 = {-0.5: 0.2, 0.25: 0.3, 1.0: 0.5}                      # dyadic losses: sums are exact
GRID4 = {-1.0: 0.125, 0.0: 0.25, 0.5: 0.375, 2.0: 0.25}
IRR3 = {-math.sqrt(2): 0.3, math.pi / 7: 0.45, math.e / 2: 0.25}  # no coincident sums


# ---------------------------------------------------------------------------
# from_atoms
# ---------------------------------------------------------------------------

def test_from_atoms_sorts_drops_zero_mass_and_merges():
    pld = LossAtoms.from_atoms([0.5, -1.0, 0.5, 2.0, 0.5 + 1e-15],
                                 [math.log(0.1), math.log(0.2), math.log(0.3), -math.inf, math.log(0.4)])
    np.testing.assert_array_equal(pld.losses, [-1.0, 0.5])
    np.testing.assert_allclose(np.exp(pld.log_masses), [0.2, 0.8], rtol=1e-15)
    assert pld.size == 2
    assert math.exp(pld.log_mass) == pytest.approx(1.0, rel=1e-15)
    empty = LossAtoms.from_atoms([1.0], [-np.inf])
    assert empty.size == 0 and empty.log_mass == -np.inf


# ---------------------------------------------------------------------------
# convolve
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("a,b", [(GRID3, GRID4), (GRID4, GRID4), (RR, SUB), (IRR3, GRID4), (SUB, SUB)])
def test_convolve_matches_enumeration(a, b):
    result = make(a).convolve(make(b))
    if a is RR or a is IRR3:  # keys are not exact: enumerate by index pairs (no coincident sums)
        expected = {la + lb: wa * wb for (la, wa), (lb, wb) in itertools.product(a.items(), b.items())}
        assert len(expected) == len(a) * len(b)
    else:
        expected = brute_convolve(a, b)
    assert_pld_equal(result, expected, rel=1e-14)
    assert result.log_mass == pytest.approx(make(a).log_mass + make(b).log_mass, abs=1e-14)


def test_convolve_with_empty_is_empty():
    empty = LossAtoms.from_atoms([], [])
    assert make(GRID3).convolve(empty).size == 0
    assert empty.convolve(make(GRID3)).size == 0


# ---------------------------------------------------------------------------
# power
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("atoms", [GRID3, GRID4, SUB, {0.5: 0.25, 1.5: 0.75}], ids=["grid3", "grid4", "sub", "two"])
@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 11])
def test_power_matches_repeated_convolution(atoms, count):
    assert_pld_equal(make(atoms).power(count), brute_power(atoms, count), rel=1e-12)


@pytest.mark.parametrize("atoms", [RR, SUB, {-0.3: 1e-6, 2.0: 0.5}], ids=["rr", "sub", "lopsided"])
@pytest.mark.parametrize("count", [2, 7, 50, 400, 5000])
def test_two_atom_power_matches_binomial_law(atoms, count):
    """log(C(n, j) w_hi^j w_lo^(n-j)) in 40 digits, from the PLD's own (rounded) log-masses.

    Masses that are representable (log > -700) must agree to 1e-12 relative; deeper in
    the tail the log itself is the representation, and must agree to a few ulps.
    """
    base = make(atoms)
    (low, high), (log_low, log_high) = base.losses, [mpmath.mpf(x) for x in base.log_masses]
    pld = base.power(count)
    assert pld.size == count + 1
    js = np.arange(count + 1)
    np.testing.assert_allclose(pld.losses, js * high + (count - js) * low, rtol=0,
                               atol=1e-12 * count * max(abs(low), abs(high)))
    picks = np.unique(np.concatenate((np.linspace(0, count, min(count + 1, 80)).astype(int),
                                      np.argsort(pld.log_masses)[-20:])))
    for j in picks.tolist():
        exact = float(mpmath.log(mpmath.binomial(count, j)) + j * log_high + (count - j) * log_low)
        tolerance = 1e-12 if exact > -700 else 8 * np.spacing(abs(exact))
        assert abs(pld.log_masses[j] - exact) <= tolerance, (j, count, pld.log_masses[j], exact)


@pytest.mark.parametrize("atoms", [GRID3, IRR3], ids=["grid", "irrational"])
@pytest.mark.parametrize("count", [2, 4, 7, 12])
def test_three_atom_power_matches_multinomial_law(atoms, count):
    losses, masses = list(atoms), list(atoms.values())
    expected = mp_multinomial_power(losses, masses, count)
    pld = make(atoms).power(count)
    if atoms is GRID3:
        assert_pld_equal(pld, {l: float(w) for l, w in expected.items()}, rel=1e-12)
    else:
        assert pld.size == len(expected)
        keys = sorted(expected)
        np.testing.assert_allclose(pld.losses, keys, rtol=0, atol=1e-12 * (1 + max(map(abs, keys))))
        np.testing.assert_allclose(np.exp(pld.log_masses), [float(expected[k]) for k in keys], rtol=1e-12)


def test_power_one_is_identity():
    pld = make(GRID4)
    assert pld.power(1) is pld


def test_power_zero_is_rejected():
    for atoms in (GRID3, RR):
        with pytest.raises(ValueError, match="count"):
            make(atoms).power(0)


def test_power_negative_count_is_rejected(active_options):
    active_options(exact=afa.ExactOptions(max_pairs=10_000))
    for atoms in (RR, GRID3):
        with pytest.raises(ValueError, match="count"):
            make(atoms).power(-1)


# ---------------------------------------------------------------------------
# size limits
# ---------------------------------------------------------------------------

def test_convolve_past_max_pairs(active_options):
    active_options(exact=afa.ExactOptions(max_pairs=15))
    a = make(GRID4)
    a.convolve(make(GRID3))  # 12 pairs: fine
    with pytest.raises(CompositionTooLargeError, match=r"16 atom pairs \(limit 2e\+01\)|16 atom pairs"):
        a.convolve(a)
    assert issubclass(CompositionTooLargeError, ValueError)


def test_merge_past_max_atoms(active_options):
    active_options(exact=afa.ExactOptions(max_atoms=5))
    LossAtoms.from_atoms(np.arange(5.0), np.full(5, -math.log(5)))
    with pytest.raises(CompositionTooLargeError, match="6 distinct loss values.*limit 5"):
        LossAtoms.from_atoms(np.arange(6.0), np.full(6, -math.log(6)))
    with pytest.raises(CompositionTooLargeError, match="limit 5"):
        make(IRR3).convolve(make(IRR3))


@pytest.mark.parametrize("limit_factor, refused", [(0.7, True), (1.3, False)])
def test_thresholded_convolution_estimates_its_heavy_pairs_before_forming_them(active_options, limit_factor,
                                                                               refused):
    """Above a threshold, the heavy pairs (mass above the cutoff) are estimated from a sample before any pair is
    formed, and the convolution refused when even the estimate less five standard errors exceeds the atom
    limit: against the count by brute force, a limit 30 % below it refuses at once (naming an estimate within
    5 %), one 30 % above it does not refuse on the estimate."""
    rng = np.random.default_rng(7)
    first = LossAtoms.from_atoms(rng.normal(0, 1, 1500), rng.normal(-8, 3, 1500))
    second = LossAtoms.from_atoms(rng.normal(0, math.e, 1700), rng.normal(-8, 3, 1700))
    threshold, log_cutoff = 1.0, -20.0
    sums = first.losses[:, None] + second.losses[None, :]
    masses = first.log_masses[:, None] + second.log_masses[None, :]
    heavy = int(np.count_nonzero((sums > threshold) & (masses >= log_cutoff)))
    assert heavy > 200_000
    # with refused, a pair limit that forming the pairs would hit: the refusal must come from the estimate
    active_options(exact=afa.ExactOptions(max_atoms=int(limit_factor * heavy),
                                          max_pairs=1000 if refused else 10 ** 8))
    if refused:
        with pytest.raises(CompositionTooLargeError, match="would have about") as refusal:
            first.convolve(second, threshold, log_cutoff)
        estimate = float(str(refusal.value).split("about ")[1].split(" ")[0])
        assert abs(estimate - heavy) <= 0.05 * heavy
    else:
        composed = first.convolve(second, threshold, log_cutoff)
        assert composed.size <= heavy


def test_binomial_power_past_max_atoms(active_options):
    active_options(exact=afa.ExactOptions(max_atoms=100))
    assert make(RR).power(99).size == 100
    with pytest.raises(CompositionTooLargeError, match="100 two-atom mechanisms.*101 atoms.*limit 100"):
        make(RR).power(100)


def test_binary_power_past_max_pairs(active_options):
    active_options(exact=afa.ExactOptions(max_pairs=1000))
    with pytest.raises(CompositionTooLargeError, match="pairs"):
        make(IRR3).power(64)


# ---------------------------------------------------------------------------
# hockey stick and its inverse
# ---------------------------------------------------------------------------

HS_CASES = [RR, SUB, GRID4, IRR3, brute_power(GRID3, 6)]
HS_IDS = ["rr", "sub", "grid4", "irr3", "grid3^6"]


@pytest.mark.parametrize("atoms", HS_CASES, ids=HS_IDS)
def test_hockey_stick_matches_direct_sum(atoms):
    pld = make(atoms)
    losses = sorted(atoms)
    epsilons = sorted(set(np.linspace(-3, 7, 41).tolist() + losses + [l + 1e-9 for l in losses]
                          + [l - 1e-9 for l in losses]))
    values = hockey_stick(pld, epsilons)
    assert values.shape == (len(epsilons),)
    for eps, value in zip(epsilons, values):
        expected = direct_hockey_stick(atoms, eps)
        assert value == pytest.approx(expected, rel=1e-13, abs=1e-300), eps
    assert hockey_stick(pld, 2.0).shape == (1,)
    assert hockey_stick(pld, max(losses))[0] == 0.0


@pytest.mark.parametrize("atoms,inf_mass", [(RR, 0.0), (SUB, 0.1), (GRID4, 0.0), (IRR3, 0.0),
                                            (brute_power(GRID3, 6), 0.0), (brute_power(SUB, 5), 1 - 0.9 ** 5)],
                         ids=["rr", "sub", "grid4", "irr3", "grid3^6", "sub^5"])
def test_epsilon_for_delta_inverts_hockey_stick(atoms, inf_mass):
    pld = make(atoms)
    top = max(atoms)
    positive = sorted(l for l in atoms if l > 0)
    eps_values = sorted(set(np.linspace(0.05, top, 23)[:-1].tolist() + positive[:-1]))
    for eps0 in eps_values:
        target = direct_hockey_stick(atoms, eps0)
        if target <= 0:
            continue
        eps = epsilon_for_delta(pld, inf_mass, inf_mass + target)
        assert eps == pytest.approx(eps0, rel=1e-12), (eps0, target)
        assert inf_mass + direct_hockey_stick(atoms, eps) == pytest.approx(inf_mass + target, rel=1e-12)
    # Below the mass at infinity: no epsilon works.
    if inf_mass > 0:
        assert epsilon_for_delta(pld, inf_mass, inf_mass * 0.999) == math.inf
    # At or above delta(0): epsilon is 0.
    delta0 = inf_mass + direct_hockey_stick(atoms, 0.0)
    assert epsilon_for_delta(pld, inf_mass, delta0 * (1 + 1e-12)) == 0.0
    assert epsilon_for_delta(pld, inf_mass, 1.0) == 0.0
    # Just below delta(0): a small positive epsilon.
    assert 0.0 < epsilon_for_delta(pld, inf_mass, delta0 * (1 - 1e-6)) < 1e-3


def test_epsilon_for_delta_randomized_response_is_log_odds():
    # One RR(0.75): delta(eps) = 0.75 (1 - e^{eps}/3) for eps < log 3.
    pld = make(RR)
    for eps0 in (0.1, 0.5, 1.0):
        delta = 0.75 * (1 - math.exp(eps0) / 3)
        assert epsilon_for_delta(pld, 0.0, delta) == pytest.approx(eps0, rel=1e-13)
    assert epsilon_for_delta(pld, 0.0, 1e-300) == pytest.approx(math.log(3), rel=1e-13)


def test_epsilon_for_delta_all_mass_at_infinity():
    empty = LossAtoms.from_atoms([], [])
    assert epsilon_for_delta(empty, 1.0, 0.5) == math.inf
    assert epsilon_for_delta(empty, 0.3, 0.5) == 0.0


@pytest.mark.parametrize("atoms,inf_mass", [(RR, 0.0), (SUB, 0.1), (GRID4, 0.0)], ids=["rr", "sub", "grid4"])
def test_epsilon_for_delta_at_the_mass_at_infinity(atoms, inf_mass):
    # The smallest eps with hockey_stick(eps) <= 0 is the largest finite loss.
    assert epsilon_for_delta(make(atoms), inf_mass, inf_mass) == pytest.approx(max(atoms), rel=1e-15)


# ---------------------------------------------------------------------------
# characteristic function
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("atoms", HS_CASES + [dict(zip(np.linspace(-3, 4, 100).tolist(),
                                                         (np.arange(1, 101) / 5050 * 0.97).tolist()))],
                         ids=HS_IDS + ["100 atoms"])
def test_log_phi_matches_direct_sum(atoms):
    pld = make(atoms)
    ts = np.array([0.0, 1e-9, 0.3, 1.0, 2.7, 10.0, -4.1, 123.4])
    values = pld.log_phi(ts)
    assert values.shape == ts.shape and values.dtype == complex
    for t_value, value in zip(ts, values):
        expected = direct_cf(atoms, t_value)
        assert abs(cmath.exp(value) - expected) <= 1e-13, t_value
    # log phi(0) is the log of the finite mass; near 0 the phase is t * E[L] (relative accuracy).
    assert values[0].real == pytest.approx(math.log(math.fsum(atoms.values())), abs=1e-15)
    mean = math.fsum(l * w for l, w in atoms.items()) / math.fsum(atoms.values())
    assert values[1].imag == pytest.approx(1e-9 * mean, rel=1e-6)
    grid = pld.log_phi(ts.reshape(2, 4))
    assert grid.shape == (2, 4)
    np.testing.assert_allclose(grid.ravel(), values, rtol=0, atol=0)


def test_log_phi_of_empty_pld():
    values = LossAtoms.from_atoms([], []).log_phi(np.array([0.0, 1.0]))
    assert np.all(values.real == -np.inf)


# ---------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------

@st.composite
def grid_plds(draw, max_atoms=5):
    """{loss: mass} with dyadic losses (exact sums) and total mass in (0.5, 1]."""
    count = draw(st.integers(1, max_atoms))
    losses = draw(st.lists(st.integers(-24, 24), min_size=count, max_size=count, unique=True))
    weights = draw(st.lists(st.floats(0.01, 1.0), min_size=count, max_size=count))
    total = draw(st.floats(0.5, 1.0))
    norm = math.fsum(weights)
    return {l / 8: w / norm * total for l, w in zip(losses, weights)}


FAST = settings(max_examples=40, deadline=None, database=None)


@FAST
@given(grid_plds(), grid_plds())
def test_convolution_is_commutative_and_preserves_mass(a, b):
    ab, ba = make(a).convolve(make(b)), make(b).convolve(make(a))
    np.testing.assert_array_equal(ab.losses, ba.losses)
    np.testing.assert_allclose(ab.log_masses, ba.log_masses, rtol=0, atol=1e-14)
    assert ab.log_mass == pytest.approx(math.log(math.fsum(a.values()) * math.fsum(b.values())), abs=1e-13)
    assert_pld_equal(ab, brute_convolve(a, b), rel=1e-13)


@FAST
@given(grid_plds(max_atoms=3), st.integers(1, 6), st.integers(1, 6))
def test_power_is_additive(a, m, n):
    pld = make(a)
    left, right = pld.power(m + n), pld.power(m).convolve(pld.power(n))
    np.testing.assert_allclose(left.losses, right.losses, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.exp(left.log_masses), np.exp(right.log_masses), rtol=1e-12)


def mp_smallest_epsilon(atoms: dict, target: float) -> float:
    """The root of sum w (1 - e^{eps - l})_+ = target on eps >= 0, by bisection in 40-digit arithmetic."""
    def excess(eps):
        return mpmath.fsum(mpmath.mpf(w) * -mpmath.expm1(eps - mpmath.mpf(l)) for l, w in atoms.items()
                           if mpmath.mpf(l) > eps) - mpmath.mpf(target)
    if excess(mpmath.mpf(0)) <= 0:
        return 0.0
    low, high = mpmath.mpf(0), mpmath.mpf(max(atoms))
    for _ in range(150):
        middle = (low + high) / 2
        low, high = (middle, high) if excess(middle) > 0 else (low, middle)
    return float(high)


@FAST
@given(grid_plds(), st.floats(0.0, 1.0), st.floats(0.0, 0.3))
def test_epsilon_for_delta_is_the_smallest_epsilon(a, delta, inf_mass):
    pld = make(a)
    if delta == inf_mass:
        delta = min(1.0, inf_mass + 1e-12)  # the exact boundary is tested above
    eps = epsilon_for_delta(pld, inf_mass, delta)
    if delta < inf_mass:
        assert eps == math.inf
        return
    root = mp_smallest_epsilon(a, delta - inf_mass)
    assert abs(eps - root) <= 1e-12 * root + 1e-15, (eps, root)
    values = hockey_stick(pld, np.linspace(-1, 4, 51))
    assert np.all(np.diff(values) <= 1e-15) and np.all(values >= 0)


def test_auto_answers_a_finite_composition_too_large_to_enumerate_with_the_pld():
    """'auto' on a finite-output composition whose exact enumeration is refused (here: the atom limit
    lowered) goes to the PLD; its certified bracket contains the exact enumeration's answer."""
    acc = afa.Accountant().compose(afa.DiscreteGaussian(2.0), times=20).compose(afa.RandomizedResponse(0.6), 5)
    truth = acc.epsilon_result(1e-6, method="exact")
    crowded = afa.Accountant(options=afa.Options(exact=afa.ExactOptions(max_atoms=50))).compose(afa.DiscreteGaussian(2.0), times=20).compose(afa.RandomizedResponse(0.6), 5)
    with pytest.raises(ValueError):
        crowded.epsilon_result(1e-6, method="exact")
    result = crowded.epsilon_result(1e-6)
    assert result.method == "pld" and result.certified
    assert result.lower <= truth.value <= result.upper


@pytest.mark.parametrize("p,count", [(0.9, 500), (0.6, 10_000)])
def test_epsilon_beyond_the_exponent_range_is_exact(p, count):
    """eps(1e-5) near 990 for these compositions: e^-loss underflows there (it used to divide by zero).
    The closed form (afa.numerics.exact, Sommer, Meiser & Mohammadi 2019, Example 1) gives delta = 1e-5 at the answer and more just below."""
    from afa.numerics import exact

    epsilon = afa.Accountant().compose(afa.RandomizedResponse(p), count).epsilon(1e-5)
    assert epsilon > 745
    assert exact.randomized_response_delta(epsilon, p, count) == pytest.approx(1e-5, rel=1e-9)
    assert exact.randomized_response_delta(epsilon * (1 - 1e-10), p, count) > 1e-5
