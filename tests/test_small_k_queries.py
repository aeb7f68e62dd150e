"""Few-step DP-SGD (one Poisson-subsampled Gaussian, k <= 300 steps) through the contour's query path.

The eps(delta) solver keeps one snapped contour line for Newton's iterates, the line's node chunks serve
every eps, a direction that cannot set the maximum is shown below by its Chernoff bound, and answers are
kept per engine; none of that may move an answer outside what an independent method certifies.  References:
afa's discretized PLD (method='pld', a second engine with proved brackets), dp_accounting's pessimistic and
optimistic PLDs, the brute-force PLD of tests/_subsampling_reference.py (no afa code), and the Gaussian
mechanism's closed form (Sommer, Meiser & Mohammadi 2019, Thm 5).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _peers import dp_accounting_epsilon_bracket
from _subsampling_reference import delta_bracket_bruteforce
from scipy.stats import norm

import afa
from afa.engines.base import ContourEngine
from afa.engines.composition import ComposedLoss
from afa.engines.contour import ContourInversion

DELTA = 1e-5
#: The rows of benchmarks/bench_small_k.py with k <= 300 that the contour answers (the others need a loss
#: that is not piled up near one value: 'auto' answers them from the PLD).
CONTOUR_ROWS = [(sigma, 0.01, count) for count in (100, 300) for sigma in (0.8, 1.0, 2.0)]
#: Every row of benchmarks/bench_small_k.py with k <= 300.
ALL_ROWS = ([(sigma, q, count) for q in (0.01, 0.001) for sigma in (0.8, 1.0, 2.0)
             for count in (1, 2, 5, 10, 50, 100, 300)])


def accountant(sigma: float, q: float, count: int) -> afa.Accountant:
    return afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), times=count)


def overlaps(result: afa.Result, reference: afa.Result) -> bool:
    """Whether two brackets that should both hold the truth share a point."""
    return bool(result.lower <= reference.upper and reference.lower <= result.upper)


@pytest.mark.parametrize("sigma, q, count", CONTOUR_ROWS)
def test_contour_rows_inside_the_pld_bracket(sigma, q, count):
    """eps(delta) and delta(eps) (at the answer and 20 % above it), both directions' maximum: the contour's
    value lies in the certified PLD bracket and its own bracket meets it."""
    result = accountant(sigma, q, count).epsilon_result(DELTA)
    assert result.method == "contour" and result.lower <= result.value <= result.upper
    assert result.upper - result.lower <= 1e-9 * result.value
    reference = accountant(sigma, q, count).epsilon_result(DELTA, method="pld")
    assert reference.certified and reference.lower <= result.value <= reference.upper, (result, reference)
    assert overlaps(result, reference)
    for epsilon in (result.value, 1.2 * result.value):
        delta = accountant(sigma, q, count).delta_result(epsilon)
        pld = accountant(sigma, q, count).delta_result(epsilon, method="pld")
        assert delta.method == "contour" and delta.lower <= delta.value <= delta.upper
        assert pld.lower <= delta.value <= pld.upper and overlaps(delta, pld), (epsilon, delta, pld)


def test_delta_at_the_answer_is_the_target():
    """delta(eps(delta)) comes back to delta within their stated errors, on one accountant and on a fresh one
    (the second direction then shown below by its Chernoff bound), and matches the brute-force bracket."""
    acc = accountant(1.0, 0.01, 100)
    result = acc.epsilon_result(DELTA)
    for query in (acc, accountant(1.0, 0.01, 100)):
        at_upper, at_lower = query.delta_result(result.upper), query.delta_result(result.lower)
        assert at_upper.lower <= DELTA <= at_lower.upper
        assert at_upper.value == pytest.approx(DELTA, rel=1e-10)
    lower, upper = delta_bracket_bruteforce(np.array([result.value]), 100, "gaussian", 1.0, 0.01,
                                            relation="add_remove", grid=1e-4)
    assert lower[0] <= DELTA * (1 + 1e-9) and DELTA * (1 - 1e-9) <= upper[0]


def test_skipped_direction_leaves_the_maximum_as_both_directions_give_it():
    """delta_result for both directions equals the larger of the two directions asked one at a time (each
    evaluated by its own contour sums), value, bounds and error; and the direction shown below by its
    Chernoff bound is indeed below: the brute-force bracket of the add direction alone."""
    epsilon = 0.718
    both = accountant(1.0, 0.01, 100).delta_result(epsilon)
    remove = accountant(1.0, 0.01, 100).delta_result(epsilon, direction="remove")
    add = accountant(1.0, 0.01, 100).delta_result(epsilon, direction="add")
    assert add.upper < remove.lower
    assert (both.value, both.lower, both.upper, both.error) == (remove.value, remove.lower, remove.upper, remove.error)
    engine = ContourEngine(accountant(1.0, 0.01, 100).planner.composed(1))
    bound = engine.chernoff_delta(np.array([epsilon]))[0]
    _, upper = delta_bracket_bruteforce(np.array([epsilon]), 100, "gaussian", 1.0, 0.01, relation="add", grid=1e-4)
    assert add.value <= bound and bound < remove.lower and upper[0] < remove.lower


@pytest.mark.parametrize("sigma, q, count, epsilon, above_error", [(2.0, 0.001, 10, 0.004529, True),
                                                                    (1.0, 0.001, 100, 0.05516, False)])
def test_a_direction_below_the_others_lower_bound_leaves_the_maximum_unchanged(sigma, q, count, epsilon,
                                                                               above_error):
    """delta(eps) of both directions, where the add direction's Chernoff bound lies below the remove direction's
    lower bound (the step recursion's and the wide contour's rows; on the first, above twice the remove
    direction's tiny error, too): value, bounds and error are those of the remove direction asked alone, and the
    add direction asked alone (its own evaluation) lies below them; the PLD's certified bracket of the maximum
    holds the value."""
    both = accountant(sigma, q, count).delta_result(epsilon)
    remove = accountant(sigma, q, count).delta_result(epsilon, direction="remove")
    add = accountant(sigma, q, count).delta_result(epsilon, direction="add")
    assert (both.value, both.lower, both.upper, both.error) == (remove.value, remove.lower, remove.upper, remove.error)
    assert add.upper < remove.lower and (2 * remove.error < add.value or not above_error)
    pld = accountant(sigma, q, count).delta_result(epsilon, method="pld")
    assert pld.lower <= both.value <= pld.upper


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 2.5])
def test_chernoff_bound_above_the_gaussian_closed_form(epsilon):
    """The Chernoff bound M(c) e^{-c eps} c^c / (1 + c)^{1 + c} at the saddle is an upper bound on delta:
    against the Gaussian mechanism's closed form (mu = 1: loss N(1/2, 1), M(c) = e^{c (c + 1) / 2}); it is that
    expression at the saddle, and not far above delta (within c sqrt(2 pi Psi''), the saddle-point ratio)."""
    remove, _ = afa.Gaussian(sigma=1.0).privacy_losses()
    inversion = ContourInversion(ComposedLoss({remove: 1}))
    exact = norm.cdf(0.5 - epsilon) - math.exp(epsilon) * norm.cdf(-0.5 - epsilon)
    c, _, curvature = inversion.saddle(epsilon)
    bound = inversion.chernoff_bound(epsilon)
    assert bound == pytest.approx(math.exp(c * (c + 1) / 2 - c * epsilon) * c ** c / (1 + c) ** (1 + c), rel=1e-9)
    assert exact <= bound <= c * math.sqrt(2 * math.pi * curvature) * exact


def test_chernoff_bound_of_a_subsampled_direction_above_the_bruteforce_bracket():
    """The add direction of q = 0.01, sigma = 1, k = 100 at eps where it is not negligible: the bound is at
    least the brute-force PLD's certified lower bound."""
    engine = ContourEngine(accountant(1.0, 0.01, 100).planner.composed(1))
    epsilons = np.array([0.05, 0.2])
    bounds = engine.chernoff_delta(epsilons)
    lower, _ = delta_bracket_bruteforce(epsilons, 100, "gaussian", 1.0, 0.01, relation="add", grid=1e-4)
    assert np.all(lower <= bounds) and np.all(bounds < 1)


def test_repeated_query_returns_the_first_answer():
    """An engine keeps its eps(delta) answers: asking again gives the same numbers (and a fresh accountant's
    bracket meets them)."""
    acc = accountant(2.0, 0.01, 300)
    first, again = acc.epsilon_result(DELTA), acc.epsilon_result(DELTA)
    assert (first.value, first.lower, first.upper) == (again.value, again.lower, again.upper)
    assert overlaps(first, accountant(2.0, 0.01, 300).epsilon_result(DELTA))
    other = acc.epsilon_result(2 * DELTA)
    assert other.upper < first.lower


def test_kept_line_serves_newtons_iterates():
    """Newton's iterates after its first step reuse the first snapped line: delta there agrees with a fresh
    inversion that goes through each eps's own saddle, within the two stated errors."""
    loss = accountant(1.0, 0.01, 100).planner.composed(0)
    kept = ContourInversion(loss)
    kept.delta_and_slope(0.6)
    for epsilon in (0.68, 0.718, 0.75):
        assert kept._kept_line(epsilon) is not None
        value, error, _ = kept.delta_and_slope(epsilon)
        reference, reference_error, _ = ContourInversion(loss).delta_and_slope(epsilon)
        assert abs(value - reference) <= error + reference_error
        kept.verify(epsilon)  # the second line agrees too
    assert kept._kept_line(2.0) is None  # far from the line's saddle: a new line


def dp_accounting_bracket(sigma: float, q: float, count: int) -> tuple[float, float]:
    """(optimistic, pessimistic) eps(DELTA) from dp_accounting's PLDs (grid 1e-4)."""
    return dp_accounting_epsilon_bracket(sigma, q, count, [DELTA])[0]


@pytest.mark.slow
@pytest.mark.parametrize("sigma, q, count", ALL_ROWS)
def test_every_few_step_row_inside_the_reference_brackets(sigma, q, count):
    """Every k <= 300 row of benchmarks/bench_small_k.py, whichever method 'auto' picks: eps(delta) inside
    dp_accounting's optimistic/pessimistic bracket and afa's PLD bracket, and delta(eps) at the answer
    inside the PLD's delta bracket."""
    result = accountant(sigma, q, count).epsilon_result(DELTA)
    optimistic, pessimistic = dp_accounting_bracket(sigma, q, count)
    assert optimistic <= result.value <= pessimistic, (result, optimistic, pessimistic)
    assert result.lower <= pessimistic and optimistic <= result.upper
    reference = accountant(sigma, q, count).epsilon_result(DELTA, method="pld")
    assert reference.lower <= result.value <= reference.upper and overlaps(result, reference)
    delta = accountant(sigma, q, count).delta_result(result.value)
    pld = accountant(sigma, q, count).delta_result(result.value, method="pld")
    assert pld.lower <= delta.value <= pld.upper and overlaps(delta, pld)


def test_newton_iterates_on_a_kept_line_reuse_its_nodes(monkeypatch):
    """Newton's eps iterates on the first sum's (snapped) contour line replay that sum's chunks of nodes: no
    further evaluation of the subsampled MGF, and the same delta as a fresh inversion's (whose sum is laid out
    on its own), within the two sums' stated errors."""
    import afa.engines.contour as contour

    calls = []
    evaluate = contour.batched_log_phi
    monkeypatch.setattr(contour, "batched_log_phi", lambda s, terms: calls.append(s.size) or evaluate(s, terms))
    loss = accountant(1.0, 0.01, 100).planner.composed(0)
    inversion = contour.ContourInversion(loss)
    inversion.delta_and_slope(0.70)  # Newton's first iterates for eps(1e-5) are about here
    calls.clear()
    value, error, _ = inversion.delta_and_slope(0.718)
    assert calls == []
    fresh, fresh_error, _ = contour.ContourInversion(loss).delta_and_slope(0.718)
    assert abs(value - fresh) <= error + fresh_error


def test_kept_line_takes_a_cached_halving_rather_than_a_new_line(monkeypatch):
    """Far from the first line's saddle (eps 0.546 on the line of 0.313, sigma = 1, q = 0.01, 50 uses: Newton's
    first step there) the second level's change predicts more halvings than the node budget holds; the next level's
    nodes were evaluated by the first sum, so it is summed on the kept line -- no new line, no MGF evaluation --
    and agrees with a fresh inversion through 0.546's own saddle within the two stated errors."""
    import afa.engines.contour as contour

    calls = []
    evaluate = contour.batched_log_phi
    monkeypatch.setattr(contour, "batched_log_phi", lambda s, terms: calls.append(s.size) or evaluate(s, terms))
    loss = accountant(1.0, 0.01, 50).planner.composed(0)
    inversion = contour.ContourInversion(loss)
    inversion.delta_and_slope(0.313)
    assert inversion._kept_line(0.546) is not None
    calls.clear()
    value, error, _ = inversion.delta_and_slope(0.546)
    assert calls == []
    fresh, fresh_error, _ = contour.ContourInversion(loss).delta_and_slope(0.546)
    assert abs(value - fresh) <= error + fresh_error
    inversion.verify(0.546)


@pytest.mark.parametrize("count", [50, 100])
def test_newtons_iterates_far_from_the_guess_stay_on_its_line(count, monkeypatch):
    """sigma = 0.8, q = 0.01: the Gaussian guess (0.48 / 0.70) is far below eps(1e-5) (1.29 / 1.51), yet the line
    through the guess's saddle serves every later iterate and the bracket's checks (its integrand peaks at most
    e^KEEP_LINE above theirs): one line through a saddle in the whole query; the answer lies in the PLD's
    certified bracket."""
    import afa.engines.contour as contour

    fresh_lines = []
    line_integral = contour._SaddlePointContour._line_integral
    monkeypatch.setattr(contour._SaddlePointContour, "_line_integral",
                        lambda self, epsilon, kept: (fresh_lines.append(epsilon) if kept is None else None)
                        or line_integral(self, epsilon, kept))
    result = accountant(0.8, 0.01, count).epsilon_result(DELTA)
    assert result.method == "contour" and len(fresh_lines) == 1
    assert fresh_lines[0] < 0.6 * result.value
    reference = accountant(0.8, 0.01, count).epsilon_result(DELTA, method="pld")
    assert reference.lower <= result.value <= reference.upper and overlaps(result, reference)
