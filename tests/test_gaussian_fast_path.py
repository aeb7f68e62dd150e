"""The closed-form answers of compositions of Gaussians alone (the accountant's fast path).

Truth: the composed Gaussian's privacy profile (Sommer, Meiser & Mohammadi 2019, Thm 5),
delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu) with mu = sqrt(sum_i k_i (Delta_i / sigma_i)^2),
evaluated here in 60-digit mpmath and inverted by mpmath's root finder -- no afa code.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

import afa
from afa.engines import base
from afa.numerics import exact

DPS = 60
#: A heterogeneous composition of Gaussians: (sigma, sensitivity, count).
MIX = ((10.0, 1.0, 100), (3.0, 2.0, 7), (0.7, 0.1, 3))


def mp_mu(parts) -> mp.mpf:
    with mp.workdps(DPS):
        return mp.sqrt(mp.fsum(k * (mp.mpf(d) / mp.mpf(s)) ** 2 for s, d, k in parts))


def mp_delta(eps, mu) -> mp.mpf:
    """delta(eps) of the composed Gaussian, 60 digits."""
    with mp.workdps(DPS):
        e, m = mp.mpf(eps), mp.mpf(mu)
        return +(mp.ncdf(m / 2 - e / m) - mp.exp(e) * mp.ncdf(-m / 2 - e / m))


def mp_epsilon(delta: float, mu) -> mp.mpf:
    """The eps >= 0 with delta(eps) = delta (0 if delta(0) <= delta): a root of log delta(eps) - log delta."""
    with mp.workdps(DPS):
        target = mp.log(mp.mpf(delta))
        if mp.log(mp_delta(0, mu)) <= target:
            return mp.mpf(0)
        mu_ = mp.mpf(mu)
        guess = mu_ * (mu_ / 2 + mp.sqrt(-2 * target))
        low, high = mp.mpf(0), guess
        while mp.log(mp_delta(high, mu)) > target:
            high *= 2
        return mp.findroot(lambda e: mp.log(mp_delta(e, mu)) - target, (low, high), solver="anderson")


def accountant(parts=MIX, **kwargs) -> afa.Accountant:
    acc = afa.Accountant(**kwargs)
    for sigma, sensitivity, count in parts:
        acc.compose(afa.Gaussian(sigma, sensitivity), count)
    return acc


@pytest.mark.parametrize("delta", [1e-3, 1e-10, 1e-100, 1e-300])
def test_epsilon_against_mpmath(delta):
    result = accountant().epsilon_result(delta)
    truth = float(mp_epsilon(delta, mp_mu(MIX)))
    assert result.method == "exact" and not result.certified and result.tight
    assert result.lower <= truth <= result.upper
    assert result.value == pytest.approx(truth, rel=1e-12)
    assert result.upper - result.lower <= 1e-11 * truth
    assert result.error == pytest.approx((result.upper - result.lower) / 2)
    assert [(a.method, a.outcome) for a in result.attempts] == [("exact", "answered")]


@pytest.mark.parametrize("parts", [((1.0, 1.0, 1),), ((50.0, 1.0, 1),), ((0.05, 1.0, 1),), ((5.0, 1.0, 10_000),)])
@pytest.mark.parametrize("delta", [0.5, 1e-5, 1e-100])
def test_epsilon_across_mu(parts, delta):
    result = accountant(parts).epsilon_result(delta)
    truth = float(mp_epsilon(delta, mp_mu(parts)))
    assert result.lower <= truth <= result.upper
    assert result.value == pytest.approx(truth, rel=1e-12, abs=1e-300)


def test_epsilon_zero_when_delta_at_zero_is_small_enough():
    parts = ((100.0, 1.0, 1),)  # delta(0) = 2 Phi(mu/2) - 1 ~ 0.004
    result = accountant(parts).epsilon_result(0.5)
    assert float(mp_delta(0, mp_mu(parts))) < 0.5
    assert result.value == 0.0 and result.lower == 0.0


@pytest.mark.parametrize("epsilon", [-2.0, 0.0, 0.5, 3.0, 40.0])
def test_delta_against_mpmath(epsilon):
    result = accountant().delta_result(epsilon)
    truth = float(mp_delta(epsilon, mp_mu(MIX)))
    assert result.method == "exact"
    assert result.lower <= truth <= result.upper
    assert result.value == pytest.approx(truth, rel=1e-13)


def test_vectorised_inputs():
    acc = accountant()
    mu = mp_mu(MIX)
    epsilons = np.array([[0.0, 1.0, 2.0], [5.0, 20.0, 60.0]])
    result = acc.delta_result(epsilons)
    assert result.value.shape == result.lower.shape == result.upper.shape == epsilons.shape
    truth = np.array([[float(mp_delta(e, mu)) for e in row] for row in epsilons])
    np.testing.assert_allclose(result.value, truth, rtol=1e-13)
    assert np.all((result.lower <= truth) & (truth <= result.upper))
    np.testing.assert_array_equal(acc.delta(epsilons), result.upper)
    np.testing.assert_allclose(acc.privacy_profile(epsilons.ravel(), estimate=True), truth.ravel(), rtol=1e-13)
    many = np.linspace(0.0, 30.0, 101)  # past the one-by-one evaluation: the array closed form
    many_result = acc.delta_result(many)
    many_truth = np.array([float(mp_delta(e, mu)) for e in many])
    np.testing.assert_allclose(many_result.value, many_truth, rtol=1e-13)
    assert np.all((many_result.lower <= many_truth) & (many_truth <= many_result.upper))
    levels = np.array([1e-3, 1e-10, 1e-300])
    eps = acc.epsilon(levels)
    np.testing.assert_allclose(eps, [float(mp_epsilon(d, mu)) for d in levels], rtol=1e-12)


def test_the_same_answers_as_the_exact_engine():
    """The fast path answers as method='exact' built through the engines (ExactEngine on the pure Gaussian)."""
    acc = accountant()
    from afa.engines.base import ExactEngine
    from afa.engines.composition import ComposedLoss

    mu = math.sqrt(sum(k * (d / s) ** 2 for s, d, k in MIX))
    engine = ExactEngine(mu, ComposedLoss({}))
    for delta in (1e-3, 1e-10, 1e-300):
        value, lower, upper = engine.epsilon_bracket(delta)
        result = acc.epsilon_result(delta, method="exact")
        assert (result.value, result.lower, result.upper) == (value, lower, upper)


def test_other_methods_still_answer_themselves():
    acc = accountant()
    pld = acc.epsilon_result(1e-5, method="pld")
    assert pld.method == "pld" and pld.certified
    truth = float(mp_epsilon(1e-5, mp_mu(MIX)))
    assert pld.lower <= truth <= pld.upper
    assert acc.delta_result(1.0, method="contour").method == "contour"


@pytest.mark.parametrize("call", [
    lambda acc: acc.epsilon(0.0), lambda acc: acc.epsilon(1.0), lambda acc: acc.epsilon(float("nan")),
    lambda acc: acc.epsilon([1e-5, 2.0]), lambda acc: acc.delta(float("inf")), lambda acc: acc.delta([0.0, np.nan]),
    lambda acc: acc.epsilon(1e-5, method="nope"), lambda acc: acc.delta(1.0, method="nope"),
    lambda acc: acc.delta_result(1.0, direction="sideways"),
])
def test_bad_input_still_rejected(call):
    with pytest.raises(ValueError):
        call(accountant())


def test_bad_types_still_rejected():
    with pytest.raises(TypeError):
        accountant().epsilon("1e-5")
    with pytest.raises(TypeError):
        accountant().delta("1")


def test_empty_accountant_still_rejected():
    with pytest.raises(ValueError, match="empty"):
        afa.Accountant().epsilon(1e-5)


def test_not_only_gaussians_takes_the_generic_path():
    acc = accountant().compose(afa.Laplace(2.0))
    result = acc.epsilon_result(1e-5)
    assert result.method == "contour"  # a Laplace term: no closed form for the whole
    assert result.value > accountant().epsilon_result(1e-5).value  # composing more never lowers eps


def test_gaussian_epsilon_newton_matches_mpmath_far_out():
    """exact.gaussian_epsilon (Newton on the closed form) against mpmath over a wide range of mu and delta."""
    for mu in (1e-6, 0.02, 1.0, 30.0, 1e4):
        for delta in (0.3, 1e-5, 1e-50, 1e-300):
            truth = float(mp_epsilon(delta, mu))
            assert exact.gaussian_epsilon(delta, mu) == pytest.approx(truth, rel=2e-13, abs=1e-300), (mu, delta)


def test_scalar_log_delta_matches_mpmath():
    """exact.gaussian_log_delta on single numbers (the Python-float evaluation), including where the
    closed form's difference cancels (tiny mu, eps near the mean) and far tails."""
    for mu in (1e-7, 0.02, 1.0, 12.0, 1e3):
        for eps in (-3.0, 0.0, mu * mu / 2, mu, 5.0, 40.0 * mu + mu * mu / 2):
            truth = mp_delta(eps, mu)
            with mp.workdps(DPS):
                log_truth = float(mp.log(truth))
            value = exact.gaussian_log_delta(float(eps), mu)
            assert value == pytest.approx(log_truth, rel=1e-14, abs=1e-13), (mu, eps)


@pytest.mark.parametrize("mu", [1e-9, 1e-3, 0.02, 0.3, 1.0, 1.25])
def test_far_lower_tail_by_the_mills_series_matches_mpmath(mu):
    """Where the closed form's lower-tail difference R(x) - R(x + mu) cancels and x = eps/mu - mu/2 >= 10, the
    scalar evaluation sums the Mills ratio's asymptotic series (delta from 1e-23 down to 1e-300 here): log
    delta to 60-digit mpmath's at x just below and past the switch, in between and at delta ~ 1e-300."""
    for x in (9.999, 10.0, 10.001, 13.7, 25.0, 37.0):
        eps = (x + mu / 2) * mu
        with mp.workdps(DPS):
            log_truth = float(mp.log(mp_delta(eps, mu)))
        assert exact.gaussian_log_delta(float(eps), mu) == pytest.approx(log_truth, rel=1e-14, abs=1e-13), x


def test_gaussian_epsilon_search_ends_where_it_converges(monkeypatch):
    """The search (Halley's steps) ends once its step is below resolution, also when the step lands on the bracket's end
    it came from (mu = sqrt(10), delta = 1e-5 bisected 48 more times before), with the root to mpmath's."""
    calls = []
    scalar = exact._gaussian_log_delta_and_slope
    monkeypatch.setattr(exact, "_gaussian_log_delta_and_slope", lambda eps, mu: calls.append(eps) or scalar(eps, mu))
    for mu in (0.01, 0.5, 1.0, math.sqrt(10.0), 10.0, 30.0):
        for delta in (1e-3, 1e-5, 1e-10, 1e-30, 1e-100):
            calls.clear()
            value = exact.gaussian_epsilon(delta, mu)
            assert len(calls) <= 12, (mu, delta, len(calls))
            assert value == pytest.approx(float(mp_epsilon(delta, mu)), rel=1e-14), (mu, delta)


class _ShiftedGaussian(afa.Mechanism):
    """A mechanism defined outside afa declaring the pair (N(2, 4), N(0, 4)): mu = 1."""

    def dominating_pair(self, neighboring):
        from afa.mechanisms.noise_pair import NoiseMixturePair
        return NoiseMixturePair("gaussian", 2.0, (2.0,), (0.0,), (0.0,), (0.0,))


@pytest.mark.parametrize("mechanism, mu", [
    (afa.Gaussian(4.0, sensitivity=2.0), 0.5), (afa.MixtureOfGaussians((3.0,), (1.0,), 2.0), 1.5),
    (_ShiftedGaussian(), 1.0), (afa.Gaussian(1.0).poisson_subsampled(0.5), None), (afa.Laplace(1.0), None),
    (afa.MixtureOfGaussians((0.0, 1.0), (0.5, 0.5), 1.0), None)])
def test_a_use_is_a_gaussian_exactly_when_its_losses_are_the_gaussian_mechanisms(mechanism, mu):
    """PrivacyLoss.gaussian_mu (what the accountant's closed form sums) is |shift| / scale of a pure Gaussian
    pair, whoever declares it, and None otherwise; such compositions answer by the closed form, to mpmath's."""
    for loss in mechanism.privacy_losses():
        assert loss.gaussian_mu == mu
    for relation in mechanism.relations:
        assert mechanism.gaussian_mu(relation) == mu  # the capability the accountant composes by
    if mu is not None:
        result = afa.Accountant().compose(mechanism, 9).compose(afa.Gaussian(2.0), 7).epsilon_result(1e-6)
        truth = mp_epsilon(1e-6, mp.sqrt(9 * mp.mpf(mu) ** 2 + 7 * mp.mpf(0.5) ** 2))
        assert result.method == "exact" and float(truth) == pytest.approx(result.value, rel=1e-12)


def test_gaussians_compose_by_mu_and_form_their_losses_only_for_other_engines(monkeypatch):
    """Composing Gaussians forms none of their losses (the closed form needs mu alone); the first query that
    needs engines forms them, and a Gaussian composed with a Laplace then answers as before: the quadrature of
    the composition within its stated error of the Laplace-and-Gaussian reference by a second engine (the
    contour)."""
    from afa.mechanisms import closed_forms
    formed = []
    original = closed_forms.gaussian_losses
    monkeypatch.setattr(closed_forms, "gaussian_losses", lambda mu: formed.append(mu) or original(mu))
    afa.mechanisms.catalog.Mechanism._cached_losses.cache_clear()
    accountant = afa.Accountant()
    for sigma in (3.0, 4.0, 5.0):
        accountant.compose(afa.Gaussian(sigma), 2)
    result = accountant.epsilon_result(1e-6)
    assert formed == [] and result.method == "exact"
    truth = mp_epsilon(1e-6, mp.sqrt(2 * (mp.mpf(1) / 9 + mp.mpf(1) / 16 + mp.mpf(1) / 25)))
    assert float(truth) == pytest.approx(result.value, rel=1e-12)
    accountant.compose(afa.Laplace(2.0), 3)
    quadrature = accountant.delta_result(1.0, method="quadrature")
    contour = accountant.delta_result(1.0, method="contour")
    assert sorted(formed) == [1 / 5, 1 / 4, 1 / 3]
    assert abs(quadrature.value - contour.value) <= quadrature.error + contour.error
    with pytest.raises(ValueError, match="neighboring"):
        afa.Gaussian(1.0).gaussian_mu("everything")


def mp_log_delta_and_slope(eps, mu) -> tuple[mp.mpf, mp.mpf]:
    """(log delta(eps), d log delta / d eps) of the composed Gaussian, 60 digits: the derivative of Theorem 5's
    formula is -e^eps Phi(-mu/2 - eps/mu) (its phi terms cancel)."""
    with mp.workdps(DPS):
        e, m = mp.mpf(eps), mp.mpf(mu)
        delta = mp_delta(e, m)
        return mp.log(delta), -mp.exp(e) * mp.ncdf(-m / 2 - e / m) / delta


@pytest.mark.parametrize("mu", [0.01, 0.3, 1.0, 5.0, 50.0, 500.0])
def test_log_delta_lies_below_its_tangents(mu):
    """delta(eps) is log-concave (Prekopa 1973, Thm 6, applied to (1 - e^(eps - L))_+ times the loss density):
    in 60-digit mpmath, log delta at points on both sides of x, near and far, is below the tangent at x.  The
    tangent bracket's upper bound rests on this."""
    for delta in (0.3, 1e-3, 1e-10, 1e-100, 1e-300):
        x = mp_epsilon(delta, mu)
        if x == 0:
            continue
        with mp.workdps(DPS):
            log_x, slope = mp_log_delta_and_slope(x, mu)
            for offset in (-0.5, -1e-3, -1e-9, 1e-9, 1e-3, 0.5, 3.0):
                y = max(x * (1 + mp.mpf(offset)), mp.mpf(0))
                log_y, _ = mp_log_delta_and_slope(y, mu)
                assert log_y <= log_x + slope * (y - x), (mu, delta, offset)


def test_bracket_holds_the_root_with_no_evaluation_past_the_search(monkeypatch):
    """The tangent bracket: bounds holding mpmath's root within 1e-11 relative, the verified search of the
    general path not called (except where eps = 0), and no closed-form evaluation after the search."""
    verified = base.verified_epsilon_bounds
    general = []
    monkeypatch.setattr(base, "verified_epsilon_bounds", lambda *args, **kwargs: general.append(args[2])
                        or verified(*args, **kwargs))
    calls = []
    scalar = exact._gaussian_log_delta_and_slope
    monkeypatch.setattr(exact, "_gaussian_log_delta_and_slope",
                        lambda eps, mu: calls.append(eps) or scalar(eps, mu))
    for mu in (1e-6, 0.02, 0.2, 1.0, 20.0, 200.0, 1e4, 2e5):
        for delta in (0.3, 1e-3, 1e-10, 1e-100, 1e-300, 1e-305):
            calls.clear()
            general.clear()
            truth = float(mp_epsilon(delta, mu))
            value, lower, upper = base.gaussian_epsilon_bracket(delta, mu)
            if truth == 0.0:  # delta(0) <= delta: the verified search steps up from 0
                assert value == lower == 0.0 and upper >= 0.0 and general == [0.0]
                continue
            assert not general, (mu, delta)
            search_calls = len(calls)
            calls.clear()
            exact.gaussian_epsilon_search(delta, mu, resolved=base.TANGENT_RESOLVED)
            assert search_calls == len(calls), (mu, delta)
            assert lower <= truth <= upper, (mu, delta, lower, truth, upper)
            assert lower <= value <= upper and value == pytest.approx(truth, rel=1e-13), (mu, delta)
            assert upper - lower <= 1e-11 * truth, (mu, delta, (upper - lower) / truth)


@pytest.mark.parametrize("mu, delta", [(1.0, 1e-306), (1.0, 5e-324), (3e6, 1e-5), (1e8, 1e-30)])
def test_bracket_outside_the_tangent_range_from_the_verified_search(mu, delta):
    """A delta in the subnormal range or a slope rounded by more than the slack allows (mu beyond ~3e5): the
    verified search's bracket, still holding mpmath's root."""
    truth = float(mp_epsilon(delta, mu))
    value, lower, upper = base.gaussian_epsilon_bracket(delta, mu)
    assert lower <= truth <= upper
    assert value == pytest.approx(truth, rel=1e-12)


def test_bracket_holds_the_root_across_random_mu_and_delta():
    """100 (mu, delta) log-uniform in [1e-4, 1e5] x [1e-300, 0.5] (seeded): every bracket holds mpmath's root and
    is at most 1e-11 wide relative to it."""
    rng = np.random.default_rng(20261128)
    for mu, delta in zip(10 ** rng.uniform(-4, 5, 100), 10 ** rng.uniform(-300, math.log10(0.5), 100)):
        truth = float(mp_epsilon(float(delta), float(mu)))
        value, lower, upper = base.gaussian_epsilon_bracket(float(delta), float(mu))
        assert lower <= truth <= upper, (mu, delta)
        assert upper - lower <= 1e-11 * max(truth, 1e-300) or truth == 0.0, (mu, delta)
