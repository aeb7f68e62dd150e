"""Checks of the independent subsampling references (tests/_subsampling_reference.py).

The references (mpmath log-MGF, mpmath one-use hockey-stick integral, brute-force
pessimistic / optimistic PLD bracket) are checked against closed forms (q = 1,
integer moments), against each other, against scipy quadrature and against the
literature value eps(1e-5) ~ 0.718036 for the Poisson-subsampled Gaussian
(sigma = 1, q = 0.01, k = 100, add/remove).  Nothing here imports afa.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import time

import mpmath as mp
import numpy as np
import pytest
from scipy import integrate
from scipy.special import ndtr

sys.path.insert(0, os.path.dirname(__file__))

import _subsampling_reference as R  # noqa: E402
from _reference import laplace_delta_quad_k2  # noqa: E402  (scipy-only, independent of afa)

DPS = 30


def _close(x, y, tol):
    return abs(x - y) <= tol * max(1, abs(y))


# --------------------------------------------------------------------------
# 1. log MGF
# --------------------------------------------------------------------------


@pytest.mark.parametrize("noise", R.NOISES)
@pytest.mark.parametrize("relation", R.RELATIONS)
def test_mgf_is_one_at_0_and_minus_1(noise, relation):
    # M(0) = int P = 1 and M(-1) = int Q = 1 (probability integrals)
    for s in (0, -1):
        v = R.log_mgf_mpmath(s, noise, 0.8, 0.05, 1.0, relation, dps=DPS)
        assert abs(v) < 1e-25, (s, v)


@pytest.mark.parametrize("noise", R.NOISES)
@pytest.mark.parametrize("s", [3.0, mp.mpc(0.4, 2.0)])
def test_mgf_add_remove_symmetry(noise, s):
    # M_remove(-1 - s) = int A^{-s} B^{1+s} = M_add(s)
    with mp.workdps(40):
        s = mp.mpmathify(s)
        a = R.log_mgf_mpmath(-1 - s, noise, 0.8, 0.05, 1.0, "remove", dps=DPS)
        b = R.log_mgf_mpmath(s, noise, 0.8, 0.05, 1.0, "add", dps=DPS)
        assert abs(mp.exp(a - b) - 1) < 1e-25
        assert abs(b) > 1e-3  # not trivially zero


@pytest.mark.parametrize("s", [2.5, 50, -0.3, -3.5, mp.mpc(1.5, 3.0), mp.mpc(-2.2, 10.0)])
def test_mgf_gaussian_q1_closed_form(s):
    # q = 1: P = N(Delta, sigma^2), Q = N(0, sigma^2): log M(s) = s (1 + s) Delta^2 / (2 sigma^2)
    sigma, delta = 2.0, 1.3
    with mp.workdps(40):
        s = mp.mpmathify(s)
        v = R.log_mgf_mpmath(s, "gaussian", sigma, 1.0, delta, "remove", dps=DPS)
        exact = s * (1 + s) * mp.mpf(delta) ** 2 / (2 * mp.mpf(sigma) ** 2)
        # complex: the log is principal-branch, compare exp of the difference
        assert abs(mp.exp(v - exact) - 1) < 1e-25, (v, exact)
        if not isinstance(s, mp.mpc):
            assert abs(v - exact) < 1e-25 * max(1, abs(exact))


def _laplace_q1_mgf(s, a):
    """int Lap(o - a)^{1+s} Lap(o)^{-s} do (b = 1), split at 0 and a:
    (-inf, 0): e^{-(1+s) a};  (0, a): (e^{s a} - e^{-(1+s) a}) / (1 + 2 s);  (a, inf): e^{s a};
    times 1/2 => ((1 + s) e^{a s} + s e^{-a (1 + s)}) / (1 + 2 s)."""
    return ((1 + s) * mp.exp(a * s) + s * mp.exp(-a * (1 + s))) / (1 + 2 * s)


def test_laplace_q1_formula_by_direct_integration():
    # the closed form itself, against a direct (independent) mp.quad of the three pieces
    with mp.workdps(40):
        for s in (mp.mpf(2.5), mp.mpf(-0.3), mp.mpc(0.7, -4)):
            for a in (mp.mpf("0.5"), mp.mpf(3)):
                f = lambda o: mp.exp(-(1 + s) * abs(o - a) + s * abs(o)) / 2  # noqa: E731
                direct = mp.quad(f, [mp.ninf, 0, a, mp.inf])
                assert abs(direct / _laplace_q1_mgf(s, a) - 1) < 1e-30
        assert _laplace_q1_mgf(mp.mpf(0), 1) == 1 and abs(_laplace_q1_mgf(mp.mpf(-1), 1) - 1) < 1e-35


@pytest.mark.parametrize("s", [2.5, -0.3, 7.0, mp.mpc(0.7, -4.0), mp.mpc(-2.2, 10.0)])
@pytest.mark.parametrize("a", [0.5, 3.0])
def test_mgf_laplace_q1_closed_form(s, a):
    with mp.workdps(40):
        s = mp.mpmathify(s)
        v = R.log_mgf_mpmath(s, "laplace", 1.0, 1.0, a, "remove", dps=DPS)
        assert abs(mp.exp(v) / _laplace_q1_mgf(s, mp.mpf(a)) - 1) < 1e-25


@pytest.mark.parametrize("n", [2, 6, 21])
def test_mgf_gaussian_integer_moments(n):
    # remove, 1 + s = n integer: M = E_B[(1 - q + q e^kappa)^n]
    #   = sum_k C(n, k) (1-q)^{n-k} q^k exp(k (k-1) Delta^2 / (2 sigma^2))
    sigma, q, delta = 1.0, 0.01, 1.0
    with mp.workdps(40):
        qq = mp.mpf(q)
        exact = mp.fsum(mp.binomial(n, k) * (1 - qq) ** (n - k) * qq ** k
                        * mp.exp(k * (k - 1) * mp.mpf(delta) ** 2 / (2 * mp.mpf(sigma) ** 2))
                        for k in range(n + 1))
        v = R.log_mgf_mpmath(n - 1, "gaussian", sigma, q, delta, "remove", dps=DPS)
        assert abs(v - mp.log(exact)) < 1e-25 * max(1, abs(v))


@pytest.mark.parametrize("noise,relation,s", [("gaussian", "remove", 2.0), ("gaussian", "substitution", -0.4),
                                               ("laplace", "substitution", 1.5), ("laplace", "add", 4.0)])
def test_mgf_against_scipy_quad(noise, relation, s):
    q, scale, delta = 0.2, 0.9, 1.0
    P, Q = R._components(relation, q, delta)

    def dens(comps, o):
        if noise == "gaussian":
            return sum(w * math.exp(-0.5 * ((o - c) / scale) ** 2) / (scale * math.sqrt(2 * math.pi))
                       for w, c in comps)
        return sum(w * math.exp(-abs(o - c) / scale) / (2 * scale) for w, c in comps)

    f = lambda o: math.exp((1 + s) * math.log(dens(P, o)) - s * math.log(dens(Q, o)))  # noqa: E731
    W = 30 if noise == "gaussian" else 60
    val = sum(integrate.quad(f, lo, hi, epsabs=0, epsrel=1e-13, limit=200)[0]
              for lo, hi in ((-W, -delta), (-delta, 0), (0, delta), (delta, W)))
    v = float(R.log_mgf_mpmath(s, noise, scale, q, delta, relation, dps=DPS))
    assert abs(v - math.log(val)) < 1e-11


def test_mgf_error_estimate_and_large_s():
    # huge M (log M ~ 5e5) keeps full relative precision thanks to the peak scaling
    v, err = R.log_mgf_mpmath(1000, "gaussian", 1.0, 0.01, 1.0, "remove", dps=DPS, return_error=True)
    assert err < 1e-28
    with mp.workdps(40):
        # M(s) ~ q^{1+s} e^{s(1+s)/2} (1 + O((1-q)/q e^{-s...})): exact leading term dominates at s = 1000
        lead = 1001 * mp.log(mp.mpf(0.01)) + mp.mpf(1000 * 1001) / 2
        assert abs(v - lead) < 1e-25 * abs(v)


# --------------------------------------------------------------------------
# 2. one-use delta
# --------------------------------------------------------------------------


def _gauss_delta_exact(eps, mu):
    eps, mu = mp.mpf(eps), mp.mpf(mu)
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("sigma,relation", [(1.0, "remove"), (3.0, "remove"), (0.5, "add")])
@pytest.mark.parametrize("eps", [-1.0, 0.5, 8.0, 20.0])
def test_delta_one_use_gaussian_q1(sigma, relation, eps):
    with mp.workdps(40):
        v = R.delta_one_use_mpmath(eps, "gaussian", sigma, 1.0, 1.0, relation, dps=DPS)
        exact = _gauss_delta_exact(eps, 1 / mp.mpf(sigma))
        assert abs(v / exact - 1) < 1e-25, (v, exact)  # exact goes down to ~1e-782 here


@pytest.mark.parametrize("a", [0.5, 3.0])
@pytest.mark.parametrize("frac", [-1.0, 0.0, 0.7, 0.999])
@pytest.mark.parametrize("relation", ["remove", "add"])
def test_delta_one_use_laplace_q1(a, frac, relation):
    eps = frac * a
    with mp.workdps(40):
        v = R.delta_one_use_mpmath(eps, "laplace", 1.0, 1.0, a, relation, dps=DPS)
        exact = 1 - mp.exp((mp.mpf(eps) - a) / 2)
        assert abs(v / exact - 1) < 1e-25


@pytest.mark.parametrize("noise,relation", [("gaussian", "remove"), ("gaussian", "add"),
                                            ("gaussian", "substitution"), ("laplace", "remove"),
                                            ("laplace", "substitution")])
def test_delta_one_use_against_scipy(noise, relation):
    # delta = int (P - e^eps Q)_+ with plain scipy quad on a fine fixed partition
    q, scale, delta, eps = 0.3, 1.0, 1.0, 0.1
    P, Q = R._components(relation, q, delta)

    def dens(comps, o):
        if noise == "gaussian":
            return sum(w * math.exp(-0.5 * ((o - c) / scale) ** 2) / math.sqrt(2 * math.pi) for w, c in comps)
        return sum(w * math.exp(-abs(o - c)) / 2 for w, c in comps)

    f = lambda o: max(dens(P, o) - math.exp(eps) * dens(Q, o), 0.0)  # noqa: E731
    edges = np.linspace(-40, 40, 801)
    val = sum(integrate.quad(f, lo, hi, epsabs=1e-17, epsrel=1e-12)[0] for lo, hi in zip(edges[:-1], edges[1:]))
    v = float(R.delta_one_use_mpmath(eps, noise, scale, q, delta, relation, dps=DPS))
    assert abs(v - val) < 1e-11 * max(val, 1e-3)
    assert v > 1e-4


def test_delta_one_use_add_remove_is_max_and_flat_level():
    r = R.delta_one_use_mpmath(0.05, "gaussian", 1.0, 0.3, 1.0, "remove")
    a = R.delta_one_use_mpmath(0.05, "gaussian", 1.0, 0.3, 1.0, "add")
    assert R.delta_one_use_mpmath(0.05, "gaussian", 1.0, 0.3, 1.0, "add_remove") == max(r, a)
    # eps exactly at the Laplace "add" loss level a (flat part of L): delta = 0, no hang
    assert R.delta_one_use_mpmath(1.0, "laplace", 1.0, 1.0, 1.0, "add") == 0
    # just below a flat Laplace level c: delta = P(o >= Delta) (1 - e^{eps - c}) to first order
    with mp.workdps(40):
        q = mp.mpf(0.3)  # the binary value of 0.3, as the reference uses
        c = mp.log((1 - q) + q * mp.e)
        eps = float(c) - 1e-9
        tail = (1 - q) * mp.exp(-1) / 2 + q / 2
        v = R.delta_one_use_mpmath(eps, "laplace", 1.0, 0.3, 1.0, "remove")
        # (the monotone piece just below Delta adds O(1e-9) relative: second order in eps - c)
        assert abs(v / (tail * -mp.expm1(eps - c)) - 1) < 2e-9


# --------------------------------------------------------------------------
# 3. brute-force bracket
# --------------------------------------------------------------------------


@functools.cache
def _q1_gauss_k2(grid):
    eps = np.array([-0.5, 0.0, 0.5, 1.0, 2.0, 3.0])
    t0 = time.perf_counter()
    lo, up = R.delta_bracket_bruteforce(eps, 2, "gaussian", 2.0, 1.0, 1.0, "remove", grid=grid)
    return eps, lo, up, time.perf_counter() - t0


def test_bracket_q1_gaussian_k2_contains_exact():
    # sigma = 2, Delta = 1, two uses = one Gaussian with mu = sqrt(2) / 2
    eps, lo, up, _ = _q1_gauss_k2(1e-5)
    mu = math.sqrt(2) / 2
    exact = ndtr(-eps / mu + mu / 2) - np.exp(eps) * ndtr(-eps / mu - mu / 2)
    assert np.all(lo <= exact) and np.all(exact <= up)
    assert np.all(up - lo <= 2 * 1e-5)  # <= k h
    assert np.all((up - lo) / exact < 1.5e-4)  # measured 1.7e-5 (eps=-0.5) .. 1.2e-4 (eps=3, delta=7e-6)


def test_bracket_width_shrinks_linearly_with_grid():
    _, lo4, up4, _ = _q1_gauss_k2(1e-4)
    _, lo5, up5, _ = _q1_gauss_k2(1e-5)
    ratio = (up4 - lo4) / (up5 - lo5)
    assert np.all((ratio > 8) & (ratio < 12)), ratio


@pytest.mark.parametrize("noise,relation,q", [("gaussian", "remove", 0.2), ("gaussian", "add", 0.2),
                                              ("gaussian", "substitution", 0.05),
                                              ("laplace", "remove", 0.5), ("laplace", "substitution", 0.3)])
def test_bracket_k1_contains_mpmath(noise, relation, q):
    eps = np.array([-0.3, 0.02, 0.15])
    h = 2e-5
    lo, up = R.delta_bracket_bruteforce(eps, 1, noise, 1.0, q, 1.0, relation, grid=h)
    for e, l, u in zip(eps, lo, up):
        ref = float(R.delta_one_use_mpmath(e, noise, 1.0, q, 1.0, relation, dps=20))
        assert l <= ref <= u
        # the bounds move every loss by <= h up / down (Gaussian: exactly to the two neighbouring
        # grid points), which moves delta by <= (1 - e^{-h}) P(L > eps - h) <= h each way
        assert u - l <= (1 if noise == "gaussian" else 2) * h + 1e-12


def test_bracket_laplace_q1_k2_contains_reference():
    a = 1.0
    eps = np.array([-1.5, -0.2, 0.0, 0.6, 1.4])
    lo, up = R.delta_bracket_bruteforce(eps, 2, "laplace", 1.0, 1.0, a, "remove", grid=1e-5)
    for e, l, u in zip(eps, lo, up):
        ref = laplace_delta_quad_k2(float(e), a)  # scipy quad, accurate to ~1e-14
        assert l - 1e-13 <= ref <= u + 1e-13
        assert u - l <= 2 * 2 * 1e-5 + 1e-12  # <= 2 k h (the atoms at +-a lie on the grid)


def test_bracket_brackets_mgf():
    # for s > 0, e^{s l} is increasing, so E[e^{sL}] over the optimistic / pessimistic one-use PLDs
    # brackets M(s): ties the quadrature reference (1.) to the brute-force one (3.)
    for noise in R.NOISES:
        pes, opt = R._one_use(noise, 1.0, 0.1, 1.0, "remove", 2e-5, 1e-30)
        for s in (0.5, 2.0):
            m = float(mp.exp(R.log_mgf_mpmath(s, noise, 1.0, 0.1, 1.0, "remove", dps=20)))
            sum_opt = np.dot(opt.w, np.exp(s * (opt.j0 + np.arange(opt.w.size)) * opt.h))
            sum_pes = np.dot(pes.w, np.exp(s * (pes.j0 + np.arange(pes.w.size)) * pes.h))
            assert sum_opt <= m <= sum_pes + 1e-20  # (the 1e-30 +inf mass is left out)
            assert (sum_pes - sum_opt) / m < 2.1 * s * 2e-5  # <= e^{2 s h} - 1 (e^{s h} - 1 measured)


def test_known_value_poisson_gaussian_k100_grid_1e5():
    # sigma = 1, q = 0.01, Delta = 1, k = 100, delta = 1e-5, max over add/remove: eps ~ 0.718036
    # (FFT composition by repeated squaring; ~1.5 s alone on 2 cores)
    lo, up = R.epsilon_bracket_bruteforce(1e-5, 100, "gaussian", 1.0, 0.01, 1.0, "add_remove", grid=1e-5)
    assert lo <= 0.718036 <= up
    assert up - lo < 1.1e-3  # ~ k h: measured [0.7175347, 0.7185366]


# --------------------------------------------------------------------------
# slow
# --------------------------------------------------------------------------


@pytest.mark.slow
def test_known_value_poisson_gaussian_k100_fine_grid():
    # ~35 s; measured [0.7179845, 0.7180868]
    lo, up = R.epsilon_bracket_bruteforce(1e-5, 100, "gaussian", 1.0, 0.01, 1.0, "add_remove", grid=1e-6)
    assert lo <= 0.718036 <= up
    assert up - lo < 1.1e-4


@pytest.mark.slow
@pytest.mark.parametrize("noise", R.NOISES)
@pytest.mark.parametrize("relation", R.RELATIONS)
@pytest.mark.parametrize("q", [0.01, 0.3, 1.0])
def test_bracket_k1_contains_mpmath_sweep(noise, relation, q):
    eps = np.array([-0.5, 0.0, 0.2, 0.5, 1.0, 2.0])
    lo, up = R.delta_bracket_bruteforce(eps, 1, noise, 1.0, q, 1.0, relation, grid=1e-5)
    for e, l, u in zip(eps, lo, up):
        ref = float(R.delta_one_use_mpmath(e, noise, 1.0, q, 1.0, relation, dps=20))
        assert l <= ref <= u


@pytest.mark.slow
@pytest.mark.parametrize("k", [5, 10])
def test_bracket_q1_composed_exact(k):
    # q = 1 Gaussian: k uses = one Gaussian with mu = sqrt(k) Delta / sigma;
    # q = 1 Laplace: the piecewise-Chebyshev recursion of tests/_reference.py (scipy only)
    from _reference import laplace_delta_reference

    eps = np.array([-0.5, 0.0, 1.0, 3.0])
    lo, up = R.delta_bracket_bruteforce(eps, k, "gaussian", 2.0, 1.0, 1.0, "remove", grid=1e-5)
    mu = math.sqrt(k) / 2.0
    exact = ndtr(-eps / mu + mu / 2) - np.exp(eps) * ndtr(-eps / mu - mu / 2)
    assert np.all(lo <= exact) and np.all(exact <= up)
    assert np.all(up - lo <= k * 1e-5 + 1e-12)
    lo, up = R.delta_bracket_bruteforce(eps, k, "laplace", 1.0, 1.0, 0.5, "remove", grid=1e-5)
    ref = laplace_delta_reference(eps, k, 0.5)
    assert np.all(lo - 1e-13 <= ref) and np.all(ref <= up + 1e-13)
    assert np.all(up - lo <= 2 * k * 1e-5 + 1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("noise,relation", [("gaussian", "add_remove"), ("gaussian", "substitution"),
                                            ("laplace", "add_remove"), ("laplace", "substitution")])
def test_bracket_subsampled_k10_grids_overlap(noise, relation):
    # two valid brackets must overlap; the finer one is ~10x narrower
    eps = np.array([0.0, 0.5, 1.0, 2.0])
    lo4, up4 = R.delta_bracket_bruteforce(eps, 10, noise, 1.0, 0.1, 1.0, relation, grid=1e-4)
    lo5, up5 = R.delta_bracket_bruteforce(eps, 10, noise, 1.0, 0.1, 1.0, relation, grid=1e-5)
    assert np.all(lo4 <= up5) and np.all(lo5 <= up4)
    big = up5 > 1e-8
    assert np.all((up4 - lo4)[big] > 5 * (up5 - lo5)[big])
