"""The discretized-PLD backend seen through the accountant (method='pld', validate(), issue 5).

Every check is against a truth computed independently of the PLD's loss-tail discretization:
afa's closed forms (afa.numerics.exact), the characteristic-function engines ('exact', 'contour',
'quadrature'), Zhu, Dong & Wang 2022, Algorithm 2 on the output domain ('certified'), the 30-digit mpmath
hockey stick of tests/_subsampling_reference.py, or dp_accounting (optional).

Run alone: PYTHONPATH=. python -m pytest -q tests/test_pld_accountant.py  (23 s on 2 idle cores, 37 s
with the other core busy; nothing here is marked slow).
"""

from __future__ import annotations

import logging
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import afa
import afa.engines.planner
from afa.engines.pld import PLDTooLargeError, privacy_buckets
from afa.numerics import exact

sys.path.insert(0, str(Path(__file__).parent))
from _subsampling_reference import delta_one_use_mpmath  # noqa: E402

G = afa.Gaussian


# ----- cross-validation: the analytic engines against the PLD's certified bracket ------------------

#: Relative width (upper - lower) / value below which a PLD bracket counts as informative.  Measured
#: maxima at the intervals below: 2.0e-4 for eps (the heterogeneous mix at 3e-4) and 6.0e-4 for delta
#: (Poisson-subsampled Laplace at 3e-5, Poisson-subsampled RR at 1e-4: atoms of the loss off the grid cost
#: the optimistic side up to an interval per use).  So 1e-3 leaves a margin of 1.7x or more; a PLD that
#: drifted from an engine by 0.1% -- or gave up and returned a trivial bracket -- fails.
RELATIVE_WIDTH = 1e-3

#: id -> (neighboring, [(mechanism, count)], method validated, value_discretization_interval (explicit, so
#: that the measured widths below do not move with the default), eps at which delta(eps) is validated),
#: one representative composition per family.
#: 'method' is 'auto' (which must answer with a non-PLD engine) except where 'auto' answers with the PLD
#: itself: mixture of Gaussians (the contour refuses it) -> 'quadrature'; Poisson-subsampled Laplace
#: (a loss with atoms: the contour refuses, and 'quadrature' did not return within 400 s) -> 'certified'
#: (Zhu, Dong & Wang 2022, Algorithm 2 discretizes the output domain, not the loss).  Intervals are coarsened where
#: the bracket stays well inside RELATIVE_WIDTH (to keep this file near 30 s), and refined to 3e-5 for
#: the subsampled Laplace, whose delta bracket is 1.3e-3 wide at 1e-4 (its greedy-hull side shrinks only
#: like sqrt(interval) there: 1.1e-3 at 1e-4, 6.0e-4 at 3e-5).
#: Measured (engine; eps(1e-5), rel. width; delta(eps), rel. width; seconds for both validate calls):
FAMILIES = {
    # exact; 1.993091, 4.5e-8; 5.24e-2, 1.2e-7; 0.8 s
    "gaussian": ("add_remove", [(G(4.0), 4)], "auto", 1e-4, 0.5),
    # contour; 1.592230, 1.5e-8; 3.57e-2, 7.2e-8; 0.3 s
    "laplace": ("add_remove", [(afa.Laplace(10.0), 20)], "auto", 1e-4, 0.5),
    # exact; 7.789770, 1.4e-4; 0.545, 2.1e-4; 0.4 s
    "randomized-response": ("add_remove", [(afa.RandomizedResponse(0.6), 20)], "auto", 1e-4, 0.5),
    # exact; 6.921179, 6.8e-5; 0.494, 9.0e-5; 0.6 s  (replace-special relation: two directions)
    "kary-rr": ("add_remove", [(afa.KaryRandomizedResponse(4, 0.5), 10)], "auto", 1e-4, 0.5),
    # exact; 10.975830, 1.1e-5; 0.789, 6.5e-6; 0.6 s
    "kary-rr-substitution": ("substitution", [(afa.KaryRandomizedResponse(4, 0.5), 10)], "auto", 1e-4, 0.5),
    # exact; 1.996032, 8.8e-11; 9.72e-2, 1.0e-9; 0.2 s  (losses +-0.2 fall on the grid)
    "discrete-laplace": ("add_remove", [(afa.DiscreteLaplace(0.2), 10)], "auto", 1e-4, 0.5),
    # exact; 3.127533, 1.7e-5; 0.138, 3.7e-5; 0.6 s
    "discrete-gaussian": ("add_remove", [(afa.DiscreteGaussian(3.0), 5)], "auto", 1e-4, 0.5),
    # exact; 0.994324, 3.1e-10; 9.93e-3, 5.1e-9; 0.2 s  (mass 1e-6 at +infinity)
    "approx-dp": ("add_remove", [(afa.ApproxDP(0.1, 1e-7), 10)], "auto", 1e-4, 0.5),
    # exact; 4.599810, 6.5e-6; 0.312, 8.7e-6; 0.4 s
    "discrete-mechanism": ("add_remove", [(afa.DiscreteMechanism((0.4, 0.35, 0.25), (0.25, 0.35, 0.4)), 10)],
                           "auto", 1e-4, 0.5),
    # quadrature; 3.721274, 1.8e-6; 0.175, 3.3e-6; 1.2 s
    "mixture-of-gaussians": ("add_remove", [(afa.MixtureOfGaussians((0.5, 1.0), (0.5, 0.5), 2.0), 5)],
                             "quadrature", 1e-3, 0.5),
    # contour; 7.304573, 5.3e-7; 0.295, 2.4e-6; 0.7 s
    "data-dependent-gaussian": ("add_remove", [(afa.DataDependentGaussian(2.0, 2.2, 1.0), 5)], "auto", 1e-3, 0.5),
    # contour; 0.999696, 6.3e-9; 3.44e-2, 2.9e-8; 0.2 s
    "propose-test-release": ("add_remove", [(afa.ProposeTestRelease(0.2, 1e-7), 5)], "auto", 1e-4, 0.5),
    # contour; 0.718036, 3.6e-5; 1.91e-2, 2.5e-4; 2.3 s
    "poisson-gaussian": ("add_remove", [(G(1.0).poisson_subsampled(0.01), 100)], "auto", 2e-4, 0.1),
    # certified; 1.326349, 8.5e-5; 0.108, 6.0e-4; 1.8 s
    "poisson-laplace": ("add_remove", [(afa.Laplace(1.0).poisson_subsampled(0.05), 50)], "certified", 3e-5, 0.05),
    # contour; 2.189237, 1.1e-5; 3.29e-2, 1.1e-4; 2.6 s
    "subset-gaussian": ("add_remove", [(G(0.8).subset_subsampled(0.02), 50)], "auto", 3e-4, 0.25),
    # contour; 0.895125, 3.3e-5; 1.45e-2, 1.6e-4; 1.4 s
    "poisson-gaussian-substitution": ("substitution", [(G(1.0).poisson_subsampled(0.01), 100)], "auto", 3e-4, 0.25),
    # exact; 3.602076, 1.6e-4; 0.162, 5.8e-4; 0.5 s
    "poisson-randomized-response": ("add_remove", [(afa.RandomizedResponse(0.75).poisson_subsampled(0.1), 50)],
                                    "auto", 1e-4, 0.5),
    # contour; 5.293290, 2.0e-4; 0.515, 2.7e-4; 3.1 s
    "heterogeneous": ("add_remove", [(G(4.0), 2), (afa.Laplace(10.0), 3), (afa.RandomizedResponse(0.6), 5),
                                     (G(1.0).poisson_subsampled(0.02), 20), (afa.DiscreteLaplace(1.0), 2)],
                      "auto", 3e-4, 0.5),
}


def accountant(neighboring, terms, interval=None) -> afa.Accountant:
    acc = afa.Accountant(neighboring, value_discretization_interval=interval)
    for mechanism, count in terms:
        acc.compose(mechanism, count)
    return acc


def assert_informative_and_inside(validation: afa.Validation, method: str) -> None:
    estimate, bracket = validation.estimate, validation.bracket
    assert estimate.method != "pld" and (method == "auto" or estimate.method == method), estimate
    assert bracket.method == "pld" and bracket.certified, bracket
    assert bracket.lower <= estimate.value <= bracket.upper, validation
    assert 0 < bracket.upper - bracket.lower < RELATIVE_WIDTH * estimate.value, validation


@pytest.mark.parametrize("family", FAMILIES)
def test_analytic_estimate_inside_pld_bracket(family):
    """Issue acceptance: the analytic engine's eps(1e-5) and delta(eps) lie inside the PLD's certified
    bracket for every mechanism family, and the bracket is informative (relative width < 1e-3)."""
    neighboring, terms, method, interval, epsilon = FAMILIES[family]
    acc = accountant(neighboring, terms, interval)
    by_delta = acc.validate(delta=1e-5, method=method)
    assert_informative_and_inside(by_delta, method)
    by_epsilon = acc.validate(epsilon=epsilon, method=method)
    assert_informative_and_inside(by_epsilon, method)
    assert by_epsilon.estimate.value > 1e-5  # a delta well inside (0, 1), not a trivial 0 or 1
    # The two queries are consistent: eps(1e-5) is above eps iff delta(eps) is above 1e-5.
    assert (by_delta.estimate.value > epsilon) == (by_epsilon.estimate.value > 1e-5)


def test_gaussian_bracket_contains_closed_form():
    """Anchor of the table above in a closed form: Gaussian(4) x 4 is the Gaussian loss with mu = 1/2
    (Sommer, Meiser & Mohammadi 2019, Thm 5); the PLD bracket holds afa.numerics.exact's eps and delta and is tight to 1e-6."""
    acc = accountant("add_remove", [(G(4.0), 4)])
    eps = exact.gaussian_epsilon(1e-5, 0.5)
    result = acc.epsilon_result(1e-5, method="pld")
    assert result.lower <= eps <= result.upper and result.upper - result.lower < 1e-6 * eps, (eps, result)
    delta = exact.gaussian_delta(0.5, 0.5)
    result = acc.delta_result(0.5, method="pld")
    assert result.lower <= delta <= result.upper and result.upper - result.lower < 1e-6 * delta, (delta, result)


def test_delta_query_refines_when_the_rounding_slack_matters():
    """A delta query first builds the PLDs of eps(1e-5) and keeps them unless some delta is below their error
    budget at its eps (truncated mass plus both PLDs' slack there) / DELTA_TAIL.  With 500 Gaussian uses the
    plain FFT power keeps a rounding slack of 2.6e-11 (no tilted power at that budget), 2.6e-3 of
    delta = 1e-8: the query must rebuild at a tolerance scaled to delta (a rule on the truncated mass alone
    kept the first build).  With 1000 uses the first build has the tilted power, whose slack at eps(1e-7) is
    8e-16, and is kept.  Both brackets hold the closed form (Sommer, Meiser & Mohammadi 2019, Thm 5) and are 4e-5 wide
    at most
    (measured 2.3e-5 and 4.0e-5).  The Gaussian is a mixture of two equal components, which the engine does not
    merge into one Gaussian PLD (plain Gaussians it does: no power, no rounding slack to refine)."""
    for count, target, refined in ((500, 1e-8, True), (1000, 1e-7, False)):
        gaussian = afa.MixtureOfGaussians(sensitivities=[1.0, 1.0], probabilities=[0.5, 0.5], sigma=math.sqrt(count))
        acc = accountant("add_remove", [(gaussian, count)])  # mu = 1
        epsilon = exact.gaussian_epsilon(target, 1.0)
        delta = exact.gaussian_delta(epsilon, 1.0)
        result = acc.delta_result(epsilon, method="pld")
        assert result.lower <= delta <= result.upper and result.upper - result.lower < 5e-5 * delta, result
        engine = acc.planner.engines("pld")[0]
        assert (min(key[1] for key in engine._built) < engine.FIRST_TAIL) == refined, count


def wrong_engine(base):
    """``base`` (an engine class) with every delta it reports 1% too large, and no closed-form inverse."""
    class Wrong(base):
        def delta(self, epsilons):
            values, errors = super().delta(epsilons)
            return values * 1.01, errors

        def epsilon(self, delta):
            return None  # solve through the wrong delta

    if hasattr(base, "epsilon_bracket"):  # its own verified solver: solve through the wrong delta instead
        def epsilon_bracket(self, delta):
            from afa.engines.base import smallest_epsilon
            epsilon = smallest_epsilon(lambda eps: float(self.delta(np.array([eps]))[0][0]), delta, self.epsilon_scale)
            return epsilon, epsilon, epsilon
        Wrong.epsilon_bracket = epsilon_bracket

    if hasattr(base, "delta_and_slope"):
        def delta_and_slope(self, epsilon):
            value, error, slope = base.delta_and_slope(self, epsilon)
            return value * 1.01, error, slope * 1.01
        Wrong.delta_and_slope = delta_and_slope
    return Wrong


@pytest.mark.parametrize("name, terms", [
    ("ContourEngine", [(afa.Laplace(10.0), 20)]),
    ("ExactEngine", [(G(4.0), 4), (afa.RandomizedResponse(0.6), 5)]),
])
@pytest.mark.parametrize("query", ["delta", "epsilon"])
def test_validate_catches_a_wrong_engine(monkeypatch, name, terms, query):
    """An engine whose delta is 1% too large (its eps then moves by ~1e-3 relative) is caught: the PLD
    brackets above are 1e-8 .. 2e-4 wide relative."""
    acc = accountant("add_remove", terms)
    if query == "delta":
        acc.validate(delta=1e-5)  # the true engine passes
    monkeypatch.setattr(afa.engines.planner, name, wrong_engine(getattr(afa.engines.planner, name)))
    acc = accountant("add_remove", terms)
    with pytest.raises(afa.ValidationError, match="outside the PLD's certified bracket"):
        if query == "delta":
            acc.validate(delta=1e-5)
        else:
            acc.validate(epsilon=0.5)


def test_validate_refuses_to_compare_the_pld_with_itself():
    acc = accountant("add_remove", [(afa.Laplace(1.0).poisson_subsampled(0.05), 50)])
    with pytest.raises(ValueError, match="answered with the PLD itself"):
        acc.validate(delta=1e-5)  # 'auto' falls back to the PLD here (contour refuses)
    with pytest.raises(ValueError, match="reference"):
        acc.validate(delta=1e-5, method="pld")
    with pytest.raises(ValueError, match="exactly one"):
        acc.validate(delta=1e-5, epsilon=1.0)


# ----- issue 5 acceptance through the accountant ------------------------------------------------

def contour_epsilon(sigma, q, count, delta) -> float:
    acc = afa.Accountant().compose(G(sigma).poisson_subsampled(q), count)
    result = acc.epsilon_result(delta, method="contour")
    assert result.upper - result.lower < 1e-9 * result.value, result
    return result.value


def pld_epsilon(sigma, q, count, delta, interval) -> afa.Result:
    acc = afa.Accountant(value_discretization_interval=interval).compose(G(sigma).poisson_subsampled(q), count)
    result = acc.epsilon_result(delta, method="pld")
    assert result.method == "pld" and result.certified
    return result


@pytest.fixture(scope="module")
def dpsgd_truth() -> float:
    """eps(1e-5) of the Poisson-subsampled Gaussian q = 0.01, sigma = 2, k = 3000 (contour engine)."""
    truth = contour_epsilon(2.0, 0.01, 3000, 1e-5)
    assert truth == pytest.approx(1.1195389, abs=1e-7)  # the value
    return truth


def dp_accounting_pessimistic(sigma, q, count, delta, interval) -> float:
    dp_pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # absl warnings
    try:
        peer = dp_pld.from_gaussian_mechanism(sigma, sampling_prob=q, value_discretization_interval=interval,
                                              pessimistic_estimate=True, use_connect_dots=True)
        return peer.self_compose(count).get_epsilon_for_delta(delta)
    finally:
        root.setLevel(level)


@pytest.mark.parametrize("interval, lower_gap, upper_gap", [(1e-3, 1e-2, 4e-3), (1e-4, 1e-4, 1e-4 * 1.1195389)])
def test_dpsgd_bracket_at_interval(dpsgd_truth, interval, lower_gap, upper_gap):
    """Issue 5: q = 0.01, sigma = 2, k = 3000, delta = 1e-5.

    Measured: h = 1e-3 gives [1.11301, 1.12296] around 1.11954 (dp_accounting's optimistic eps is 0);
    h = 1e-4 gives [1.119521, 1.119573].  The issue asked for the pessimistic eps within 1e-3 at
    h = 1e-3, which connect-the-dots -- the best pessimistic PLD on a given grid (Doroshenko et al. 2022, Sec. 4,
    Lemma 4.1) -- does not reach: it is 3.4e-3 above (dp_accounting's connect-the-dots gives the same
    1.12296).  The honest statement tested here: within 4e-3 at h = 1e-3 and within 1e-4 relative at
    h = 1e-4; the optimistic end is positive and within 1e-2 (as the issue asks; resp. 1e-4).
    """
    result = pld_epsilon(2.0, 0.01, 3000, 1e-5, interval)
    assert result.lower > 0
    assert result.lower <= dpsgd_truth <= result.upper, result
    assert dpsgd_truth - result.lower < lower_gap, result
    assert result.upper - dpsgd_truth < upper_gap, result


@pytest.mark.parametrize("interval", [1e-3, 1e-4])
def test_dpsgd_pessimistic_matches_dp_accounting_connect_the_dots(interval):
    """Same construction as dp_accounting's connect-the-dots pessimistic PLD: our certified upper end
    equals its eps to 2e-6 relative (measured +8.1e-7 at 1e-3, +8.6e-7 at 1e-4: our rounding slack and
    tail handling only add) or is smaller."""
    ours = pld_epsilon(2.0, 0.01, 3000, 1e-5, interval).upper
    theirs = dp_accounting_pessimistic(2.0, 0.01, 3000, 1e-5, interval)
    assert ours <= theirs * (1 + 2e-6), (ours, theirs)
    assert ours >= theirs * (1 - 1e-3), (ours, theirs)  # not a different (looser or wrong) construction


def privacy_buckets_optimistic_epsilon(mechanism, count, delta, interval) -> float:
    """eps from privacy buckets rounding every loss down (Google DP team 2025, Sec. 2.1), both directions, with
    the accountant's tail budget (1e-7 delta, split as PLDEngine.bounds splits it)."""
    tail = delta * 1e-7
    epsilons = []
    for tails in mechanism.loss_tails("add_remove"):
        single = privacy_buckets(tails, interval, pessimistic=False, tail_mass=tail / (4 * count))
        epsilons.append(single.self_compose(count, tail / 4).epsilon(delta))
    return max(epsilons)


@pytest.mark.parametrize("count, literature", [(1000, 1.828237), (10_000, 6.187712)])
def test_dpsgd_sigma1_fine_interval(count, literature):
    """Issue 5: q = 0.01, sigma = 1, delta = 1e-5 at h = 1e-4.  Pessimistic within 1e-4 relative
    (measured 4.4e-6 and 8.8e-6); the greedy-hull optimistic end at least 10x closer to the truth than
    privacy buckets' optimistic end on the same grid (measured 2.5e-5 vs 5.0e-2 and 1.9e-4 vs 0.50:
    about 2000x)."""
    truth = contour_epsilon(1.0, 0.01, count, 1e-5)
    assert truth == pytest.approx(literature, abs=1e-6)
    result = pld_epsilon(1.0, 0.01, count, 1e-5, 1e-4)
    assert result.lower <= truth <= result.upper, result
    assert result.upper - truth < 1e-4 * truth, result
    buckets = privacy_buckets_optimistic_epsilon(G(1.0).poisson_subsampled(0.01), count, 1e-5, 1e-4)
    assert buckets <= truth
    assert 10 * (truth - result.lower) < truth - buckets, (result.lower, buckets, truth)


def test_small_delta_bracket_is_finite_and_contains_the_contour_value():
    """q = 0.01, sigma = 2, k = 3000 at delta = 1e-16: the tail budget follows the query (1e-23), so the
    bracket stays finite, and the tilted FFT power (Google DP team 2025, Sec. 5.2's window with an exponential
    tilt) keeps FFT rounding (1.2e-10 in the plain power) from swamping delta.  Measured
    [2.4200761, 2.4202734] around 2.4202082 at interval 1e-4 (relative width 8.2e-5)."""
    truth = contour_epsilon(2.0, 0.01, 3000, 1e-16)
    acc = afa.Accountant(value_discretization_interval=1e-4).compose(G(2.0).poisson_subsampled(0.01), 3000)
    result = acc.epsilon_result(1e-16, method="pld")
    assert math.isfinite(result.upper) and result.lower > 0, result
    assert result.lower <= truth <= result.upper, (truth, result)
    assert result.upper - result.lower < 3e-4 * truth, result


def test_bounded_direction_beyond_its_largest_loss_builds_no_pld():
    """Poisson subsampling's add direction has loss <= -log(1 - q) per use, so its delta is exactly 0 from
    eps = -k log(1 - q) on (0.1005 for q = 0.01, k = 10): the engine's cheap upper bound says so without
    building a PLD, and just below that end it bounds delta by the Chernoff bound of its terms' PLDs (no
    convolution), at least the certified lower bound there.  eps(1e-5) = 0.3799 lies beyond, so the
    accountant solves the remove direction alone; the add direction's own certified PLD bound (built
    here on purpose) confirms that it stays below the target there."""
    acc = afa.Accountant().compose(G(1.0).poisson_subsampled(0.01), 10)
    remove, add = acc.planner.engines("pld")
    top = -10 * math.log1p(-0.01)
    assert add.upper_delta(np.array([top * (1 + 1e-12), 0.38])).tolist() == [0.0, 0.0] and not add._bases
    below = top * (1 - 1e-3)
    cheap = add.upper_delta(np.array([below]))[0]
    assert add._bases and not add._built
    assert acc.delta_result(below, method="pld", direction="add").lower <= cheap <= 1.0
    result = acc.epsilon_result(1e-5, method="pld")
    assert (result.value, result.lower, result.upper) == remove.epsilon_bracket(1e-5)
    assert acc.delta_result(result.value, method="pld", direction="add").upper <= 1e-5


def test_too_large_pld_names_the_interval():
    """The memory bound: a huge composition at a tiny interval refuses (PLDTooLargeError, a ValueError)
    before allocating, and says which knob to turn."""
    acc = afa.Accountant(value_discretization_interval=1e-9).compose(G(2.0).poisson_subsampled(0.01), 10 ** 6)
    with pytest.raises(PLDTooLargeError, match="value_discretization_interval"):
        acc.epsilon_result(1e-5, method="pld")
    with pytest.raises(ValueError, match="value_discretization_interval"):
        acc.delta_result(1.0, method="pld")


@pytest.mark.parametrize("value", [0.0, -1e-3, math.nan, math.inf, -math.inf])
def test_interval_must_be_positive_and_finite(value):
    with pytest.raises(ValueError, match="value_discretization_interval"):
        afa.Accountant(value_discretization_interval=value)


def test_interval_is_used_by_the_pld():
    """The user's interval reaches the engine; a coarser one gives a wider (still valid) bracket."""
    mechanism = G(1.0)
    eps = exact.gaussian_epsilon(1e-5, math.sqrt(10))
    widths = []
    for interval in (1e-2, 1e-3):
        acc = afa.Accountant(value_discretization_interval=interval).compose(mechanism, 10)
        result = acc.epsilon_result(1e-5, method="pld")
        assert result.lower <= eps <= result.upper, result
        widths.append(result.upper - result.lower)
    assert widths[0] > 3 * widths[1], widths


# ----- one use of a subsampled mechanism: 'auto' answers exactly from the loss tails ---------------

@pytest.mark.parametrize("noise, base, q, neighboring, epsilons", [
    ("gaussian", G(1.0), 0.01, "add_remove", (0.0, 0.1, 1.0, 2.0)),
    ("gaussian", G(0.8), 0.2, "add_remove", (0.0, 0.5, 2.0)),
    ("laplace", afa.Laplace(1.0), 0.05, "add_remove", (0.0, 0.02, 0.05)),  # the loss is <= 0.082
    ("laplace", afa.Laplace(0.5), 0.3, "add_remove", (0.1, 1.0)),
    ("gaussian", G(1.0), 0.01, "substitution", (0.0, 0.5, 2.0)),
    ("gaussian", G(0.8), 0.2, "substitution", (0.1, 1.0)),
])
def test_single_subsampled_use_is_exact_against_mpmath(noise, base, q, neighboring, epsilons):
    """One use under 'auto' is method 'exact' (the hockey stick formed from the loss tails); its
    delta equals the 30-digit mpmath integral (max over both directions for add/remove) to 1e-10
    relative (measured <= 4.2e-14), within its own error estimate, and eps(delta) inverts it."""
    acc = afa.Accountant(neighboring).compose(base.poisson_subsampled(q))
    scale = base.sigma if noise == "gaussian" else base.scale
    for epsilon in epsilons:
        result = acc.delta_result(epsilon)
        assert result.method == "exact"
        truth = float(delta_one_use_mpmath(epsilon, noise, scale, q, 1.0, neighboring))
        assert truth > 0
        assert result.value == pytest.approx(truth, rel=1e-10, abs=0)
        assert abs(result.value - truth) <= result.error + 1e-15 * truth, (result, truth)
    delta = 0.5 * acc.delta(epsilons[-1])
    result = acc.epsilon_result(delta)
    assert result.method == "exact"
    assert float(delta_one_use_mpmath(result.value, noise, scale, q, 1.0, neighboring)) == pytest.approx(
        delta, rel=1e-9)


def _containment_cases():
    """Issue 5's containment grid: (label, mechanism, count, truth method, interval, slow)."""
    cases = []
    for interval in (1e-2, 1e-3, 1e-4):
        for sigma in (0.5, 1.0, 5.0, 50.0):
            for count in (1, 100, 10_000):
                points = 80 * math.sqrt(count) / sigma / interval  # grid points of the composed bulk
                cases.append((f"gaussian{sigma:g}x{count}", G(sigma), count, "exact", interval, points > 2e6))
        for count in (1, 10, 100):
            cases.append((f"laplacex{count}", afa.Laplace(2.0), count, "contour", interval, False))
        cases += [("rrx100", afa.RandomizedResponse(0.6), 100, "exact", interval, False),
                  ("krrx50", afa.KaryRandomizedResponse(4, 0.5), 50, "exact", interval, False),
                  ("approxdpx30", afa.ApproxDP(0.2, 1e-4), 30, "exact", interval, False)]
    return [pytest.param(*case[:5], id=f"{case[0]}-h{case[4]:g}", marks=pytest.mark.slow if case[5] else ())
            for case in cases]


@pytest.mark.parametrize("label, mechanism, count, truth_method, interval", _containment_cases())
def test_pessimistic_above_truth_above_optimistic(label, mechanism, count, truth_method, interval):
    """Issue 5: pessimistic delta >= exact delta >= optimistic delta at 0 and at eps(1e-2), eps(1e-3),
    eps(1e-6) (where finite), for composed Gaussians (sigma 0.5 .. 50, k up to 1e4), Laplace (k <= 100), RR, k-RR and
    ApproxDP at intervals 1e-2, 1e-3, 1e-4.  Truth: the closed forms / exact atoms, or (Laplace) the
    lattice contour -- characteristic-function engines independent of the loss grid.  Where the composed
    loss would not fit in memory the PLD must refuse with PLDTooLargeError instead."""
    truth = afa.Accountant().compose(mechanism, count)
    acc = afa.Accountant(value_discretization_interval=interval).compose(mechanism, count)
    targets = [truth.epsilon(d, method=truth_method) for d in (1e-2, 1e-3, 1e-6)]
    epsilons = sorted({round(e, 6) for e in targets if math.isfinite(e)} | {0.0})
    for epsilon in epsilons:
        exact = truth.delta(epsilon, method=truth_method)
        try:
            bracket = acc.delta_result(epsilon, method="pld")
        except PLDTooLargeError:
            assert interval < 1e-2, label  # only a fine grid may be too large
            return
        assert bracket.lower <= exact * (1 + 1e-12) + 1e-300 and exact <= bracket.upper * (1 + 1e-12), \
            (label, epsilon, bracket, exact)
