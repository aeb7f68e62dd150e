"""Dense lattice compositions (afa.engines.discrete: _lattice_power, _linear_lattice_convolve) against exact references.

The reference composes the mechanisms' exact one-use masses (mpmath at 150 digits) in fixed-point integer
arithmetic: masses as floor(w 2^P), each convolution exact in Python integers (packed into one big integer,
Kronecker substitution) and rounded down by 2^P once, so every composed mass is known to within
(2 count) 2^-P -- for P = 440 far below anything a delta of 1e-12 can see.  delta(eps) is then the direct
sum inf_mass + sum_{l > eps} m_l (1 - e^{eps - l}) in mpmath and eps(delta) its root between two atoms
(tests/test_discrete_soundness.py's mp_epsilon).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from test_discrete_soundness import mp_delta, mp_epsilon

import afa
import afa.numerics.atoms as afa_atoms
from afa import limits
from afa.engines.discrete import DiscreteComposition

#: Fixed-point bits of the integer reference.
BITS = 440


def _pack(coefficients: list[int], width: int) -> int:
    size = width // 8
    return int.from_bytes(b"".join(c.to_bytes(size, "little") for c in coefficients), "little")


def _unpack(number: int, width: int, count: int) -> list[int]:
    size = width // 8
    data = number.to_bytes(size * count, "little")
    return [int.from_bytes(data[i * size:(i + 1) * size], "little") for i in range(count)]


def _int_convolve(first: tuple[int, list[int]], second: tuple[int, list[int]]) -> tuple[int, list[int]]:
    """(origin, coefficients) of the product of two fixed-point lattice vectors, rounded down by 2^BITS and
    trimmed of zeros at both ends (a trimmed or rounded value is below 2^-BITS: within the error bound)."""
    (origin1, a), (origin2, b) = first, second
    largest = max(max(a), max(b)).bit_length()
    width = 8 * ((2 * largest + max(len(a), len(b)).bit_length() + 8) // 8 + 1)
    product = _unpack(_pack(a, width) * _pack(b, width), width, len(a) + len(b) - 1)
    values = [value >> BITS for value in product]
    nonzero = [i for i, value in enumerate(values) if value]
    return origin1 + origin2 + nonzero[0], values[nonzero[0]:nonzero[-1] + 1]


def _int_power(masses: list, count: int) -> tuple[int, list[int]]:
    """(origin, coefficients): the count-fold power of the lattice masses (mpmath), each coefficient c
    within 2 count units of the true mass times 2^BITS (every product adds the factors' errors, times a
    total mass <= 1, and one rounding)."""
    base = (0, [int(mp.floor(w * mp.mpf(2) ** BITS)) for w in masses])
    result = None
    while count:
        if count & 1:
            result = base if result is None else _int_convolve(result, base)
        count >>= 1
        if count:
            base = _int_convolve(base, base)
    assert result is not None
    return result


def _atoms(origin_loss, step, power) -> list:
    origin, coefficients = power
    scale = mp.mpf(2) ** -BITS
    return [(origin_loss + step * (origin + i), c * scale) for i, c in enumerate(coefficients) if c]


def _discrete_gaussian(sigma: float, kept: int) -> tuple[list, mp.mpf, mp.mpf, mp.mpf]:
    """(masses in loss order, the loss of the first, the step, inf mass) of DiscreteGaussian(sigma)'s loss
    as the mechanism keeps it: x in [-tau, tau] (kept = 2 tau + 1 atoms), loss (1 - 2x) / (2 sigma^2) under
    P = DG(0, sigma), the rest of P's mass at +infinity."""
    sigma, tau = mp.mpf(sigma), (kept - 1) // 2
    norm = mp.nsum(lambda y: mp.exp(-y ** 2 / (2 * sigma ** 2)), [-mp.inf, mp.inf])
    masses = [mp.exp(-mp.mpf(x) ** 2 / (2 * sigma ** 2)) / norm for x in range(tau, -tau - 1, -1)]
    return masses, (1 - 2 * mp.mpf(tau)) / (2 * sigma ** 2), 1 / sigma ** 2, 1 - mp.fsum(masses)


@pytest.fixture(scope="module")
def gaussian_100():
    """DiscreteGaussian(3) x 100: (accountant, reference atoms, reference inf mass)."""
    mp.mp.dps = 150
    mechanism = afa.DiscreteGaussian(sigma=3)
    loss = mechanism.privacy_losses()[0]
    masses, first, step, inf_one = _discrete_gaussian(3, loss.atoms.size)
    # the reference's one-use law is the mechanism's (checked to its stated errors)
    alpha, beta = loss.atoms.log_mass_error
    for w, log_w in zip(masses, loss.atoms.log_masses):
        assert abs(mp.log(w) - log_w) <= alpha + beta * abs(log_w)
    assert abs(inf_one - loss.inf_mass) <= 1e-12 * inf_one
    atoms = _atoms(100 * first, step, _int_power(masses, 100))
    inf_mass = 1 - (1 - inf_one) ** 100
    mp.mp.dps = 40
    return afa.Accountant().compose(mechanism, times=100), atoms, inf_mass


@pytest.mark.parametrize("epsilon", [0.0, 0.5, 5.0, 12.0, 20.0, 30.0, 45.0])
def test_discrete_gaussian_100_delta_is_exact(gaussian_100, epsilon):
    """delta(eps) of DiscreteGaussian(3) x 100 within 1e-12 relative of the exact integer-arithmetic
    reference, inside its stated bounds, and stated to within 1e-10 relative."""
    accountant, atoms, inf_mass = gaussian_100
    truth = mp_delta(atoms, epsilon, inf_mass)
    result = accountant.delta_result(epsilon, method="exact")
    assert result.lower <= truth <= result.upper, (epsilon, result, mp.nstr(truth, 20))
    assert abs(result.value - truth) <= 1e-12 * truth, (epsilon, result, mp.nstr(truth, 20))
    assert result.upper - result.lower <= 1e-9 * truth


@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-12])
def test_discrete_gaussian_100_epsilon_is_exact(gaussian_100, delta):
    """eps(delta) of DiscreteGaussian(3) x 100 within 1e-12 relative of the reference's root, inside its
    stated bracket."""
    accountant, atoms, inf_mass = gaussian_100
    truth = mp_epsilon(atoms, mp.mpf(delta) - inf_mass)
    result = accountant.epsilon_result(delta, method="exact")
    assert result.lower <= truth <= result.upper, (delta, result, mp.nstr(truth, 20))
    assert abs(result.value - truth) <= 1e-12 * truth, (delta, result, mp.nstr(truth, 20))
    assert result.upper - result.lower <= 1e-10 * truth


def test_composed_masses_lie_within_their_errors(gaussian_100):
    """Every atom of the dense power lies at its reference position within its loss error, with its log-mass
    within (alpha, beta) of the reference's (down to masses of 2^-300, where the reference is exact to
    far below a rounding unit)."""
    _, atoms, _ = gaussian_100
    loss = afa.DiscreteGaussian(sigma=3).privacy_losses()[0]
    power = afa_atoms._lattice_power(loss.atoms, 100, -math.inf, limits.LOG_NEGLIGIBLE)
    assert power is not None
    alpha, beta = power.log_mass_error
    truth = {round(float(l) * 9): (l, w) for l, w in atoms}
    checked = 0
    for loss_value, error, log_mass in zip(power.losses, power.loss_errors, power.log_masses):
        if round(loss_value * 9) not in truth:  # a reference mass below 2^-BITS
            assert log_mass < -BITS * math.log(2) + 1
            continue
        reference_loss, reference_mass = truth[round(loss_value * 9)]
        assert abs(mp.mpf(loss_value) - reference_loss) <= error
        if reference_mass > mp.mpf(2) ** -300:
            assert abs(mp.log(reference_mass) - log_mass) <= alpha + beta * abs(log_mass)
            checked += 1
    assert checked > 1000


def test_lattice_power_agrees_with_pair_enumeration(active_options):
    """DiscreteGaussian(1.5) x 12 through the dense power and through sorted pairs (dense paths disabled):
    the same atoms, each pair within the sum of their errors."""
    loss = afa.DiscreteGaussian(sigma=1.5).privacy_losses()[0]
    dense = loss.atoms.power(12, -math.inf, limits.LOG_NEGLIGIBLE)
    active_options(exact=afa.ExactOptions(lattice=False))
    pairs = loss.atoms.power(12, -math.inf, limits.LOG_NEGLIGIBLE)
    assert dense.size == pairs.size
    assert np.all(np.abs(dense.losses - pairs.losses) <= dense.loss_errors + pairs.loss_errors)
    (alpha1, beta1), (alpha2, beta2) = dense.log_mass_error, pairs.log_mass_error
    # (near the cutoff, e^-800, the pairs' intermediate cuts move mass into log_dropped instead)
    heavy = dense.log_masses > -700
    assert np.all(np.abs(dense.log_masses - pairs.log_masses)[heavy]
                  <= (alpha1 + alpha2 + (beta1 + beta2) * np.abs(dense.log_masses))[heavy])


def test_krr_substitution_power_is_exact():
    """k-RR(5, 0.21) under substitution (three atoms on the lattice {-1, 0, 1} log(p / other)) x 3000: eps
    and delta against the integer-arithmetic trinomial law, within their bounds and 1e-12 relative."""
    mp.mp.dps = 150
    k, p = 5, mp.mpf(0.21)
    other = (1 - p) / (k - 1)
    ratio = mp.log(p / other)
    masses = [other, (k - 2) * other, p]  # losses -ratio, 0, ratio
    count = 3000
    atoms = _atoms(-count * ratio, ratio, _int_power(masses, count))
    mp.mp.dps = 40
    accountant = afa.Accountant(neighboring="substitution").compose(afa.KaryRandomizedResponse(k=5, p=0.21),
                                                                    times=count)
    for delta in (1e-3, 1e-9):
        truth = mp_epsilon(atoms, delta)
        result = accountant.epsilon_result(delta, method="exact")
        assert result.lower <= truth <= result.upper, (delta, result, mp.nstr(truth, 20))
        assert abs(result.value - truth) <= 1e-12 * truth
    for epsilon in (1.0, 3.0):
        truth = mp_delta(atoms, epsilon)
        result = accountant.delta_result(epsilon, method="exact")
        assert result.lower <= truth <= result.upper, (epsilon, result, mp.nstr(truth, 20))
        assert abs(result.value - truth) <= 1e-12 * truth


def test_commensurate_gaussian_and_laplace_share_the_lattice():
    """DiscreteGaussian(3) x 40 and DiscreteLaplace(1/18) x 50 (steps 1/9 and 1/9: one lattice) compose
    through the dense convolution; eps(delta) and delta(eps) against the integer-arithmetic reference."""
    mp.mp.dps = 150
    loss = afa.DiscreteGaussian(sigma=3).privacy_losses()[0]
    masses, first, step, inf_one = _discrete_gaussian(3, loss.atoms.size)
    gaussian = _int_power(masses, 40)
    a = mp.mpf(1) / 18
    high = 1 / (1 + mp.exp(-a))  # DiscreteLaplace(a, 1): loss +a with P(x <= 0), -a with P(x >= 1)
    laplace = _int_power([1 - high, high], 50)  # on the lattice -a + 2a j = -a + j / 9
    atoms = _atoms(40 * first - 50 * a, step, _int_convolve(gaussian, laplace))
    inf_mass = 1 - (1 - inf_one) ** 40
    mp.mp.dps = 40
    accountant = afa.Accountant().compose(afa.DiscreteGaussian(sigma=3), times=40) \
        .compose(afa.DiscreteLaplace(a=1 / 18), times=50)
    composition = DiscreteComposition([(loss.atoms, 40),
                                       (afa.DiscreteLaplace(a=1 / 18).privacy_losses()[0].atoms, 50)], 0.0)
    assert composition.full is not None
    for delta in (1e-4, 1e-10):
        truth = mp_epsilon(atoms, mp.mpf(delta) - inf_mass)
        result = accountant.epsilon_result(delta, method="exact")
        assert result.lower <= truth <= result.upper, (delta, result, mp.nstr(truth, 20))
        assert abs(result.value - truth) <= 1e-12 * truth
    truth = mp_delta(atoms, 8.0, inf_mass)
    result = accountant.delta_result(8.0, method="exact")
    assert result.lower <= truth <= result.upper
    assert abs(result.value - truth) <= 1e-12 * truth


def test_wide_lattice_law_keeps_or_counts_every_mass():
    """A geometric law w_k = c r^k, r = e^-6.5, k = 0..100 (masses over 650 nats) composed 50 times with no
    cutoff: the outputs too small for double precision are dropped into log_dropped, the kept ones match the
    closed form C(K + 49, 49) r^K c^50 (for K <= 100, where truncation at 100 does not enter) within their
    errors, and kept plus dropped mass is at least the true total (c sum_k r^k)^50."""
    mp.mp.dps = 60
    r, count = mp.exp(-mp.mpf(6.5)), 50
    c = 1 / mp.fsum(r ** k for k in range(101))
    atoms = afa_atoms.LossAtoms.from_atoms(0.25 * np.arange(101), [float(mp.log(c) - 6.5 * k) for k in range(101)])
    power = afa_atoms._lattice_power(atoms, count, -math.inf, -math.inf)
    assert power is not None and power.log_dropped > -math.inf
    alpha, beta = power.log_mass_error
    checked = 0
    for loss_value, log_mass in zip(power.losses, power.log_masses):
        index = round(loss_value / 0.25)
        if index <= 100:
            truth = mp.log(mp.binomial(index + count - 1, count - 1)) + index * mp.log(r) + count * mp.log(c)
            assert abs(truth - log_mass) <= alpha + beta * abs(log_mass), (index, truth, log_mass)
            checked += 1
    assert checked == 101
    # each kept mass at the top of its error, plus the dropped: at least the total of the law, (c sum r^k)^50 = 1
    kept = mp.fsum(mp.exp(mp.mpf(x) + alpha + beta * abs(x)) for x in power.log_masses)
    assert kept + mp.exp(mp.mpf(power.log_dropped)) >= 1


def _binomial_delta(high, w_high, low, w_low, count, epsilon):
    """delta(eps) of ``count`` uses of the two-atom loss {high: w_high, low: w_low} (mpmath): the binomial
    sum over j (uses at ``high``) with loss j high + (count - j) low > eps, each term C(count, j) w_high^j
    w_low^(count - j) (1 - e^{eps - loss}), from the first j above eps by the ratio of consecutive terms
    until past the mode and below 1e-40 of the sum."""
    eps = mp.mpf(epsilon)
    j = max(0, int(mp.floor((eps - count * low) / (high - low))))
    while j * high + (count - j) * low <= eps:
        j += 1
    mode = count * w_high / (w_high + w_low)
    log_term = (mp.loggamma(count + 1) - mp.loggamma(j + 1) - mp.loggamma(count - j + 1)
                + j * mp.log(w_high) + (count - j) * mp.log(w_low))
    mass, total = mp.exp(log_term), mp.mpf(0)
    ratio = w_high / w_low
    while j <= count:
        loss = j * high + (count - j) * low
        term = mass * -mp.expm1(eps - loss)
        total += term
        if j > mode and term < total * mp.mpf(10) ** -40:
            break
        mass *= (count - j) * ratio / (j + 1)
        j += 1
    return total


@pytest.mark.parametrize("mechanism,directions,epsilons,tolerance", [
    (afa.RandomizedResponse(p=0.6), lambda m: [(m.p, 1 - m.p)], [80_000.0, 82_980.0, 85_000.0], 1e-12),
    (afa.KaryRandomizedResponse(k=5, p=0.21),
     lambda m: [("remove", m.k, m.p), ("add", m.k, m.p)], [300.0, 426.0, 500.0], 1e-11),
], ids=["rr", "krr"])
def test_two_atom_laws_a_million_times_are_exact(mechanism, directions, epsilons, tolerance):
    """RR(0.6) and k-RR(5, 0.21) (add/remove: the larger of the two directions) x 10^6 (the binomial law):
    delta(eps) against the binomial sums in mpmath, within ``tolerance`` relative and inside the stated
    bounds; eps(1e-6)'s bracket holds the true crossing (the true delta above 1e-6 at its lower end, at most
    1e-6 at its upper).  (k-RR's one-use losses log(pk), log((1 - p) k / (k - 1)) are rounded doubles; a
    million uses move the composed losses by a million of those roundings, about 4e-12 relative on delta.)"""
    mp.mp.dps = 40
    count = 10**6
    laws = []
    for direction in directions(mechanism):
        if len(direction) == 2:
            p = mp.mpf(direction[0])
            laws.append((mp.log(p / (1 - p)), p, mp.log((1 - p) / p), 1 - p))
        else:
            k, p = mp.mpf(direction[1]), mp.mpf(direction[2])
            if direction[0] == "remove":  # P = (p, 1 - p), Q = (1/k, (k - 1)/k)
                laws.append((mp.log(p * k), p, mp.log((1 - p) * k / (k - 1)), 1 - p))
            else:
                laws.append((mp.log(k - 1) - mp.log(k * (1 - p)), (k - 1) / k, -mp.log(p * k), 1 / k))

    def truth(epsilon):
        return max(_binomial_delta(*law, count, epsilon) for law in laws)

    accountant = afa.Accountant().compose(mechanism, times=count)
    for epsilon in epsilons:
        exact = truth(epsilon)
        result = accountant.delta_result(epsilon, method="exact")
        assert result.lower <= exact <= result.upper, (epsilon, result, mp.nstr(exact, 20))
        assert abs(result.value - exact) <= tolerance * exact, (epsilon, result, mp.nstr(exact, 20))
    result = accountant.epsilon_result(1e-6, method="exact")
    assert truth(result.lower) > 1e-6 >= truth(result.upper), result
    assert result.upper - result.lower <= 1e-10 * result.value


def test_direct_convolve_forms_numpys_sums_in_short_dot_products():
    """Vectors longer than DOT_CHUNK: every output equals numpy's convolution to a few ulps and, on integers
    (where every partial sum is exact), bit for bit; lengths below and at the chunk go to numpy whole."""
    from afa._accurate import DOT_CHUNK, direct_convolve

    rng = np.random.default_rng(5)
    for sizes in ((DOT_CHUNK + 1, 3 * DOT_CHUNK + 7), (2 * DOT_CHUNK + 5, 2 * DOT_CHUNK), (5, DOT_CHUNK)):
        first, second = rng.random(sizes[0]), rng.random(sizes[1])
        ours, numpys = direct_convolve(first, second), np.convolve(first, second)
        assert ours.shape == numpys.shape
        assert np.max(np.abs(ours - numpys) / numpys) < 1e-13
        whole_first, whole_second = rng.integers(0, 8, sizes[0]).astype(float), rng.integers(0, 8, sizes[1]).astype(float)
        assert np.array_equal(direct_convolve(whole_first, whole_second), np.convolve(whole_first, whole_second))


def test_direct_convolve_checks_the_budget_between_pieces():
    from afa._accurate import DOT_CHUNK, direct_convolve

    with afa.budget.limits(seconds=1e-9):
        with pytest.raises(afa.BudgetExceededError, match="a test convolution"):
            direct_convolve(np.ones(3 * DOT_CHUNK), np.ones(3 * DOT_CHUNK), "a test convolution")


def test_discrete_gaussian_a_hundred_thousand_times_is_exact_inside_the_pld_bracket():
    """DiscreteGaussian(3) x 10^5 at delta = 1e-6: the lattice power fits the work allowance (about 6e8
    multiply-adds of direct convolution), so 'auto' answers exactly, with a bracket 1e-9 wide relative, and the
    value lies inside the discretized PLD's certified bracket (a second engine)."""
    accountant = afa.Accountant().compose(afa.DiscreteGaussian(sigma=3.0), 10**5)
    exact = accountant.epsilon_result(1e-6)
    pld = accountant.epsilon_result(1e-6, method="pld")
    assert exact.method == "exact"
    assert exact.upper - exact.lower <= 1e-9 * exact.value
    assert pld.lower <= exact.lower <= exact.upper <= pld.upper
