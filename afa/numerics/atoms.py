"""Finite privacy-loss distributions (:class:`LossAtoms`): exact composition, and delta(eps), eps(delta)
with error bounds.

A :class:`LossAtoms` is a finite set of privacy-loss values with their
probabilities (kept as logarithms), the finite part of a privacy loss whose
remaining mass sits at +infinity (the caller tracks that mass).  Composition
of independent mechanisms is convolution of their privacy-loss distributions
(Google DP team 2025, PLD supplement Sec. 2); here it is done exactly, in log
space.

Every atom carries what its floating-point computation may have got wrong,
so that answers come with sound error bounds:

* ``loss_errors[i]``: the true loss value lies within ``losses[i] +- loss_errors[i]``
  (the rounding of the mechanism's log-ratio, of every sum formed while composing,
  and the spread of atoms merged into one);
* ``log_mass_error = (alpha, beta)``: the true log-probability of atom ``i`` lies
  within ``log_masses[i] +- (alpha + beta |log_masses[i]|)``.

Atoms whose intervals overlap are merged (they may be one atom computed along
different paths); the merged atom's interval covers them all.

delta(eps) = sum_i w_i (1 - e^{eps - l_i})_+ (Zhu, Dong & Wang 2022, Lemma 37 with
Def. 36) is evaluated term by term with expm1 (no cancellation of e^eps Q
against P), with a bound on its error: the rounding of the evaluation, the
masses' errors and, next to an atom, the atom's position error (a term with
eps within an atom's position error is known only to w_i * that error).
eps(delta) searches the sorted atoms for the interval where delta crosses the
target, solves delta = A - B e^eps there in closed form, polishes the root,
and steps outwards from it until the error-widened delta is verified on each
side, so the returned bracket is sound.

Composing (:meth:`LossAtoms.convolve`, :meth:`LossAtoms.power`, :func:`compose_terms`) drops atoms too light
to matter, counting their mass in the error; composes laws that lie on one lattice densely (a law's power by
binary powering of its mass vector in linear scale, two factors by one scaled ``np.convolve``, banded when
their masses span too many nats; no sorting); can keep only the atoms whose loss can exceed a threshold;
and refuses hopeless compositions early (:class:`CompositionTooLargeError`) from a size estimate
(:func:`estimated_atoms`) and a cap on the pairs formed (:func:`pair_allowance`).  Compositions too large to
enumerate in full are :mod:`afa.engines.discrete`'s.
"""


from __future__ import annotations

import contextvars
import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .. import _validation as check
from .. import budget
from .. import options as settings
from .._accurate import UNIT_ROUNDOFF as U
from .._accurate import binomial_log_pmf, direct_convolve, log_characteristic, log_sum_exp, normalize
from ..results import AccuracyError, UnsupportedCompositionError


def max_atoms() -> int:
    """The most atoms a composed distribution may have (the active :class:`afa.ExactOptions`)."""
    return settings.current().exact.max_atoms


def _max_pairs() -> int:
    """The most atom pairs one convolution may form (the active :class:`afa.ExactOptions`)."""
    return settings.current().exact.max_pairs


#: Unit roundoff of float64.
#: Rounding units allowed a base atom's loss and log-mass: a mechanism's loss is a difference of two
#: log-probabilities, each accurate to a few units of its magnitude (see :meth:`LossAtoms.from_atoms`).
BASE_ULPS = 8.0
#: Rounding units allowed the binomial law's log-pmf (Loader's saddle-point form) per unit of
#: |log pmf| + log(n + 1) + 8: "a few ulps of its terms" (measured against mpmath in the tests).
BINOMIAL_ULPS = 32.0
def default_mass_error(mass: float) -> float:
    """The error bound of a computed mass (e.g. at +infinity) when none is given: BASE_ULPS units of it, plus
    |log mass| units for a mass formed as exp of a log-probability (whose rounding is relative to |log mass|)."""
    if not mass > 0:
        return 0.0
    return (BASE_ULPS + abs(math.log(mass))) * U * mass


#: Factor by which every computed error bound is raised to cover the rounding of the bound itself.
PAD = 1.0 + 1e-9
#: Elements per block of (eps x atoms) matrices.
BLOCK = 1 << 19
#: Bytes per atom pair while a convolution forms, sorts and merges its pairs.
BYTES_PER_PAIR = 48


class CompositionTooLargeError(UnsupportedCompositionError, AccuracyError):
    """The exact discrete composition would exceed the size limits (a refusal: 'auto' moves on)."""


class FiniteLoss(Protocol):
    """What delta(eps) and eps(delta) need of a finite privacy loss (:class:`LossAtoms`, or the
    :class:`afa.engines.two_factor.TwoFactorSum` of two of them)."""

    @property
    def size(self) -> int:
        """Number of atoms (0: no finite mass)."""

    @property
    def top(self) -> float:
        """An upper bound on the largest true loss."""

    @property
    def largest(self) -> float:
        """The largest computed loss."""

    def evaluate(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(value, error bound, -d value / d eps) of the finite part of delta at each eps."""

    def root(self, target: float, floor: float, hint: float = math.inf) -> float:
        """The smallest eps >= floor at which the computed value is <= target (``hint``: an eps known to lie
        at or above it, where the search may start)."""


@dataclass(frozen=True, eq=False)
class LossAtoms:
    """Atoms ``losses[i]`` with probability ``exp(log_masses[i])``, sorted by loss, with error bounds.

    The masses may sum to less than one: the rest is the mass at +infinity
    (Zhu, Dong & Wang 2022, App. D.2), which the caller tracks.  The true loss
    of atom ``i`` lies within ``losses[i] +- loss_errors[i]`` and its true
    log-mass within ``log_masses[i] +- (alpha + beta |log_masses[i]|)`` with
    ``(alpha, beta) = log_mass_error`` (all zero when constructed directly:
    exact atoms).  Compositions may drop atoms of negligible mass (a ``log_cutoff``);
    ``log_dropped`` bounds the mass so lost, which every delta's error includes.
    Build from raw values with :meth:`from_atoms`.
    """

    losses: np.ndarray
    log_masses: np.ndarray
    #: Bounds on each loss's absolute error (empty: all zero, exact atoms).
    loss_errors: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0))
    log_mass_error: tuple[float, float] = (0.0, 0.0)
    #: log of an upper bound on the mass of atoms dropped as negligible (-inf: none dropped).
    log_dropped: float = -math.inf

    def __post_init__(self):
        if np.size(self.loss_errors) != np.size(self.losses):
            if np.size(self.loss_errors):
                raise ValueError(f"loss_errors must have one entry per loss, got {np.size(self.loss_errors)} for "
                                 f"{np.size(self.losses)}")
            object.__setattr__(self, "loss_errors", np.zeros(np.shape(self.losses)))

    @classmethod
    def from_atoms(cls, losses, log_masses, loss_errors=None, log_mass_error=None) -> LossAtoms:
        """Sort, drop zero-mass atoms and merge atoms whose loss intervals overlap.

        Parameters
        ----------
        losses, log_masses : array_like
            Loss values and log-probabilities (1-d, same length).
        loss_errors : array_like or None
            Bounds on the absolute error of each loss.  By default a mechanism's loss
            log p - log q is taken as a difference of two log-probabilities each accurate to
            BASE_ULPS units of (1 + its magnitude): BASE_ULPS u (2 + |log p| + |log q| + |loss|).
        log_mass_error : (alpha, beta) or None
            Error bound of the log-masses, alpha + beta |log mass|; by default
            (BASE_ULPS u, BASE_ULPS u).
        """
        losses = np.array(losses, dtype=float).ravel()  # (copies: the atoms keep their own arrays)
        log_masses = np.array(log_masses, dtype=float).ravel()
        if losses.shape != log_masses.shape:
            raise ValueError(f"losses and log_masses must have the same length, got {losses.size} and "
                             f"{log_masses.size}")
        keep = log_masses > -np.inf
        everything = bool(keep.all())
        if not everything:
            losses, log_masses = losses[keep], log_masses[keep]
        if loss_errors is None:
            loss_errors = np.abs(log_masses - losses)
            loss_errors += np.abs(log_masses)
            loss_errors += np.abs(losses)
            loss_errors += 2
            loss_errors *= BASE_ULPS * U
        else:
            loss_errors = np.broadcast_to(np.asarray(loss_errors, dtype=float).ravel(), keep.shape)
            loss_errors = np.array(loss_errors) if everything else loss_errors[keep]
        if log_mass_error is None:
            log_mass_error = (BASE_ULPS * U, BASE_ULPS * U)
        return _merged(losses, loss_errors, log_masses, *log_mass_error)

    @property
    def size(self) -> int:
        return int(self.losses.size)

    @property
    def log_mass(self) -> float:
        """Log of the total (finite) mass."""
        return float(log_sum_exp(self.log_masses)) if self.size else -np.inf

    @functools.cached_property
    def top(self) -> float:
        """An upper bound on the largest true loss (-inf without atoms)."""
        return above_rounding(float((self.losses + self.loss_errors).max())) if self.size else -math.inf

    @functools.cached_property
    def largest_error(self) -> float:
        """The largest loss error bound (0 without atoms)."""
        return float(self.loss_errors.max()) if self.size else 0.0

    def log_phi(self, t: np.ndarray) -> np.ndarray:
        """log E[exp(i t L)] over the atoms, vectorised over ``t`` (complex, accurate near 0)."""
        if self.size == 0:
            return np.full(np.shape(t), -np.inf, dtype=complex)
        log_total, weights = self.normalized
        return log_characteristic(t, [self.losses], [weights], [log_total])[..., 0]

    @functools.cached_property
    def normalized(self) -> tuple[float, np.ndarray]:
        """(log of the total mass, masses divided by it)."""
        return normalize(self.log_masses)

    @property
    def largest(self) -> float:
        """The largest computed loss (call only with atoms)."""
        return float(self.losses[-1])

    def evaluate(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(value, error, slope) of sum_i w_i (1 - e^{eps - l_i})_+ at each eps (1-d): the value, a bound on
        its error and -d value / d eps (see :func:`hockey_stick_with_error`)."""
        return _evaluate(self, epsilons)

    def evaluate_point(self, epsilon: float) -> tuple[float, float, float]:
        """:meth:`evaluate` at one eps, as floats."""
        return _evaluate_point(self, epsilon)

    def root(self, target: float, floor: float, hint: float = math.inf) -> float:
        """The smallest eps >= ``floor`` at which the computed value is <= ``target`` (> 0), to a few ulps (one
        pass of suffix sums finds it; ``hint`` is not needed)."""
        return _value_root(self, target, floor)

    def slope_bracket(self, x: float, value: float, error: float, slope: float, target: float
                      ) -> tuple[float, float] | None:
        """(lower, upper) on the crossing of delta = ``target`` from delta's ``value``, ``error`` and ``slope``
        (-d delta / d eps, as :meth:`evaluate` gives them, any constant mass at infinity included) at ``x`` alone;
        None where it does not apply (no atom above x, or an atom within reach of the interval).

        The true delta falls at the rate S(t) = sum over the true atoms above t of w e^{t - l}.  Upper: with no
        true atom in (x, x_u], every atom above x is above x_u and each term w e^{t - l} grows with t, so
        S(t) >= S(x) on [x, x_u] and delta(x_u) <= value + error - S(x) (x_u - x) (atoms dropped into the error
        only lower delta(x_u) further).  Lower: on [x_l, x] the atoms above x alone give S(t) >= e^{t - x} S(x),
        so delta(x_l) >= value - error + S(x) (1 - e^{x_l - x}).  S(x) is the computed slope lowered by its
        error: the masses' (alpha + beta |log w|), the positions' (an atom moved by e moves its term by e^e) and
        the rounding of the sum that formed it (``slack``).  "No atom within reach": no computed loss within
        twice the largest loss error (and rounding) of (x, x_u], so that the atoms above x are the same for the
        computed and the true losses.  Both ends then hold without evaluating delta again.
        """
        if not slope > 0 or self.size == 0:
            return None
        alpha, beta = self.log_mass_error
        reach = 2 * self.largest_error * PAD + 4 * U * (abs(x) + 1.0)
        start = int(self.losses.searchsorted(x - reach, side="right"))
        log_masses, losses = self.log_masses[start:], self.losses[start:]
        if losses.size == 0 or losses[0] <= x + reach:  # an atom within reach of x
            return None
        largest_log_mass = max(-float(log_masses.min()), float(log_masses.max()))
        largest_loss = max(abs(float(losses[0])), abs(float(losses[-1])))  # (sorted)
        slack = PAD * (alpha + beta * largest_log_mass + reach
                       + U * (8 * (largest_log_mass + abs(x) + largest_loss + abs(math.log(slope))) + 2 * losses.size
                              + 32))
        lowest_slope = slope * math.exp(-slack)
        tiny = 4 * U * max(abs(x), 1e-300)
        excess = value + error - target
        upper = x if excess <= 0 else x + excess / lowest_slope * PAD + tiny
        if upper > x and losses[0] <= upper + reach:  # an atom within reach of (x, upper]
            return None
        shortfall = target - (value - error)
        if shortfall < 0:
            lower = x
        elif shortfall < lowest_slope:
            lower = x + math.log1p(-shortfall / lowest_slope) * PAD - tiny
        else:
            return None
        return lower, upper

    def position_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(lowest, highest) true loss of each atom: losses -+ loss_errors, widened by the rounding of the
        sums that form them (2 u |loss|) and a relative 1e-9 of the error."""
        shift = self.loss_errors * (1 + 1e-9) + 2 * U * np.abs(self.losses)
        return self.losses - shift, self.losses + shift

    def without_light(self, log_cutoff: float) -> LossAtoms:
        """The atoms whose mass, raised by its error, is at least e^``log_cutoff``; the others' mass so raised
        is added to ``log_dropped`` (so every delta's error bound covers it)."""
        if not log_cutoff > -math.inf or self.size == 0:
            return self
        alpha, beta = self.log_mass_error
        losses, log_masses, loss_errors, log_dropped = _dropped_light(
            self.losses, self.log_masses, self.loss_errors, alpha, beta, log_cutoff, self.log_dropped)
        if losses.size == self.size:
            return self
        return LossAtoms(losses, log_masses, loss_errors, self.log_mass_error, log_dropped)

    def above(self, threshold: float) -> LossAtoms:
        """The atoms whose true loss may exceed ``threshold`` (those with losses + loss_errors > it)."""
        if not threshold > -math.inf or self.size == 0:
            return self
        keep = self.losses + self.loss_errors * PAD > threshold
        if np.all(keep):
            return self
        return LossAtoms(self.losses[keep], self.log_masses[keep], self.loss_errors[keep], self.log_mass_error,
                         self.log_dropped)

    def convolve(self, other: LossAtoms, threshold: float = -math.inf,
                 log_cutoff: float = -math.inf) -> LossAtoms:
        """The distribution of the sum of independent losses (exact, merged).

        With a finite ``threshold`` only the sums whose true value may exceed it are formed
        (the result is complete above ``threshold``: every atom whose true loss exceeds it is
        present); atoms whose mass is below e^``log_cutoff`` (with its error) are dropped into
        ``log_dropped``.
        """
        return _convolve(self, other, threshold, log_cutoff)

    def power(self, count: int, threshold: float = -math.inf, log_cutoff: float = -math.inf) -> LossAtoms:
        """The ``count``-fold self-convolution (``count`` >= 1), complete above ``threshold``,
        atoms below e^``log_cutoff`` dropped (see :meth:`convolve`).

        Two-atom distributions (randomized response, approximate DP) use the
        binomial law directly; others use binary powering, each intermediate
        power keeping only the atoms that can still reach the threshold.
        """
        count = check.positive_integer("count", count)
        if count == 1:
            atoms = self.above(threshold)
            if log_cutoff == -math.inf or atoms.size == 0:
                return atoms
            return _merged(atoms.losses, atoms.loss_errors, atoms.log_masses, *atoms.log_mass_error, log_cutoff,
                           atoms.log_dropped)
        if self.size == 0:
            return self
        if self.size == 2:
            return self._binomial_power(count, threshold, log_cutoff)
        if self.size * count >= LATTICE_MIN_PAIRS and settings.current().exact.lattice:
            dense = _lattice_power(self, count, threshold, log_cutoff)
            if dense is not None:
                return dense
        one_top = self.top

        def cut(exponent: int) -> float:
            """An intermediate power self^exponent must be complete above this: the other
            count - exponent uses add at most (count - exponent) * one_top."""
            return _rest_threshold(threshold, (count - exponent) * one_top)

        result: LossAtoms | None = None
        base, done, exponent = self.above(cut(1)), 0, 1
        remaining = count
        while remaining:
            budget.check(f"composing {count} uses of a {self.size}-atom privacy loss exactly")
            if remaining & 1:
                done += exponent
                result = base if result is None else result.convolve(base, cut(done), log_cutoff)
            remaining >>= 1
            if remaining:
                exponent *= 2
                base = base.convolve(base, cut(exponent), log_cutoff)
        if result is None:
            raise ValueError(f"count must be >= 1, got {count}")
        return result

    def _binomial_power(self, count: int, threshold: float, log_cutoff: float) -> LossAtoms:
        low, high = float(self.losses[0]), float(self.losses[1])
        log_low, log_high = float(self.log_masses[0]), float(self.log_masses[1])
        err_low, err_high = float(self.loss_errors[0]), float(self.loss_errors[1])
        alpha, beta = self.log_mass_error
        log_total = _log_add(log_low, log_high)
        j_min, j_max = 0, count
        if threshold > -math.inf and high > low:
            # Loss j high + (count - j) low > threshold - (count-fold position error) needs j above this.
            slack = count * (max(err_low, err_high) + 4 * U * max(abs(low), abs(high))) * PAD
            j_min = max(0, min(count, math.floor((threshold - slack - count * low) / (high - low)) - 1))
        log_dropped = self.log_dropped
        if log_cutoff > -math.inf:
            # Hoeffding: W^n Binomial(n, p)(j) <= W^n e^{-2 (j - np)^2 / n}, so the atoms with masses below the
            # cutoff (less a margin of 1 for their errors and the rounding of p) lie beyond this distance of np;
            # their total is at most (n + 1) e^{cutoff}.
            margin = 1.0 + count * (alpha + beta * (abs(log_high) + abs(log_low)) + 4 * U * (1 + abs(log_total)))
            room = count * log_total + margin - log_cutoff
            if room <= 0:  # every atom is negligible: all the mass (at most W^n e^margin) is dropped
                return LossAtoms(np.empty(0), np.empty(0), log_dropped=_log_add(log_dropped,
                                                                                 count * log_total + margin))
            p = math.exp(log_high - log_total)
            half_width = math.sqrt(room * count / 2) * (1 + 1e-9) + 1 + 16 * U * count
            low_j, high_j = math.floor(count * p - half_width), math.ceil(count * p + half_width)
            if low_j > j_min or high_j < j_max:
                log_dropped = _log_add(log_dropped, log_cutoff + math.log(count + 1))
            j_min, j_max = max(j_min, low_j), min(j_max, high_j)
        size = j_max + 1 - j_min
        if size <= 0:
            return LossAtoms(np.empty(0), np.empty(0), log_dropped=log_dropped)
        if size > max_atoms():
            raise CompositionTooLargeError(
                f"exact composition of {count} two-atom mechanisms has {size} atoms (limit {max_atoms()})")
        budget.reserve(8.0 * 6 * size, f"the binomial law of {count} two-atom mechanisms")
        # C(n, j) w_hi^j w_lo^(n-j) = W^n Binomial(n, w_hi / W)(j), W = w_hi + w_lo.
        total_error = 4 * U * (1 + abs(log_total))
        if abs(log_total) < 1e-14:
            # A probability vector up to rounding: n * rounding would grow with the count.
            total_error += 2 * abs(log_total)
            log_total = 0.0
        log_p, log_q = log_high - log_total, log_low - log_total
        if j_max == count and size <= TOP_BINOMIAL and (size - 1) * math.log(count) < 690:
            # the top of the law only (an eps(delta) query far in its tail): in Python floats
            losses, loss_errors, log_masses, own_error = _binomial_top(
                count, j_min, (low, high), (err_low, err_high), log_p, log_q, log_total)
        else:
            j = np.arange(j_min, j_max + 1, dtype=float)
            losses, loss_errors = _binomial_losses(j, count, (low, high), (err_low, err_high))
            log_masses = binomial_log_pmf(j, count, math.exp(log_p), math.exp(log_q), log_p, log_q)
            log_masses += count * log_total
            own_error = BINOMIAL_ULPS * U * (math.log(count + 1) + 8)
        # Errors: each use's log-masses (j of one atom, count - j of the other: alpha + beta |log w| each, and
        # j |log w_hi| + (count - j) |log w_lo| <= |log pmf| + log C(count, j)), the normalisation, and the
        # binomial law's own rounding.  log C(count, j) is largest at the j in range nearest count / 2.
        log_choose = max(_log_choose(count, min(max(half, j_min), j_max)) for half in (count // 2, count - count // 2))
        new_alpha = (count * (alpha + total_error) + beta * (log_choose + 2 * count * max(log_total, 0.0))
                     + own_error) * PAD
        new_beta = beta + BINOMIAL_ULPS * U
        if log_cutoff < 0 and new_beta * PAD < 0.5:
            # The atoms whose mass, raised by its error, is below the cutoff: for log w <= 0 that is
            # log w < (cutoff - PAD alpha) / (1 - PAD beta) (rounding only moves an atom across this line by a
            # relative 1e-15, which the 1e-9 margin below covers); each weighs less than e^cutoff, so their
            # total counts as (their number) e^cutoff, of the order of the mass Hoeffding's bound dropped.
            light = log_masses < (log_cutoff - new_alpha * PAD) / (1 - new_beta * PAD)
            dropped = int(np.count_nonzero(light))
            if dropped:
                log_dropped = _log_add(log_dropped, log_cutoff + math.log(dropped) + 1e-9 * (1 + abs(log_cutoff)))
                keep = ~light
                losses, loss_errors, log_masses = losses[keep], loss_errors[keep], log_masses[keep]
            log_cutoff = -math.inf
        return _merged(losses, loss_errors, log_masses, new_alpha, new_beta, log_cutoff, log_dropped)


#: Atoms up to which the top of a binomial law (up to its largest loss) is formed in Python floats.
TOP_BINOMIAL = 24


def _binomial_top(count: int, j_min: int, losses: tuple[float, float], errors: tuple[float, float], log_p: float,
                  log_q: float, log_total: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(losses, loss errors, log-masses, the log-masses' own rounding bound) of j = j_min..count uses of the
    high atom: the losses and their errors by :func:`_binomial_losses` (as :meth:`LossAtoms._binomial_power` forms
    them), and
    ((log C(n, i) + j log p) + i log q) + n log W (i = n - j), log C(n, i) in Python floats from the running product
    prod_{t <= i} (n - t + 1) / t (2i roundings: a relative error of at most 2.0001 i u, no overflow for
    i log n < 690).

    Rounding: the logarithm of C (at most 2 u log C: one ulp of glibc's log), the products j log p, i log q and
    n log W and the three additions: at most u (2.0001 i + 7 log C + 4 |log pmf| + 7 |n log W|), with
    |j log p| + |i log q| = log C + |log pmf|.  The 4 u |log pmf| is within BINOMIAL_ULPS u |log mass| (the
    beta term) up to 4 u |n log W|; the rest is returned as the bound (for the largest i and log C)."""
    choose, log_chooses = 1.0, [0.0]
    for i in range(1, count - j_min + 1):
        choose = choose * (count - i + 1) / i
        log_chooses.append(math.log(choose))
    offset = count * log_total
    j = np.arange(j_min, count + 1, dtype=float)
    loss_values, loss_errors = _binomial_losses(j, count, losses, errors)
    log_masses = np.array(log_chooses[::-1])
    log_masses += j * log_p
    log_masses += (count - j) * log_q
    log_masses += offset
    own = U * (2.0001 * (count - j_min) + 7 * max(log_chooses) + 7 * abs(offset) + 1)
    return loss_values, loss_errors, log_masses, own


def _binomial_losses(j: np.ndarray, count: int, losses: tuple[float, float], errors: tuple[float, float]
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The losses j high + (count - j) low of ``j`` uses of the high atom (``losses`` = (low, high)) and bounds on
    their errors: j error_high + (count - j) error_low and the rounding of the products and their sum (j and
    count - j are exact), u (|j high| + |(count - j) low| + |loss|), times PAD."""
    (low, high), (err_low, err_high) = losses, errors
    rest = count - j
    values = j * high + rest * low
    value_errors = j * (err_high + U * abs(high)) + rest * (err_low + U * abs(low))
    value_errors += U * np.abs(values)
    value_errors *= PAD
    return values, value_errors


def _log_add(x: float, y: float) -> float:
    """log(e^x + e^y) of two floats (-inf when both are), as np.logaddexp forms it."""
    top, other = (x, y) if x >= y else (y, x)
    if other == -math.inf:
        return top
    return top + math.log1p(math.exp(other - top))


def _log_choose(n: int, j: int) -> float:
    """log C(n, j) from log-gamma (an estimate to a few ulps of log n!, for error bounds)."""
    return math.lgamma(n + 1.0) - math.lgamma(j + 1.0) - math.lgamma(n - j + 1.0)


def above_rounding(x: float) -> float:
    """x raised by a relative 1e-12 (and 1e-300): above x's own rounding and that of a few sums."""
    return x + 1e-12 * abs(x) + 1e-300


def _rest_threshold(threshold: float, rest_top: float) -> float:
    """Where an intermediate must be complete for the final sum to be complete above ``threshold``,
    when the other uses add at most ``rest_top`` (lowered by a relative 1e-12 for rounding)."""
    if not threshold > -math.inf:
        return -math.inf
    return threshold - rest_top - 1e-12 * (abs(threshold) + abs(rest_top)) - 1e-300


def _merged(losses: np.ndarray, loss_errors: np.ndarray, log_masses: np.ndarray, alpha: float,
            beta: float, log_cutoff: float = -math.inf, log_dropped: float = -math.inf) -> LossAtoms:
    """Sort atoms and merge those whose intervals losses -+ loss_errors overlap (chains of overlaps merge);
    then drop atoms whose mass, raised by its error, is below e^``log_cutoff``.

    A merged atom keeps the first (smallest) loss value, an error covering every member's
    interval, and the log of the summed mass; the log-mass error grows by beta log g (the
    members' errors, weighted by their masses) plus the rounding of g sequential additions,
    g the largest group.  Dropped mass (raised by its error) is added to ``log_dropped``.
    """
    if losses.size == 0:
        return LossAtoms(losses, log_masses, loss_errors, (alpha, beta), log_dropped)
    ends = losses + loss_errors
    if losses.size > 1 and losses[0] > losses[-1] and bool((losses[:-1] - loss_errors[:-1] > ends[1:]).all()):
        # each interval lies wholly below the one before: reversed, nothing to merge
        losses, loss_errors, log_masses, ends = losses[::-1], loss_errors[::-1], log_masses[::-1], ends[::-1]
    if not bool((losses[1:] - loss_errors[1:] > ends[:-1]).all()):
        # (else each interval lies wholly above the one before: sorted, nothing to merge)
        order = np.argsort(losses, kind="stable")
        losses, loss_errors, log_masses = losses[order], loss_errors[order], log_masses[order]
        reach = np.maximum.accumulate(losses + loss_errors)
        starts = np.concatenate(([0], np.flatnonzero(losses[1:] - loss_errors[1:] > reach[:-1]) + 1))
    else:
        starts = losses
    if starts.size < losses.size:
        sizes = np.diff(np.append(starts, losses.size))
        first = np.repeat(losses[starts], sizes)
        loss_errors = np.maximum.reduceat((losses - first) + loss_errors, starts) * PAD
        losses = losses[starts]
        log_masses = np.logaddexp.reduceat(log_masses, starts)
        largest = int(sizes.max())
        alpha = (alpha + beta * math.log(largest) + 3 * largest * U) * PAD
        beta = beta + largest * U
    losses, log_masses, loss_errors, log_dropped = _dropped_light(losses, log_masses, loss_errors, alpha, beta,
                                                                  log_cutoff, log_dropped)
    if losses.size > max_atoms():
        raise CompositionTooLargeError(
            f"exact discrete composition has {losses.size} distinct loss values (limit {max_atoms()})")
    return LossAtoms(losses, log_masses, loss_errors, (alpha, beta), log_dropped)


def _dropped_light(losses: np.ndarray, log_masses: np.ndarray, loss_errors: np.ndarray, alpha: float, beta: float,
                   log_cutoff: float, log_dropped: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(losses, log_masses, loss_errors, log_dropped) without the atoms whose mass, raised by its error bound
    (alpha + beta |log mass|), is below e^``log_cutoff``: their mass so raised joins ``log_dropped``."""
    if log_cutoff > -math.inf and log_masses.size and float(log_masses.min()) < log_cutoff:
        # (an atom whose computed mass is at least the cutoff stays: its error only raises it)
        upper_log_masses = log_masses + (alpha + beta * np.abs(log_masses)) * PAD
        negligible = upper_log_masses < log_cutoff
        if negligible.any():
            lost = float(log_sum_exp(upper_log_masses[negligible])) + 1e-9
            log_dropped = _log_add(log_dropped, lost)
            keep = ~negligible
            losses, log_masses, loss_errors = losses[keep], log_masses[keep], loss_errors[keep]
    return losses, log_masses, loss_errors, log_dropped


def _convolve(first: LossAtoms, second: LossAtoms, threshold: float, log_cutoff: float) -> LossAtoms:
    """first * second, forming only the pairs whose true sum may exceed ``threshold``, dropping atoms
    below e^``log_cutoff``.

    Mass dropped earlier from either factor stays dropped: a dropped atom's descendants weigh at most
    its mass times the other factor's total (<= 1, up to rounding).
    """
    log_dropped = float(np.logaddexp(first.log_dropped, second.log_dropped)) + 1e-9
    if first.size == 0 or second.size == 0:
        return LossAtoms(np.empty(0), np.empty(0), log_dropped=log_dropped)
    if threshold > -math.inf:
        first, second = first.above(_rest_threshold(threshold, second.top)), \
            second.above(_rest_threshold(threshold, first.top))
        if first.size == 0 or second.size == 0:
            return LossAtoms(np.empty(0), np.empty(0), log_dropped=log_dropped)
        # Pairs with l1 + l2 > threshold - (largest errors): for each atom of `first`, a suffix of `second`.
        slack = (first.largest_error + second.largest_error + 4 * U * (abs(threshold) + 1)) * PAD
        starts = np.searchsorted(second.losses, threshold - slack - first.losses, side="right")
        counts = second.size - starts
        pairs = int(counts.sum())
    else:
        pairs = first.size * second.size
    lattice = _common_lattice(first, second) if pairs >= LATTICE_MIN_PAIRS and settings.current().exact.lattice \
        else None
    if lattice is not None:
        return _lattice_convolve(first, second, lattice, threshold, log_cutoff, log_dropped)
    (alpha1, beta1), (alpha2, beta2) = first.log_mass_error, second.log_mass_error
    if log_cutoff > -math.inf and pairs > max_atoms():
        # The pairs heavy enough to be kept, before forming any: with no threshold, counted exactly (for each
        # atom of `first`, the atoms of `second` with log w2 >= cutoff - log w1 - the largest error); above a
        # threshold, estimated from a fixed sample of the pairs.  Refused when clearly too many.
        margin = (alpha1 + alpha2 + max(beta1, beta2) * (float(np.max(np.abs(first.log_masses)))
                                                          + float(np.max(np.abs(second.log_masses)))) + 4 * U) * PAD
        if threshold == -math.inf:
            heavy = np.sort(second.log_masses)
            kept = float(np.sum(second.size - np.searchsorted(heavy, log_cutoff - margin - first.log_masses)))
        else:
            sample = np.random.default_rng(0).integers(0, pairs, PAIR_SAMPLE)
            rows = np.searchsorted(np.cumsum(counts), sample, side="right")
            columns = starts[rows] + sample - (np.cumsum(counts) - counts)[rows]
            heavy_share = float(np.mean(first.log_masses[rows] + second.log_masses[columns] >= log_cutoff - margin))
            # refuse only when clearly too many: the share less five of its standard errors
            spread = 5 * math.sqrt(heavy_share * (1 - heavy_share) / PAIR_SAMPLE)
            kept = max(heavy_share - spread, 0.0) * pairs
        if kept > DISTINCT_SUMS * max_atoms():
            raise CompositionTooLargeError(
                f"exact discrete composition would have about {kept:.3g} distinct loss values (limit {max_atoms()})")
    if pairs > _max_pairs():
        raise CompositionTooLargeError(
            f"exact discrete composition needs {pairs:.3g} atom pairs (limit {_max_pairs():.0e}); "
            "compose fewer discrete mechanisms exactly, or add a continuous mechanism and use method='quadrature'")
    _spend(pairs)
    budget.reserve(BYTES_PER_PAIR * pairs, f"the exact convolution of {first.size} and {second.size} atoms")
    budget.check("convolving privacy-loss atoms")
    if threshold > -math.inf:
        i = np.repeat(np.arange(first.size), counts)
        offsets = np.cumsum(counts) - counts
        j = starts[i] + (np.arange(pairs) - offsets[i])
    else:
        i = np.repeat(np.arange(first.size), second.size)
        j = np.tile(np.arange(second.size), first.size)
    log_masses = first.log_masses[i] + second.log_masses[j]
    if log_cutoff > -math.inf:
        # A pair lighter than the cutoff (with its error) is dropped before sorting: sound whatever it would
        # have merged with, since its mass is counted in log_dropped.
        upper = log_masses + (alpha1 + alpha2 + max(beta1, beta2) * np.abs(log_masses)) * PAD + U * 4
        light = upper < log_cutoff
        if np.any(light):
            log_dropped = float(np.logaddexp(log_dropped, float(log_sum_exp(upper[light])) + 1e-9))
            heavy = ~light
            i, j, log_masses = i[heavy], j[heavy], log_masses[heavy]
    if i.size > DISTINCT_SUMS * max_atoms():
        # Off a common lattice, sums of two atoms rarely coincide: about this many distinct values would remain.
        raise CompositionTooLargeError(
            f"exact discrete composition would have about {i.size:.3g} distinct loss values (limit {max_atoms()})")
    losses = first.losses[i] + second.losses[j]
    loss_errors = (first.loss_errors[i] + second.loss_errors[j] + U * np.abs(losses)) * PAD
    del i, j
    if threshold > -math.inf:
        keep = losses + loss_errors > threshold
        losses, loss_errors, log_masses = losses[keep], loss_errors[keep], log_masses[keep]
    beta = max(beta1, beta2)
    # |log w1| + |log w2| = |log w1 + log w2| for masses <= 1; a log-mass above 0 is rounding, covered by alpha.
    positive = max(float(first.log_masses.max()), 0.0) + max(float(second.log_masses.max()), 0.0)
    alpha = (alpha1 + alpha2 + 2 * beta * positive) * PAD
    return _merged(losses, loss_errors, log_masses, alpha, beta + U, log_cutoff, log_dropped)


#: Convolutions of at least this many pairs on a common lattice are done densely (:func:`_lattice_convolve`),
#: unless ExactOptions.lattice is off.
LATTICE_MIN_PAIRS = 4096
#: Largest deviation of atoms from a lattice (relative to its step) for the dense path.
LATTICE_RTOL = 1e-7
#: Width in log-mass of the bands of the dense path: products of two band members stay above e^(-2 BAND).
BAND = 300.0
#: Multiply-adds of the dense path counted as one atom pair of the sorting path (MAX_TOTAL_PAIRS): a pair
#: costs 100-200 ns, a multiply-add of the dense convolution about 0.4 ns (both measured on this project's
#: 2-core machine, one thread), so 250 or more.  A quarter of that: a larger allowance also lets compositions
#: that end up refused work longer first (fuzz seeds 480 and 550 spend 0.3 s more at 128 than at 64).
LATTICE_SPEEDUP = 64


def _lattice_of(atoms: LossAtoms, step: float) -> tuple[np.ndarray, float] | None:
    """(integer indices k, deviation) with losses = losses[0] + step k up to the deviation (which includes
    the rounding of forming losses[0] + step k), or None if the atoms are not on that lattice or too sparse."""
    k = np.rint((atoms.losses - atoms.losses[0]) / step)
    deviation = float(np.max(np.abs(atoms.losses - (atoms.losses[0] + step * k)))) if atoms.size else 0.0
    span = float(k[-1]) + 1
    if not deviation <= LATTICE_RTOL * step or span > 8 * atoms.size + 16 or span > max_atoms():
        return None
    deviation += 2 * U * (abs(float(atoms.losses[0])) + step * span)
    return k.astype(np.int64), deviation


def _common_lattice(first: LossAtoms, second: LossAtoms):
    """(step, (k1, deviation1), (k2, deviation2)) if both factors lie densely on one lattice, else None."""
    steps = [float(np.min(np.diff(atoms.losses))) for atoms in (first, second) if atoms.size > 1]
    if not steps or min(steps) <= 0:
        return None
    step = min(steps)
    rough = [_lattice_of(atoms, step) for atoms in (first, second)]
    if rough[0] is None or rough[1] is None:
        return None
    step = _refined_step(first if rough[0][0][-1] >= rough[1][0][-1] else second, step)
    found = [_lattice_of(atoms, step) for atoms in (first, second)]
    return None if None in found else (step, found[0], found[1])


def _refined_step(atoms: LossAtoms, step: float) -> float:
    """The lattice step as (last loss - first loss) / (index span): each loss's rounding divided by the span,
    where the smallest spacing carries it whole (over a power's thousands of steps, that bias would move
    the composed losses by thousands of roundings)."""
    span = float(np.rint((atoms.losses[-1] - atoms.losses[0]) / step)) if atoms.size > 1 else 0.0
    return float(atoms.losses[-1] - atoms.losses[0]) / span if span >= 1 else step


def _lattice_grid(first: LossAtoms, second: LossAtoms, step: float, size: int, deviations: tuple[float, float]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The losses l1_0 + l2_0 + step K (K = 0 .. size - 1) of a lattice convolution of ``first`` and ``second``
    (each starting at its smallest loss), and bounds on their errors: both factors' largest loss errors, the
    ``deviations`` of their atoms from the lattice, and the rounding of forming the origin and each loss, times
    PAD."""
    origin = float(first.losses[0]) + float(second.losses[0])
    shifts = step * np.arange(size, dtype=float)
    losses = origin + shifts
    largest = (first.largest_error + second.largest_error + deviations[0] + deviations[1]
               + U * (abs(float(first.losses[0])) + abs(float(second.losses[0])) + abs(origin)))
    return losses, (largest + 2 * U * (np.abs(shifts) + np.abs(losses))) * PAD


def _lattice_convolve(first: LossAtoms, second: LossAtoms, lattice, threshold: float, log_cutoff: float,
                      log_dropped: float) -> LossAtoms:
    """first * second for factors on one lattice l = l0 + step k: the masses convolved densely.

    Each factor's log-masses are split into bands of width BAND below its largest; a band is
    scaled by its top (values in (e^-BAND, 1]), so the product of two band members never
    underflows, and every pair of bands is convolved directly (np.convolve: sums of positive
    products, relative error at most (g + 1) u for g terms) and added in log space.  Pairs of
    bands whose products all lie below the cutoff are dropped (their mass into ``log_dropped``).
    Positions are l0_1 + l0_2 + step K, with the factors' largest errors and lattice deviations.
    """
    step, (k1, deviation1), (k2, deviation2) = lattice
    n1, n2 = int(k1[-1]) + 1, int(k2[-1]) + 1
    size = n1 + n2 - 1
    if size > 2 * max_atoms():
        raise CompositionTooLargeError(
            f"exact discrete composition spans {size} lattice points (limit {max_atoms()} atoms)")
    budget.reserve(8.0 * 8 * size + 8.0 * 4 * (n1 + n2), "the dense lattice convolution of privacy-loss atoms")
    if all(float(np.min(atoms.log_masses)) >= float(np.max(atoms.log_masses)) - LATTICE_RANGE
           for atoms in (first, second)):
        return _linear_lattice_convolve(first, second, lattice, threshold, log_cutoff, log_dropped)
    dense = []
    for atoms, k, n in ((first, k1, n1), (second, k2, n2)):
        log_w = np.full(n, -np.inf)
        log_w[k] = atoms.log_masses
        top = float(atoms.log_masses.max())
        band = np.full(n, -1, dtype=np.int64)
        band[k] = np.floor((top - atoms.log_masses) / BAND).astype(np.int64)
        dense.append((log_w, top, band, float(log_sum_exp(atoms.log_masses))))
    out = np.full(size, -np.inf)
    pairs_of_bands, terms = 0, min(first.size, second.size)
    with np.errstate(divide="ignore", under="ignore", over="ignore"):  # exp outside a band is discarded
        for b1 in range(int(dense[0][2].max()) + 1):
            in1 = dense[0][2] == b1
            if not np.any(in1):
                continue
            offset1 = dense[0][1] - BAND * b1
            values1 = np.where(in1, np.exp(dense[0][0] - offset1), 0.0)
            for b2 in range(int(dense[1][2].max()) + 1):
                in2 = dense[1][2] == b2
                if not np.any(in2):
                    continue
                budget.check("convolving privacy-loss atoms on a lattice")
                offset2 = dense[1][1] - BAND * b2
                log_bound = offset1 + offset2 + math.log(terms)  # every output of this pair of bands is below it
                if log_cutoff > -math.inf and log_bound < log_cutoff - 1:
                    lost = float(log_sum_exp(dense[0][0][in1])) + float(log_sum_exp(dense[1][0][in2])) + 1e-9
                    log_dropped = float(np.logaddexp(log_dropped, lost))
                    continue
                values2 = np.where(in2, np.exp(dense[1][0] - offset2), 0.0)
                _spend(n1 * n2 / LATTICE_SPEEDUP)
                out = np.logaddexp(out, np.log(np.convolve(values1, values2)) + (offset1 + offset2))
                pairs_of_bands += 1
    losses, loss_errors = _lattice_grid(first, second, step, size, (deviation1, deviation2))
    keep = out > -np.inf
    if threshold > -math.inf:
        keep &= losses + loss_errors > threshold
    losses, loss_errors, log_masses = losses[keep], loss_errors[keep], out[keep]
    (alpha1, beta1), (alpha2, beta2) = first.log_mass_error, second.log_mass_error
    beta = max(beta1, beta2)
    positive = max(float(first.log_masses.max()), 0.0) + max(float(second.log_masses.max()), 0.0)
    # Factors' errors (a sum of g products: alpha + beta (|log sum| + log g), as when merging), the scaling
    # (exponents within BAND of 0: BAND u for each factor), the direct sums ((g + 1) u), the logarithm of a
    # value above e^(-2 BAND) / g (2 BAND + log g units), the offsets and the additions across pairs of
    # bands (u (|log mass| + 2) each).
    alpha = (alpha1 + alpha2 + 2 * beta * positive + beta * math.log(terms)
             + U * (4 * BAND + terms + math.log(terms) + 8 + 3 * pairs_of_bands)) * PAD
    return _merged(losses, loss_errors, log_masses, alpha, beta + U * (2 + pairs_of_bands), log_cutoff, log_dropped)


#: Exponent of two at which the dense power keeps each intermediate's largest value: products of two stay
#: below 2^(2 LATTICE_EXPONENT + log2 g) < 2^1024, and values down to 2^-1022 (e^-708) keep full precision.
LATTICE_EXPONENT = 490
#: The dense power starts from e^(log w - top); a one-use law whose masses span more than this (nats below its
#: largest) is composed by :func:`_lattice_convolve` instead.
LATTICE_RANGE = 700.0
#: Smallest positive normal double; the absolute error of any product that underflows is below it.
SMALLEST_NORMAL = 2.0 ** -1022
#: ln 2 (rounded): the dense power's exponents of two are turned into nats with it once, at the end.
LN2 = math.log(2.0)


@dataclass
class _LatticeVector:
    """Masses on a lattice, in linear scale: mass at index ``origin + i`` is ``values[i] 2^exponent
    e^(uses top)``, each within a relative ``rho`` of the exact power of the rounded one-use masses."""

    values: np.ndarray
    origin: int
    exponent: int
    uses: int
    rho: float
    log_dropped: float
    #: The one-use log-mass error (alpha, beta) and log(size) + 2 max(log w, 0): a mass of ``uses`` uses is
    #: within uses alpha + beta (|log m| + uses that) of the exact power (see :func:`_lattice_power`).
    base_error: tuple[float, float, float]


def _lattice_power(atoms: LossAtoms, count: int, threshold: float, log_cutoff: float) -> LossAtoms | None:
    """The ``count``-fold power of a law on a lattice l0 + step k, by binary powering of its mass vector in
    linear scale (direct np.convolve, no logarithms between steps); None if the atoms are not on a dense
    lattice or span more than LATTICE_RANGE nats.

    Each step convolves two vectors of nonnegative values, so each output is a sum of g nonnegative products
    and its relative error is at most (g + 1) u (any summation order), plus g 2^-1022 absolute from products
    that underflow; the output is then rescaled by an exact power of two.  Outputs below the larger of
    2 g 2^-1022 / u (where that absolute error would exceed u/2 relative), the smallest value that stays
    normal after rescaling, and the mass cutoff are dropped, their mass (with its error) counted in
    ``log_dropped``; outputs that cannot reach the threshold (given what the remaining uses add at most) are
    cut without counting, as in :meth:`LossAtoms.power`.  Relative errors add along the powering.  The
    one-use log-mass errors (alpha, beta) carry to the composition as count alpha + beta (|log m| +
    (count - 1) log(size) + 2 count max(log w, 0)) (each path's product of count masses; the beta terms
    weighted by the paths' shares, at most log(number of paths) above |log m|).
    """
    if atoms.size < 3:
        return None
    step = float(np.min(np.diff(atoms.losses)))
    if not step > 0:
        return None
    if _lattice_of(atoms, step) is None:
        return None
    step = _refined_step(atoms, step)
    found = _lattice_of(atoms, step)
    if found is None:
        return None
    k, deviation = found
    top = float(np.max(atoms.log_masses))
    if float(np.min(atoms.log_masses)) < top - LATTICE_RANGE or not math.isfinite(top):
        return None
    span = int(k[-1]) + 1
    if count * (span - 1) + 1 > 64 * max_atoms():
        return None
    alpha, beta = atoms.log_mass_error
    left = _allowance.get()
    cost = _lattice_power_cost(atoms, k, count, log_cutoff)
    if left is not None and cost / LATTICE_SPEEDUP > ESTIMATE_SLACK * left[0]:
        raise CompositionTooLargeError(
            f"exact composition of {count} uses of a {atoms.size}-atom lattice law needs about {cost:.2g} "
            f"multiply-adds (allowance {LATTICE_SPEEDUP * left[0]:.2g})")
    one_top = atoms.top
    l0 = float(atoms.losses[0])
    # Position of index K of the uses-fold power: uses l0 + step K, within uses (largest error + deviation) and
    # the rounding of forming it (2 u (|uses l0| + |step K| + |loss|)).
    position_error = atoms.largest_error + deviation

    def cut(uses: int) -> float:
        return _rest_threshold(threshold, (count - uses) * one_top)

    start = np.zeros(span)
    start[k] = np.ldexp(np.exp(atoms.log_masses - top), LATTICE_EXPONENT)
    # exp of x = log w - top (one rounding, u |x|, and exp's own, 4 u): relative u (|x| + 4) per value.
    rho0 = U * (float(np.max(np.abs(atoms.log_masses - top))) + 4)
    base_error = (alpha, beta, math.log(atoms.size) + 2 * max(top, 0.0))
    base = _LatticeVector(start, 0, -LATTICE_EXPONENT, 1, rho0, atoms.log_dropped, base_error)
    base = _lattice_trim(base, l0, step, position_error, top, cut(1), -math.inf, 0.0)
    result: _LatticeVector | None = None
    remaining = count
    while remaining:
        budget.check(f"composing {count} uses of a {atoms.size}-atom privacy loss on its lattice")
        if remaining & 1:
            result = base if result is None else _lattice_product(result, base, l0, step, position_error, top,
                                                                  cut, log_cutoff)
        remaining >>= 1
        if remaining:
            base = _lattice_product(base, base, l0, step, position_error, top, cut, log_cutoff)
    if result is None:
        raise ValueError(f"count must be >= 1, got {count}")
    keep = np.flatnonzero(result.values > 0)
    indices = result.origin + keep
    with np.errstate(divide="ignore"):
        log_values = np.log(result.values[keep])
    scale = result.exponent * LN2
    offset = count * top
    log_masses = log_values + scale + offset
    shifts = step * indices.astype(float)
    losses = count * l0 + shifts
    loss_errors = (count * position_error + 2 * U * (abs(count * l0) + np.abs(shifts) + np.abs(losses))) * PAD
    positive = max(top, 0.0)
    # The one-use errors (see above), the accumulated relative rounding rho (at most -log(1 - rho) in log)
    # and the final logarithm and sums: u |log value|, 2 u |exponent ln 2| (ln 2 and the product rounded),
    # u |count top| and u for each of the two additions (the last one's u |log mass| is in beta).
    log_value_size = float(np.max(np.abs(log_values))) if log_values.size else 0.0
    new_alpha = (count * alpha + beta * ((count - 1) * math.log(atoms.size) + 2 * count * positive)
                 - math.log1p(-result.rho)
                 + U * (log_value_size + 2 * abs(scale) + abs(offset) + abs(scale + offset) + 4)) * PAD
    new_beta = beta + U
    if threshold > -math.inf:
        reaches = losses + loss_errors > threshold
        losses, loss_errors, log_masses = losses[reaches], loss_errors[reaches], log_masses[reaches]
    return _merged(losses, loss_errors, log_masses, new_alpha, new_beta, log_cutoff, result.log_dropped)


def _lattice_power_cost(atoms: LossAtoms, k: np.ndarray, count: int, log_cutoff: float) -> float:
    """A rough number of multiply-adds of :func:`_lattice_power`: binary powering squares vectors of about
    min(e (span - 1) + 1, 2 sqrt(2 (10 - cutoff) e variance)) values at e = 2, 4, ... uses (a sub-Gaussian
    width in lattice steps, as :func:`estimated_atoms`), so about twice the last square."""
    _, weights = normalize(atoms.log_masses)
    index = k.astype(float)
    variance = float(np.dot(weights, (index - float(np.dot(weights, index))) ** 2))
    reach = max(-log_cutoff, 1.0) + 10.0 if log_cutoff > -math.inf else math.inf
    uses = 1 << max(count.bit_length() - 1, 0)
    width = min(uses * float(k[-1]) + 1, 2 * math.sqrt(2 * reach * uses * variance) + 1)
    return 2 * width * width


def _lattice_trim(vector: _LatticeVector, l0: float, step: float, position_error: float, top: float,
                  cut: float, log_cutoff: float, floor: float) -> _LatticeVector:
    """Zero the values below ``floor`` or whose mass (raised by its error) is below e^``log_cutoff``,
    counting their mass in ``log_dropped``; drop the values whose loss cannot exceed ``cut``; trim zeros."""
    values = vector.values
    log_scale = vector.exponent * LN2 + vector.uses * top
    dropped = values < floor
    if log_cutoff > -math.inf:
        # mass <= value 2^exponent e^(uses top) (1 + rho) (with a 1e-6 margin for the rounding of the test)
        limit = log_cutoff - log_scale - math.log1p(vector.rho) - 1e-6
        dropped |= values < math.exp(min(limit, 700.0))
    dropped &= values > 0
    log_dropped = vector.log_dropped
    if np.any(dropped):
        # each dropped value is within (1 + rho) of the true mass, and counts whole (with the floor's absolute
        # error bound, at most u/2 of the floor)
        how_many = int(np.count_nonzero(dropped))
        lost = float(np.sum(values[dropped])) * (1 + 2 * vector.rho + how_many * U) + how_many * floor
        if lost > 0:
            log_lost = math.log(lost) + log_scale
            alpha, beta, per_use = vector.base_error
            log_lost += (vector.uses * (alpha + beta * per_use) + beta * abs(log_lost)) * PAD + 1e-9
            log_dropped = float(np.logaddexp(log_dropped, log_lost))
        values = np.where(dropped, 0.0, values)
    origin = vector.origin
    if cut > -math.inf:
        indices = origin + np.arange(values.size)
        losses = vector.uses * l0 + step * indices
        reach = losses + (vector.uses * position_error + 2 * U * (abs(vector.uses * l0) + np.abs(losses)
                                                                   + step * np.abs(indices))) * PAD
        values = np.where(reach > cut, values, 0.0)
    nonzero = np.flatnonzero(values)
    if nonzero.size == 0:
        return _LatticeVector(np.zeros(1), origin, vector.exponent, vector.uses, vector.rho, log_dropped,
                              vector.base_error)
    first, last = int(nonzero[0]), int(nonzero[-1])
    return _LatticeVector(values[first:last + 1], origin + first, vector.exponent, vector.uses, vector.rho,
                          log_dropped, vector.base_error)


def _dense_convolve(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, int, int, float]:
    """(values, g, shift, floor): np.convolve of two vectors of zeros and normal doubles at most
    2^LATTICE_EXPONENT; g bounds the nonzero products per output (relative error (g + 1) u, any summation
    order, plus at most g 2^-1022 absolute from products that underflow); 2^shift brings the largest
    output to 2^LATTICE_EXPONENT; outputs below ``floor`` (2 g 2^-1022 / u, where that absolute error
    would exceed u/2 of them, or where they would leave the normal range after the shift) are to be
    dropped."""
    size = first.size + second.size - 1
    if size > 64 * max_atoms():
        raise CompositionTooLargeError(
            f"exact discrete composition spans {size} lattice points (limit {max_atoms()} atoms)")
    budget.reserve(8.0 * 4 * size, "the dense lattice convolution of privacy-loss atoms")
    _spend(first.size * second.size / LATTICE_SPEEDUP)
    terms = min(int(np.count_nonzero(first)), int(np.count_nonzero(second)))
    with np.errstate(under="ignore"):
        values = direct_convolve(first, second, "convolving privacy-loss atoms on their lattice")
    largest = float(np.max(values))
    shift = LATTICE_EXPONENT - math.frexp(largest)[1] if largest > 0 else 0
    floor = max(2 * terms * SMALLEST_NORMAL / U, math.ldexp(SMALLEST_NORMAL, -shift))
    return values, terms, shift, floor


def _lattice_product(first: _LatticeVector, second: _LatticeVector, l0: float, step: float,
                     position_error: float, top: float, cut: Callable[[int], float],
                     log_cutoff: float) -> _LatticeVector:
    """first * second on the lattice (see :func:`_lattice_power`)."""
    values, terms, shift, floor = _dense_convolve(first.values, second.values)
    uses = first.uses + second.uses
    rho = (first.rho + second.rho + first.rho * second.rho + (terms + 2) * U) * PAD
    log_dropped = float(np.logaddexp(first.log_dropped, second.log_dropped)) + 1e-9
    if not np.any(values > 0):
        return _LatticeVector(np.zeros(1), first.origin + second.origin, 0, uses, rho, log_dropped,
                              first.base_error)
    vector = _LatticeVector(values, first.origin + second.origin, first.exponent + second.exponent, uses, rho,
                            log_dropped, first.base_error)
    vector = _lattice_trim(vector, l0, step, position_error, top, cut(uses), log_cutoff, floor)
    return _LatticeVector(np.ldexp(vector.values, shift), vector.origin, vector.exponent - shift, uses, rho,
                          vector.log_dropped, first.base_error)



def _linear_lattice_convolve(first: LossAtoms, second: LossAtoms, lattice, threshold: float, log_cutoff: float,
                             log_dropped: float) -> LossAtoms:
    """first * second on one lattice, each factor's masses spanning at most LATTICE_RANGE nats: each factor
    as e^(log w - top) 2^LATTICE_EXPONENT (normal doubles), one :func:`_dense_convolve`, outputs below its
    floor dropped (mass counted), one logarithm.  Errors as in :func:`_lattice_convolve`, with the scaling's
    u (|log w - top| + 4) per factor, (g + 3) u for the sums and the underflow, and the logarithm and
    offsets' u (|log value| + |offsets| + 2)."""
    step, (k1, deviation1), (k2, deviation2) = lattice
    vectors, tops, spreads = [], [], []
    for atoms, k in ((first, k1), (second, k2)):
        top = float(np.max(atoms.log_masses))
        values = np.zeros(int(k[-1]) + 1)
        values[k] = np.ldexp(np.exp(atoms.log_masses - top), LATTICE_EXPONENT)
        vectors.append(values)
        tops.append(top)
        spreads.append(float(np.max(np.abs(atoms.log_masses - top))))
    values, terms, _, floor = _dense_convolve(vectors[0], vectors[1])
    rho = (terms + 3 + spreads[0] + spreads[1] + 8) * U
    scale = -2 * LATTICE_EXPONENT * LN2
    offset = tops[0] + tops[1]
    light = (values > 0) & (values < floor)
    if np.any(light):
        lost = (float(np.sum(values[light])) * (1 + 2 * rho) + int(np.count_nonzero(light)) * floor)
        log_dropped = float(np.logaddexp(log_dropped, math.log(lost) + scale + offset + 1e-9))
    keep = values >= floor
    with np.errstate(divide="ignore"):
        log_values = np.where(keep, np.log(np.where(keep, values, 1.0)), -np.inf)
    out = log_values + scale + offset
    losses, loss_errors = _lattice_grid(first, second, step, values.size, (deviation1, deviation2))
    if threshold > -math.inf:
        keep &= losses + loss_errors > threshold
    losses, loss_errors, log_masses = losses[keep], loss_errors[keep], out[keep]
    (alpha1, beta1), (alpha2, beta2) = first.log_mass_error, second.log_mass_error
    beta = max(beta1, beta2)
    positive = max(tops[0], 0.0) + max(tops[1], 0.0)
    log_value_size = float(np.max(np.abs(log_values[keep]))) if np.any(keep) else 0.0
    # Factors' errors (as in _lattice_convolve), rho, and the logarithm and the two offsets' additions
    # (2 u |scale| for ln 2 and the product rounded, u |offset| for the tops' sum, u for the rest; the last
    # addition's u |log mass| is in beta).
    alpha = (alpha1 + alpha2 + 2 * beta * positive + beta * math.log(max(terms, 1)) - math.log1p(-rho)
             + U * (log_value_size + 2 * abs(scale) + 2 * abs(offset) + 4)) * PAD
    return _merged(losses, loss_errors, log_masses, alpha, beta + U, log_cutoff, log_dropped)


#: Atom pairs (or their equivalent) one composition may form in all before it is refused (about 3 s).
MAX_TOTAL_PAIRS = 30_000_000
#: Pairs of atoms not on a common lattice, per allowed distinct atom, beyond which a convolution is refused
#: before it is formed (its sums would hardly coincide).
DISTINCT_SUMS = 1
#: Pairs sampled to estimate how many survive the mass cutoff above a threshold.
PAIR_SAMPLE = 4096
_allowance: contextvars.ContextVar[list | None] = contextvars.ContextVar("afa_discrete_pairs", default=None)


def _spend(pairs: float) -> None:
    """Count ``pairs`` against the current composition's allowance (see :func:`pair_allowance`)."""
    left = _allowance.get()
    if left is not None:
        left[0] -= pairs
        if left[0] < 0:
            raise CompositionTooLargeError(
                f"exact discrete composition needs more than {MAX_TOTAL_PAIRS:.0e} atom pairs in all; compose "
                "fewer discrete mechanisms exactly, or use method='contour' or 'pld'")


class pair_allowance:  # noqa: N801 (a context manager used as a function)
    """Within the body, convolutions may form ``share`` times MAX_TOTAL_PAIRS atom pairs in all
    (CompositionTooLargeError beyond); inside an outer allowance, the outer one keeps counting."""

    def __init__(self, share: float = 1.0):
        self.share = share
        self.token: contextvars.Token | None = None

    def __enter__(self) -> None:
        if _allowance.get() is None:
            self.token = _allowance.set([float(self.share * MAX_TOTAL_PAIRS)])

    def __exit__(self, *exception) -> None:
        if self.token is not None:
            _allowance.reset(self.token)
            self.token = None


# ---------------------------------------------------------------------------
# delta(eps) with its error


#: Atoms up to which one eps's terms are formed in Python floats (math, math.fsum) rather than numpy: below
#: this a numpy call costs more than a loop over the atoms.
SMALL_TAIL = 12
#: Top atoms among which eps(delta)'s root is searched first in Python floats (:func:`_window_crossing`).
WINDOW = 24


def _log_sum(values: list[float]) -> float:
    """log sum exp(values) of a list of floats by math.fsum (-inf for none, or all -inf)."""
    top = max(values, default=-math.inf)
    if not math.isfinite(top):
        return top
    return top + math.log(math.fsum([math.exp(value - top) for value in values]))


def _evaluate_point(atoms: LossAtoms, epsilon: float) -> tuple[float, float, float]:
    """(value, error, slope) of :func:`_evaluate` at one eps, as floats: the same terms and the same error
    bound, over the atoms above eps - (largest loss error) only (a suffix: the atoms are sorted), formed in
    Python floats when they are few (SMALL_TAIL; sums by math.fsum, exact to rounding) and by 1-d numpy
    otherwise."""
    dropped = max(math.exp(atoms.log_dropped), 5e-324) if atoms.log_dropped > -math.inf else 0.0
    if atoms.size == 0:
        return 0.0, dropped, 0.0
    losses = atoms.losses
    k = int(losses.searchsorted(epsilon - atoms.largest_error * PAD, side="right"))
    if k >= atoms.size:
        return 0.0, dropped, 0.0
    budget.check("evaluating delta(eps) over the atoms")
    above = int(losses.searchsorted(epsilon, side="right")) - k  # atoms from here on lie above eps
    alpha, beta = atoms.log_mass_error
    if atoms.size - k <= SMALL_TAIL:
        value, relative, position, slope, size = _point_terms_python(
            losses[k:].tolist(), atoms.log_masses[k:].tolist(), atoms.loss_errors[k:].tolist(), epsilon, above,
            alpha, beta)
    else:
        value, relative, position, slope, size = _point_terms_numpy(
            losses[k:], atoms.log_masses[k:], atoms.loss_errors[k:], epsilon, above, alpha, beta,
            atoms.largest_error)
    error = (relative * value + position) * PAD
    if size > 0 and error == 0:  # a contribution below the smallest subnormal still counts
        error = 5e-324
    return value, dropped + error, slope


def _point_terms_python(losses: list[float], log_masses: list[float], errors: list[float], epsilon: float,
                        above: int, alpha: float, beta: float) -> tuple[float, float, float, float, int]:
    """(value, relative error, position error, slope, atoms above eps) of :func:`_evaluate`'s terms at one eps,
    in Python floats, for atoms sorted by loss of which those from index ``above`` on lie above eps."""
    exp, log = math.exp, math.log
    factors, terms, slopes, near = [], [], [], []
    for i, (loss, log_mass, error) in enumerate(zip(losses, log_masses, errors)):
        gap = epsilon - loss
        mass_error = alpha + beta * abs(log_mass)
        if i >= above:  # (gap < 0)
            factor = log(-math.expm1(gap))
            factors.append(factor)
            terms.append(log_mass + factor)
            slopes.append(log_mass + gap)
        if gap < error and error > 0:  # (an exact atom moves nothing)
            log_expm1 = error if error > 40 else log(math.expm1(error))
            near.append(log_mass + mass_error + min(min(gap, 0.0) + log_expm1, 0.0))
    top = max(terms, default=-math.inf)
    safe_top = top if math.isfinite(top) else 0.0
    scaled = [exp(term - safe_top) for term in terms]
    total = math.fsum(scaled)
    size = len(terms)
    if total > 0:
        share = math.fsum([weight * (U * (6 + abs(factor) + abs(term) + abs(term - safe_top))
                                     + alpha + beta * abs(log_mass))
                           for weight, factor, term, log_mass in zip(scaled, factors, terms, log_masses[above:])]
                          ) / total
        log_value = safe_top + log(total)
        value = exp(log_value)
        relative = share + U * (2 * math.log2(size + 1) + 32 + 2 * abs(log_value) + 2 * abs(safe_top))
    else:
        value = 0.0
        relative = U * (2 * math.log2(size + 1) + 32 + 2 * abs(safe_top))
    return value, relative, exp(_log_sum(near)), exp(_log_sum(slopes)), size


def _point_terms_numpy(losses: np.ndarray, log_masses: np.ndarray, errors: np.ndarray, epsilon: float, above: int,
                       alpha: float, beta: float, largest_error: float) -> tuple[float, float, float, float, int]:
    """:func:`_point_terms_python` in 1-d numpy (the terms' sums pairwise, as in :func:`_evaluate`)."""
    gaps = epsilon - losses
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        log_factors = np.log(-np.expm1(gaps[above:]))
        terms = log_masses[above:] + log_factors
        top = float(terms.max()) if terms.size else -math.inf
        safe_top = top if math.isfinite(top) else 0.0
        shifted = terms - safe_top
        scaled = np.exp(shifted)
        total = float(scaled.sum())
        mass_errors = np.abs(log_masses)
        mass_errors *= beta
        mass_errors += alpha
        rounding = np.abs(log_factors)
        rounding += np.abs(terms)
        rounding += np.abs(shifted)
        rounding += 6.0
        rounding *= U
        rounding += mass_errors[above:]
        share = float(scaled @ rounding) / total if total > 0 else 0.0
        log_value = safe_top + math.log(total) if total > 0 else -math.inf
        value = math.exp(log_value)
        size = int(terms.size)
        relative = share + U * (2 * math.log2(size + 1) + 32 + 2 * abs(log_value if total > 0 else 0.0)
                                + 2 * abs(safe_top))
        log_expm1 = np.log(np.expm1(errors)) if largest_error <= 40 else \
            np.where(errors > 40, errors, np.log(np.expm1(np.minimum(errors, 40.0))))
        shift = np.minimum(np.minimum(gaps, 0.0) + log_expm1, 0.0)
        near = np.where(gaps < errors, log_masses + mass_errors + shift, -np.inf)
        position = math.exp(float(log_sum_exp(near)))
        slope = math.exp(float(log_sum_exp(log_masses[above:] + gaps[above:])))
    return value, relative, position, slope, size


def _evaluate(atoms: LossAtoms, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value, error, slope) of the finite part sum_i w_i (1 - e^{eps - l_i})_+ at each eps (1-d).

    ``error`` bounds |value - truth|: the mass of dropped atoms, the rounding of the evaluation (per term:
    the subtraction eps - l and expm1, the logarithm, the scaling by the largest
    term, the exponential; then the pairwise sum and the final exponential), the
    masses' errors weighted by each term's share, and the position errors:
    moving atom l by at most e changes its term by at most
    w min(1, e^{eps - l} expm1(e)), for every atom with l + e > eps.  ``slope`` is
    -d value / d eps = sum_{l > eps} w e^{eps - l}.
    """
    if epsilons.size == 1:
        at_point = _evaluate_point(atoms, float(epsilons[0]))
        return np.array(at_point[:1]), np.array(at_point[1:2]), np.array(at_point[2:])
    out = np.zeros((3, epsilons.size))
    if atoms.log_dropped > -math.inf:
        out[1] = max(math.exp(atoms.log_dropped), 5e-324)
    if atoms.size == 0 or epsilons.size == 0:
        return out[0], out[1], out[2]
    losses, log_masses, errors = atoms.losses, atoms.log_masses, atoms.loss_errors
    alpha, beta = atoms.log_mass_error
    largest_error = atoms.largest_error * PAD
    order = np.argsort(epsilons)
    sorted_eps = epsilons[order]
    first = np.searchsorted(losses, sorted_eps - largest_error, side="right")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        start = 0
        while start < sorted_eps.size:
            budget.check("evaluating delta(eps) over the atoms")
            k = int(first[start])
            if k >= losses.size:  # no atom reaches these eps (nor any larger one): all zero
                break
            width = losses.size - k
            stop = min(sorted_eps.size, start + max(1, BLOCK // width))
            budget.reserve(12 * 8.0 * width * (stop - start), "the (eps x atoms) terms of delta(eps)")
            eps = sorted_eps[start:stop, None]
            c, lw, e = losses[None, k:], log_masses[None, k:], errors[None, k:]
            gap = eps - c
            above = gap < 0
            below_zero = np.minimum(gap, 0.0)
            log_factor = np.log(-np.expm1(below_zero))  # -inf where the atom is not above eps
            terms = lw + log_factor
            top = np.max(terms, axis=1, keepdims=True)
            safe_top = np.where(np.isfinite(top), top, 0.0)
            scaled = np.exp(terms - safe_top)
            total = scaled.sum(axis=1)
            # (where an atom is not above eps its scaled term is 0: its rounding need only be finite)
            finite_factor = np.where(above, log_factor, 0.0)
            finite_terms = lw + finite_factor
            mass_error = alpha + beta * np.abs(lw)
            rounding = U * (6 + np.abs(finite_factor) + np.abs(finite_terms)
                            + np.abs(finite_terms - safe_top)) + mass_error
            with np.errstate(invalid="ignore"):
                share = np.where(total > 0, (scaled * rounding).sum(axis=1) / total, 0.0)
            log_value = safe_top[:, 0] + np.log(total)
            value = np.exp(log_value)  # 0 where total is
            size = above.sum(axis=1)
            relative = share + U * (2 * np.log2(size + 1) + 32 + 2 * np.abs(np.where(total > 0, log_value, 0.0))
                                    + 2 * np.abs(safe_top[:, 0]))
            # Position errors: every atom with l + e > eps, its mass up to e^{alpha + beta |log w|} larger; a
            # term is in [0, w] whatever the position (log expm1(e) = e beyond e = 40, without overflow).
            log_expm1 = np.where(e > 40, e, np.log(np.expm1(np.minimum(e, 40.0))))
            shift = np.minimum(below_zero + log_expm1, 0.0)
            near = np.where(gap < e, lw + mass_error + shift, -np.inf)
            position = np.exp(log_sum_exp(near, axis=1))
            slope = np.exp(log_sum_exp(np.where(above, lw + gap, -np.inf), axis=1))
            error = (relative * value + position) * PAD
            # A contribution below the smallest subnormal still counts: never state 0 error above 0.
            error = np.where((size > 0) & (error == 0), 5e-324, error)
            rows = order[start:stop]
            out[0, rows], out[2, rows] = value, slope
            out[1, rows] += error
            start = stop
    return out[0], out[1], out[2]


def hockey_stick_with_error(atoms: FiniteLoss, epsilons, inf_mass: float = 0.0,
                            inf_mass_error: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(delta(eps), a bound on its error) for each eps: inf_mass + sum_j w_j (1 - e^{eps - l_j})_+.

    Parameters
    ----------
    atoms : LossAtoms or afa.engines.two_factor.TwoFactorSum
        The finite part (with its error bounds): anything with ``evaluate(epsilons)`` returning
        (value, error, slope).
    epsilons : array_like
        Where to evaluate (any shape).
    inf_mass : float
        The mass at +infinity, added to every value.
    inf_mass_error : float or None
        A bound on the error of ``inf_mass``; by default BASE_ULPS units of it.
    """
    epsilons = np.asarray(epsilons, dtype=float)
    value, error, _ = atoms.evaluate(epsilons.ravel())
    if inf_mass_error is None:
        inf_mass_error = default_mass_error(inf_mass)
    return (inf_mass + value).reshape(epsilons.shape), (error + inf_mass_error).reshape(epsilons.shape)


def log_hockey_stick(losses: np.ndarray, log_masses: np.ndarray, epsilons) -> np.ndarray:
    """log sum_j w_j (1 - e^{eps - l_j})_+ for each eps (log space, -inf where zero).

    This is the finite part of delta(eps) (Zhu, Dong & Wang 2022, Lemma 37) of
    exact atoms ``losses`` with log-probabilities ``log_masses`` (any order).
    """
    epsilons = np.asarray(epsilons, dtype=float)
    flat = epsilons.ravel()
    out = np.full(flat.shape, -np.inf)
    chunk = max(1, 4_000_000 // max(losses.size, 1))
    for start in range(0, flat.size, chunk):
        budget.check("evaluating delta(eps) over the atoms")
        gap = np.minimum(flat[start:start + chunk, None] - losses[None, :], 0.0)
        with np.errstate(divide="ignore"):
            log_terms = log_masses + np.log(-np.expm1(gap))
        out[start:start + chunk] = log_sum_exp(log_terms, axis=1)
    return out.reshape(epsilons.shape)


def hockey_stick(pld: LossAtoms, epsilons) -> np.ndarray:
    """sum_j w_j (1 - e^{eps - l_j})_+ over the atoms of ``pld``, for each eps (1-d array)."""
    return np.exp(log_hockey_stick(pld.losses, pld.log_masses, np.atleast_1d(np.asarray(epsilons, dtype=float))))


# ---------------------------------------------------------------------------
# eps(delta)

#: Evaluations allowed each stage of the eps(delta) search.
MAX_STEPS = 200
#: A verified bound's Newton step is lengthened by this fraction: an error bound moves by a few parts per million
#: between nearby points, so a step aimed exactly at value +- error = target falls short about half the time
#: (and the next step doubles); the margin widens the bound by 1e-4 of the distance stepped.
STEP_MARGIN = 1e-4


def verified_epsilon_bounds(evaluate: Callable[[float], tuple[float, float, float]], target: float, root: float,
                            floor: float, ceiling: float, tighten: bool = False,
                            value_and_error: Callable[[float], tuple[float, float]] | None = None,
                            evaluate_many: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]
                            | None = None, at_root: tuple[float, float, float] | None = None
                            ) -> tuple[float, float]:
    """(lower, upper) on the smallest eps >= ``floor`` with delta(eps) <= ``target``, each verified.

    ``evaluate(eps)`` returns (delta estimate, a bound on its error, -d delta / d eps) of a
    non-increasing delta; ``root`` is the estimate's own crossing.  ``upper`` is an eps
    whose delta + error is <= target (so the true delta is), found by stepping up from the
    root by Newton steps on delta + error, doubling when a step falls short; +inf if none
    exists below ``ceiling`` (beyond which delta + error no longer changes).  ``lower`` is
    an eps whose delta - error is > target (so the true delta is, and by monotonicity at
    every smaller eps), found the same way downwards (a step that would pass the floor halves the
    distance to it instead); ``floor`` if that fails (the caller guarantees the floor is a valid
    lower bound).  A step is Newton's when the slope gives a finite one, else twice the last.  With
    ``tighten`` (for slopes that are only estimates), each bound is then moved back towards the last
    point that failed by bisection (:func:`_tighten`); ``value_and_error(eps)``, when given, returns the first
    two of ``evaluate`` without the slope, for the bisection's checks.  ``evaluate_many``, when given, is
    ``evaluate`` over an array of points (value, error and slope arrays): the first step of each search, both
    known once the root is evaluated, is then evaluated in one call.  ``at_root``, when given, is
    ``evaluate(root)`` already formed.
    """
    tiny = 8 * U  # four units in the last place of 1

    def check(x: float) -> tuple[float, float]:
        if value_and_error is not None:
            return value_and_error(x)
        value, error, _ = evaluate(x)
        return value, error

    def holds_upper(x: float) -> bool:
        value, error = check(x)
        return value + error <= target

    def holds_lower(x: float) -> bool:
        value, error = check(x)
        return value - error > target

    def step_up(x: float, step: float, value: float, error: float, slope: float) -> tuple[float, float]:
        """The next point of the upward search from x, where delta + error exceeds the target, and its step."""
        # aimed a sixteenth of the error beyond, room for the next value's rounding (Python floats: an overflow is inf)
        newton = (float(value + error - target) + float(error) / 16) / float(slope) * (1 + STEP_MARGIN) \
            if slope > 0 else 0.0
        step = max(newton if math.isfinite(newton) else 0.0, 2 * step, tiny * max(abs(x), 1e-300))
        return (min(x + step, ceiling) if math.isfinite(ceiling) else x + step), step

    def step_down(distance: float, failed: float, value: float, error: float, slope: float) -> tuple[float, float]:
        """The next point of the downward search (``distance`` below the root so far, ``failed`` the last
        point where delta - error did not exceed the target) and its distance; a point at or below the floor
        halves the way to it instead."""
        shortfall = target - (value - error)
        newton = ((float(shortfall) + float(error) / 16) / float(slope) * (1 + STEP_MARGIN)
                  if slope > 0 and shortfall >= 0 else 0.0)  # (likewise)
        newton = newton if math.isfinite(newton) else 0.0
        distance = max(distance + newton, 2 * distance, tiny * max(abs(root), 1e-300))
        x = root - distance
        if x <= floor:
            x = floor + (failed - floor) / 2
            distance = root - x
        return x, distance

    if at_root is None:
        at_root = evaluate(root)
    known: dict[float, tuple[float, float, float]] = {root: at_root}
    if evaluate_many is not None:
        # Both searches' first points follow from the root's evaluation alone: one call evaluates them.
        ahead = []
        if at_root[0] + at_root[1] > target and root < ceiling:
            ahead.append(step_up(root, 0.0, *at_root)[0])
        if root > floor:
            ahead.append(step_down(0.0, root, *at_root)[0])
        ahead = [x for x in ahead if math.isfinite(x) and x > floor]
        if ahead:
            values, errors, slopes = evaluate_many(np.array(ahead))
            known.update((x, (float(v), float(e), float(d))) for x, v, e, d in zip(ahead, values, errors, slopes))

    def evaluated(x: float) -> tuple[float, float, float]:
        answer = known.get(x)
        return answer if answer is not None else evaluate(x)

    # upper
    x, step, failed = root, 0.0, root
    upper = math.inf
    for attempt in range(MAX_STEPS):
        budget.check("bracketing eps(delta)")
        value, error, slope = evaluated(x)
        if value + error - target <= 0:
            upper = x
            break
        failed = x
        if x >= ceiling:
            break
        x, step = step_up(x, step, value, error, slope)
        if not math.isfinite(x):
            break
    if tighten and math.isfinite(upper) and upper > root:
        upper = _tighten(holds_upper, failed, upper, root, tiny)
    # lower
    if root <= floor:
        return floor, upper
    x, distance, failed = root, 0.0, root
    value, error, slope = at_root
    lower = floor
    for attempt in range(MAX_STEPS):
        budget.check("bracketing eps(delta)")
        x, distance = step_down(distance, failed, value, error, slope)
        if x <= floor or x >= failed:
            break
        value, error, slope = evaluated(x)
        if value - error > target:
            lower = x
            break
        failed = x
    if tighten and floor < lower < root:
        lower = _tighten(holds_lower, failed, lower, root, tiny)
    return lower, upper


def _tighten(holds: Callable[[float], bool], failed: float, good: float, root: float, tiny: float) -> float:
    """Move the verified end ``good`` towards ``failed`` (where the check failed) by bisection, keeping it
    verified, until the gap is within 1 % of the failed point's distance from the root, or a few ulps:
    an overshooting step (a slope estimated across a kink) then costs a few evaluations, not the bound."""
    for _ in range(64):
        if abs(good - failed) <= max(0.01 * abs(failed - root), tiny * max(abs(good), 1e-300)):
            break
        budget.check("bracketing eps(delta)")
        middle = failed + (good - failed) / 2
        if middle in (failed, good):
            break
        if holds(middle):
            good = middle
        else:
            failed = middle
    return good


def _suffix_log_sums(values: np.ndarray) -> np.ndarray:
    """log sum_{i >= k} exp(values[i]) for k = 0..n (the last entry -inf)."""
    sums = np.empty(values.size + 1)
    sums[-1] = -np.inf
    if values.size:
        np.logaddexp.accumulate(values[::-1], out=sums[-2::-1])
    return sums


def _tail_value_and_slope(atoms: LossAtoms, x: float) -> tuple[float, float]:
    """(value, slope) of the finite part at x, without the error bound: sum over the atoms above x of
    w (1 - e^(x - l)) and of w e^(x - l) (in Python floats for a few atoms, SMALL_TAIL)."""
    budget.check("searching the atoms for eps(delta)")
    k = int(atoms.losses.searchsorted(x, side="right"))
    if k == atoms.size:
        return 0.0, 0.0
    if atoms.size - k <= SMALL_TAIL:
        masses = atoms.log_masses[k:].tolist()
        distances = [x - loss for loss in atoms.losses[k:].tolist()]
        log_total = _log_sum([log_mass + math.log(-math.expm1(gap)) for log_mass, gap in zip(masses, distances)])
        return math.exp(log_total), math.exp(_log_sum([log_mass + gap for log_mass, gap in zip(masses, distances)]))
    log_masses, gaps = atoms.log_masses[k:], x - atoms.losses[k:]
    log_value = log_sum_exp(log_masses + np.log(-np.expm1(gaps)))
    return float(np.exp(log_value)), float(np.exp(log_sum_exp(log_masses + gaps)))


def _log_value_from_sums(x: float, log_a: float, log_b: float) -> float:
    """log(A - B e^x) of atoms with log A = ``log_a`` (their mass) and log B = ``log_b`` (their sum of
    w e^-l): the log of the value at x when they all lie above x (-inf where it is not positive)."""
    gap = x + log_b - log_a
    return log_a + math.log(-math.expm1(gap)) if gap < 0 else -math.inf


def _window_crossing(atoms: LossAtoms, k0: int, floor: float, log_target: float
                     ) -> tuple[float, int, float, float] | None:
    """:func:`_value_root`'s search among the top WINDOW atoms above the floor (index k0 on), in Python
    floats, from the top down: (the log value at the floor, or at the atom below the crossing, which already
    exceeds the target; the index j of the interval (l_{j-1}, l_j] where the value clearly crosses; log A and
    log B over the atoms from j on), or None when the crossing does not lie clearly among them (or its
    interval is not clear, 1e-9 relative on each side, as in the full search), where the full search takes
    over."""
    start = max(k0, atoms.size - WINDOW)
    if start < atoms.size and float(atoms.log_masses[start:].max()) + math.log(atoms.size - start) < log_target:
        return None  # the window's mass is below the target: so is the value below it
    losses = atoms.losses[start:].tolist()
    log_masses = atoms.log_masses[start:].tolist()
    sum_a = sum_b = -math.inf  # log A and log B over the atoms above the one at hand
    below = -math.inf  # the log value at the atom above the one at hand (from the atoms above that)
    for i in range(len(losses) - 1, -1, -1):
        loss = losses[i]
        value = _log_value_from_sums(loss, sum_a, sum_b) if sum_a > -math.inf else -math.inf
        if value > log_target:
            if value > log_target + 1e-9 and below < log_target - 1e-9:
                return value, start + i + 1, sum_a, sum_b
            return None
        below = value
        sum_a, sum_b = _log_add(sum_a, log_masses[i]), _log_add(sum_b, log_masses[i] - loss)
    if start > k0:  # (the atom below the window)
        value = _log_value_from_sums(float(atoms.losses[start - 1]), sum_a, sum_b)
        if value > log_target + 1e-9 and below < log_target - 1e-9:
            return value, start, sum_a, sum_b
        return None
    # every atom above the floor: the value at the floor (checked by the caller)
    at_floor = _log_value_from_sums(floor, sum_a, sum_b) if sum_a > -math.inf else -math.inf
    return (at_floor, start, sum_a, sum_b) if below < log_target - 1e-9 or not losses else None


def _value_root(atoms: LossAtoms, target: float, floor: float) -> float:
    """The smallest eps >= floor at which the computed finite part is <= target (> 0), to a few ulps.

    The atoms above the floor are searched, from approximate suffix sums, for the interval
    (l_{j-1}, l_j] where the value crosses the target (the floor's value and the interval's ends checked
    by direct evaluation unless the sums put them clearly, 1e-9 relative, on their sides, and the interval
    moved until they hold); there the value is
    A - B e^eps with A, B the sums over atoms >= j, solved in closed form, then polished by Newton steps
    kept inside the interval (the value is concave on it, so a step from either side lands at or beyond
    the crossing, and by at most half the step squared: a step below the root of the resolution from a
    point inside the interval, where the slope is the interval's, is taken and the search ends).
    """
    def value_at(x: float) -> tuple[float, float]:
        """(value, slope) at x, without the error bound."""
        return _tail_value_and_slope(atoms, x)

    losses, log_masses = atoms.losses, atoms.log_masses
    k0 = int(losses.searchsorted(floor, side="right"))
    log_target = math.log(target)
    window = _window_crossing(atoms, k0, floor, log_target)
    if window is not None:  # the crossing lies clearly among the top atoms: their sums in Python floats
        at_floor, j, tail_log_a, tail_log_b = window
        if not at_floor > log_target + 1e-9 and value_at(floor)[0] <= target:
            return floor
    else:
        x, lw = losses[k0:], log_masses[k0:]
        suffix_a, suffix_b = _suffix_log_sums(lw), _suffix_log_sums(lw - x)
        at_floor = _log_value_from_sums(floor, float(suffix_a[0]), float(suffix_b[0]))
        if not at_floor > log_target + 1e-9 and value_at(floor)[0] <= target:
            return floor
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # the value at each atom l_i from the atoms above it (A - B e^l_i over the atoms > i)
            approximate = suffix_a[1:] + np.log(-np.expm1(np.minimum(x + suffix_b[1:] - suffix_a[1:], 0.0)))
        below = np.flatnonzero(~(approximate > log_target))
        j = k0 + (int(below[0]) if below.size else x.size - 1)
        clear = (below.size > 0 and approximate[j - k0] < log_target - 1e-9
                 and (j == k0 or approximate[j - k0 - 1] > log_target + 1e-9))
        # Unless clear, move j until value(l_j) <= target < value(l_{j-1}) (value(floor) > target is known).
        for _ in range(0 if clear else MAX_STEPS):
            budget.check("searching the atoms for eps(delta)")
            if value_at(float(losses[j]))[0] > target:
                j += 1
            elif j > k0 and value_at(float(losses[j - 1]))[0] <= target:
                j -= 1
            else:
                break
        tail_log_a, tail_log_b = float(suffix_a[j - k0]), float(suffix_b[j - k0])
    low: float = float(losses[j - 1]) if j > k0 else floor
    high: float = float(losses[j])
    atom = high  # at the atom itself the slope computed is the next interval's
    # (log_target < tail_log_a: the value at l_{j-1}, from the atoms from j on, exceeds the target)
    guess = tail_log_a + math.log(-math.expm1(min(log_target - tail_log_a, 0.0))) - tail_log_b
    point = min(max(guess, low), high) if math.isfinite(guess) else high
    for _ in range(MAX_STEPS):
        value, slope = value_at(point)
        if value > target:
            low = point
        else:
            high = point
        step = (value - target) / slope if slope > 0 else math.nan
        resolution = 8 * U * max(abs(high), 1e-300)
        if high - low <= resolution:
            break
        if abs(step) <= resolution:  # converged: the crossing is within a step of the point
            return point if value <= target else min(high, point + abs(step) + resolution)
        if step * step <= resolution and point < atom and low <= point + step <= high:
            return point + step  # one step from the crossing, to rounding
        proposal = point + step
        if not low < proposal < high:
            proposal = 0.5 * (low + high)
        if proposal in (low, high):
            break
        point = proposal
    return high


def epsilon_bounds_for_delta(pld: FiniteLoss, inf_mass: float, delta: float, floor: float = 0.0,
                             inf_mass_error: float | None = None, hint: float = math.inf) -> tuple[float, float, float]:
    """(estimate, lower, upper) of the smallest eps >= ``floor`` with delta(eps) <= ``delta``.

    delta(eps) = inf_mass + sum_j w_j (1 - e^{eps - l_j})_+.  The estimate is the crossing of
    the computed delta; ``lower`` and ``upper`` follow from delta, its error bound and its slope at the estimate
    where the atoms allow (``slope_bracket`` of :class:`LossAtoms`), else are verified against delta -/+ its
    error bound (:func:`verified_epsilon_bounds`), so the true smallest eps lies between them.  Each is
    +inf where no finite eps reaches the target (delta below the mass at infinity).  ``floor``
    must be 0 or a value where the caller knows the true delta exceeds the target; ``hint``, if finite, an eps
    at or above the crossing where the search may start.
    """
    if inf_mass_error is None:
        inf_mass_error = default_mass_error(inf_mass)
    target = delta - inf_mass

    def ceiling() -> float:
        """Where delta + its error no longer changes (the top)."""
        return max(pld.top, floor) if pld.size else floor

    def evaluate_many(points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        values, errors, slopes = pld.evaluate(points)
        return inf_mass + values, errors + inf_mass_error, slopes

    point = getattr(pld, "evaluate_point", None)

    def evaluate(x: float) -> tuple[float, float, float]:
        if point is not None:
            value, error, slope = point(x)
            return inf_mass + value, error + inf_mass_error, slope
        values, errors, slopes = evaluate_many(np.array([x]))
        return float(values[0]), float(errors[0]), float(slopes[0])

    if target < 0 or (target == 0 and pld.size == 0):
        estimate = math.inf
    elif target == 0:
        estimate = max(pld.largest, floor)
    else:
        estimate = pld.root(target, floor, hint) if pld.size else floor
    if math.isinf(estimate):
        if delta < inf_mass - inf_mass_error:
            return math.inf, math.inf, math.inf
        return math.inf, verified_epsilon_bounds(evaluate, delta, ceiling(), floor, ceiling())[0], math.inf

    at_estimate = evaluate(estimate)
    from_slope = getattr(pld, "slope_bracket", None)
    bracket = from_slope(estimate, *at_estimate, delta) if from_slope is not None and estimate > floor else None
    if bracket is not None:
        lower, upper = max(bracket[0], floor), bracket[1]
    else:
        lower, upper = verified_epsilon_bounds(evaluate, delta, estimate, floor, ceiling(), evaluate_many=evaluate_many,
                                               at_root=at_estimate)
    return estimate, min(lower, estimate), max(upper, estimate)


def epsilon_for_delta(pld: LossAtoms, inf_mass: float, delta: float) -> float:
    """The smallest eps >= 0 with inf_mass + hockey_stick(eps) <= delta (the computed one; +inf
    when delta < inf_mass).  See :func:`epsilon_bounds_for_delta` for bounds."""
    return epsilon_bounds_for_delta(pld, inf_mass, delta)[0]


# ---------------------------------------------------------------------------
# sizing and composing lists of terms

#: A composition whose estimated size (:meth:`DiscreteComposition.estimated_size`) exceeds the atom limit
#: (ExactOptions.max_atoms) by this factor is refused before it is composed.
ESTIMATE_SLACK = 16.0


def clearly_beyond(estimate: float, limit: float) -> bool:
    """Whether a rough size estimate (:func:`estimated_atoms`) is beyond ``limit`` by more than ESTIMATE_SLACK,
    the estimate's own uncertainty: what refuses a composition before composing it."""
    return estimate > ESTIMATE_SLACK * limit


def estimated_atoms(terms: list[tuple[LossAtoms, int]], log_cutoff: float = -math.inf) -> float:
    """A rough number of atoms heavier than e^``log_cutoff`` in the composition of ``terms`` ((atoms, count)
    pairs), to refuse hopeless compositions before composing.

    A term whose atoms lie on a lattice (:func:`_lattice_of` with their smallest spacing) spans at most
    count * (its range) and, where its mass is above the cutoff, about 2 sqrt(2 (-cutoff) count
    variance) (a sub-Gaussian radius): in units of the spacing, its number of atoms.  Terms whose
    spacings are commensurate (ratio within 1e-7 of an integer up to 64) share a lattice and their
    widths add; other terms multiply, each by the smaller of that width and the number of multisets of
    ``count`` of its atoms, C(count + size - 1, size - 1).
    """
    groups: list[list[float]] = []  # [step, width in units of step]
    product = 1.0
    reach = max(-log_cutoff, 1.0) + 10.0
    for atoms, count in terms:
        if atoms.size < 2:
            continue
        step = float(np.min(np.diff(atoms.losses)))
        _, weights = normalize(atoms.log_masses)
        scale = float(np.max(np.abs(atoms.losses))) or 1.0  # (losses up to 1e300: no overflow in squares)
        mean = float(np.dot(weights, atoms.losses / scale))
        deviation = scale * math.sqrt(float(np.dot(weights, (atoms.losses / scale - mean) ** 2)))
        span = float(atoms.losses[-1] - atoms.losses[0])
        width = min(count * span, 2 * math.sqrt(2 * reach * count) * deviation) / step + 1
        if step <= 0 or _lattice_of(atoms, step) is None:
            multisets = math.exp(min(700.0, math.lgamma(count + atoms.size) - math.lgamma(count + 1)
                                     - math.lgamma(atoms.size)))
            product *= min(width, multisets)
            continue
        for group in groups:
            small, large = min(group[0], step), max(group[0], step)
            ratio = large / small
            if abs(ratio - round(ratio)) < 1e-7 * ratio and round(ratio) <= 64:
                group[1] = group[1] * group[0] / small + width * step / small
                group[0] = small
                break
        else:
            groups.append([step, width])
    return product * math.prod(width for _, width in groups)


def compose_terms(terms: list[tuple[LossAtoms, int]], threshold: float, log_cutoff: float,
                   tops: list[float] | None = None) -> LossAtoms:
    """The composition of ``terms`` ((atoms, count) pairs), complete above ``threshold``, atoms lighter than
    e^``log_cutoff`` dropped; ``tops`` are the terms' largest composed losses (count * top each)."""
    if tops is None:
        tops = [count * atoms.top for atoms, count in terms]
    result: LossAtoms | None = None
    for k, (atoms, count) in enumerate(terms):
        # This term's power must be complete above threshold - (what all other terms add at most),
        # the running product above threshold - (what the terms after it add at most).
        others = above_rounding(math.fsum(tops[:k] + tops[k + 1:]))
        later = above_rounding(math.fsum(tops[k + 1:]))
        power = atoms.power(count, _rest_threshold(threshold, others), log_cutoff)
        result = power if result is None else result.convolve(power, _rest_threshold(threshold, later), log_cutoff)
    if result is None:
        raise ValueError("a composition needs at least one term")
    return result
