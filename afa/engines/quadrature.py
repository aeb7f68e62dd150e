"""Real-line Levy inversion of a composed characteristic function.

For one direction with finite-part CF phi (mass M = 1 - m, m the mass at
+infinity), Gil-Pelaez's form of Levy's formula (Zhu, Dong & Wang 2022
Lemma 18) gives the survival function

    S(x) = Pr[x < L < inf] = M/2 + (1/pi) int_0^inf Im[e^{-itx} phi(t)] / t dt,

and the hockey-stick divergence (Lemma 19 / Lemma 37) follows from
delta(eps) = m + E[(1 - e^{eps-L})_+] = m + int_eps^inf e^{eps-y} S(y) dy:

    delta(eps) = m + M/2 + (1/pi) int_0^inf Im[e^{-it eps} phi(t) / (t (1 + it))] dt.

This single-CF form never multiplies a CDF by e^eps, so its error stays
absolute at the level of the quadrature (about 1e-15), rather than
1e-16 e^eps as with F - e^eps G.  Atoms of the loss make phi non-decaying;
when the composition has atoms of non-negligible mass (every term has some,
e.g. Laplace), their exact contribution is computed from the composed atoms
and only the remainder phi - phi_atoms is inverted numerically.

The integral is computed with composite Gauss-Legendre panels on [0, T]:
T from the decay of |phi| (with a tail estimate), the panel width from the
loss's scale (the second cumulant, i.e. -Re K''(0)) and the oscillation
e^{-itx}, then halved until two successive rules agree -- their difference
is the error estimate.  Values of phi at the nodes are computed once per
grid and reused for every x (a privacy profile is one matrix product).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import roots_legendre

from .. import budget
from ..mechanisms.privacy_loss import log_phi_and_continuous_part
from ..numerics.atoms import CompositionTooLargeError, hockey_stick
from ..results import AccuracyError, UnsupportedCompositionError
from .composition import ComposedLoss

GL_ORDER = 16
#: Node budget of one grid; beyond it the error estimate is reported as it is.
MAX_NODES = 2_000_000
MAX_HALVINGS = 12
#: Budget of one grid's numeric-CF work (terms summed by output quadratures, about 2e7 per second
#: on a 2-core machine):
#: their cost grows with t, and near-atom compositions, whose CF decays only like 1/t^2, would
#: otherwise need up to MAX_NODES nodes at t ~ 1e5 (hours).  Beyond it the grid stops where the
#: budget ends and the tail estimate reports what was left out.
MAX_WORK = 6e7
#: Most composed atoms (estimated before composing) whose hockey stick is computed exactly; more are left in
#: the CF (which then does not decay, and the tail estimate says so).
MAX_ATOMS = 2_000_000
#: Nodes per evaluation of the composed CF between checks of the time budget.
PHI_CHUNK = 65_536
_GL_X, _GL_W = roots_legendre(GL_ORDER)


@dataclass(frozen=True)
class Grid:
    """Quadrature nodes on [0, T] with phi(t) * kernel(t) precomputed, valid for x in [low, high]."""

    nodes: np.ndarray
    weighted: np.ndarray  # w_j * phi_R(t_j) * kernel(t_j)
    low: float
    high: float
    error: float          # estimated absolute error of the integral term

    def integral(self, xs: np.ndarray) -> np.ndarray:
        """(1/pi) sum_j Im[e^{-i t_j x} weighted_j] for each x."""
        out = np.empty(xs.shape)
        chunk = max(1, 8_000_000 // self.nodes.size)
        for start in range(0, xs.size, chunk):
            phase = np.outer(xs[start:start + chunk], self.nodes)
            # Elementwise products and sums: BLAS matrix-vector calls are slower here.
            terms = np.cos(phase) * self.weighted.imag - np.sin(phase) * self.weighted.real
            out[start:start + chunk] = terms.sum(axis=1)
        return out / math.pi


def _kernel_delta(nodes: np.ndarray) -> np.ndarray:
    return 1.0 / (nodes * (1.0 + 1j * nodes))


def _kernel_survival(nodes: np.ndarray) -> np.ndarray:
    return 1.0 / nodes.astype(complex)


class LevyInversion:
    """delta(eps) and the CDF of one composed direction by real-line inversion."""

    def __init__(self, loss: ComposedLoss, atol: float = 1e-13):
        if not loss.continuous:
            raise UnsupportedCompositionError("the composition has no continuous part: its CF does not decay; "
                                              "use the exact discrete composition (method='exact')")
        self.loss = loss
        self.atol = atol
        if loss.log_finite_mass == -math.inf:
            return  # every query is answered without inversion
        self.mean, variance = loss.cumulants
        self.scale = math.sqrt(max(variance, 0.0))
        if not self.scale > 0:
            raise UnsupportedCompositionError("the composed privacy loss has zero variance: nothing to invert")
        self.inf_mass = loss.inf_mass
        finite_mass = math.exp(loss.log_finite_mass)
        self.atoms = None
        if loss.log_atomic_mass > math.log(atol) - 8 and loss.estimated_atom_count <= MAX_ATOMS:
            try:
                self.atoms = loss.atoms
            except CompositionTooLargeError:
                self.atoms = None  # left in the CF; the tail estimate then reports it
        self.residual_mass = finite_mass - (math.exp(loss.log_atomic_mass) if self.atoms is not None else 0.0)
        self._grids: dict[str, Grid] = {}

    # -- public -------------------------------------------------------------
    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, float]:
        """delta(eps) of this direction and an absolute error estimate."""
        epsilons = np.asarray(epsilons, dtype=float)
        if self.loss.log_finite_mass == -math.inf:  # all mass at +infinity: delta = 1
            return np.ones(epsilons.shape), 0.0
        grid = self._grid("delta", epsilons)
        values = self.inf_mass + self.residual_mass / 2 + grid.integral(epsilons.ravel())
        if self.atoms is not None:
            values += hockey_stick(self.atoms, epsilons.ravel())
        return values.reshape(epsilons.shape), grid.error

    def cdf(self, xs: np.ndarray) -> tuple[np.ndarray, float]:
        """Pr[L <= x] of this direction (a sub-probability: +infinity excluded) and its error estimate."""
        xs = np.asarray(xs, dtype=float)
        if self.loss.log_finite_mass == -math.inf:
            return np.zeros(xs.shape), 0.0
        grid = self._grid("survival", xs)
        values = self.residual_mass / 2 - grid.integral(xs.ravel())
        if self.atoms is not None:
            weights = np.exp(self.atoms.log_masses)
            values += (self.atoms.losses[None, :] <= xs.ravel()[:, None]) @ weights
        return values.reshape(xs.shape), grid.error

    # -- grid construction -------------------------------------------------
    def residual_phi(self, nodes: np.ndarray) -> np.ndarray:
        """phi(t) minus the CF of the atoms handled exactly (in chunks, the time budget checked between them)."""
        phi = np.empty(nodes.shape, dtype=complex)
        for start in range(0, nodes.size, PHI_CHUNK):
            budget.check("evaluating the composed CF at the quadrature's nodes")
            chunk = nodes[start:start + PHI_CHUNK]
            phi[start:start + PHI_CHUNK] = np.exp(self.loss.log_phi_numeric(chunk))
            if self.atoms is not None:
                phi[start:start + PHI_CHUNK] -= np.exp(self.loss.atomic_log_phi_numeric(chunk))
        return phi

    def _grid(self, kind: str, xs: np.ndarray) -> Grid:
        low, high = float(np.min(xs)), float(np.max(xs))
        cached = self._grids.get(kind)
        if cached is not None and cached.low <= low and high <= cached.high:
            return cached
        if cached is not None:
            low, high = min(low, cached.low), max(high, cached.high)
        # Widen a little so that nearby queries (root finding) reuse the grid.
        pad = 0.25 * (high - low) + 1.0
        grid = self._build(kind, low - pad, high + pad)
        self._grids[kind] = grid
        return grid

    def _build(self, kind: str, low: float, high: float) -> Grid:
        kernel = _kernel_delta if kind == "delta" else _kernel_survival
        rate = max(abs(low - self.mean), abs(high - self.mean)) + self.scale
        width = min(2.0 / self.scale, 6.0 / rate)
        upper, tail = self._upper_limit(kernel, width)
        if upper / width * GL_ORDER > MAX_NODES:
            raise AccuracyError(
                f"x in [{low:.4g}, {high:.4g}] is too far from the privacy loss's bulk (mean {self.mean:.4g}, "
                f"standard deviation {self.scale:.4g}) for the real-line quadrature: it would need "
                f"{upper / width * GL_ORDER:.2g} nodes (limit {MAX_NODES:.0e}); use method='exact' where available")
        probes = np.linspace(low, high, 5)
        previous, previous_change = None, math.inf
        for _ in range(MAX_HALVINGS):
            nodes, weights = _panels(upper, width)
            budget.reserve(64.0 * nodes.size, "the quadrature's nodes")
            weighted = weights * self.residual_phi(nodes) * kernel(nodes)
            current = Grid(nodes, weighted, low, high, math.inf).integral(probes)
            if previous is not None:
                change = float(np.max(np.abs(current - previous)))
                rounding = 1e-16 * math.sqrt(nodes.size) * float(np.sum(np.abs(weighted))) / math.pi
                # Numeric CF terms (subsampled mechanisms): phi itself is off by up to sum_i k_i rtol_i.
                rounding += self.loss.log_phi_rtol * float(np.sum(np.abs(weights * kernel(nodes)))) / math.pi
                error = change + tail + rounding
                # Stop when converged (to atol, or to the tail error that refinement cannot reduce),
                # out of budget, or at the noise floor (halving no longer helps).
                if (change <= max(self.atol / 4, tail / 10, 2 * rounding) or 2 * nodes.size > MAX_NODES
                        or 2 * self._work(nodes) > MAX_WORK or change > previous_change / 4):
                    return Grid(nodes, weighted, low, high, error)
                previous_change = change
            previous = current
            width /= 2
        return Grid(nodes, weighted, low, high, error)

    def _work(self, nodes: np.ndarray) -> float:
        """Numeric-CF work of evaluating phi at ``nodes`` (see MAX_WORK)."""
        return float(np.sum(self.loss.evaluation_cost(nodes)))

    def _envelope(self, kernel, nodes: np.ndarray) -> np.ndarray:
        """A bound on |phi_R K| t / pi at increasing ``nodes`` that does not oscillate, as far as the CF can be
        evaluated.

        |phi_R| itself is no guide to the tail: a term with atoms on a lattice is periodic in t
        (period 2 pi / spacing), so |phi_R| has replicas of its bump at t = 0 wherever the atoms'
        phases realign -- between the scan's nodes, damped only by the continuous terms.  Writing
        each term's CF as a_i + c_i (its atoms a_i, of mass A_i, and its continuous part c_i),
        |prod_i (a_i + c_i)^{k_i}| <= prod_i (A_i + |c_i|)^{k_i} =: B, and with the composed atoms
        removed |phi_R| <= B - prod_i A_i^{k_i} (the difference is increasing in every |a_i|).
        B keeps only the continuous parts' decay.  A numeric CF refuses (AccuracyError) beyond its
        cost limit; the envelope then stops at the last node it could evaluate, and the tail
        estimate built from it reports what was left out.
        """
        try:
            return np.exp(self._log_residual_bound(nodes)) * np.abs(kernel(nodes)) * nodes / math.pi
        except budget.BudgetExceededError:
            raise
        except AccuracyError:
            if nodes.size == 1:
                return np.zeros(0)
            half = nodes.size // 2
            first = self._envelope(kernel, nodes[:half])
            if first.size < half:
                return first
            return np.concatenate((first, self._envelope(kernel, nodes[half:])))

    def _log_residual_bound(self, nodes: np.ndarray) -> np.ndarray:
        """log of the bound of :meth:`_envelope` on |phi_R(t)| at real ``nodes``."""
        atomless = {term: count for term, count in self.loss.terms.items() if term.atoms.size == 0}
        log_bound = ComposedLoss(atomless).log_phi_numeric(nodes).real if atomless else np.zeros(nodes.shape)
        log_ratio = np.zeros(nodes.shape)  # log(B / prod A_i^k_i) over the terms with atoms
        for term, count in self.loss.terms.items():
            if term.atoms.size == 0:
                continue
            log_bound = log_bound + count * term.atoms.log_mass
            if term.continuous:
                log_continuous = log_phi_and_continuous_part(term, nodes)[1]
                log_ratio += count * np.log1p(np.exp(log_continuous - term.atoms.log_mass))
        if self.atoms is None:
            return log_bound + log_ratio
        with np.errstate(divide="ignore"):
            return log_bound + np.log(np.expm1(log_ratio))

    def _upper_limit(self, kernel, width: float) -> tuple[float, float]:
        """T with estimated tail (1/pi) int_T^inf |phi K| dt below atol/4, and that estimate.

        The tail is estimated as max_{u >= T} |phi(u) K(u)| u / pi over a
        geometric scan (exact for |phi K| ~ 1/u^2, an overestimate for faster
        decay).  T is capped by the node budget.
        """
        cap = MAX_NODES / (4 * GL_ORDER) * width
        scan = np.geomspace(0.5 / self.scale, max(cap, 1.0 / self.scale), 400)
        # The work of the first two grids on [0, T] (3 T / width panels) must fit MAX_WORK.
        cost = self.loss.evaluation_cost(scan)
        work = 3 * GL_ORDER / width * np.concatenate(([cost[0] * scan[0]], cost[1:] * np.diff(scan))).cumsum()
        affordable = int(np.searchsorted(work, MAX_WORK, side="right"))
        if affordable == 0:
            raise AccuracyError(
                f"the composed CF is too costly to evaluate even at the scale of the privacy loss "
                f"(t ~ {scan[0]:.3g}: {cost[0]:.3g} terms per node); use method='pld' or 'certified'")
        scan = scan[:affordable]
        # Evaluate in increasing chunks and stop once |phi K| t has dropped far below
        # the target: numeric CFs are costly at large t.
        envelope = np.zeros(0)
        for chunk in np.array_split(scan, 5):
            values = self._envelope(kernel, chunk)
            envelope = np.concatenate((envelope, values))
            if values.size < chunk.size or values.max() <= self.atol * 1e-4:
                break
        if envelope.size == 0:
            raise AccuracyError("the composed CF cannot be evaluated at the scale of the privacy loss")
        scan = scan[:envelope.size]
        tail_after = np.maximum.accumulate(envelope[::-1])[::-1]
        good = np.flatnonzero(tail_after <= self.atol / 4)
        if good.size:
            upper = float(scan[good[0]])
            return upper, float(tail_after[good[0]])
        return float(scan[-1]), float(tail_after[-1])


def _panels(upper: float, width: float) -> tuple[np.ndarray, np.ndarray]:
    """Composite Gauss-Legendre nodes and weights on [0, upper] with panels of about ``width``."""
    count = max(1, int(math.ceil(upper / width)))
    edges = np.linspace(0.0, upper, count + 1)
    half = (edges[1] - edges[0]) / 2
    nodes = (edges[:-1, None] + half * (_GL_X + 1)).ravel()
    return nodes, np.tile(half * _GL_W, count)
