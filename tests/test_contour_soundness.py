"""The contour method where lattice-valued losses meet continuous ones: every answer inside its bounds, or a refusal.

A finite-output mechanism (discrete Laplace, discrete Gaussian, k-ary randomized response) has its privacy
loss on a lattice, so its MGF is periodic along a vertical line and the contour integrand repeats the
saddle's bump wherever the atoms' phases realign, damped only by the continuous terms (issue 16).

Ground truth here shares no code with afa's engines:

* the lattice part is enumerated from the mechanisms' definitions -- the pmf of one use's loss (discrete
  Laplace: Canonne, Kamath & Steinke 2020 Def. 3 noise; discrete Gaussian: ibid. Def. 1; k-ary randomized
  response) raised to its count by direct convolution of non-negative vectors, each output relatively
  accurate to (its number of products) x ulp (Higham 2002, Sec. 3.1), which bounds the reference's error;
* the Gaussian mechanisms compose to a loss N(mu^2/2, mu^2) whose privacy profile is
  delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu) (Balle & Wang 2018, Thm 8), evaluated with
  mpmath at 40 digits, and mixed over the lattice atoms: delta = sum_j w_j delta_Gauss(eps - l_j);
* for Poisson-subsampled Gaussians, the same mixture over the lattice atoms of the certified bracket of the
  subsampled part alone (Zhu, Dong & Wang 2022, Algorithm 2), which contains no lattice.

eps(delta) is checked by containment: the true eps lies in [lower, upper] iff the true delta at lower is
at least the target and at upper at most it.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from scipy.special import log_ndtr, logsumexp

import afa
from afa import budget
from afa.engines import base as engines
from afa.engines import contour as contour_module
from afa.results import AccuracyError

ULP = np.finfo(float).eps


# -- the reference ------------------------------------------------------------------------------------
#: Masses below this are dropped before each convolution (their total is the reference's absolute error): products
#: of smaller ones would be subnormal, which costs a hundred times a normal product.
FLUSH = 1e-150


class Lattice:
    """A finite loss distribution on the points unit * (first + step * j), j = 0 .. n - 1 (integers first, step),
    with masses w_j: each loss is one rounding of an exact integer multiple.  The true masses are within rtol
    relative and, in all, atol absolute of these."""

    def __init__(self, unit: float, first: int, step: int, masses, rtol: float = 0.0, atol: float = 0.0):
        masses = np.asarray(masses, dtype=float)
        dropped = masses < FLUSH
        kept = np.flatnonzero(~dropped)
        self.unit, self.first, self.step = unit, int(first) + int(step) * int(kept[0]), int(step)
        self.masses = np.where(dropped, 0.0, masses)[kept[0]:kept[-1] + 1]  # the support's window
        self.rtol, self.atol = rtol, atol + float(np.sum(masses[dropped]))

    @property
    def losses(self) -> np.ndarray:
        return self.unit * (self.first + self.step * np.arange(self.masses.size)).astype(float)

    def power(self, count: int) -> Lattice:
        """The count-fold sum, by binary powering with direct (non-FFT) convolutions of non-negative vectors."""
        result, base, remaining = None, self, count
        while remaining:
            if remaining & 1:
                result = base if result is None else result.convolve(base)
            remaining >>= 1
            if remaining:
                base = base.convolve(base)
        return result

    def convolve(self, other: Lattice) -> Lattice:
        assert self.unit == other.unit and self.step == other.step
        masses = np.convolve(self.masses, other.masses)
        # Each output is a sum of at most min(n, m) non-negative products: relative error <= that many ulps.
        rtol = self.rtol + other.rtol + (min(self.masses.size, other.masses.size) + 1) * ULP
        return Lattice(self.unit, self.first + other.first, self.step, masses, rtol, self.atol + other.atol)


def discrete_laplace(a: float) -> Lattice:
    """Sensitivity 1: P = DLap(a) centred at 0, Q at 1; the loss a(|x - 1| - |x|) is +a for x <= 0, -a for x >= 1."""
    plus = 1.0 / (1.0 + math.exp(-a))  # P[x <= 0] = sum_{x <= 0} e^{a x} (1 - e^-a) / (1 + e^-a)
    return Lattice(a, -1, 2, [1.0 - plus, plus])


def discrete_gaussian(sigma: float, sensitivity: int) -> Lattice:
    """P = N_Z(sensitivity, sigma^2), Q = N_Z(0, sigma^2): loss sensitivity (2x - sensitivity) / (2 sigma^2), x ~ P."""
    reach = int(math.ceil(38 * sigma)) + 2  # e^{-38^2 / 2} < 1e-300 of the mass beyond
    x = np.arange(-reach, reach + 1) + sensitivity
    log_w = -((x - sensitivity) ** 2) / (2 * sigma ** 2)
    masses = np.exp(log_w - logsumexp(log_w))
    return Lattice(sensitivity / (2 * sigma ** 2), 2 * int(x[0]) - sensitivity, 2, masses)


def k_randomized_response(k: int, p: float) -> Lattice:
    """Substitution: P = (p, o, (k - 2) o), Q = (o, p, (k - 2) o), o = (1 - p) / (k - 1): losses -xi, 0, +xi."""
    other = (1 - p) / (k - 1)
    return Lattice(math.log(p / other), -1, 1, [other, (k - 2) * other, p])


def gaussian_delta(x, mu):
    """delta(x) of the loss N(mu^2/2, mu^2), in mpmath."""
    x, mu = mp.mpf(x), mp.mpf(mu)
    return mp.ncdf(mu / 2 - x / mu) - mp.exp(x) * mp.ncdf(-mu / 2 - x / mu)


class Reference:
    """delta(eps) = sum_j w_j h(eps - l_j) over a lattice, h the Gaussian's profile (mpmath) or a bracket."""

    def __init__(self, lattice: Lattice, mu: float):
        self.lattice, self.mu = lattice, mu

    def _significant(self, epsilon: float) -> np.ndarray:
        """Atoms whose contribution can exceed 1e-30 of the largest (delta_Gauss(x) <= Phi(mu/2 - x/mu))."""
        losses, masses = self.lattice.losses, self.lattice.masses
        with np.errstate(divide="ignore"):
            bound = np.log(masses) + log_ndtr(self.mu / 2 - (epsilon - losses) / self.mu)
        return np.flatnonzero(bound >= np.max(bound) - 70)

    def delta(self, epsilon: float) -> tuple[float, float]:
        """(delta, relative error bound of the reference): the masses' rounding, the masses dropped (at most their
        total, as delta_Gauss <= 1) and the atoms left out (at most 1e-30 of the largest term each)."""
        significant = self._significant(epsilon)
        with mp.workdps(40):
            total = mp.fsum(mp.mpf(float(self.lattice.masses[j])) * gaussian_delta(epsilon - float(self.lattice.losses[j]),
                                                                                   self.mu)
                            for j in significant)
        return float(total), self.lattice.rtol + (self.lattice.atol / float(total) + 1e-30 * self.lattice.masses.size)


def contains(result, reference: Reference, target: float) -> bool:
    """Whether [result.lower, result.upper] contains the true eps(target), up to the reference's own error."""
    at_lower, rtol = reference.delta(result.lower)
    at_upper, _ = reference.delta(result.upper)
    return at_lower * (1 + rtol) >= target >= at_upper * (1 - rtol)


def accountant(lattice_mechanism, count: int, gaussians: list[tuple[float, int]]) -> afa.Accountant:
    acc = afa.Accountant(neighboring="substitution").compose(lattice_mechanism, times=count)
    for sigma, times in gaussians:
        acc.compose(afa.Gaussian(sigma), times=times)
    return acc


def mu_of(gaussians) -> float:
    return math.sqrt(sum(times / sigma ** 2 for sigma, times in gaussians))


# -- the compositions of the issue --------------------------------------------------------------------
CASE_ONE = (0.10499846946844932, 2101, [(22.674243728764907, 9)])


def test_reference_reproduces_an_exact_binomial_weight():
    """The convolution reference against one closed-form weight: DLap x 2101 puts C(2101, j) p^(2101-j) (1-p)^j
    on the j-th atom from the top."""
    a, count, _ = CASE_ONE
    powered = discrete_laplace(a).power(count)
    p = mp.mpf(1) / (1 + mp.exp(-a))
    for j in (600, 1000, 1100):
        exact = mp.binomial(count, j) * p ** (count - j) * (1 - p) ** j
        index = ((count - 2 * j) - powered.first) // powered.step
        assert float(powered.masses[index]) == pytest.approx(float(exact), rel=max(powered.rtol, 1e-15))
        assert powered.losses[index] == (count - 2 * j) * a


@pytest.mark.parametrize("delta", [1e-5, 1e-10, 2e-28])
def test_discrete_laplace_with_gaussians_is_contained(delta):
    """Issue 16: Gaussian(22.67) x 9 + DiscreteLaplace(a = 0.105) x 2101 gave eps 5e-8 relative below the truth
    at every delta (the replica bumps at t = 2 pi m / (2a) were cut off)."""
    a, count, gaussians = CASE_ONE
    acc = accountant(afa.DiscreteLaplace(a=a, sensitivity=1), count, gaussians)
    reference = Reference(discrete_laplace(a).power(count), mu_of(gaussians))
    result = acc.epsilon_result(delta, method="contour")
    assert contains(result, reference, delta), result
    value, rtol = reference.delta(result.value)
    assert acc.delta_result(result.value, method="contour").value == pytest.approx(value, rel=1e-11 + rtol)


def test_discrete_gaussian_with_gaussians_default_answer_is_contained():
    """Issue 16: DiscreteGaussian(0.958) x 480 + Gaussian(12.0) x 2 at delta = 1.1e-21: 'auto' answered with the
    contour 477.47646 +- 1e-12 (truth 477.53382)."""
    sigma, count, gaussians, delta = 0.9583826543259171, 480, [(12.006722707221881, 2)], 1.1253341423781677e-21
    acc = afa.Accountant().compose(afa.DiscreteGaussian(sigma=sigma), times=count)
    for gaussian_sigma, times in gaussians:
        acc.compose(afa.Gaussian(gaussian_sigma), times=times)
    result = acc.epsilon_result(delta, method="contour")
    assert contains(result, Reference(discrete_gaussian(sigma, 1).power(count), mu_of(gaussians)), delta), result


def test_subsampled_gaussian_with_discrete_gaussian_is_contained():
    """Issue 16: PoissonSubsampled(Gaussian(0.909), q = 0.0747) x 4 + DiscreteGaussian(0.703) x 522 at delta =
    1.22e-6: the contour said 680.00864 +- 3e-12, outside the PLD's certified bracket [679.67233, 679.86707].
    Reference: the lattice mixture of the certified bracket of the subsampled part alone (no lattice there)."""
    sigma, q, dg_sigma, count, delta = 0.9094952892879938, 0.07469277030303016, 0.7031323755755451, 522, \
        1.2240781897817797e-06
    subsampled = afa.Gaussian(sigma=sigma).poisson_subsampled(q)
    acc = afa.Accountant(neighboring="substitution").compose(subsampled, times=4)
    acc.compose(afa.DiscreteGaussian(sigma=dg_sigma, sensitivity=1), times=count)
    result = acc.epsilon_result(delta, method="contour")
    lattice = discrete_gaussian(dg_sigma, 1).power(count)
    alone = afa.Accountant(neighboring="substitution").compose(subsampled, times=4)
    bracket = lattice_mixture_bracket(lattice, alone.planner.engines("certified")[0])
    assert bracket(result.lower)[1] >= delta >= bracket(result.upper)[0], result


def lattice_mixture_bracket(lattice, certified):
    """eps -> [low, high] of the true delta of a lattice composed with a part whose certified bracket is
    ``certified``: sum_j w_j [h_low, h_high](eps - l_j) over the atoms that matter."""
    def bracket(epsilon):
        shifts = epsilon - lattice.losses
        keep = (lattice.masses > 1e-40 * lattice.masses.max()) & (shifts < 40)
        middle, half = certified.delta(shifts[keep])
        low = np.clip(middle - half, 0, 1) @ lattice.masses[keep]
        high = np.clip(middle + half, 0, 1) @ lattice.masses[keep] + 1e-40  # the atoms left out (h <= e^-40 there)
        return low * (1 - lattice.rtol), high * (1 + lattice.rtol)
    return bracket


def test_a_sum_beyond_its_work_allowance_is_refused_early_and_auto_answers_from_the_pld():
    """Fuzz seed 6903's shape: discrete Gaussian (sigma 11.3) x 20 with one Poisson-subsampled Gaussian (q = 0.002).
    The lattice's bump recurs every 2 pi sigma^2 ~ 803 along a vertical line and the subsampled term barely damps
    it, so the sum runs far up the line, where one node of the numeric MGF costs output nodes in proportion to
    |Im s|.  The contour must refuse for its work allowance (a NodeBudgetError, well inside a 60 s budget; without
    the allowance it ran into the budget), and 'auto' must answer from the PLD with a bracket that holds the
    lattice mixture of the subsampled part's certified bracket (as in the test above)."""
    from afa.engines.contour import NodeBudgetError
    sigma, q, dg_sigma, count, delta = 0.887964939872814, 0.0020530663895541386, 11.30719047357859, 20, 1.0364e-20
    subsampled = afa.Gaussian(sigma=sigma).poisson_subsampled(q)

    def build():
        acc = afa.Accountant(neighboring="substitution", budget=afa.Budget(seconds=60))
        acc.compose(afa.DiscreteGaussian(sigma=dg_sigma, sensitivity=1), times=count)
        return acc.compose(subsampled, times=1)

    with pytest.raises(NodeBudgetError, match="terms of its finite and numeric MGFs"):
        build().epsilon_result(delta, method="contour")
    result = build().epsilon_result(delta)
    assert [(a.method, a.outcome) for a in result.attempts] == [("contour", "refused"), ("pld", "answered")]
    assert result.upper - result.lower < 1e-6 * result.value
    alone = afa.Accountant(neighboring="substitution").compose(subsampled)
    bracket = lattice_mixture_bracket(discrete_gaussian(dg_sigma, 1).power(count), alone.planner.engines("certified")[0])
    assert bracket(result.lower)[1] >= delta >= bracket(result.upper)[0], result


def test_answer_does_not_depend_on_earlier_queries():
    """Issue 16: on one accountant the first contour eps(2.29e-14) was inf, the second 8880.6176, 'auto' inf again
    (Newton started where delta is about 1 and followed a rounding-noise slope).  The truth is finite (no mass at
    infinity beyond the discrete Gaussians' 1e-60 tail cut), so every answer must be the same finite bracket."""
    def build():
        acc = afa.Accountant(neighboring="substitution").compose(afa.Gaussian(5.867710430443744), times=4)
        acc.compose(afa.KaryRandomizedResponse(k=9, p=0.7951170051539819), times=2761)
        acc.compose(afa.DiscreteGaussian(16.59428358924367, sensitivity=2), times=5532)
        return acc.compose(afa.DiscreteGaussian(1.3449550333838278), times=3049)

    delta = 2.293466882430777e-14
    acc = build()
    assert max(acc.inf_mass.values()) < 1e-40
    first = acc.epsilon_result(delta, method="contour")
    acc.epsilon_result(1e-3, method="contour")
    acc.delta_result(first.value * 1.01, method="contour")
    second = acc.epsilon_result(delta, method="contour")
    fresh = build().epsilon_result(delta, method="contour")
    assert math.isfinite(first.value) and first.upper - first.lower < 1e-12 * first.value
    assert first == second == fresh


def test_saddle_far_above_the_lattice_does_not_overflow():
    """k-RR(k = 4, p = 0.799) x 72 + Gaussian(28.1) x 4 at delta = 3e-20: eps sits 0.0 .. 1.4 above the lattice's
    top atom 72 log(p / o), where the saddle point c ~ 300 makes e^{c l} of one use's atoms overflow; the MGF
    must be summed with the top atom factored out (it was refused: 'no usable saddle point')."""
    k, p, count, gaussians, delta = 4, 0.7986761958375352, 72, [(28.116227948438354, 4)], 2.983094455838745e-20
    acc = accountant(afa.KaryRandomizedResponse(k=k, p=p), count, gaussians)
    reference = Reference(k_randomized_response(k, p).power(count), mu_of(gaussians))
    result = acc.epsilon_result(delta, method="contour")
    assert contains(result, reference, delta), result
    top = count * k_randomized_response(k, p).losses[-1]
    for epsilon in (top + 0.7, top + 1.4):
        truth, rtol = reference.delta(epsilon)
        answer = acc.delta_result(epsilon, method="contour")
        assert 0 < truth < 1e-30 and answer.lower * (1 - rtol) <= truth <= answer.upper * (1 + rtol)


# -- Newton's method for eps(delta) ---------------------------------------------------------------------
@pytest.mark.parametrize("slope", [1e10, 1e11, 1e12])
def test_newton_never_returns_an_eps_whose_delta_exceeds_the_target(slope):
    """Issue 16 saw delta 11 % above the target at the contour's eps ~ 2e4: where delta falls by more than 1e-4
    per ulp of eps, a Newton step below 4 ulps still leaves delta above the target.  delta(eps) =
    target e^{-slope (eps - root)} with the root between two doubles: the answer must have delta <= target,
    within a few ulps of the root."""
    root_double, target = 2e4, 1e-5
    offset = 0.37 * np.spacing(root_double)

    def delta_and_slope(epsilon):
        value = target * math.exp(min(-slope * ((epsilon - root_double) - offset), -math.log(target)))
        return value, 1e-13 * value, slope * value

    epsilon, (value, _, _) = engines.newton_epsilon(delta_and_slope, target, root_double - 1e-9, 10.0)
    assert value <= target
    assert 0 < (epsilon - root_double) / np.spacing(root_double) <= 8


def test_newton_does_not_give_up_on_a_flat_start():
    """A start where delta rounds to 1 gives a slope of rounding size and a huge Newton step: the answer must be the
    finite root, never inf (the truth is inf only with mass at infinity above the target)."""
    def delta_and_slope(epsilon):
        if epsilon < 100:
            return 1.0, 1e-16, 1e-300
        return math.exp(-(epsilon - 100)), 0.0, math.exp(-(epsilon - 100))

    epsilon, _ = engines.newton_epsilon(delta_and_slope, 1e-5, 1.0, 10.0)
    assert epsilon == pytest.approx(100 + math.log(1e5), rel=1e-14)


def test_newton_stops_once_the_target_is_within_the_values_error():
    """delta(eps) = e^(-eps^2 / 2) stated to a relative 1e-8: Newton's method ends at the first eps whose delta is
    within a quarter of that error of the target (the root is then within error / (4 slope) of it), in fewer
    evaluations than the same delta stated exactly, which it follows to a few ulps."""
    target = 1e-5
    root = math.sqrt(2 * math.log(1e5))
    calls = {1e-8: 0, 0.0: 0}

    def stated(rtol):
        def delta_and_slope(epsilon):
            calls[rtol] += 1
            value = math.exp(-epsilon ** 2 / 2)
            return value, rtol * value, epsilon * value
        return delta_and_slope

    epsilon, (value, error, slope) = engines.newton_epsilon(stated(1e-8), target, 1.0, 10.0)
    assert abs(value - target) <= error / 4
    assert abs(epsilon - root) <= error / (4 * slope) * 1.01
    exact, _ = engines.newton_epsilon(stated(0.0), target, 1.0, 10.0)
    assert abs(exact - root) <= 8 * np.spacing(root)
    assert calls[1e-8] < calls[0.0]


def test_widened_contour_answers_as_a_new_wide_one_from_the_values_already_summed(monkeypatch):
    """A few uses of a subsampled Gaussian with a small q at a tiny delta run the default contour out of nodes;
    the planner's retry widens that engine.  The widened engine answers as a new wide-budget engine does (same
    bracket to its width), both within the discretized PLD's certified bracket, after fewer numeric MGF sums
    (it starts from the node values already formed); the default engine keeps its budget."""
    from afa.engines.contour import NodeBudgetError
    from afa.mechanisms import shifted_output
    sums = [0]
    original = shifted_output.log_sums
    monkeypatch.setattr(shifted_output, "log_sums", lambda *a, **k: sums.__setitem__(0, sums[0] + 1) or original(*a, **k))
    # (with a far weaker Gaussian beside it, so that the contour sums the whole law, not its pile/tail split)
    mechanism, count, delta = afa.Gaussian(0.8).poisson_subsampled(0.001), 1000, 1e-6
    accountant = afa.Accountant().compose(mechanism, count).compose(afa.Gaussian(1000.0))
    planner = accountant.planner
    default = planner.engines("contour")
    budget_before = [engine.inversion.max_nodes for engine in default]
    with pytest.raises(NodeBudgetError):
        for engine in default:
            engine.epsilon_bracket(delta)
    sums[0] = 0
    widened = [engine.widened(planner.options.contour.wide_numeric_nodes) for engine in default]
    bracket = max(engine.epsilon_bracket(delta)[1:] for engine in widened)
    from_summed = sums[0]
    fresh = afa.Accountant().compose(mechanism, count).compose(afa.Gaussian(1000.0))
    sums[0] = 0
    new = max(engine.epsilon_bracket(delta)[1:] for engine in fresh.planner.engines(
        "contour (wide node budget)"))
    assert from_summed < sums[0]
    assert [engine.inversion.max_nodes for engine in default] == budget_before
    assert bracket[0] <= new[1] and new[0] <= bracket[1]
    assert bracket[1] - bracket[0] <= 1e-8 * bracket[1]
    pld = afa.Accountant().compose(mechanism, count).compose(afa.Gaussian(1000.0)).epsilon_result(delta, method="pld")
    assert pld.lower <= bracket[0] and bracket[1] <= pld.upper


# -- the run-time check --------------------------------------------------------------------------------
def test_second_line_refuses_a_corrupted_sum(monkeypatch):
    """The check re-sums delta on a second line: a contour sum whose node values carry a relative error of 1e-9
    (far beyond the stated 1e-13) on the first line only must be refused, not returned."""
    acc = accountant(afa.DiscreteLaplace(a=0.3), 200, [(3.0, 2)])
    inversion = acc.planner.engines("contour")[0].inversion
    assert acc.delta_result(20.0, method="contour").value > 0  # checks pass uncorrupted
    original = contour_module.ContourInversion._node_log_integrand
    lines = []

    def corrupted(self, s, epsilon, psi=None):
        log_f, log_envelope, log_skipped, log_relative = original(self, s, epsilon, psi)
        lines.append(float(s.real[0]))
        return (log_f + 1e-9 if s.real[0] == lines[0] else log_f), log_envelope, log_skipped, log_relative

    monkeypatch.setattr(contour_module.ContourInversion, "_node_log_integrand", corrupted)
    inversion._last = None
    with pytest.raises(AccuracyError, match="second line"):
        inversion.delta(np.array([20.5]), verify=True)


def test_contour_loops_respect_the_time_budget():
    """budget.check in the node sums: a spent budget refuses (BudgetExceededError is an AccuracyError)."""
    acc = accountant(afa.DiscreteGaussian(sigma=1.0), 200, [(20.0, 1)])
    with budget.limits(seconds=1e-9), pytest.raises(budget.BudgetExceededError):
        acc.epsilon_result(1e-10, method="contour")


# -- seeded sweeps -----------------------------------------------------------------------------------------
def _random_case(rng):
    family = rng.choice(["dlap", "dgauss", "krr"])
    if family == "dlap":
        a = float(rng.uniform(0.05, 0.6))
        mechanism, lattice, count = afa.DiscreteLaplace(a=a), discrete_laplace(a), int(rng.integers(50, 3000))
    elif family == "dgauss":
        sigma, sensitivity = float(rng.uniform(0.5, 1.2)), int(rng.integers(1, 3))
        mechanism = afa.DiscreteGaussian(sigma=sigma, sensitivity=sensitivity)
        lattice, count = discrete_gaussian(sigma, sensitivity), int(rng.integers(20, 300))
    else:
        k = int(rng.integers(3, 10))
        p = float(rng.uniform(max(1.0 / k + 0.05, 0.3), 0.9))
        mechanism, lattice, count = afa.KaryRandomizedResponse(k=k, p=p), k_randomized_response(k, p), \
            int(rng.integers(20, 1000))
    gaussians = [(float(rng.uniform(3.0, 30.0)), int(rng.integers(1, 10)))]
    delta = float(10 ** rng.uniform(-25, -3))
    return mechanism, lattice, count, gaussians, delta


def _check_case(mechanism, lattice, count, gaussians, delta):
    acc = accountant(mechanism, count, gaussians)
    try:
        result = acc.epsilon_result(delta, method="contour")
    except AccuracyError:
        return "refused"
    reference = Reference(lattice.power(count), mu_of(gaussians))
    assert contains(result, reference, delta), (mechanism, count, gaussians, delta, result)
    at_value = acc.delta_result(result.value, method="contour")
    truth, rtol = reference.delta(result.value)
    assert at_value.lower * (1 - rtol) <= truth <= at_value.upper * (1 + rtol), (mechanism, count, at_value, truth)
    return "answered"


@pytest.mark.parametrize("seed", range(8))
def test_seeded_lattice_and_gaussian_sweep(seed):
    """Random discrete Laplace / discrete Gaussian / k-RR x counts + Gaussians x m: the contour's eps bracket and
    its delta at the answer contain the truth, or it refuses -- never a wrong bracket."""
    _check_case(*_random_case(np.random.default_rng([16, seed])))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8, 80))
def test_seeded_lattice_and_gaussian_sweep_large(seed):
    _check_case(*_random_case(np.random.default_rng([16, seed])))


@pytest.mark.parametrize("count", [2, 3, 5])
def test_lattice_contour_bounds_hold_zero_at_the_largest_loss(count):
    """count uses of Laplace(40) never lose more than count / 40, so delta(count / 40) = 0 exactly, while the
    near groups' series at a gap of one rounding unit gave 2^-59 with a relative error bound (lower bound
    above the truth).  The error covers the rounding of the groups' shifts: the bounds hold 0."""
    acc = afa.Accountant().compose(afa.Laplace(40.0), times=count)
    result = acc.delta_result(count / 40.0, method="contour")
    assert result.lower == 0.0 and result.upper < 1e-12
