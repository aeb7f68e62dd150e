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
step gives the error estimate.

Lattice-valued terms.  A finite-output mechanism (randomized response, discrete
Laplace, discrete Gaussian) has its loss on a lattice, so its M(c + it) is periodic
in t (period 2 pi / spacing), or almost periodic for several lattices: along a
vertical line the integrand repeats the saddle's bump wherever the atoms' phases
realign, damped only by the continuous terms.  The node sums therefore end where an
*envelope* E(t) >= |integrand| is negligible, not the integrand itself: E keeps
|M| of the atomless terms (Gaussian, subsampled: they decay), bounds a finite term
by M_j(c) >= |M_j(c + it)| and a term with atoms and a continuous part by
|M_i - A_i| + A_i(c) (:meth:`ContourInversion.log_mgf_and_envelope`).  The sums stop
once E at the last nodes times (reach / step) -- a bound on all nodes beyond when E
does not grow and |s (s + 1)| grows like t^2 -- is below TAIL_RTOL of the sum, and
that bound is added to the error.  Nodes where the finite terms evaluated so far
(fewest atoms first) already bound |integrand| below SKIP_RTOL of the saddle's are
left out and their bound added to the error too; numeric MGF terms are evaluated
last, only at the nodes kept.  What is assumed, not checked: that the decaying
(continuous) parts of E do not grow again beyond the last node.

Node errors.  The sum's error from its node values is bounded node by node and summed
(:func:`_node_errors`): a few ulps of each part of the log-integrand, the rounding of the
sum, and what its terms' values carry -- a numeric MGF's error is a share of its value on
the real line, M_i(c), not of |M_i(c + it)|, and so is a sum of atoms' -- times |f| at
the node.  Where the integrand's values cancel (a loss piled up near one value: most of
|M(c + it)| stays near M(c) far up the line) this, not the step, sets the error: at
sigma = 2, q = 0.001, 20 uses and delta = 1e-10 the nodes sum to 2e7 times delta.

Run-time check (:meth:`_SaddlePointContour.verify`).  Every delta the contour
engine returns -- delta(eps) queries, and the bracket ends that bound eps(delta)
-- is summed a second time on another vertical line, Re s = c + 2g (else -2g, g,
-g, 5g, -5g; g ~ 1 / (10 sqrt(Psi''))), the first of those inside the MGF's strip
whose integrand peaks at most e^2 above the first line's, with a step 0.9 times
twice the first line's last one (once more halved if they disagree).  The two
values must agree within the sum of their errors (the first line's stated relative
error; the second line's last change, or after one level the first line's error,
plus its nodes' errors and its truncation bound); otherwise AccuracyError, so
method='auto' moves on.  This tests the step (Poisson aliases differ between the
lines).  It cannot test an error the lines share: the truncation (by Cauchy's
theorem two lines cut where the integrand is negligible agree whatever lies beyond
-- which is why the cut follows the envelope above), or node errors that are
themselves analytic in s, such as the MGF of a quadrature rule's atoms -- which is
why the node errors are bounded, not checked.

Costly nodes.  Numeric MGF terms (subsampled mechanisms) cost an output rule per
vertical line and a sum per node, so with them the line is snapped to a grid
(:meth:`_SaddlePointContour._snapped_line`), nearby eps -- Newton's iterates on
eps, the bracket's ends -- stay on one line while its integrand peaks at most
e^KEEP_LINE above their own saddle's (:meth:`_SaddlePointContour._kept_line`),
and a line's node chunks are kept without their factor e^{-s eps}, which is
all that depends on eps.  The saddle search then works on one vertical line
per iterate (complex-step Psi', extrapolated Psi'').

Compositions of Laplace-type losses (Laplace, propose-test-release) and
finite-output mechanisms with no other term have atoms of non-negligible mass:
:class:`LatticeContourInversion` splits the MGF into lattice groups e^{s l} R(s)
with R rational (each group a signed measure supported on (-inf, l]); only groups
with l > eps contribute, and for them the contour can bend to the left, where
e^{s (l - eps)} decays exponentially; its envelope is the sum of the groups' moduli.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import gammaln

from .. import budget
from .. import options as settings
from .._lazy import optimize
from ..mechanisms.noise_pair import distinct_values, summed_at_once
from ..mechanisms.privacy_loss import batched_log_phi, log_phi_and_continuous_part
from ..numerics.atoms import CompositionTooLargeError, clearly_beyond, estimated_atoms
from ..results import AccuracyError, UnsupportedCompositionError
from .composition import ComposedLoss

if TYPE_CHECKING:
    from .pile_split import PileSplitContour

#: Relative accuracy the trapezoid sum is refined to (by halving its step)...
RTOL = 1e-13
#: ...or to this multiple of the node values' rounding estimate, if larger: numeric MGF terms carry k_i
#: times their relative error, and two levels then differ by a few times that however fine the step
#: (q = 0.01, sigma = 1, k = 50: changes 1.4e-13, 0.7e-13, 1.0e-13 after the first halving).
ROUNDING_FACTOR = 4.0
#: Two successive, decreasing changes below this end the halvings too: the trapezoid error of an analytic
#: integrand squares with each halving, so the second change is rounding noise, not discretization, and it
#: is reported as the error; a change that grows instead says the sum is not converging.  (Numeric MGFs at
#: large |Im s| round their phases to an ulp of Im(s) L: q = 0.001, sigma = 0.8, k = 100 levels a budget of
#: 2^18 nodes deep change by 1.2e-9, then 1e-12 ... 8e-12.)
STALL_LIMIT = 1e-6
MAX_HALVINGS = 6
#: A sum still changing by more than this after MAX_HALVINGS is refused, not reported with its error.
MAX_UNCONVERGED = 1e-6
#: Newton iterations for the saddle point; it stops once Psi'' step^2 is below SADDLE_TOL.
MAX_NEWTON = 12
SADDLE_TOL = 1e-4
#: Im s / Re s of the complex step that gives Psi' in the saddle search with numeric MGF terms.
COMPLEX_STEP = 1e-8
#: Most nodes one contour sum may use, all levels together (closed forms; numeric MGFs cost far more per node).
MAX_NODES = 1_000_000
#: Nodes of a numeric MGF evaluated between checks of the time budget, and most nodes of one chunk of a sum.
NUMERIC_CHUNK, NODE_CHUNK = 2_048, 65_536
#: A trapezoid's first level also evaluates its halvings' nodes up to this many of its steps beyond each chunk,
#: and a halving's first chunk reaches that far beyond the levels before (costly nodes come in lattices).
PREFETCH_BEYOND = 4
#: The early refusal of a sum whose envelope has not decayed far out (_SaddlePointContour._trapezoid) is checked
#: once its first level has spent this share of the node budget if that is at most this many nodes, else at once.
FAR_CHECK_SHARE, FAR_CHECK_NODES = 0.125, 1024
#: ...unless the numeric MGF terms would sum more output nodes than this for that one far node (an MGF without a
#: shifted output line, such as a tapered one, :class:`afa.mechanisms.noise_pair.OutputTaper`, lays out a rule
#: proportional to the height: millions of output nodes for one node there).
FAR_PROBE_WORK = 1 << 18
#: Vertical lines whose numeric log M values are kept (ContourInversion._node_log_integrand).
CACHED_LINES = 4
#: Work of a lattice of nodes summed at once by the non-uniform FFT, per output node of its rule (the
#: spreading's exponentials, :func:`afa.mechanisms.noise_pair.summed_at_once`).
NUFFT_WORK = 32
#: A snapped trapezoid step keeps this many bits below its leading one (it shrinks by < 2^-3, not up to 2x:
#: a halved step doubles the nodes, and near-atom sums need most of the numeric node budget).
STEP_MANTISSA_BITS = 3
#: |Im log f| on the real axis above which c counts as outside the MGF's strip.  Inside, closed forms
#: give an imaginary part of rounding size; past a branch point it is a multiple of pi / 2.
STRIP_IMAG_TOL = 1e-6
#: log of a probability below every positive double.
LOG_TINY = -750.0
#: Logarithms above this are reported as an infinite bound (e^709.78 is the largest double).
LOG_HUGE = 709.0


#: Rounding units allowed for each part of a node's log-integrand, for the rounding of a node sum (pairwise
#: summation of chunks of at most NODE_CHUNK nodes, and the chunks' totals), and for a sum of a term's atoms.
NODE_ULPS, SUM_ULPS, ATOM_ULPS = 4.0, 32.0, 4.0
#: The node sums end once the envelope's bound on the nodes left is below this fraction of their sum.
TAIL_RTOL = 1e-15
#: The fewest nodes a node sum's later chunk takes (each chunk of numeric MGF terms costs a call).
MIN_CHUNK = 16
#: How far (in log units) below the tail tolerance a first level's later chunk is sized to reach: the next eps
#: on a kept line (_SaddlePointContour._kept_line) has a smaller sum, so a lower tail tolerance (q = 0.01,
#: sigma = 1, k = 100: by e^1.1 between Newton's first two eps), and it replays the line's chunks (node_sum):
#: a last chunk ending right at the first eps's tolerance costs the next one another call of the numeric MGFs.
#: q = 0.01, sigma = 1, k = 100: 2074 nodes in 7 calls at 0, 2050 in 6 at 1.5 (k = 50: 7667 and 7839).
CHUNK_MARGIN = 1.5

#: Nodes whose integrand is bounded below this fraction of the saddle's are left out (their bound counted
#: in the error): finite terms with large counts make |M| negligible between the replicas of the bump.
SKIP_RTOL = 1e-22

#: A snapped contour line serves another eps while its integrand peaks at most e^KEEP_LINE above that eps's
#: saddle's (_SaddlePointContour._kept_line): that costs a factor e^KEEP_LINE in cancellation at most.
KEEP_LINE = 0.2

#: A predicted change within this factor of the tolerance counts as converged (_halvings_cost).
PREDICTION_SLACK = 100.0
#: Halvings are predicted (_halvings_cost) only from a change below this: a larger one comes from a step still
#: too coarse for the sum's asymptotic rate (e.g. the alias delta(eps + 2 pi / h) e^{2 pi c / h} of a near-atom
#: loss at a large c, whose change falls from 0.8 to rounding in one halving: sigma = 2, q = 0.001, 10 steps,
#: delta = 1e-14).
PREDICT_BELOW = 1e-3


def _halvings_cost(change: float, tolerance: float, level_nodes: int) -> float:
    """Nodes the further halvings of a trapezoid sum are predicted to need, from the last level's change and
    nodes: the error of an analytic integrand's trapezoid sum falls like e^{-a / h}, so each halving about
    squares the change (counted as done once within PREDICTION_SLACK of the tolerance: rounding ends it
    there), and doubles the nodes over the same range."""
    target = math.log(min(PREDICTION_SLACK * tolerance, 0.5))
    halvings = max(1, math.ceil(math.log2(target / math.log(change)))) if change < 1 else MAX_HALVINGS
    return level_nodes * (2.0 ** (halvings + 1) - 2)


def _next_chunk(chunk: int, u: np.ndarray, log_envelope: np.ndarray, excess: float, spacing: float) -> int:
    """How many nodes the next chunk of a node sum takes: twice the last chunk, or fewer where the envelope's
    decay over the last chunk's second half, continued, reaches the tail tolerance sooner (``excess``: how
    far the log of the tail bound is above it).  A Gaussian-like envelope decays faster than that line, so the
    estimate errs long; a chunk too short only costs one more chunk (the tail test decides, not this)."""
    half = u.size // 2
    if u.size < 4 or not u[-1] > u[half]:
        return 2 * chunk
    rate = (log_envelope[-1] - log_envelope[half]) / (u[-1] - u[half])
    if not (rate < 0 and math.isfinite(rate) and math.isfinite(excess)):
        return 2 * chunk
    return min(2 * chunk, max(MIN_CHUNK, int(1.25 * excess / (-rate * spacing)) + 8))


def _alias_limit(c: float, log_delta: float) -> float:
    """The largest trapezoid step on the line Re s = c whose first alias, about e^{-2 pi c / h} times
    delta(eps - 2 pi / h) <= e^{-2 pi c / h}, stays below e^-45 delta (Poisson summation)."""
    return 2 * math.pi * c / (max(-log_delta, 0.0) + 45.0)


def _inside_strip(log_f):
    """Whether log-integrand values at real points are finite and real, i.e. inside the MGF's strip."""
    return np.isfinite(log_f) & (np.abs(np.imag(log_f)) <= STRIP_IMAG_TOL)


class _SaddlePointContour:
    """delta(eps) of one composed direction by a trapezoid sum along a contour through the saddle point.

    Subclasses give the log of the integrand e^{-s eps} M(s) / (s (s + 1)) and
    how far the contour may bend to the left: s(u) = c + iu + b(u) with
    b(u) = -bend (sqrt(u^2 + Y^2) - Y)^2, analytic in |Im u| < Y, nearly
    vertical for |u| << Y (b(u) = 0 gives the vertical line).
    """

    #: Whether :meth:`_node_log_integrand` depends on eps only through the factor e^{-s eps} (then a vertical
    #: line's nodes serve every eps: :meth:`_line_chunks`).
    _eps_free_nodes = False

    def __init__(self, loss: ComposedLoss, numeric_nodes: int | None = None):
        self.loss = loss
        self.inf_mass = loss.inf_mass
        #: Re s -> {(first Im s, last Im s, nodes): eps-free (log f, log E, log D) - log M(c) / (c (1 + c))} of
        #: the latest CACHED_LINES lines (:meth:`_line_chunks`)
        self._chunks: dict[float, dict[tuple[float, float, int], tuple]] = {}
        self.mean, variance = loss.cumulants
        self.scale = math.sqrt(variance)
        #: (eps, c, Psi(c), Psi''(c), last step, reach, I e^{-Psi}, relative error) of the latest contour sum
        self._last: tuple | None = None
        self._last_saddle: float | None = None
        #: (eps, c, Psi(c), Psi''(c), Psi'(c)) of the latest snapped line, at that eps (:meth:`_kept_line`)
        self._line: tuple[float, float, float, float, float] | None = None
        #: Whether the node sums leave out nodes (:meth:`_node_log_integrand`): then only the nodes evaluated
        #: in full count against ``max_nodes`` (MAX_NODES caps all of them).
        self._prunes = False
        self.max_nodes = (MAX_NODES if loss.log_phi_rtol == 0
                          else numeric_nodes or settings.current().contour.numeric_nodes)
        #: Work one contour sum may spend on its finite and numeric terms (ContourOptions.work_per_node per node
        #: of its node budget): a finite term costs its atoms at each node, a numeric MGF its output nodes at each
        #: node (once per lattice of nodes summed at once, times NUFFT_WORK).  Numeric MGFs far up a line cost in
        #: proportion to |Im s|, and a sum that keeps meeting replicas of a lattice's bump (finite terms) with a
        #: slowly decaying numeric term runs far up it: there the discretized PLD is at its best, and the contour
        #: refuses early.
        self.max_work = float(settings.current().contour.work_per_node) * self.max_nodes
        #: Work the current contour sum may still spend (:meth:`_spend`); None outside a sum.
        self._work_left: float | None = None

    def widened(self, numeric_nodes: int) -> _SaddlePointContour:
        """This inversion with the node budget ``numeric_nodes`` (a closed-form composition keeps MAX_NODES),
        sharing what it has evaluated: the node values, log M by height and Chernoff bounds it keeps depend on the
        lines and heights alone, not on the budget, so a retry after a :class:`NodeBudgetError` starts from
        them.  Its own saddle and line memory starts as this one's and goes its own way."""
        wide = copy.copy(self)
        if self.max_nodes < MAX_NODES:
            wide.max_nodes = numeric_nodes
            wide.max_work = float(settings.current().contour.work_per_node) * numeric_nodes
        wide._work_left = None
        return wide

    def _log_integrand(self, s: np.ndarray, epsilon: float) -> np.ndarray:
        raise NotImplementedError

    def _probe_work(self, s: np.ndarray) -> float:
        """The work (output nodes summed) of evaluating the numeric MGF terms at the nodes ``s`` (0 without any)."""
        return 0.0

    def _bend(self, epsilon: float) -> tuple[float, float]:
        """(bend, Y) of the contour for ``epsilon``; bend 0 is the vertical line."""
        return 0.0, 1.0

    def _psi(self, c, epsilon: float) -> np.ndarray:
        """Psi(c) = log of the integrand at real c > 0 (vectorised); +inf outside the MGF's strip.

        The log-integrand is real on the real axis wherever M exists; a closed
        form continued past the strip's edge returns a non-real value, which marks it.
        """
        c = np.atleast_1d(np.asarray(c, dtype=float))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # outside the strip: marked below
            log_f = self._log_integrand(c.astype(complex), epsilon)
        psi = log_f.real
        return np.where(_inside_strip(log_f), psi, np.inf)

    def saddle(self, epsilon: float, enough: Callable[[float, float], bool] | None = None
               ) -> tuple[float, float, float] | None:
        """(c*, Psi(c*), Psi''(c*)) for ``epsilon`` by Newton's method on Psi'; None if the finite part is 0.

        ``enough(c, Psi(c))``, if given, ends Newton's method at the first iterate where it holds (that
        iterate is returned: a point inside the strip, not the saddle).

        None means the Chernoff bound e^{Psi(c)} c at some c in e^{-30} .. e^{60} puts delta's finite
        part below the smallest double (eps at or beyond a bounded loss's maximum, or far in the tail).

        Psi'' comes from Re Psi(c + iu) = Psi - u^2 Psi'' / 2 + O(u^4) (Psi is real-analytic)
        and Psi' from Psi(c - u), all at one small u.  Newton starts from the Gaussian
        approximation's saddle (then a quarter and a sixteenth of it), each step kept within a
        factor 8 in c and inside the strip; if it fails (Psi not convex there, no convergence),
        a scan in log c and Brent's method take over.  With numeric MGF terms (costly nodes) it
        starts from the previous query's saddle first (root finding asks for nearby eps): the
        line is then snapped to a grid (:meth:`_snapped_line`), which the start rarely changes;
        closed forms never do, so that their delta(eps) does not depend on what was asked before.
        """
        guess = self._gaussian_saddle(epsilon)
        starts = [self._last_saddle] if self._last_saddle and self.max_nodes < MAX_NODES else []
        starts += [guess, guess / 4, guess / 16]  # a right-skewed loss has its saddle below the Gaussian's
        for start in starts:
            found = self._newton_saddle(start, epsilon, enough)
            if found is not None:
                return found
        grid = np.arange(-30.0, 60.0, 0.5)
        values = self._psi(np.exp(grid), epsilon)
        best = int(np.argmin(values))
        # Chernoff: (1 - e^{-y})_+ <= e^{cy} / (1 + c) for all y, so the finite part of delta is at most
        # M(c) e^{-c eps} / (1 + c) = e^{Psi(c)} c at every c in the strip.
        if np.min(values + grid) < LOG_TINY:
            return None
        if not np.isfinite(values[best]) or best == grid.size - 1:
            raise AccuracyError(f"no saddle point for eps = {epsilon:.6g}: Psi has no minimum for "
                                "0 < c < e^60; use method='quadrature'")
        found = self._newton_saddle(math.exp(grid[best]), epsilon, enough)
        if found is not None:
            return found
        # Outside the strip Psi is +inf; a finite stand-in keeps the bounded search's parabolic steps free of
        # inf - inf (it falls back to golden-section steps there either way).
        minimum = optimize.minimize_scalar(lambda x: min(float(self._psi(math.exp(x), epsilon)[0]), 1e300),
                                  bounds=(grid[best] - 0.5, grid[best] + 0.5), method="bounded",
                                  options={"xatol": 1e-7, "maxiter": 500})
        c = math.exp(minimum.x)
        step = 1e-4 * c
        side = self._psi(np.array([c - step, c + step]), epsilon)
        curvature = (side[0] - 2 * minimum.fun + side[1]) / step ** 2
        if not math.isfinite(curvature):
            raise AccuracyError(f"no usable saddle point for eps = {epsilon:.6g} (Psi'' is not finite at "
                                f"c = {c:.6g}); use method='quadrature'")
        return c, float(minimum.fun), max(curvature, 1e-300)

    def _gaussian_saddle(self, epsilon: float) -> float:
        """The saddle point if the loss were Gaussian with the same mean and variance (a first guess)."""
        slope_free = (epsilon - self.mean) / max(self.scale ** 2, 1e-300)
        return min(max(slope_free, 0.1), 1e6)

    def _newton_saddle(self, c: float, epsilon: float, enough: Callable[[float, float], bool] | None = None
                       ) -> tuple[float, float, float] | None:
        """Newton's method for Psi'(c) = 0 from ``c``; None if it does not converge; ``enough`` as in
        :meth:`saddle`.

        Psi is convex, so the sign of Psi' brackets the root: a step leaving the bracket
        (curvature growing fast, as for subsampled losses) is replaced by its geometric midpoint.

        With numeric MGF terms (each new real part costs an output rule) every point lies on the
        vertical line through c: Psi' is the complex step Im Psi(c + iu) / u at u = COMPLEX_STEP c (no
        cancellation, and too small a phase to wrap), and Psi'' is extrapolated from the probes u and 2u,
        (16 d(u) - d(2u)) / (6 u^2) with d(u) = Psi - Re Psi(c + iu), which cancels the O(u^4) term (the
        fourth derivative of a subsampled loss's Psi is large: the probe's Psi'' alone is far off, and
        Newton's steps with it overshoot or crawl).
        """
        probe, previous = 0.01 * c, None
        low, high = 0.0, math.inf
        complex_step = self.max_nodes < MAX_NODES
        for _ in range(MAX_NEWTON):
            points = ([c, c + 1j * probe, c + 1j * COMPLEX_STEP * c, c + 2j * probe] if complex_step
                      else [c, c + 1j * probe, c - probe])
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                log_f = self._log_integrand(np.array(points, dtype=complex), epsilon)
            psi = log_f[0].real
            if not _inside_strip(log_f[0]):
                if previous is None:
                    return None
                c = 0.5 * (c + previous)  # stepped out of the strip: back off
                continue
            # Psi(c + iu) = Psi - u^2 Psi''/2 + O(u^4) in its real part (log |.|, never wrapped), and the
            # backward difference gives Psi' (the phase Im Psi(c + iu) = u Psi' would wrap once u Psi' > pi).
            if complex_step:
                curvature = (16 * (psi - log_f[1].real) - (psi - log_f[3].real)) / (6 * probe ** 2)
                slope = log_f[2].imag / (COMPLEX_STEP * c)
            else:
                curvature = 2 * (psi - log_f[1].real) / probe ** 2
                slope = (psi - log_f[2].real) / probe + 0.5 * probe * curvature
            if not (0 < curvature < math.inf and math.isfinite(slope)):
                return None
            step = -slope / curvature
            # Close enough: Psi(c) - Psi(c*) = Psi'' step^2 / 2 costs a factor e^{that} in cancellation only.
            if curvature * step * step <= SADDLE_TOL:
                self._last_saddle = c
                return c, float(psi), float(curvature)
            if enough is not None and enough(c, float(psi)):
                return c, float(psi), float(curvature)
            if slope < 0:
                low = max(low, c)
            else:
                high = min(high, c)
            if complex_step:
                step = self._log_newton_step(c, epsilon, slope, curvature, step)
            proposal = min(max(c + step, c / 8), 8 * c)
            if not low < proposal < high:
                proposal = math.sqrt(low * high) if low > 0 and math.isfinite(high) else proposal
            previous, c = c, proposal
            # Probe at about a tenth of the saddle's width, so that Psi'' is accurate.
            probe = min(0.01 * c, 0.1 / math.sqrt(curvature))
        return None

    @staticmethod
    def _log_newton_step(c: float, epsilon: float, slope: float, curvature: float, step: float) -> float:
        """Newton's step for Psi'(c) = 0 written as log K'(c) = log R(c), K = log M and R(c) = eps + 1/c +
        1/(1 + c) (so Psi' = K' - R and Psi'' = K'' - R'); ``step`` (Newton's on Psi') where that is not
        defined (K' or R not positive) or not a step.

        K' is the mean of the tilted loss, positive for c > 0 (a KL divergence at c = 0, and increasing), and
        for a subsampled loss it grows about like e^{c^2 / (2 sigma^2)}: Newton's steps on Psi' from above the
        saddle shrink to about 1 / (log K')' each, a crawl, while log K' is close to a parabola.
        """
        requirement = epsilon + 1 / c + 1 / (1 + c)
        rate = -1 / c ** 2 - 1 / (1 + c) ** 2  # R'
        mean = slope + requirement  # K'
        if not (mean > 0 and requirement > 0):
            return step
        derivative = (curvature + rate) / mean - rate / requirement
        logarithmic = -(math.log(mean) - math.log(requirement)) / derivative
        return logarithmic if math.isfinite(logarithmic) and derivative > 0 else step

    def contour_integral(self, epsilon: float) -> tuple[float, float, float]:
        """(log I, relative error of I, S / I) for I the contour integral and S = -dI/d eps.

        I is the finite part of delta (or, for the lattice, the groups above eps
        with a large gap); S, the same integral with an extra factor s, comes from
        the same nodes and gives Newton's method its derivative.
        """
        self._last = None
        if epsilon >= self.loss.loss_max:  # the finite loss cannot exceed eps
            return -math.inf, 0.0, 0.0
        kept = self._kept_line(epsilon) if self.max_nodes < MAX_NODES else None
        if kept is not None:
            try:
                return self._line_integral(epsilon, kept)
            except NodeBudgetError:  # off its saddle a line can need more halvings: eps's own line may not
                pass
        return self._line_integral(epsilon, None)

    def _line_integral(self, epsilon: float, kept: tuple[float, float, float] | None) -> tuple[float, float, float]:
        """:meth:`contour_integral` on the line ``kept`` (c, Psi(c), Psi''(c)), or (None) through eps's saddle,
        snapped when nodes are kept."""
        if kept is not None:
            c, psi, curvature = kept
        else:
            found = self.saddle(epsilon)
            if found is None:  # the finite part is below the smallest double (Chernoff)
                return -math.inf, 0.0, 0.0
            c, psi, curvature = found
            if self.max_nodes < MAX_NODES:
                saddle = c
                c, psi, curvature = self._snapped_line(c, psi, curvature, epsilon)
                self._line = (epsilon, c, psi, curvature, curvature * (c - saddle))
        step = self._first_step(c, psi, curvature)
        rounding = self._rounding(c, psi, epsilon)
        # Trapezoid with step h, halved until two levels agree to RTOL, or to the rounding of the node values
        # (ROUNDING_FACTOR times it: below that a halving only chases noise).
        tolerance = max(RTOL, ROUNDING_FACTOR * rounding)
        history: list[float] = []

        def converged(estimate: float, change: float, noise: float) -> bool:
            # The nodes' errors, summed over the nodes relative to the sum, are a floor no halving goes below:
            # above STALL_LIMIT the sum could only stall beyond what is accepted, so it is refused now.
            if not noise <= STALL_LIMIT:
                raise AccuracyError(f"the contour sum for eps = {epsilon:.6g} cancels beyond its nodes' accuracy: "
                                    f"their errors allow no relative error below {noise:.1g}; use method='pld'")
            previous = history[-1] if history else math.inf
            history.append(change)
            return change <= tolerance or change < previous <= STALL_LIMIT

        estimate, change, noise, ratio, final_step, truncation, reach = self._trapezoid(
            epsilon, c, psi, curvature, step, MAX_HALVINGS, converged, predict=tolerance)
        if not change <= MAX_UNCONVERGED:
            raise AccuracyError(f"the contour sum for eps = {epsilon:.6g} did not converge under {MAX_HALVINGS} "
                                f"halvings of its step (last change {change:.1e}; the integrand is not one bump, "
                                "e.g. subsampling with small q * count); use method='certified' or 'quadrature'")
        relative = change + noise + truncation
        self._last = (epsilon, c, psi, curvature, final_step, reach, estimate, relative)
        return psi + math.log(estimate), relative, ratio

    def _kept_line(self, epsilon: float) -> tuple[float, float, float] | None:
        """(c, Psi(c), Psi''(c)) at ``epsilon`` on the latest snapped line, if that line is still close to
        ``epsilon``'s saddle; else None.

        On a fixed line Re s = c only the factor e^{-s eps} of the integrand depends on eps, so
        Psi(c) moves by -c (eps - eps0) exactly, Psi'(c) by -(eps - eps0), and the line's Psi'' (measured
        on the line, :meth:`_snapped_line`) not at all; the kept log M values serve every eps.  Any line
        inside the MGF's strip gives the same integral; off the saddle by d = Psi'(c) / Psi'', its
        integrand peaks higher by about e^{Psi'' d^2 / 2} = e^{Psi'(c)^2 / (2 Psi'')}, which is the sum's
        extra cancellation: the line is kept while that exponent is at most KEEP_LINE.  Newton's iterates
        for eps(delta) after its first step, and the bracket checks, then cost no new node.
        """
        if self._line is None:
            return None
        known, c, psi, curvature, slope = self._line
        slope -= epsilon - known
        if not slope * slope <= 2 * KEEP_LINE * curvature:
            return None
        return c, psi - c * (epsilon - known), curvature

    def _prefetch(self, s: np.ndarray) -> None:
        """Evaluate and keep the costly parts of the integrand at the nodes ``s`` (one vertical line) ahead of
        their use; nothing here (subclasses with numeric MGF terms keep their values)."""

    def _line_chunks(self, c: float) -> dict:
        """The node chunks kept for the vertical line Re s = ``c`` (the latest CACHED_LINES lines are kept).

        With costly nodes (numeric MGF terms) on a snapped line (:meth:`_snapped_line`, :meth:`_kept_line`)
        the trapezoid's chunks recur for every eps the line serves; a chunk keeps log f at eps = 0, log E
        and log D, each minus log M(c) - log c - log(1 + c), and eps enters as the phase -Im(s) eps.
        """
        line = self._chunks.pop(c, {})
        self._chunks[c] = line  # (re)inserted last: the most recent line
        while len(self._chunks) > CACHED_LINES:
            del self._chunks[next(iter(self._chunks))]
        return line

    def _first_step(self, c: float, psi: float, curvature: float) -> float:
        """The trapezoid's first step on the line through c: the curvature limit and the alias limit
        h <= 2 pi c / (log(1/delta) + 45) (module docstring); snapped to STEP_MANTISSA_BITS significant bits
        when nodes are cached (:meth:`_snapped_line`)."""
        # Saddle-point estimate of log delta, used to set the alias limit on the step.
        log_estimate = psi - 0.5 * math.log(2 * math.pi * curvature)
        return self._snapped_step(min(0.5 / math.sqrt(curvature), _alias_limit(c, log_estimate)))

    def _snapped_step(self, step: float) -> float:
        """``step`` down to STEP_MANTISSA_BITS significant bits when nodes are cached, so that nearby eps
        share it (:meth:`_snapped_line`)."""
        if self.max_nodes < MAX_NODES:
            grain = 2.0 ** (math.floor(math.log2(step)) - STEP_MANTISSA_BITS)
            step = math.floor(step / grain) * grain
        return step

    def _rounding(self, c: float, psi: float, epsilon: float) -> float:
        """Relative rounding error of the node values on the line through c."""
        # The log-integrand's terms (c eps, log M(c), ...) carry absolute errors of a few ulps.
        rounding = 1e-15 + 4 * np.finfo(float).eps * (abs(c * epsilon) + abs(psi + c * epsilon))
        return rounding + self.loss.log_phi_rtol  # numeric MGF terms: k_i times their relative error

    def _spend(self, work: float) -> None:
        """Count ``work`` against the current sum's allowance (:attr:`max_work`); refuse (:class:`NodeBudgetError`)
        before spending beyond it."""
        if self._work_left is None:
            return
        if work > self._work_left:
            raise NodeBudgetError(
                f"a contour sum needs more than {self.max_work:.3g} terms of its finite and numeric MGFs (far up "
                "its line, or at many replicas of a lattice's bump; ContourOptions.work_per_node)")
        self._work_left -= work

    def _trapezoid(self, epsilon: float, c: float, psi: float, curvature: float, step: float, halvings: int,
                   done, predict: float | None = None, reach: float = 0.0) -> tuple:
        """:meth:`_trapezoid_sum` with a fresh work allowance (:meth:`_spend`)."""
        self._work_left = self.max_work
        try:
            return self._trapezoid_sum(epsilon, c, psi, curvature, step, halvings, done, predict, reach)
        finally:
            self._work_left = None

    def _trapezoid_sum(self, epsilon: float, c: float, psi: float, curvature: float, step: float, halvings: int,
                       done, predict: float | None = None, reach: float = 0.0) -> tuple:
        """(I e^{-psi}, last relative change, noise, S / I, last step, truncation, reach) of the trapezoid sum on
        the contour through c.  The noise bounds the error of the sum that its nodes' errors make (each node's
        |term| times :func:`_node_errors`), relative to the sum; truncation bounds the nodes left out, relative
        to the sum; reach is the largest |Im u| summed.

        The step starts at ``step`` and is halved at most ``halvings`` times, until ``done(estimate, change,
        noise)`` (called after every level, the first with change = inf).  ``predict``: the tolerance
        by which a sum predicted to exceed the node budget is refused before it is spent.  ``reach``: how
        far the first chunk of nodes should go (a previous line's reach).
        """
        bend, width = self._bend(epsilon)
        # The integrand is about exp(-Psi'' u^2 / 2) near the saddle: one call usually covers it.
        first_chunk = int(min(4096, max(64, 12.0 / (step * math.sqrt(curvature)), reach / step + 8)))
        # Nodes evaluated in full (numeric MGF terms make them costly) and all nodes, left to spend.
        nodes_left, all_left = [self.max_nodes], [MAX_NODES]
        tails = [0.0, 0.0]  # the truncation bound, the reach
        # On a vertical line with costly (numeric) nodes the chunks' eps-free parts are kept (_line_chunks).
        chunks = self._line_chunks(c) if self._eps_free_nodes and self.max_nodes < MAX_NODES and bend == 0 else None
        base = psi + c * epsilon  # log M(c) - log c - log(1 + c): Psi(c) without its eps term

        def relative_nodes(s: np.ndarray) -> tuple:
            """(log f, log E, log D) at the nodes ``s``, each minus psi (log D None if no node is left out), and
            the eps-free part of the nodes' errors (:func:`_fixed_errors`)."""
            if chunks is None:
                log_f, log_envelope, log_skipped, log_relative = self._node_log_integrand(s, epsilon, psi)
                return (log_f - psi, log_envelope - psi, None if log_skipped is None else log_skipped - psi,
                        _fixed_errors(s, log_relative))
            key = (float(s.imag[0]), float(s.imag[-1]), s.size)
            if key not in chunks:  # at eps = 0 the integrand is M(s) / (s (s + 1)); the floor is the same
                # The first level: its usual halvings' nodes too, in one batch -- not for a sum allowed one
                # halving (the check's line, :meth:`verify`, which halves only if the two lines disagree).
                density = 2 ** min(halvings, 2) if halvings > 1 else 1
                while density > 1 and (s.size + PREFETCH_BEYOND) * density > NUMERIC_CHUNK:
                    density //= 2
                if density > 1 and s.size > 1 and s.imag[1] - s.imag[0] == step:
                    count = (s.size + PREFETCH_BEYOND) * density
                    self._prefetch(c + 1j * (s.imag[0] - step + step / density * np.arange(1, count + 1)))
                log_f, log_envelope, log_skipped, log_relative = self._node_log_integrand(s, 0.0, base)
                chunks[key] = (log_f - base, log_envelope - base, None if log_skipped is None else log_skipped - base,
                               _fixed_errors(s, log_relative))
            free_f, free_envelope, free_skipped, fixed = chunks[key]
            # e^{-s eps} / e^{psi} = e^{-i Im(s) eps} / e^{base}
            return free_f - 1j * s.imag * epsilon, free_envelope, free_skipped, fixed

        # Numeric MGF terms: refuse early if the integrand's envelope has not decayed where a quarter of the
        # budget ends -- the first two levels and the usual third (twice the second's nodes) would exceed it
        # (half of it for a sum of at most two levels).  Checked once the first level has spent FAR_CHECK_SHARE
        # of the budget if that is at most FAR_CHECK_NODES (and it has not ended by then: where it ends, the
        # envelope has decayed, and the halvings' cost is predicted from their changes, _halvings_cost), at
        # once under a larger budget.  A sum given a ``reach`` (the check of a line whose sum ended there) is
        # not checked.
        far_check = [self.max_nodes < MAX_NODES and bend == 0 and not self._prunes and reach == 0]
        far_after = FAR_CHECK_SHARE * self.max_nodes if FAR_CHECK_SHARE * self.max_nodes <= FAR_CHECK_NODES else 0

        def check_far(upcoming: int) -> None:
            spent = self.max_nodes - nodes_left[0] + upcoming
            if far_check[0] and spent > far_after:
                far_check[0] = False
                far = np.array([c + 1j * self.max_nodes * step / 2 ** min(halvings, 2)])
                if self._probe_work(far) <= FAR_PROBE_WORK and relative_nodes(far)[1][0] > math.log(1e-18):
                    raise self._no_decay(epsilon)

        def node_sum(h: float, first: int, stride: int) -> np.ndarray:
            """sums of Re[f s'/i], Re[s f s'/i] and of a bound on the error of Re[f s'/i] (:func:`_node_errors`)
            over u = j h, j = first, first + stride, ..., until the envelope's bound on the rest of the sum
            (TAIL_RTOL) is negligible."""
            total, start, chunk = np.zeros(3), first, first_chunk
            if tails[1] > 0:  # a halving: its first chunk reaches as far as the levels before (PREFETCH_BEYOND)
                chunk = min(NODE_CHUNK, max(chunk, int((tails[1] + PREFETCH_BEYOND * step - h * first)
                                                       // (h * stride)) + 1))
            # On a kept line, a level's chunks are those of the line's first sum at that level (the same keys and
            # nodes: no call of the numeric MGFs for the nodes it reached), then sized as they come.
            layout = None if chunks is None else chunks.setdefault(("layout", h, first, stride), [])
            taken = 0
            while True:
                if layout is not None and taken < len(layout):
                    chunk = layout[taken]
                budget.check(f"summing the contour integral for eps = {epsilon:.6g}")
                chunk = min(chunk, all_left[0], MAX_NODES if self._prunes else nodes_left[0])
                if layout is not None:
                    if taken == len(layout):
                        layout.append(chunk)
                    taken += 1
                if chunk <= 0:
                    raise self._no_decay(epsilon)
                all_left[0] -= chunk
                check_far(chunk)
                u = h * (start + stride * np.arange(chunk))
                root = np.sqrt(u * u + width * width)
                s = c + 1j * u - bend * (root - width) ** 2
                log_f, log_envelope, log_skipped, fixed = relative_nodes(s)
                if log_skipped is None:
                    nodes_left[0] -= chunk
                else:  # nodes left out: at most their bound each
                    nodes_left[0] -= int(np.count_nonzero(np.isneginf(log_skipped)))
                    tails[0] += float(np.sum(np.exp(log_skipped)))
                if nodes_left[0] < 0:
                    raise self._no_decay(epsilon)
                terms = np.exp(log_f)
                if bend:
                    terms *= 1 + 2j * bend * (root - width) * u / root
                summed = terms != 0
                errors = _node_errors(log_f[summed] + psi, fixed[0][summed], fixed[1][summed], epsilon)
                total += [terms.real.sum(), (s * terms).real.sum(), float(np.sum(errors * np.abs(terms[summed])))]
                start += stride * chunk
                # Beyond the last node u_n the envelope E(u) >= |f(u)| is taken non-increasing and |s (s + 1)|
                # grows like u^2, so the nodes left (spacing H = h stride) sum to at most E(u_n) u_n / H.
                log_bounds = log_envelope + np.log(np.abs(s)) - math.log(h * stride)
                log_tail = float(np.max(log_bounds[-8:]))
                log_allowed = math.log(TAIL_RTOL * max(abs(total[0]), 1e-300))
                if log_tail < log_allowed:
                    tails[0] += math.exp(log_tail)
                    # The reach later sums are sized by (a halving's first chunk, the check's line): the
                    # eighth node after the last one whose bound was not yet negligible.
                    late = np.flatnonzero(~(log_bounds < log_allowed))
                    tails[1] = max(tails[1], float(u[min(int(late[-1]) + 8 if late.size else 7, u.size - 1)]))
                    return total
                chunk = min(_next_chunk(chunk, u, log_envelope, log_tail - log_allowed + CHUNK_MARGIN, h * stride),
                            NODE_CHUNK)

        # The u = 0 node weighs 1/2; each level adds only the odd multiples of its step.
        fixed, modulus = relative_nodes(np.array([c], dtype=complex))[3]
        total = node_sum(step, 1, 1) + [0.5, 0.5 * c, 0.5 * float(_node_errors(
            np.array([psi], dtype=complex), fixed, modulus, epsilon)[0])]
        far_check[0] = False
        estimate, change = total[0] * step / math.pi, math.inf
        if not done(estimate, change, abs(total[2] / total[0])):
            for _ in range(halvings):
                budget.check(f"refining the contour integral for eps = {epsilon:.6g}")
                step /= 2
                before = nodes_left[0]
                total += node_sum(step, 1, 2)
                refined = total[0] * step / math.pi
                if not refined > 0:
                    raise AccuracyError(f"the contour sum for eps = {epsilon:.6g} is not positive ({refined:.3g}): "
                                        "cancellation beyond double precision; use method='quadrature'")
                change, estimate = abs(refined - estimate) / refined, refined
                if done(estimate, change, abs(total[2] / total[0])):
                    break
                # A next level whose nodes an earlier sum on this kept line evaluated costs no MGF evaluation:
                # it is summed (the node count still bounds it) rather than refused by the prediction.
                cached = chunks is not None and ("layout", step / 2, 1, 2) in chunks
                if (predict is not None and change < PREDICT_BELOW and not cached
                        and _halvings_cost(change, predict, before - nodes_left[0]) > nodes_left[0]):
                    raise self._no_decay(epsilon)  # now, rather than after spending the rest of the budget
        if not estimate > 0:
            raise AccuracyError(f"the contour sum for eps = {epsilon:.6g} is not positive ({estimate:.3g}): "
                                "cancellation beyond double precision; use method='quadrature'")
        return (estimate, change, float(abs(total[2] / total[0])), float(total[1] / total[0]), step,
                tails[0] / abs(total[0]), tails[1])

    def verify(self, epsilon: float) -> None:
        """Check the contour sum for ``epsilon`` on a second line; raise AccuracyError if they disagree.

        The second line Re s = c' (:meth:`_second_line`) gets the step 0.9 times twice the first line's last
        one (the level before it had converged to the first line's stated error), so its nodes and its
        Poisson-summation aliases differ; it is summed once, and once more with its step halved if the
        two disagree.  They must agree within the sum of their errors: the first line's stated one, and
        the second's last change (after one level: the first line's relative error) plus its nodes' errors
        and truncation bound.  Both sums end where the same envelope says the rest is negligible, so
        the check does not test that bound (by Cauchy's theorem two lines truncated where the integrand
        is negligible agree whatever lies beyond); it tests the step, and the node values where their errors
        differ between the lines (those they share are bounded by the nodes' errors, not checked).
        """
        if self._last is None or self._last[0] != epsilon:
            self.contour_integral(epsilon)
        if self._last is None:
            return  # no contour sum: delta's finite part is 0 (a bound, not an estimate)
        _, c, psi, curvature, last_step, reach, estimate, relative = self._last
        other, other_psi, other_curvature = self._second_line(c, psi, curvature, epsilon)
        step = self._snapped_step(min(1.8 * last_step, _alias_limit(other, psi + math.log(estimate))))
        scale = math.exp(other_psi - psi)
        found = []

        def agrees(other_estimate: float, change: float, noise: float) -> bool:
            value = other_estimate * scale
            discretization = change if math.isfinite(change) else relative
            found.append((value, discretization + noise))
            return abs(value - estimate) <= relative * estimate + found[-1][1] * abs(value)

        truncation = self._trapezoid(epsilon, other, other_psi, other_curvature, step, 1, agrees, reach=reach)[5]
        value, other_relative = found[-1]
        allowed = relative * estimate + (other_relative + truncation) * abs(value)
        if not abs(value - estimate) <= allowed:
            raise AccuracyError(
                f"the contour sum for eps = {epsilon:.6g} failed its check: a second line gives delta's finite "
                f"part {value / estimate:.15g} times the first's, beyond their stated errors (relative "
                f"{allowed / estimate:.1e}); use method='pld' or 'quadrature'")

    def _second_line(self, c: float, psi: float, curvature: float, epsilon: float) -> tuple[float, float, float]:
        """(c', Psi(c'), Psi''(c')) of the checking line: c' = c + m g on the snapping grid g of
        :meth:`_snapped_line` (about 1 / (10 sqrt(Psi''))), with m = 2, -2, 1, -1, 5, -5 the first inside the
        MGF's strip whose integrand peaks at most e^2 above the first line's (the sum's cancellation costs
        that factor).  Off the saddle the integrand oscillates like e^{i u Psi'(c')}; a line this close
        keeps it slow enough for the first line's step."""
        grain = 2.0 ** math.floor(math.log2(0.1 / math.sqrt(curvature)))
        for multiple in (2, -2, 1, -1, 5, -5):
            other = c + multiple * grain
            if other <= 0:
                continue
            probe = grain
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                log_f = self._log_integrand(np.array([other, other + 1j * probe], dtype=complex), epsilon)
            other_curvature = 2 * (log_f[0].real - log_f[1].real) / probe ** 2
            if _inside_strip(log_f[0]) and 0 < other_curvature < math.inf and log_f[0].real - psi <= 2.0:
                return other, float(log_f[0].real), float(other_curvature)
        raise AccuracyError(f"the contour sum for eps = {epsilon:.6g} cannot be checked: no second line near "
                            f"c = {c:.6g} inside the MGF's strip; use method='quadrature' or 'pld'")

    def _snapped_line(self, c: float, psi: float, curvature: float, epsilon: float) -> tuple[float, float, float]:
        """(c, Psi(c), Psi''(c)) moved onto a coarse grid, so that nearby eps share their contour's nodes.

        Numeric MGF terms make every node costly, and eps(delta) evaluates delta at eps a few ulps apart
        (Newton's last iterates, the bracket checks of :meth:`afa.engines.base.ContourEngine.epsilon_bracket`): with c
        rounded
        to a multiple of g = 2^floor(log2(0.1 / sqrt(Psi''))) and the step down to STEP_MANTISSA_BITS
        significant bits, their nodes c + i j step / 2^level coincide, and :meth:`_node_log_integrand`
        reuses log M there.  Any c inside the MGF's strip gives the same integral; |c - c*| <= g / 2 +
        0.01 / sqrt(Psi'') costs a factor of at most e^{Psi'' (c - c*)^2 / 2} < e^0.002 in cancellation,
        and a smaller step only makes the trapezoid sum more accurate.  The step follows Psi'', so Psi'' is
        measured again on the snapped line, from Re Psi(c + i g): that is the curvature of the line's own
        integrand (it can differ much from the saddle's: 0.38 against 0.55 at sigma = 2, q = 0.001,
        k = 3000), and it does not depend on eps.  The saddle search's value comes from the iterate where it
        stopped and a probe sized by the iterate before; it moved by several per cent between eps ulps apart
        (0.494 .. 0.534 there), enough to change the snapped step, lose the shared nodes and, near the node
        budget, turn an answer into a refusal.  The saddle's own line is kept if the snapped c leaves the
        strip or its Psi'' is not positive.
        """
        spacing = 2.0 ** math.floor(math.log2(0.1 / math.sqrt(curvature)))
        snapped = max(round(c / spacing), 1) * spacing
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            log_f = self._log_integrand(np.array([snapped, snapped + 1j * spacing]), epsilon)
        snapped_curvature = 2 * (log_f[0].real - log_f[1].real) / spacing ** 2
        if _inside_strip(log_f[0]) and 0 < snapped_curvature < math.inf:
            return snapped, float(log_f[0].real), float(snapped_curvature)
        return c, psi, curvature

    def _node_log_integrand(self, s: np.ndarray, epsilon: float, psi: float | None = None) -> tuple:
        """(log f, log E, log D, log R) at the contour's nodes: the log-integrand (:meth:`_log_integrand`), the
        log of an envelope E >= |f| that does not increase further along the contour (what ends the node sums),
        if a subclass leaves out nodes whose |f| is below SKIP_RTOL e^psi, a bound D >= |f| there (-inf
        elsewhere; None if none is left out), and the log of the relative error R of f that its terms' values
        carry beyond the log-integrand's own rounding (:meth:`_trapezoid_sum`), independent of eps (None: 0).

        Here E = |f|, no node is left out and R = 0; subclasses bound the parts of M that do not decay along the
        contour and the error of terms summed from atoms or numerically.
        """
        log_f = self._log_integrand(s, epsilon)
        return log_f, log_f.real, None, None

    def _no_decay(self, epsilon: float) -> AccuracyError:
        return NodeBudgetError(f"the contour sum for eps = {epsilon:.6g} needs more than {self.max_nodes} nodes "
                               "(a loss piled up near one value, e.g. subsampling with small q * count, or a CF "
                               "decaying slowly); use method='certified' or 'quadrature'")

    def delta_and_slope(self, epsilon: float) -> tuple[float, float, float]:
        """(delta, absolute error, -d delta / d eps) at one ``epsilon``."""
        log_value, relative, ratio = self.contour_integral(epsilon)
        finite = math.exp(log_value)
        return self.inf_mass + finite, relative * finite, ratio * finite

    def delta(self, epsilons: np.ndarray, verify: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """delta(eps) = inf_mass + finite part, and absolute error estimates; ``verify``: each value checked
        on a second line (:meth:`verify`)."""
        epsilons = np.asarray(epsilons, dtype=float)
        values, errors = np.empty(epsilons.size), np.empty(epsilons.size)
        for index, epsilon in enumerate(epsilons.ravel()):
            values[index], errors[index], _ = self.delta_and_slope(float(epsilon))
            if verify:
                self.verify(float(epsilon))
        return values.reshape(epsilons.shape), errors.reshape(epsilons.shape)


class ContourInversion(_SaddlePointContour):
    """The vertical contour Re s = c* for compositions whose atoms carry negligible mass."""

    _eps_free_nodes = True

    def __init__(self, loss: ComposedLoss, numeric_nodes: int | None = None):
        if not loss.analytic:
            raise UnsupportedCompositionError(
                "the contour method needs log-CFs that continue to complex arguments (closed forms, noise-mixture "
                "pairs such as subsampled mechanisms), not a numeric CF known on the real line only; "
                "use method='quadrature'")
        if not loss.continuous:
            raise UnsupportedCompositionError("the composition has no continuous part; use method='exact'")
        if loss.log_atomic_mass > math.log(RTOL) - 30:
            raise UnsupportedCompositionError(
                "the composition has atoms of non-negligible mass: use LatticeContourInversion")
        super().__init__(loss, numeric_nodes)
        self._lines: dict[float, dict[int, _HeightCache]] = {}  # Re s -> {term: its log M by Im s}
        #: eps -> (chernoff_bound(eps), whether from the saddle), the latest CACHED_LINES
        self._chernoff: dict[float, tuple[float, bool]] = {}
        self._parts = _mgf_parts(loss)
        self._prunes = bool(self._parts[2])
        finite = {term for term, _ in self._parts[2]}
        self._unshifted = ComposedLoss({term: count for term, count in loss.evaluation_terms.items()
                                        if term not in finite})

    def chernoff_bound(self, epsilon: float, target: float | None = None) -> float:
        """An upper bound on delta(eps) from the MGF on the real axis alone, no contour sum: the mass at
        +infinity plus M(c) e^{-c eps} c^c / (1 + c)^{1 + c} = c e^{Psi(c)} (c / (1 + c))^c (Chernoff:
        (1 - e^{eps - x})_+ <= e^{c (x - eps)} c^c / (1 + c)^{1 + c} for every x and c > 0, the supremum over x
        of the ratio being attained at e^{eps - x} = c / (1 + c)), raised by the node values' rounding
        (:meth:`_rounding`, which counts numeric MGF terms' relative error), at the saddle c -- or, given a
        ``target``, at the first of the saddle search's iterates where it is at most ``target``."""

        def bound_at(c: float, psi: float) -> float:
            log_bound = (math.log(c) + psi - c * math.log1p(1 / c)
                         + ROUNDING_FACTOR * self._rounding(c, psi, epsilon))
            return self.inf_mass + (math.exp(log_bound) if log_bound < LOG_HUGE else math.inf)

        known, searched = self._chernoff.get(epsilon, (math.inf, False))
        if searched or (target is not None and known <= target):
            return known
        enough = None if target is None else (lambda c, psi: bound_at(c, psi) <= target)
        try:
            found = None if epsilon >= self.loss.loss_max else self.saddle(epsilon, enough)
        except budget.BudgetExceededError:
            raise
        except AccuracyError:  # no saddle point found: no bound from here
            return math.inf
        # (None: c e^{Psi(c)} is below the smallest double somewhere)
        bound = self.inf_mass if found is None else bound_at(found[0], found[1])
        self._chernoff[epsilon] = (bound, target is None or bound > target)
        while len(self._chernoff) > CACHED_LINES:
            del self._chernoff[next(iter(self._chernoff))]
        return bound

    def log_mgf(self, s: np.ndarray) -> np.ndarray:
        """log M(s) = log phi(-is) of the composed finite part (complex s); the finite terms by
        :func:`_finite_log_mgf` (no overflow at large Re s)."""
        s = np.asarray(s, dtype=complex)
        log_m = self._unshifted.log_phi_numeric(-1j * s) if self._unshifted.terms else np.zeros(s.shape, complex)
        for term, count in self._parts[2]:
            log_m = log_m + count * _finite_log_mgf(term, s)
        return log_m

    def log_mgf_and_envelope(self, s: np.ndarray, log_floor: np.ndarray | None = None, keep: int = 0) -> tuple:
        """(log M(s), log B(s), log D(s), log R(s)) at complex ``s``: B(s) >= |M(s)|, where ``log_floor`` is
        given a bound D on the nodes left out, and R(s) the relative error of M(s) its finite, mixed and numeric
        terms carry (None if it has none).

        The parts of :func:`_mgf_parts` are evaluated cheapest first: closed-form atomless terms and terms
        with atoms and a continuous part at every node, then the finite terms (fewest atoms first), then
        the numeric ones (their values kept per vertical line, the latest CACHED_LINES real parts, so that
        eps sharing a snapped line -- :meth:`_snapped_line` -- share them).  B is |M| of the atomless
        terms, |M_i - A_i| + A_i(c) for a term with atoms A_i and a continuous part, and M_j(c) >= |M_j(c + it)|
        for a finite term j: it does not grow along the line once the continuous parts decay.  A node whose
        running bound (|M| of the terms evaluated so far times M_j(c) of the others) is already below
        ``log_floor`` is left out (except the last ``keep`` nodes): log M is -inf there and D (-inf at the
        nodes kept) is that bound.  Without a floor D is None.

        Those terms' values err by a small multiple of their values on the real line, not of |M_i(s)|: a numeric
        MGF by ``log_phi_rtol`` of M_i(c) (a sum of terms of modulus M_i(c) in all), a finite or mixed term by a
        few ulps of its envelope times 1 + |s| max |l| (each atom's phase s l is rounded).  Relative to M_i(s) and
        for count_i uses that is count_i r_i B_i(c) / |M_i(s)|; R sums it over the terms (at the nodes left out it
        is not formed: -inf).
        """
        s = np.asarray(s, dtype=complex)
        closed, mixed, finite, numeric = self._parts
        nodes = -1j * s
        lines, line_of = distinct_values(s.real.ravel())
        line_of = line_of.reshape(s.shape)
        real_lines = -1j * lines.astype(complex)
        log_m = closed.log_phi_numeric(nodes) if closed.terms else np.zeros(s.shape, dtype=complex)
        log_bound = log_m.real.copy()
        relative = np.zeros(s.shape)
        for term, count in mixed:  # |M_i(c + it)| <= |M_i(c + it) - A_i(c + it)| + A_i(c)
            log_term, log_rest = log_phi_and_continuous_part(term, nodes)
            log_m = log_m + count * log_term
            log_envelope = np.logaddexp(log_rest, term.atoms.log_phi(real_lines).real[line_of])
            log_bound += count * log_envelope
            relative += count * _term_rounding(term, s) * np.exp(log_envelope - log_term.real)
        log_relative = np.log(relative) if mixed else None
        if not finite and not numeric:
            return log_m, log_bound, None if log_floor is None else np.full(s.shape, -np.inf), log_relative
        # |M_j(c + it)| <= M_j(c) for every term j: the bound of a term not evaluated (yet)
        at_line = [count * _finite_log_mgf(term, lines.astype(complex)).real[line_of] for term, count in finite]
        at_line += [count * self._numeric_term(len(finite) + index, term, lines.astype(complex)).real[line_of]
                    for index, (term, count) in enumerate(numeric)]
        running = log_bound + sum(at_line)
        log_bound = log_bound + sum(at_line[:len(finite)])
        kept = np.ones(s.shape, dtype=bool)
        for index, ((term, count), constant) in enumerate(zip(finite + numeric, at_line)):
            if log_floor is not None:
                kept &= running > log_floor
                kept[s.size - keep:] = True
            if index < len(finite):
                self._spend(float(np.count_nonzero(kept)) * term.atoms.size)
                log_term = count * _finite_log_mgf(term, s[kept])
                rtol = _term_rounding(term, s[kept])
            else:
                log_term = count * self._numeric_term(index, term, s[kept])
                log_bound += np.where(kept, 0.0, constant)
                log_bound[kept] += log_term.real
                rtol = term.log_phi_rtol
            log_m[kept] += log_term
            running[kept] += log_term.real - constant[kept]
            with np.errstate(over="ignore"):  # |M_i(s)| below the smallest double: its node is not summed
                relative[kept] += count * rtol * np.exp((constant[kept] - log_term.real) / count)
        with np.errstate(divide="ignore"):
            log_relative = np.log(relative)
        if log_floor is None:
            return log_m, log_bound, None, log_relative
        log_m[~kept] = -np.inf
        log_relative[~kept] = -np.inf
        return log_m, log_bound, np.where(kept, -np.inf, running), log_relative

    def _prefetch(self, s: np.ndarray) -> None:
        """The numeric terms' log M at the nodes ``s`` of one vertical line, kept (:meth:`_numeric_term`): a
        trapezoid's first level asks for the nodes of its next halvings too, since a lattice's sums cost
        about as much for all of its points as for a few (:func:`afa.mechanisms.noise_pair.fourier_sums`)."""
        offset = len(self._parts[2])
        for index, (term, _) in enumerate(self._parts[3]):
            try:
                self._numeric_term(offset + index, term, s)
            except NodeBudgetError:  # beyond the sum's work allowance: its own nodes are evaluated as needed
                return

    def _numeric_term(self, index: int, term, s: np.ndarray) -> np.ndarray:
        """log M of one numeric term at ``s``, kept per vertical line (CACHED_LINES of them) and height."""
        if s.size == 0 or not np.all(s.real == s.real[0]):
            out = np.empty(s.shape, dtype=complex)
            for start in range(0, s.size, NUMERIC_CHUNK):
                budget.check("evaluating a numeric MGF along the contour")
                self._spend_numeric(term, s[start:start + NUMERIC_CHUNK])
                out[start:start + NUMERIC_CHUNK] = batched_log_phi(-1j * s[start:start + NUMERIC_CHUNK], [term])[:, 0]
            return out
        line = self._lines.pop(float(s.real[0]), {})
        self._lines[float(s.real[0])] = line  # (re)inserted last: the most recent line
        while len(self._lines) > CACHED_LINES:
            del self._lines[next(iter(self._lines))]
        cache = line.setdefault(index, _HeightCache())
        heights = s.imag.ravel()
        values, found = cache.lookup(heights)
        if not np.all(found):
            missing = np.unique(heights[~found])
            for start in range(0, missing.size, NUMERIC_CHUNK):  # numeric MGFs are costly: the budget is checked
                budget.check("evaluating a numeric MGF along the contour")
                nodes = s.real[0] + 1j * missing[start:start + NUMERIC_CHUNK]
                self._spend_numeric(term, nodes)
                cache.add(nodes.imag, batched_log_phi(-1j * nodes, [term])[:, 0])
            values[~found] = cache.lookup(heights[~found])[0]
        return values.reshape(s.shape)

    def _probe_work(self, s: np.ndarray) -> float:
        return float(sum(np.sum(term.evaluation_cost(-1j * s)) for term, _ in self._parts[3]
                         if term.evaluation_cost is not None))

    def _spend_numeric(self, term, s: np.ndarray) -> None:
        """Count the work of one numeric term at the nodes ``s`` of one line (:meth:`_spend`): its output nodes
        at each node, or once times NUFFT_WORK for a lattice summed at once."""
        if self._work_left is None or term.evaluation_cost is None:
            return
        if s.size and np.all(s.real == s.real[0]) and summed_at_once(s.imag):  # one rule, for the farthest node
            farthest = s[np.argmax(np.abs(s.imag))]
            self._spend(NUFFT_WORK * float(term.evaluation_cost(np.array([-1j * farthest]))[0]))
        else:
            self._spend(float(np.sum(term.evaluation_cost(-1j * s))))

    def _log_integrand(self, s, epsilon):
        return self._integrand_from(self.log_mgf(s), s, epsilon)

    @staticmethod
    def _integrand_from(log_mgf, s, epsilon):
        return log_mgf - s * epsilon - np.log(s) - np.log1p(s)

    def _node_log_integrand(self, s, epsilon, psi=None):
        """(log f, log E, log D, log R) from the bounds of :meth:`log_mgf_and_envelope`, nodes left out below
        SKIP_RTOL e^psi (never the last 8: they end the node sums)."""
        scale = s.real * epsilon + np.log(np.abs(s)) + np.log(np.abs(1 + s))  # |f| = |M| / e^scale
        floor = None if psi is None else psi + math.log(SKIP_RTOL) + scale
        log_m, log_bound, log_skipped, log_relative = self.log_mgf_and_envelope(s, floor, keep=8)
        with np.errstate(invalid="ignore"):  # -inf - s eps at the nodes left out
            log_f = np.where(np.isneginf(log_m.real), -np.inf, self._integrand_from(log_m, s, epsilon))
        return log_f, log_bound - scale, None if log_skipped is None else log_skipped - scale, log_relative


class _HeightCache:
    """log M of one numeric term at the heights (Im s) of one vertical line evaluated so far: sorted arrays, and
    the pieces added since they were last merged."""

    def __init__(self) -> None:
        self.heights = np.empty(0)
        self.values = np.empty(0, dtype=complex)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []

    def lookup(self, heights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, found): the kept log M at ``heights`` where found (elsewhere undefined)."""
        if self._pending:
            merged_heights = np.concatenate([self.heights] + [piece[0] for piece in self._pending])
            merged_values = np.concatenate([self.values] + [piece[1] for piece in self._pending])
            order = np.argsort(merged_heights, kind="stable")
            self.heights, self.values, self._pending = merged_heights[order], merged_values[order], []
        values = np.empty(heights.shape, dtype=complex)
        if self.heights.size == 0:
            return values, np.zeros(heights.shape, dtype=bool)
        where = np.minimum(np.searchsorted(self.heights, heights), self.heights.size - 1)
        found = self.heights[where] == heights
        values[found] = self.values[where[found]]
        return values, found

    def add(self, heights: np.ndarray, values: np.ndarray) -> None:
        """Keep ``values`` at ``heights`` (heights not kept yet)."""
        self._pending.append((np.asarray(heights, dtype=float), np.asarray(values, dtype=complex)))


class NodeBudgetError(AccuracyError):
    """A contour sum needs more nodes than its node budget (a larger one, ``numeric_nodes``, may answer)."""


#: Re(s) times a finite term's largest |loss| above which its MGF is summed with the largest loss factored out.
SHIFT_ABOVE = 300.0


def _finite_log_mgf(term, s: np.ndarray) -> np.ndarray:
    """log M(s) of one finite term at complex ``s`` (Re s > 0): its log-CF where Re(s) max |l_j| <= SHIFT_ABOVE
    (accurate near s = 0), else s l_max + log sum_j w_j e^{s (l_j - l_max)}, whose terms cannot overflow."""
    s = np.asarray(s, dtype=complex)
    losses, log_masses = term.atoms.losses, term.atoms.log_masses
    shifted = s.real * float(np.max(np.abs(losses))) > SHIFT_ABOVE
    out = np.empty(s.shape, dtype=complex)
    if not np.all(shifted):
        out[~shifted] = batched_log_phi(-1j * s[~shifted], [term])[:, 0]
    if np.any(shifted):
        budget.reserve(16.0 * np.count_nonzero(shifted) * losses.size, "a finite term's MGF at the contour's nodes")
        exponents = s[shifted, None] * (losses - losses[-1])[None, :] + log_masses[None, :]
        top = np.max(exponents.real, axis=1)
        out[shifted] = s[shifted] * losses[-1] + top + np.log(np.exp(exponents - top[:, None]).sum(axis=1))
    return out


def _fixed_errors(s: np.ndarray, log_relative: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The part of :func:`_node_errors` at the nodes ``s`` that does not depend on eps, and |s|."""
    modulus = np.abs(s)
    fixed = np.finfo(float).eps * (SUM_ULPS + 2 * NODE_ULPS * (np.abs(np.log(s)) + np.abs(np.log1p(s))))
    if log_relative is not None:
        fixed += np.exp(log_relative)
    return fixed, modulus


def _node_errors(log_f: np.ndarray, fixed: np.ndarray, modulus: np.ndarray, epsilon: float) -> np.ndarray:
    """Bounds on the relative error of the integrand's values f at nodes s (``log_f`` = log f, ``modulus`` = |s|):
    NODE_ULPS ulps of each part of log f = log M(s) - s eps - log s - log(1 + s) (|log M| at most |log f| plus
    the others), the rounding of the node sum (SUM_ULPS), and the terms' own errors R
    (:meth:`_SaddlePointContour._node_log_integrand`) -- all but the eps terms in ``fixed``
    (:func:`_fixed_errors`)."""
    return fixed + np.finfo(float).eps * NODE_ULPS * (np.abs(log_f) + 2 * abs(epsilon) * modulus)


def _sum_rounding(size: int, largest: float, s: np.ndarray) -> np.ndarray:
    """Relative error, as a share of its modulus sum, of a sum of ``size`` terms w_j e^{s l_j} at complex ``s``
    with |l_j| <= ``largest``: ATOM_ULPS ulps per sum, plus the rounding of each phase s l_j."""
    return ATOM_ULPS * np.finfo(float).eps * (1.0 + math.log2(size + 1) + np.abs(s) * largest)


def _term_rounding(term, s: np.ndarray) -> np.ndarray:
    """:func:`_sum_rounding` of a term's atoms' MGF (a share of the term's envelope, its modulus sum on the real
    line)."""
    largest = float(np.max(np.abs(term.atoms.losses))) if term.atoms.size else 0.0
    return _sum_rounding(term.atoms.size, largest, s)


def _mgf_parts(loss: ComposedLoss):
    """The composition's terms in the groups of :meth:`ContourInversion.log_mgf_and_envelope`.

    Terms with atoms do not make |M(c + it)| decay: a finite (lattice-valued) term is periodic in t
    (period 2 pi / spacing) or almost periodic, so |M| has replicas of the saddle's bump wherever the
    atoms' phases realign, damped only by the other terms; the envelope bounds them by their values on
    the real axis.  Returns (closed-form atomless terms as one ComposedLoss, [(term with atoms and a
    continuous part, count)], [(finite term, count)] fewest atoms first, [(numeric atomless term, count)]).
    """
    closed, mixed, finite, numeric = {}, [], [], []
    for term, count in loss.evaluation_terms.items():
        if term.atoms.size == 0:
            if term.log_phi_rtol > 0:
                numeric.append((term, count))
            else:
                closed[term] = count
        elif term.continuous:
            mixed.append((term, count))
        else:
            finite.append((term, count))
    finite.sort(key=lambda pair: pair[0].atoms.size)
    return ComposedLoss(closed), mixed, finite, numeric


#: Rounding units per term allowed for each lattice group's shift (its atoms' losses and the binomial sums).
SHIFT_ULPS = 4.0
#: Most lattice groups (distinct (l, J) pairs) the lattice contour handles.
MAX_GROUPS = 20_000
#: Terms of the small-gap series of a lattice group.
SERIES_TERMS = 40


class LatticeContourInversion(_SaddlePointContour):
    """Compositions of Laplace-type losses and finite-output mechanisms, atoms and all.

    One Laplace loss with a = sensitivity / scale (Zhu, Dong & Wang 2022, Lemma 34) has
    M(s) = U(s) [e^{as} + e^{-a} e^{-as} r(s)],  U = (s + 1)/(2s + 1),  r = s/(s + 1):
    U is the MGF of (1/2) delta_0 + (1/4) e^{y/2} dy on y < 0, and r that of
    delta_0 - e^{y} dy on y < 0.  A composition of K Laplace losses (any a_i,
    each with its finite mass 1 - m_i) and finite losses with atoms (lambda_n, p_n) is

        M(s) = U(s)^K sum_g W_g e^{s l_g} r(s)^{J_g},

    a sum over lattice groups g: J_g of the K Laplace terms took their
    e^{-a(1+s)} r part, l_g the resulting shift, W_g > 0 the weight.  Group g
    is a signed measure supported on (-inf, l_g], so only groups with
    x_g = l_g - eps > 0 contribute to delta(eps), and their integrand
    e^{s x_g} U^K r^{J_g} / (s (s + 1)) decays exponentially to the left:
    the contour bends left once |Im s| clears the poles at -1/2 and -1.
    Groups with a small gap x_g < 2 / (K + 2) are summed from the Laurent
    series of their integrand at infinity instead (inverse Laplace transform
    term by term), which converges fast there.
    """

    def __init__(self, loss: ComposedLoss, numeric_nodes: int | None = None):
        if not loss.continuous:
            raise UnsupportedCompositionError("the composition has no continuous part; use method='exact'")
        groups = lattice_groups(loss)
        if groups is None:
            raise UnsupportedCompositionError(
                "the composition has atoms of non-negligible mass and terms other than Laplace-type and finite-output "
                "mechanisms; the contour integrand then decays only like 1/t^2: use method='quadrature'")
        super().__init__(loss, numeric_nodes)
        self.shifts, self.counts, self.log_weights, self.laplace_count = groups
        #: A bound on the rounding of every shift (a sum over the composition's terms of products count * loss).
        self.shift_rounding = SHIFT_ULPS * np.finfo(float).eps * (float(np.max(np.abs(self.shifts))) + 1.0) \
            * (len(loss.terms) + 1)
        self.near_gap = 2.0 / (self.laplace_count + 2)
        # Far enough up the contour that |U|^K and |r|^J are within a factor e of their limits.
        self.width = 3.0 * math.sqrt(self.laplace_count + float(np.max(self.counts)) + 1.0)

    def _above(self, epsilon: float, near: bool) -> np.ndarray:
        gaps = self.shifts - epsilon
        return (gaps > 0) & (gaps < self.near_gap) if near else gaps >= self.near_gap

    def _log_integrand(self, s, epsilon):
        return self._node_log_integrand(s, epsilon)[0]

    def _node_log_integrand(self, s, epsilon, psi=None):
        """(log f, log E, None, log R) with E the sum of the groups' moduli (each decays along the bent contour)
        and R = E / |f| times the groups' sum's rounding (:func:`_sum_rounding`, phases s (l - eps))."""
        far = self._above(epsilon, near=False)
        with np.errstate(divide="ignore"):
            log_r = np.log(s) - np.log1p(s)
            log_u = np.log1p(s) - np.log1p(2 * s)
        terms = (self.log_weights[far][None, :] + s[:, None] * (self.shifts[far] - epsilon)[None, :]
                 + self.counts[far][None, :] * log_r[:, None])
        top = np.max(terms.real, axis=1, keepdims=True)
        scaled = np.exp(terms - top)
        rest = self.laplace_count * log_u - np.log(s) - np.log1p(s)
        with np.errstate(divide="ignore"):
            log_f = top[:, 0] + np.log(scaled.sum(axis=1)) + rest
            log_envelope = top[:, 0] + np.log(np.abs(scaled).sum(axis=1)) + rest.real
            largest = float(np.max(np.abs(self.shifts[far] - epsilon), initial=0.0))
            rounding = _sum_rounding(int(np.count_nonzero(far)), largest, s)
            log_relative = np.log(rounding) + log_envelope - log_f.real
        return log_f, log_envelope, None, log_relative

    def _bend(self, epsilon):
        gaps = self.shifts - epsilon
        smallest = float(np.min(gaps[gaps >= self.near_gap]))
        # e^{x b(u)} falls below e^-45 by u - Y of about 4 Y for the smallest far gap x.
        return max(1.0, 45.0 / (smallest * (4 * self.width) ** 2)), self.width

    def _near_delta(self, epsilon: float) -> tuple[float, float]:
        """The groups with 0 < x_g < near_gap, from their series, and minus its eps-derivative.

        In u = 1/s the integrand is W u^2 (1 + u)^{K - J - 1} (2 + u)^{-K} = W 2^-K sum_n a_n u^{n+2},
        and u^{n+2} inverts to x^{n+1} / (n+1)!: the group gives W 2^-K sum_n a_n x^{n+1} / (n+1)!.
        """
        near = self._above(epsilon, near=True)
        value = slope = 0.0
        order = np.arange(SERIES_TERMS)
        for gap, count, log_weight in zip(self.shifts[near] - epsilon, self.counts[near], self.log_weights[near]):
            power = self.laplace_count - count - 1
            binomial = np.cumprod(np.concatenate(([1.0], (power - order[:-1]) / (order[:-1] + 1))))
            halves = np.cumprod(np.concatenate(([1.0], (-self.laplace_count - order[:-1]) / (2 * (order[:-1] + 1)))))
            coefficients = np.convolve(binomial, halves)[:SERIES_TERMS]
            powers = np.exp(order * math.log(gap) - gammaln(order + 1))  # x^n / n!
            weight = math.exp(log_weight - self.laplace_count * math.log(2))
            value += weight * math.fsum(coefficients * powers * gap / (order + 1))
            slope += weight * math.fsum(coefficients * powers)
        return value, slope

    def verify(self, epsilon):
        if np.any(self._above(epsilon, near=False)):  # else no contour sum (the series alone)
            super().verify(epsilon)

    def delta_and_slope(self, epsilon):
        """As the vertical contour's, plus the near groups' series; the error also covers the rounding of
        the shifts l_g (sums of many losses): moving every atom by at most r moves delta by about
        r -delta'(eps), which matters where delta is tiny, e.g. at the top of a bounded loss (truth 0)."""
        near, near_slope = self._near_delta(epsilon)
        if not np.any(self._above(epsilon, near=False)):
            return self.inf_mass + near, 1e-15 * near + 2 * abs(near_slope) * self.shift_rounding, near_slope
        value, error, slope = super().delta_and_slope(epsilon)
        return (value + near, error + 1e-15 * near + 2 * abs(slope + near_slope) * self.shift_rounding,
                slope + near_slope)


def lattice_groups(loss: ComposedLoss):
    """(l_g, J_g, log W_g, K) of a composition of Laplace-type and finite losses, or None if it is not one.

    Raises CompositionTooLargeError beyond MAX_GROUPS groups.
    """
    finite = [(term.atoms, times) for term, times in loss.terms.items() if not term.continuous]
    shifts_bound = math.prod(times + 1 for term, times in loss.terms.items() if term.laplace_shift is not None)
    if clearly_beyond(estimated_atoms(finite) * shifts_bound, MAX_GROUPS):  # refused before composing them
        raise CompositionTooLargeError(f"the lattice contour would need more than {MAX_GROUPS} groups")
    shifts, counts, log_weights = np.zeros(1), np.zeros(1), np.zeros(1)
    laplace_count, atoms = 0, None
    for term, times in loss.terms.items():
        if term.laplace_shift is not None:
            a = term.laplace_shift
            j = np.arange(times + 1)
            log_binomial = gammaln(times + 1) - gammaln(j + 1) - gammaln(times - j + 1)
            shifts = (shifts[:, None] + a * (times - 2 * j)[None, :]).ravel()
            counts = (counts[:, None] + j[None, :]).ravel()
            exponents = times * term.log_finite_mass + log_binomial - a * j
            log_weights = (log_weights[:, None] + exponents[None, :]).ravel()
            laplace_count += times
        elif not term.continuous:
            power = term.atoms.power(times)
            atoms = power if atoms is None else atoms.convolve(power)
        else:
            return None
        if shifts.size > MAX_GROUPS:
            raise CompositionTooLargeError(f"the lattice contour would need more than {MAX_GROUPS} groups")
    if laplace_count == 0:
        return None
    if atoms is not None:
        if atoms.size * shifts.size > MAX_GROUPS:
            raise CompositionTooLargeError(f"the lattice contour would need more than {MAX_GROUPS} groups")
        shifts = (shifts[:, None] + atoms.losses[None, :]).ravel()
        counts = np.repeat(counts, atoms.size)
        log_weights = (log_weights[:, None] + atoms.log_masses[None, :]).ravel()
    return _merge_groups(shifts, counts, log_weights) + (laplace_count,)


def _merge_groups(shifts, counts, log_weights):
    """Merge groups with the same J and shifts equal to rounding."""
    order = np.lexsort((shifts, counts))
    shifts, counts, log_weights = shifts[order], counts[order], log_weights[order]
    scale = max(1.0, float(np.max(np.abs(shifts))))
    new = np.concatenate(([True], (np.diff(counts) != 0) | (np.diff(shifts) > 1e-12 * scale)))
    starts = np.flatnonzero(new)
    tops = np.maximum.reduceat(log_weights, starts)  # each group's log-sum-exp, all groups at once
    safe = np.where(np.isfinite(tops), tops, 0.0)
    sizes = np.diff(np.append(starts, log_weights.size))
    with np.errstate(divide="ignore"):
        merged = safe + np.log(np.add.reduceat(np.exp(log_weights - np.repeat(safe, sizes)), starts))
    return shifts[starts], counts[starts], np.where(np.isfinite(tops), merged, tops)


def contour_inversion(loss: ComposedLoss,
                      numeric_nodes: int | None = None) -> _SaddlePointContour | PileSplitContour:
    """The lattice contour where atoms carry non-negligible mass, else the vertical one; ``numeric_nodes``
    (default: the active :class:`afa.ContourOptions`' ``numeric_nodes``) caps one contour sum's nodes when
    the composition has numeric MGF terms (subsampled mechanisms); many uses of a subsampled Gaussian with a small
    sampling rate split its loss law into pile and tail (:mod:`afa.engines.pile_split`)."""
    from .pile_split import PileSplitContour, split_pair  # (it builds on this module's inversions)

    if loss.log_atomic_mass > math.log(RTOL) - 30:
        return LatticeContourInversion(loss, numeric_nodes)
    if split_pair(loss) is not None:
        return PileSplitContour(loss, numeric_nodes)
    return ContourInversion(loss, numeric_nodes)
