"""The accountant: composition bookkeeping, exact discrete answers, mixed compositions, validation."""

import math

import numpy as np
import pytest
from scipy.special import gammaln
from scipy.stats import binom

import afa
from afa.numerics import exact


def brute_force_delta(epsilon, losses, weights, inf_mass=0.0):
    """Direct sum of the hockey-stick over an enumerated PLD, in mpmath-free float64."""
    losses, weights = np.asarray(losses, float), np.asarray(weights, float)
    active = losses > epsilon
    return inf_mass + float(np.sum(weights[active] * -np.expm1(epsilon - losses[active])))


# -- Zhu, Dong & Wang 2022, Sec. 5, Exp 2: Gaussian(5) and RR(0.52) alternating ---------------------------

@pytest.mark.parametrize("total", [10, 100, 1000])
def test_exp2_heterogeneous_composition(total):
    half = total // 2
    acc = afa.Accountant().compose(afa.Gaussian(5.0), times=half).compose(afa.RandomizedResponse(0.52), times=half)
    xi = math.log(0.52 / 0.48)
    j = np.arange(half + 1)
    truth = sum(binom.pmf(j, half, 0.52)[i] * exact.gaussian_delta(2.0 - xi * (2 * i - half), math.sqrt(half) / 5)
                for i in range(half + 1))
    result = acc.delta_result(2.0, method="quadrature")
    assert abs(result.value - truth) <= 1e-12
    exact_result = acc.delta_result(2.0, method="exact")
    assert exact_result.value == pytest.approx(truth, rel=1e-12)
    # what a user reads is the upper bound: never below the truth, and close to it
    assert truth * (1 - 1e-15) <= exact_result.upper <= truth * (1 + 1e-8)


# -- compositions with no continuous part are answered exactly --------------------------------

def test_randomized_response_thousand_fold():
    acc = afa.Accountant().compose(afa.RandomizedResponse(0.6), times=1000)
    epsilons = np.array([0.0, 1.0, 5.0, 20.0, 60.0])
    truth = exact.randomized_response_delta(epsilons, 0.6, 1000)
    assert np.allclose(acc.privacy_profile(epsilons, estimate=True), truth, rtol=1e-12, atol=0)
    upper = acc.privacy_profile(epsilons)  # what a user reads: never below the truth, and close to it
    assert np.all(upper >= truth * (1 - 1e-15)) and np.allclose(upper, truth, rtol=1e-9, atol=0)
    assert acc.delta_result(1.0).method == "exact"
    for delta in (1e-2, 1e-6, 1e-12):
        eps = acc.epsilon(delta)
        assert exact.randomized_response_delta(eps, 0.6, 1000) == pytest.approx(delta, rel=1e-10)


def test_kary_randomized_response_hundred_fold_substitution_by_enumeration():
    k, p, n = 5, 0.6, 100
    other = (1 - p) / (k - 1)
    up, down = math.log(p / other), math.log(other / p)
    # Enumerate the multinomial counts (a, b, c) of outputs x, x', other under P = R(x).
    losses, log_w = [], []
    for a in range(n + 1):
        b = np.arange(n - a + 1)
        c = n - a - b
        log_coef = gammaln(n + 1) - gammaln(a + 1) - gammaln(b + 1) - gammaln(c + 1)
        log_w.append(log_coef + a * math.log(p) + b * math.log(other) + c * math.log((k - 2) * other))
        losses.append(a * up + b * down)
    losses, weights = np.concatenate(losses), np.exp(np.concatenate(log_w))
    acc = afa.Accountant("substitution").compose(afa.KaryRandomizedResponse(k, p), times=n)
    for eps in (0.0, 2.0, 10.0, 30.0):
        truth = brute_force_delta(eps, losses, weights)
        result = acc.delta_result(eps)
        assert result.value == pytest.approx(truth, rel=1e-12)
        assert truth * (1 - 1e-13) <= result.upper <= truth * (1 + 1e-9)  # what a user reads


def test_approx_dp_fifty_fold_matches_papers004_example1():
    acc = afa.Accountant().compose(afa.ApproxDP(1.0, 1e-6), times=50)
    for eps in (0.0, 3.0, 10.0, 40.0):
        truth = exact.approximate_rr_delta(eps, 1.0, 1e-6, 50)
        assert acc.delta(eps) == pytest.approx(truth, rel=1e-12)
    assert acc.inf_mass["remove"] == pytest.approx(-math.expm1(50 * math.log1p(-1e-6)), rel=1e-14)
    assert acc.delta(60.0) == pytest.approx(acc.inf_mass["remove"], rel=1e-14)
    assert acc.epsilon(acc.inf_mass["remove"] / 2) == math.inf


def test_kary_replace_special_directions_differ_and_max_is_taken():
    mech = afa.KaryRandomizedResponse(4, 0.7)
    acc = afa.Accountant("add_remove").compose(mech, times=3)
    remove, add = mech.privacy_losses("add_remove")
    per_direction = []
    for loss in (remove, add):
        pld = loss.atoms.power(3)
        per_direction.append(brute_force_delta(0.5, pld.losses, np.exp(pld.log_masses)))
    assert per_direction[0] != pytest.approx(per_direction[1])
    assert acc.delta(0.5) == pytest.approx(max(per_direction), rel=1e-12)


def test_gaussian_times_discrete_laplace_exact_vs_quadrature():
    acc = afa.Accountant().compose(afa.Gaussian(3.0), times=4).compose(afa.DiscreteLaplace(0.3, 2), times=6)
    epsilons = np.linspace(0, 4, 9)
    exact_profile = acc.privacy_profile(epsilons, method="exact")
    quadrature_profile = acc.privacy_profile(epsilons, method="quadrature")
    assert np.max(np.abs(exact_profile - quadrature_profile)) <= 1e-12


# -- composition bookkeeping -------------------------------------------------------------------

def test_times_equals_repeated_compose_and_counts_merge():
    a = afa.Accountant().compose(afa.Gaussian(2.0), times=3).compose(afa.RandomizedResponse(0.7))
    b = afa.Accountant()
    for _ in range(3):
        b.compose(afa.Gaussian(2.0))
    b.compose(afa.RandomizedResponse(0.7))
    assert a.mechanisms == b.mechanisms == {afa.Gaussian(2.0): 3, afa.RandomizedResponse(0.7): 1}
    assert a.delta(0.3) == b.delta(0.3)


def test_log_phi_is_the_sum_of_counts_times_log_phi():
    import sympy
    acc = afa.Accountant().compose(afa.Gaussian(2.0), times=10).compose(afa.RandomizedResponse(0.7), times=3)
    expected = 10 * afa.Gaussian(2.0).privacy_losses()[0].log_phi + 3 * afa.RandomizedResponse(0.7).privacy_losses()[0].log_phi
    assert sympy.simplify(acc.log_phi["remove"] - expected) == 0
    assert set(acc.log_phi) == {"remove", "add"}
    assert afa.Accountant("substitution").compose(afa.Gaussian(1.0)).directions == ("forward", "reverse")


def test_asymmetric_mixture_takes_the_larger_direction():
    mog = afa.MixtureOfGaussians([0.0, 1.0], [0.5, 0.5], 1.0)
    acc = afa.Accountant().compose(mog, times=2).compose(afa.Gaussian(2.0))
    engines = acc.planner.engines("quadrature")
    assert len(engines) == 2
    per_direction = [float(engine.delta(np.array([0.3]))[0][0]) for engine in engines]
    assert acc.delta_result(0.3, method="quadrature").value == pytest.approx(max(per_direction), abs=1e-15)
    # what a user reads is the upper bound: the larger direction's value plus its error
    upper = max(float(sum(engine.delta(np.array([0.3])))[0]) for engine in engines)
    assert acc.delta(0.3, method="quadrature") == pytest.approx(upper, abs=1e-15)


# -- validation --------------------------------------------------------------------------------

@pytest.mark.parametrize("call,match", [
    (lambda a: a.delta(float("nan")), "epsilon"),
    (lambda a: a.delta("1"), "epsilon"),
    (lambda a: a.epsilon(0.0), "delta"),
    (lambda a: a.epsilon(1.0), "delta"),
    (lambda a: a.epsilon(-1e-5), "delta"),
    (lambda a: a.epsilon(float("inf")), "delta"),
    (lambda a: a.epsilon([1e-5, 2.0]), "delta"),
    (lambda a: a.privacy_profile([0.0, float("nan")]), "epsilons"),
    (lambda a: a.delta(1.0, method="fft"), "method"),
    (lambda a: a.cdf(0.0, direction="sideways"), "direction"),
    (lambda a: a.compose(afa.Gaussian(1.0), times=0), "times"),
    (lambda a: a.compose(afa.Gaussian(1.0), times=1.5), "times"),
    (lambda a: a.compose(afa.Gaussian(1.0), times=-3), "times"),
])
def test_invalid_queries_name_the_parameter(call, match):
    acc = afa.Accountant().compose(afa.Gaussian(1.0))
    with pytest.raises((ValueError, TypeError), match=match):
        call(acc)


def test_invalid_accountant_arguments():
    with pytest.raises(ValueError, match="neighboring"):
        afa.Accountant("replace")
    with pytest.raises(TypeError, match="mechanism"):
        afa.Accountant().compose("gaussian")
    with pytest.raises(ValueError, match="empty"):
        afa.Accountant().delta(1.0)
    with pytest.raises(ValueError, match="exact"):
        afa.Accountant().compose(afa.Laplace(1.0), times=2).compose(afa.Laplace(2.0)).delta(1.0, method="exact")
    with pytest.raises(ValueError, match="continuous"):
        afa.Accountant().compose(afa.RandomizedResponse(0.7)).delta(1.0, method="quadrature")


def test_a_million_uses_keep_their_accuracy():
    """Counts multiply log-CFs: RR x 10^6 with a Gaussian, quadrature against the exact binomial mixture."""
    acc = afa.Accountant().compose(afa.RandomizedResponse(0.5005), times=1_000_000).compose(afa.Gaussian(2.0))
    epsilons = np.array([0.0, 0.5, 1.0, 2.0, 3.0])
    quadrature = acc.privacy_profile(epsilons, method="quadrature", estimate=True)
    exact_profile = acc.privacy_profile(epsilons, method="exact", estimate=True)
    assert np.max(np.abs(quadrature - exact_profile)) <= 1e-12
    # The exact upper bounds (what a user reads) carry a million uses' rounding of log p: a few 1e-9.
    assert np.all(acc.privacy_profile(epsilons, method="exact") >= exact_profile)
    assert np.allclose(acc.privacy_profile(epsilons, method="exact"), exact_profile, rtol=1e-8, atol=0)


def test_profile_of_one_direction():
    """privacy_profile(direction=...) is that direction's hockey stick: H(P||Q) for 'remove' and H(Q||P) for 'add'
    (summed here over the outputs of a finite pair); the default is their maximum."""
    p, q = np.array([0.6, 0.3, 0.1, 0.0]), np.array([0.05, 0.25, 0.4, 0.3])
    acc = afa.Accountant().compose(afa.DiscreteMechanism(p, q))
    epsilons = np.array([0.0, 0.3, 1.0, 2.5])
    remove = np.array([np.maximum(p - np.exp(e) * q, 0).sum() for e in epsilons])
    add = np.array([np.maximum(q - np.exp(e) * p, 0).sum() for e in epsilons])
    assert np.allclose(acc.privacy_profile(epsilons, direction="remove"), remove, rtol=1e-12, atol=1e-15)
    assert np.allclose(acc.privacy_profile(epsilons, direction="add"), add, rtol=1e-12, atol=1e-15)
    assert np.allclose(acc.privacy_profile(epsilons), np.maximum(remove, add), rtol=1e-12, atol=1e-15)
    assert acc.delta_result(1.0, direction="add").value == pytest.approx(add[2], rel=1e-12)
    with pytest.raises(ValueError, match="direction"):
        acc.privacy_profile(epsilons, direction="forward")


def test_cdf_of_a_laplace_loss_is_its_closed_form_within_the_reported_error():
    """One Laplace(b = 1) use, remove direction: L = 1 for o <= 0 (mass 1/2), 1 - 2o on (0, 1),
    -1 for o >= 1, so Pr[L <= x] = exp(-(1 - x)/2)/2 on [-1, 1) and 1 from x = 1 on."""
    acc = afa.Accountant().compose(afa.Laplace(1.0))
    xs = np.array([-3.0, -1.5, -1.0, -0.3, 0.0, 0.5, 0.99, 1.0, 2.0])
    truth = np.where(xs < -1, 0.0, np.where(xs < 1, np.exp(-(1 - xs) / 2) / 2, 1.0))
    values, error = acc.cdf(xs, with_error=True)
    assert np.all((values >= 0) & (values <= 1))
    assert 0 < error < 1e-5
    # the error is an estimate (two quadrature rules and a tail estimate): allowed a factor 2
    assert np.max(np.abs(values - truth)) <= 2 * error
    assert np.max(np.abs(values - truth)[np.abs(xs) != 1]) <= 1e-7


@pytest.mark.parametrize("method", ["contour", "pld", "auto"])
def test_results_hold_plain_floats(method):
    """Result fields are Python floats whatever numpy scalars an engine computed with (the contour's
    slope bracket gave numpy.float64 bounds), and lower <= value <= upper."""
    accountant = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01), times=100)
    for result in (accountant.epsilon_result(1e-5, method=method), accountant.delta_result(0.7, method=method)):
        assert all(type(getattr(result, name)) is float for name in ("value", "lower", "upper", "error"))
        assert result.lower <= result.value <= result.upper


@pytest.mark.parametrize("other", [afa.Laplace(1.0), afa.Gaussian(2.0), afa.Gaussian(1.0).poisson_subsampled(0.1),
                                   afa.RandomizedResponse(0.7)])
@pytest.mark.parametrize("method", ["auto", "exact", "contour", "quadrature", "pld"])
def test_a_certain_reveal_gives_delta_one_with_any_other_mechanism(other, method):
    """DiscreteMechanism((0, 1), (1, 0)) puts all of P's mass where Q has none: the remove direction's
    loss is +inf with probability 1, so delta(eps) = 1 at every eps and eps(delta) = inf for delta < 1,
    whatever else is composed (by definition of the hockey-stick divergence)."""
    acc = afa.Accountant().compose(afa.DiscreteMechanism((0, 1), (1, 0))).compose(other, times=3)
    assert acc.epsilon(1e-5, method=method) == math.inf
    result = acc.delta_result([0.0, 3.0], method=method)
    assert np.all(result.lower == 1.0) and np.all(result.upper == 1.0)
