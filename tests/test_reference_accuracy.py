"""afa's quadrature engine against independent references (tests/_reference.py).

The references never use characteristic functions:

* Laplace: the recursion delta_k(eps) = E[delta_{k-1}(eps - L)] evaluated with
  piecewise Chebyshev interpolation on the lattice a Z (Zhu, Dong & Wang 2022, Lemma 37);
* mixture of Gaussians: the closed form of one use once the root of
  l(x) = eps is known, and a quadrature over the output for two uses
  (Google DP team 2025, Sec. 3.3).

The first half of this file checks the references themselves (closed forms,
scipy / mpmath quadrature, Monte Carlo, identities); the second half checks
afa against them: |afa - reference| <= 1e-9 and the reported ``error`` must
cover the actual disagreement (error >= |afa - reference| - 1e-12).
"""

from __future__ import annotations

import functools
import math
import os
import sys
import warnings

import numpy as np
import pytest
from scipy import integrate
from scipy.special import ndtr

sys.path.insert(0, os.path.dirname(__file__))

from _reference import (  # noqa: E402
    _MoG,
    laplace_delta_closed_form,
    laplace_delta_mpmath_k3,
    laplace_delta_quad_k2,
    laplace_delta_reference,
    laplace_profiles,
    mog_delta_quad_k1,
    mog_delta_quad_k2,
    mog_delta_reference,
)

import afa  # noqa: E402

ABS_TOL = 1e-9      # afa vs reference
SLACK = 1e-12       # allowed excess of the actual error over afa's estimate
REF_TOL = 1e-12     # reference vs independent cross-checks


# ===========================================================================
# Part 1: the references themselves
# ===========================================================================

def _laplace_loss_expectation(g, a: float, points=()) -> float:
    """E[g(L)] for one Laplace loss, straight from its distribution (quad on the density)."""
    atoms = 0.5 * g(a) + 0.5 * math.exp(-a) * g(-a)
    pts = sorted(p for p in points if -a < p < a)
    with warnings.catch_warnings():  # roundoff flags at this tolerance; the values are compared below
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        cont, _ = integrate.quad(lambda l: g(l) * math.exp((l - a) / 2) / 4, -a, a,
                                 points=pts or None, epsabs=1e-15, epsrel=1e-14, limit=200)
    return atoms + cont


@pytest.mark.parametrize("a", [0.3, 1.0, 2.5])
def test_laplace_loss_distribution_is_normalised_and_e_minus_l_has_mean_one(a):
    # Total mass 1 (P is a probability measure) and E_P[e^{-L}] = 1 (Q is one,
    # no mass at +inf): this is what makes delta_j(x) = 1 - e^x for x <= -j a.
    assert _laplace_loss_expectation(lambda l: 1.0, a) == pytest.approx(1.0, abs=1e-14)
    assert _laplace_loss_expectation(lambda l: math.exp(-l), a) == pytest.approx(1.0, abs=1e-14)


@pytest.mark.parametrize("a", [0.3, 1.0, 2.5])
def test_laplace_one_use_closed_form_matches_its_definition(a):
    # delta_1(eps) = E[(1 - e^{eps - L})_+]; for |eps| <= a:
    #   atom +a: (1 - e^{eps-a})/2, atom -a: 0,
    #   density: int_eps^a (1 - e^{eps-l}) e^{(l-a)/2}/4 dl
    #            = (1 - e^{(eps-a)/2})/2 - (e^{(eps-a)/2} - e^{eps-a})/2,
    #   total 1 - e^{(eps-a)/2}; 0 for eps >= a; 1 - e^eps for eps <= -a.
    eps_grid = np.concatenate([np.linspace(-2 * a - 1, 2 * a + 1, 41), [-a, 0.0, a]])
    for eps in eps_grid:
        direct = _laplace_loss_expectation(lambda l: max(-math.expm1(eps - l), 0.0), a, points=[eps])
        assert laplace_delta_closed_form(eps, a) == pytest.approx(direct, abs=1e-14), eps
    # the closed form is continuous at the kinks +-a
    for x in (-a, a):
        assert laplace_delta_closed_form(x - 1e-12, a) == pytest.approx(laplace_delta_closed_form(x + 1e-12, a),
                                                                        abs=1e-11)


@pytest.mark.parametrize("a", [0.3, 1.0, 2.5])
def test_laplace_recursion_one_use(a):
    eps = np.linspace(-3 * a, 3 * a, 61)
    np.testing.assert_allclose(laplace_delta_reference(eps, 1, a), laplace_delta_closed_form(eps, a),
                               rtol=0, atol=REF_TOL)


@pytest.mark.parametrize("a", [0.5, 1.0, 2.5])
def test_laplace_recursion_two_uses_against_scipy_quad(a):
    eps = np.concatenate([np.linspace(-3 * a, 3 * a, 25), [0.1, 0.77 * a, 1.3 * a]])
    ref = laplace_delta_reference(eps, 2, a)
    direct = np.array([laplace_delta_quad_k2(e, a) for e in eps])
    np.testing.assert_allclose(ref, direct, rtol=0, atol=REF_TOL)


@pytest.mark.parametrize("a", [0.5, 1.0])
def test_laplace_recursion_three_uses_against_mpmath(a):
    eps = [-1.5, 0.0, 1.0, 2.7] if a == 1.0 else [0.25, 0.5]
    ref = laplace_delta_reference(eps, 3, a)
    high = np.array([laplace_delta_mpmath_k3(e, a, dps=20) for e in eps])
    np.testing.assert_allclose(ref, high, rtol=0, atol=REF_TOL)


@pytest.mark.parametrize("a, k, eps", [(1.0, 3, 0.5), (1.0, 3, 2.0), (0.5, 10, 1.0)])
def test_laplace_recursion_against_monte_carlo_of_the_mechanism(a, k, eps):
    # Independent of the loss distribution: sample the actual outputs o ~ Lap(0, 1)^k
    # and use L = sum_i |o_i - a| - |o_i| (sensitivity a, scale 1).
    rng = np.random.default_rng(20240601 + k)
    o = rng.laplace(0.0, 1.0, size=(200_000, k))
    values = np.maximum(-np.expm1(eps - (np.abs(o - a) - np.abs(o)).sum(axis=1)), 0.0)
    sd = values.std() / math.sqrt(values.size)
    assert abs(values.mean() - laplace_delta_reference(eps, k, a)) < 5 * sd


@pytest.mark.parametrize("a, k, check_fine", [(1.0, 50, False), (0.5, 10, True),
                                               pytest.param(1.0, 50, True, marks=pytest.mark.slow),
                                               pytest.param(0.5, 50, True, marks=pytest.mark.slow)])
def test_laplace_recursion_is_converged_and_has_the_right_tails(a, k, check_fine):
    eps = np.concatenate([np.linspace(-k * a - 2, k * a + 2, 203), a * np.arange(-k, k + 1)])
    default = laplace_profiles(k, a)
    coarse = laplace_profiles(k, a, nodes=16, gl_order=20)
    fine = laplace_profiles(k, a, nodes=34, gl_order=40) if check_fine else None
    for j in sorted({1, 2, 10, k}):
        np.testing.assert_allclose(coarse[j](eps), default[j](eps), rtol=0, atol=1e-12)
        if fine is not None:
            np.testing.assert_allclose(default[j](eps), fine[j](eps), rtol=0, atol=1e-13)
        # closed forms outside [-j a, j a], continuity at the lattice points
        assert np.all(default[j](np.array([j * a, j * a + 0.3])) == 0.0)
        x = np.array([-j * a, -j * a - 0.7])
        np.testing.assert_allclose(default[j](x), -np.expm1(x), rtol=0, atol=1e-14)
        lattice = a * np.arange(-j, j + 1)
        np.testing.assert_allclose(default[j](lattice - 1e-13), default[j](lattice + 1e-13), rtol=0, atol=1e-12)
        # a privacy profile: 0 <= delta <= 1, non-increasing, >= 1 - e^eps
        values = default[j](np.sort(eps))
        assert np.all(values >= -1e-14) and np.all(values <= 1 + 1e-13)
        assert np.all(np.diff(values) <= 1e-14)
        assert np.all(values >= -np.expm1(np.minimum(np.sort(eps), 0.0)) - 1e-14)


MOG_CASES = [
    ([0, 1, 2], [0.2, 0.5, 0.3], 1.5),
    ([0, 1], [0.5, 0.5], 1.0),
    ([1, 3], [0.4, 0.6], 2.0),      # no zero component
    ([0, 0.3], [0.9, 0.1], 0.2),    # large zero mass, steep loss
]
MOG_IDS = ["3comp", "2comp", "nozero", "steep"]


@pytest.mark.parametrize("case", MOG_CASES, ids=MOG_IDS)
@pytest.mark.parametrize("direction", ["P", "Q"])
def test_mog_one_use_closed_form_against_direct_quadrature(case, direction):
    s, p, sigma = case
    eps = [-1.5, -0.2, 0.0, 0.2, 0.5, 1.0, 2.0, 3.0]
    closed = mog_delta_reference(eps, s, p, sigma, direction, 1)
    direct = np.array([mog_delta_quad_k1(e, s, p, sigma, direction) for e in eps])
    np.testing.assert_allclose(closed, direct, rtol=0, atol=REF_TOL)


@pytest.mark.parametrize("case, k", [pytest.param(case, 1, id=f"{name}-k=1") for case, name in zip(MOG_CASES, MOG_IDS)]
                         + [pytest.param(MOG_CASES[0], 2, id=f"{MOG_IDS[0]}-k=2")]
                         + [pytest.param(case, 2, id=f"{name}-k=2", marks=pytest.mark.slow)
                            for case, name in zip(MOG_CASES[1:], MOG_IDS[1:])])
def test_mog_reference_satisfies_the_swap_identity(case, k):
    # For any pair, delta_{P,Q}(eps) = 1 - e^eps + e^eps delta_{Q,P}(-eps);
    # it links the two directions, which the reference computes separately.
    s, p, sigma = case
    eps = np.array([-2.0, -0.5, 0.0, 0.3, 1.0, 2.0])
    forward = mog_delta_reference(eps, s, p, sigma, "P", k)
    backward = mog_delta_reference(-eps, s, p, sigma, "Q", k)
    np.testing.assert_allclose(forward, -np.expm1(eps) + np.exp(eps) * backward, rtol=0, atol=1e-12 * math.exp(2))


@pytest.mark.parametrize("c", [0.4, 1.0, 2.5])
@pytest.mark.parametrize("direction", ["P", "Q"])
def test_mog_two_uses_with_one_component_is_a_gaussian(c, direction):
    # One component of sensitivity c: two uses are the Gaussian mechanism with mu = c sqrt(2).
    mu = c * math.sqrt(2)
    eps = np.array([-1.0, 0.0, 0.2, 0.5, 1.0, 2.0, 4.0])
    exact = ndtr(-eps / mu + mu / 2) - np.exp(eps) * ndtr(-eps / mu - mu / 2)
    np.testing.assert_allclose(mog_delta_reference(eps, [c], [1.0], 1.0, direction, 2), exact, rtol=0, atol=REF_TOL)


@pytest.mark.parametrize("case", [pytest.param(MOG_CASES[3], id=MOG_IDS[3])]
                         + [pytest.param(c, id=name, marks=pytest.mark.slow) for c, name in zip(MOG_CASES[:3], MOG_IDS[:3])])
def test_mog_two_uses_against_adaptive_quadrature(case):
    s, p, sigma = case
    mog = _MoG(s, p, sigma)
    for direction in "PQ":
        # vectorised roots agree with brentq's
        levels = np.array([-0.05, 0.3, 2.0, 7.0])
        np.testing.assert_allclose(mog.roots(levels), [mog.root(v) for v in levels], rtol=0, atol=1e-12)
        for eps in (0.0, 0.5) if direction == "P" else (0.5,):
            assert mog_delta_reference(eps, s, p, sigma, direction, 2) == pytest.approx(
                mog_delta_quad_k2(eps, s, p, sigma, direction), abs=REF_TOL)


# ===========================================================================
# Part 2: afa against the references
# ===========================================================================

LAPLACE_EPSILONS = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 4.0]
MOG_EPSILONS = [0.0, 0.2, 0.5, 1.0, 2.0]


@functools.cache
def _afa_results(mechanism, k: int, epsilons: tuple) -> list:
    """afa's quadrature results; one accountant per case, so the grid is built once."""
    accountant = afa.Accountant().compose(mechanism, times=k)
    return [accountant.delta_result(eps, method="quadrature") for eps in epsilons]


def _compare(results, reference, epsilons):
    values = np.array([r.value for r in results])
    errors = np.array([r.error for r in results])
    diff = np.abs(values - reference)
    report = "\n".join(f"  eps={e:g}: afa={v!r} ref={r!r} |diff|={d:.3g} error={err:.3g}"
                       for e, v, r, d, err in zip(epsilons, values, reference, diff, errors))
    assert all(r.method == "quadrature" for r in results)
    assert np.all(np.isfinite(values)) and np.all(errors >= 0), report
    for r in results:  # the reported bounds bracket the value
        assert r.lower <= r.value <= r.upper
    return diff, errors, report


def _check_accurate(results, reference, epsilons, label):
    diff, _, report = _compare(results, reference, epsilons)
    assert np.all(diff <= ABS_TOL), f"{label}: disagreement above {ABS_TOL}\n{report}"


def _check_honest(results, reference, epsilons, label):
    diff, errors, report = _compare(results, reference, epsilons)
    assert np.all(errors >= diff - SLACK), f"{label}: error estimate does not cover the disagreement\n{report}"


LAPLACE_CASES = [
    pytest.param(1.0, 1.0, 1, id="a=1-k=1"),
    pytest.param(1.0, 1.0, 2, id="a=1-k=2"),
    pytest.param(1.0, 1.0, 10, id="a=1-k=10"),
    pytest.param(1.0, 1.0, 50, id="a=1-k=50"),
    pytest.param(2.0, 1.0, 10, id="a=0.5-k=10", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("scale, sensitivity, k", LAPLACE_CASES)
def test_afa_laplace_against_reference(scale, sensitivity, k):
    a = sensitivity / scale
    epsilons = LAPLACE_EPSILONS + [a * m for m in (1, 2, 3) if a * m not in LAPLACE_EPSILONS]
    results = _afa_results(afa.Laplace(scale=scale, sensitivity=sensitivity), k, tuple(epsilons))
    reference = laplace_delta_reference(epsilons, k, a)
    label = f"Laplace(scale={scale}, sensitivity={sensitivity}) x{k}"
    _check_accurate(results, reference, epsilons, label)
    _check_honest(results, reference, epsilons, label)


# (sensitivities, probabilities, sigma, k, id, slow)
AFA_MOG = [
    ([0, 1, 2], [0.2, 0.5, 0.3], 1.5, 1, "3comp-k=1", False),
    ([0, 1, 2], [0.2, 0.5, 0.3], 1.5, 2, "3comp-k=2", False),
    ([0, 1], [0.5, 0.5], 1.0, 1, "2comp-k=1", True),
    ([0, 1], [0.5, 0.5], 1.0, 2, "2comp-k=2", True),
    ([1, 3], [0.4, 0.6], 2.0, 1, "nozero-k=1", True),
    ([1, 3], [0.4, 0.6], 2.0, 2, "nozero-k=2", True),
    ([0, 0.3], [0.9, 0.1], 0.2, 1, "steep-k=1", True),
    ([0, 0.3], [0.9, 0.1], 0.2, 2, "steep-k=2", True),
]


def _mog_params():
    return [pytest.param(s, p, sigma, k, id=name, marks=[pytest.mark.slow] if slow else [])
            for s, p, sigma, k, name, slow in AFA_MOG]


def _mog_case(sensitivities, probabilities, sigma, k):
    mechanism = afa.MixtureOfGaussians(sensitivities=sensitivities, probabilities=probabilities, sigma=sigma)
    results = _afa_results(mechanism, k, tuple(MOG_EPSILONS))
    reference = np.maximum(
        mog_delta_reference(MOG_EPSILONS, sensitivities, probabilities, sigma, "P", k),
        mog_delta_reference(MOG_EPSILONS, sensitivities, probabilities, sigma, "Q", k))
    return results, reference, f"MoG({sensitivities}, {probabilities}, sigma={sigma}) x{k}"


@pytest.mark.parametrize("sensitivities, probabilities, sigma, k", _mog_params())
def test_afa_mixture_of_gaussians_within_1e9(sensitivities, probabilities, sigma, k):
    results, reference, label = _mog_case(sensitivities, probabilities, sigma, k)
    _check_accurate(results, reference, MOG_EPSILONS, label)


@pytest.mark.parametrize("sensitivities, probabilities, sigma, k", _mog_params())
def test_afa_mixture_of_gaussians_error_estimate_is_honest(sensitivities, probabilities, sigma, k):
    results, reference, label = _mog_case(sensitivities, probabilities, sigma, k)
    _check_honest(results, reference, MOG_EPSILONS, label)
