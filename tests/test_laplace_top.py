"""k uses of the Laplace mechanism within 2a of their top (afa.engines.laplace_top).

Independent references: the 60-digit mpmath enumeration of the composed loss (tests/_reference.laplace_delta_mpmath,
which integrates each count of uses in the continuous part in closed form), the one-use closed form
delta = 1 - e^((eps - a) / 2) on [-a, a] (Zhu, Dong & Wang 2022, Lemma 34, integrated), and the contour engine.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest

import afa
from afa.engines import planner
from afa.engines.laplace_top import LaplaceTopEngine
from afa.results import AccuracyError, UnsupportedCompositionError

sys.path.insert(0, str(Path(__file__).parent))
from _reference import laplace_delta_mpmath  # noqa: E402


@pytest.mark.parametrize("a, k", [(1.0, 100), (1.0, 2), (0.5, 1000), (2.0, 30), (3.0, 7), (20.0, 3)])
@pytest.mark.parametrize("fraction", [0.002, 0.37, 1.0])
def test_delta_matches_the_60_digit_enumeration(a, k, fraction):
    eps = k * a - 2 * fraction * a  # w = fraction * a
    values, errors = LaplaceTopEngine(a, k).delta(np.array([eps]))
    reference = laplace_delta_mpmath(eps, k, a)
    assert values[0] == pytest.approx(reference, rel=1e-11)
    assert abs(values[0] - reference) <= errors[0] + 1e-14 * reference  # the error stated holds
    assert errors[0] <= 1e-11 * values[0]  # relative, however small delta is (1e-303 for a = 0.5, k = 1000)


@pytest.mark.parametrize("a", [1.5, 30.0])
def test_one_use_is_the_closed_form_with_its_slope(a):
    # (a = 30: w up to 30, where the terms w^j / j! peak near j = w, past sqrt(2 k w))
    engine = LaplaceTopEngine(a, 1)
    for eps in (-a, -0.2 * a, 0.6 * a, a - 1e-4):
        w = (a - eps) / 2
        value, error, slope = engine._evaluate(eps)
        assert value == pytest.approx(-math.expm1(-w), rel=1e-14)
        assert slope == pytest.approx(math.exp(-w) / 2, rel=1e-14)  # -delta'(eps)
        assert error <= 1e-11 * value


def test_slope_matches_differences_of_the_reference():
    a, k, eps, step = 1.0, 50, 49.3, 1e-6
    with mp.workdps(40):
        slope = (laplace_delta_mpmath(eps - step, k, a) - laplace_delta_mpmath(eps + step, k, a)) / (2 * step)
    assert LaplaceTopEngine(a, k)._evaluate(eps)[2] == pytest.approx(slope, rel=1e-7)


@pytest.mark.parametrize("delta", [1e-30, 1e-40, 1e-25])
def test_auto_answers_near_the_top_exactly(delta):
    # Laplace(1) x 100: the top is 100, and delta(98) = 1.7e-24; below that delta auto answers from the series
    accountant = afa.Accountant().compose(afa.Laplace(1.0), times=100)
    answer = accountant.epsilon_result(delta)
    assert answer.method == "exact" and [attempt.method for attempt in answer.attempts] == [planner.LAPLACE_TOP]
    assert 98.0 < answer.lower <= answer.value <= answer.upper < 100.0
    assert answer.upper - answer.lower <= 1e-12 * answer.value
    # the 60-digit reference crosses delta inside the bracket
    assert laplace_delta_mpmath(answer.lower, 100, 1.0) > delta > laplace_delta_mpmath(answer.upper, 100, 1.0)
    # and at the estimate (Halley's last step, taken without evaluating there) delta is the one asked, to the few
    # ulps of eps it moves by
    assert laplace_delta_mpmath(answer.value, 100, 1.0) == pytest.approx(delta, rel=1e-11)
    contour = accountant.epsilon_result(delta, method="contour")
    assert contour.value == pytest.approx(answer.value, rel=1e-12)


def test_outside_the_top_range_auto_moves_on_and_exact_refuses():
    accountant = afa.Accountant().compose(afa.Laplace(1.0), times=100)
    answer = accountant.epsilon_result(1e-10)  # delta(98) = 1.7e-24: not tried at all
    assert [(attempt.method, attempt.outcome) for attempt in answer.attempts] == [("contour", "answered")]
    with pytest.raises(AccuracyError, match="lies below eps = 98"):
        accountant.epsilon_result(1e-10, method="exact")
    with pytest.raises(AccuracyError, match="lies below eps = 98"):
        accountant.delta_result(97.0, method="exact")
    assert accountant.delta_result(97.0).method == "contour"
    assert accountant.delta_result(99.0).method == "contour"  # 'auto' uses the series for eps(delta) only
    assert accountant.delta_result(99.0, method="exact").value == pytest.approx(
        laplace_delta_mpmath(99.0, 100, 1.0), rel=1e-12)


def test_at_and_beyond_the_top_delta_is_zero_and_below_the_double_range_a_subnormal():
    engine = LaplaceTopEngine(1.0, 100)
    values, errors = engine.delta(np.array([100.0, 150.0]))
    assert np.all(values == 0.0) and np.all(errors == 0.0)
    # 2^-10000 is below the smallest double: the value underflows, the bound does not fall to 0
    values, errors = LaplaceTopEngine(0.1, 10000).delta(np.array([999.95]))
    assert values[0] == 0.0 and errors[0] == 5e-324


def test_laplace_uses_of_one_ratio_compose_and_others_do_not():
    # Laplace(2) with sensitivity 2 has the same loss as Laplace(1): 60 + 40 uses are Laplace(1) x 100
    accountant = afa.Accountant().compose(afa.Laplace(1.0), times=60).compose(afa.Laplace(2.0, sensitivity=2.0),
                                                                               times=40)
    assert accountant.planner.laplace_top() == (1.0, 100)
    mixed = afa.Accountant().compose(afa.Laplace(1.0), times=10).compose(afa.Laplace(2.0), times=10)
    assert mixed.planner.laplace_top() is None
    with_gaussian = afa.Accountant().compose(afa.Laplace(1.0), times=10).compose(afa.Gaussian(3.0))
    assert with_gaussian.planner.laplace_top() is None


@pytest.mark.parametrize("scale, k, delta", [(0.6940473194594705, 8, 2.7806267333503244e-22),
                                             (4.065052193376514, 1, 3.169036039764737e-30)])
def test_a_crossing_within_rounding_of_the_top_has_a_finite_bracket(scale, k, delta):
    # fuzz seeds 1183 and 1285: eps = k a - 2 w with w below half an ulp of the top rounds onto it, where delta
    # is 0; the bracket ends there (the upper bound had been +inf)
    answer = afa.Accountant().compose(afa.Laplace(scale), times=k).epsilon_result(delta)
    top = k / scale
    assert answer.method == "exact" and answer.lower <= answer.value <= answer.upper <= top
    assert answer.upper - answer.lower <= 1e-12 * answer.value


def test_a_series_too_long_is_not_served():
    # the terms peak near max(w, sqrt(k w)): a = 1e8 would need about 1e8 of them; the contour answers instead
    assert not LaplaceTopEngine.serves(1e8, 1) and LaplaceTopEngine.serves(1.0, 10 ** 6)
    with pytest.raises(UnsupportedCompositionError, match="terms"):
        LaplaceTopEngine(1e4, 3)
    assert afa.Accountant().compose(afa.Laplace(1e-8), times=2).planner.laplace_top() is None


def test_the_magnitude_bound_of_a_laplace_loss_holds():
    # |mean| <= a and variance <= min(a^2, 6), against the loss's own cumulants (60-digit SymPy derivatives)
    for a in (0.01, 1.0, 2.0, 30.0):
        loss = afa.Laplace(1.0 / a).privacy_losses()[0]
        mean, variance = loss.cumulants
        assert abs(mean) <= loss.magnitude and variance <= loss.magnitude <= max(a, 6.0)


def test_rejects_parameters_out_of_range():
    for a, count in [(0.0, 3), (math.inf, 3), (1.0, 0), (1.0, 2.5)]:
        with pytest.raises(UnsupportedCompositionError, match="a > 0 and a count >= 1"):
            LaplaceTopEngine(a, count)
