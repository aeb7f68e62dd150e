"""delta(eps) of a few uses of Gaussian noise pairs by recursion over the uses, and of many uses of one pair by
doubling (afa.engines.step_recursion).

Independent references: the closed form of composed Gaussians (a Gaussian pair with q = 1 composed k times is
N(mu^2/2, mu^2) with mu = sqrt(k) / sigma; Sommer, Meiser & Mohammadi 2019, Thm 5); a 30-digit mpmath integral of two
uses of a Poisson-subsampled Gaussian (the one-use hockey stick in closed form, integrated over the other use's
output); the identity delta_{P||Q}(0) = delta_{Q||P}(0) (both are the total variation distance); the contour engine
(a second algorithm) where it answers; and the certified bracket of the PLD at tiny delta, where the contour cannot.
The doubling is checked against the recursion use by use (a second algorithm, k <= 200), the contour, the identity
at 0 and the PLD's certified bracket.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

import afa
from afa.engines import planner, step_recursion
from afa.engines.step_recursion import DoublingRecursion, StepRecursion
from afa.mechanisms.noise_pair import NoiseMixturePair
from afa.numerics.exact import gaussian_delta
from afa.results import UnsupportedCompositionError


def _remove(sigma: float, q: float) -> NoiseMixturePair:
    return NoiseMixturePair("gaussian", sigma, (0.0, 1.0), (math.log1p(-q), math.log(q)), (0.0,), (0.0,))


def _delta1_mpmath(y, sigma, q):
    """One use of the subsampled Gaussian (remove direction), in mpmath: P[L > y] - e^y Q[L > y]."""
    y = mp.mpf(y)
    if y <= mp.log1p(-q):
        return 1 - mp.exp(y)
    o_star = sigma ** 2 * mp.log((mp.exp(y) - 1 + q) / q) + mp.mpf(1) / 2
    tail = lambda z: mp.erfc(z / mp.sqrt(2)) / 2  # noqa: E731
    return (1 - q) * tail(o_star / sigma) + q * tail((o_star - 1) / sigma) - mp.exp(y) * tail(o_star / sigma)


def _delta2_mpmath(eps, sigma, q):
    """Two uses: the integral over the second use's output o ~ A of delta_1(eps - L(o)), 30 digits."""
    with mp.workdps(30):
        sigma, q = mp.mpf(sigma), mp.mpf(q)
        density = lambda o: ((1 - q) * mp.npdf(o, 0, sigma) + q * mp.npdf(o, 1, sigma))  # noqa: E731
        loss = lambda o: mp.log(1 - q + q * mp.exp((2 * o - 1) / (2 * sigma ** 2)))  # noqa: E731
        # where eps - L(o) crosses log(1 - q) (delta_1's kink of slope)
        crossing = sigma ** 2 * mp.log((mp.exp(eps - mp.log1p(-q)) - 1 + q) / q) + mp.mpf(1) / 2
        points = sorted({-40 * sigma, crossing - 3 * sigma, crossing, crossing + 3 * sigma, 1 + 40 * sigma})
        return mp.quad(lambda o: density(o) * _delta1_mpmath(eps - loss(o), sigma, q), points)


@pytest.mark.parametrize("sigma, q, eps", [(1.0, 0.01, 0.1), (2.0, 0.001, 0.002), (0.8, 0.001, 0.05)])
def test_two_uses_match_a_30_digit_integral(sigma, q, eps):
    values, errors = StepRecursion([_remove(sigma, q)] * 2).delta(np.array([eps]))
    reference = float(_delta2_mpmath(eps, sigma, q))
    assert values[0] == pytest.approx(reference, rel=1e-10)
    assert abs(values[0] - reference) <= errors[0] + 1e-10 * reference  # the error stated holds (to its slack)
    assert errors[0] < 1e-9 * values[0]


@pytest.mark.parametrize("sigma, k", [(1.0, 3), (2.0, 7), (0.7, 12)])
def test_unsubsampled_pairs_compose_to_the_gaussian_closed_form(sigma, k):
    # q = 1: every use is N(1, sigma^2) against N(0, sigma^2); k uses are the Gaussian mechanism with mu^2 = k / sigma^2
    pair = NoiseMixturePair("gaussian", sigma, (1.0,), (0.0,), (0.0,), (0.0,))
    mu = math.sqrt(k) / sigma
    eps = np.array([0.0, 0.5 * mu * mu, mu * mu, 2 * mu * mu + 3 * mu])
    values, errors = StepRecursion([pair] * k).delta(eps)
    truth = gaussian_delta(eps, mu)
    np.testing.assert_allclose(values, truth, rtol=1e-9)
    assert np.all(np.abs(values - truth) <= errors + 1e-9 * truth)


@pytest.mark.parametrize("sigma, k", [(1.0, 3), (0.7, 6)])
def test_slopes_match_the_gaussian_closed_form(sigma, k):
    # q = 1: -delta'(eps) of the Gaussian mechanism is e^eps Phi(-eps / mu - mu / 2) (Sommer, Meiser & Mohammadi
    # 2019, Thm 5, differentiated); the recursion's slopes steer its root searches
    pair = NoiseMixturePair("gaussian", sigma, (1.0,), (0.0,), (0.0,), (0.0,))
    mu = math.sqrt(k) / sigma
    eps = np.array([0.1, 0.5 * mu * mu, mu * mu + 2 * mu])
    _, _, slopes = StepRecursion([pair] * k).delta_and_slope(eps)
    truth = [float(mp.exp(x) * mp.ncdf(-x / mu - mu / 2)) for x in eps]
    np.testing.assert_allclose(slopes, truth, rtol=1e-7)


def test_slopes_of_subsampled_uses_match_differences_of_the_values():
    recursion = StepRecursion([_remove(1.0, 0.01)] * 3)
    eps, step = 0.3, 1e-5
    values, _, slopes = recursion.delta_and_slope(np.array([eps]))
    around, _ = recursion.delta(np.array([eps - step, eps + step]))
    assert slopes[0] == pytest.approx((around[0] - around[1]) / (2 * step), rel=1e-6)
    assert values[0] == recursion.delta(np.array([eps]))[0][0]  # the values are those without the slope


def test_gaussians_start_the_recursion():
    # two Gaussian mechanisms and two unsubsampled pairs: again one Gaussian, mu^2 = 1/4 + 1/9 + 2
    pair = NoiseMixturePair("gaussian", 1.0, (1.0,), (0.0,), (0.0,), (0.0,))
    mu_gaussians = math.sqrt(1 / 4 + 1 / 9)
    values, _ = StepRecursion([pair] * 2, mu=mu_gaussians).delta(np.array([0.3, 1.5, 4.0]))
    np.testing.assert_allclose(values, gaussian_delta(np.array([0.3, 1.5, 4.0]), math.sqrt(1 / 4 + 1 / 9 + 2)),
                               rtol=1e-9)


def test_both_directions_agree_at_zero_and_the_add_direction_ends_at_its_top():
    pair = _remove(1.0, 0.01)
    remove, add = StepRecursion([pair] * 5), StepRecursion([pair.swapped()] * 5)
    at_zero = [float(recursion.delta(np.array([0.0]))[0][0]) for recursion in (remove, add)]
    assert at_zero[0] == pytest.approx(at_zero[1], rel=1e-10)  # both the total variation distance
    top = -5 * math.log1p(-0.01)  # the add direction's loss never exceeds 5 log(1/(1 - q))
    assert add.loss_top == pytest.approx(top, rel=1e-12)
    values, errors = add.delta(np.array([top, top + 1.0]))
    assert np.all(values == 0.0) and np.all(errors == 0.0)


@pytest.mark.parametrize("sigma, q, k", [(2.0, 0.001, 10), (1.0, 0.01, 10), (2.0, 0.01, 5)])
def test_agrees_with_the_contour_where_it_answers(sigma, q, k):
    # the contour with its wide node budget (auto's retry; far nodes on shifted output lines), remove direction
    accountant = afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), times=k)
    contour, _, _ = accountant.planner.engines(planner.WIDE_CONTOUR)[0].epsilon_bracket(1e-5)
    recursion = accountant.delta_result(contour, method="exact")
    assert recursion.method == "exact"
    assert recursion.value == pytest.approx(1e-5, rel=1e-9)
    assert recursion.error < 1e-9 * recursion.value


@pytest.mark.parametrize("delta", [1e-14, 1e-30])
def test_tiny_delta_of_few_uses_lies_in_the_certified_bracket(delta):
    # the contour's sums cancel here (by 1e5 and more): auto answers from the recursion, to 1e-6 or better
    accountant = afa.Accountant().compose(afa.Gaussian(2.0).poisson_subsampled(0.001), times=10)
    answer = accountant.epsilon_result(delta)
    assert answer.method == "exact"
    assert answer.error <= 1e-6 * answer.value
    certified = accountant.delta_result(answer.value, method="pld")
    assert certified.lower <= delta <= certified.upper


def test_mixture_of_gaussians_few_uses_agree_with_the_contour():
    mechanism = afa.MixtureOfGaussians([0.0, 1.0, 2.0], [0.5, 0.3, 0.2], sigma=1.5)
    accountant = afa.Accountant().compose(mechanism, times=4)
    contour = accountant.delta_result(1.0, method="contour")
    exact = accountant.delta_result(1.0, method="exact")
    assert exact.value == pytest.approx(contour.value, rel=1e-9)


def test_refuses_what_it_cannot_serve():
    laplace = NoiseMixturePair("laplace", 1.0, (0.0, 1.0), (math.log(0.9), math.log(0.1)), (0.0,), (0.0,))
    with pytest.raises(UnsupportedCompositionError, match="Gaussian noise"):
        StepRecursion([laplace] * 2)
    with pytest.raises(UnsupportedCompositionError, match="2 to"):
        StepRecursion([_remove(1.0, 0.01)] * (step_recursion.MAX_USES + 1))
    with pytest.raises(UnsupportedCompositionError, match="2 to"):
        StepRecursion([_remove(1.0, 0.01)])
    with pytest.raises(ValueError, match="mu"):
        StepRecursion([_remove(1.0, 0.01)] * 2, mu=-1.0)
    # beyond MAX_USES only one pair without Gaussians is served (by doubling), up to MAX_DOUBLING_USES
    mixed = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01), times=step_recursion.MAX_USES) \
        .compose(afa.Gaussian(2.0).poisson_subsampled(0.01))
    assert not mixed.planner.recursion_available()
    with_gaussians = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01),
                                              times=step_recursion.MAX_USES + 1).compose(afa.Gaussian(3.0))
    assert not with_gaussians.planner.recursion_available()
    many = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01),
                                    times=step_recursion.MAX_DOUBLING_USES + 1)
    assert not many.planner.recursion_available()
    for count in (3, step_recursion.MAX_DOUBLING_USES + 1, 2.5):
        with pytest.raises(UnsupportedCompositionError, match="4 to"):
            DoublingRecursion(_remove(1.0, 0.01), count)
    with pytest.raises(UnsupportedCompositionError, match="Gaussian noise"):
        DoublingRecursion(laplace, 10)


def test_a_mixed_substitution_composition_at_tiny_delta_lies_in_the_certified_bracket():
    # fuzz seed 8 (Gaussians beside two kinds of subsampled Gaussian, substitution): the contour's sums cancel by
    # 3e9 and the PLD's bracket is 4e-4 wide; near its floor a level inherits the previous one's cut
    accountant = (afa.Accountant(neighboring="substitution").compose(afa.Gaussian(28.48), times=2)
                  .compose(afa.Gaussian(3.795).poisson_subsampled(0.0093), times=2)
                  .compose(afa.Gaussian(1.322).poisson_subsampled(0.00184), times=2))
    answer = accountant.epsilon_result(1e-23)
    assert answer.method == "exact" and answer.error <= 1e-10 * answer.value
    certified = accountant.epsilon_result(1e-23, method="pld")
    assert certified.lower <= answer.value <= certified.upper


def test_two_or_three_uses_go_to_the_recursion_before_the_contour():
    accountant = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01), times=3)
    answer = accountant.epsilon_result(1e-5)
    assert answer.method == "exact"
    assert [attempt.method for attempt in answer.attempts] == [planner.STEP_RECURSION]  # no contour before it
    assert answer.error <= 1e-9 * answer.value
    more = afa.Accountant().compose(afa.Gaussian(3.0).poisson_subsampled(0.05), times=planner.RECURSION_FIRST + 1)
    assert more.epsilon_result(1e-5).attempts[0].method == "contour"  # reach 4 log(1/0.95) = 0.21: not piled up


@pytest.mark.parametrize("sigma, q, count", [(2.0, 0.001, 10), (1.0, 0.01, 10), (10.0, 0.001, 30), (0.5, 0.001, 40)])
def test_uses_piled_up_near_one_value_go_to_the_recursion_first(sigma, q, count):
    """Up to RECURSION_EARLY uses whose loss piles up within min(PILED_REACH, PILED_NOISE / (sigma / sensitivity))
    (reach = count * log(1/(1 - q))): the contour refuses those for its node budget (checked here), so the
    recursion answers an eps(delta) without that attempt; a delta(eps) query stays the contour's first."""
    accountant = afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), times=count)
    recursion = accountant.planner.step_recursion(0)
    assert recursion.reach == pytest.approx(-count * math.log1p(-q), rel=1e-9)
    assert recursion.noise_ratio == pytest.approx(sigma) and accountant.planner.piled_up()
    answer = accountant.epsilon_result(1e-6)
    assert [attempt.method for attempt in answer.attempts] == [planner.STEP_RECURSION]
    with pytest.raises(afa.AccuracyError):
        accountant.epsilon_result(1e-6, method="contour")
    assert accountant.delta_result(answer.value).attempts[0].method == "contour"
    with_gaussian = afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), times=count)
    assert with_gaussian.compose(afa.Gaussian(3.0)).planner.step_recursion(0).reach == math.inf


def test_wide_noise_is_not_piled_up_at_the_same_reach():
    """sigma = 10, q = 0.01, 10 uses (reach 0.1): the contour answers (in some 20 ms, where the recursion takes
    0.5 s), so it stays first."""
    accountant = afa.Accountant().compose(afa.Gaussian(10.0).poisson_subsampled(0.01), times=10)
    assert not accountant.planner.piled_up()
    answer = accountant.epsilon_result(1e-5)
    assert [attempt.method for attempt in answer.attempts] == ["contour"]


@pytest.mark.parametrize("sigma, q, k, delta", [(2.0, 0.001, 16, 1e-5), (0.8, 0.001, 13, 1e-10),
                                                (2.0, 0.001, 20, 1e-10)])
def test_a_few_dozen_uses_of_a_small_q_answer_to_1e_6_inside_the_certified_bracket(sigma, q, k, delta):
    # beyond a dozen uses of q = 0.001 the contour runs out of nodes and its wide retry can take seconds, where
    # 'auto' answered with a PLD bracket 3e-5 to 2e-4 wide, or (the last row) a wide contour 1e-8 off the
    # recursion with 3e-11 stated; the recursion takes them, before the wide retry, to 1e-6 or better, inside
    # the PLD's certified bracket (a second, independent algorithm)
    accountant = afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), times=k)
    answer = accountant.epsilon_result(delta)
    assert answer.error <= 1e-6 * answer.value
    assert answer.upper - answer.lower <= 2e-6 * answer.value
    certified = accountant.delta_result(answer.value, method="pld")
    assert certified.lower <= delta <= certified.upper
    recursion = afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), times=k)
    assert recursion.epsilon_result(delta, method="exact").value == pytest.approx(answer.value, rel=1e-9)


@pytest.mark.parametrize("count, delta", [(20, 1e-10), (30, 1e-8), (30, 1e-10), (50, 1e-8)])
def test_the_wide_contour_holds_its_stated_error_against_the_recursion(count, delta):
    """sigma = 2, q = 0.001: the whole law's contour sums cancel by up to 2e7 here (a loss piled up near 0, with
    delta made by one far output), and their node values' errors, bounded node by node, set its error or refuse
    it; the wide contour then sums the pile/tail split (afa.engines.pile_split).  The recursion (stable to 1e-13
    across its rule and fit settings) lies inside the wide contour's bracket, at most 1e-7 wide."""
    recursion = StepRecursion([_remove(2.0, 0.001)] * count)
    accountant = afa.Accountant().compose(afa.Gaussian(2.0).poisson_subsampled(0.001), times=count)
    engines = accountant.planner.engines(planner.WIDE_CONTOUR)
    contour, lower, upper = max((engine.epsilon_bracket(delta) for engine in engines), key=lambda answer: answer[0])
    assert upper - lower <= 1e-7 * contour
    value, error = recursion.delta(np.array([lower, upper]))
    assert value[0] + error[0] >= delta >= value[1] - error[1]


def test_beyond_forty_uses_the_wide_contour_splits_the_law_and_the_recursion_agrees():
    """sigma = 2, q = 0.001, 50 uses at delta = 1e-10: the whole law's contour refuses (its sums cancel beyond its
    nodes' accuracy) and the wide contour answers from the pile/tail split; the recursion use by use (a second
    algorithm) and the PLD's certified bracket (1.6e-4 wide) hold its eps."""
    accountant = afa.Accountant().compose(afa.Gaussian(2.0).poisson_subsampled(0.001), times=50)
    answer = accountant.epsilon_result(1e-10)
    assert [attempt.method for attempt in answer.attempts] == ["contour", planner.WIDE_CONTOUR]
    assert answer.method == "contour" and answer.upper - answer.lower <= 1e-8 * answer.value
    one_by_one = StepRecursion([_remove(2.0, 0.001)] * 50)  # the remove direction decides eps here
    low, high = one_by_one.delta(np.array([answer.lower, answer.upper]))
    assert low[0] + high[0] >= 1e-10 >= low[1] - high[1]
    certified = accountant.epsilon_result(1e-10, method="pld")
    assert certified.lower <= answer.value <= certified.upper


@pytest.mark.parametrize("sigma, q, count, eps", [(1.0, 0.01, 16, (0.0, 0.2, 0.6, 1.2)),
                                                   (2.0, 0.001, 37, (0.0, 0.01, 0.03, 0.06)),
                                                   (0.8, 0.001, 50, (0.0, 0.02, 0.1, 0.4))])
def test_doubling_agrees_with_the_recursion_use_by_use(sigma, q, count, eps):
    """Two algorithms for the same delta: sums of stages of 2^j uses (G of one, the survival function of the
    other) and one level per use.  Both directions; delta from about 1e-1 down to 1e-17 (the add direction's
    loss ends at count log(1/(1 - q)): beyond, both are 0)."""
    eps = np.array(eps)
    for pair in (_remove(sigma, q), _remove(sigma, q).swapped()):
        doubled, stated = DoublingRecursion(pair, count).delta(eps)
        one_by_one, theirs = StepRecursion([pair] * count).delta(eps)
        assert np.all(np.abs(doubled - one_by_one) <= stated + theirs)
        np.testing.assert_allclose(doubled, one_by_one, rtol=1e-10, atol=1e-300)
        assert np.all(stated <= 1e-7 * doubled + 1e-250)


@pytest.mark.parametrize("sigma, q, count", [(1.0, 0.01, 37), (2.0, 0.001, 100), (0.8, 0.02, 50)])
def test_doubling_agrees_at_zero_in_both_directions(sigma, q, count):
    """delta_{P||Q}(0) = delta_{Q||P}(0) (both the total variation distance of the composed pairs); the two
    directions' stages have nothing in common (the add direction's loss is bounded above, the remove's below)."""
    pair = _remove(sigma, q)
    remove, add = (DoublingRecursion(side, count).delta(np.array([0.0])) for side in (pair, pair.swapped()))
    assert remove[0][0] == pytest.approx(add[0][0], rel=1e-10)
    assert abs(remove[0][0] - add[0][0]) <= remove[1][0] + add[1][0]


def test_doubling_agrees_with_the_contour_at_hundreds_of_uses():
    """q = 0.003, sigma = 1, 300 uses, delta = 1e-5: the contour answers with relative accuracy (its sums do not
    cancel here); at its eps the doubling's delta (the larger direction's) is 1e-5 to its stated error."""
    accountant = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.003), times=300)
    contour = accountant.epsilon_result(1e-5, method="contour")
    assert contour.error < 1e-10 * contour.value
    answers = [DoublingRecursion(side, 300).delta(np.array([contour.value]))
               for side in (_remove(1.0, 0.003), _remove(1.0, 0.003).swapped())]
    value, error = max((float(v[0]), float(e[0])) for v, e in answers)
    assert value == pytest.approx(1e-5, rel=1e-9)
    assert error <= 1e-7 * value


@pytest.mark.parametrize("sigma, count, delta", [
    (2.0, 300, 1e-10),
    pytest.param(2.0, 1000, 1e-12, marks=pytest.mark.slow),
    pytest.param(1.0, 500, 1e-12, marks=pytest.mark.slow)])
def test_hundreds_of_uses_at_tiny_delta_answer_by_doubling_inside_the_certified_bracket(sigma, count, delta):
    """q = 0.001 beyond the recursion's 200 uses at tiny delta, where the whole law's contour sums cancel beyond
    their nodes' accuracy and the PLD's certified bracket is 2.5e-4 to 4.2e-4 wide (relative): doubling
    (method='exact') answers to 1e-7 or better, inside that bracket (an independent, certified algorithm), and
    'auto''s answer (the wide contour's pile/tail split) agrees with it to 1e-7."""
    accountant = afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(0.001), times=count)
    doubling = accountant.epsilon_result(delta, method="exact")
    assert doubling.upper - doubling.lower <= 1e-7 * doubling.value
    certified = accountant.epsilon_result(delta, method="pld")
    assert certified.certified and certified.lower <= doubling.lower <= doubling.upper <= certified.upper
    answer = accountant.epsilon_result(delta)
    assert answer.upper - answer.lower <= 1e-7 * answer.value
    assert answer.lower <= doubling.upper and doubling.lower <= answer.upper


def test_one_pair_beyond_forty_uses_is_served_by_doubling():
    """The planner's choice: one noise pair without Gaussians doubles from DOUBLING_FROM uses; fewer uses, or
    Gaussians beside, go use by use."""
    def recursion(count, gaussians=False):
        accountant = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01), times=count)
        if gaussians:
            accountant.compose(afa.Gaussian(5.0))
        return accountant.planner.step_recursion(0)

    assert isinstance(recursion(planner.DOUBLING_FROM), DoublingRecursion)
    assert isinstance(recursion(planner.DOUBLING_FROM - 1), StepRecursion)
    assert isinstance(recursion(planner.DOUBLING_FROM, gaussians=True), StepRecursion)
    # its reach: count * log(1/(1 - q)) at most MAX_REACH (the stages' ranges grow with it); beyond, use by use
    # up to MAX_USES, else no recursion
    assert isinstance(recursion(step_recursion.MAX_USES), StepRecursion)  # q = 0.01: reach 2
    assert recursion(step_recursion.MAX_USES + 1) is None
    rare = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(1e-5), times=10**5).planner
    assert rare.step_recursion(0).count == 10**5  # reach 1.0
    with pytest.raises(UnsupportedCompositionError, match="at most"):
        DoublingRecursion(_remove(1.0, 0.001), 1100)


def test_beyond_its_fast_reach_the_doubling_is_the_last_resort():
    """The planner's far doubling: one noise pair without Gaussians whose count * log(1/(1 - q)) lies beyond
    MAX_REACH (and beyond MAX_USES uses, or use by use would serve) but within FAR_REACH."""
    def planner_of(count, gaussians=False):
        accountant = afa.Accountant().compose(afa.Gaussian(2.0).poisson_subsampled(0.001), times=count)
        if gaussians:
            accountant.compose(afa.Gaussian(5.0))
        return accountant.planner

    far = planner_of(3000)  # reach 3
    assert far.step_recursion(0) is None and far.far_recursion(0).count == 3000 and far.far_recursion_available()
    assert far.exact_available()  # method='exact' is served by it when asked for
    assert planner_of(500).far_recursion(0) is None  # within the fast reach: step_recursion doubles
    assert planner_of(13_000).far_recursion(0) is None  # reach 13 > FAR_REACH
    many = afa.Accountant().compose(afa.Gaussian(2.0).poisson_subsampled(1e-4), times=step_recursion.FAR_USES + 1)
    assert many.planner.step_recursion(0) is None and many.planner.far_recursion(0) is None  # reach 2, > FAR_USES
    assert planner_of(3000, gaussians=True).far_recursion(0) is None
    with pytest.raises(ValueError, match="max_reach"):
        DoublingRecursion(_remove(1.0, 0.001), 100, max_reach=0.0)
    assert DoublingRecursion(_remove(2.0, 0.001), 1100, max_reach=step_recursion.FAR_REACH).count == 1100


def test_auto_tightens_a_wide_certified_bracket_by_the_far_doubling():
    """sigma = 2, q = 0.001, 1100 uses (reach 1.1: beyond the fast doubling, and 1100 > MAX_USES) at
    delta = 1e-30: both contours' sums cancel beyond their nodes' accuracy and the PLD's certified bracket is
    0.8 wide (relative).  Kept while the far doubling tries, which answers to 1e-7, inside that bracket (an
    independent, certified algorithm).  With AutoOptions.retry_rtol above the bracket's width nothing is tried
    after it."""
    accountant = afa.Accountant().compose(afa.Gaussian(2.0).poisson_subsampled(0.001), times=1100)
    answer = accountant.epsilon_result(1e-30)
    assert answer.method == "exact" and answer.attempts[-1].method == planner.FAR_DOUBLING
    assert [attempt.outcome for attempt in answer.attempts if attempt.method == "pld"] == ["wide bracket"]
    assert answer.upper - answer.lower <= 1e-7 * answer.value
    certified = accountant.epsilon_result(1e-30, method="pld")
    assert certified.certified and certified.upper - certified.lower > 0.1 * certified.value
    assert certified.lower <= answer.lower <= answer.upper <= certified.upper
    options = afa.Options(auto=afa.AutoOptions(retry_rtol=1.0))
    loose = afa.Accountant(options=options).compose(afa.Gaussian(2.0).poisson_subsampled(0.001), times=1100)
    answer = loose.epsilon_result(1e-30)
    assert answer.method == "pld" and all(attempt.method != planner.FAR_DOUBLING for attempt in answer.attempts)


def test_an_estimate_that_misses_the_kept_certified_bracket_is_refused(monkeypatch):
    """An estimate answered after a certified bracket was kept must meet it: a (stub) far doubling whose eps
    lies far outside the PLD's bracket is refused, and the bracket is the answer."""
    class Wrong:
        certified = False

        def epsilon_bracket(self, delta):
            return 10.0, 9.9, 10.1

        def upper_delta(self, epsilons, target):
            return np.ones(np.shape(epsilons))

    monkeypatch.setitem(planner.Planner._BUILDERS, planner.FAR_DOUBLING, lambda self, index: Wrong())
    accountant = afa.Accountant().compose(afa.Gaussian(2.0).poisson_subsampled(0.001), times=1100)
    answer = accountant.epsilon_result(1e-30)
    assert answer.method == "pld" and answer.certified and answer.upper < 1.0
    far, = (attempt for attempt in answer.attempts if attempt.method == planner.FAR_DOUBLING)
    assert far.outcome == "refused" and "certified bracket" in far.reason


@pytest.mark.parametrize("count", [1100, pytest.param(3000, marks=pytest.mark.slow)])
def test_far_doubling_agrees_with_the_wide_contour(count):
    """sigma = 2, q = 0.001, delta = 1e-10: the contour with its wide node budget answers to 1e-8 or better;
    method='exact' (the doubling beyond its fast reach) finds the same eps to 1e-9, within both stated errors,
    and the two directions' delta agree at eps = 0 (both the total variation distance)."""
    options = afa.Options(contour=afa.ContourOptions(numeric_nodes=afa.ContourOptions().wide_numeric_nodes))
    accountant = afa.Accountant(options=options).compose(afa.Gaussian(2.0).poisson_subsampled(0.001), times=count)
    contour = accountant.epsilon_result(1e-10, method="contour")
    exact = accountant.epsilon_result(1e-10, method="exact")
    assert exact.attempts[-1].method == "exact" and exact.upper - exact.lower <= 1e-6 * exact.value
    assert exact.value == pytest.approx(contour.value, rel=1e-9)
    assert abs(exact.value - contour.value) <= contour.error + (exact.upper - exact.lower) / 2
    recursions = [accountant.planner.far_recursion(index) for index in (0, 1)]
    (remove, remove_error), (add, add_error) = (recursion.delta(np.array([0.0])) for recursion in recursions)
    assert remove[0] == pytest.approx(add[0], rel=1e-9) and abs(remove[0] - add[0]) <= remove_error[0] + add_error[0]


@pytest.mark.slow
def test_thousands_of_uses_at_tiny_delta_answer_by_the_far_doubling_inside_the_certified_bracket():
    """sigma = 2, q = 0.001, 3000 uses, delta = 1e-30: the PLD's certified bracket is 0.3 wide (relative); the
    far doubling answers to 1e-7 inside it (12 s)."""
    accountant = afa.Accountant().compose(afa.Gaussian(2.0).poisson_subsampled(0.001), times=3000)
    answer = accountant.epsilon_result(1e-30)
    assert answer.attempts[-1].method == planner.FAR_DOUBLING and answer.upper - answer.lower <= 1e-7 * answer.value
    certified = accountant.epsilon_result(1e-30, method="pld")
    assert certified.lower <= answer.lower <= answer.upper <= certified.upper


def test_identical_pairs_share_one_use():
    """A use's output rule and loss tails are built once per distinct pair (100 uses of one pair: one)."""
    recursion = StepRecursion([_remove(1.0, 0.01)] * 100)
    assert len({id(use) for use in recursion.uses}) == 1 and len(recursion.uses) == 100


def test_a_level_with_images_cutting_its_panels_matches_an_mpmath_integral():
    """One level E_A[delta(x - l(o))] of a steep delta = Phi(-(y - 0.05) / 0.002) whose many piece edges put
    several images into one panel (and some beyond the rule's span) against mpmath's integral over the output,
    split where the loss meets the steep part."""
    sigma, q = 1.0, 0.01
    pair = _remove(sigma, q)
    use = step_recursion._Use(pair)
    centre, width = 0.05, 0.002

    def previous(y: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(0.5 * np.array([math.erfc(v) for v in ((np.ravel(y) - centre) / width / math.sqrt(2))])
                      ).reshape(np.shape(y))

    edges = np.concatenate([centre + width * np.linspace(-6, 6, 25), [-5.0, 40.0]])
    x = np.array([0.03, 0.05, 0.2, 1.5])
    values = use.level(previous, np.sort(edges), x, step_recursion.ORDER, step_recursion.WIDTH)
    mp.mp.dps = 30
    for xi, value in zip(x, values, strict=True):
        def integrand(o, xi=xi):
            loss = mp.log(1 - q + q * mp.exp((2 * o - 1) / (2 * sigma ** 2)))
            return mp.npdf(o, 0, sigma) * ((1 - q) + q * mp.exp((2 * o - 1) / (2 * sigma ** 2))) \
                * mp.erfc((xi - loss - centre) / width / mp.sqrt(2)) / 2
        # the outputs where x - l(o) crosses the steep part
        crossings = [sigma ** 2 * mp.log((mp.exp(xi - y) - 1 + q) / q) + mp.mpf(1) / 2
                     for y in (centre + width * np.linspace(-8, 8, 9)) if mp.exp(xi - y) > 1 - q]
        points = sorted([mp.mpf(-30), mp.mpf(31), *crossings])
        reference = mp.quad(integrand, points)
        assert abs(value - float(mp.log(reference))) < 1e-10


def test_seeded_and_looking_ahead_fits_meet_their_tolerance():
    """A fit from seeded pieces, and one trying three halvings per call, match the function they fit (log of a
    steep normal tail, in closed form) to the fit's tolerance; looking ahead leaves the pieces as plain halving."""
    def function(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.log(0.5 * np.array([math.erfc(v / math.sqrt(2)) for v in x / 0.1])), np.zeros(x.shape)

    plain = step_recursion._Piecewise(function, -1.0, 2.0)
    ahead = step_recursion._Piecewise(function, -1.0, 2.0, lookahead=3)
    seeded = step_recursion._Piecewise(function, -1.0, 2.0, seed=np.array([0.1, 0.5, 0.9]))
    np.testing.assert_array_equal(ahead.edges, plain.edges)
    assert {-1.0 + 3.0 * s for s in (0.1, 0.5)} <= set(seeded.edges.tolist()) or len(seeded.edges) > 4
    x = np.linspace(-1.0, 2.0, 997)
    truth = function(x)[0]
    for fit in (plain, ahead, seeded):
        assert np.max(np.abs(fit(x) - truth)) < 1e-9
        np.testing.assert_allclose(fit.breaks * 3.0 - 1.0, fit.edges[1:-1], rtol=0, atol=1e-15)


def test_fit_series_matches_numpy_chebval():
    """The fit's Clenshaw sums over many points of many pieces against numpy's chebval, point by point."""
    rng = np.random.default_rng(7)
    table = rng.normal(size=(step_recursion.FIT_ORDER, 9))
    index, t = rng.integers(0, 9, 500), rng.uniform(-1, 1, 500)
    values, = step_recursion._series((table,), index, t)
    expected = [np.polynomial.chebyshev.chebval(ti, table[:, i]) for i, ti in zip(index, t, strict=True)]
    np.testing.assert_allclose(values, expected, rtol=0, atol=1e-13)


def test_recursion_engine_starts_newton_at_the_gaussian_guess(monkeypatch):
    """The recursion's engine starts eps(delta)'s Newton's method at the Gaussian guess (sigma = 2, q = 0.001, 10
    uses, delta = 1e-14: its stages are fitted once, up to the guess's reach) rather than at 0 (fitted at 0, then
    extended to Newton's next iterate); the two engines' brackets meet."""
    from afa.engines.base import gaussian_epsilon_guess

    builds = []
    build = StepRecursion._build
    monkeypatch.setattr(StepRecursion, "_build", lambda self, *bounds: builds.append(bounds) or build(self, *bounds))

    def bracket():
        accountant = afa.Accountant().compose(afa.Gaussian(2.0).poisson_subsampled(0.001), times=10)
        return accountant.planner.engines("exact")[0].epsilon_bracket(1e-14), accountant.planner.composed(0)

    (estimate, lower, upper), composed = bracket()
    assert len(builds) == 1 and builds[0][1] >= 2 * gaussian_epsilon_guess(composed, 1e-14)
    builds.clear()
    monkeypatch.setattr(planner, "gaussian_epsilon_guess", lambda loss, delta: 0.0)
    (other, other_lower, other_upper), _ = bracket()
    assert len(builds) == 2 and builds[0][1] < builds[1][1]
    assert lower <= other_upper and other_lower <= upper
