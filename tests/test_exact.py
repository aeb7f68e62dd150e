"""Tests for afa.numerics.exact against independent ground truth.

References: mpmath at 50 digits for the Gaussian formula (Sommer, Meiser & Mohammadi 2019,
Thm 5; Google DP team 2025, Sec. 3.2.1 eq. (1)), brute-force enumeration of
output sequences for (approximate) randomized response (Sommer, Meiser & Mohammadi 2019, Example 1, App. A.1),
and direct sums / numerical integration of hockey-stick divergences for mixtures
(Zhu, Dong & Wang 2022, Sec. 5, Exp 2).
"""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from afa.numerics.exact import (
    approximate_rr_delta,
    discrete_gaussian_mixture_delta,
    gaussian_delta,
    gaussian_epsilon,
    gaussian_log_delta,
    gaussian_mu,
    randomized_response_delta,
)

DPS = 50


def mp_gaussian_delta(eps: float, mu: float) -> mp.mpf:
    """Φ(a) − e^ε Φ(a − μ), a = μ/2 − ε/μ, in 50-digit arithmetic."""
    with mp.workdps(DPS):
        e, m = mp.mpf(eps), mp.mpf(mu)
        a = m / 2 - e / m
        return +(mp.ncdf(a) - mp.exp(e) * mp.ncdf(a - m))


def hockey_stick(p_probs, q_probs, eps: float) -> mp.mpf:
    """Σ_o max(P(o) − e^ε Q(o), 0) over an enumerated output space (mpmath numbers)."""
    t = mp.exp(mp.mpf(eps))
    return mp.fsum(max(pp - t * qq, 0) for pp, qq in zip(p_probs, q_probs))


def rr_brute(eps: float, p: float, n: int) -> mp.mpf:
    """n-fold RR on input bits all 0 vs all 1, enumerating all 2^n output sequences."""
    with mp.workdps(DPS):
        p_, q_ = mp.mpf(p), 1 - mp.mpf(p)
        outs = list(itertools.product((0, 1), repeat=n))
        big_p = [p_ ** (n - sum(o)) * q_ ** sum(o) for o in outs]
        big_q = [q_ ** (n - sum(o)) * p_ ** sum(o) for o in outs]
        return hockey_stick(big_p, big_q, eps)


def arr_brute(eps: float, xi: float, delta0: float, n: int) -> mp.mpf:
    """n-fold ARR (Sommer, Meiser & Mohammadi 2019, Example 1), enumerating all 4^n output sequences."""
    with mp.workdps(DPS):
        d, e = mp.mpf(delta0), mp.exp(mp.mpf(xi))
        one_p = [d, (1 - d) * e / (1 + e), (1 - d) / (1 + e), mp.mpf(0)]
        one_q = one_p[::-1]
        outs = list(itertools.product(range(4), repeat=n))
        big_p = [mp.fprod(one_p[i] for i in o) for o in outs]
        big_q = [mp.fprod(one_q[i] for i in o) for o in outs]
        return hockey_stick(big_p, big_q, eps)


def rel_err(value: float, ref: mp.mpf) -> float:
    return float(abs(mp.mpf(value) - ref) / ref)


# --------------------------------------------------------------------------
# Gaussian


GAUSSIAN_POINTS = [
    # (epsilon, mu)                  approximate δ
    (0.0, 1e-3),                     # 4e-4
    (1e-7, 1e-3),
    (-1.0, 1e-3),                    # 0.63
    (-2e-3, 1e-3),
    (0.0208, 1e-3),                  # 1e-100
    (0.03676, 1e-3),                 # 1e-300
    (0.5, 1.0),
    (-3.0, 1.0),
    (21.6275, 1.0),                  # 1e-100
    (37.4488, 1.0),                  # 1e-300
    (2.0, 0.5),
    (3.0, 0.1),                      # 7e-200
    (1.0, 10.0),
    (60.0, 10.0),
    (500.0, 20.0),                   # 2e-51
    (500.0, 30.0),                   # 0.04
    (940.376, 20.0),                 # 1e-300
    (0.0, 1000.0),
    (5e5, 1000.0),
    (521272.464, 1000.0),            # 1e-100
    (537046.114, 1000.0),            # 1e-300
    (-0.5, 1000.0),                  # 1 - 1e-217000
]


@pytest.mark.parametrize("eps, mu", GAUSSIAN_POINTS)
def test_gaussian_delta_matches_mpmath(eps, mu):
    ref = mp_gaussian_delta(eps, mu)
    assert rel_err(gaussian_delta(eps, mu), ref) < 1e-13
    with mp.workdps(DPS):
        assert abs(gaussian_log_delta(eps, mu) - float(mp.log(ref))) < 1e-13 * max(
            1.0, abs(float(mp.log(ref)))
        )


def test_gaussian_points_reach_tiny_delta():
    assert mp_gaussian_delta(0.03676, 1e-3) < mp.mpf("1e-299")
    assert mp_gaussian_delta(537046.114, 1000.0) < mp.mpf("1e-299")


@pytest.mark.parametrize("eps, mu", [(1e4, 0.7), (1e10, 0.7), (1e300, 0.7), (1e300, 1e-3), (1e308, 1000.0)])
def test_gaussian_delta_underflows_to_zero_far_in_the_tail(eps, mu):
    """Where delta is far below the smallest double, delta is 0, not NaN: delta(eps) <= P[L > eps] <=
    exp(-(eps/mu - mu/2)^2 / 2) (the Gaussian tail bound, in mpmath) is below e^-1000 there."""
    with mp.workdps(DPS):
        assert -(mp.mpf(eps) / mu - mp.mpf(mu) / 2) ** 2 / 2 < -1000
    assert gaussian_delta(eps, mu) == 0.0
    assert gaussian_delta(np.array([eps, 1.0]), mu)[0] == 0.0


@pytest.mark.parametrize("eps, mu", [(1e4, 1.0), (1e3, 1e-3), (3e6, 1000.0), (50.0, 0.5)])
def test_gaussian_log_delta_far_tail(eps, mu):
    """δ far below the double range keeps a relatively accurate logarithm."""
    with mp.workdps(DPS):
        ref = mp.log(mp_gaussian_delta(eps, mu))
    assert float(ref) < -800
    assert abs(gaussian_log_delta(eps, mu) - float(ref)) <= 1e-14 * abs(float(ref))


@pytest.mark.slow
@pytest.mark.parametrize("mu", [1e-3, 0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 100.0, 1000.0])
def test_gaussian_accuracy_sweep(mu):
    """ε from 0 to ε(δ = 1e-300): worst relative error of δ against mpmath."""
    top = gaussian_epsilon(1e-300, mu)
    eps = np.concatenate([np.linspace(0.0, top, 200), top * np.geomspace(1e-9, 1.0, 100)])
    got = gaussian_delta(eps, mu)
    worst = max(rel_err(g, mp_gaussian_delta(e, mu)) for e, g in zip(eps, got))
    assert worst < 1e-13


def test_gaussian_vectorised_shapes_and_types():
    assert isinstance(gaussian_delta(1.0, 1.0), float)
    assert isinstance(gaussian_log_delta(np.float64(1.0), 1.0), float)
    eps = np.linspace(-1.0, 10.0, 12).reshape(3, 4)
    out = gaussian_delta(eps, 2.0)
    assert isinstance(out, np.ndarray) and out.shape == (3, 4)
    np.testing.assert_array_equal(out.ravel(), [gaussian_delta(e, 2.0) for e in eps.ravel()])


def test_gaussian_extreme_inputs_never_nan():
    eps = np.array([-1e308, -1e3, 0.0, 1e3, 1e308])
    for mu in (1e-300, 1e-3, 1.0, 1e3, 1e300):
        d = gaussian_delta(eps, mu)
        assert np.all(np.isfinite(d)) and np.all((d >= 0) & (d <= 1))
        assert not np.any(np.isnan(gaussian_log_delta(eps, mu)))


@settings(max_examples=60, deadline=None)
@given(
    log_mu=st.floats(-3, 3),
    eps=st.lists(st.floats(-50, 5000), min_size=2, max_size=20),
)
def test_gaussian_monotone_and_above_pure_bound(log_mu, eps):
    mu = 10.0**log_mu
    e = np.sort(np.array(eps))
    d = gaussian_delta(e, mu)
    assert np.all((d >= 0) & (d <= 1))
    assert np.all(d[1:] <= d[:-1] * (1 + 1e-13))
    assert np.all(d >= -np.expm1(np.minimum(e, 0.0)) * (1 - 1e-13))


# --------------------------------------------------------------------------
# gaussian_mu and gaussian_epsilon


def test_gaussian_mu():
    assert gaussian_mu(2.0) == pytest.approx(0.5, rel=1e-15)
    assert gaussian_mu([1.0, 2.0], counts=[1, 4]) == pytest.approx(math.sqrt(2.0), rel=1e-15)
    assert gaussian_mu([1.0], sensitivities=[3.0]) == pytest.approx(3.0, rel=1e-15)
    assert gaussian_mu([1e6], counts=[10**12]) == pytest.approx(1.0, rel=1e-15)
    assert gaussian_mu([5.0, 1e6], counts=[3, 10**12], sensitivities=[2.0, 1.0]) == (
        pytest.approx(math.sqrt(3 * 4 / 25 + 1.0), rel=1e-15)
    )


@pytest.mark.parametrize("mu", [1e-3, 0.1, 1.0, 10.0, 1000.0])
@pytest.mark.parametrize("target", [0.1, 1e-5, 1e-100, 1e-300])
def test_gaussian_epsilon_inverts_delta(mu, target):
    eps0 = gaussian_epsilon(target, mu)
    if mp_gaussian_delta(0.0, mu) <= target:
        assert eps0 == 0.0
        return
    # ε(δ(ε0)) = ε0; the reference δ here is mpmath's, not the function's own.
    d = float(mp_gaussian_delta(eps0, mu))
    assert gaussian_epsilon(d, mu) == pytest.approx(eps0, rel=1e-12)
    assert d == pytest.approx(target, rel=1e-9)


def test_gaussian_epsilon_zero_when_delta_at_zero_is_small_enough():
    # δ(0) = 2Φ(μ/2) − 1 ≈ 0.0399 for μ = 0.1
    assert gaussian_epsilon(0.05, 0.1) == 0.0
    assert gaussian_epsilon(0.039, 0.1) > 0.0


@settings(max_examples=40, deadline=None)
@given(log_mu=st.floats(-3, 3), eps0=st.floats(0.01, 2000))
def test_gaussian_epsilon_roundtrip_property(log_mu, eps0):
    mu = 10.0**log_mu
    d = gaussian_delta(eps0, mu)
    if not 1e-300 < d < 0.1:
        return
    assert gaussian_epsilon(d, mu) == pytest.approx(eps0, rel=1e-12)


# --------------------------------------------------------------------------
# randomized response and approximate randomized response


@pytest.mark.parametrize("p", [0.5, 0.55, 0.75, 0.9, 0.999])
@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_rr_matches_enumeration(p, n):
    eps = np.array([-1.5, -0.01, 0.0, 0.3, 1.0, 2.5, 7.0, 40.0])
    got = randomized_response_delta(eps, p, n)
    for e, g in zip(eps, got):
        ref = rr_brute(e, p, n)
        if ref == 0:
            assert g == 0.0
        else:
            assert rel_err(g, ref) < 1e-12


def test_rr_half_is_pure_bound():
    eps = np.linspace(-3.0, 3.0, 13)
    np.testing.assert_allclose(
        randomized_response_delta(eps, 0.5, 7), np.maximum(-np.expm1(eps), 0.0), rtol=1e-14
    )


def test_rr_large_n_matches_mpmath_sum():
    """n = 10^6: the j-sum above the threshold, term by term in 30-digit arithmetic."""
    n, eps = 10**6, 4.0
    with mp.workdps(30):
        p = mp.mpf(0.5001)
        q = 1 - p
        xi = mp.log(p / q)
        k0 = int(mp.floor((eps / xi + n) / 2)) + 1
        term, ref = mp.binomial(n, k0) * p**k0 * q ** (n - k0), mp.mpf(0)
        for k in range(k0, k0 + 3000):
            if k > k0:
                term = term * (n - k + 1) / k * p / q
            ref += term * (1 - mp.exp(eps - xi * (2 * k - n)))
    assert rel_err(randomized_response_delta(eps, 0.5001, n), ref) < 1e-12


@pytest.mark.parametrize("xi, delta0", [(0.0, 0.1), (0.4, 0.0), (1.0, 0.01), (2.5, 0.3)])
@pytest.mark.parametrize("n", [1, 2, 4])
def test_arr_matches_enumeration(xi, delta0, n):
    eps = np.array([-1.0, 0.0, 0.2, 1.3, 4.0, 11.0])
    got = approximate_rr_delta(eps, xi, delta0, n)
    for e, g in zip(eps, got):
        ref = arr_brute(e, xi, delta0, n)
        assert rel_err(g, ref) < 1e-12 if ref > 0 else g == 0.0


def test_arr_single_step_by_hand():
    # δ(0) = δ0 + (1 − δ0)(e^ξ − 1)/(e^ξ + 1) for n = 1
    xi, d0 = 0.7, 0.05
    assert approximate_rr_delta(0.0, xi, d0, 1) == pytest.approx(
        d0 + (1 - d0) * math.tanh(xi / 2), rel=1e-14
    )


@pytest.mark.parametrize("xi, n", [(0.1, 30), (1.0, 7), (3.0, 200)])
def test_arr_without_delta0_is_rr(xi, n):
    eps = np.linspace(-2.0, n * xi + 1.0, 23) + 1e-3
    p = math.exp(xi) / (1.0 + math.exp(xi))
    np.testing.assert_allclose(
        approximate_rr_delta(eps, xi, 0.0, n),
        randomized_response_delta(eps, p, n),
        rtol=1e-12,
        atol=0.0,
    )


def test_arr_infinity_mass():
    n, d0 = 50, 0.01
    floor = -math.expm1(n * math.log1p(-d0))
    assert approximate_rr_delta(1e3, 0.5, d0, n) == pytest.approx(floor, rel=1e-15)
    assert approximate_rr_delta([0.0, 30.0], 2.0, 1.0, 3).tolist() == [1.0, 1.0]


@settings(max_examples=40, deadline=None)
@given(
    p=st.floats(0.5, 0.99),
    n=st.integers(1, 300),
    eps=st.lists(st.floats(-20, 200), min_size=2, max_size=15),
)
def test_rr_monotone_and_bounded(p, n, eps):
    e = np.sort(np.array(eps))
    d = randomized_response_delta(e, p, n)
    assert np.all((d >= 0) & (d <= 1))
    assert np.all(d[1:] <= d[:-1] * (1 + 1e-13))
    assert np.all(d >= -np.expm1(np.minimum(e, 0.0)) * (1 - 1e-13))


# --------------------------------------------------------------------------
# discrete × Gaussian mixtures


@pytest.mark.parametrize("mu", [1e-3, 0.3, 2.0, 100.0])
def test_mixture_single_atom_is_gaussian(mu):
    eps = np.linspace(-2.0, 2.0 * mu * mu + 5.0, 17)
    np.testing.assert_allclose(
        discrete_gaussian_mixture_delta(eps, [0.0], [1.0], mu=mu),
        gaussian_delta(eps, mu),
        rtol=1e-13,
        atol=0.0,
    )


def test_mixture_pure_discrete_matches_direct_sum():
    rng = np.random.default_rng(7)
    losses = rng.normal(0.5, 2.0, 40)
    weights = rng.dirichlet(np.ones(40)) * 0.97
    eps = np.linspace(-3.0, 6.0, 19)
    got = discrete_gaussian_mixture_delta(eps, losses, weights, inf_mass=0.03)
    with mp.workdps(DPS):
        for e, g in zip(eps, got):
            ref = mp.mpf(0.03) + mp.fsum(
                mp.mpf(w) * max(1 - mp.exp(mp.mpf(e) - mp.mpf(ell)), 0)
                for ell, w in zip(losses, weights)
            )
            assert rel_err(g, ref) < 1e-13


def test_mixture_gaussian_matches_mpmath_sum():
    losses = np.array([-1.2, 0.0, 0.4, 3.0])
    weights = np.array([0.1, 0.2, 0.3, 0.35])
    mu = 0.8
    eps = np.array([-1.0, 0.0, 1.0, 5.0, 20.0, 40.0])
    got = discrete_gaussian_mixture_delta(eps, losses, weights, inf_mass=0.05, mu=mu)
    for e, g in zip(eps, got):
        with mp.workdps(DPS):
            ref = mp.mpf(0.05) + mp.fsum(
                mp.mpf(w) * mp_gaussian_delta(e - ell, mu) for ell, w in zip(losses, weights)
            )
        assert rel_err(g, ref) < 1e-13


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_mixture_rr_times_gaussian_matches_integral(eps):
    """RR(p) ⊗ Gaussian(σ): hockey-stick integral of the output densities, Zhu, Dong & Wang 2022, Exp 2."""
    p, sigma = 0.52, 5.0
    xi, mu = math.log(p / (1 - p)), 1.0 / sigma
    got = discrete_gaussian_mixture_delta(eps, [xi, -xi], [p, 1 - p], mu=mu)
    with mp.workdps(35):
        t, ref = mp.exp(eps), mp.mpf(0)
        for pb, qb in ((p, 1 - p), (1 - p, p)):
            # P_b φ(y) > e^ε Q_b φ(y − μ) exactly for y < cut
            cut = (mp.log(mp.mpf(pb) / qb) + mu * mu / 2 - eps) / mu
            ref += mp.quad(lambda y: pb * mp.npdf(y) - t * qb * mp.npdf(y, mu), [-mp.inf, cut])
    assert rel_err(got, ref) < 1e-13


# --------------------------------------------------------------------------
# input validation


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: gaussian_delta(1.0, -1.0), "mu"),
        (lambda: gaussian_delta(1.0, 0.0), "mu"),
        (lambda: gaussian_log_delta(1.0, float("nan")), "mu"),
        (lambda: gaussian_delta(1.0, float("inf")), "mu"),
        (lambda: gaussian_delta(float("nan"), 1.0), "epsilon"),
        (lambda: gaussian_delta([0.0, float("inf")], 1.0), "epsilon"),
        (lambda: gaussian_delta("x", 1.0), "epsilon"),
        (lambda: gaussian_epsilon(0.0, 1.0), "delta"),
        (lambda: gaussian_epsilon(1.0, 1.0), "delta"),
        (lambda: gaussian_epsilon(1e-5, -2.0), "mu"),
        (lambda: gaussian_epsilon(1e-5, 1e200), "mu"),
        (lambda: gaussian_mu([1.0, -1.0]), "sigmas"),
        (lambda: gaussian_mu([]), "sigmas"),
        (lambda: gaussian_mu([1.0], counts=[2.5]), "counts"),
        (lambda: gaussian_mu([1.0], counts=[0]), "counts"),
        (lambda: gaussian_mu([1.0, 2.0], counts=[1]), "counts"),
        (lambda: gaussian_mu([1.0], sensitivities=[-1.0]), "sensitivities"),
        (lambda: randomized_response_delta(0.0, 0.4, 3), "p"),
        (lambda: randomized_response_delta(0.0, 1.0, 3), "p"),
        (lambda: randomized_response_delta(0.0, 0.7, 0), "n"),
        (lambda: randomized_response_delta(0.0, 0.7, 2.5), "n"),
        (lambda: randomized_response_delta(0.0, 0.7, True), "n"),
        (lambda: approximate_rr_delta(0.0, -0.1, 0.0, 2), "xi"),
        (lambda: approximate_rr_delta(0.0, 1.0, 1.5, 2), "delta0"),
        (lambda: approximate_rr_delta(0.0, 1.0, -0.1, 2), "delta0"),
        (lambda: discrete_gaussian_mixture_delta(0.0, [0.0, 1.0], [0.5, 0.4]), "weights"),
        (lambda: discrete_gaussian_mixture_delta(0.0, [0.0, 1.0], [1.5, -0.5]), "weights"),
        (lambda: discrete_gaussian_mixture_delta(0.0, [0.0], [0.5, 0.5]), "weights"),
        (lambda: discrete_gaussian_mixture_delta(0.0, [float("inf")], [1.0]), "losses"),
        (lambda: discrete_gaussian_mixture_delta(0.0, [0.0], [1.0], inf_mass=-0.1), "inf_mass"),
        (lambda: discrete_gaussian_mixture_delta(0.0, [0.0], [1.0], mu=-1.0), "mu"),
    ],
)
def test_invalid_inputs_raise(call, name):
    with pytest.raises((ValueError, TypeError), match=rf"^{name} "):
        call()
