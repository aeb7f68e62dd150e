"""Certified lower and upper bounds on delta(eps) of a k-fold composed noise-mixture pair.

Zhu, Dong & Wang 2022, App. E: Algorithm 2 cuts the output domain [-S, S] of a
dominating pair (A, B) into N equal cells; Definition 39 bounds the privacy loss
L = log(A/B) on each cell by its minimum and maximum; Lemma 40 and Corollary 41 turn the
two grid approximations into a lower and an upper bound on delta(eps) of the k-fold
composition; Theorem 44 adds the truncation error k * delta_tail (E.2 works it out for the
Poisson-subsampled Gaussian).  ``certified_delta`` computes that bracket,

    lower(eps) <= delta(eps) = H_{e^eps}(A^k || B^k) = E_{A^k}[(1 - e^{eps - L_1 - ... - L_k})_+] <= upper(eps),

for a :class:`afa.mechanisms.noise_pair.NoiseMixturePair`, with these refinements, each keeping it
certified:

1. Cells (Algorithm 2, step 1).  [-reach, reach] is cut into ``cells`` equal cells, plus the
   two tails.  The masses A(cell), B(cell) are computed in log space (differences of
   ``log_ndtr`` for Gaussian noise, the closed-form CDF for Laplace noise), each with an
   explicit bound on its rounding error (cancellation in the difference, rounding of the
   cell's ends).
2. Loss range of a cell (Definition 39).  L' = m_A - m_B, where m_X(o) is the posterior mean,
   over the components of X, of the components' log-density slopes; m_X is nondecreasing
   between kinks (its derivative is a posterior variance).  So on a cell [x, y],
   m_A(x) - m_B(y) <= L' <= m_A(y) - m_B(x).  Where this proves L monotone the end values
   bound L; otherwise two lines through the ends with these slopes (a local Lipschitz
   bound, never looser than ``pair.loss_slope``) bound L.  Beyond every shift a Laplace loss
   is constant, so Laplace tails are exact cells; a Gaussian tail on which L is monotone is
   bounded on one side.
3. Upper bound.  On a cell where e^{g_lo} <= A/B <= e^{g_hi}, (A, B) restricted to the cell is
   a post-processing of two atoms with likelihood ratios e^{g_lo} and e^{g_hi} (split each
   point's (A, B) mass along the two ratios).  With g_lo <= min L and g_hi >= max L on a grid
   of step h, this gives a dominating pair on the grid: Lemma 40's L^+ without its
   monotonicity assumption and with an error of second order in the cell's loss range and
   in h (a mean-preserving spread of the ratio, "connect the dots").  A-mass where L is
   unbounded above (a Gaussian tail) goes to +infinity: Theorem 44's k * delta_tail.
4. Lower bound.  Merging cells is a post-processing, so the pair of cell masses is dominated
   by (A, B) (data processing replaces Lemma 40's monotonicity assumption; the tails are two
   more cells, nothing is dropped).  Cells are grouped by the nearest grid point g of their
   loss; a group whose merged ratio is below e^g merges in the fraction of the next group up
   that lifts it exactly to e^g, a group above e^g a fraction of the previous group (more
   merging); whatever is left between grid points is rounded down.  The error is of second
   order in h where Lemma 40's L^- loses up to a whole grid step per use.
5. Composition.  Both bounds are atoms on a loss grid (a power-of-two step through 0, so every
   k-fold sum is exact; for Laplace noise the grid passes just below the two constant tail
   losses, which carry much mass): a pessimistic and an optimistic discretized PLD of the losses
   less the grid's origin (:class:`afa.engines.pld.DiscretePLD`; the A-mass where the loss is
   unbounded above sits at +infinity in the pessimistic one).  Their k-fold powers are those of the
   PLD engine (one FFT core: window, Chernoff bounds, rounding bounds, tilted and direct powers, mass
   at +infinity; :meth:`afa.engines.pld.DiscretePLD.self_compose`), certified in the direction of
   each; the composed losses sit k times the origin above the powers' grids, so delta(eps) is read
   at eps - k * origin (moved by its rounding towards the safe side).
6. Rounding.  Masses carry their log-error bounds, sums of n positive terms a relative (n + 1) u
   margin, loss comparisons a few ulps of the magnitudes involved; the FFT powers carry the PLD's
   rounding bounds (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Sec. 24.1).
   Library routines are taken accurate to a few ulps (scipy's ``log_ndtr``, numpy's
   ``exp``/``log``/``expm1``).
7. Tiny delta.  A plain FFT power's rounding is absolute (about k * 1e-14), and the truncated mass is
   ``tail_tolerance``: below either the bracket says nothing.  One use needs no power (the one-step
   measure is the composed one, exactly).  For k > 1 the powers are also formed tilted at a given
   lam (the PLD's tilted powers: their error decays like e^{-lam eps}, relative to delta near the eps
   whose saddle point is lam), and the bracket keeps the better end of the plain and tilted
   evaluations.  :class:`afa.engines.base.CertifiedEngine` passes a tail tolerance of 1e-7 delta and
   the Chernoff order for delta (or the saddle point at the eps asked about).

Measured (default cells = 2**18, automatic reach, 2 shared cores; width = upper - lower):

* Poisson-subsampled Gaussian, q = 0.01, sigma = 1, max over the two directions, at the
  literature eps(1e-5): k = 100, eps = 0.718036: [9.999840e-06, 9.999990e-06] (relative width
  1.5e-5); k = 1000, eps = 1.828237: [9.999687e-06, 1.000026e-05] (5.7e-5); 0.4 - 0.6 s a direction.
* Gaussian, mu = sqrt(k) / sigma = 1, eps in [0, 4]: width <= 7.4e-8 (k = 1), 2.4e-7 (k = 10),
  9.7e-7 (k = 1000), 8.8e-6 (k = 10 000); relative width at eps = 4 (delta = 4.7e-5): 1.6e-6,
  3.6e-6, 4.2e-5, 4.0e-4.
* Laplace, b = 1: width 1.9e-8 (k = 1), 6.4e-8 (k = 10).

Widths shrink roughly quadratically in 1 / cells (time is linear in cells).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import log_ndtr, ndtri

from .. import _validation as check
from .. import budget
from .._accurate import UNIT_ROUNDOFF as U
from .._accurate import log_sum_exp
from ..mechanisms.noise_pair import NoiseMixturePair
from ..results import AccuracyError
from .pld import DiscretePLD, composition_tilt

__all__ = ["certified_delta"]

# Mass allowed beyond the automatic reach (all k steps together) and outside the FFT window.
TAIL_TOLERANCE = 1e-25
# The lower bound's grid step spans at least this many cells' loss differences.
CELLS_PER_GROUP = 4
# Largest fraction of a group merged into the next group up (lower bound).
GIVE_UP_TO = 0.5
# Smallest log-mass kept in linear space (exp underflows below about -745).
LOG_TINY = -700.0
# The loss grid has at least about this many points over the composed loss's range.
MIN_GRID_POINTS = 2 ** 14
# ... and the lower bound's grid at least this many (it prefers several cells per grid step).
MIN_GRID_POINTS_LOWER = 2 ** 10
# The loss grid spans at least this much (a pair with A = B has a loss range of zero).
MIN_LOSS_SPAN = 1e-9
# The rounding the plain powers accept (it enters their bounds): no tilted or direct power for them.
PLAIN_ROUNDING = 0.5


def certified_delta(pair: NoiseMixturePair, count: int, epsilons: ArrayLike, *,
                    cells: int = 2 ** 18, reach: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Certified (lower, upper) bounds on delta(eps) of ``pair`` composed ``count`` times.

    delta(eps) = H_{e^eps}(A^k || B^k) for the pair (A, B) = (``pair``'s A side, B side); the
    other direction of an add/remove analysis is ``pair.swapped()``.  The bracket follows
    Zhu, Dong & Wang 2022, App. E -- Algorithm 2 (cells of the output domain),
    Definition 39 / Lemma 40 (loss bounds per cell give lower and upper bounds),
    Corollary 41 (composition), Theorem 44 (truncation adds k * delta_tail) -- made rigorous
    as the module docstring explains: lower <= delta(eps) <= upper holds for every eps,
    rounding errors included.

    Parameters
    ----------
    pair : the dominating pair (A, B), Gaussian or Laplace noise mixtures.
    count : k, the number of compositions (a positive integer).
    epsilons : the eps values (finite reals), any shape.
    cells : N, the number of equal cells of [-reach, reach] (Algorithm 2); the privacy-loss
        grid has about as many points over the composed loss's range.  Widths shrink roughly
        quadratically in 1/cells; time grows linearly (about 0.6 s at the default, k = 1000).
    reach : S, the half-width of the discretized output interval.  By default the largest
        |shift| plus enough noise scales that the tails carry at most 1e-25 / count of A's
        mass (Gaussian), or the largest |shift| (Laplace, whose loss is constant beyond it).

    Returns
    -------
    (lower, upper), float arrays of the shape of ``epsilons``, 0 <= lower <= upper <= 1.
    """
    epsilons = check.real_array("epsilons", epsilons)
    return CertifiedBracket(pair, count, cells=cells, reach=reach).delta(epsilons)


class CertifiedBracket:
    """The two composed grid measures of :func:`certified_delta`, built once; ``delta`` evaluates any eps.

    Building costs the FFT powers (about 0.3-1 s at the default cells); each further eps is cheap,
    which root finding for eps(delta) needs.  ``tail_tolerance`` is the mass allowed beyond the reach
    (all k steps together) and outside the FFT window; bounds below about it are not resolved, so pass
    a fraction of the smallest delta of interest.  ``delta(eps, tilt)`` also evaluates the tilted powers
    (module docstring, refinement 7) at a tilt from :meth:`tilt_for`, for deltas far below the plain
    FFT's rounding (about k * 1e-14).
    """

    #: The ``tail_tolerance`` when none is given.
    default_tail_tolerance: ClassVar[float] = TAIL_TOLERANCE

    def __init__(self, pair: NoiseMixturePair, count: int, *, cells: int = 2 ** 18, reach: float | None = None,
                 tail_tolerance: float = TAIL_TOLERANCE):
        if not isinstance(pair, NoiseMixturePair):
            raise TypeError(f"pair must be a NoiseMixturePair, got {type(pair).__name__}")
        count = _integer("count", count, minimum=1)
        cells = _integer("cells", cells, minimum=2)
        tail_tolerance = check.in_interval("tail_tolerance", tail_tolerance, 0.0, 1e-3, low_open=True)
        budget.reserve(64 * 8 * cells, "the cells of the certified bracket")
        pair = pair.without_empty_components()
        reach = _default_reach(pair, count, tail_tolerance) if reach is None else check.positive("reach", reach)
        edges = np.linspace(-reach, reach, cells + 1)
        masses = _CellMasses.of(pair, edges)
        loss_min, loss_max = _cell_loss_ranges(pair, edges)
        points = max(cells, MIN_GRID_POINTS)
        fine_grid = _loss_grid(pair, edges, masses, count, points, 0.0, tail_tolerance)
        # The lower bound merges cells: its groups should hold several cells each.
        group_grid = _loss_grid(pair, edges, masses, count, points, CELLS_PER_GROUP * _cell_loss_width(masses),
                                tail_tolerance)
        budget.check("the upper bound of the certified bracket")
        self._upper_measure = _upper_bound(masses, loss_min, loss_max, fine_grid)
        budget.check("the lower bound of the certified bracket")
        self._lower_measure = _lower_bound(masses, group_grid)
        self.count, self.tail_tolerance = count, tail_tolerance
        #: tilt -> (upper, lower) composed PLDs; None: each power's own choice
        self._powers: dict[float | None, tuple[DiscretePLD, DiscretePLD]] = {}
        self._composed(None)

    def _composed(self, tilt: float | None) -> tuple[DiscretePLD, DiscretePLD]:
        """The (pessimistic, optimistic) k-fold powers at ``tilt`` (built once per tilt)."""
        if tilt not in self._powers:
            budget.check("the powers of the certified bracket")
            self._powers[tilt] = (self._upper_measure.power(self.count, self.tail_tolerance, tilt),
                                  self._lower_measure.power(self.count, self.tail_tolerance, tilt))
        return self._powers[tilt]

    def delta(self, epsilons: ArrayLike, tilt: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) on delta at ``epsilons`` (any shape); with a ``tilt`` > 0 also from the powers tilted
        at it, keeping the better of each bound (both are certified)."""
        epsilons = check.real_array("epsilons", epsilons)
        return self.lower(epsilons, tilt), self.upper(epsilons, tilt)

    def upper(self, epsilons: ArrayLike, tilt: float | None = None) -> np.ndarray:
        """The certified upper bound on delta at ``epsilons`` (see :meth:`delta`)."""
        return self._bound(epsilons, tilt, 0)

    def lower(self, epsilons: ArrayLike, tilt: float | None = None) -> np.ndarray:
        """The certified lower bound on delta at ``epsilons`` (see :meth:`delta`)."""
        return self._bound(epsilons, tilt, 1)

    def _bound(self, epsilons: ArrayLike, tilt: float | None, side: int) -> np.ndarray:
        epsilons = check.real_array("epsilons", epsilons)
        flat = epsilons.ravel()
        measure = (self._upper_measure, self._lower_measure)[side]
        at = measure.shifted(flat, self.count)
        bound = self._composed(None)[side].delta(at)
        if tilt is not None and tilt > 0 and self.count > 1:
            tilted = self._composed(tilt)[side].delta(at)
            bound = np.minimum(bound, tilted) if side == 0 else np.maximum(bound, tilted)
        floor = -np.expm1(np.minimum(flat, 0.0))  # H_a(P||Q) >= (1 - a)_+ always
        bound = np.maximum(np.minimum(bound, 1.0), floor)
        return bound.reshape(epsilons.shape)

    def tilt_for(self, *, delta: float | None = None, epsilon: float | None = None) -> float:
        """A tilt for :meth:`delta` at tiny delta: the Chernoff order argmin_t (k K(t) - log delta) / t of the
        upper bound's one-step measure (K its log moment-generating function), or its saddle point
        argmin_{t >= 0} k K(t) - t epsilon; 0 for one use (no power) or no positive optimum."""
        if (delta is None) == (epsilon is None):
            raise ValueError("give exactly one of delta and epsilon")
        return self._upper_measure.tilt_for(self.count, delta=delta, epsilon=epsilon)


def _integer(name: str, value, minimum: int) -> int:
    try:
        return check.positive_integer(name, value, minimum)
    except TypeError as error:
        raise ValueError(str(error)) from None


def _default_reach(pair: NoiseMixturePair, count: int, tail_tolerance: float) -> float:
    """Largest |shift| plus the noise quantile leaving tail_tolerance / count in both tails (Gaussian)."""
    farthest_shift = float(np.max(np.abs(pair.shifts)))
    if pair.noise == "laplace":
        return max(farthest_shift, pair.scale)
    return farthest_shift - pair.scale * float(ndtri(tail_tolerance / (2 * count)))


# --------------------------------------------------------------------------- cell masses


@dataclass(frozen=True)
class _CellMasses:
    """log A and log B of the cells (-inf, e_0), [e_0, e_1], ..., [e_{N-1}, e_N], (e_N, inf),
    each with a bound on its absolute rounding error."""

    log_a: np.ndarray
    log_b: np.ndarray
    error_a: np.ndarray
    error_b: np.ndarray

    @classmethod
    def of(cls, pair: NoiseMixturePair, edges: np.ndarray) -> _CellMasses:
        log_a, error_a = log_mixture_masses(pair, pair.a_shifts, pair.a_log_weights, edges)
        log_b, error_b = log_mixture_masses(pair, pair.b_shifts, pair.b_log_weights, edges)
        if not (np.all(np.isfinite(error_a)) and np.all(np.isfinite(error_b))):
            raise AccuracyError("cells too narrow for double precision at this reach: use fewer cells")
        return cls(log_a, log_b, error_a, error_b)

    @property
    def loss(self) -> np.ndarray:
        """log(A/B) of each cell (the loss of the merged cell)."""
        return self.log_a - self.log_b

    @property
    def loss_error(self) -> np.ndarray:
        return self.error_a + self.error_b + 4 * U * (np.abs(self.log_a) + np.abs(self.log_b))


def log_mixture_masses(pair: NoiseMixturePair, shifts, log_weights, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log of sum_i w_i mu(. - c_i) on every cell (-inf, e_0), [e_0, e_1], ..., (e_N, inf), with error bounds.

    The edges run along the first axis of ``edges``; further axes hold independent sets of edges
    (:class:`afa.mechanisms.loss_tails.NoisePairTails` passes one edge per eps, shape (1, n)).
    """
    edges = np.asarray(edges, dtype=float)
    end = np.ones((1,) + edges.shape[1:])
    bounds = np.concatenate((-np.inf * end, edges, np.inf * end))
    components = [_log_component_masses(pair.noise, pair.scale, shift, bounds) for shift in shifts]
    terms = np.array([log_weight + value for log_weight, (value, _) in zip(log_weights, components)])
    value = log_sum_exp(terms)
    error = np.max([error for _, error in components], axis=0)
    error += 4 * U * (1 + np.abs(value) + max(abs(w) for w in log_weights) + len(shifts))
    return value, error


def _log_component_masses(noise, scale, shift, bounds):
    """log of the mass of mu(. - shift) between consecutive ``bounds`` (along the first axis), with error bounds."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        z = (bounds - shift) / scale
        if noise == "gaussian":
            value, error = _log_gaussian_masses(z)
            log_density = -0.5 * z * z - 0.5 * math.log(2 * math.pi)
        else:
            value, error = _log_laplace_masses(z[:-1], z[1:], np.diff(bounds, axis=0) / scale)
            log_density = -np.abs(z) - math.log(2.0)
        # The computed standardized bounds differ from the exact ones by 2u (|bound| + |shift|) / scale.
        moved = np.where(np.isfinite(bounds), 2 * U * (np.abs(bounds) + abs(shift)) / scale, 0.0)
        for end in (slice(None, -1), slice(1, None)):
            sensitivity = 1 + np.exp(np.minimum(log_density[end] - value, 700.0))
            error = error + np.where(moved[end] > 0, moved[end] * sensitivity, 0.0)
    return value, error


def _log_gaussian_masses(z):
    """log(Phi(b) - Phi(a)) for consecutive bounds a < b of ``z``, evaluated on the side of 0 where
    it does not cancel; one log_ndtr per bound."""
    a, b = z[:-1], z[1:]
    near_tail = log_ndtr(-np.abs(z))  # log Phi(-|z|)
    tail_a, tail_b = near_tail[:-1], near_tail[1:]
    mirror = a > 0  # both bounds right of 0: use Phi(-a) - Phi(-b)
    log_low = np.where(mirror, tail_b, tail_a)
    log_high = np.where(mirror, tail_a, np.where(b <= 0, tail_b, np.log1p(-np.exp(tail_b))))
    gap = log_low - log_high  # <= 0; -inf for a tail
    value = log_high + np.log(-np.expm1(gap))
    # log_ndtr is taken accurate to 8u (1 + |value|); log(1 - e^gap) amplifies an error in gap by 1/(e^-gap - 1).
    ndtr_error = lambda v: np.where(np.isfinite(v), 8 * U * (1 + np.abs(v)), 0.0)  # noqa: E731
    cancellation = (ndtr_error(log_low) + ndtr_error(log_high)) / np.expm1(-gap)
    return value, ndtr_error(log_high) + cancellation + 4 * U * (1 + np.abs(value))


def _log_laplace_masses(a, b, width):
    """log(F(b) - F(a)) for the standard Laplace CDF F, without cancellation."""
    log_span = np.log(-np.expm1(-width))  # log(1 - e^{-(b - a)}); 0 for a tail
    value = np.where(b <= 0, b + log_span,
                     np.where(a >= 0, -a + log_span, np.log(-np.expm1(a) - np.expm1(-b)))) - math.log(2.0)
    return value, 8 * U * (2 + np.abs(value))


# --------------------------------------------------------------------------- loss range per cell


def _cell_loss_ranges(pair: NoiseMixturePair, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Certified (min, max) of L = log(A/B) on every cell, tails included (possibly infinite)."""
    loss, loss_error = _point_losses(pair, edges)
    tolerance = 64 * U * (1 + float(np.max(np.abs(pair.shifts)))) * (1 / pair.scale ** 2 + 1 / pair.scale)
    slope_min, slope_max = _inner_slope_bounds(pair, edges)
    slope_min = np.minimum(np.maximum(slope_min, -pair.loss_slope) - tolerance, 0.0)
    slope_max = np.maximum(np.minimum(slope_max, pair.loss_slope) + tolerance, 0.0)

    # Two lines through the ends, of slopes slope_max and slope_min, bound L (Definition 39).
    width = np.diff(edges)
    left_high, right_high = loss[:-1] + loss_error[:-1], loss[1:] + loss_error[1:]
    left_low, right_low = loss[:-1] - loss_error[:-1], loss[1:] - loss_error[1:]
    total = slope_max - slope_min
    inner_max = left_high + slope_max * (right_high - left_high - slope_min * width) / total
    inner_min = left_low + slope_min * (left_low - right_low + slope_max * width) / total
    rounding = 8 * U * (1 + np.abs(loss[:-1]) + np.abs(loss[1:]) + pair.loss_slope * width)

    (left_min, left_max), (right_min, right_max) = _tail_loss_ranges(pair, edges, loss, loss_error, tolerance)
    loss_min = np.concatenate(([left_min], inner_min - rounding, [right_min]))
    loss_max = np.concatenate(([left_max], inner_max + rounding, [right_max]))
    return loss_min, loss_max


def _point_losses(pair: NoiseMixturePair, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """L at ``points`` and a bound on its rounding error (logsumexp of the kappa terms)."""
    log_a, log_b = pair.log_ratios(points)
    largest_kappa = np.max([np.abs(pair.kappa(points, shift)) for shift in pair.shifts], axis=0)
    largest_weight = max(abs(w) for w in pair.a_log_weights + pair.b_log_weights)
    error = 16 * U * (2 + np.abs(log_a) + np.abs(log_b) + largest_kappa + largest_weight)
    return log_a - log_b, error


def _mean_slope(pair: NoiseMixturePair, shifts, log_weights, points: np.ndarray, from_right: bool) -> np.ndarray:
    """m(o) = d/do log(sum_i w_i mu(o - c_i)) - [Gaussian: d/do log mu(o)]: the posterior mean
    of the components' slopes (one-sided at a Laplace kink: from the right or the left)."""
    logits = np.array([w + pair.kappa(points, c) for c, w in zip(shifts, log_weights)])
    posterior = np.exp(logits - log_sum_exp(logits))
    centres = np.asarray(shifts, dtype=float)[:, None]
    if pair.noise == "gaussian":
        slopes = centres / pair.scale ** 2
    else:
        ahead = points >= centres if from_right else points > centres
        slopes = np.where(ahead, -1.0, 1.0) / pair.scale
    return np.sum(posterior * slopes, axis=0)


def _inner_slope_bounds(pair: NoiseMixturePair, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on L' over each inner cell from the monotone posterior means m_A, m_B."""
    left, right = edges[:-1], edges[1:]
    a_left = _mean_slope(pair, pair.a_shifts, pair.a_log_weights, left, from_right=True)
    a_right = _mean_slope(pair, pair.a_shifts, pair.a_log_weights, right, from_right=False)
    b_left = _mean_slope(pair, pair.b_shifts, pair.b_log_weights, left, from_right=True)
    b_right = _mean_slope(pair, pair.b_shifts, pair.b_log_weights, right, from_right=False)
    slope_min, slope_max = a_left - b_right, a_right - b_left
    if pair.noise == "laplace":  # m is monotone only between kinks
        kinked = np.any((left[:, None] < pair.shifts) & (pair.shifts < right[:, None]), axis=1)
        slope_min = np.where(kinked, -pair.loss_slope, slope_min)
        slope_max = np.where(kinked, pair.loss_slope, slope_max)
    return slope_min, slope_max


def _tail_loss_ranges(pair, edges, loss, loss_error, tolerance):
    """(min, max) of L on (-inf, -S) and on (S, inf)."""
    reach = edges[-1]
    if pair.noise == "laplace":
        if reach >= np.max(np.abs(pair.shifts)):  # every component has slope +-1/b: L is constant
            return ((loss[0] - loss_error[0], loss[0] + loss_error[0]),
                    (loss[-1] - loss_error[-1], loss[-1] + loss_error[-1]))
        return (-np.inf, np.inf), (-np.inf, np.inf)
    ends = np.array([-reach, reach])
    m_a = _mean_slope(pair, pair.a_shifts, pair.a_log_weights, ends, from_right=True)
    m_b = _mean_slope(pair, pair.b_shifts, pair.b_log_weights, ends, from_right=True)
    a_low, a_high = min(pair.a_shifts) / pair.scale ** 2, max(pair.a_shifts) / pair.scale ** 2
    b_low, b_high = min(pair.b_shifts) / pair.scale ** 2, max(pair.b_shifts) / pair.scale ** 2
    left_slopes = (a_low - m_b[0] - tolerance, m_a[0] - b_low + tolerance)
    right_slopes = (m_a[1] - b_high - tolerance, a_high - m_b[1] + tolerance)
    left = _monotone_tail_range(loss[0], loss_error[0], left_slopes, toward_infinity=-1)
    right = _monotone_tail_range(loss[-1], loss_error[-1], right_slopes, toward_infinity=+1)
    return left, right


def _monotone_tail_range(end_loss, end_error, slopes, toward_infinity):
    """Range of L on a half-line from its finite end, given bounds on L' there."""
    slope_min, slope_max = slopes
    grows_outward = slope_min >= 0 if toward_infinity > 0 else slope_max <= 0
    shrinks_outward = slope_max <= 0 if toward_infinity > 0 else slope_min >= 0
    if shrinks_outward:
        return -np.inf, end_loss + end_error
    if grows_outward:
        return end_loss - end_error, np.inf
    return -np.inf, np.inf


# --------------------------------------------------------------------------- loss grid


@dataclass(frozen=True)
class _LossGrid:
    """The privacy-loss values origin + i * step (exact reals for the floats origin and step)."""

    origin: float
    step: float

    def values(self, index: np.ndarray) -> np.ndarray:
        return self.origin + index * self.step

    def _position(self, loss: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(loss - origin) / step and a bound on its rounding error."""
        position = (loss - self.origin) / self.step
        return position, 4 * U * (1 + np.abs(position))

    def at_or_below(self, loss: np.ndarray) -> np.ndarray:
        """The largest index whose value is <= loss."""
        position, slop = self._position(loss)
        return np.floor(position - slop).astype(np.int64)

    def above(self, loss: np.ndarray) -> np.ndarray:
        """An index whose value is > loss (the smallest, up to rounding)."""
        position, slop = self._position(loss)
        return np.floor(position + slop).astype(np.int64) + 1

    def nearest(self, loss: np.ndarray) -> np.ndarray:
        return np.rint((loss - self.origin) / self.step).astype(np.int64)


def _cell_loss_width(masses: _CellMasses) -> float:
    """The A-weighted mean difference of the loss between neighbouring cells."""
    loss = masses.loss[1:-1]
    if loss.size < 2:
        return 0.0
    weights = np.exp(masses.log_a[1:-1] - log_sum_exp(masses.log_a[1:-1]))
    return float(weights @ np.abs(np.gradient(loss)))


def _loss_grid(pair: NoiseMixturePair, edges: np.ndarray, masses: _CellMasses, count: int,
               target_points: int, least_step: float, tail_tolerance: float) -> _LossGrid:
    """A grid of about ``target_points`` points over the composed loss's range, of step at least
    ``least_step`` unless that leaves fewer than MIN_GRID_POINTS_LOWER points.

    The step is a power of two through 0 (every k-fold sum exact), except for Laplace noise, where
    the two constant tail losses carry much mass: the grid then passes just below both (by more
    than the cells' loss errors), so that neither is rounded down by a whole step in the lower bound.
    """
    loss = masses.loss
    weights = np.exp(masses.log_a - log_sum_exp(masses.log_a))
    mean = float(weights @ loss)
    variance = float(weights @ (loss - mean) ** 2)
    one_step = float(np.ptp(loss))
    spread = 2 * math.sqrt(2 * math.log(1 / tail_tolerance) * count * variance)
    span = max(one_step, min(count * one_step, spread), MIN_LOSS_SPAN)
    step = max(span / target_points, min(least_step, span / MIN_GRID_POINTS_LOWER))
    if pair.noise == "laplace" and edges[-1] >= np.max(np.abs(pair.shifts)):
        left, right = pair.privacy_loss(edges[[0, -1]])
        gap = abs(float(right - left))
        if gap > 0:
            step = gap / math.ceil(gap / step)
            below = 4 * float(np.max(masses.loss_error)) + 1e-6 * step
            return _LossGrid(float(min(left, right)) - below, step)
    return _LossGrid(0.0, 2.0 ** math.ceil(math.log2(step)))


# --------------------------------------------------------------------------- the two bounds


def _upper_bound(masses: _CellMasses, loss_min, loss_max, grid: _LossGrid) -> _GridMeasure:
    """The dominating pair on the grid as a pessimistic measure (A-mass where the loss is unbounded above, or
    underflows, at +infinity)."""
    log_mass = masses.log_a + masses.error_a
    infinite = ~np.isfinite(loss_max)
    underflow = log_mass < LOG_TINY
    infinite_mass = float(np.sum(np.exp(log_mass[infinite & ~underflow])))
    infinite_mass += np.count_nonzero(underflow) * math.exp(LOG_TINY)
    keep = ~infinite & ~underflow
    index, mass = _spread_to_grid(np.exp(log_mass[keep]), masses.loss[keep] + masses.loss_error[keep],
                                  loss_min[keep], loss_max[keep], grid)
    return _GridMeasure.of(index, mass, infinite_mass, grid, pessimistic=True)


def _spread_to_grid(mass, loss_high, loss_min, loss_max, grid: _LossGrid):
    """Split each cell's A-mass between g_lo <= loss_min and g_hi > loss_max, keeping its B-mass.

    The fraction at g_hi is (1 - e^{g_lo - s}) / (1 - e^{g_lo - g_hi}) for the cell loss s (taken at
    its upper error bound ``loss_high``: more mass moves up), 1 when loss_min = -inf.
    """
    high = grid.above(loss_max)
    bounded_below = np.isfinite(loss_min)
    low = np.minimum(grid.at_or_below(np.where(bounded_below, loss_min, loss_max)), high - 1)
    g_low = grid.values(low)
    above_low = np.clip(loss_high - g_low, 0, None) + 4 * U * (np.abs(loss_high) + np.abs(g_low))
    span = (high - low) * grid.step
    fraction_up = np.expm1(-np.minimum(above_low, span)) / np.expm1(-span)
    fraction_up = np.where(bounded_below, np.minimum(fraction_up * (1 + 8 * U), 1.0), 1.0)
    index = np.concatenate((low, high))
    spread = np.concatenate((mass * (1 - fraction_up), mass * fraction_up)) * (1 + 4 * U)
    return index, spread


def _lower_bound(masses: _CellMasses, grid: _LossGrid) -> _GridMeasure:
    """The pair of merged cells on the grid, dominated by (A, B), as an optimistic measure."""
    index, mass = _merge_to_grid(masses, grid)
    return _GridMeasure.of(index, mass, 0.0, grid, pessimistic=False)


def _merge_to_grid(masses: _CellMasses, grid: _LossGrid):
    """Merge cells into groups by the nearest grid point g_u of their loss, then merge a fraction of
    a neighbouring group into each group so that its merged ratio becomes exactly e^{g_u}: a group
    short of it takes from the next group, a group above it from the previous one.  Every step is
    a post-processing (merging, possibly a random fraction of a group) or lowers a loss, so the
    result is dominated by (A, B); merging costs only second order in the grid step."""
    log_a, log_b = masses.log_a - masses.error_a, masses.log_b + masses.error_b
    # Dropping a whole cell only lowers delta; a cell of tiny B-mass keeps its (large) loss: B-masses are
    # summed in log space below.
    keep = (log_a > LOG_TINY) & (log_b > -np.inf)
    log_a, log_b = log_a[keep], log_b[keep]
    loss = log_a - log_b
    nearest = grid.nearest(loss)
    top = nearest.max()  # no group above can top it up: keep only losses at or above its value in it
    nearest[(nearest == top) & (loss < grid.values(top))] -= 1
    groups, member = np.unique(nearest, return_inverse=True)
    sizes = np.bincount(member)
    a_mass = np.bincount(member, weights=np.exp(log_a)) * (1 - 2 * (sizes + 1) * U)
    largest_b = np.full(groups.size, -np.inf)
    np.maximum.at(largest_b, member, log_b)
    scaled_b = np.bincount(member, weights=np.exp(log_b - largest_b[member])) * (1 + 2 * (sizes + 1) * U)
    log_a_group, log_b_group = np.log(a_mass), largest_b + np.log(scaled_b)
    target = grid.values(groups)
    slack = 32 * U * (1 + np.abs(log_a_group) + np.abs(log_b_group) + np.abs(target))
    merged = log_a_group - log_b_group - slack  # rounded down
    short = merged < target
    # A-mass by which a group misses ratio e^{g_u} (short) or exceeds it (not short) ...
    missing = np.where(short, a_mass * np.expm1(target - merged), 0.0)
    extra = np.where(short, 0.0, a_mass * -np.expm1(np.minimum(target - merged, 0.0)))
    # ... and the A-mass of the next group above e^{g_u}, of the previous group below e^{g_u}.
    next_above, previous_below = np.zeros_like(a_mass), np.full_like(a_mass, np.inf)
    next_above[:-1] = a_mass[1:] * -np.expm1(np.minimum(target[:-1] - merged[1:], 0.0))
    with np.errstate(over="ignore"):  # +inf: that group cannot lower this one (nothing is taken from it)
        previous_below[1:] = a_mass[:-1] * np.expm1(np.maximum(target[1:] - merged[:-1], 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        lifted = missing / next_above * (1 + 16 * U)  # fraction of group u + 1 merged into u
        wanted = extra / previous_below  # fraction of group u - 1 that would bring u down to e^{g_u}
    topped_up = short & (next_above > 0) & (lifted <= 1)
    lifted = np.where(topped_up, lifted, 0.0)
    given_down = _shifted(lifted, +1)  # fraction of group u merged into u - 1
    # A group gives at most GIVE_UP_TO of itself to the next group up, so it keeps at least kept_least;
    # taking less than wanted leaves a merged ratio above e^{g_u}: still valid, then rounded down.
    wanted = np.where(np.isfinite(wanted), wanted, 0.0)
    lowered_most = np.minimum(wanted, GIVE_UP_TO)
    kept_least = np.maximum(1 - given_down - _shifted(lowered_most, -1), 0.0)
    lowered = np.minimum(kept_least * wanted * (1 - 16 * U), lowered_most)
    lowered = np.minimum(lowered, 1 - _shifted(given_down, +1))  # group u - 1 gives at most what is left
    kept = np.maximum(1 - given_down - _shifted(lowered, -1) - 4 * U, 0.0)
    mass = (kept * a_mass + lifted * _shifted(a_mass, -1) + lowered * _shifted(a_mass, +1)) * (1 - 8 * U)
    index = np.where(short & ~topped_up, grid.at_or_below(merged), groups)
    return index, mass


def _shifted(values: np.ndarray, by: int) -> np.ndarray:
    """values moved ``by`` places to higher indices (by > 0) or lower ones, zero-filled."""
    result = np.zeros_like(values)
    if by > 0:
        result[by:] = values[:-by]
    else:
        result[:by] = values[-by:]
    return result


# --------------------------------------------------------------------------- composition


@dataclass(frozen=True)
class _GridMeasure:
    """A one-step measure on the grid origin + step * i as a discretized PLD of the losses less ``origin``
    (:class:`afa.engines.pld.DiscretePLD`, pessimistic for the upper bound, optimistic for the lower); the
    k-fold composition is that PLD's power (the PLD engine's FFT core), whose losses are k * origin above its
    grid's, so delta(eps) is the power's delta at eps - k * origin."""

    pld: DiscretePLD
    origin: float

    @classmethod
    def of(cls, index: np.ndarray, mass: np.ndarray, inf_mass: float, grid: _LossGrid,
           pessimistic: bool) -> _GridMeasure:
        first = int(index.min())
        offsets = index - first
        # each grid point's mass is a sum of rounded terms: rounded the safe way
        factor = 1 + (1 if pessimistic else -1) * 2 * (np.bincount(offsets) + 1) * U
        single = np.bincount(offsets, weights=mass) * factor
        pld = DiscretePLD(grid.step, first, np.maximum(single, 0.0), min(inf_mass * (1 + 4 * U), 1.0), pessimistic)
        return cls(pld, grid.origin)

    def power(self, count: int, tail_tolerance: float, tilt: float | None) -> DiscretePLD:
        """The ``count``-fold composition, truncated to ``tail_tolerance``: the plain FFT power (None; its
        rounding, about count * 1e-14 absolute, enters the bounds), or also the power tilted at ``tilt`` where
        that rounding exceeds a quarter of ``tail_tolerance`` (or direct convolutions, where the PLD finds them
        cheap enough)."""
        if tilt is None:
            return self.pld.self_compose(count, tail_tolerance, PLAIN_ROUNDING, tilt=0.0)
        return self.pld.self_compose(count, tail_tolerance, tail_tolerance, tilt=tilt)

    def shifted(self, epsilons: np.ndarray, count: int) -> np.ndarray:
        """eps - count * origin, moved by its rounding towards the safe side (down for the upper bound: delta is
        non-increasing)."""
        if self.origin == 0.0:
            return epsilons
        shifted = epsilons - count * self.origin
        margin = 4 * U * (np.abs(epsilons) + count * abs(self.origin))
        return shifted - margin if self.pld.pessimistic else shifted + margin

    def tilt_for(self, count: int, *, delta: float | None = None, epsilon: float | None = None) -> float:
        """The composition's Chernoff order for ``delta`` or saddle point at ``epsilon``
        (:func:`afa.engines.pld.composition_tilt`; 0 for one use)."""
        if count == 1:
            return 0.0
        if epsilon is not None:
            epsilon = float(self.shifted(np.array([epsilon]), count)[0])
        return composition_tilt([(self.pld, count)], delta=delta, epsilon=epsilon)
