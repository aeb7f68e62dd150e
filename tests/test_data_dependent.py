"""Gaussian noise with a data-dependent variance (Zhu, Dong & Wang 2022, App. A Example 15).

Ground truth is computed here, independently of afa:

* ``hockey_stick_mpmath``: the hockey-stick divergence int max(p(x) - e^eps q(x), 0) dx of
  the pair P = N(0, s1^2), Q = N(m, s2^2) (or its swap) by 40-digit mpmath quadrature
  of the densities, split at the roots of the quadratic log(p/q)(x) = eps;
* ``composed_mpmath``: k uses, from the law of the composed loss: with m = 0 the loss
  sum_i (alpha + beta Z_i + gamma Z_i^2) is k alpha - k beta^2/(4 gamma) + gamma X with
  X ~ noncentral chi^2_k(k beta^2/(4 gamma^2)), and delta = E[(1 - e^{eps - L})_+] is a
  one-dimensional mpmath integral against the (noncentral) chi-square density;
* the characteristic function E_P[e^{itL}] by direct numerical integration over the output.
"""

from __future__ import annotations

import functools
import math

import mpmath as mp
import numpy as np
import pytest
from scipy import integrate

import afa
from afa.numerics.exact import (
    data_dependent_gaussian_delta,
    data_dependent_gaussian_log_delta,
    ddg_log_delta,
    gaussian_delta,
)

CASES = [(2 ** 0.5, 1.0, 0.0), (1.0, 2 ** 0.5, 0.0), (1.5, 1.0, 1.0), (1.0, 1.3, 2.0)]
DIRECTIONS = ("remove", "add")


# ---------------------------------------------------------------------------
# Independent references
# ---------------------------------------------------------------------------

def _pair(s1, s2, m, direction):
    """(mean, sd) of the direction's own distribution and of the other one."""
    own, other = ((0, s1), (m, s2))
    return (own, other) if direction == "remove" else (other, own)


@functools.cache
def hockey_stick_mpmath(eps: float, s1: float, s2: float, m: float, direction: str) -> mp.mpf:
    """int max(p - e^eps q, 0) dx: 30-digit Gauss-Legendre quadrature of the densities on panels
    split at the roots of log p - log q = eps and around them and the mean of P."""
    with mp.workdps(30):
        (mp_, sp), (mq, sq) = [(mp.mpf(a), mp.mpf(b)) for a, b in _pair(s1, s2, m, direction)]
        e = mp.mpf(eps)
        half_log_2pi = mp.log(2 * mp.pi) / 2

        def log_p(x):
            return -(x - mp_) ** 2 / (2 * sp ** 2) - mp.log(sp) - half_log_2pi

        def log_q(x):
            return -(x - mq) ** 2 / (2 * sq ** 2) - mp.log(sq) - half_log_2pi

        def integrand(x, shift):
            lp, lq = log_p(x), log_q(x) + e
            return mp.exp(lp - shift) * -mp.expm1(lq - lp) if lp > lq else mp.mpf(0)

        # log p - log q - eps = a x^2 + b x + c
        a = 1 / (2 * sq ** 2) - 1 / (2 * sp ** 2)
        b = mp_ / sp ** 2 - mq / sq ** 2
        c = mq ** 2 / (2 * sq ** 2) - mp_ ** 2 / (2 * sp ** 2) + mp.log(sq / sp) - e
        if a == 0:
            roots = [] if b == 0 else [-c / b]
        else:
            disc = b * b - 4 * a * c
            roots = [] if disc <= 0 else sorted([(-b - mp.sqrt(disc)) / (2 * a), (-b + mp.sqrt(disc)) / (2 * a)])
        # Panels: P's bulk, each root and around it at the local width of the integrand.
        points = {-mp.inf, mp.inf} | {mp_ + k * sp for k in (-40, -20, -10, -3, 0, 3, 10, 20, 40)}
        for r in roots:
            width = sp / (abs(r - mp_) / sp + 1)
            points.add(r)
            points.update(r + sign * k * width for k in (1, 3, 10, 30, 100) for sign in (-1, 1))
        if len(roots) == 2:
            points.add((roots[0] + roots[1]) / 2)
        points = sorted(points)
        panels = []
        for lo, hi in zip(points[:-1], points[1:]):
            inner = (lo + hi) / 2 if mp.isfinite(lo) and mp.isfinite(hi) else (hi - 1 if mp.isfinite(hi) else lo + 1)
            if log_p(inner) > log_q(inner) + e:  # else outside A = {p > e^eps q}: the integrand vanishes
                candidates = [v for v in (lo, hi) if mp.isfinite(v)] + ([mp_] if lo < mp_ < hi else [])
                panels.append((lo, hi, max(log_p(v) for v in candidates)))
        if not panels:
            return mp.mpf(0)
        top = max(shift for _, _, shift in panels)
        total = mp.mpf(0)
        for lo, hi, shift in panels:
            if shift < top - 200:
                continue  # p < e^-200 of its largest value in A over the whole panel: negligible
            # mpmath's quad stops at an absolute tolerance: scale each panel to order one.
            total += mp.exp(shift) * mp.quad(lambda x: integrand(x, shift), [lo, hi], method="gauss-legendre")
        return +total


def test_reference_matches_normal_cdf_closed_form():
    """The quadrature reference itself, against P(A) - e^eps Q(A) from mpmath's normal CDF (40 digits)."""
    for s1, s2, m, direction, eps in [(1.5, 1.0, 1.0, "remove", 3.0), (1.5, 1.0, 1.0, "add", 0.2),
                                      (2 ** 0.5, 1.0, 0.0, "remove", 30.0), (1.0, 1.3, 2.0, "remove", 2.0)]:
        with mp.workdps(40):
            (mp_, sp), (mq, sq) = [(mp.mpf(a), mp.mpf(b)) for a, b in _pair(s1, s2, m, direction)]
            a = 1 / (2 * sq ** 2) - 1 / (2 * sp ** 2)
            b = mp_ / sp ** 2 - mq / sq ** 2
            c = mq ** 2 / (2 * sq ** 2) - mp_ ** 2 / (2 * sp ** 2) + mp.log(sq / sp) - eps
            r1, r2 = sorted([(-b - mp.sqrt(b * b - 4 * a * c)) / (2 * a), (-b + mp.sqrt(b * b - 4 * a * c)) / (2 * a)])

            def mass(mean, sd):  # of (r1, r2) if a < 0, else of its complement (as two tails)
                if a < 0:
                    return mp.ncdf((r2 - mean) / sd) - mp.ncdf((r1 - mean) / sd)
                return mp.ncdf((r1 - mean) / sd) + mp.ncdf((mean - r2) / sd)
            closed = mass(mp_, sp) - mp.exp(eps) * mass(mq, sq)
            assert abs(hockey_stick_mpmath(eps, s1, s2, m, direction) / closed - 1) < 1e-20


@functools.cache
def composed_mpmath(eps: float, k: int, alpha: float, beta: float, gamma: float) -> float:
    """E[(1 - e^{eps - L})_+] for L = sum_{i<=k} alpha + beta Z_i + gamma Z_i^2, Z_i iid N(0, 1)."""
    with mp.workdps(30):
        e, alpha, beta, gamma = map(mp.mpf, (eps, alpha, beta, gamma))
        lam = k * beta ** 2 / (4 * gamma ** 2)
        base = k * alpha - k * beta ** 2 / (4 * gamma)
        nu = mp.mpf(k) / 2

        def density(x):  # noncentral chi^2_k(lam)
            if x <= 0:
                return mp.mpf(0)
            if lam == 0:
                return x ** (nu - 1) * mp.exp(-x / 2) / (2 ** nu * mp.gamma(nu))
            bessel = mp.besseli(nu - 1, mp.sqrt(lam * x))
            return mp.exp(-(x + lam) / 2) / 2 * (x / lam) ** (nu / 2 - mp.mpf(1) / 2) * bessel

        cut = (e - base) / gamma
        integrand = lambda x: density(x) * -mp.expm1(e - base - gamma * x)  # noqa: E731
        if gamma > 0:
            # mp.quad's tolerance is absolute: scale the integrand to order one (deep tails reach 1e-30).
            lo = max(cut, mp.mpf(0))
            scale = density(lo + 1)
            points = [lo] + [lo + d for d in (0.01, 0.1, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256)] + [mp.inf]
            return float(scale * mp.quad(lambda x: integrand(x) / scale, points))
        if cut <= 0:
            return 0.0
        return float(mp.quad(integrand, [0, cut * mp.mpf("1e-4"), cut * mp.mpf("1e-2"), cut / 2, cut]))


def extreme_loss(s1, s2, m, direction) -> mp.mpf:
    """The minimum (heavy direction) or maximum (bounded direction) of the loss, 40 digits."""
    with mp.workdps(40):
        (_, own), (_, other) = _pair(mp.mpf(s1), mp.mpf(s2), mp.mpf(m), direction)
        return mp.log(other / own) - mp.mpf(m) ** 2 / (2 * (own ** 2 - other ** 2))


def heavy(s1, s2, direction) -> bool:
    """Whether the direction's loss is unbounded above (its own sigma is the larger)."""
    return (s1 > s2) == (direction == "remove")


def epsilon_grid(s1, s2, m, direction, deep: bool = False) -> list[float]:
    """eps values from delta ~ 1 to delta < 1e-30 (heavy direction; deep: to 1e-280), or to the
    last double below the maximum of a bounded loss, and beyond it (delta = 0)."""
    grid = [-2.0, 0.0, 1.0] + ([-0.5, 0.3] if deep else [])
    if heavy(s1, s2, direction):
        grid += [10.0, 100.0] + ([3.0, 30.0, 160.0, 320.0, 640.0] if deep else [])
    else:
        top = extreme_loss(s1, s2, m, direction)
        below = [float(top - mp.mpf(d)) for d in (("1e-1", "1e-3", "1e-6", "1e-9") if deep else ("1e-3", "1e-9"))]
        last = float(top)
        while mp.mpf(last) >= top:
            last = math.nextafter(last, -math.inf)
        grid = [v for v in grid if v < top - 0.1] + below + [last, float(top) + 1e-9, float(top) + 1.0]
    return sorted(set(grid))


# ---------------------------------------------------------------------------
# The mechanism
# ---------------------------------------------------------------------------

def _coefficients_by_definition(s1, s2, m, direction):
    """(alpha, beta, gamma) by expanding log p - log q at x = own mean + own sd * z symbolically."""
    import sympy
    z = sympy.Symbol("z")
    (mo, so), (mt, st) = [(sympy.nsimplify(a), sympy.nsimplify(b)) for a, b in _pair(s1, s2, m, direction)]
    x = mo + so * z
    loss = sympy.expand(-(x - mo) ** 2 / (2 * so ** 2) - sympy.log(so) + (x - mt) ** 2 / (2 * st ** 2) + sympy.log(st))
    poly = sympy.Poly(loss, z)
    return tuple(float(poly.coeff_monomial(z ** k)) for k in (0, 1, 2))


@pytest.mark.parametrize("s1, s2, m", CASES + [(1.0, 1.0, 1.0), (3.0, 0.5, 0.2)])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_coefficients_match_the_expanded_log_ratio(s1, s2, m, direction):
    mech = afa.DataDependentGaussian(s1, s2, m)
    assert mech.coefficients(direction) == pytest.approx(_coefficients_by_definition(s1, s2, m, direction),
                                                         rel=1e-14, abs=1e-15)


def _cf_by_integration(s1, s2, m, direction, t):
    """E[exp(i t log(own/other)(o))], o from the direction's own normal, by scipy quadrature."""
    (mo, so), (mt, st) = _pair(s1, s2, m, direction)

    def log_density(x, mean, sd):
        return -0.5 * ((x - mean) / sd) ** 2 - math.log(sd) - 0.5 * math.log(2 * math.pi)

    def part(trig):
        def f(x):
            phase = t * (log_density(x, mo, so) - log_density(x, mt, st))
            return math.exp(log_density(x, mo, so)) * trig(phase)
        edges = np.linspace(mo - 12 * so, mo + 12 * so, 241)
        return math.fsum(integrate.quad(f, a, b, epsabs=1e-15, epsrel=1e-13, limit=200)[0]
                         for a, b in zip(edges[:-1], edges[1:]))
    return complex(part(math.cos), part(math.sin))


@pytest.mark.parametrize("s1, s2, m", CASES)
def test_log_phi_matches_direct_integration(s1, s2, m):
    mech = afa.DataDependentGaussian(s1, s2, m)
    nodes = np.array([0.0, 0.3, 1.0, 2.7, -2.7])
    for direction, loss in zip(DIRECTIONS, mech.privacy_losses()):
        got = np.exp(loss.log_phi_numeric(nodes))
        expected = np.array([_cf_by_integration(s1, s2, m, direction, t) for t in nodes])
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-11)


@pytest.mark.parametrize("s1, s2, m", CASES)
def test_log_phi_normalisation_and_cumulants(s1, s2, m):
    """log phi(0) = 0, E_P[e^{-L}] = phi(i) = 1 (Q is a probability), and mean/variance of the quadratic form."""
    mech = afa.DataDependentGaussian(s1, s2, m)
    for direction, loss in zip(DIRECTIONS, mech.privacy_losses()):
        assert loss.log_phi_numeric(np.array([0.0]))[0] == 0
        # M(-1) = phi(i): the compiled template at the complex node t = i
        family, values = loss.batch
        assert abs(family.evaluate(np.array([1j]), np.array([values]))[0, 0]) < 1e-14
        alpha, beta, gamma = _coefficients_by_definition(s1, s2, m, direction)
        assert loss.cumulants == pytest.approx((alpha + gamma, beta ** 2 + 2 * gamma ** 2), rel=1e-13)


def test_strip_edge_gives_non_real_log_mgf():
    """Past s = 1/(2 gamma) the principal branch makes log M non-real (the strip test of contour and RDP)."""
    loss = afa.DataDependentGaussian(2 ** 0.5, 1.0, 1.0).privacy_losses()[0]  # gamma = 1/2: strip s < 1
    family, values = loss.batch  # (PrivacyLoss.log_phi_numeric takes real nodes only)
    s = np.array([0.5, 0.99, 1.01, 3.0, 1e6])
    log_m = family.evaluate(-1j * s, np.array([values]))[:, 0]
    assert np.all(np.abs(log_m[:2].imag) < 1e-14) and np.all(np.isfinite(log_m[:2]))
    assert np.all(np.abs(np.abs(log_m[2:].imag) - math.pi / 2) < 1e-12)


def test_symmetric_only_for_equal_sigmas():
    assert afa.DataDependentGaussian(1.0, 1.0, 1.0).symmetric
    assert not afa.DataDependentGaussian(1.5, 1.0, 1.0).symmetric
    mech = afa.DataDependentGaussian(1.5, 1.0, 1.0)
    forward, reverse = mech.privacy_losses("substitution")
    remove, add = mech.privacy_losses("add_remove")
    assert forward.batch == remove.batch and reverse.batch == add.batch and remove.batch != add.batch


@pytest.mark.parametrize("kwargs, name", [
    (dict(sigma1=0.0, sigma2=1.0), "sigma1"), (dict(sigma1=-1.0, sigma2=1.0), "sigma1"),
    (dict(sigma1=math.inf, sigma2=1.0), "sigma1"), (dict(sigma1=1.0, sigma2=math.nan), "sigma2"),
    (dict(sigma1=1.0, sigma2=0.0), "sigma2"), (dict(sigma1=1.0, sigma2=1.0, sensitivity=-0.1), "sensitivity"),
    (dict(sigma1=1.0, sigma2=1.0, sensitivity=math.inf), "sensitivity"),
    (dict(sigma1=1e-200, sigma2=1e200), "sigma1"),
])
def test_validation_names_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        afa.DataDependentGaussian(**kwargs)


def test_validation_of_the_exact_profile():
    with pytest.raises(ValueError, match="sigma1"):
        data_dependent_gaussian_delta(1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="sigma2"):
        data_dependent_gaussian_delta(1.0, 1.0, -2.0)
    with pytest.raises(ValueError, match="sensitivity"):
        data_dependent_gaussian_delta(1.0, 1.0, 1.0, -1.0)
    with pytest.raises(ValueError, match="direction"):
        data_dependent_gaussian_delta(1.0, 1.0, 2.0, direction="up")
    with pytest.raises(ValueError, match="epsilon"):
        data_dependent_gaussian_delta([0.0, math.nan], 1.5, 1.0)
    with pytest.raises(TypeError, match="sigma1"):
        data_dependent_gaussian_delta(1.0, "1", 1.0)


# ---------------------------------------------------------------------------
# Exact privacy profile of one use
# ---------------------------------------------------------------------------

def _check_profile(s1, s2, m, direction, grid, rtol, force_quadrature=False):
    own, other = (s1, s2) if direction == "remove" else (s2, s1)
    eps = np.array(grid)
    if force_quadrature:
        got = ddg_log_delta(eps, own, other, m, force_quadrature=True)
    else:
        got = data_dependent_gaussian_log_delta(eps, s1, s2, m, direction)
    worst = 0.0
    for e, value in zip(eps, got):
        truth = hockey_stick_mpmath(float(e), s1, s2, m, direction)
        if truth == 0:
            assert value == -math.inf, (e, value)
            continue
        error = abs(math.expm1(value - float(mp.log(truth))))
        worst = max(worst, error)
        assert error < rtol, (e, float(truth), value, error)
    return worst


@pytest.mark.parametrize("s1, s2, m", CASES)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_exact_profile_matches_mpmath_hockey_stick(s1, s2, m, direction):
    grid = epsilon_grid(s1, s2, m, direction)
    _check_profile(s1, s2, m, direction, grid, rtol=1e-12)
    eps = np.array(grid)
    delta = data_dependent_gaussian_delta(eps, s1, s2, m, direction)
    # the grids reach far: delta ~ 1e-30 and below (the slow test goes to 1e-280)
    if heavy(s1, s2, direction):
        assert delta.min() < 1e-30
    else:  # up to the last double below the maximum of the loss, then exactly 0
        top = extreme_loss(s1, s2, m, direction)
        above = np.array([mp.mpf(e) >= top for e in grid])
        assert np.all(delta[above] == 0) and np.all(delta[~above] > 0) and delta[~above].min() < 1e-20


@pytest.mark.slow
@pytest.mark.parametrize("s1, s2, m", CASES + [(1.0001, 1.0, 1.0), (1.0, 1.0001, 0.5), (3.0, 0.5, 0.2)])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_exact_profile_deep_tails_and_fallback_quadrature(s1, s2, m, direction):
    """Down to delta ~ 1e-280, and the positive-integrand quadrature alone (forced) on the same grid."""
    grid = epsilon_grid(s1, s2, m, direction, deep=True)
    grid = [e for e in grid if hockey_stick_mpmath(e, s1, s2, m, direction) == 0
            or mp.log(hockey_stick_mpmath(e, s1, s2, m, direction)) > -700]
    _check_profile(s1, s2, m, direction, grid, rtol=1e-12)
    _check_profile(s1, s2, m, direction, grid, rtol=1e-12, force_quadrature=True)


@pytest.mark.parametrize("s1, s2, m, direction", [(1.0001, 1.0, 1.0, "remove"), (3.0, 0.5, 0.2, "remove"),
                                                  (1.0, 1.0001, 0.5, "add")])
def test_exact_profile_near_gaussian_and_very_unequal(s1, s2, m, direction):
    """sigma1 ~ sigma2 (closed form cancels: the quadrature takes over) and sigma1 >> sigma2."""
    _check_profile(s1, s2, m, direction, [0.0, 5.0, 20.0], rtol=1e-12)
    _check_profile(s1, s2, m, direction, [0.0, 5.0, 20.0], rtol=1e-12, force_quadrature=True)


def test_equal_sigmas_are_the_gaussian_mechanism():
    eps = np.linspace(-3, 60, 22)
    np.testing.assert_allclose(data_dependent_gaussian_delta(eps, 2.0, 2.0, 1.0), gaussian_delta(eps, 0.5),
                               rtol=1e-13, atol=0)
    _check_profile(1.0, 1.0, 1.0, "remove", [-1.0, 0.0, 2.0, 20.0], rtol=1e-12)
    # P = Q: delta = (1 - e^eps)_+
    assert data_dependent_gaussian_delta(-1.0, 1.0, 1.0, 0.0) == pytest.approx(-math.expm1(-1.0), rel=1e-15)
    assert data_dependent_gaussian_delta(1.0, 1.0, 1.0, 0.0) == 0.0


def test_exact_profile_shape_and_scalar():
    value = data_dependent_gaussian_delta(1.0, 1.5, 1.0, 1.0)
    assert isinstance(value, float)
    grid = np.array([[0.0, 1.0], [2.0, 3.0]])
    out = data_dependent_gaussian_delta(grid, 1.5, 1.0, 1.0)
    assert out.shape == (2, 2) and out[0, 1] == value
    assert np.all(np.diff(out.ravel()) < 0)  # non-increasing in eps


# ---------------------------------------------------------------------------
# Through the accountant
# ---------------------------------------------------------------------------

ACCOUNTANT_EPS = [-0.5, 0.0, 0.5, 1.0, 2.0, 4.0, 8.0]


@pytest.mark.parametrize("s1, s2, m", [
    (1.5, 1.0, 1.0),
    pytest.param(2 ** 0.5, 1.0, 0.0, marks=pytest.mark.slow), pytest.param(1.0, 1.3, 2.0, marks=pytest.mark.slow)])
def test_accountant_quadrature_one_use(s1, s2, m):
    """The real-line inversion handles a CF decaying like |t|^{-1/2}, but not to 1e-10 relative.

    The node budget truncates the integral: its own error estimate is ~4e-7 (the |phi K| t envelope),
    the actual error is ~5e-11 absolute (measured); so delta is checked against the mpmath reference
    within the reported error (an honest bound) and to 1e-9 absolute.
    """
    acc = afa.Accountant().compose(afa.DataDependentGaussian(s1, s2, m))
    eps = np.array(ACCOUNTANT_EPS)
    truth = np.array([max(float(hockey_stick_mpmath(e, s1, s2, m, d)) for d in DIRECTIONS) for e in eps])
    got = acc.privacy_profile(eps, method="quadrature", estimate=True)
    assert np.all(acc.privacy_profile(eps, method="quadrature") >= truth)  # what a user reads: never below
    result = acc.delta_result(1.0, method="quadrature")
    assert result.method == "quadrature" and result.error < 1e-6
    assert np.all(np.abs(got - truth) <= result.error)
    assert np.all(np.abs(got - truth) <= 1e-9)
    keep = truth >= 1e-5
    assert np.all(np.abs(got[keep] / truth[keep] - 1) < 1e-4)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="the quadrature's node budget leaves ~1e-11..5e-11 absolute error for a CF "
                                       "decaying like |t|^(-1/2): 1e-10 relative at delta >= 1e-5 is not reached")
def test_accountant_quadrature_one_use_relative_1e10():
    s1, s2, m = 2 ** 0.5, 1.0, 0.0
    acc = afa.Accountant().compose(afa.DataDependentGaussian(s1, s2, m))
    eps = np.array(ACCOUNTANT_EPS)
    truth = np.array([max(float(hockey_stick_mpmath(e, s1, s2, m, d)) for d in DIRECTIONS) for e in eps])
    got = acc.privacy_profile(eps, method="quadrature")
    keep = truth >= 1e-5
    assert np.all(np.abs(got[keep] / truth[keep] - 1) < 1e-10)


@pytest.mark.parametrize("s1, s2, m", [(2 ** 0.5, 1.0, 0.0), pytest.param(1.5, 1.0, 1.0, marks=pytest.mark.slow)])
def test_accountant_quadrature_three_uses(s1, s2, m):
    """Three uses (CF ~ |t|^{-3/2}) against the noncentral chi-square law of the composed loss."""
    mech = afa.DataDependentGaussian(s1, s2, m)
    acc = afa.Accountant().compose(mech, times=3)
    eps = np.array([-0.5, 0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 12.0])
    truth = np.array([max(composed_mpmath(e, 3, *mech.coefficients(d)) for d in DIRECTIONS) for e in eps])
    got = acc.privacy_profile(eps, method="quadrature", estimate=True)
    assert np.all(acc.privacy_profile(eps, method="quadrature") >= truth)  # what a user reads: never below
    keep = truth >= 1e-5
    assert keep.sum() >= 6
    assert np.all(np.abs(got[keep] / truth[keep] - 1) < 1e-10)
    assert np.all(np.abs(got - truth) <= acc.delta_result(1.0, method="quadrature").error)


def test_composed_reference_matches_the_central_chi_square_closed_form():
    """m = 0, k = 6: L = k alpha + gamma X, X ~ chi^2_6, whose survival function is e^{-x/2}(1 + x/2 + x^2/8);
    delta = S(x0) - e^{eps - k alpha} (1 + 2 gamma)^{-3} S(x0 (1 + 2 gamma)), x0 = (eps - k alpha) / gamma."""
    alpha, _, gamma = afa.DataDependentGaussian(1.0, 1.3).coefficients("add")
    with mp.workdps(50):
        a, g = mp.mpf(alpha), mp.mpf(gamma)

        def survival(x):
            return mp.exp(-x / 2) * (1 + x / 2 + x * x / 8)

        for eps in (1.0, 20.0, 50.0):
            x0 = (eps - 6 * a) / g
            closed = survival(x0) - mp.exp(eps - 6 * a) * (1 + 2 * g) ** -3 * survival(x0 * (1 + 2 * g))
            assert abs(composed_mpmath(eps, 6, alpha, 0.0, gamma) / closed - 1) < 1e-13


def test_composed_reference_agrees_with_exact_profile_for_one_use():
    """The chi-square reference (k = 1) and the exact profile are independent: cross-check both."""
    mech = afa.DataDependentGaussian(1.5, 1.0, 1.0)
    for direction in DIRECTIONS:
        for e in (0.0, 1.0, 3.0):
            assert composed_mpmath(e, 1, *mech.coefficients(direction)) == pytest.approx(
                data_dependent_gaussian_delta(e, 1.5, 1.0, 1.0, direction), rel=1e-12)


def test_accountant_auto_uses_the_closed_form_for_one_use():
    """One use: 'auto' picks the closed form (relative accuracy), for delta and for eps(delta)."""
    acc = afa.Accountant().compose(afa.DataDependentGaussian(1.5, 1.0, 1.0))
    for eps in (0.0, 1.0, 4.0, 8.0):
        result = acc.delta_result(eps)
        truth = max(float(hockey_stick_mpmath(eps, 1.5, 1.0, 1.0, d)) for d in DIRECTIONS)
        assert result.method == "exact"
        assert result.value == pytest.approx(truth, rel=1e-11, abs=0)
        assert result.lower <= truth <= result.upper
    target = acc.delta(4.0, method="quadrature")
    assert acc.epsilon(target) == pytest.approx(4.0, rel=1e-6)  # quadrature's delta carries ~1e-10 abs error


@pytest.mark.parametrize("s1, s2, m, k", [(2 ** 0.5, 1.0, 0.0, 10), (1.5, 1.0, 1.0, 20), (1.0, 1.3, 0.0, 6)])
def test_contour_composed_against_chi_square_reference(s1, s2, m, k):
    """k uses by the contour method: relative 1e-10 against the chi-square law, to delta ~ 1e-30.

    For (1, 1.3) the remove direction is bounded above, so its delta is exactly 0 beyond k times its
    maximum: the contour must return 0 there (Chernoff bound), not fail.
    """
    mech = afa.DataDependentGaussian(s1, s2, m)
    acc = afa.Accountant().compose(mech, times=k)
    checked = 0
    for eps in (0.5, 2.0, 5.0, 10.0, 20.0, 35.0, 50.0):
        truth = max(composed_mpmath(eps, k, *mech.coefficients(d)) for d in DIRECTIONS)
        if truth < 1e-30:
            break
        result = acc.delta_result(eps, method="contour")
        assert result.method == "contour"
        assert result.value == pytest.approx(truth, rel=1e-10, abs=0)
        assert result.lower <= truth <= result.upper
        checked += 1
    assert checked >= 4


def test_contour_bounded_direction_is_zero_beyond_its_maximum():
    """With sigma1 < sigma2 the remove loss is at most log(s2/s1) per use: delta_remove = 0 beyond k times that."""
    mech = afa.DataDependentGaussian(1.0, 1.3)
    k = 6
    engine = afa.Accountant().compose(mech, times=k).planner.engines("contour")[0]
    beyond = k * math.log(1.3) + 0.01
    values, errors = engine.delta(np.array([beyond]))
    assert values[0] == 0.0 and errors[0] == 0.0
    below = k * math.log(1.3) - 0.5
    assert engine.delta(np.array([below]))[0][0] == pytest.approx(
        composed_mpmath(below, k, *mech.coefficients("remove")), rel=1e-10, abs=0)
