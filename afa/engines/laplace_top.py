"""k uses of the Laplace mechanism within 2a of their largest loss k a: delta(eps) and eps(delta) as positive series.

With a = sensitivity / scale, one use's loss is +a (mass 1/2), -a (mass e^-a / 2) or a - 2u with u of density
e^-u / 2 on (0, a) (Zhu, Dong & Wang 2022, Lemma 34).  Write eps = k a - 2 w.  For 0 <= w <= a no use at -a
can reach eps, and the n uses in the continuous part need u's summing to V < w <= a, where their density is
e^-v v^(n-1) / (n-1)! / 2^n (the box (0, a)^n does not bind below a).  So

    delta(eps) = 2^-k sum_n C(k, n) int_0^w (e^-v - e^(-2w) e^v) v^(n-1) / (n-1)! dv        (n = 0: 1 - e^(-2w))

and its derivative in w, 2 (-delta'(eps)) = 2 E[e^(eps - L); L > eps], sums to

    -delta'(eps) = 2^-k e^-w sum_{p=0}^{k-1} C(k-1, p) w^p / p!

(the alternating sums of binomials that appear are C(k-1, p)); integrating from delta = 0 at w = 0,

    delta(eps) = 2^(1-k) e^-w sum_{j >= 1} c_j w^j / j!,    c_j = sum_{p < min(j, k)} C(k-1, p),

that is delta(eps) = P(N > B) and -delta'(eps) = P(N = B) / 2 for N ~ Poisson(w) and B ~ Binomial(k - 1, 1/2)
independent.

Every term is positive: each is formed to a relative error of a few ulps of its log's parts, so delta is accurate
relative to itself however small -- the rows where delta is far below the bulk (Laplace(1) x 100 at
delta = 1e-30: eps = 99.87 of a top at 100), which the contour reaches only through cancelling sums.  The series
is cut where the terms have fallen below e^-TAIL_DROP of the largest, past the index J from which the ratio of
successive terms, c_{j+1} / c_j * w / (j + 1) <= max(k / j, 1) w / (j + 1), is at most 1/2 (c_{j+1} - c_j =
C(k-1, j) <= c_j (k - j) / j), so what is left out is at most the last term kept.

Outside that range (w > a: eps below (k - 2) a) the engine refuses; 'auto' asks it only for an eps(delta) it
reaches (:meth:`LaplaceTopEngine.reaches`) and leaves the rest to the contour.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import gammaln

from .._accurate import UNIT_ROUNDOFF
from ..numerics.atoms import verified_epsilon_bounds
from ..results import AccuracyError, UnsupportedCompositionError
from .base import Engine

__all__ = ["LaplaceTopEngine"]

#: Terms below e^-TAIL_DROP of the largest end the series (once the ratio bound holds).
TAIL_DROP = 50.0
#: Rounding allowance per unit of a term's log magnitude (its parts carry a few ulps each).
ROUNDING_ULPS = 16.0
#: The bound given for a positive delta below the double range.
SMALLEST_SUBNORMAL = 5e-324
LOG_2 = math.log(2)
#: The most terms the series is formed with: a composition whose terms peak beyond (max(a, sqrt(k a)) > PEAK_LIMIT)
#: is not served (the terms peak near j = max(w, sqrt(k w))).
MAX_TERMS, PEAK_LIMIT = 1 << 16, 2_000.0
#: Halley's steps of an eps(delta) query (a few suffice; bisection takes over where a step leaves the bracket).
MAX_NEWTON = 100
#: Terms tabulated at first (a few dozen serve most queries; the tables are formed again when a series needs more).
FIRST_TABLE = 64
#: A Halley step at most this long (in log w) ends the search: the next one would be below rounding.
FINAL_STEP = 1e-5


def _ratio_end(k: int, w: float) -> int:
    """An index from which each term of the series is at most half the one before: max(k / j, 1) w / (j + 1)
    <= 1/2 once j >= sqrt(2 k w) and j + 1 >= 2 w."""
    return max(int(math.ceil(math.sqrt(2 * k * w))) + 1, int(math.ceil(2 * w)) + 1)


class LaplaceTopEngine(Engine):
    """delta(eps) and eps(delta) of ``count`` uses of a Laplace loss of parameter ``a`` for eps in [(k-2) a, k a]
    (see the module docstring); a query outside refuses with :class:`afa.AccuracyError`.

    Parameters
    ----------
    a : float
        sensitivity / scale, > 0 and finite.
    count : int
        The number of uses, >= 1.

    Raises
    ------
    UnsupportedCompositionError
        ``a`` or ``count`` out of range.

    Examples
    --------
    >>> import numpy as np
    >>> from afa.engines.laplace_top import LaplaceTopEngine
    >>> engine = LaplaceTopEngine(1.0, 1)  # one use: delta = 1 - e^((eps - a) / 2) on [-a, a]
    >>> values, errors = engine.delta(np.array([0.5]))
    >>> bool(abs(values[0] - (1 - np.exp(-0.25))) < 1e-15)
    True
    """

    method = "exact"
    certified = False

    def __init__(self, a: float, count: int):
        if not (math.isfinite(a) and a > 0) or int(count) != count or count < 1:
            raise UnsupportedCompositionError(f"the Laplace top series needs a > 0 and a count >= 1, got a={a!r}, "
                                              f"count={count!r}")
        if not self.serves(a, int(count)):
            raise UnsupportedCompositionError(f"the Laplace top series of a = {a:.6g}, {count} uses would need "
                                              f"more than {MAX_TERMS} terms")
        self.a, self.count = float(a), int(count)
        self.top = self.count * self.a
        self.bottom = (self.count - 2) * self.a  # eps >= bottom: w <= a
        #: The tables of the terms formed so far (:meth:`_extend`): the indices j and one row per series.
        self._j = np.empty(0)
        self._tables = np.empty((2, 0))

    @staticmethod
    def serves(a: float, count: int) -> bool:
        """Whether the series of ``count`` uses of a Laplace loss of parameter ``a`` stays within MAX_TERMS terms
        (its terms peak near max(w, sqrt(k w)), w <= a).

        Parameters
        ----------
        a : float
            sensitivity / scale.
        count : int
            The number of uses.

        Returns
        -------
        bool
        """
        return max(a, math.sqrt(count * a)) <= PEAK_LIMIT

    def _parts(self, w: float) -> tuple[float, float, float, float, float]:
        """(log delta, relative error bound, d log delta / d log w, d^2 log delta / d (log w)^2, log -delta'(eps))
        at w in (0, a], both series from one pass over the tables (a row each).  The derivatives in log w are the
        mean and the variance of the series' index under its terms, less w (for Halley's steps); -delta'(eps) =
        2^-k e^-w sum_{p < k} C(k-1, p) w^p / p!.  Both series are cut alike: past the ratio bound, where the last
        term is e^-TAIL_DROP below the largest."""
        k, log_w = self.count, math.log(w)
        size = max(_ratio_end(k, w), 16)  # (only doubled: every size tried is past the ratio bound)
        while True:
            self._extend(size)
            j = self._j[:size]
            terms = self._tables[:, :size] + j * log_w
            tops = terms.max(axis=1)
            top, slope_top = float(tops[0]), float(tops[1])
            if terms[0, -1] < top - TAIL_DROP and (terms[1, -1] < slope_top - TAIL_DROP or size >= MAX_TERMS):
                break
            if size >= MAX_TERMS:
                raise AccuracyError(f"the Laplace top series at w = {w:.6g} needs more than {MAX_TERMS} terms")
            size *= 2
        weights = np.exp(terms - tops[:, None])
        total, slope_total = weights.sum(axis=1).tolist()
        log_sum = top + math.log(total)
        tail = math.exp(float(terms[0, -1]) - log_sum)  # the terms left out sum to at most the last one
        # each term's log is formed from parts of at most log c_j <= (k - 1) log 2, log j! and j |log w|, each to
        # a few ulps
        magnitude = (k - 1) * LOG_2 + math.lgamma(size + 1) + size * abs(log_w)
        error = ROUNDING_ULPS * UNIT_ROUNDOFF * (magnitude + w + k + math.log(size)) + tail
        mean = float(weights[0] @ j) / total
        variance = float(np.square(j - mean) @ weights[0]) / total
        return ((1 - k) * LOG_2 - w + log_sum, error, mean - w, variance - w,
                -k * LOG_2 - w - log_w + slope_top + math.log(slope_total))

    def _extend(self, size: int) -> None:
        """The tables for the terms j = 1 .. size (at least FIRST_TABLE): j, and one row per series: log c_j - log j!,
        and log C(k-1, j-1) - log (j-1)! (-inf for j > k; c_j = 2^(k-1) from j = k on)."""
        if size <= self._j.size:
            return
        k, size = self.count, max(size, FIRST_TABLE)
        j = np.arange(1, size + 1, dtype=float)
        inside = j[j <= k]
        log_binomials = math.lgamma(k) - gammaln(inside) - gammaln(k - inside + 1)  # log C(k-1, j-1)
        log_c = np.logaddexp.accumulate(log_binomials)
        outside = np.full(size - inside.size, (k - 1) * LOG_2)
        self._j = j
        self._tables = np.stack([np.concatenate([log_c, outside]) - gammaln(j + 1),
                                 np.concatenate([log_binomials - gammaln(inside), np.full(outside.size, -np.inf)])])

    def _evaluate(self, epsilon: float) -> tuple[float, float, float]:
        """(delta, error bound, -delta'(eps)) at eps in [bottom, inf): 0 at and above the top, and a positive delta
        below the double range bounded by the smallest subnormal."""
        if epsilon >= self.top:
            return 0.0, 0.0, 0.0
        log_delta, error, _, _, log_slope = self._parts(0.5 * (self.top - epsilon))
        value = math.exp(log_delta)
        if value == 0.0:
            return 0.0, SMALLEST_SUBNORMAL, math.exp(log_slope)
        return value, error * value, math.exp(log_slope)

    def _refuse(self, what: str) -> AccuracyError:
        return AccuracyError(f"{what} lies below eps = {self.bottom:.17g}, where k = {self.count} uses of the "
                             f"Laplace loss (a = {self.a:.6g}) leave their top's range (the contour answers there)")

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(delta, error bound) at each eps (all in [(k-2) a, inf); AccuracyError otherwise)."""
        epsilons = np.asarray(epsilons, dtype=float)
        if np.any(epsilons < self.bottom):
            raise self._refuse(f"eps = {float(np.min(epsilons)):.17g}")
        answers = [self._evaluate(float(epsilon)) for epsilon in epsilons.ravel()]
        values = np.array([answer[0] for answer in answers]).reshape(epsilons.shape)
        errors = np.array([answer[1] for answer in answers]).reshape(epsilons.shape)
        return values, errors

    def reaches(self, delta: float) -> bool:
        """Whether eps(``delta``) provably lies in the engine's range: delta at its lower end, (k-2) a, minus the
        error bound is above ``delta``.

        Parameters
        ----------
        delta : float
            The delta asked, in (0, 1).

        Returns
        -------
        bool
        """
        log_value, error = self._at_range_end[:2]
        return math.exp(log_value) * (1 - error) > delta

    @functools.cached_property
    def _at_range_end(self) -> tuple[float, ...]:
        """:meth:`_parts` at w = a (eps = (k-2) a), where every eps(delta) search starts."""
        return self._parts(self.a)

    def epsilon_bracket(self, delta: float) -> tuple[float, float, float]:
        """(estimate, lower, upper) of eps(delta): Halley's method on log delta against log w from the range's
        end w = a, kept in the bracket found so far, the bounds then verified against delta -/+ its error;
        AccuracyError when the crossing may lie below (k-2) a."""
        log_target = math.log(delta)
        low, high, w = 0.0, self.a, self.a  # in w: delta(low) <= delta < delta(high)
        if not self.reaches(delta):
            raise self._refuse(f"eps({delta:.3g})")
        following = w  # the step beyond the last w evaluated, when the search ends on a short one
        for iteration in range(MAX_NEWTON):
            log_value, error, rate, curvature, log_slope = self._at_range_end if iteration == 0 else self._parts(w)
            gap = log_value - log_target
            if gap > 0:
                high = w
            else:
                low = w
            # Halley's step on log delta against log w (Newton's where its denominator is not positive)
            denominator = 2 * rate * rate - gap * curvature
            step = 2 * gap * rate / denominator if denominator > 0 else gap / rate if rate > 0 else math.inf
            if abs(step) <= 4 * UNIT_ROUNDOFF or high - low <= 4 * UNIT_ROUNDOFF * high:
                break
            proposal = w * math.exp(-step) if abs(step) < 700 else 0.0
            if not low < proposal < high:
                proposal = 0.5 * (low + high)
            elif abs(step) <= FINAL_STEP:
                following = proposal  # (Halley's steps converge cubically: the next one would be below rounding)
                break
            # w as eps = top - 2 w gives it back, so that the bounds' search starts from the last w evaluated (a
            # w below half an ulp of the top as it is: its eps is the top)
            snapped = 0.5 * (self.top - (self.top - 2 * proposal))
            if snapped == w:  # eps's rounding reached
                following = proposal
                break
            w = following = snapped if snapped > 0 else proposal
        # The bounds are searched from the last w evaluated; the estimate is the step beyond it, if one was left.
        root = self.top - 2 * w
        estimate = self.top - 2 * following
        at_root = None  # (the root's own w, unless rounding moved it: e.g. onto the top, where delta is 0)
        if 0.5 * (self.top - root) == w:
            value = math.exp(log_value)
            at_root = (value, error * value, math.exp(log_slope))
        lower, upper = verified_epsilon_bounds(self._evaluate, delta, root, self.bottom, self.top,
                                               at_root=at_root)
        return estimate, min(lower, estimate), max(upper, estimate)
