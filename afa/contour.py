"""Contour-shifted inversion: delta(eps) with relative accuracy at any size.

For the finite part of one direction's privacy loss L, with moment-generating
function M(s) = E[e^{sL}] = phi(-is) (the analytic continuation of the
symbolic log-CF), and any c > 0 where M exists,

    E[(1 - e^{eps - L})_+] = (1 / 2 pi) int M(c + it) e^{-(c+it) eps} / ((c + it)(c + it + 1)) dt,

since the payoff (1 - e^{eps - x})_+ has bilateral Laplace transform
e^{-s eps} / (s (s + 1)) for Re s > 0.  delta(eps) is that plus the mass at
+infinity.  With c at the saddle point of
Psi(c) = log M(c) - c eps - log c - log(1 + c) the integrand is nearly a
positive Gaussian bump, so the trapezoid rule in t converges geometrically
and the result is accurate *relative* to delta, down to the smallest double.

The step obeys two limits (Poisson summation): the curvature of Psi at the
saddle, and h <= 2 pi c / (log(1/delta) + margin) so that the alias
e^{2 pi c / h} delta(eps - 2 pi / h) stays below rtol * delta.  Halving the
step gives the error estimate.  See the contour-shifted inversion issue and
DESIGN.md ("Numerics that matter").
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize_scalar

from .composition import ComposedLoss
from .results import AccuracyError

#: Relative accuracy the trapezoid sum is refined to (by halving its step).
RTOL = 1e-13
MAX_HALVINGS = 6
#: Most nodes one level of the trapezoid sum may use.
MAX_NODES = 200_000


class ContourInversion:
    """delta(eps) of one composed direction by saddle-point contour integration."""

    def __init__(self, loss: ComposedLoss):
        if not loss.analytic:
            raise ValueError("the contour method needs closed-form log-CFs (no numeric CF terms); "
                             "use method='quadrature'")
        if not loss.continuous:
            raise ValueError("the composition has no continuous part; use method='exact'")
        if loss.log_atomic_mass > math.log(RTOL) - 30:
            raise ValueError("the composition has atoms of non-negligible mass (e.g. Laplace with no Gaussian); "
                             "the contour integrand then decays only like 1/t^2: use method='quadrature'")
        self.loss = loss
        self.inf_mass = loss.inf_mass
        self.mean, variance = loss.cumulants
        self.scale = math.sqrt(variance)

    def log_mgf(self, s: np.ndarray) -> np.ndarray:
        """log M(s) = log phi(-is) of the composed finite part (complex s)."""
        return self.loss.log_phi_numeric(-1j * np.asarray(s, dtype=complex))

    def _psi(self, c, epsilon: float) -> np.ndarray:
        """Psi at real c > 0 (vectorised); +inf outside the MGF's strip.

        log M is real on the real axis wherever M exists; a closed form continued
        past the strip's edge returns a non-real value, which marks it.
        """
        c = np.atleast_1d(np.asarray(c, dtype=float))
        with np.errstate(over="ignore", invalid="ignore"):  # far outside the strip: inf/nan, marked below
            log_m = self.log_mgf(c)
            psi = log_m.real - c * epsilon - np.log(c) - np.log1p(c)
        outside = ~np.isfinite(psi) | (np.abs(log_m.imag) > 1e-8 * (1 + np.abs(log_m.real)))
        return np.where(outside, np.inf, psi)

    def saddle(self, epsilon: float) -> tuple[float, float, float]:
        """(c*, Psi(c*), Psi''(c*)) for ``epsilon``: a scan in log c, then Brent on the convex Psi."""
        grid = np.arange(-30.0, 60.0, 0.5)
        values = self._psi(np.exp(grid), epsilon)
        best = int(np.argmin(values))
        if not np.isfinite(values[best]) or best == grid.size - 1:
            raise AccuracyError(f"no saddle point for eps = {epsilon:.6g}: Psi has no minimum for "
                                "0 < c < e^60 (eps beyond the loss's support?); use method='quadrature'")
        found = minimize_scalar(lambda u: float(self._psi(math.exp(u), epsilon)[0]),
                                bounds=(grid[best] - 0.5, grid[best] + 0.5), method="bounded",
                                options={"xatol": 1e-7, "maxiter": 500})
        c = math.exp(found.x)
        step = 1e-4 * c
        side = self._psi(np.array([c - step, c + step]), epsilon)
        curvature = (side[0] - 2 * found.fun + side[1]) / step ** 2
        return c, float(found.fun), max(curvature, 1e-300)

    def log_finite_delta(self, epsilon: float) -> tuple[float, float]:
        """log E[(1 - e^{eps - L})_+] over the finite part, and its relative error estimate."""
        c, psi, curvature = self.saddle(epsilon)
        # Saddle-point estimate of log delta, used to set the alias limit on the step.
        log_estimate = psi - 0.5 * math.log(2 * math.pi * curvature)
        step = min(0.5 / math.sqrt(curvature), 2 * math.pi * c / (max(-log_estimate, 0.0) + 45.0))

        def node_sum(h: float, first: int, stride: int) -> float:
            """sum of Re f(j h) over j = first, first + stride, ..., until the terms are negligible."""
            total, start, chunk = 0.0, first, 64
            while True:
                t = h * (start + stride * np.arange(chunk))
                s = c + 1j * t
                log_f = self.log_mgf(s) - s * epsilon - np.log(s) - np.log1p(s) - psi
                values = np.exp(log_f).real
                total += float(values.sum())
                start += stride * chunk
                if np.max(np.exp(log_f[-8:].real)) < 1e-18 * max(abs(total), 1e-300):
                    return total
                if start > MAX_NODES:
                    raise AccuracyError(f"the contour integrand for eps = {epsilon:.6g} does not decay within "
                                        f"{MAX_NODES} nodes; use method='quadrature'")
                chunk *= 2

        # Trapezoid with step h (the t = 0 node weighs 1/2), halved until two levels agree to RTOL;
        # each level adds only the odd multiples of its step.
        total = node_sum(step, 1, 1) + 0.5
        estimate, change = total * step / math.pi, math.inf
        for _ in range(MAX_HALVINGS):
            step /= 2
            total += node_sum(step, 1, 2)
            refined = total * step / math.pi
            if not refined > 0:
                raise AccuracyError(f"the contour sum for eps = {epsilon:.6g} is not positive ({refined:.3g}): "
                                    "cancellation beyond double precision; use method='quadrature'")
            change, estimate = abs(refined - estimate) / refined, refined
            if change <= RTOL:
                break
        return psi + math.log(estimate), change + 1e-15

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """delta(eps) = inf_mass + finite part, and absolute error estimates."""
        epsilons = np.asarray(epsilons, dtype=float)
        values, errors = np.empty(epsilons.size), np.empty(epsilons.size)
        for index, epsilon in enumerate(epsilons.ravel()):
            log_value, relative = self.log_finite_delta(float(epsilon))
            finite = math.exp(log_value)
            values[index] = self.inf_mass + finite
            errors[index] = relative * finite
        return values.reshape(epsilons.shape), errors.reshape(epsilons.shape)
