"""Compositions of data-dependent Gaussians as one noncentral chi-square integral (afa.engines.quadratic).

References, each computed without afa.engines.quadratic: the one-use closed form (afa.numerics.exact, Zhu, Dong & Wang 2022,
App. A Example 15), the 30-digit noncentral chi-square integral of test_data_dependent.composed_mpmath, and,
for uses with different sensitivities or mixed with Gaussian mechanisms, mpmath quadrature over the first
use's standard normal of the remaining uses' closed form (conditioning on one use).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from test_data_dependent import DIRECTIONS, composed_mpmath

import afa
from afa.engines.quadratic import QuadraticComposition, log_noncentral_chi2_pdf
from afa.numerics import exact


def one_use(s1, s2, m, direction) -> exact.QuadraticLoss:
    own, other = (s1, s2) if direction == "remove" else (s2, s1)
    return exact.QuadraticLoss.of(own, other, m)


def conditioned_mpmath(eps: float, first: exact.QuadraticLoss, rest, kink: float | None = None) -> mp.mpf:
    """delta(eps) of first + rest by conditioning on the first use: int phi(z) delta_rest(eps - L_1(z)) dz in
    mpmath (20 digits), on panels 0.2 wide around the first loss's vertex (where its mass lies), split also where
    eps - L_1(z) reaches ``kink`` (the rest's extreme loss, where its closed form's second derivative is
    singular).  ``rest`` maps x to delta_rest(x)."""
    with mp.workdps(20):
        def integrand(z):
            loss = mp.mpf(first.extreme) + first.extreme_lo + mp.mpf(first.gamma) * (z - first.vertex) ** 2
            return mp.npdf(z) * rest(eps - loss)

        points = [first.vertex + 0.2 * k for k in range(-30, 31)]
        if kink is not None and (eps - kink - first.extreme) / first.gamma > 0:
            half = math.sqrt((eps - kink - first.extreme) / first.gamma)
            points += [first.vertex - half, first.vertex + half]
        return mp.quad(integrand, [-mp.inf] + sorted(points) + [mp.inf])


def gaussian_mpmath(mu):
    """delta(x) of the Gaussian loss N(mu^2/2, mu^2) in mpmath."""
    return lambda x: mp.ncdf(-x / mu + mp.mpf(mu) / 2) - mp.exp(x) * mp.ncdf(-x / mu - mp.mpf(mu) / 2)


@pytest.mark.parametrize("s1, s2, m", [(1.0, 1.5, 1.0), (1.5, 1.0, 1.0), (1.0, 2.0, 0.0), (2.0, 1.0, 3.0),
                                       (1.0, 1.01, 0.5)])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_one_use_matches_the_closed_form(s1, s2, m, direction):
    """One use: within 1e-12 relative of afa.numerics.exact's closed form, and within the stated error, from below the
    loss's range to its far tail (and next to a bounded loss's top)."""
    loss = one_use(s1, s2, m, direction)
    composition = QuadraticComposition.of([(loss, 1)])
    top = loss.extreme - 1e-3 if loss.gamma < 0 else 60.0
    eps = np.array([-0.5, 0.0, 0.2, 1.0, 3.0, 10.0, 30.0, top])
    values, errors = composition.delta(eps)
    reference = exact.data_dependent_gaussian_delta(eps, s1, s2, sensitivity=m, direction=direction)
    positive = reference > 0
    assert np.all(values[~positive] == 0)
    assert np.all(np.abs(values - reference)[positive] <= 1e-12 * reference[positive])
    assert np.all(np.abs(values - reference)[positive] <= errors[positive] + 4e-13 * reference[positive])
    assert np.all(errors[positive] <= 1e-10 * values[positive])


@pytest.mark.parametrize("s1, s2, m, k", [(1.5, 1.0, 1.0, 2), (1.0, 1.5, 1.0, 3), (2 ** 0.5, 1.0, 0.0, 4),
                                          (1.0, 1.3, 0.0, 4)])
def test_several_uses_match_the_chi_square_reference(s1, s2, m, k):
    """k uses of one mechanism: against the 30-digit noncentral chi-square integral, within 1e-11 relative and
    within the stated error, down to delta ~ 1e-30."""
    mechanism = afa.DataDependentGaussian(s1, s2, m)
    for direction in DIRECTIONS:
        composition = QuadraticComposition.of([(one_use(s1, s2, m, direction), k)])
        checked = 0
        for eps in (0.0, 0.5, 2.0, 5.0, 10.0, 20.0, 35.0):
            truth = composed_mpmath(eps, k, *mechanism.coefficients(direction))
            value, error = (float(x[0]) for x in composition.delta(np.array([eps])))
            if truth == 0:
                assert value == 0
                continue
            if truth < 1e-30:
                break
            assert abs(value - truth) <= 1e-11 * truth, (direction, eps, value, truth)
            assert abs(value - truth) <= error + 1e-15 * truth, (direction, eps, value, truth, error)
            checked += 1
        assert checked >= 2


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("eps", [0.0, 12.0, 25.0])
def test_uses_with_different_sensitivities_and_gaussians(direction, eps):
    """Uses sharing sigma1/sigma2 with different sensitivities, and a Gaussian mechanism beside them: against
    conditioning on one use in mpmath (the rest being one use's closed form, or the Gaussian's)."""
    first, second = one_use(1.0, 1.5, 1.0, direction), one_use(2.0, 3.0, 0.5, direction)
    assert first.gamma == second.gamma
    pair = QuadraticComposition.of([(first, 1), (second, 1)])
    own, other = (2.0, 3.0) if direction == "remove" else (3.0, 2.0)
    truth = conditioned_mpmath(eps, first, lambda x: mp.exp(exact.ddg_log_delta(np.array([float(x)]), own, other,
                                                                                 0.5)[0]), second.extreme)
    value, error = (float(x[0]) for x in pair.delta(np.array([eps])))
    if truth == 0:
        assert value == 0
    else:
        assert abs(value - truth) <= 1e-11 * truth and abs(value - truth) <= error + 1e-13 * truth
    mu = 0.7
    mixed = QuadraticComposition.of([(first, 1)], mu)
    truth = conditioned_mpmath(eps, first, gaussian_mpmath(mu))
    value, error = (float(x[0]) for x in mixed.delta(np.array([eps])))
    assert abs(value - truth) <= 1e-11 * truth and abs(value - truth) <= error + 1e-13 * truth


def test_noncentral_density_matches_mpmath():
    """log f of the noncentral chi-square density against mpmath's Bessel form, from w = 1e-20 to the far tail,
    central and noncentral, one to four degrees of freedom."""
    w = np.array([1e-20, 1e-6, 0.3, 1.0, 7.0, 50.0, 400.0, 3000.0])
    for dof in (1, 2, 3, 4):
        for lam in (0.0, 0.25, 9.0, 400.0):
            values, errors = log_noncentral_chi2_pdf(w, dof, lam)
            with mp.workdps(40):
                for x, value, error in zip(w, values, errors):
                    x = mp.mpf(x)
                    nu = mp.mpf(dof) / 2
                    if lam == 0:
                        truth = (nu - 1) * mp.log(x) - x / 2 - nu * mp.log(2) - mp.loggamma(nu)
                    else:
                        truth = (-(x + lam) / 2 - mp.log(2) + (nu / 2 - mp.mpf(1) / 2) * mp.log(x / lam)
                                 + mp.log(mp.besseli(nu - 1, mp.sqrt(lam * x))))
                    assert abs(value - float(truth)) <= error, (dof, lam, x, value, truth)
                    assert abs(value - float(truth)) <= 1e-13 * max(1.0, abs(float(truth)))


@pytest.mark.parametrize("delta", [1e-5, 1e-20, 1e-100])
@pytest.mark.parametrize("k", [2, 4])
def test_accountant_answers_several_uses_exactly(delta, k):
    """'auto' answers k uses of a data-dependent Gaussian with the noncentral chi-square integral: the bracket of
    eps(delta) holds the eps where the 30-digit reference crosses delta, is narrower than 1e-10 relative, and
    epsilon() is its upper end (never below the truth)."""
    mechanism = afa.DataDependentGaussian(1.0, 1.5, 1.0)
    accountant = afa.Accountant().compose(mechanism, times=k)
    result = accountant.epsilon_result(delta)
    assert result.method == "exact"
    assert result.upper - result.lower <= 1e-10 * result.value

    def truth(eps):
        return max(composed_mpmath(eps, k, *mechanism.coefficients(direction)) for direction in DIRECTIONS)

    assert truth(result.lower) > delta >= truth(result.upper)
    assert accountant.epsilon(delta) >= result.upper


def test_accountant_under_substitution():
    """Under substitution delta is the larger of the two directions: 'auto' answers three uses with the integral,
    within 1e-11 relative of the larger 30-digit reference and within its stated error."""
    mechanism = afa.DataDependentGaussian(1.0, 1.5, 1.0)
    accountant = afa.Accountant(neighboring="substitution").compose(mechanism, times=3)
    for eps in (1.0, 8.0):
        result = accountant.delta_result(eps)
        truth = max(composed_mpmath(eps, 3, *mechanism.coefficients(direction)) for direction in DIRECTIONS)
        assert result.method == "exact"
        assert abs(result.value - truth) <= min(1e-11 * truth, result.error)


def test_accountant_with_a_gaussian_mechanism():
    """One data-dependent Gaussian beside Gaussian mechanisms (mu^2 = 4 / 2^2 + 1 / 1^2 = 2): 'auto' uses the
    integral; delta is the larger direction's, against conditioning on the quadratic use in mpmath."""
    accountant = afa.Accountant().compose(afa.DataDependentGaussian(1.0, 1.5, 1.0))
    accountant.compose(afa.Gaussian(sigma=2.0), times=4).compose(afa.Gaussian(sigma=1.0))
    eps = 6.0
    result = accountant.delta_result(eps)
    truth = max(conditioned_mpmath(eps, one_use(1.0, 1.5, 1.0, direction), gaussian_mpmath(math.sqrt(2.0)))
                for direction in DIRECTIONS)
    assert result.method == "exact"
    assert abs(result.value - truth) <= min(1e-11 * truth, result.error + 1e-13 * truth)


def test_different_curvatures_are_not_one_integral():
    """Mechanisms whose sigma1/sigma2 differ have different curvatures: method='exact' refuses with a clear
    error, and 'auto' answers with another engine."""
    accountant = afa.Accountant().compose(afa.DataDependentGaussian(1.0, 1.5, 1.0), times=2)
    accountant.compose(afa.DataDependentGaussian(1.0, 2.0, 1.0))
    with pytest.raises(afa.UnsupportedCompositionError, match="sharing sigma1/sigma2"):
        accountant.delta(1.0, method="exact")
    assert accountant.planner.first_choice() != "exact"


@pytest.mark.parametrize("arguments, message", [
    (dict(gamma=0.0, offset=(0.0, 0.0), dof=1, noncentrality=0.0), "gamma"),
    (dict(gamma=math.nan, offset=(0.0, 0.0), dof=1, noncentrality=0.0), "gamma"),
    (dict(gamma=1.0, offset=(0.0, 0.0), dof=0, noncentrality=0.0), "dof"),
    (dict(gamma=1.0, offset=(0.0, 0.0), dof=1.5, noncentrality=0.0), "dof"),
    (dict(gamma=1.0, offset=(0.0, 0.0), dof=1, noncentrality=-1.0), "noncentrality"),
    (dict(gamma=1.0, offset=(0.0, 0.0), dof=1, noncentrality=0.0, mu=-1.0), "mu"),
])
def test_bad_parameters_are_refused(arguments, message):
    with pytest.raises(ValueError, match=message):
        QuadraticComposition(**arguments)


def test_terms_must_share_their_curvature():
    with pytest.raises(ValueError, match="sharing one gamma"):
        QuadraticComposition.of([(one_use(1.0, 1.5, 1.0, "remove"), 1), (one_use(1.0, 2.0, 1.0, "remove"), 1)])
    with pytest.raises(ValueError, match="count"):
        QuadraticComposition.of([(one_use(1.0, 1.5, 1.0, "remove"), 0)])
