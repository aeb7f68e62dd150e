"""Independent reference computations of privacy profiles (no afa imports).

These are deliberately computed by methods unrelated to afa's characteristic-
function inversion, so that agreement is meaningful evidence of correctness.

Laplace (``laplace_delta_reference``)
    With a = sensitivity / scale the privacy loss L of one use has atoms
    L = a (mass 1/2), L = -a (mass e^{-a}/2) and density f(l) = e^{(l-a)/2}/4
    on (-a, a).  Composition adds independent losses, so

        delta_0(x) = (1 - e^x)_+,
        delta_j(x) = E[delta_{j-1}(x - L)]
                   = 1/2 delta_{j-1}(x - a) + e^{-a}/2 delta_{j-1}(x + a)
                     + int_{-a}^{a} delta_{j-1}(x - l) f(l) dl.

    Closed forms of delta_j outside [-j a, j a]:
      * x >= j a:   L_1 + ... + L_j <= j a <= x, so delta_j(x) = 0;
      * x <= -j a:  L_1 + ... + L_j >= -j a >= x, so the positive part is
        inactive and delta_j(x) = 1 - e^x E[e^{-L}]^j = 1 - e^x, because
        E[e^{-L}] = e^{-a}/2 + 1/2 + (1 - e^{-a})/2 = 1 (Q is a probability
        measure and the pair has no mass at +infinity).
    Inside, delta_j is analytic on every lattice interval [i a, (i+1) a]
    (delta_0 has its only kink at 0, and the recursion only moves kinks by
    multiples of a), so it is stored as a Chebyshev interpolant per lattice
    interval; the recursion is evaluated at the Chebyshev nodes with
    Gauss-Legendre quadrature split at the lattice points.

    One use in closed form (derivation checked in test_reference_accuracy.py):
      delta_1(x) = 1 - e^x             for x <= -a,
                 = 1 - e^{(x - a)/2}   for -a <= x <= a,
                 = 0                   for x >= a.

Mixture of Gaussians (``mog_delta_reference``)
    After rescaling by sigma: P = sum_i p_i N(c_i, 1), Q = N(0, 1) with
    c_i = sensitivity_i / sigma >= 0.  The log ratio
    l(x) = log sum_i p_i exp(c_i x - c_i^2 / 2) is non-decreasing in x
    (strictly if some c_i > 0), with range (log p_0, inf) where p_0 is the
    mass of the zero-sensitivity components (range (-inf, inf) if none).

      direction "P":  delta(eps) = int (p - e^eps q)_+ over {l > eps} = {x > x*},
                      l(x*) = eps:
                      delta = sum_i p_i Phibar(x* - c_i) - e^eps Phibar(x*);
                      if eps <= log p_0 the set is all of R: delta = 1 - e^eps.
      direction "Q":  delta(eps) = int (q - e^eps p)_+ over {l < -eps} = {x < x_},
                      l(x_) = -eps:
                      delta = Phi(x_) - e^eps sum_i p_i Phi(x_ - c_i);
                      if -eps <= log p_0 the set is empty: delta = 0.

    Two-fold composition uses the product pair, whose loss is l(X1) + l(X2)
    (direction P, X ~ P) resp. -l(X1) - l(X2) (direction Q, X ~ Q), so
      delta_2^P(eps) = E_{X~P}[delta_1^P(eps - l(X))],
      delta_2^Q(eps) = E_{X~Q}[delta_1^Q(eps + l(X))].
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
from numpy.polynomial import chebyshev as C
from scipy import integrate
from scipy.optimize import brentq
from scipy.special import logsumexp, ndtr, roots_legendre

# --------------------------------------------------------------------------
# Laplace
# --------------------------------------------------------------------------


def laplace_delta_closed_form(epsilons, a: float) -> np.ndarray:
    """delta_1(eps) of one Laplace use with a = sensitivity / scale (exact formula)."""
    x = np.asarray(epsilons, dtype=float)
    out = np.where(x >= a, 0.0, -np.expm1((np.minimum(x, a) - a) / 2))
    return np.where(x <= -a, -np.expm1(np.minimum(x, 0.0)), out)


class _PiecewiseCheb:
    """delta_j as Chebyshev interpolants on the lattice intervals [i a, (i+1) a], -j <= i < j.

    ``coeffs[i + j]`` holds the Chebyshev coefficients of interval i in the
    variable t = 2 (y - i a) / a - 1; j = 0 (no intervals) is delta_0.
    """

    def __init__(self, j: int, a: float, coeffs: np.ndarray):
        self.j, self.a, self.coeffs = j, a, coeffs

    def on_intervals(self, idx: np.ndarray, y: np.ndarray) -> np.ndarray:
        """delta_j(y[r, ...]) for y[r, ...] known to lie in [idx[r] a, (idx[r]+1) a]."""
        idx = np.asarray(idx)
        extra = (slice(None),) + (None,) * (y.ndim - 1)
        below = (idx < -self.j)[extra]
        out = np.where(below, -np.expm1(np.minimum(y, 0.0)), 0.0)
        inside = (idx >= -self.j) & (idx < self.j)
        if self.j and np.any(inside):
            rows = np.clip(idx + self.j, 0, 2 * self.j - 1)
            coeffs = self.coeffs[rows]                         # (R, N)
            t = 2.0 * (y - (idx * self.a)[extra]) / self.a - 1.0
            b1 = np.zeros(y.shape)
            b2 = np.zeros(y.shape)
            for n in range(coeffs.shape[1] - 1, 0, -1):
                b1, b2 = coeffs[:, n][extra] + 2 * t * b1 - b2, b1
            cheb = coeffs[:, 0][extra] + t * b1 - b2
            out = np.where(inside[extra], cheb, out)
        return out

    def __call__(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        flat = x.ravel()
        idx = np.floor(flat / self.a).astype(int)
        # Points on a lattice boundary may use either side (delta_j is continuous).
        idx = np.clip(idx, -self.j - 1, self.j)
        out = np.empty(flat.shape)
        for i in np.unique(idx):
            sel = idx == i
            out[sel] = self.on_intervals(np.array([i]), flat[sel][None, :])[0]
        return out.reshape(x.shape)


def laplace_profiles(k: int, a: float, nodes: int = 28, gl_order: int = 36) -> list:
    """[delta_0, delta_1, ..., delta_k] for Laplace with a = sensitivity / scale (cached)."""
    return list(_laplace_profiles(int(k), float(a), int(nodes), int(gl_order)))


@functools.lru_cache(maxsize=32)
def _laplace_profiles(k: int, a: float, nodes: int, gl_order: int) -> tuple:
    if not a > 0 or k < 0 or int(k) != k:
        raise ValueError("need a > 0 and an integer k >= 0")
    tch = C.chebpts1(nodes)                                   # Chebyshev points on [-1, 1]
    vinv = np.linalg.inv(C.chebvander(tch, nodes - 1))        # values -> coefficients
    gx, gw = roots_legendre(gl_order)
    u = (gx + 1.0) / 2                                        # GL nodes on [0, 1]
    ea = math.exp(-a)
    profiles = [_PiecewiseCheb(0, a, np.zeros((0, nodes)))]
    for j in range(1, k + 1):
        prev = profiles[-1]
        ii = np.arange(-j, j)                                  # intervals of delta_j
        x = ii[:, None] * a + (tch[None, :] + 1.0) * (a / 2)   # (R, N) nodes
        # Atoms: x - a lies in interval i - 1, x + a in interval i + 1.
        val = 0.5 * prev.on_intervals(ii - 1, x - a) + 0.5 * ea * prev.on_intervals(ii + 1, x + a)
        # Continuous part: int_{-a}^{a} delta_{j-1}(x - l) e^{(l - a)/2}/4 dl
        #   = int_{x-a}^{x+a} delta_{j-1}(y) e^{(x - y - a)/2}/4 dy, split at i a and (i+1) a.
        left = ii[:, None] * a
        right = left + a
        for shift, lo, hi in ((-1, x - a, left + 0 * x), (0, left + 0 * x, right + 0 * x), (1, right + 0 * x, x + a)):
            width = hi - lo                                         # (R, N)
            y = lo[..., None] + width[..., None] * u                # (R, N, M)
            vals = prev.on_intervals(ii + shift, y)
            weight = np.exp((x[..., None] - y - a) / 2) / 4
            val = val + width * 0.5 * np.einsum("rnm,m->rn", vals * weight, gw)
        profiles.append(_PiecewiseCheb(j, a, val @ vinv.T))
    return tuple(profiles)


def laplace_delta_reference(epsilons, k: int, a: float, nodes: int = 28, gl_order: int = 36) -> np.ndarray:
    """delta_k(eps) of k composed Laplace uses with a = sensitivity / scale (abs. error ~1e-14).

    Piecewise-Chebyshev recursion; a few seconds at most for k = 50.
    """
    eps = np.asarray(epsilons, dtype=float)
    return _laplace_profiles(int(k), float(a), int(nodes), int(gl_order))[-1](eps)


def laplace_delta_quad_k2(epsilon: float, a: float) -> float:
    """delta_2(eps) = E_{L}[delta_1(eps - L)] with scipy.integrate.quad and delta_1's closed form."""
    d1 = lambda x: float(laplace_delta_closed_form(x, a))
    atoms = 0.5 * d1(epsilon - a) + 0.5 * math.exp(-a) * d1(epsilon + a)
    # delta_1(eps - l) has kinks where eps - l = +-a.
    points = [p for p in (epsilon - a, epsilon + a) if -a < p < a]
    with warnings.catch_warnings():  # quad flags roundoff at this tolerance; the tests compare values
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        cont, _ = integrate.quad(lambda l: d1(epsilon - l) * math.exp((l - a) / 2) / 4, -a, a,
                                 points=points or None, epsabs=1e-15, epsrel=1e-14, limit=200)
    return atoms + cont


def laplace_delta_mpmath_k3(epsilon: float, a: float, dps: int = 25) -> float:
    """delta_3(eps) by nested mpmath Gauss-Legendre quadrature split at every kink."""
    import mpmath as mp

    with mp.workdps(dps):
        A = mp.mpf(a)

        def d1(x):
            if x >= A:
                return mp.mpf(0)
            if x <= -A:
                return -mp.expm1(x)
            return -mp.expm1((x - A) / 2)

        def expect(f, x):
            """E[f(x - L)] for one Laplace loss, splitting at kinks of f (multiples of a)."""
            atoms = f(x - A) / 2 + mp.exp(-A) * f(x + A) / 2
            # kinks of f(x - l) at l = x - m a for integers m
            lo, hi = x - A, x + A    # y = x - l range
            m0, m1 = int(mp.floor(lo / A)) + 1, int(mp.ceil(hi / A)) - 1
            ys = [lo] + [m * A for m in range(m0, m1 + 1) if lo < m * A < hi] + [hi]
            cont = mp.quad(lambda y: f(y) * mp.exp((x - y - A) / 2) / 4, ys, method="gauss-legendre")
            return atoms + cont

        d2 = lambda x: expect(d1, x)
        return float(expect(d2, mp.mpf(epsilon)))


# --------------------------------------------------------------------------
# Mixture of Gaussians
# --------------------------------------------------------------------------


class _MoG:
    def __init__(self, sensitivities, probabilities, sigma: float):
        c = np.asarray(sensitivities, dtype=float) / float(sigma)
        p = np.asarray(probabilities, dtype=float)
        keep = p > 0
        self.c, self.p = c[keep], p[keep] / p[keep].sum()
        self.logp = np.log(self.p)
        if np.any(self.c < 0) or not np.any(self.c > 0):
            raise ValueError("need sensitivities >= 0 with at least one positive")
        zero = self.c == 0
        self.log_p0 = math.log(self.p[zero].sum()) if np.any(zero) else -math.inf

    def loss(self, x):
        """l(x) = log p(x)/q(x) = log sum_i p_i exp(c_i x - c_i^2/2)."""
        x = np.asarray(x, dtype=float)
        return logsumexp(self.logp + np.multiply.outer(x, self.c) - self.c ** 2 / 2, axis=-1)

    def root(self, level: float) -> float:
        """x with l(x) = level by scipy's brentq (level must exceed log p_0)."""
        f = lambda x: float(self.loss(x)) - level
        lo, hi = -1.0, 1.0
        while f(lo) > 0:
            lo *= 2
        while f(hi) < 0:
            hi *= 2
        return brentq(f, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)

    def roots(self, levels: np.ndarray) -> np.ndarray:
        """Vectorised l(x) = level (every level must exceed log p_0): bisection, then Newton."""
        levels = np.asarray(levels, dtype=float)
        m = int(np.argmax(self.c))
        cm, logpm = self.c[m], self.logp[m]
        # l(x) >= log p_m + c_m x - c_m^2/2, so the root is <= hi.
        hi = (levels - logpm) / cm + cm / 2 + 1.0
        step = np.ones_like(levels)
        lo = hi - step
        while True:
            bad = self.loss(lo) > levels
            if not np.any(bad):
                break
            step = np.where(bad, 2 * step, step)
            lo = np.where(bad, hi - step, lo)
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            done = (mid <= lo) | (mid >= hi)
            if np.all(done):
                break
            above = self.loss(mid) > levels
            hi = np.where(above & ~done, mid, hi)
            lo = np.where(~above & ~done, mid, lo)
        x = 0.5 * (lo + hi)
        for _ in range(2):  # Newton polish: l'(x) = E_posterior[c] > 0
            logw = self.logp + np.multiply.outer(x, self.c) - self.c ** 2 / 2
            w = np.exp(logw - logsumexp(logw, axis=-1)[..., None])
            slope = w @ self.c
            x = np.where(slope > 0, x - (self.loss(x) - levels) / np.where(slope > 0, slope, 1.0), x)
        return x

    def delta1(self, eps, direction: str) -> np.ndarray:
        """One use, vectorised over eps (closed form once the root is known)."""
        eps = np.asarray(eps, dtype=float)
        out = np.empty(eps.shape)
        if direction == "P":
            full = eps <= self.log_p0                          # {l > eps} is all of R
            out[full] = -np.expm1(eps[full])
            e = eps[~full]
            x = self.roots(e)
            out[~full] = ndtr(np.subtract.outer(self.c, x)).T @ self.p - np.exp(e) * ndtr(-x)
        elif direction == "Q":
            empty = -eps <= self.log_p0                        # {l < -eps} is empty
            out[empty] = 0.0
            e = eps[~empty]
            x = self.roots(-e)
            out[~empty] = ndtr(x) - np.exp(e) * (ndtr(np.subtract.outer(x, self.c)) @ self.p)
        else:
            raise ValueError("direction must be 'P' or 'Q'")
        return np.maximum(out, 0.0)

    def density(self, x, direction: str) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        phi = lambda z: np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
        if direction == "P":
            return phi(np.subtract.outer(x, self.c)) @ self.p
        return phi(x)

    def _x_range(self) -> tuple[float, float]:
        return -14.0, float(self.c.max()) + 14.0

    def _switch_point(self, eps: float, direction: str) -> list:
        """Outputs x where delta_1's argument crosses the end of the root-formula regime.

        With a zero-sensitivity component, delta_1^P(y) switches to 1 - e^y at
        y = log p_0 and delta_1^Q(y) to 0 at y = -log p_0.  The switch is C^inf
        but not analytic (the correction behaves like exp(-log^2(dy) / (2 c^2))),
        so the integral over x is split there and graded towards it.
        """
        if self.log_p0 == -math.inf:
            return []
        level = eps - self.log_p0 if direction == "P" else -eps - self.log_p0
        if level <= self.log_p0:
            return []
        x0 = float(self.roots(np.array([level]))[0])
        lo, hi = self._x_range()
        return [x0] if lo < x0 < hi else []

    def _nodes(self, breaks: list, width: float, order: int, grading: int = 60):
        """Composite Gauss-Legendre nodes/weights on the x range, graded geometrically at ``breaks``."""
        lo, hi = self._x_range()
        gx, gw = roots_legendre(order)
        edges = [lo] + sorted(breaks) + [hi]
        panels = []
        for u, v in zip(edges[:-1], edges[1:]):
            n = max(1, int(math.ceil((v - u) / width)))
            cuts = list(np.linspace(u, v, n + 1))
            if u in breaks:      # grade the first panel towards u
                w0 = cuts[1] - u
                cuts = [u + w0 * 2.0 ** -m for m in range(grading, 0, -1)] + cuts[1:]
                cuts = [u] + cuts
            if v in breaks:      # grade the last panel towards v
                w0 = v - cuts[-2]
                cuts = cuts[:-1] + [v - w0 * 2.0 ** -m for m in range(1, grading + 1)] + [v]
            panels.extend(zip(cuts[:-1], cuts[1:]))
        a = np.array([p[0] for p in panels])
        b = np.array([p[1] for p in panels])
        half, mid = 0.5 * (b - a), 0.5 * (a + b)
        x = (mid[:, None] + half[:, None] * gx[None, :]).ravel()
        w = (half[:, None] * gw[None, :]).ravel()
        return x, w

    def delta2(self, eps: float, direction: str, width: float = 0.125, order: int = 24) -> float:
        """E_X[delta_1(eps -+ l(X))] by composite Gauss-Legendre over the output x."""
        sign = -1.0 if direction == "P" else 1.0
        x, w = self._nodes(self._switch_point(eps, direction), width, order)
        vals = self.density(x, direction) * self.delta1(eps + sign * self.loss(x), direction)
        return float(vals @ w)

    def delta1_scalar(self, eps: float, direction: str) -> float:
        """delta_1 for one eps with scipy's brentq root (independent of :meth:`roots`)."""
        if direction == "P":
            if eps <= self.log_p0:
                return -math.expm1(eps)
            x = self.root(eps)
            return float(np.sum(self.p * ndtr(self.c - x)) - math.exp(eps) * ndtr(-x))
        if -eps <= self.log_p0:
            return 0.0
        x = self.root(-eps)
        return float(ndtr(x) - math.exp(eps) * np.sum(self.p * ndtr(x - self.c)))

    def delta2_quad(self, eps: float, direction: str) -> float:
        """The same expectation with adaptive scipy.integrate.quad (slow, for cross-checks)."""
        sign = -1.0 if direction == "P" else 1.0
        phi = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
        if direction == "P":
            dens = lambda x: sum(pi * phi(x - ci) for pi, ci in zip(self.p, self.c))
        else:
            dens = phi
        f = lambda x: dens(x) * self.delta1_scalar(eps + sign * float(self.loss(x)), direction)
        lo, hi = self._x_range()
        cuts = set([0.0] + list(self.c) + self._switch_point(eps, direction))
        grid = [lo] + sorted(q for q in cuts if lo < q < hi) + [hi]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", integrate.IntegrationWarning)
            return sum(integrate.quad(f, u, v, epsabs=1e-14, epsrel=1e-13, limit=400)[0]
                       for u, v in zip(grid[:-1], grid[1:]))


def mog_delta_reference(epsilons, sensitivities, probabilities, sigma: float,
                        direction: str = "P", k: int = 1) -> np.ndarray:
    """delta(eps) of k in {1, 2} uses of the mixture-of-Gaussians pair, one direction ("P" or "Q")."""
    mog = _MoG(sensitivities, probabilities, sigma)
    if k not in (1, 2):
        raise ValueError("k must be 1 or 2")
    if direction not in ("P", "Q"):
        raise ValueError("direction must be 'P' or 'Q'")
    eps = np.asarray(epsilons, dtype=float)
    if k == 1:
        return mog.delta1(eps.ravel(), direction).reshape(eps.shape)
    return np.vectorize(lambda e: mog.delta2(float(e), direction), otypes=[float])(eps)


def mog_delta_quad_k1(epsilon: float, sensitivities, probabilities, sigma: float, direction: str = "P") -> float:
    """delta_1 by direct quadrature of (p - e^eps q)_+ (resp. (q - e^eps p)_+), split at the root."""
    mog = _MoG(sensitivities, probabilities, sigma)
    p = lambda x: float(mog.density(x, "P"))
    q = lambda x: float(mog.density(x, "Q"))
    if direction == "P":
        g = lambda x: max(p(x) - math.exp(epsilon) * q(x), 0.0)
        level = epsilon
    else:
        g = lambda x: max(q(x) - math.exp(epsilon) * p(x), 0.0)
        level = -epsilon
    lo, hi = -40.0, float(mog.c.max()) + 40.0
    pts = [lo, hi]
    if level > mog.log_p0:
        r = mog.root(level)
        if lo < r < hi:
            pts = [lo, r, hi]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        return sum(integrate.quad(g, u, v, epsabs=1e-15, epsrel=1e-13, limit=400)[0]
                   for u, v in zip(pts[:-1], pts[1:]))


def mog_delta_quad_k2(epsilon: float, sensitivities, probabilities, sigma: float, direction: str = "P") -> float:
    """delta_2 of one direction by adaptive scipy quad over the output (slow; cross-check only)."""
    return _MoG(sensitivities, probabilities, sigma).delta2_quad(float(epsilon), direction)


def laplace_delta_mpmath(epsilon: float, k: int, a: float, dps: int = 60) -> float:
    """delta_k(eps) of k composed Laplace uses, exactly, by enumerating how each use's loss arose.

    Each use's loss is +a (mass 1/2), -a (mass e^{-a}/2) or a - 2u with u of
    (unnormalised) density e^{-u}/2 on (0, a).  With n_down uses at -a, n uses
    in the continuous part and the rest at +a, the loss is A - 2V with
    A = a (k - 2 n_down) and V the sum of the n u's, whose density is
    2^-n e^{-v} g_n(v), g_n(v) = sum_m (-1)^m C(n, m) (v - m a)_+^{n-1} / (n-1)!
    (the box-constrained simplex volume).  Then
        E[(1 - e^{eps - A + 2V})_+] = int_0^{min(x*, n a)} (e^{-v} - e^{eps - A} e^{v}) 2^-n g_n(v) dv,
    x* = (A - eps)/2, and every piece integrates in closed form:
        int_{ma}^{V} (v - ma)^{n-1} e^{-v} / (n-1)! dv = e^{-ma} P(n, V - ma),
        int_{ma}^{V} (v - ma)^{n-1} e^{+v} / (n-1)! dv = e^{ma} w^n / n! 1F1(n; n+1; w), w = V - ma.
    Evaluated with ``dps`` digits (the alternating sum over m needs them).
    """
    import mpmath as mp

    with mp.workdps(dps):
        a_, eps_ = mp.mpf(a), mp.mpf(epsilon)
        total = mp.mpf(0)
        n_down = 0
        while a_ * (k - 2 * n_down) > eps_:
            big_a = a_ * (k - 2 * n_down)
            x_star = (big_a - eps_) / 2
            for n in range(0, k - n_down + 1):
                n_up = k - n_down - n
                log_weight = (mp.loggamma(k + 1) - mp.loggamma(n_up + 1) - mp.loggamma(n_down + 1)
                              - mp.loggamma(n + 1) - (n_up + n_down) * mp.log(2) - n_down * a_)
                if n == 0:
                    total += mp.exp(log_weight) * -mp.expm1(eps_ - big_a)
                    continue
                upper = min(x_star, n * a_)
                part = mp.mpf(0)
                m = 0
                while m <= n and m * a_ < upper:
                    w = upper - m * a_
                    falling = mp.exp(-m * a_) * mp.gammainc(n, 0, w, regularized=True)
                    rising = mp.exp(m * a_ + eps_ - big_a) * w ** n / mp.factorial(n) * mp.hyp1f1(n, n + 1, w)
                    part += (-1) ** m * mp.binomial(n, m) * (falling - rising)
                    m += 1
                total += mp.exp(log_weight) * part / mp.mpf(2) ** n
            n_down += 1
        return float(total)
