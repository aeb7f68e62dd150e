"""delta(eps) of the sum of two independent finite privacy losses, without forming their pairs.

A composition of several discrete mechanisms whose losses lie on incommensurate
lattices has about as many atoms as the product of its factors' sizes (a k-ary
randomized response and a discrete Laplace, each used thousands of times: 10^9
sums).  Splitting the mechanisms into two groups whose compositions A and B each
fit, the hockey-stick divergence of A + B (Zhu, Dong & Wang 2022, Lemma 37)

    delta(eps) = sum_i w_i S(eps - a_i),   S(x) = sum_{b_j > x} v_j (1 - e^{x - b_j}),

needs, for each atom a_i of the smaller factor, one look-up of S in suffix sums of
the larger one (a meet-in-the-middle evaluation): O(|A| log |B|) per eps instead
of |A| |B| pairs.  With k the first index of B above x,

    S(x) = C_k + e^{G_k} (1 - e^{x - b_k}),
    G_k = log sum_{j >= k} v_j e^{b_k - b_j},
    C_k = sum_{j >= k} D_j,   D_j = (1 - e^{b_j - b_{j+1}}) e^{G_{j+1}},

every term non-negative (C_k is S at b_k; between atoms S moves along the last
term), so no difference of large sums ever cancels.  The suffix sums are formed in
log space, in blocks (within-block suffixes, then suffixes over block totals), so a
sum's rounding grows with the block size plus the number of blocks, not with |B|.

Error bound of :meth:`TwoFactorSum.evaluate`: atom positions known to within E
(the factors' largest position errors plus the rounding of eps - a_i - b_k) move
the true value between the computed value at eps + E and at eps - E (each term is
monotone in the loss); masses carry their log-mass errors; the rounding of the
logarithmic pipeline and of the final sum is bounded from the magnitudes involved;
the mass the factors dropped counts whole.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .. import budget
from .._accurate import UNIT_ROUNDOFF as U

if TYPE_CHECKING:
    from ..numerics.atoms import LossAtoms

#: Atoms per block of the blocked suffix sums.
BLOCK = 512
#: Factor by which every computed error bound is raised to cover the rounding of the bound itself.
PAD = 1.0 + 1e-9
#: Elements per chunk of the (eps x atoms of the smaller factor) evaluation.
CHUNK = 1 << 20
#: Terms of the smaller factor's atoms summing to at most e^-OMIT of the value are left out of an evaluation (and
#: their bound added to its error), found by checking SAMPLES + 1 evenly spaced atoms.
OMIT, SAMPLES = 50.0, 256


def blocked_suffix_logsumexp(values: np.ndarray) -> tuple[np.ndarray, int]:
    """(log sum_{i >= k} exp(values[i]) for k = 0..n-1, the longest chain of additions behind any entry).

    Within blocks of BLOCK entries the suffix sums are accumulated by ``np.logaddexp``; the blocks'
    totals are accumulated the same way and added to each entry of the block before them.  Each entry is
    the result of at most BLOCK + (number of blocks) + 1 additions, each of which rounds its logarithm by
    at most u (|result| + 2).
    """
    n = values.size
    if n == 0:
        return np.empty(0), 0
    blocks = -(-n // BLOCK)
    padded = np.full(blocks * BLOCK, -np.inf)
    padded[:n] = values
    grid = padded.reshape(blocks, BLOCK)
    with np.errstate(invalid="ignore"):
        within = np.logaddexp.accumulate(grid[:, ::-1], axis=1)[:, ::-1]
        totals = within[:, 0]
        later = np.append(np.logaddexp.accumulate(totals[::-1])[::-1][1:], -np.inf)
        out = np.logaddexp(within, later[:, None]).ravel()[:n]
    return out, BLOCK + blocks + 1


def _log_cumulative_bound(log_values: np.ndarray) -> np.ndarray:
    """Upper bounds on log sum_{j < i} exp(log_values[j]) for i = 0..n (the first entry -inf), within a few
    hundred ulps: scaled by the largest value, summed in linear scale (relative error n u), each term that
    underflows counted as 2^-1000."""
    if log_values.size == 0:
        return np.array([-np.inf])
    top = float(np.max(log_values))
    if not math.isfinite(top):
        return np.full(log_values.size + 1, -np.inf if top == -math.inf else math.inf)
    with np.errstate(under="ignore", divide="ignore"):
        sums = np.cumsum(np.exp(log_values - top)) + np.arange(1, log_values.size + 1) * 2.0 ** -1000
        bound = np.log(sums * (1 + (log_values.size + 4) * U)) + top + 4 * U * (abs(top) + 1)
    return np.concatenate(([-np.inf], bound))


class TwoFactorSum:
    """The privacy loss A + B of two independent finite losses, evaluated without forming its pairs.

    Parameters
    ----------
    first, second : afa.numerics.atoms.LossAtoms
        The two factors (finite parts; any mass at +infinity is the caller's).  The smaller one is
        iterated over, the larger one searched.

    Examples
    --------
    >>> import numpy as np
    >>> from afa.numerics.atoms import LossAtoms, hockey_stick_with_error
    >>> a = LossAtoms.from_atoms([-1.0, 1.0], np.log([0.3, 0.7]))
    >>> b = LossAtoms.from_atoms([-0.5, 0.25, 2.0], np.log([0.2, 0.3, 0.5]))
    >>> value, error, slope = TwoFactorSum(a, b).evaluate(np.array([0.5]))
    >>> bool(abs(value[0] - hockey_stick_with_error(a.convolve(b), [0.5])[0][0]) < 1e-15)
    True
    """

    def __init__(self, first: LossAtoms, second: LossAtoms):
        small, large = (first, second) if first.size <= second.size else (second, first)
        self.small, self.large = small, large
        #: Number of atom pairs (0 when either factor has no atoms).
        self.size = small.size * large.size
        top = small.top + large.top if self.size else -math.inf
        #: An upper bound on the largest true loss (the factors' bounds, their sum's rounding raised).
        self.top = top + 1e-12 * abs(top) + 1e-300 if self.size else -math.inf
        #: The largest computed loss (the sum of the factors' largest).
        self.largest = float(small.losses[-1] + large.losses[-1]) if self.size else -math.inf
        budget.reserve(8.0 * 6 * large.size, "the suffix sums of a factor of a two-factor privacy loss")
        b, log_v = large.losses, large.log_masses
        # log sum_{j >= k} v_j e^{-b_j}, then G_k = that + b_k.
        log_w, chain_w = blocked_suffix_logsumexp(log_v - b)
        gain = log_w + b
        if large.size > 1:
            with np.errstate(divide="ignore"):
                log_d = np.log(-np.expm1(b[:-1] - b[1:])) + gain[1:]
            log_c, chain_c = blocked_suffix_logsumexp(log_d)
            log_c = np.append(log_c, -np.inf)
        else:
            log_c, chain_c = np.full(large.size, -np.inf), 0
        # G_k, log C_k and b_k for k = 0..|B|: the entry past the top (k = |B|) looks up S = 0.
        self._gain = np.append(gain, -np.inf)
        self._log_c = np.append(log_c, -np.inf)
        self._losses = np.append(b, np.inf)
        magnitudes = [np.abs(log_v - b), np.abs(b), np.abs(gain), np.abs(log_v)]
        finite_c = log_c[np.isfinite(log_c)]
        if finite_c.size:
            magnitudes.append(np.abs(finite_c))
        self._large_magnitude = max(float(np.max(m)) for m in magnitudes) if large.size else 0.0
        # Logarithmic rounding of G and log C: their chains of additions, each at most u (|result| + 2),
        # plus the additions forming them (b_k, log(1 - e^{b_j - b_{j+1}})).
        self._chain = chain_w + chain_c + 16
        mass_error = 0.0
        for atoms in (small, large):
            alpha, beta = atoms.log_mass_error
            if atoms.size:
                mass_error += alpha + beta * float(np.max(np.abs(atoms.log_masses)))
        self._mass_error = math.expm1(mass_error * PAD)
        # Mass dropped from either factor: a dropped atom of A weighs, with all of B, at most its mass times
        # B's total (and the same the other way round).
        dropped = [math.exp(atoms.log_dropped) for atoms in (small, large)]
        totals = [math.exp(atoms.log_mass) if atoms.size else 0.0 for atoms in (small, large)]
        self._dropped = (dropped[0] * (totals[1] + dropped[1]) + dropped[1] * (totals[0] + dropped[0])) * PAD
        self._position = (float(small.loss_errors.max()) if small.size else 0.0) + \
            (float(large.loss_errors.max()) if large.size else 0.0)
        self._small_magnitude = float(np.max(np.abs(small.losses))) if small.size else 0.0
        self._large_losses_magnitude = float(np.max(np.abs(large.losses))) if large.size else 0.0
        self._small_log_mass_magnitude = float(np.max(np.abs(small.log_masses))) if small.size else 0.0
        # Upper bounds on the log of the smaller factor's masses before / from each index on.
        self._log_prefix = _log_cumulative_bound(small.log_masses)
        self._log_suffix = _log_cumulative_bound(small.log_masses[::-1])[::-1]
        #: (atom span, look-up indices) of the last evaluation's last eps, where the next search starts.
        self._near: tuple[tuple[int, int], np.ndarray] | None = None

    @property
    def log_dropped(self) -> float:
        """log of the bound on the mass the factors dropped, as it enters every value's error."""
        return math.log(self._dropped) if self._dropped > 0 else -math.inf

    def _log_tail(self, x: np.ndarray) -> np.ndarray:
        """log S(x) at each x: one look-up in the larger factor's suffix sums (-inf beyond its top)."""
        k = np.searchsorted(self.large.losses, x, side="right")
        with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
            gap = np.minimum(x - self._losses[k], 0.0)
            return np.logaddexp(self._log_c[k], self._gain[k] + np.log(-np.expm1(gap)))

    def _search(self, x: np.ndarray, near: np.ndarray | None) -> np.ndarray:
        """``np.searchsorted(b, x, side="right")`` for the larger factor's losses b: where ``near`` is given, each
        of its indices k is kept when b[k - 1] <= x < b[k] still holds (an exact check, so the result is the
        same) and only the others are searched.  Successive evaluations at nearby eps move few of them, and the
        check reads b in order where a search jumps through it."""
        b = self.large.losses
        if near is None:
            return np.searchsorted(b, x, side="right")
        k = np.array(np.broadcast_to(near, x.shape))
        n = b.size
        stale = ~(((k == 0) | (b[np.maximum(k - 1, 0)] <= x)) & ((k == n) | (x < b[np.minimum(k, n - 1)])))
        if np.any(stale):
            k[stale] = np.searchsorted(b, x[stale], side="right")
        return k

    def _kept(self, epsilons: np.ndarray, a: np.ndarray, first: int) -> tuple[int, int, np.ndarray]:
        """(start, stop, omitted): the atoms a[start:stop] of the smaller factor (a = its atoms from index
        ``first`` on) outside which, at every eps, the terms w_i S(eps - a_i) add at most e^-OMIT of its value;
        ``omitted`` bounds those terms at each eps.

        S is non-increasing, so the atoms below index i add at most W(< i) S(eps - a_{i-1}) (W the smaller
        factor's prefix masses), and those from index j on at most W(>= j) S(eps - a_last); both are monotone
        in the index, so checking them at SAMPLES + 1 evenly spaced indices and keeping the outermost that pass
        is safe.  The value is at least the largest sampled term (halved for rounding); each bound is doubled
        for its own rounding.
        """
        n = a.size
        everything = (0, n, np.zeros(epsilons.size))
        grid = np.unique(np.linspace(0, n, SAMPLES + 1).astype(np.int64))
        inner = grid[grid > 0]
        log_w = self.small.log_masses[first:]
        with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
            log_s = self._log_tail(epsilons[:, None] - a[None, inner - 1])
            log_least = np.max(log_w[inner - 1][None, :] + log_s, axis=1) - math.log(2.0)
            highest = self._log_tail(epsilons - a[-1])  # the largest S(eps - a_i)
            below = self._log_prefix[first + inner][None, :] + log_s        # atoms before each inner index
            above = self._log_suffix[first + grid][None, :] + highest[:, None]  # atoms from each index on
        if not np.all(np.isfinite(log_least)):
            return everything
        limit = log_least - OMIT
        passed_below = below <= limit[:, None]
        starts = np.where(passed_below.any(axis=1), inner[np.argmax(np.cumsum(passed_below, axis=1), axis=1)], 0)
        stops = grid[np.argmax(above <= limit[:, None], axis=1)]
        start, stop = int(np.min(starts)), int(np.max(stops))
        if stop <= start:
            return everything
        with np.errstate(under="ignore"):
            omitted = np.exp(below[:, np.searchsorted(inner, start)]) if start > 0 else np.zeros(epsilons.size)
            if stop < n:
                omitted = omitted + np.exp(above[:, np.searchsorted(grid, stop)])
        return start, stop, 2 * omitted

    def _values(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(computed value, computed slope -d value / d eps) at each eps (1-d), no error bound."""
        value, slope, _ = self._values_omitting(epsilons)
        return value, slope

    def _values_omitting(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(computed value, computed slope, bound on the terms left out) at each eps (1-d): the sum over the
        smaller factor's atoms that :meth:`_kept` keeps; the rest adds at most the bound."""
        small, large = self.small, self.large
        value = np.zeros(epsilons.size)
        slope = np.zeros(epsilons.size)
        omitted = np.zeros(epsilons.size)
        if small.size == 0 or large.size == 0:
            return value, slope, omitted
        b = large.losses
        # Atoms of the smaller factor with eps - a_i beyond the larger factor's top add nothing: the search
        # covers those above min(eps) - b_top, less a margin wider than the rounding of eps - a_i.
        low = float(np.min(epsilons)) - float(b[-1])
        margin = 8 * U * (abs(low) + float(np.max(np.abs(epsilons))) + abs(float(b[-1]))) + 1e-300
        first = int(np.searchsorted(small.losses, low - margin, side="left"))
        a_all, log_w_all = small.losses[first:], small.log_masses[first:]
        if a_all.size == 0:
            return value, slope, omitted
        rows = max(1, CHUNK // a_all.size)
        with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
            for start in range(0, epsilons.size, rows):
                budget.check("evaluating delta(eps) of a two-factor privacy loss")
                chunk = epsilons[start:start + rows]
                keep_start, keep_stop, omitted[start:start + rows] = self._kept(chunk, a_all, first)
                a, log_w = a_all[keep_start:keep_stop], log_w_all[keep_start:keep_stop]
                # the last evaluation's look-ups over the same atoms start this one's (eps moves little)
                span, near = (first + keep_start, first + keep_stop), self._near
                x = chunk[:, None] - a[None, :]
                k = self._search(x, near[1] if near is not None and near[0] == span else None)
                self._near = (span, k[-1])
                value[start:start + rows], slope[start:start + rows] = self._weighted_tails(x, k, log_w)
        return value, slope, omitted

    def _weighted_tails(self, x: np.ndarray, k: np.ndarray, log_w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(sum_i w_i S(x_i), sum_i w_i (-dS/dx)(x_i)) along the last axis of ``x`` (look-up indices ``k``).

        With S(x) = C_k + e^{G_k} (1 - e^{x - b_k}), each term is w_i C_k + w_i e^{G_k} (-expm1(x - b_k)),
        scaled by the row's largest log w_i + max(log C_k, G_k) and summed in linear scale: every term is
        non-negative, so the sum rounds by at most n u relative, and a term scaled below e^-745 of the largest
        (underflowing to 0) is below u of the sum.
        """
        gain, log_c, b = self._gain, self._log_c, self._losses
        with np.errstate(divide="ignore", invalid="ignore", under="ignore", over="ignore"):
            gap = b[k]
            np.subtract(x, gap, out=gap)
            np.minimum(gap, 0.0, out=gap)
            term_c = log_c[k]
            term_c += log_w
            term_g = gain[k]
            term_g += log_w
            top = np.maximum(np.max(term_c, axis=-1), np.max(term_g, axis=-1))
            top = np.where(np.isfinite(top), top, 0.0)[..., None]
            term_c -= top
            np.exp(term_c, out=term_c)
            term_g -= top
            slope_terms = term_g + gap
            np.exp(slope_terms, out=slope_terms)
            np.exp(term_g, out=term_g)
            np.expm1(gap, out=gap)
            term_g *= gap
            term_c -= term_g
            total = np.sum(term_c, axis=-1)
            slope = np.sum(slope_terms, axis=-1)
            return np.exp(np.log(total) + top[..., 0]), np.exp(np.log(slope) + top[..., 0])

    def evaluate(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(value, error, slope) of sum_{i,j} w_i v_j (1 - e^{eps - a_i - b_j})_+ at each eps (1-d).

        The sum is computed at eps -+ the atoms' position error (see the module docstring): the upper bound
        from the first, the lower bound from the second.  ``value`` is the mean of the two sums (the sum at eps
        up to their curvature), ``error`` bounds |value - truth|, and ``slope`` is the computed -d value / d eps
        at the first point.
        """
        epsilons = np.asarray(epsilons, dtype=float).ravel()
        if self.small.size == 0 or self.large.size == 0:
            zeros = np.zeros(epsilons.size)
            return zeros, np.full(epsilons.size, max(self._dropped, 0.0)), zeros
        reach = float(np.max(np.abs(epsilons))) if epsilons.size else 0.0
        shift = (self._position + 4 * U * (reach + self._small_magnitude + self._large_losses_magnitude)
                 + 1e-300) * PAD
        points = np.concatenate((epsilons - shift, epsilons + shift))
        values, slopes, omitted = self._values_omitting(points)
        n = epsilons.size
        high, low, slope = values[:n], values[n:], slopes[:n]
        finite = values[values > 0]
        magnitude = max(self._large_magnitude, self._small_magnitude, reach,
                        self._small_log_mass_magnitude,
                        float(np.max(np.abs(np.log(finite)))) if finite.size else 0.0) + 8
        rounding = math.expm1(U * magnitude * (2 * self._chain + 64) * PAD) + U * (self.small.size + 8)
        relative = (1 + rounding) * (1 + self._mass_error) - 1
        upper = (high + omitted[:n]) * (1 + relative) + self._dropped
        lower = low * (1 - relative)
        value = 0.5 * (high + low)
        error = np.maximum(upper - value, value - lower) * PAD
        # A positive truth below the double range (some pair above eps, every term underflowing) is within
        # the smallest subnormal of a value of 0.
        error = np.where((error == 0) & ((upper > 0) | (epsilons < self.top)), 5e-324, error)
        return value, error, slope

    def root(self, target: float, floor: float, hint: float = math.inf) -> float:
        """The smallest eps >= floor at which the computed value is <= ``target`` (> 0), to a few ulps.

        ``hint``, an eps at or above the crossing if known (e.g. a Chernoff bound), starts Newton steps on
        log delta from above: where delta is log-concave they stay above the crossing and converge to it.
        Otherwise, or when a step passes the crossing, a bracket [low, high] with the value above the
        target at ``low`` and at most the target at ``high`` is shrunk, while the value at ``high`` is 0
        (beyond every pair), by Newton steps on log delta from ``low`` and bisection; then Brent's method on
        log(value / target) finds the crossing (the value is continuous and non-increasing, so the bracket
        holds it).
        """
        from scipy.optimize import brentq

        low, high = floor, max(self.top, floor)
        log_target = math.log(target)
        known: dict[float, tuple[float, float]] = {}

        def at(x: float) -> tuple[float, float]:
            # (value, slope) at x, each point evaluated once: Brent's method starts at the bracket's ends
            if x not in known:
                value, slope = self._values(np.array([x]))
                known[x] = (float(value[0]), float(slope[0]))
            return known[x]

        at_low = None  # (value, slope) at low once known
        if floor < hint < high:
            point = hint
            value, slope = at(point)
            for _ in range(200):
                if value > target:  # a step passed the crossing (or the hint was below it)
                    if point < high <= point + 64 * np.finfo(float).eps * abs(high):
                        return high  # by a few ulps: the last point at most the target is the crossing
                    if low < point < high:
                        low, at_low = point, (value, slope)
                    break
                high = point
                if not (value > 0 and slope > 0):
                    break
                budget.check("searching eps(delta) of a two-factor privacy loss")
                step = (math.log(value) - log_target) * value / slope
                if not -step > 4 * np.finfo(float).eps * max(abs(point), 1e-300):
                    return point
                point = point + step
                if point <= low:
                    break
                value, slope = at(point)
        value, slope = at_low if at_low is not None else at(low)
        if value <= target:
            return low
        for _ in range(200):
            budget.check("searching eps(delta) of a two-factor privacy loss")
            with np.errstate(over="ignore", divide="ignore"):
                step = (math.log(value) - log_target) * value / slope if slope > 0 else math.nan
            proposal = low + step if math.isfinite(step) and low < low + step < high else 0.5 * (low + high)
            if proposal in (low, high):
                return high
            proposal_value, proposal_slope = at(proposal)
            if proposal_value > target:
                low, value, slope = proposal, proposal_value, proposal_slope
                continue
            high = proposal
            if proposal_value > 0:
                break

        def excess(x: float) -> float:
            budget.check("searching eps(delta) of a two-factor privacy loss")
            found = at(x)[0]
            return math.log(found) - log_target if found > 0 else -1e300

        if not high > low or excess(high) > 0:
            return high
        return float(brentq(excess, low, high, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=200))
