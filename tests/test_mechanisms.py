"""Mechanisms against ground truth computed independently from their definitions.

For every mechanism the characteristic function of the privacy loss,
phi(t) = E_P[exp(i t log(p/q))] restricted to q > 0 (Zhu, Dong & Wang 2022
Def. 12, App. D.2), is recomputed here from the mechanism's *definition*:

* continuous mechanisms by direct numerical integration over the output
  (scipy.integrate.quad, real and imaginary parts separately, split at the
  kinks of the loss and into panels short enough for the oscillation);
* finite-output mechanisms by enumerating the outputs of pmfs built here
  (k-RR over all k outputs, discrete Laplace / Gaussian over a wide integer
  range, normalised by summation).

Nothing the library computes is used as an expected value.
"""

from __future__ import annotations

import cmath
import math

import numpy as np
import pytest
import sympy
from scipy import integrate

import afa
from afa.mechanisms.privacy_loss import t as T

T_VALUES = (0.0, 0.3, 1.0, 2.7, 10.0, -2.7)


# ---------------------------------------------------------------------------
# Independent ground truth
# ---------------------------------------------------------------------------

def _panels(lo, hi, width):
    count = max(1, int(math.ceil((hi - lo) / width)))
    edges = np.linspace(lo, hi, count + 1)
    return list(zip(edges[:-1], edges[1:]))


def _quad(function, lo, hi):
    value, _ = integrate.quad(function, lo, hi, epsabs=1e-14, epsrel=1e-13, limit=200)
    return value


def quad_cf(log_a, log_b, t, intervals):
    """int a(o) exp(i t (log a - log b)(o)) do over ``intervals`` (list of (lo, hi, width))."""
    real, imag = [], []
    for lo, hi, width in intervals:
        pieces = [(lo, hi)] if math.isinf(lo) or math.isinf(hi) else _panels(lo, hi, width)
        for left, right in pieces:
            def phase(o):
                return t * (log_a(o) - log_b(o))
            real.append(_quad(lambda o: math.exp(log_a(o)) * math.cos(phase(o)), left, right))
            imag.append(_quad(lambda o: math.exp(log_a(o)) * math.sin(phase(o)), left, right))
    return complex(math.fsum(real), math.fsum(imag))


def quad_moments(log_a, log_b, intervals):
    """(mass, mean, variance) of the loss log(a/b) under a, by quadrature."""
    def moment(power, centre=0.0):
        parts = []
        for lo, hi, width in intervals:
            pieces = [(lo, hi)] if math.isinf(lo) or math.isinf(hi) else _panels(lo, hi, width)
            for left, right in pieces:
                parts.append(_quad(lambda o: math.exp(log_a(o)) * (log_a(o) - log_b(o) - centre) ** power,
                                   left, right))
        return math.fsum(parts)
    mass = moment(0)
    mean = moment(1) / mass
    return mass, mean, moment(2, mean) / mass


def enumerate_cf(p, q, t):
    """sum over outputs with p > 0 and q > 0 of p exp(i t log(p/q)), for P-direction pmfs p, q."""
    terms = [pi * cmath.exp(1j * t * (math.log(pi) - math.log(qi))) for pi, qi in zip(p, q) if pi > 0 and qi > 0]
    return complex(math.fsum(z.real for z in terms), math.fsum(z.imag for z in terms))


def enumerate_moments(p, q):
    pairs = [(pi, math.log(pi) - math.log(qi)) for pi, qi in zip(p, q) if pi > 0 and qi > 0]
    mass = math.fsum(w for w, _ in pairs)
    mean = math.fsum(w * l for w, l in pairs) / mass
    return mass, mean, math.fsum(w * (l - mean) ** 2 for w, l in pairs) / mass


def enumerate_inf_mass(p, q):
    return math.fsum(pi for pi, qi in zip(p, q) if pi > 0 and qi == 0)


# -- continuous dominating pairs, written from the definitions -------------

def gaussian_pair(sigma, sensitivity):
    """P = N(0, sigma^2), Q = N(sensitivity, sigma^2) (Zhu, Dong & Wang 2022, Lemma 35, up to a shift)."""
    norm = -0.5 * math.log(2 * math.pi * sigma ** 2)
    log_p = lambda o: norm - o ** 2 / (2 * sigma ** 2)  # noqa: E731
    log_q = lambda o: norm - (o - sensitivity) ** 2 / (2 * sigma ** 2)  # noqa: E731
    lo, hi = -15 * sigma, sensitivity + 15 * sigma
    slope = sensitivity / sigma ** 2
    return log_p, log_q, lo, hi, slope, sigma


def laplace_pair(scale, sensitivity):
    """P = Lap(0, scale), Q = Lap(sensitivity, scale) (Zhu, Dong & Wang 2022, Lemma 34)."""
    norm = -math.log(2 * scale)
    log_p = lambda o: norm - abs(o) / scale  # noqa: E731
    log_q = lambda o: norm - abs(o - sensitivity) / scale  # noqa: E731
    return log_p, log_q


def mog_pair(sensitivities, probabilities, sigma):
    """P = sum_i p_i N(s_i, sigma^2), Q = N(0, sigma^2) (Google DP team 2025, Sec. 3.3), in the original units."""
    norm = -0.5 * math.log(2 * math.pi * sigma ** 2)

    def log_p(o):
        return norm + math.log(math.fsum(w * math.exp(-(o - s) ** 2 / (2 * sigma ** 2))
                                         for s, w in zip(sensitivities, probabilities) if w > 0))

    def log_q(o):
        return norm - o ** 2 / (2 * sigma ** 2)

    lo = min(0.0, min(sensitivities)) - 15 * sigma
    hi = max(0.0, max(sensitivities)) + 15 * sigma
    return log_p, log_q, lo, hi, max(sensitivities) / sigma ** 2, sigma


def _width(scale, slope, t):
    return min(1.0 * scale, 3.0 / (1.0 + abs(t) * slope))


def smooth_truth(pair, t, direction):
    log_p, log_q, lo, hi, slope, scale = pair
    log_a, log_b = (log_p, log_q) if direction == 0 else (log_q, log_p)
    return quad_cf(log_a, log_b, t, [(lo, hi, _width(scale, slope, t))])


def laplace_intervals(scale, sensitivity, t):
    width = min(1.0 * scale, 3.0 / (1.0 + 2 * abs(t) / scale))
    return [(-math.inf, 0.0, None), (0.0, float(sensitivity), width), (float(sensitivity), math.inf, None)]


# -- finite pairs, written from the definitions -----------------------------

def rr_pmfs(p):
    return [p, 1 - p], [1 - p, p]


def kary_pmfs(k, p, neighboring):
    """k-RR over all k outputs: true value w.p. p, each other value w.p. (1-p)/(k-1).

    substitution: R(0) against R(1); replace_special (Google DP team 2025, Sec. 3.6), and add_remove, which
    reads k-RR as replace-special: R(0) against the uniform distribution R(bottom).
    """
    other = (1 - p) / (k - 1)
    first = [p] + [other] * (k - 1)
    if neighboring == "substitution":
        second = [other, p] + [other] * (k - 2)
    else:
        second = [1.0 / k] * k
    return first, second


def dlap_pmfs(a, sensitivity, reach=400):
    xs = range(-reach, reach + sensitivity + 1)
    weights = [math.exp(-a * abs(x)) for x in range(-reach, reach + 1)]
    total = math.fsum(weights)
    p = [math.exp(-a * abs(x)) / total for x in xs]
    q = [math.exp(-a * abs(x - sensitivity)) / total for x in xs]
    return p, q


def dgauss_pmfs(sigma, sensitivity):
    reach = int(60 * sigma) + 10
    total = math.fsum(math.exp(-x * x / (2 * sigma ** 2)) for x in range(-reach, reach + 1))
    xs = range(-reach, reach + sensitivity + 1)
    p = [math.exp(-x * x / (2 * sigma ** 2)) / total for x in xs]
    q = [math.exp(-(x - sensitivity) ** 2 / (2 * sigma ** 2)) / total for x in xs]
    return p, q


def approx_dp_pmfs(eps, delta):
    """The pair of Google DP team 2025, Sec. 3.7 Theorem 1, outputs 0..3."""
    high = (1 - delta) * math.exp(eps) / (1 + math.exp(eps))
    low = (1 - delta) / (1 + math.exp(eps))
    return [delta, high, low, 0.0], [0.0, low, high, delta]


GAUSSIANS = [(1.0, 1.0), (0.5, 1.0), (2.0, 3.0), (3.0, 0.5)]
LAPLACES = [(1.0, 1.0), (0.5, 1.0), (2.0, 3.0), (0.3, 2.0)]
MOGS = [((1.0,), (1.0,), 1.0), ((0.0, 1.0, 2.0), (0.2, 0.5, 0.3), 1.5), ((1.0, 3.0), (0.9, 0.1), 2.0),
        ((0.0, 1.0), (0.99, 0.01), 0.8)]
RRS = [0.5, 0.6, 0.75, 0.99]
KARYS = [(2, 0.7), (3, 0.5), (5, 0.2), (5, 0.6), (10, 0.95), (4, 1.0), (3, 1.0 / 3.0)]
DLAPS = [(1.0, 1), (0.5, 3), (2.0, 2), (0.1, 1)]
DGAUSS = [(1.0, 1), (2.0, 3), (0.7, 2), (5.0, 1)]
APPROX = [(1.0, 1e-5), (0.0, 0.1), (2.0, 0.0), (0.5, 0.3), (3.0, 1.0)]
PMFS = [((0.5, 0.3, 0.2), (0.2, 0.3, 0.5)), ((0.4, 0.6, 0.0), (0.1, 0.2, 0.7)),
        ((0.5, 0.5, 0.0), (0.0, 0.5, 0.5)), ((0.1, 0.2, 0.3, 0.4), (0.25, 0.25, 0.25, 0.25))]


def finite_cases():
    """(id, mechanism, neighboring, (p, q) of direction P) for every finite-output mechanism."""
    cases = []
    for p in RRS:
        for rel in afa.RandomizedResponse(p).relations:  # binary RR has no replace-special pair
            cases.append((f"RR({p})-{rel}", afa.RandomizedResponse(p), rel, rr_pmfs(p)))
    for k, p in KARYS:
        for rel in afa.mechanisms.catalog.NEIGHBORING_RELATIONS:
            cases.append((f"kRR({k},{p:.3g})-{rel}", afa.KaryRandomizedResponse(k, p), rel, kary_pmfs(k, p, rel)))
    for a, s in DLAPS:
        cases.append((f"DLap({a},{s})", afa.DiscreteLaplace(a, s), "add_remove", dlap_pmfs(a, s)))
    for sigma, s in DGAUSS:
        cases.append((f"DGauss({sigma},{s})", afa.DiscreteGaussian(sigma, s), "add_remove", dgauss_pmfs(sigma, s)))
    for eps, delta in APPROX:
        cases.append((f"ApproxDP({eps},{delta})", afa.ApproxDP(eps, delta), "substitution",
                      approx_dp_pmfs(eps, delta)))
    for p, q in PMFS:
        cases.append((f"Discrete({p},{q})", afa.DiscreteMechanism(p, q), "add_remove", (list(p), list(q))))
    return cases


FINITE = finite_cases()
FINITE_IDS = [case[0] for case in FINITE]


def _phi(loss, ts):
    return np.exp(loss.log_phi_numeric(np.asarray(ts, dtype=float)))


def _assert_close(actual, expected, tol, what):
    error = abs(complex(actual) - complex(expected))
    assert error <= tol, f"{what}: got {actual!r}, expected {expected!r} (|diff| = {error:.3g})"


# ---------------------------------------------------------------------------
# 1. Characteristic functions against the definition
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("sigma,sensitivity", GAUSSIANS)
def test_gaussian_cf_matches_integral(sigma, sensitivity):
    mech = afa.Gaussian(sigma, sensitivity)
    pair = gaussian_pair(sigma, sensitivity)
    for direction, loss in enumerate(mech.privacy_losses()):
        values = _phi(loss, T_VALUES)
        for t_value, value in zip(T_VALUES, values):
            _assert_close(value, smooth_truth(pair, t_value, direction), 1e-10, f"direction {direction}, t={t_value}")
            # Lemma 35 closed form, as a second independent reference.
            mu2 = (sensitivity / sigma) ** 2
            _assert_close(value, cmath.exp(-mu2 * (t_value ** 2 - 1j * t_value) / 2), 1e-12, "Lemma 35")


@pytest.mark.parametrize("scale,sensitivity", LAPLACES)
def test_laplace_cf_matches_integral(scale, sensitivity):
    mech = afa.Laplace(scale, sensitivity)
    log_p, log_q = laplace_pair(scale, sensitivity)
    for direction, loss in enumerate(mech.privacy_losses()):
        log_a, log_b = (log_p, log_q) if direction == 0 else (log_q, log_p)
        values = _phi(loss, T_VALUES)
        for t_value, value in zip(T_VALUES, values):
            truth = quad_cf(log_a, log_b, t_value, laplace_intervals(scale, sensitivity, t_value))
            _assert_close(value, truth, 1e-10, f"direction {direction}, t={t_value}")


@pytest.mark.parametrize("scale", [0.5, 1.0, 2.0])
def test_laplace_matches_lemma_34_first_line(scale):
    """Zhu, Dong & Wang 2022, Lemma 34 (statement) with lambda = scale, sensitivity 1.

    The proof's last line writes e^{(i alpha + 1)/lambda} for the third term;
    the integral (and the statement) give e^{(-i alpha - 1)/lambda}.
    """
    loss, _ = afa.Laplace(scale).privacy_losses()
    lam = scale
    for alpha in T_VALUES:
        up, down = cmath.exp(1j * alpha / lam), cmath.exp((-1j * alpha - 1) / lam)
        expected = 0.5 * (up + down + (up - down) / (2j * alpha + 1))
        _assert_close(_phi(loss, [alpha])[0], expected, 1e-12, f"alpha={alpha}")
        wrong = 0.5 * (up + (up - down) / (2j * alpha + 1) + cmath.exp((1j * alpha + 1) / lam))
        if alpha != 0:
            assert abs(_phi(loss, [alpha])[0] - wrong) > 1e-3


@pytest.mark.parametrize("sensitivities,probabilities,sigma", MOGS)
def test_mixture_of_gaussians_cf_matches_integral(sensitivities, probabilities, sigma):
    """Both directions; direction Q was once the complex conjugate (E_Q[e^{+it l}] instead of e^{-it l})."""
    mech = afa.MixtureOfGaussians(sensitivities, probabilities, sigma)
    pair = mog_pair(sensitivities, probabilities, sigma)
    for direction, loss in enumerate(mech.privacy_losses()):
        values = _phi(loss, T_VALUES)
        for t_value, value in zip(T_VALUES, values):
            _assert_close(value, smooth_truth(pair, t_value, direction), 1e-9, f"direction {direction}, t={t_value}")


def test_mixture_with_one_component_is_the_gaussian():
    mog = afa.MixtureOfGaussians([2.0], [1.0], 1.5)
    gauss = afa.Gaussian(1.5, 2.0).privacy_losses()[0]
    ts = np.linspace(-12, 12, 97)
    for loss in mog.privacy_losses():
        assert np.max(np.abs(_phi(loss, ts) - _phi(gauss, ts))) < 1e-10


@pytest.mark.parametrize("case", FINITE, ids=FINITE_IDS)
def test_finite_cf_matches_enumeration(case):
    _, mech, rel, (p, q) = case
    forward, backward = mech.privacy_losses(rel)
    for loss, (a, b) in ((forward, (p, q)), (backward, (q, p))):
        values = _phi(loss, T_VALUES)
        for t_value, value in zip(T_VALUES, values):
            _assert_close(value, enumerate_cf(a, b, t_value), 1e-10, f"t={t_value}")


def test_discrete_gaussian_cf_at_large_sensitivity():
    """Sensitivity 3 at sigma 0.5 pushes probability to outputs far in the tail."""
    mech = afa.DiscreteGaussian(0.5, 3)
    p, q = dgauss_pmfs(0.5, 3)
    for loss, (a, b) in zip(mech.privacy_losses(), ((p, q), (q, p))):
        for t_value, value in zip(T_VALUES, _phi(loss, T_VALUES)):
            _assert_close(value, enumerate_cf(a, b, t_value), 1e-10, f"t={t_value}")


def test_kary_substitution_loss_law_of_paper_003():
    """Google DP team 2025, Sec. 3.6 with r = k(1-p)/(k-1) the randomisation probability."""
    k, p = 6, 0.55
    r = k * (1 - p) / (k - 1)
    loss, _ = afa.KaryRandomizedResponse(k, p).privacy_losses("substitution")
    big = math.log((k * (1 - r) + r) / r)
    expected = {big: 1 - r + r / k, -big: r / k, 0.0: r * (k - 2) / k}
    got = dict(zip(loss.atoms.losses.tolist(), np.exp(loss.atoms.log_masses).tolist()))
    assert len(got) == 3
    for value, mass in expected.items():
        match = [m for l, m in got.items() if abs(l - value) < 1e-12]
        assert match and match[0] == pytest.approx(mass, rel=1e-13)


def test_kary_replace_special_loss_law_of_paper_003():
    k, p = 7, 0.4
    r = k * (1 - p) / (k - 1)
    remove, add = afa.KaryRandomizedResponse(k, p).privacy_losses("add_remove")
    for loss, law in ((remove, {math.log(k * (1 - r) + r): 1 - r + r / k, math.log(r): r * (k - 1) / k}),
                      (add, {-math.log(k * (1 - r) + r): 1 / k, -math.log(r): (k - 1) / k})):
        assert loss.atoms.size == 2 and loss.inf_mass == 0
        for (value, mass), got_l, got_m in zip(sorted(law.items()), loss.atoms.losses, np.exp(loss.atoms.log_masses)):
            assert got_l == pytest.approx(value, abs=1e-13)
            assert got_m == pytest.approx(mass, rel=1e-13)


def test_laplace_atoms():
    scale, sensitivity = 0.8, 2.0
    a = sensitivity / scale
    loss, _ = afa.Laplace(scale, sensitivity).privacy_losses()
    np.testing.assert_allclose(loss.atoms.losses, [-a, a], rtol=1e-15)
    np.testing.assert_allclose(np.exp(loss.atoms.log_masses), [math.exp(-a) / 2, 0.5], rtol=1e-14)
    assert loss.continuous and loss.inf_mass == 0


def test_continuity_flags():
    assert afa.Gaussian(1.0).privacy_losses()[0].continuous
    assert afa.Laplace(1.0).privacy_losses()[0].continuous
    assert all(l.continuous for l in afa.MixtureOfGaussians([1.0], [1.0], 1.0).privacy_losses())
    assert afa.Gaussian(1.0).privacy_losses()[0].atoms.size == 0
    for _, mech, rel, _ in FINITE:
        assert not any(l.continuous for l in mech.privacy_losses(rel))


# ---------------------------------------------------------------------------
# 2. Symbolic log-CF, total finite mass, cumulants
# ---------------------------------------------------------------------------

SYMBOLIC = ([afa.Gaussian(*g) for g in GAUSSIANS] + [afa.Laplace(*l) for l in LAPLACES]
            + [afa.RandomizedResponse(p) for p in RRS[1:]] + [afa.KaryRandomizedResponse(5, 0.6)]
            + [afa.DiscreteLaplace(*d) for d in DLAPS[:3]] + [afa.DiscreteGaussian(1.0, 1)]
            + [afa.ApproxDP(1.0, 1e-5), afa.ApproxDP(0.5, 0.3)]
            + [afa.DiscreteMechanism(*pq) for pq in PMFS])


def _same_log(a, b, tol):
    """Logs agree modulo 2 pi i."""
    diff = complex(a) - complex(b)
    k = round(diff.imag / (2 * math.pi))
    return abs(complex(diff.real, diff.imag - 2 * math.pi * k)) <= tol


@pytest.mark.parametrize("mech", SYMBOLIC, ids=repr)
@pytest.mark.parametrize("rel", afa.mechanisms.catalog.NEIGHBORING_RELATIONS)
def test_symbolic_log_phi_agrees_with_numeric(mech, rel):
    if rel not in mech.relations:
        pytest.skip(f"{type(mech).__name__} has no pair under {rel}")
    ts = np.array([0.0, 0.3, 1.0, 2.7, 10.0])
    for loss in mech.privacy_losses(rel):
        expr = loss.log_phi
        assert expr.free_symbols <= {T}
        compiled = sympy.lambdify(T, expr, modules="mpmath")
        numeric = loss.log_phi_numeric(ts)
        for t_value, value in zip(ts, numeric):
            reference = complex(compiled(t_value))
            assert _same_log(value, reference, 1e-11 * max(1.0, abs(value))), (t_value, value, reference)
        # exp(log phi(0)) is the finite mass 1 - inf_mass, evaluated by sympy itself.
        total = complex(sympy.exp(expr.subs(T, 0)).evalf(30))
        assert total.real == pytest.approx(1.0 - loss.inf_mass, abs=1e-14)
        assert abs(total.imag) < 1e-14


@pytest.mark.parametrize("mech", [afa.MixtureOfGaussians(*m) for m in MOGS], ids=repr)
def test_numeric_log_phi_is_shown_as_a_function_of_t(mech):
    for loss in mech.privacy_losses():
        assert loss.log_phi.free_symbols == {T}
        assert loss.inf_mass == 0
        assert abs(_phi(loss, [0.0])[0] - 1.0) < 1e-12


@pytest.mark.parametrize("sigma,sensitivity", GAUSSIANS)
def test_gaussian_cumulants(sigma, sensitivity):
    pair = gaussian_pair(sigma, sensitivity)
    log_p, log_q, lo, hi, _, scale = pair
    for direction, loss in enumerate(afa.Gaussian(sigma, sensitivity).privacy_losses()):
        a, b = (log_p, log_q) if direction == 0 else (log_q, log_p)
        mass, mean, var = quad_moments(a, b, [(lo, hi, 0.5 * scale)])
        assert mass == pytest.approx(1.0, abs=1e-12)
        assert loss.cumulants[0] == pytest.approx(mean, rel=1e-10, abs=1e-12)
        assert loss.cumulants[1] == pytest.approx(var, rel=1e-10)


@pytest.mark.parametrize("scale,sensitivity", LAPLACES)
def test_laplace_cumulants(scale, sensitivity):
    log_p, log_q = laplace_pair(scale, sensitivity)
    for direction, loss in enumerate(afa.Laplace(scale, sensitivity).privacy_losses()):
        a, b = (log_p, log_q) if direction == 0 else (log_q, log_p)
        mass, mean, var = quad_moments(a, b, laplace_intervals(scale, sensitivity, 0.0))
        assert mass == pytest.approx(1.0, abs=1e-12)
        assert loss.cumulants[0] == pytest.approx(mean, rel=1e-10)
        assert loss.cumulants[1] == pytest.approx(var, rel=1e-10)


@pytest.mark.parametrize("sensitivities,probabilities,sigma", MOGS)
def test_mixture_cumulants(sensitivities, probabilities, sigma):
    log_p, log_q, lo, hi, _, scale = mog_pair(sensitivities, probabilities, sigma)
    for direction, loss in enumerate(afa.MixtureOfGaussians(sensitivities, probabilities, sigma).privacy_losses()):
        a, b = (log_p, log_q) if direction == 0 else (log_q, log_p)
        mass, mean, var = quad_moments(a, b, [(lo, hi, 0.25 * scale)])
        assert mass == pytest.approx(1.0, abs=1e-12)
        assert loss.cumulants[0] == pytest.approx(mean, rel=1e-9, abs=1e-12)
        assert loss.cumulants[1] == pytest.approx(var, rel=1e-9, abs=1e-12)


NOISE_PAIR_MECHANISMS = [afa.Gaussian(1.0).poisson_subsampled(0.01), afa.Gaussian(0.3).poisson_subsampled(0.5),
                         afa.Gaussian(2.0, sensitivity=3.0).poisson_subsampled(0.001),
                         afa.Laplace(1.0).poisson_subsampled(0.01), afa.Laplace(0.4, sensitivity=2.0).poisson_subsampled(0.7),
                         *(afa.MixtureOfGaussians(*case) for case in MOGS[1:])]  # (MOGS[0]: the Gaussian)


@pytest.mark.parametrize("mechanism", NOISE_PAIR_MECHANISMS, ids=repr)
def test_noise_pair_magnitude_bounds_the_mean_and_variance(mechanism):
    """PrivacyLoss.magnitude of a noise pair's loss (a closed bound, no quadrature: what Accountant.compose's
    overflow guard sums) is at least |mean| and variance of the loss, both directions, by scipy quadrature of the
    pair's densities written out here from its shifts, weights and scale."""
    for loss in mechanism.privacy_losses():
        pair = loss.noise_pair
        if pair.noise == "gaussian":
            def log_mu(o, s=pair.scale):
                return -0.5 * (o / s) ** 2 - math.log(s * math.sqrt(2 * math.pi))
        else:
            def log_mu(o, s=pair.scale):
                return -abs(o) / s - math.log(2 * s)

        def side(shifts, log_weights):
            return lambda o: math.log(math.fsum(math.exp(w + log_mu(o - c)) for c, w in zip(shifts, log_weights)
                                                if w > -math.inf))

        log_a, log_b = side(pair.a_shifts, pair.a_log_weights), side(pair.b_shifts, pair.b_log_weights)
        edges = sorted({min(pair.shifts) - 30 * pair.scale, *pair.shifts, max(pair.shifts) + 30 * pair.scale})
        mass, mean, variance = quad_moments(log_a, log_b, [(lo, hi, 0.25 * pair.scale)
                                                           for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo])
        assert mass == pytest.approx(1.0, abs=1e-10)
        assert loss.magnitude >= max(abs(mean), variance)
        assert loss.cumulants[1] == pytest.approx(variance, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("case", FINITE, ids=FINITE_IDS)
def test_finite_cumulants_and_masses(case):
    _, mech, rel, (p, q) = case
    for loss, (a, b) in zip(mech.privacy_losses(rel), ((p, q), (q, p))):
        inf_mass = enumerate_inf_mass(a, b)
        assert loss.inf_mass == pytest.approx(inf_mass, rel=1e-12, abs=1e-15)
        if inf_mass >= 1.0:
            assert loss.atoms.size == 0
            continue
        mass, mean, var = enumerate_moments(a, b)
        assert math.exp(loss.atoms.log_mass) == pytest.approx(mass, rel=1e-13)
        assert loss.cumulants[0] == pytest.approx(mean, rel=1e-11, abs=1e-13)
        assert loss.cumulants[1] == pytest.approx(var, rel=1e-11, abs=1e-13)


# ---------------------------------------------------------------------------
# 3. Mass at +infinity
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("eps,delta", [(1.0, 1e-5), (0.0, 0.25), (2.0, 0.0), (0.3, 1.0), (1.0, 1e-3)])
def test_approx_dp_inf_mass(eps, delta):
    forward, backward = afa.ApproxDP(eps, delta).privacy_losses("add_remove")
    for loss in (forward, backward):
        assert loss.inf_mass == delta
        if delta < 1:
            np.testing.assert_allclose(loss.atoms.losses, [-eps, eps] if eps > 0 else [0.0], atol=1e-14)
            assert math.exp(loss.atoms.log_mass) == pytest.approx(1 - delta, rel=1e-14)


@pytest.mark.parametrize("delta", [1e-3, 1e-4, 1e-6, 1e-9, 0.01, 0.05, 0.1])
def test_approx_dp_inf_mass_is_exactly_delta(delta):
    """Bit-exact: epsilon(delta) of ApproxDP(eps, delta) hinges on delta >= inf_mass, compared exactly (not
    through exp(log(delta)))."""
    for loss in afa.ApproxDP(1.0, delta).privacy_losses():
        assert loss.inf_mass == delta


@pytest.mark.parametrize("eps,delta,rate", [(1.0, 1e-6, 0.01), (2.0, 0.0, 0.1), (0.3, 1e-3, 0.5)])
def test_subsampled_approx_dp_is_the_amplification_bound(eps, delta, rate):
    """Poisson sampling with rate q of an (eps, delta)-DP mechanism is (log(1 + q (e^eps - 1)), q delta)-DP
    under add/remove, tightly (Balle, Barthe & Gaboardi 2018, Thm 8): delta at that eps is q delta, and above
    q delta at 0.99 times that eps."""
    amplified = math.log1p(rate * math.expm1(eps))
    accountant = afa.Accountant().compose(afa.ApproxDP(eps, delta).poisson_subsampled(rate))
    at = accountant.delta_result(amplified)
    assert at.lower - 1e-15 <= rate * delta <= at.upper + 1e-15
    assert accountant.delta_result(amplified * 0.99).lower > rate * delta
    assert accountant.epsilon_result(rate * delta * (1 + 1e-6) + 1e-300).upper <= amplified * (1 + 1e-12)


@pytest.mark.filterwarnings("error")  # the relative width of bounds that are both +inf is 0, not NaN
def test_a_target_at_the_mass_at_infinity_keeps_a_finite_lower_bound():
    """delta(eps) = q delta exactly from the amplified eps on, and the computed mass at +infinity is q delta to a
    few units of |log(q delta)| ulps: at the target q delta the bounds must still hold the true eps."""
    accountant = afa.Accountant().compose(afa.ApproxDP(1.0, 1e-6).poisson_subsampled(0.01))
    result = accountant.epsilon_result(1e-8)
    assert result.lower <= math.log1p(0.01 * math.expm1(1.0)) <= result.upper
    below = accountant.epsilon_result(1e-9)  # below the mass at +infinity: eps is +inf, certainly
    assert below.lower == below.upper == math.inf


def test_discrete_mechanism_zeros_send_mass_to_infinity():
    p, q = (0.2, 0.3, 0.5, 0.0), (0.0, 0.3, 0.3, 0.4)
    forward, backward = afa.DiscreteMechanism(p, q).privacy_losses("add_remove")
    assert forward.inf_mass == pytest.approx(0.2, rel=1e-15)   # p-mass where q = 0
    assert backward.inf_mass == pytest.approx(0.4, rel=1e-15)  # q-mass where p = 0
    np.testing.assert_allclose(forward.atoms.losses, [0.0, math.log(5 / 3)], atol=1e-15)
    np.testing.assert_allclose(np.exp(forward.atoms.log_masses), [0.3, 0.5], rtol=1e-14)
    np.testing.assert_allclose(backward.atoms.losses, [math.log(3 / 5), 0.0], atol=1e-15)
    np.testing.assert_allclose(np.exp(backward.atoms.log_masses), [0.3, 0.3], rtol=1e-14)
    assert not afa.DiscreteMechanism(p, q).symmetric


def test_disjoint_supports_are_all_infinity():
    forward, backward = afa.DiscreteMechanism((1.0, 0.0), (0.0, 1.0)).privacy_losses()
    for loss in (forward, backward):
        assert loss.inf_mass == 1.0 and loss.atoms.size == 0
        assert np.all(np.real(loss.log_phi_numeric(np.array([0.0, 1.0]))) == -np.inf)


@pytest.mark.parametrize("rel", afa.RandomizedResponse(1.0).relations)
def test_randomized_response_one_is_all_infinity(rel):
    mech = afa.RandomizedResponse(1.0)
    forward, backward = mech.privacy_losses(rel)
    assert forward is backward
    assert forward.inf_mass == 1.0
    assert forward.atoms.size == 0
    assert np.exp(forward.log_phi_numeric(np.array([0.0, 2.0]))) == pytest.approx([0.0, 0.0], abs=0)


def test_randomized_response_one_symbolic_log_phi():
    """No finite atoms: log_phi must be -oo (it once was sympy.log(0) = zoo, so exp(...) was nan)."""
    loss, _ = afa.RandomizedResponse(1.0).privacy_losses()
    assert sympy.exp(loss.log_phi.subs(T, 0)) == 0


def test_kary_p_one_infinity_masses():
    k = 4
    remove, add = afa.KaryRandomizedResponse(k, 1.0).privacy_losses("add_remove")
    assert remove.inf_mass == 0 and remove.atoms.size == 1
    assert remove.atoms.losses[0] == pytest.approx(math.log(k), abs=1e-15)
    assert add.inf_mass == pytest.approx((k - 1) / k, rel=1e-14)
    assert add.atoms.losses[0] == pytest.approx(-math.log(k), abs=1e-15)
    assert math.exp(add.atoms.log_mass) == pytest.approx(1 / k, rel=1e-14)
    sub, _ = afa.KaryRandomizedResponse(k, 1.0).privacy_losses("substitution")
    assert sub.inf_mass == 1.0


@pytest.mark.parametrize("sigma,sensitivity", [(1.0, 5), (0.3, 3), (2.0, 4)])
def test_discrete_gaussian_inf_mass_is_within_documented_tail(sigma, sensitivity):
    """Only the dropped tails go to +infinity (Q was once truncated too: 5e-15 for (1, 5), 2e-10 for (0.3, 3))."""
    for loss in afa.DiscreteGaussian(sigma, sensitivity).privacy_losses():
        assert loss.inf_mass <= 10 * afa.mechanisms.catalog.DISCRETE_GAUSSIAN_TAIL


# ---------------------------------------------------------------------------
# 4. Symmetry
# ---------------------------------------------------------------------------

SYMMETRIC = [afa.Gaussian(1.3, 2.0), afa.Laplace(0.7, 1.5), afa.RandomizedResponse(0.8), afa.ApproxDP(1.0, 1e-4),
             afa.ApproxDP(0.0, 0.2), afa.DiscreteLaplace(0.6, 3), afa.DiscreteGaussian(1.5, 2),
             afa.DiscreteGaussian(1.0, 3), afa.DiscreteMechanism((0.5, 0.3, 0.2), (0.2, 0.3, 0.5))]


@pytest.mark.parametrize("mech", SYMMETRIC, ids=repr)
def test_symmetric_mechanisms_return_one_object(mech):
    assert mech.symmetric
    for rel in mech.relations:
        forward, backward = mech.privacy_losses(rel)
        assert forward is backward
    assert mech.privacy_losses("add_remove") is mech.privacy_losses("add_remove")  # cached


def test_a_one_component_mixture_is_the_gaussian_mechanism():
    """Its pair is the Gaussian pair: symmetric, with the Gaussian's closed form (Sommer, Meiser & Mohammadi
    2019, Thm 5) as its composition."""
    mechanism = afa.MixtureOfGaussians([1.0], [1.0], 2.0)
    assert mechanism.symmetric
    result = afa.Accountant().compose(mechanism, 10).epsilon_result(1e-6)
    truth = afa.exact.gaussian_epsilon(1e-6, math.sqrt(10) / 2.0)
    assert result.lower <= truth <= result.upper and result.upper - result.lower <= 1e-12 * truth


@pytest.mark.parametrize("mech", [afa.MixtureOfGaussians([0.5, 1.0], [0.5, 0.5], 1.0),
                                  afa.MixtureOfGaussians([0.0, 1.0], [0.5, 0.5], 1.0),
                                  afa.KaryRandomizedResponse(3, 0.6), afa.KaryRandomizedResponse(2, 0.8)], ids=repr)
def test_asymmetric_mechanisms(mech):
    forward, backward = mech.privacy_losses("add_remove")
    assert forward is not backward
    assert not mech.symmetric


def test_mixture_directions_differ_numerically():
    forward, backward = afa.MixtureOfGaussians([0.0, 2.0], [0.7, 0.3], 1.0).privacy_losses()
    ts = np.array([0.5, 1.0, 3.0])
    assert np.max(np.abs(_phi(forward, ts) - _phi(backward, ts))) > 1e-3


def test_kary_substitution_is_symmetric():
    forward, backward = afa.KaryRandomizedResponse(5, 0.6).privacy_losses("substitution")
    assert forward is backward


@pytest.mark.parametrize("p", [0.5, 0.55, 0.75, 0.9, 0.999])
def test_binary_kary_equals_randomized_response(p):
    """k = 2 under substitution is binary RR (Zhu, Dong & Wang 2022, Lemma 33)."""
    kary, _ = afa.KaryRandomizedResponse(2, p).privacy_losses("substitution")
    rr, _ = afa.RandomizedResponse(p).privacy_losses("substitution")
    np.testing.assert_allclose(kary.atoms.losses, rr.atoms.losses, rtol=1e-15, atol=0)
    np.testing.assert_allclose(kary.atoms.log_masses, rr.atoms.log_masses, rtol=1e-15, atol=0)
    assert kary.inf_mass == rr.inf_mass
    ts = np.linspace(-20, 20, 41)
    lemma33 = p * np.exp(1j * ts * math.log(p / (1 - p))) + (1 - p) * np.exp(1j * ts * math.log((1 - p) / p))
    np.testing.assert_allclose(_phi(kary, ts), lemma33, rtol=0, atol=1e-13)


# ---------------------------------------------------------------------------
# 5. Validation, equality, hashing
# ---------------------------------------------------------------------------

BAD = [
    (lambda v: afa.Gaussian(v), "sigma", [0.0, -1.0, math.nan, math.inf, "1", None, True]),
    (lambda v: afa.Gaussian(1.0, v), "sensitivity", [0.0, -2.0, math.nan, -math.inf, "x"]),
    (lambda v: afa.Laplace(v), "scale", [0.0, -0.5, math.nan, math.inf, "1.0"]),
    (lambda v: afa.Laplace(1.0, v), "sensitivity", [0.0, math.nan]),
    (lambda v: afa.RandomizedResponse(v), "p", [0.49, 1.01, -0.1, math.nan, math.inf, "0.7"]),
    (lambda v: afa.KaryRandomizedResponse(v, 0.9), "k", [1, 0, -3, 2.5, math.nan, "3", True]),
    (lambda v: afa.KaryRandomizedResponse(4, v), "p", [0.24, 1.5, math.nan, "0.5"]),
    (lambda v: afa.ApproxDP(1.0, v), "delta", [-1e-9, 1.0001, math.nan, math.inf, "0"]),
    (lambda v: afa.ApproxDP(v, 1e-5), "epsilon", [-0.1, math.nan, math.inf, "1"]),
    (lambda v: afa.DiscreteLaplace(v), "a", [0.0, -1.0, math.nan, math.inf]),
    (lambda v: afa.DiscreteLaplace(1.0, v), "sensitivity", [0, -1, 1.5, math.nan, "1"]),
    (lambda v: afa.DiscreteGaussian(v), "sigma", [0.0, -1.0, math.nan, math.inf]),
    (lambda v: afa.DiscreteGaussian(1.0, v), "sensitivity", [0, 2.5, math.inf]),
    (lambda v: afa.MixtureOfGaussians([1.0], [1.0], v), "sigma", [0.0, -1.0, math.nan]),
    (lambda v: afa.MixtureOfGaussians([1.0, 2.0], v, 1.0), "probabilities",
     [[0.5, 0.6], [-0.5, 1.5], [0.5], [0.2, 0.3, 0.5], [math.nan, 1.0]]),
    (lambda v: afa.MixtureOfGaussians(v, [0.5, 0.5], 1.0), "sensitivities",
     [[1.0], [-1.0, 2.0], [0.0, 0.0], [math.inf, 1.0], "ab"]),
    (lambda v: afa.DiscreteMechanism(v, (0.5, 0.5)), "p_pmf",
     [(0.6, 0.6), (-0.1, 1.1), (0.5, 0.5, 0.0), (math.nan, 1.0), ()]),
    (lambda v: afa.DiscreteMechanism((0.5, 0.5), v), "q_pmf", [(0.3, 0.3), (1.5, -0.5), ((0.5, 0.5),)]),
]


@pytest.mark.parametrize("build,name,values", BAD, ids=[f"{i}-{b[1]}" for i, b in enumerate(BAD)])
def test_bad_parameters_raise_naming_the_parameter(build, name, values):
    for value in values:
        with pytest.raises((ValueError, TypeError), match=name):
            build(value)


def test_bad_neighboring_relation():
    for mech in (afa.Gaussian(1.0), afa.RandomizedResponse(0.7), afa.MixtureOfGaussians([1.0], [1.0], 1.0)):
        with pytest.raises(ValueError, match="neighboring"):
            mech.privacy_losses("bogus")


def test_edge_parameters_are_accepted():
    afa.RandomizedResponse(0.5)
    afa.RandomizedResponse(1.0)
    afa.KaryRandomizedResponse(3, 1 / 3)
    afa.KaryRandomizedResponse(3.0, 1.0)
    afa.ApproxDP(0.0, 0.0)
    afa.ApproxDP(0.0, 1.0)
    afa.DiscreteLaplace(1.0, 2.0)
    assert afa.KaryRandomizedResponse(np.int64(3), 0.5).k == 3
    assert isinstance(afa.KaryRandomizedResponse(3.0, 0.5).k, int)


def test_mechanisms_are_hashable_and_equal_by_parameters():
    assert afa.Gaussian(1.0) == afa.Gaussian(1.0) == afa.Gaussian(1) == afa.Gaussian(np.float64(1.0), 1.0)
    assert afa.Gaussian(1.0) != afa.Gaussian(1.0, 2.0)
    assert afa.Gaussian(1.0) != afa.Laplace(1.0)
    assert afa.KaryRandomizedResponse(2, 0.7) != afa.RandomizedResponse(0.7)
    mechs = [afa.Gaussian(1.0), afa.Laplace(1.0), afa.RandomizedResponse(0.7), afa.KaryRandomizedResponse(3, 0.6),
             afa.ApproxDP(1.0, 1e-5), afa.DiscreteLaplace(0.5, 2), afa.DiscreteGaussian(1.0),
             afa.MixtureOfGaussians([0.0, 1.0], [0.5, 0.5], 1.0), afa.DiscreteMechanism([0.5, 0.5], [0.25, 0.75])]
    table = {m: i for i, m in enumerate(mechs)}
    twins = [afa.Gaussian(1.0), afa.Laplace(1.0), afa.RandomizedResponse(0.7), afa.KaryRandomizedResponse(3.0, 0.6),
             afa.ApproxDP(1, 1e-5), afa.DiscreteLaplace(0.5, 2), afa.DiscreteGaussian(1.0, 1),
             afa.MixtureOfGaussians((0, 1), (0.5, 0.5), 1), afa.DiscreteMechanism((0.5, 0.5), np.array([0.25, 0.75]))]
    for i, twin in enumerate(twins):
        assert twin == mechs[i] and hash(twin) == hash(mechs[i])
        assert table[twin] == i
    assert len(set(mechs + twins)) == len(mechs)


def test_mechanisms_are_immutable():
    mech = afa.Gaussian(1.0)
    with pytest.raises(AttributeError):
        mech.sigma = 2.0


def test_gaussian_extreme_ratio_fails_cleanly():
    """mu ** 2 once overflowed to a bare OverflowError inside privacy_losses()."""
    with pytest.raises(ValueError, match="sigma|sensitivity"):
        afa.Gaussian(1e-200).privacy_losses()
