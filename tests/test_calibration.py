"""Noise calibration: safe (upper epsilon <= target) and tight (rtol less noise misses the target).

Truths: the composed-Gaussian formula written out here with scipy.stats (Sommer, Meiser & Mohammadi 2019, Thm 5) for the
closed-form case, and the analytic engines (contour, else the real line: characteristic functions,
independent of the PLD that certifies the subsampled case) for DP-SGD.
"""

from __future__ import annotations

import math

import pytest
from scipy.optimize import brentq
from scipy.stats import norm

import afa


def gaussian_delta(epsilon: float, mu: float) -> float:
    return norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2)


def gaussian_epsilon(delta: float, mu: float) -> float:
    return brentq(lambda e: gaussian_delta(e, mu) - delta, 0.0, 200.0, xtol=1e-14)


@pytest.mark.parametrize("target", [0.5, 1.0, 3.0, 8.0])
@pytest.mark.parametrize("steps", [100, 10_000])
def test_gaussian_calibration_is_safe_and_tight(target, steps):
    result = afa.calibrate_sigma(target, 1e-5, steps)
    assert result.method == "exact" and result.certified
    mu = math.sqrt(steps) / result.value
    assert gaussian_epsilon(1e-5, mu) <= target
    assert gaussian_epsilon(1e-5, math.sqrt(steps) / result.rejected) > target
    assert result.rejected >= result.value * (1 - 1.01 * result.rtol)
    assert result.epsilon_upper <= target


@pytest.mark.parametrize("target", [0.5, 1.0, 3.0, 8.0])
def test_closed_form_sigma_matches_the_formula(target):
    sigma = afa.gaussian_sigma(target, 1e-5, steps=100, sensitivity=2.0)
    assert gaussian_delta(target, 2.0 * 10 / sigma) == pytest.approx(1e-5, rel=1e-9)


def _analytic_epsilon(sigma: float, q: float, steps: int, delta: float) -> float:
    """eps from the characteristic-function engines (independent of the PLD): the contour, or the real line
    where the contour refuses (small sigma with few steps)."""
    acc = afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), steps)
    try:
        return acc.epsilon(delta, method="contour")
    except afa.AccuracyError:
        return acc.epsilon(delta, method="quadrature")


@pytest.mark.parametrize("target, steps", [
    (0.5, 10_000), (1.0, 10_000),
    pytest.param(3.0, 10_000, marks=pytest.mark.slow), pytest.param(8.0, 10_000, marks=pytest.mark.slow),
    pytest.param(0.5, 100, marks=pytest.mark.slow), pytest.param(1.0, 100, marks=pytest.mark.slow),
    pytest.param(3.0, 100, marks=pytest.mark.slow), pytest.param(8.0, 100, marks=pytest.mark.slow)])
def test_dp_sgd_calibration_is_certified_safe_and_tight(target, steps):
    """The certifying method is the PLD (pessimistic for the answer, optimistic for the rejected sigma);
    the analytic engines confirm both sides."""
    result = afa.calibrate_sigma(target, 1e-5, steps, sampling_rate=0.01)
    assert result.method == "pld" and result.certified
    assert result.epsilon_upper <= target
    assert _analytic_epsilon(result.value, 0.01, steps, 1e-5) <= target
    assert _analytic_epsilon(result.rejected, 0.01, steps, 1e-5) > target
    assert result.rejected >= result.value * (1 - 1.01 * result.rtol)


def test_calibration_validation():
    with pytest.raises(ValueError, match="delta"):
        afa.calibrate_sigma(1.0, 1.5, 10)
    with pytest.raises(ValueError, match="steps"):
        afa.calibrate_sigma(1.0, 1e-5, 0)
    with pytest.raises(ValueError, match="sampling_rate"):
        afa.calibrate_sigma(1.0, 1e-5, 10, sampling_rate=0.0)
    with pytest.raises(ValueError, match="rtol"):
        afa.calibrate_sigma(1.0, 1e-5, 10, rtol=0.0)
    with pytest.raises(TypeError, match="target_epsilon"):
        afa.calibrate_sigma("1", 1e-5, 10)
    with pytest.raises(ValueError, match="target_epsilon"):
        afa.calibrate_sigma(float("nan"), 1e-5, 10)


@pytest.mark.parametrize("target", [0.5, 1.0, 3.0])
def test_gaussian_steps_calibration_is_the_largest_safe_count(target):
    sigma = 20.0
    result = afa.calibrate_steps(target, 1e-5, sigma)
    steps = int(result.value)
    assert result.value == steps and result.certified
    assert gaussian_epsilon(1e-5, math.sqrt(steps) / sigma) <= target
    assert gaussian_epsilon(1e-5, math.sqrt(result.rejected) / sigma) > target
    assert result.rejected <= steps * (1 + 1.01 * result.rtol) + 1


def test_dp_sgd_steps_and_sampling_rate_calibration():
    """Safe by the PLD's upper bound, tight by its lower bound; the analytic engines confirm both sides."""
    steps = afa.calibrate_steps(1.0, 1e-5, 3.8, sampling_rate=0.01)
    assert steps.method == "pld" and steps.certified and steps.epsilon_upper <= 1.0
    assert _analytic_epsilon(3.8, 0.01, int(steps.value), 1e-5) <= 1.0
    assert _analytic_epsilon(3.8, 0.01, int(steps.rejected), 1e-5) > 1.0
    rate = afa.calibrate_sampling_rate(1.0, 1e-5, 3.8, 10_000)
    assert rate.method == "pld" and rate.certified and rate.epsilon_upper <= 1.0
    assert _analytic_epsilon(3.8, rate.value, 10_000, 1e-5) <= 1.0
    assert _analytic_epsilon(3.8, rate.rejected, 10_000, 1e-5) > 1.0
    assert rate.rejected <= rate.value * (1 + 1.01 * rate.rtol)


def test_sampling_rate_one_when_the_full_batch_is_private_enough():
    result = afa.calibrate_sampling_rate(10.0, 1e-5, 5.0, 10)
    assert result.value == 1.0 and result.epsilon_upper <= 10.0
    assert gaussian_epsilon(1e-5, math.sqrt(10) / 5.0) <= 10.0


@pytest.mark.parametrize("target, q, steps", [(1.0, 0.01, 1000), (8.0, 0.004, 10_000), (0.5, 0.001, 100)])
def test_central_limit_start_meets_the_gdp_target(target, q, steps):
    """The subsampled search's start: the sigma whose central-limit mu = q sqrt(steps (e^{1/sigma^2} - 1))
    (Dong, Roth & Su 2022, Sec. 5) meets (target, 1e-5) as mu-GDP -- checked with the Gaussian trade-off's delta
    written out here with scipy."""
    from afa.calibration import _central_limit_sigma

    sigma = _central_limit_sigma(target, 1e-5, steps, q, 1.0)
    mu = q * math.sqrt(steps * math.expm1(1 / sigma ** 2))
    assert gaussian_delta(target, mu) == pytest.approx(1e-5, rel=1e-8)


def test_subsampled_search_stays_near_the_central_limit_start(monkeypatch):
    """With many steps the central limit is close: the search asks no sigma below the first bracket's low end
    (START_SPREAD below the start), where a far sigma can cost seconds a query (at 10 000 steps of q = 0.004,
    sigma = 0.12 exhausted every method's budget), and the answer is still certified safe and tight."""
    import afa.calibration as calibration

    asked = []
    gaussian = calibration.Gaussian
    monkeypatch.setattr(calibration, "Gaussian", lambda sigma, sensitivity: asked.append(sigma)
                        or gaussian(sigma, sensitivity))
    result = afa.calibrate_sigma(1.0, 1e-5, 1000, sampling_rate=0.01)
    start = calibration._central_limit_sigma(1.0, 1e-5, 1000, 0.01, 1.0)
    assert min(asked) >= start / calibration.START_SPREAD * (1 - 1e-12)
    assert result.method == "pld" and result.certified and result.epsilon_upper <= 1.0
    assert _analytic_epsilon(result.value, 0.01, 1000, 1e-5) <= 1.0 < _analytic_epsilon(result.rejected, 0.01, 1000,
                                                                                           1e-5)
