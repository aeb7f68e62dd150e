"""Finite privacy-loss distributions and their exact composition.

A :class:`LossAtoms` is a finite set of privacy-loss values with their
probabilities (kept as logarithms), the finite part of a privacy loss whose
remaining mass sits at +infinity.  Composition of independent mechanisms is
convolution of their privacy-loss distributions (papers/003_83ef780bcc67edb1.txt
Sec. 2, Observation 3); here it is done exactly, in log space, merging atoms
whose loss values agree to rounding.  Compositions with no continuous part
are answered from this representation without any numerical inversion.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from . import _validation as check
from ._accurate import binomial_log_pmf, log_characteristic, normalize

#: Largest number of atoms a composed distribution may have.
MAX_ATOMS = 2_000_000
#: Largest number of atom pairs one convolution may form.
MAX_PAIRS = 20_000_000
#: Loss values closer than this (relative to the largest |loss| + 1) are merged.
MERGE_RTOL = 1e-11


class CompositionTooLargeError(ValueError):
    """The exact discrete composition would exceed the size limits."""


@dataclass(frozen=True, eq=False)
class LossAtoms:
    """Atoms ``losses[i]`` with probability ``exp(log_masses[i])``, sorted by loss.

    The masses may sum to less than one: the rest is the mass at +infinity
    (papers/002_658ea0213f8272c6.txt App. D.2), which the caller tracks.
    """

    losses: np.ndarray
    log_masses: np.ndarray

    @classmethod
    def from_atoms(cls, losses, log_masses) -> "LossAtoms":
        """Sort, drop zero-mass atoms and merge equal loss values."""
        losses = np.asarray(losses, dtype=float).ravel()
        log_masses = np.asarray(log_masses, dtype=float).ravel()
        keep = log_masses > -np.inf
        return cls(*_merge(losses[keep], log_masses[keep]))

    @property
    def size(self) -> int:
        return int(self.losses.size)

    @property
    def log_mass(self) -> float:
        """Log of the total (finite) mass."""
        return float(logsumexp(self.log_masses)) if self.size else -np.inf

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

    def convolve(self, other: "LossAtoms") -> "LossAtoms":
        """The distribution of the sum of independent losses (exact, merged)."""
        if self.size == 0 or other.size == 0:
            return LossAtoms(np.empty(0), np.empty(0))
        pairs = self.size * other.size
        if pairs > MAX_PAIRS:
            raise CompositionTooLargeError(
                f"exact discrete composition needs {pairs:.3g} atom pairs (limit {MAX_PAIRS:.0e}); "
                "compose fewer discrete mechanisms exactly, or add a continuous mechanism and use method='quadrature'")
        losses = (self.losses[:, None] + other.losses[None, :]).ravel()
        log_masses = (self.log_masses[:, None] + other.log_masses[None, :]).ravel()
        return LossAtoms.from_atoms(losses, log_masses)

    def power(self, count: int) -> "LossAtoms":
        """The ``count``-fold self-convolution (``count`` >= 1).

        Two-atom distributions (randomized response, approximate DP) use the
        binomial law directly; others use binary powering.
        """
        count = check.positive_integer("count", count)
        if count == 1:
            return self
        if self.size == 2:
            return self._binomial_power(count)
        result, base = None, self
        while count:
            if count & 1:
                result = base if result is None else result.convolve(base)
            count >>= 1
            if count:
                base = base.convolve(base)
        return result

    def _binomial_power(self, count: int) -> "LossAtoms":
        if count + 1 > MAX_ATOMS:
            raise CompositionTooLargeError(
                f"exact composition of {count} two-atom mechanisms has {count + 1} atoms (limit {MAX_ATOMS})")
        j = np.arange(count + 1, dtype=float)
        (low, high), (log_low, log_high) = self.losses, self.log_masses
        # C(n, j) w_hi^j w_lo^(n-j) = W^n Binomial(n, w_hi / W)(j), W = w_hi + w_lo.
        log_total = np.logaddexp(log_low, log_high)
        if abs(log_total) < 1e-14:
            log_total = 0.0  # a probability vector up to rounding; n * rounding would grow with the count
        log_p, log_q = log_high - log_total, log_low - log_total
        log_masses = count * log_total + binomial_log_pmf(j, count, math.exp(log_p), math.exp(log_q), log_p, log_q)
        return LossAtoms.from_atoms(j * high + (count - j) * low, log_masses)


def _merge(losses: np.ndarray, log_masses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort atoms and merge those whose losses agree to ``MERGE_RTOL``."""
    if losses.size == 0:
        return losses, log_masses
    order = np.argsort(losses, kind="stable")
    losses, log_masses = losses[order], log_masses[order]
    tolerance = MERGE_RTOL * (1.0 + np.max(np.abs(losses)))
    starts = np.concatenate(([0], np.flatnonzero(np.diff(losses) > tolerance) + 1))
    if starts.size > MAX_ATOMS:
        raise CompositionTooLargeError(
            f"exact discrete composition has {starts.size} distinct loss values (limit {MAX_ATOMS})")
    # Each group's atoms differ by rounding only; keep the first loss value.
    return losses[starts], np.logaddexp.reduceat(log_masses, starts)


def log_hockey_stick(losses: np.ndarray, log_masses: np.ndarray, epsilons) -> np.ndarray:
    """log sum_j w_j (1 - e^{eps - l_j})_+ for each eps (log space, -inf where zero).

    This is the finite part of delta(eps) (papers/002 Lemma 37) of atoms
    ``losses`` with log-probabilities ``log_masses``.
    """
    epsilons = np.asarray(epsilons, dtype=float)
    flat = epsilons.ravel()
    out = np.full(flat.shape, -np.inf)
    chunk = max(1, 4_000_000 // max(losses.size, 1))
    for start in range(0, flat.size, chunk):
        gap = np.minimum(flat[start:start + chunk, None] - losses[None, :], 0.0)
        with np.errstate(divide="ignore"):
            log_terms = log_masses + np.log(-np.expm1(gap))
        out[start:start + chunk] = logsumexp(log_terms, axis=1)
    return out.reshape(epsilons.shape)


def hockey_stick(pld: LossAtoms, epsilons) -> np.ndarray:
    """sum_j w_j (1 - e^{eps - l_j})_+ over the atoms of ``pld``, for each eps (1-d array)."""
    return np.exp(log_hockey_stick(pld.losses, pld.log_masses, np.atleast_1d(np.asarray(epsilons, dtype=float))))


def epsilon_for_delta(pld: LossAtoms, inf_mass: float, delta: float) -> float:
    """The smallest eps >= 0 with inf_mass + hockey_stick(eps) <= delta, exactly.

    Between consecutive atoms delta(eps) = inf_mass + A - B e^eps, so the
    crossing is solved in closed form, then polished by one Newton step on the
    accurate sum of w_j (-expm1(eps - l_j)): A - delta cancels when eps lies just
    below an atom (A - B e^eps << A).  Returns +inf when delta < inf_mass.
    """
    if delta < inf_mass:
        return math.inf
    target = delta - inf_mass
    if hockey_stick(pld, 0.0)[0] <= target:
        return 0.0
    above = pld.losses > 0
    losses, log_masses = pld.losses[above], pld.log_masses[above]
    values = hockey_stick(pld, losses)  # non-increasing, last one is 0
    j = int(np.searchsorted(-values, -target, side="left"))  # first atom with value <= target
    # On (losses[j-1], losses[j]] only atoms j.. are active: delta = A - B e^eps.
    a = float(np.exp(log_masses[j:]).sum())
    log_b = float(logsumexp(log_masses[j:] - losses[j:]))  # e^-loss underflows beyond loss ~ 745
    low = float(losses[j - 1]) if j > 0 else 0.0
    high = float(losses[j])
    if not a > target:  # rounding: the crossing is at the interval's left end
        return low
    epsilon = min(max(low, math.log(a - target) - log_b), high)
    residual = float(hockey_stick(pld, epsilon)[0]) - target  # delta(eps) - target, slope -B e^eps
    return min(max(low, epsilon + residual / math.exp(log_b + epsilon)), high)
