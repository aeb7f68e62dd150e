"""Tests for afa.mechanisms.loss_tails and Mechanism.loss_tails: the tails of each direction's privacy loss.

For one direction (P, Q) with loss L = log(p/q)(o), o ~ P, a :class:`afa.mechanisms.loss_tails.LossTails`
gives log P[eps < L < inf], log Q[eps < L < inf] and P[L = inf]; its hockey stick
delta(eps) = P[L = inf] + P[eps < L < inf] - e^eps Q[eps < L < inf] must be the direction's
H_{e^eps}(P || Q) (Zhu, Dong & Wang 2022, Def. 7, Lemma 37).

Ground truth, independent of afa's code:

* closed forms in 40-digit mpmath: the Gaussian delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)
  (Sommer, Meiser & Mohammadi 2019, Thm 5) and its tails Phi(+-mu/2 - eps/mu); the Laplace
  delta = 1 - e^{(eps - a)/2} on [-a, a] (Zhu, Dong & Wang 2022, Lemma 34); propose-test-release
  delta + (1 - delta) delta_Laplace (Zhu, Dong & Wang 2022, Example 16);
* enumeration sum_o (p(o) - e^eps q(o))_+ over the outputs, in mpmath, of the PMFs written out
  here from each mechanism's definition (randomized response, k-RR, discrete Laplace, discrete
  Gaussian, ApproxDP, DiscreteMechanism, subsampled discrete bases);
* mpmath quadrature of int (p - e^eps q)_+ do for the subsampled Gaussian / Laplace pairs
  (tests/_subsampling_reference.py, both directions, Poisson, subset and substitution) and scipy
  quadrature for the mixture of Gaussians (tests/_reference.py);
* the tails themselves from mpmath: the crossing of the loss with eps by 60-digit bisection and
  the component CDFs (noise pairs), the roots of the quadratic loss (data-dependent Gaussian);
* afa's own accounting of one use, ``Accountant(...).compose(mech).delta_result(eps)``, an
  independent engine (characteristic functions, closed forms, certified brackets): the tails'
  max over the two directions must lie within its reported bounds.

Measured agreement (relative): Gaussian hockey sticks against the closed form within 2e-14 while
delta >= 0.1 P[L > eps], 9e-12 at delta ~ 1e-128 (mu = 0.25, eps = 6: P - e^eps Q cancels two digits of
a tail with |log P| ~ 285); Laplace, PTR and every enumeration within 6e-15; subsampled Gaussian /
Laplace against the mpmath integrals within 6e-15 (Poisson, subset, substitution, both directions);
MoG against scipy quadrature within 2e-14.  log-tails against mpmath: |error of log P| <= 1e-15
(1 + |log P|) for the noise pairs (|log P| up to 4e4) and 4e-15 for the data-dependent Gaussian, also
in the narrow intervals next to its top loss.  Against the accountant: 5e-16 (closed forms, exact
discrete), 2e-10 (MoG, real-line quadrature), inside the certified bracket (subsampled, one use).
The file runs in about 17 s.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import afa
from afa.mechanisms.loss_tails import (
    AtomTails,
    GaussianTails,
    LaplaceTails,
    LossTails,
    NoisePairTails,
    QuadraticGaussianTails,
)
from afa.mechanisms.noise_pair import NoiseMixturePair

sys.path.insert(0, str(Path(__file__).parent))
from _reference import mog_delta_quad_k1  # noqa: E402
from _subsampling_reference import delta_one_use_mpmath  # noqa: E402

RTOL = 1e-10
EPSILONS = [-2.0, -0.5, -0.05, 0.0, 0.01, 0.1, 0.3, 0.7, 1.5, 3.0]


def assert_relative(value, reference, rtol=RTOL, atol=0.0, what=""):
    value, reference = float(value), float(reference)
    assert abs(value - reference) <= rtol * abs(reference) + atol, f"{what}: {value!r} vs {reference!r}"


def both_directions(mechanism, neighboring, epsilons):
    first, second = mechanism.loss_tails(neighboring)
    return first.hockey_stick(epsilons), second.hockey_stick(epsilons)


# ---------------------------------------------------------------------------
# Independent references
# ---------------------------------------------------------------------------

def enumerated_delta(p, q, eps) -> float:
    """sum_o (p(o) - e^eps q(o))_+ in 40-digit arithmetic (outputs with q = 0 count fully)."""
    with mp.workdps(40):
        factor = mp.exp(mp.mpf(eps))
        return float(mp.fsum(max(mp.mpf(a) - factor * mp.mpf(b), 0) for a, b in zip(p, q)))


def gaussian_delta_mp(eps, mu) -> float:
    with mp.workdps(40):
        eps, mu = mp.mpf(eps), mp.mpf(mu)
        return float(mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2))


def laplace_delta(eps, a) -> float:
    """One Laplace use, a = sensitivity / scale (Zhu, Dong & Wang 2022, Lemma 34)."""
    if eps <= -a:
        return -math.expm1(eps)
    return -math.expm1((min(eps, a) - a) / 2)


def discrete_gaussian_pmf(sigma, shift, reach=60):
    """N_Z(shift, sigma^2) on the integers -reach..reach, in mpmath (normaliser summed over |y| <= 2 reach)."""
    with mp.workdps(40):
        weight = lambda y: mp.exp(-mp.mpf(y) ** 2 / (2 * mp.mpf(sigma) ** 2))  # noqa: E731
        norm = mp.fsum(weight(y) for y in range(-2 * reach, 2 * reach + 1))
        return [weight(x - shift) / norm for x in range(-reach, reach + 1)]


def discrete_laplace_pmf(a, shift, reach=150):
    """P[x] = tanh(a/2) e^{-a |x - shift|} on the integers -reach..reach, in mpmath (Google DP team 2025, Sec. 3.4)."""
    with mp.workdps(40):
        a = mp.mpf(a)
        return [mp.tanh(a / 2) * mp.exp(-a * abs(x - shift)) for x in range(-reach, reach + 1)]


def quadratic_tails_mp(own, other, shift, eps):
    """(P[L > eps], Q[L > eps]) of P = N(0, own^2), Q = N(shift, other^2), from the roots of the quadratic
    log(p/q)(x) = eps and the normal CDFs in 80-digit arithmetic (Zhu, Dong & Wang 2022, App. A Example 15)."""
    with mp.workdps(80):
        own, other, shift, eps = map(mp.mpf, (own, other, shift, eps))
        a = 1 / (2 * other ** 2) - 1 / (2 * own ** 2)
        b = -shift / other ** 2
        c = shift ** 2 / (2 * other ** 2) + mp.log(other / own) - eps
        disc = b * b - 4 * a * c

        def mass(low, high, mean, sd):
            low, high = (low - mean) / sd, (high - mean) / sd
            return mp.ncdf(-low) - mp.ncdf(-high) if low > 0 else mp.ncdf(high) - mp.ncdf(low)

        if disc <= 0:
            return (mp.mpf(1), mp.mpf(1)) if a > 0 else (mp.mpf(0), mp.mpf(0))
        r1, r2 = sorted([(-b - mp.sqrt(disc)) / (2 * a), (-b + mp.sqrt(disc)) / (2 * a)])
        if a > 0:
            return (mass(-mp.inf, r1, 0, own) + mass(r2, mp.inf, 0, own),
                    mass(-mp.inf, r1, shift, other) + mass(r2, mp.inf, shift, other))
        return mass(r1, r2, 0, own), mass(r1, r2, shift, other)


def mixture_tails_mp(noise, scale, a_side, b_side, eps, increasing):
    """(P[L > eps], Q[L > eps]) for A = sum w mu(. - c) over ``a_side`` [(w, c)], B likewise, L = log(A/B)
    monotone: the crossing o* of L with eps by 60-digit bisection, then the component CDFs."""
    with mp.workdps(60):
        def log_density(o, c):
            if noise == "gaussian":
                return -((o - c) / scale) ** 2 / 2
            return -abs(o - c) / scale

        def loss(o):
            return (mp.log(mp.fsum(mp.mpf(w) * mp.exp(log_density(o, c)) for w, c in a_side))
                    - mp.log(mp.fsum(mp.mpf(w) * mp.exp(log_density(o, c)) for w, c in b_side)))

        def beyond(o, c):  # mass of mu(. - c) on the side of o where L > eps
            z = (o - c) / scale if increasing else (c - o) / scale
            if noise == "gaussian":
                return mp.ncdf(-z)
            return mp.exp(-z) / 2 if z >= 0 else 1 - mp.exp(z) / 2

        eps = mp.mpf(eps)
        sign = 1 if increasing else -1
        low, high = mp.mpf(-1), mp.mpf(1)
        while loss(sign * low) > eps:
            low *= 2
        while loss(sign * high) <= eps:
            high *= 2
        for _ in range(mp.mp.prec + 10):
            middle = (low + high) / 2
            low, high = (low, middle) if loss(sign * middle) > eps else (middle, high)
        o = sign * (low + high) / 2
        return (mp.fsum(mp.mpf(w) * beyond(o, c) for w, c in a_side),
                mp.fsum(mp.mpf(w) * beyond(o, c) for w, c in b_side))


# ---------------------------------------------------------------------------
# Continuous closed forms
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("sigma", [0.3, 1.0, 4.0])
def test_gaussian_hockey_stick_is_the_exact_formula(sigma):
    mechanism = afa.Gaussian(sigma)
    first, second = mechanism.loss_tails()
    assert first is second and isinstance(first, GaussianTails)
    epsilons = np.array(EPSILONS + [6.0, 20.0])
    values = first.hockey_stick(epsilons)
    for eps, value in zip(epsilons, values):
        reference = gaussian_delta_mp(eps, 1 / sigma)
        if reference > 1e-300:
            assert_relative(value, reference, what=f"sigma={sigma}, eps={eps}")


def test_gaussian_tails_far_out_are_relatively_accurate():
    tails = afa.Gaussian(0.7, sensitivity=1.3).loss_tails()[0]
    mu = 1.3 / 0.7
    epsilons = np.array([-300.0, -30.0, 0.0, 30.0, 300.0, 3000.0])
    log_p, log_q = tails.log_tails(epsilons)
    with mp.workdps(40):
        for eps, lp, lq in zip(epsilons, log_p, log_q):
            p_tail, q_tail = mp.ncdf(mu / 2 - eps / mu), mp.ncdf(-mu / 2 - eps / mu)
            for value, reference in ((lp, mp.log(p_tail)), (lq, mp.log(q_tail))):
                assert abs(value - float(reference)) <= 1e-14 * (1 + abs(float(reference))), (eps, value, reference)


@pytest.mark.parametrize("scale", [0.5, 1.0, 3.0])
def test_laplace_hockey_stick_is_the_closed_form(scale):
    a = 1 / scale
    first, second = afa.Laplace(scale).loss_tails("substitution")
    assert first is second and isinstance(first, LaplaceTails)
    for eps in EPSILONS + [-a, a]:
        assert_relative(first.hockey_stick(eps), laplace_delta(eps, a), 1e-13, atol=1e-300, what=f"eps={eps}")


def test_propose_test_release_is_laplace_plus_delta():
    epsilon, delta = 0.8, 1e-4
    first, second = afa.ProposeTestRelease(epsilon, delta).loss_tails()
    assert first.inf_mass == delta and first.loss_range == (-epsilon, epsilon)
    for eps in EPSILONS:
        assert_relative(first.hockey_stick(eps), delta + (1 - delta) * laplace_delta(eps, epsilon), 1e-13)


@pytest.mark.parametrize("sigmas", [(1.0, 1.5), (1.5, 1.0), (1.0, 3.0)])
def test_data_dependent_gaussian_tails_against_mpmath(sigmas):
    sigma1, sigma2 = sigmas
    shift = 1.2
    mechanism = afa.DataDependentGaussian(sigma1, sigma2, shift)
    for tails, (own, other) in zip(mechanism.loss_tails(), ((sigma1, sigma2), (sigma2, sigma1))):
        assert isinstance(tails, QuadraticGaussianTails)
        rho, mu = other / own, shift / own
        with mp.workdps(40):  # the extreme loss L* (Zhu, Dong & Wang 2022, App. A Example 15)
            extreme = float(mp.log(mp.mpf(rho)) - mp.mpf(mu) ** 2 / (2 * (1 - mp.mpf(rho) ** 2)))
        expected_range = (extreme, math.inf) if own > other else (-math.inf, extreme)
        assert tails.loss_range == pytest.approx(expected_range, rel=1e-15)
        # Well inside, and next to the top of a bounded loss (narrow intervals) or the bottom of an unbounded one.
        epsilons = np.array(EPSILONS + [extreme + 40 * (1 if own > other else -1)]
                            + [extreme - d * (1 if own < other else -1) for d in (1e-3, 1e-7, 1e-11)])
        log_p, log_q = tails.log_tails(epsilons)
        deltas = tails.hockey_stick(epsilons)
        for eps, lp, lq, delta in zip(epsilons, log_p, log_q, deltas):
            p_mass, q_mass = quadratic_tails_mp(own, other, shift, eps)
            for value, reference in ((lp, p_mass), (lq, q_mass)):
                if reference == 0:
                    assert value == -np.inf
                else:
                    assert abs(value - float(mp.log(reference))) <= 1e-14 * (1 + abs(float(mp.log(reference)))), eps
            reference_delta = float(p_mass - mp.exp(eps) * q_mass)
            if reference_delta > 1e-3 * float(p_mass):  # else the difference of the tails cancels
                assert_relative(delta, reference_delta, what=f"eps={eps}")


def test_data_dependent_gaussian_degenerate_cases():
    first, second = afa.DataDependentGaussian(1.0, 1.0, 0.5).loss_tails()
    assert first is second and isinstance(first, GaussianTails) and first.mu == 0.5
    first, second = afa.DataDependentGaussian(1.0, 1.0, 0.0).loss_tails()
    assert isinstance(first, AtomTails) and first.loss_range == (0.0, 0.0)
    assert first.hockey_stick(-0.5) == pytest.approx(-math.expm1(-0.5), rel=1e-15)
    assert first.hockey_stick(0.0) == 0.0


# ---------------------------------------------------------------------------
# Finite atoms: enumeration of the PMFs
# ---------------------------------------------------------------------------

def _kary(k, p, neighboring):
    other = (1 - p) / (k - 1)
    if neighboring == "substitution":  # R(x) against R(x') over all k outputs
        return [p, other] + [other] * (k - 2), [other, p] + [other] * (k - 2)
    return [p] + [other] * (k - 1), [1 / k] * k  # replace-special: R(x) against uniform R(bottom)


def _subsampled(base_p, base_q, q):
    """Poisson remove pair (A, Q), A = (1 - q) Q + q P, in mpmath."""
    with mp.workdps(40):
        return [(1 - mp.mpf(q)) * mp.mpf(b) + mp.mpf(q) * mp.mpf(a) for a, b in zip(base_p, base_q)], list(base_q)


def _approx_dp(eps, delta):
    with mp.workdps(40):
        eps, delta = mp.mpf(eps), mp.mpf(delta)
        p = [delta, (1 - delta) * mp.exp(eps) / (1 + mp.exp(eps)), (1 - delta) / (1 + mp.exp(eps)), 0]
        return p, p[::-1]


FINITE_CASES = {
    "rr": (afa.RandomizedResponse(0.7), "add_remove", ([0.7, 0.3], [0.3, 0.7])),
    "rr_p1": (afa.RandomizedResponse(1.0), "add_remove", ([1.0, 0.0], [0.0, 1.0])),
    "krr_substitution": (afa.KaryRandomizedResponse(5, 0.4), "substitution", _kary(5, 0.4, "substitution")),
    "krr_replace_special": (afa.KaryRandomizedResponse(5, 0.4), "add_remove", _kary(5, 0.4, "add_remove")),
    "discrete_laplace": (afa.DiscreteLaplace(0.6, 2), "add_remove",
                         (discrete_laplace_pmf(0.6, 0), discrete_laplace_pmf(0.6, 2))),
    "discrete_gaussian": (afa.DiscreteGaussian(2.5, 1), "add_remove",
                          (discrete_gaussian_pmf(2.5, 1), discrete_gaussian_pmf(2.5, 0))),
    "discrete_mechanism": (afa.DiscreteMechanism((0.5, 0.3, 0.2, 0.0), (0.1, 0.3, 0.4, 0.2)), "add_remove",
                           ([0.5, 0.3, 0.2, 0.0], [0.1, 0.3, 0.4, 0.2])),
    "approx_dp": (afa.ApproxDP(0.5, 1e-3), "add_remove", _approx_dp(0.5, 1e-3)),
    "poisson_rr": (afa.RandomizedResponse(0.8).poisson_subsampled(0.3), "add_remove",
                   _subsampled([0.8, 0.2], [0.2, 0.8], 0.3)),
    # Subset sampling takes the base's substitution pair (Zhu, Dong & Wang 2022, Thm 11(2)).
    "subset_krr": (afa.KaryRandomizedResponse(4, 0.5).subset_subsampled(0.2), "add_remove",
                   _subsampled(*_kary(4, 0.5, "substitution"), 0.2)),
    "poisson_dlaplace": (afa.DiscreteLaplace(0.6, 1).poisson_subsampled(0.1), "add_remove",
                         _subsampled(discrete_laplace_pmf(0.6, 0), discrete_laplace_pmf(0.6, 1), 0.1)),
}


@pytest.mark.parametrize("case", sorted(FINITE_CASES))
def test_finite_hockey_sticks_are_the_enumeration(case):
    mechanism, neighboring, (p, q) = FINITE_CASES[case]
    first, second = mechanism.loss_tails(neighboring)
    assert isinstance(first, AtomTails) and isinstance(second, AtomTails)
    epsilons = np.array(EPSILONS + [float(first.loss_range[1]) if math.isfinite(first.loss_range[1]) else 0.0])
    for tails, (a, b) in ((first, (p, q)), (second, (q, p))):
        for eps, value in zip(epsilons, tails.hockey_stick(epsilons)):
            # atol: at eps = the top loss (a float) the exact top atom may lie an ulp above it.
            assert_relative(value, enumerated_delta(a, b, eps), 1e-12, atol=1e-15, what=f"{case}, eps={eps}")


@pytest.mark.parametrize("case", ["approx_dp", "discrete_mechanism", "rr_p1", "poisson_rr"])
def test_finite_tails_below_and_above_the_loss_range(case):
    mechanism, neighboring, (p, q) = FINITE_CASES[case]
    for tails, (a, b) in zip(mechanism.loss_tails(neighboring), ((p, q), (q, p))):
        both = [(float(x), float(y)) for x, y in zip(a, b) if x > 0 and y > 0]
        assert tails.inf_mass == pytest.approx(sum(float(x) for x, y in zip(a, b) if x > 0 and y == 0), rel=1e-15)
        low, high = tails.loss_range
        if both:
            assert (low, high) == pytest.approx((min(math.log(x / y) for x, y in both),
                                                 max(math.log(x / y) for x, y in both)), rel=1e-13)
        else:
            assert (low, high) == (math.inf, -math.inf)
        # Below the range: the whole finite part, P- and Q-mass of the outputs where both are positive.
        log_p, log_q = tails.log_tails(np.array([-np.inf, min(low, 0.0) - 1.0]))
        np.testing.assert_allclose(np.exp(log_p), sum(x for x, _ in both), rtol=1e-14)
        np.testing.assert_allclose(np.exp(log_q), sum(y for _, y in both), rtol=1e-14)
        # At and above the top: nothing finite is left.
        at_and_above = [high, max(high, 0.0) + 1.0, np.inf] if both else [0.0, np.inf]
        log_p, log_q = tails.log_tails(np.array(at_and_above))
        assert np.all(log_p == -np.inf) and np.all(log_q == -np.inf)
        assert np.all(tails.hockey_stick([1e3, np.inf]) == tails.inf_mass)


# ---------------------------------------------------------------------------
# Subsampled Gaussian / Laplace and the mixture of Gaussians: monotone noise pairs
# ---------------------------------------------------------------------------

SUBSAMPLED_EPSILONS = [-0.5, -0.02, 0.0, 0.02, 0.1, 0.4, 1.0, 2.5]


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
@pytest.mark.parametrize("scheme", ["poisson", "subset"])
def test_subsampled_hockey_sticks_are_the_mpmath_integral(noise, scheme):
    scale, q = 0.8, 0.05
    base = afa.Gaussian(scale) if noise == "gaussian" else afa.Laplace(scale)
    mechanism = afa.Subsampled(base, q, scheme)
    for tails, relation in zip(mechanism.loss_tails(), ("remove", "add")):
        assert isinstance(tails, NoisePairTails)
        tail = np.exp(tails.log_tails(SUBSAMPLED_EPSILONS)[0])
        for eps, value, above in zip(SUBSAMPLED_EPSILONS, tails.hockey_stick(SUBSAMPLED_EPSILONS), tail):
            reference = float(delta_one_use_mpmath(eps, noise, scale, q, 1.0, relation, dps=25))
            # Where delta << P[L > eps] (next to the top of a bounded loss) P - e^eps Q cancels.
            assert_relative(value, reference, RTOL if reference > 1e-3 * above else 1e-8, what=f"{relation}, eps={eps}")


@pytest.mark.parametrize("noise, q, delta", [("gaussian", 0.01, 1e-5), ("gaussian", 0.001, 1e-10),
                                            ("gaussian", 0.05, 1e-30), ("laplace", 0.1, 1e-5), ("laplace", 0.3, 1e-10)])
def test_one_use_epsilon_brackets_the_mpmath_root(noise, q, delta):
    """One use of a subsampled mechanism: eps(delta) from the loss tails by Newton's method with their slope
    (add/remove: the larger direction).  The 25-digit integral has delta(lower) > delta >= delta(upper), and the
    bracket is narrower than 1e-11 relative."""
    base = afa.Gaussian(0.8) if noise == "gaussian" else afa.Laplace(0.8)
    result = afa.Accountant().compose(base.poisson_subsampled(q)).epsilon_result(delta, method="exact")
    assert result.upper - result.lower <= 1e-11 * result.value

    def reference(eps):
        return delta_one_use_mpmath(eps, noise, 0.8, q, 1.0, "add_remove", dps=25)

    assert reference(result.lower) > delta >= reference(result.upper)


def test_subsampled_gaussian_substitution_is_the_mpmath_integral():
    first, second = afa.Gaussian(0.8).poisson_subsampled(0.05).loss_tails("substitution")
    assert first is second and first.loss_range == (-math.inf, math.inf)
    for eps, value in zip(SUBSAMPLED_EPSILONS, first.hockey_stick(SUBSAMPLED_EPSILONS)):
        assert_relative(value, float(delta_one_use_mpmath(eps, "gaussian", 0.8, 0.05, 1.0, "substitution", dps=25)),
                        what=f"eps={eps}")


def _remove_pair(noise, scale, q, shift=1.0):
    return NoiseMixturePair(noise, scale, (0.0, shift), (math.log1p(-q), math.log(q)), (0.0,), (0.0,))


def _subsampled_pair(noise, scale, q, relation):
    """(pair, A's [(weight, shift)], B's, whether L increases in the output) of Poisson subsampling with rate q
    under ``relation`` ("remove", "add" or "substitution"), for :func:`mixture_tails_mp`."""
    if relation == "substitution":
        pair = NoiseMixturePair(noise, scale, (0.0, -1.0), (math.log1p(-q), math.log(q)),
                                (0.0, 1.0), (math.log1p(-q), math.log(q)))
        return pair, [(1 - q, 0), (q, -1)], [(1 - q, 0), (q, 1)], False
    pair, a_side, b_side = _remove_pair(noise, scale, q), [(1 - q, 0), (q, 1)], [(1, 0)]
    if relation == "add":
        return pair.swapped(), b_side, a_side, False
    return pair, a_side, b_side, True


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
@pytest.mark.parametrize("q", [0.5, 1e-3])
@pytest.mark.parametrize("relation", ["remove", "add", "substitution"])
def test_noise_pair_tails_against_mpmath(noise, q, relation):
    scale = 0.9
    pair, a_side, b_side, increasing = _subsampled_pair(noise, scale, q, relation)
    tails = NoisePairTails(pair)
    low, high = tails.loss_range
    inner = [eps for eps in (-30.0, -3.0, -0.3, -1e-4, 0.0, 1e-5, 0.05, 0.3, 3.0, 30.0, 300.0) if low < eps < high]
    inner += [low + (high - low) * f for f in (0.1, 0.5, 0.9)] if math.isfinite(high - low) else []
    log_p, log_q = tails.log_tails(np.array(inner))
    for eps, lp, lq in zip(inner, log_p, log_q):
        with mp.workdps(60):
            p_mass, q_mass = mixture_tails_mp(noise, scale, a_side, b_side, eps, increasing)
            for value, reference in ((lp, float(mp.log(p_mass))), (lq, float(mp.log(q_mass)))):
                assert abs(value - reference) <= 1e-13 * (1 + abs(reference)), (eps, value, reference)


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
@pytest.mark.parametrize("relation", ["remove", "add", "substitution"])
def test_noise_pair_lower_mass_against_mpmath(noise, relation):
    """P[L <= eps] from the half-line below the crossing keeps its relative accuracy far below the unit
    roundoff (where 1 - P[L > eps] is all rounding), against 60-digit mpmath."""
    scale, q = 0.67, 1.4e-3
    pair, a_side, b_side, increasing = _subsampled_pair(noise, scale, q, relation)
    tails = NoisePairTails(pair)
    low, high = tails.loss_range
    chosen = [eps for eps in (-8.0, -5.0, -3.0, -1.0, -1e-3, 0.0, 1e-3, 1.0) if low < eps < high]
    values = tails.log_lower_mass(np.array(chosen))
    smallest = math.inf
    for eps, value in zip(chosen, values):
        with mp.workdps(60):
            above = mixture_tails_mp(noise, scale, a_side, b_side, eps, increasing)[0]
            total = mp.fsum(mp.mpf(w) for w, _ in a_side)  # the float weights' own sum, within an ulp of 1
            reference = float(mp.log(total - above))
        smallest = min(smallest, reference)
        assert abs(value - reference) <= 1e-12 * (1 + abs(reference)), (eps, value, reference)
    assert tails.log_lower_mass(np.array([low - 1.0]))[0] == -math.inf if math.isfinite(low) else True
    assert tails.log_lower_mass(np.array([high + 1.0]))[0] == 0.0 if math.isfinite(high) else True
    if noise == "gaussian" and relation == "substitution":
        assert smallest < math.log(1e-20)  # the check reached far below the unit roundoff


@pytest.mark.parametrize("relation", ["remove", "substitution"])
def test_noise_pair_loss_slope_against_mpmath(relation):
    """L'(o) of a Gaussian mixture pair (used by the crossing's Newton steps) against mpmath's derivative."""
    scale, q = 0.7, 0.01
    if relation == "substitution":
        pair = NoiseMixturePair("gaussian", scale, (0.0, -1.0), (math.log1p(-q), math.log(q)),
                                (0.0, 1.0), (math.log1p(-q), math.log(q)))
        a_side, b_side = [(1 - q, 0), (q, -1)], [(1 - q, 0), (q, 1)]
    else:
        pair = _remove_pair("gaussian", scale, q)
        a_side, b_side = [(1 - q, 0), (q, 1)], [(1, 0)]
    outputs = np.array([-6.0, -1.0, 0.0, 0.4, 2.5, 8.0])
    losses, slopes = pair.loss_and_slope(outputs)
    with mp.workdps(40):
        def loss(o):
            return (mp.log(mp.fsum(mp.mpf(w) * mp.exp(-((o - c) / scale) ** 2 / 2) for w, c in a_side))
                    - mp.log(mp.fsum(mp.mpf(w) * mp.exp(-((o - c) / scale) ** 2 / 2) for w, c in b_side)))
        for o, value, slope in zip(outputs, losses, slopes):
            assert abs(value - float(loss(mp.mpf(o)))) <= 1e-13 * (1 + abs(value))
            reference = float(mp.diff(loss, mp.mpf(o)))
            assert abs(slope - reference) <= 1e-12 * (1 + abs(reference)), (o, slope, reference)
    with pytest.raises(ValueError, match="Gaussian noise"):
        _remove_pair("laplace", scale, q).loss_and_slope(outputs)


@pytest.mark.parametrize("q", [0.3, 1e-4])
def test_subsampled_loss_ranges_and_their_ends(q):
    """Gaussian remove: inf L = log(1 - q), approached as o -> -inf but not attained (so P[L > log(1 - q)] = 1);
    add: sup L' = -log(1 - q).  Laplace: L is constant beyond the shifts, so both ends are atoms
    log(1 - q + q e^{-+a}) (Google DP team 2025, Sec. 4.1)."""
    remove, add = afa.Gaussian(1.0).poisson_subsampled(q).loss_tails()
    bottom = math.log1p(-q)
    assert remove.loss_range == (bottom, math.inf) and add.loss_range == (-math.inf, -bottom)
    log_p, log_q = remove.log_tails(np.array([-np.inf, bottom - 1e-3, bottom]))
    assert np.all(log_p == 0) and np.all(log_q == 0)
    assert remove.log_tails(bottom + 1e-3)[0] < 0
    assert np.all(np.array(add.log_tails(-bottom)) == -np.inf) and add.log_tails(-bottom - 1e-6)[0] > -np.inf

    a = 1 / 0.7
    remove, add = afa.Laplace(0.7).poisson_subsampled(q).loss_tails()
    ends = (math.log1p(q * math.expm1(-a)), math.log1p(q * math.expm1(a)))
    assert remove.loss_range == pytest.approx(ends, rel=1e-14)
    assert add.loss_range == pytest.approx((-ends[1], -ends[0]), rel=1e-14)
    # The bottom atom: the A-mass of o <= 0, (1 - q)/2 + q e^{-a}/2; just below it, everything.
    bottom, top = remove.loss_range  # (the flat levels as afa rounds them)
    below, at = np.exp(remove.log_tails(np.array([bottom - 1e-9, bottom]))[0])
    assert below == 1.0 and at == pytest.approx(1 - ((1 - q) / 2 + q * math.exp(-a) / 2), rel=1e-13)
    # The top atom: A-mass of o >= 1, (1 - q) e^{-a}/2 + q/2, is all that lies above just below the top.
    assert np.exp(remove.log_tails(top * (1 - 1e-12))[0]) == pytest.approx((1 - q) * math.exp(-a) / 2 + q / 2, rel=1e-9)
    assert np.all(np.array(remove.log_tails(top)) == -np.inf)


def test_subsampled_edge_rates():
    never = afa.Gaussian(1.0).poisson_subsampled(0.0).loss_tails()[0]
    assert isinstance(never, AtomTails) and never.loss_range == (0.0, 0.0) and never.hockey_stick(0.0) == 0.0
    for scheme, relation in (("poisson", "add_remove"), ("subset", "substitution")):
        always = afa.Subsampled(afa.Laplace(0.5), 1.0, scheme).loss_tails()
        assert always == afa.Laplace(0.5).loss_tails(relation)  # the base's own (cached) tails


@pytest.mark.parametrize("sensitivities, probabilities", [((0.0, 1.0, 2.0), (0.2, 0.5, 0.3)), ((0.5, 3.0), (0.7, 0.3))])
def test_mixture_of_gaussians_against_scipy_quadrature(sensitivities, probabilities):
    sigma = 1.5
    first, second = afa.MixtureOfGaussians(sensitivities, probabilities, sigma).loss_tails()
    p0 = sum(p for s, p in zip(sensitivities, probabilities) if s == 0)
    bottom = math.log(p0) if p0 else -math.inf  # Google DP team 2025, Sec. 3.3: l(o) > log p_0
    assert first.loss_range == (pytest.approx(bottom, rel=1e-15), math.inf)
    assert second.loss_range == (-math.inf, pytest.approx(-bottom, rel=1e-15))
    for tails, side in ((first, "P"), (second, "Q")):
        for eps, value in zip(SUBSAMPLED_EPSILONS, tails.hockey_stick(SUBSAMPLED_EPSILONS)):
            reference = mog_delta_quad_k1(eps, sensitivities, probabilities, sigma, side)
            assert_relative(value, reference, atol=1e-15, what=f"{side}, eps={eps}")


def test_non_monotone_pair_is_refused():
    pair = NoiseMixturePair("gaussian", 1.0, (-1.0, 1.0), (math.log(0.5), math.log(0.5)), (0.0,), (0.0,))
    with pytest.raises(ValueError, match="not monotone"):
        NoisePairTails(pair)


# ---------------------------------------------------------------------------
# Consistency with afa's own accounting of one use
# ---------------------------------------------------------------------------

ACCOUNTED = [
    ("add_remove", afa.Gaussian(0.8)),
    ("add_remove", afa.Laplace(0.7)),
    ("add_remove", afa.ProposeTestRelease(0.7, 1e-3)),
    ("add_remove", afa.DataDependentGaussian(1.0, 1.5, 1.0)),
    ("substitution", afa.KaryRandomizedResponse(4, 0.55)),
    ("add_remove", afa.KaryRandomizedResponse(4, 0.55)),
    ("add_remove", afa.DiscreteGaussian(1.5)),
    ("add_remove", afa.DiscreteMechanism((0.5, 0.3, 0.2, 0.0), (0.1, 0.3, 0.4, 0.2))),
    ("add_remove", afa.RandomizedResponse(0.8).poisson_subsampled(0.3)),
    ("add_remove", afa.MixtureOfGaussians((0.0, 1.0, 2.0), (0.2, 0.5, 0.3), 1.5)),
    ("add_remove", afa.Gaussian(0.8).poisson_subsampled(0.05)),
    ("add_remove", afa.Laplace(0.8).subset_subsampled(0.05)),
    ("substitution", afa.Gaussian(0.8).poisson_subsampled(0.05)),
]


@pytest.mark.parametrize("neighboring, mechanism", ACCOUNTED,
                         ids=[f"{type(m).__name__}-{n}-{i}" for i, (n, m) in enumerate(ACCOUNTED)])
def test_tails_agree_with_the_accountant(neighboring, mechanism):
    accountant = afa.Accountant(neighboring=neighboring).compose(mechanism)
    first, second = mechanism.loss_tails(neighboring)
    for eps in (-0.3, 0.0, 0.2, 0.6):
        value = max(first.hockey_stick(eps), second.hockey_stick(eps))
        result = accountant.delta_result(eps)
        slack = 1e-12 * result.value + 1e-15
        assert result.lower - slack <= value <= result.upper + slack, (eps, value, result)
        assert abs(value - result.value) <= max(result.error, 2e-9 * result.value) + slack, (eps, value, result)


# ---------------------------------------------------------------------------
# Properties every direction has
# ---------------------------------------------------------------------------

PROPERTY_CASES = [
    ("add_remove", afa.Gaussian(1.3)),
    ("add_remove", afa.Laplace(0.6)),
    ("add_remove", afa.ProposeTestRelease(1.0, 1e-2)),
    ("add_remove", afa.DataDependentGaussian(1.0, 1.4, 0.8)),
    ("add_remove", afa.RandomizedResponse(0.75)),
    ("add_remove", afa.DiscreteGaussian(1.0, 2)),
    ("add_remove", afa.ApproxDP(0.4, 1e-2)),
    ("add_remove", afa.MixtureOfGaussians((0.0, 2.0), (0.3, 0.7), 1.0)),
    ("add_remove", afa.Gaussian(1.0).poisson_subsampled(0.1)),
    ("add_remove", afa.Laplace(1.0).poisson_subsampled(0.2)),
    ("substitution", afa.Gaussian(1.0).poisson_subsampled(0.1)),
    ("add_remove", afa.DiscreteLaplace(0.5).poisson_subsampled(0.2)),
]
CASE_IDS = [f"{type(m).__name__}-{n}-{i}" for i, (n, m) in enumerate(PROPERTY_CASES)]


@pytest.mark.parametrize("neighboring, mechanism", PROPERTY_CASES, ids=CASE_IDS)
def test_slope_is_the_derivative_of_the_hockey_stick(neighboring, mechanism):
    """delta' = -e^eps Q[L > eps] holds only if the P- and Q-tails belong to the same pair
    (dP = e^l dQ at loss l): compared with a central difference away from atoms, and with a
    forward difference at an atom (the right derivative)."""
    h = 1e-5
    for tails in mechanism.loss_tails(neighboring):
        low, high = tails.loss_range
        atoms = tails.atoms.losses if isinstance(tails, AtomTails) else np.array([low, high])
        grid = np.linspace(max(low, -3.0), min(high, 3.0), 41)
        clear = grid[np.min(np.abs(grid[:, None] - atoms[None, :]), axis=1) > 4 * h]
        slopes = tails.hockey_stick_slope(clear)
        differences = (tails.hockey_stick(clear + h) - tails.hockey_stick(clear - h)) / (2 * h)
        np.testing.assert_allclose(differences, slopes, rtol=1e-6, atol=1e-12)
        # the one-pass form gives the same three (what the closed-form engine's Newton search reads)
        values, errors, rates = tails.hockey_stick_error_and_slope(grid)
        np.testing.assert_array_equal(np.stack([values, errors]), np.stack(tails.hockey_stick_with_error(grid)))
        np.testing.assert_array_equal(rates, -tails.hockey_stick_slope(grid))
        if isinstance(tails, AtomTails):
            at = tails.atoms.losses[tails.atoms.losses.size // 2]
            forward = (tails.hockey_stick(at + 1e-7) - tails.hockey_stick(at)) / 1e-7
            assert forward == pytest.approx(float(tails.hockey_stick_slope(at)), rel=1e-5, abs=1e-12)


@pytest.mark.parametrize("neighboring, mechanism", PROPERTY_CASES, ids=CASE_IDS)
def test_tails_are_monotone_and_bracketed(neighboring, mechanism):
    for tails in mechanism.loss_tails(neighboring):
        low, high = tails.loss_range
        ends = [low, high] if math.isfinite(high - low) else []
        epsilons = np.unique(np.concatenate((np.linspace(-6, 6, 1201), ends)))
        log_p, log_q = tails.log_tails(epsilons)
        for mass in (np.exp(log_p), np.exp(log_q)):
            assert np.all(mass[1:] <= mass[:-1] * (1 + 1e-13))
        # On {L > eps}, p > e^eps q: P[eps < L < inf] >= e^eps Q[eps < L < inf].
        finite = log_p > -np.inf
        assert np.all(log_p[finite] >= epsilons[finite] + log_q[finite] - 1e-12)
        assert np.all(log_q[~finite] == -np.inf)
        delta = tails.hockey_stick(epsilons)
        assert np.all(np.diff(delta) <= 1e-15)
        assert np.all(delta >= -np.expm1(np.minimum(epsilons, 0)) - 1e-15) and np.all(delta <= 1 + 1e-15)
        # Outside the range: the whole finite mass below it, nothing at or above its top.
        below = tails.log_tails(np.array([-np.inf, low - 1.0]))[0]
        np.testing.assert_allclose(below, math.log1p(-tails.inf_mass), atol=1e-15)
        assert np.all(tails.log_tails(np.array([high + 1.0, np.inf]))[0] == -np.inf)
        if high < np.inf:
            assert tails.log_tails(high)[0] == -np.inf


@settings(max_examples=25, deadline=None)
@given(noise=st.sampled_from(["gaussian", "laplace"]), scale=st.floats(0.2, 5.0), q=st.floats(1e-6, 0.999),
       add=st.booleans(), eps=st.floats(-5.0, 5.0))
def test_noise_pair_tails_properties(noise, scale, q, add, eps):
    pair = _remove_pair(noise, scale, q)
    tails = NoisePairTails(pair.swapped() if add else pair)
    log_p, log_q = tails.log_tails(np.array([eps, eps + 1e-3]))
    assert log_p[1] <= log_p[0] and log_q[1] <= log_q[0]
    if log_p[0] > -np.inf:
        assert log_p[0] >= eps + log_q[0] - 1e-12
    assert -math.expm1(min(eps, 0.0)) - 1e-15 <= tails.hockey_stick(eps) <= 1.0


@pytest.mark.parametrize("tails, atom", [
    (GaussianTails(0.7), None),
    (NoisePairTails(_remove_pair("gaussian", 0.9, 0.01)), None),
    (NoisePairTails(_remove_pair("gaussian", 0.9, 0.01).swapped()), None),
    (QuadraticGaussianTails(1.0, 1.3, 0.5), None),
    (NoisePairTails(_remove_pair("laplace", 0.9, 0.01)), "top"),  # flat beyond the shifts: atoms at the ends
    (LaplaceTails(1.5), "top"),
    (afa.RandomizedResponse(0.7).loss_tails("add_remove")[0], "top"),
])
def test_atomless_tails_and_the_grid_cache(tails, atom):
    """``atomless`` is declared only where P[L = x] = 0: there the tails just below each grid point equal those at
    it (to the tails' accuracy), which the greedy hull uses instead of a second evaluation; a loss with atoms
    (here its largest value) is not atomless.  grid_log_tails is log_tails on the grid, read-only, and kept for
    the next builder."""
    assert tails.atomless is (atom is None)
    low, high = max(tails.loss_range[0], -3.0), min(tails.loss_range[1], 3.0)
    first, count, interval = math.floor(low / 1e-3), int((high - low) / 1e-3), 1e-3
    grid = interval * np.arange(first, first + count)
    log_p, log_q = tails.grid_log_tails(interval, first, count)
    assert np.array_equal(log_p, tails.log_tails(grid)[0]) and np.array_equal(log_q, tails.log_tails(grid)[1])
    assert tails.grid_log_tails(interval, first, count)[0] is log_p and not log_p.flags.writeable
    if atom is None:
        below = tails.log_tails(np.nextafter(grid, -np.inf))[1]
        finite = np.isfinite(log_q)
        assert np.all(np.abs(below[finite] - log_q[finite]) <= 1e-12 * (1 + np.abs(log_q[finite])))
    else:  # Q[L >= top] > 0 = Q[L > top]
        top = tails.loss_range[1]
        assert tails.log_tails(np.nextafter(top, -np.inf))[1] > -np.inf == tails.log_tails(top)[1]


def test_shapes_and_nan():
    tails = afa.Gaussian(1.0).poisson_subsampled(0.1).loss_tails()[0]
    epsilons = np.array([[0.0, 1.0, 2.0], [-1.0, 0.5, 3.0]])
    for implementation in (tails, afa.RandomizedResponse(0.8).loss_tails()[0], afa.Laplace(1.0).loss_tails()[0],
                           afa.DataDependentGaussian(1.0, 2.0, 1.0).loss_tails()[0]):
        log_p, log_q = implementation.log_tails(epsilons)
        assert log_p.shape == log_q.shape == epsilons.shape
        assert implementation.hockey_stick(epsilons).shape == epsilons.shape
        np.testing.assert_allclose(implementation.hockey_stick(epsilons)[1], implementation.hockey_stick(epsilons[1]),
                                   rtol=1e-14)
        with pytest.raises(ValueError, match="NaN"):
            implementation.log_tails([0.0, math.nan])


def test_every_mechanism_is_a_loss_tails_pair_in_privacy_losses_order():
    for neighboring, mechanism in ACCOUNTED + PROPERTY_CASES:
        first, second = mechanism.loss_tails(neighboring)
        assert isinstance(first, LossTails) and isinstance(second, LossTails)
        losses = mechanism.privacy_losses(neighboring)
        assert (first is second) == (losses[0] is losses[1])
        assert first.inf_mass == losses[0].inf_mass and second.inf_mass == losses[1].inf_mass
        assert mechanism.loss_tails(neighboring)[0] is first  # cached


@pytest.mark.parametrize("mechanism", [afa.Gaussian(1.0), afa.RandomizedResponse(0.7),
                                       afa.MixtureOfGaussians((1.0,), (1.0,), 1.0), afa.DataDependentGaussian(1.0, 2.0),
                                       afa.Laplace(1.0).poisson_subsampled(0.1)])
def test_bad_neighboring_raises(mechanism):
    for bad in ("replace", "add-remove", None):
        with pytest.raises(ValueError, match="neighboring"):
            mechanism.loss_tails(bad)


def test_relations_subsampling_does_not_cover_raise():
    with pytest.raises(ValueError, match="subset sampling"):
        afa.Gaussian(1.0).subset_subsampled(0.1).loss_tails("substitution")
    with pytest.raises(ValueError, match="Gaussian base only"):
        afa.Laplace(1.0).poisson_subsampled(0.1).loss_tails("substitution")
    with pytest.raises(ValueError, match="subsampling is implemented"):  # (one component is a Gaussian base)
        afa.MixtureOfGaussians((1.0, 2.0), (0.5, 0.5), 1.0).poisson_subsampled(0.1).loss_tails()


def composed_delta_mp(p, q, count, epsilons) -> list[float]:
    """delta(eps) of ``count`` uses of the pair (p, q) in 40-digit arithmetic: the per-use losses log p/q with
    their P- and Q-masses convolved ``count`` times (equal losses merged), outputs with q = 0 at +infinity."""
    with mp.workdps(40):
        per_use, inf_p = {}, mp.mpf(0)
        for a, b in zip(p, q):
            a, b = mp.mpf(a), mp.mpf(b)
            if a == 0:
                continue
            if b == 0:
                inf_p += a
                continue
            key = mp.nstr(mp.log(a / b), 30)
            pa, qb = per_use.get(key, (mp.mpf(0), mp.mpf(0)))
            per_use[key] = (pa + a, qb + b)
        law = {"0": (mp.mpf(1), mp.mpf(1))}
        for _ in range(count):
            step = {}
            for key, (pa, qa) in law.items():
                for other, (pb, qb) in per_use.items():
                    total = mp.nstr(mp.mpf(key) + mp.mpf(other), 30)
                    old = step.get(total, (mp.mpf(0), mp.mpf(0)))
                    step[total] = (old[0] + pa * pb, old[1] + qa * qb)
            law = step
        at_inf = 1 - (1 - inf_p) ** count if inf_p else mp.mpf(0)
        values = []
        for eps in epsilons:
            factor = mp.exp(mp.mpf(eps))
            values.append(float(at_inf + mp.fsum(max(pa - factor * qa, 0) for pa, qa in law.values())))
        return values, float(mp.log(mp.fsum(qa for _, qa in law.values())))


@pytest.mark.parametrize("case", ["discrete_laplace", "discrete_gaussian", "discrete_mechanism", "approx_dp"])
@pytest.mark.parametrize("count", [2, 5])
@pytest.mark.parametrize("log_cutoff", [-800.0, -25.0])
def test_exact_power_tails_bracket_the_mpmath_composition(case, count, log_cutoff):
    """``exact_power``: the upward tails' delta lies above the 40-digit composition of ``count`` uses, the
    downward tails' below it, at every eps (also at the composed atoms' own positions); with nothing dropped
    (cutoff e^-800) both are within 1e-10 of it where it exceeds 1e-50 (the atoms' position bounds).  A high cutoff drops atoms: their
    mass then goes to +infinity above and is left out below, and the downward tails' Q-mass at eps = -inf
    still bounds the composed finite Q-mass from above."""
    mechanism, neighboring, (p, q) = FINITE_CASES[case]
    tails = mechanism.loss_tails(neighboring)[0]
    upward, downward = tails.exact_power(count, log_cutoff)
    assert upward.upward and not downward.upward
    atoms = upward.atoms.losses
    epsilons = np.concatenate((EPSILONS, atoms[(atoms > -3) & (atoms < 30)][:40], [float(atoms[-1]) + 1e-3]))
    truth, log_q_total = composed_delta_mp(p, q, count, epsilons)
    above, below = upward.hockey_stick(epsilons), downward.hockey_stick(epsilons)
    # The truncated discrete Gaussian sends its tail mass (~1e-65 here) to +infinity, which the reference pmf
    # leaves out: the lower side allows for it (as the accountant's lower bounds do).
    truncated = count * tails.inf_mass + 1e-300
    for eps, value, high, low in zip(epsilons, truth, above, below):
        assert low <= value * (1 + 1e-13) + truncated and value <= high * (1 + 1e-13) + 1e-300, (eps, low, value, high)
        if log_cutoff == -800.0 and value > 1e-50:
            assert high - low <= 1e-10 * value, (eps, low, value, high)
    assert float(downward.log_tails(-math.inf)[1]) >= log_q_total - 1e-13


def test_exact_power_is_refused_where_it_would_not_help_or_fit():
    """One use, a one-atom loss and a power beyond POWER_ATOMS atoms are not composed (None), and a composed
    loss is not composed again."""
    rr = afa.RandomizedResponse(0.8).loss_tails()[0]
    assert rr.exact_power(1, -800.0) is None
    assert afa.DiscreteGaussian(300.0).loss_tails()[0].exact_power(10 ** 6, -800.0) is None
    upward, _ = rr.exact_power(50, -800.0)
    assert upward.atoms.size == 51 and upward.exact_power(3, -800.0) is None
    assert afa.DiscreteMechanism((1.0, 0.0), (0.0, 1.0)).loss_tails()[0].exact_power(5, -800.0) is None
