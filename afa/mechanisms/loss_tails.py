"""Tail probabilities of one direction of a dominating pair: what the PLD backend builds from.

One direction of a mechanism's dominating pair (P, Q) (Zhu, Dong & Wang 2022
Def. 7) has the privacy loss L = log(p/q)(o), o ~ P.  The discretized-PLD builders
(privacy buckets, connect-the-dots, greedy + convex hull; Google DP team 2025
Sec. 2, Doroshenko et al. 2022, Secs. 4-5) need only

* the tails P[eps < L < inf] and Q[eps < L < inf] (logarithms, for every real eps),
* the mass P[L = +inf],

because the hockey-stick curve and its slope follow from them:

    delta(eps)  = P[L = inf] + P[eps < L < inf] - e^eps Q[eps < L < inf],
    delta'(eps) = -e^eps Q[eps < L < inf]        (right derivative).

Mechanisms implement :class:`LossTails` for each direction (``Mechanism.loss_tails``); the
builders never ask which mechanism they hold.  The implementations here:

* :class:`AtomTails` -- finitely many finite loss values (every finite-output mechanism);
* :class:`ComposedAtomTails` -- many uses of one of them composed exactly, moved to the ends of its error
  bounds (:meth:`LossTails.exact_power`);
* :class:`GaussianTails` -- L ~ N(mu^2/2, mu^2) (Zhu, Dong & Wang 2022, Lemma 35);
* :class:`LaplaceTails` -- the Laplace loss, clipped to [-a, a] (Zhu, Dong & Wang 2022, Lemma 34,
  Google DP team 2025, Sec. 3.1), optionally mixed with mass at +infinity (propose-test-release);
* :class:`NoisePairTails` -- a pair of Gaussian or Laplace noise mixtures whose loss is monotone
  in the output (subsampling, Zhu, Dong & Wang 2022, Thm 11, Google DP team 2025, Sec. 4; mixture of Gaussians,
  Google DP team 2025, Sec. 3.3);
* :class:`QuadraticGaussianTails` -- Gaussian noise with a data-dependent variance
  (Zhu, Dong & Wang 2022, App. A, Example 15);
* :class:`MixtureTails` -- a weighted mixture of directions over disjoint outputs (a mixture of PLDs, as
  truncated Poisson sampling's pair, Google DP team 2025, Sec. 4.3).
"""

from __future__ import annotations

import abc
import math
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike

from .._accurate import UNIT_ROUNDOFF as U
from .._accurate import log_sum_exp
from .._lazy import special
from ..limits import LOG_NEGLIGIBLE
from ..numerics.atoms import CompositionTooLargeError, LossAtoms, estimated_atoms
from ..numerics.atoms import hockey_stick_with_error as atoms_hockey_stick
from ..numerics.exact import QuadraticLoss, ddg_log_delta, gaussian_delta, log_normal_mass
from .noise_pair import NoiseMixturePair

__all__ = ["AtomTails", "ComposedAtomTails", "GaussianTails", "LaplaceTails", "LossTails", "MixtureTails",
           "NoisePairTails", "QuadraticGaussianTails"]

#: Accuracy of log_tails: TAILS_LOG_RTOL + TAILS_LOG_ULPS u (|log tail| + 4) absolute in the log (measured
#: against 60-digit mpmath, tests/test_loss_tails.py: 64 u + 12 u (|log P| + 4) for Gaussian noise).
TAILS_LOG_RTOL, TAILS_LOG_ULPS = 64 * U, 16
#: Relative error allowed the closed-form hockey sticks: afa.numerics.exact's composed-Gaussian formula (rounding only,
#: checked to 40-digit mpmath in tests/test_loss_tails.py) and its data-dependent Gaussian (<= 2e-13 measured,
#: tests/test_data_dependent.py).
CLOSED_FORM_RTOL = 1e-12


class LossTails(abc.ABC):
    """One direction (P, Q) of a dominating pair, seen through the tails of L = log(p/q)(o), o ~ P.

    Attributes
    ----------
    inf_mass:
        P[L = +inf] (the mass where q = 0; Zhu, Dong & Wang 2022, App. D.2).
    loss_range:
        (lowest, highest) finite loss value with positive P-mass, the smallest closed
        interval holding all of it (its ends are infima / suprema, attained or not); either
        end may be infinite, and it is (inf, -inf) when all of P's mass is at +infinity.
    """

    inf_mass: float
    loss_range: tuple[float, float]
    #: The accuracy of :meth:`log_tails`: each log tail is within log_rtol + log_ulps u (|log tail| + 4) of the
    #: truth, absolutely (u the unit roundoff); builders of PLDs (:mod:`afa.engines.pld`) widen their bounds by it.
    #: log_rtol may be set per instance (a sum over many atoms rounds more).
    log_rtol: float = TAILS_LOG_RTOL
    log_ulps: ClassVar[float] = TAILS_LOG_ULPS
    #: Whether the finite loss has no atoms (P[L = x] = 0 for every finite x), so that P[L >= x] = P[L > x].
    atomless: bool = False
    #: The loss as L* + gamma (Z - z*)^2, Z ~ N(0, 1), when it is one (:class:`afa.numerics.exact.QuadraticLoss`), else
    #: None: compositions of such losses sharing gamma are one noncentral chi-square (:mod:`afa.engines.quadratic`).
    quadratic: QuadraticLoss | None = None

    @abc.abstractmethod
    def log_tails(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """(log P[eps < L < inf], log Q[eps < L < inf]) for each eps (any shape, +-inf allowed),
        relatively accurate (-inf for 0).  At eps = -inf they are the finite part's masses."""

    def log_lower_mass(self, epsilons: ArrayLike) -> np.ndarray:
        """log P[L <= eps] for each eps (-inf for 0).

        Here 1 - inf_mass - P[eps < L < inf], accurate to about u absolutely (a mass below u is
        lost to rounding); subclasses that can reach a lower tail directly override it.
        """
        log_p = self.log_tails(epsilons)[0]
        with np.errstate(divide="ignore"):
            return np.log(np.maximum(1.0 - self.inf_mass - np.exp(log_p), 0.0))

    def grid_log_tails(self, interval: float, first: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`log_tails` at the grid interval * (first + arange(count)), read-only; the latest grid's are
        kept, since a PLD's pessimistic and optimistic builders (:mod:`afa.engines.pld`) ask for the same grid."""
        key = (float(interval), int(first), int(count))
        latest = getattr(self, "_latest_grid", None)
        if latest is None or latest[0] != key:
            values = self.log_tails(interval * np.arange(first, first + count))
            for array in values:
                array.flags.writeable = False
            latest = self._latest_grid = (key, values)
        return latest[1]

    def hockey_stick(self, epsilons: ArrayLike) -> np.ndarray:
        """delta(eps) = H_{e^eps}(P || Q), formed from the tails without cancellation of e^eps Q against P."""
        return self.hockey_stick_with_error(epsilons)[0]

    def hockey_stick_with_error(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """(delta(eps), a bound on its error) from the tails.

        delta = a + P (1 - e^g), g = eps + log Q - log P <= 0.  With each log-tail accurate to
        log_rtol + log_ulps u (|log tail| + 4) (the class's declared accuracy),
        the error is that times delta plus P e^g times the error of g: small relative to delta
        unless L piles up just above eps (g near 0), where it stays small relative to P.
        """
        values, errors, _ = self._from_tails(epsilons)
        return values, errors

    def hockey_stick_error_and_slope(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(delta(eps), a bound on its error, -d delta / d eps): :meth:`hockey_stick_with_error` and minus
        :meth:`hockey_stick_slope` (a class whose tails are costly forms all three from one evaluation of them)."""
        values, errors = self.hockey_stick_with_error(epsilons)
        return values, errors, -self.hockey_stick_slope(epsilons)

    def _from_tails(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(delta, its error, -d delta / d eps) of :meth:`hockey_stick_with_error`'s formula, from one
        evaluation of :meth:`log_tails`."""
        epsilons = np.asarray(epsilons, dtype=float)
        log_p, log_q = self.log_tails(epsilons)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            finite = log_p > -np.inf
            gap = np.where(finite, np.minimum(epsilons + log_q - log_p, 0.0), -np.inf)
            p = np.where(finite, np.exp(log_p), 0.0)
            finite_part = p * -np.expm1(gap)
            p_error = self.log_rtol + self.log_ulps * U * (np.abs(np.where(finite, log_p, 0.0)) + 4)
            q_error = self.log_rtol + self.log_ulps * U * (np.abs(np.where(log_q > -np.inf, log_q, 0.0)) + 4)
            gap_error = p_error + q_error + 2 * U * np.abs(np.where(finite, epsilons, 0.0))
            error = np.where(finite, finite_part * p_error + p * np.exp(gap) * gap_error, 0.0)
            slope = np.exp(np.where(log_q > -np.inf, epsilons + log_q, -np.inf))
        return self.inf_mass + finite_part, error + 4 * U * self.inf_mass, slope

    def exact_power(self, count: int, log_cutoff: float) -> tuple[LossTails, LossTails] | None:
        """``count`` uses composed exactly, as tails of a measure whose delta lies above the composed loss's and
        of one whose delta lies below it, or None where this loss has no exact composition (the default) or
        it would be too large.  Atoms lighter than e^``log_cutoff`` may be dropped (the first measure puts
        their mass at +infinity).  The PLD backend builds its pessimistic PLD from the first and its
        optimistic one from the second, so the count costs one grid rounding instead of ``count``."""
        return None

    def hockey_stick_slope(self, epsilons: ArrayLike) -> np.ndarray:
        """The right derivative d delta / d eps = -e^eps Q[eps < L < inf] (<= 0)."""
        epsilons = np.asarray(epsilons, dtype=float)
        _, log_q = self.log_tails(epsilons)
        with np.errstate(invalid="ignore"):
            return -np.exp(np.where(log_q > -np.inf, epsilons + log_q, -np.inf))


def _epsilons(epsilons: ArrayLike) -> np.ndarray:
    """``epsilons`` as a float array, NaN rejected (+-inf allowed)."""
    epsilons = np.asarray(epsilons, dtype=float)
    if np.any(np.isnan(epsilons)):
        raise ValueError("epsilons must not be NaN")
    return epsilons


class AtomTails(LossTails):
    """A loss with finitely many finite values plus mass at +infinity (Zhu, Dong & Wang 2022, Def. 36, App. D.2).

    Built from the atoms of the mechanism's :class:`afa.mechanisms.privacy_loss.PrivacyLoss` (the
    exact composition's data); an atom of P-mass w at loss l has Q-mass w e^{-l}.  The tails
    are suffix log-sums over the sorted atoms.
    """

    #: Most atoms an exact power (:meth:`exact_power`) may have, as estimated before composing and as composed
    #: (its direct lattice convolutions cost about the square).
    POWER_ATOMS = 1 << 16

    def __init__(self, atoms: LossAtoms, inf_mass: float):
        self.atoms = atoms
        self.inf_mass = float(inf_mass)
        losses = atoms.losses
        self.loss_range = (float(losses[0]), float(losses[-1])) if atoms.size else (math.inf, -math.inf)
        # log of the P- and Q-mass of atoms j, j+1, ... for j = 0..size (the last entry: no atoms).
        suffix = lambda log_w: np.append(np.logaddexp.accumulate(log_w[::-1])[::-1], -np.inf)  # noqa: E731
        self._log_p_above = suffix(atoms.log_masses)
        self._log_q_above = suffix(atoms.log_masses - losses)
        # Each step of the running log-sums rounds by a few u of its magnitude and passes earlier errors on
        # damped, so a suffix sum over n atoms is within n u (3 + its largest |log|) of the truth; the atoms'
        # own log-mass errors (alpha + beta |log mass|, the largest of them) add.
        if atoms.size:
            largest = float(max(np.max(np.abs(self._log_p_above[:-1])), np.max(np.abs(self._log_q_above[:-1]))))
            alpha, beta = atoms.log_mass_error
            self.log_rtol = (TAILS_LOG_RTOL + atoms.size * U * (3 + largest)
                             + alpha + beta * float(np.max(np.abs(atoms.log_masses))))

    def exact_power(self, count: int, log_cutoff: float) -> tuple[LossTails, LossTails] | None:
        """``count`` uses composed exactly (:meth:`afa.numerics.atoms.LossAtoms.power`, atoms lighter than
        e^``log_cutoff`` dropped, never more than e^LOG_NEGLIGIBLE), moved to the ends of their error bounds:
        :class:`ComposedAtomTails` upward and downward.  None for one use, or when the power would have more
        than POWER_ATOMS atoms."""
        if count < 2 or self.atoms.size < 2 or not math.isfinite(self.log_rtol):
            return None
        log_cutoff = max(float(log_cutoff), LOG_NEGLIGIBLE)
        if estimated_atoms([(self.atoms, count)], log_cutoff) > self.POWER_ATOMS:
            return None
        try:
            power = self.atoms.power(count, -math.inf, log_cutoff)
        except CompositionTooLargeError:
            return None
        if power.size > self.POWER_ATOMS or power.size == 0:
            return None
        inf_mass = -math.expm1(count * math.log1p(-self.inf_mass)) if self.inf_mass < 1 else 1.0
        inf_error = inf_mass * 16 * U * (4 + count)
        # Q[L > -inf] of one use, raised by its accuracy and by its atoms' position errors (an atom's Q-mass is
        # w e^-l), to the count-th power: the composed finite Q-mass.
        log_q_total = min(0.0, count * (float(self._log_q_above[0]) + self.log_rtol
                                        + self.log_ulps * U * (abs(float(self._log_q_above[0])) + 4)
                                        + float(np.max(self.atoms.loss_errors))))
        dropped = math.exp(power.log_dropped) if power.log_dropped > -math.inf else 0.0
        return (ComposedAtomTails(power, min(1.0, inf_mass + inf_error + dropped), log_q_total, upward=True),
                ComposedAtomTails(power, max(0.0, inf_mass - inf_error), log_q_total, upward=False))

    def hockey_stick_with_error(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """delta(eps) = m + sum_i w_i (1 - e^{eps - l_i})_+ term by term, with the atoms' error bounds
        (:func:`afa.numerics.atoms.hockey_stick_with_error`): relative to delta, except within an atom's position
        error of it, where the error is that atom's mass times its position error."""
        epsilons = _epsilons(epsilons)
        return atoms_hockey_stick(self.atoms, np.where(np.isfinite(epsilons), epsilons, np.sign(epsilons) * 1e308),
                                  self.inf_mass)

    def log_tails(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        first = np.searchsorted(self.atoms.losses, _epsilons(epsilons), side="right")  # first atom above eps
        return self._log_p_above[first], self._log_q_above[first]


class ComposedAtomTails(AtomTails):
    """An exactly composed finite loss (:class:`afa.numerics.atoms.LossAtoms` with error bounds) as the tails of a
    measure that dominates it (``upward``) or that it dominates.

    Upward, every atom moves to the top of its position interval and the mass dropped as negligible goes to
    +infinity; downward, every atom moves to the bottom and the dropped mass is left out.  delta(eps) =
    m + sum_i w_i (1 - e^{eps - l_i})_+ rises with each l_i and m, so the first measure's delta lies above the
    composed loss's and the second's below it.  The masses' error bounds enter the declared accuracy of the
    tails (``log_rtol``), which the PLD builders round outwards by.  At eps = -inf the Q-tail is
    ``log_q_total``, an upper bound on the composed loss's whole finite Q-mass (the slope of its hockey-stick
    curve at e^eps = 0, which the optimistic builder's first tangent needs: the atoms dropped at the bottom
    may hold much Q-mass).

    Parameters
    ----------
    atoms : afa.numerics.atoms.LossAtoms
        The composed atoms, with their error bounds and dropped mass.
    inf_mass : float
        The mass at +infinity, already raised (upward) or lowered by its error and the dropped mass.
    log_q_total : float
        Log of an upper bound on the composed finite Q-mass (<= 0).
    upward : bool
        Which end of the atoms' intervals to take.
    """

    def __init__(self, atoms: LossAtoms, inf_mass: float, log_q_total: float, *, upward: bool):
        moved = atoms.position_bounds()[1 if upward else 0]
        order = np.argsort(moved, kind="stable")
        super().__init__(LossAtoms(moved[order], atoms.log_masses[order], log_mass_error=atoms.log_mass_error),
                         inf_mass)
        self.upward = bool(upward)
        self._log_q_total = float(log_q_total)

    def exact_power(self, count: int, log_cutoff: float) -> None:
        """None: a composed loss is not composed again."""
        return None

    def log_tails(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        log_p, log_q = super().log_tails(epsilons)
        bottom = np.asarray(_epsilons(epsilons)) == -np.inf
        if np.any(bottom):
            log_q = np.where(bottom, max(self._log_q_total, float(self._log_q_above[0])), log_q)
        return log_p, log_q


class GaussianTails(LossTails):
    """L ~ N(mu^2/2, mu^2) under P and N(-mu^2/2, mu^2) under Q (Zhu, Dong & Wang 2022, Lemma 35), so
    P[L > eps] = Phi(mu/2 - eps/mu) and Q[L > eps] = Phi(-mu/2 - eps/mu)."""

    atomless = True

    def __init__(self, mu: float):
        self.mu = float(mu)
        self.inf_mass = 0.0
        self.loss_range = (-math.inf, math.inf)

    def log_tails(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        scaled = _epsilons(epsilons) / self.mu
        return special.log_ndtr(self.mu / 2 - scaled), special.log_ndtr(-self.mu / 2 - scaled)

    def hockey_stick_with_error(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """delta(eps) from the closed form in log space (:func:`afa.numerics.exact.gaussian_delta`, Sommer,
        Meiser & Mohammadi 2019, Thm 5), relatively accurate far beyond where the tails' difference cancels."""
        values = np.asarray(gaussian_delta(_epsilons(epsilons), self.mu), dtype=float)
        return values, CLOSED_FORM_RTOL * values


class LaplaceTails(LossTails):
    """The Laplace loss with a = sensitivity / scale (Zhu, Dong & Wang 2022, Lemma 34, Google DP team 2025, Sec. 3.1),
    its finite part scaled by 1 - ``inf_mass`` (the rest at +infinity: propose-test-release).

    Under P: atoms a (mass 1/2) and -a (mass e^{-a}/2), density e^{(l - a)/2}/4 on (-a, a); so for
    -a <= eps < a, P[L > eps] = 1 - e^{(eps - a)/2}/2 and Q[L > eps] = e^{-(eps + a)/2}/2
    (delta = 1 - e^{(eps - a)/2}); both are the whole finite mass below -a and 0 from a on.
    """

    def __init__(self, a: float, inf_mass: float = 0.0):
        self.a = float(a)
        self.inf_mass = float(inf_mass)
        self.loss_range = (-self.a, self.a)
        self._log_rest = math.log1p(-self.inf_mass)

    def hockey_stick_with_error(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """delta(eps) in closed form, with an error relative to delta (Zhu, Dong & Wang 2022, Lemma 34):

        m + (1 - m) (1 - e^{(eps - a)/2}) for -a <= eps < a, m + (1 - m)(1 - e^eps) below -a, m from a on
        (m the mass at +infinity).  Each is one expm1 of an accurately formed argument: a few rounding
        units of delta.  a = sensitivity / scale is itself rounded (a relative U), which moves delta by up
        to (1 - m) e^{(eps - a)/2} U a / 2 on [-a, a + U a): next to a, where delta ~ (a - eps) / 2 is
        small, this is what bounds its relative accuracy, and the error says so.
        """
        epsilons, a, m = _epsilons(epsilons), self.a, self.inf_mass
        rest = 1.0 - m
        with np.errstate(over="ignore", invalid="ignore"):
            inside = (epsilons >= -a) & (epsilons < a)
            half_gap = np.where(inside, (np.where(inside, epsilons, 0.0) - a) / 2, 0.0)
            factor = np.where(inside, -np.expm1(half_gap),
                              np.where(epsilons < -a, -np.expm1(np.minimum(epsilons, 0.0)), 0.0))
            finite = rest * factor
            values = m + finite
            # Rounding: eps - a (relative U of the gap, at most U of expm1's value), expm1, the products and the
            # sum: 8 U of delta; a's own rounding: d delta / d a = (1 - m) e^{(eps - a)/2} / 2 on (-a, a).
            # (From a on, delta is m up to the same rounding: a's true value may lie up to U a above.)
            near = (epsilons >= -a) & (epsilons < a * (1 + 4 * U))
            position = np.where(near, rest * np.exp(half_gap) * U * a / 2, 0.0)
            errors = 8 * U * values + position * (1 + 1e-9) + 8 * U * m
        return values, errors

    def log_tails(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        epsilons, a = _epsilons(epsilons), self.a
        inside = np.clip(epsilons, -a, a)
        log_p = np.where(epsilons < -a, 0.0, np.log1p(-np.exp((inside - a) / 2) / 2))
        log_q = np.where(epsilons < -a, 0.0, -(inside + a) / 2 - math.log(2))
        above = epsilons >= a
        return (np.where(above, -np.inf, self._log_rest + log_p), np.where(above, -np.inf, self._log_rest + log_q))


class NoisePairTails(LossTails):
    """The pair (A, B) of Gaussian or Laplace noise mixtures (:class:`afa.mechanisms.noise_pair.NoiseMixturePair`)
    whose loss L(o) = log(A/B)(o) is monotone in the output o.

    L' is the difference of the posterior means of the components' log-density slopes (Zhu, Dong & Wang 2022
    App. E; see :mod:`afa.engines.certified`, item 2); when every A shift is >= every B shift, every A slope
    is >= every B slope (log-concave noise), so L is nondecreasing -- nonincreasing in the mirror
    case.  This covers Poisson and subset subsampling (remove and add) and Poisson subsampling under
    substitution (Zhu, Dong & Wang 2022, Thm 11, Google DP team 2025, Secs. 4.1-4.2) and the mixture of Gaussians
    (Google DP team 2025, Sec. 3.3).  Then {L > eps} is a half-line beyond o*(eps) = the crossing of L with eps,
    found to an ulp by bisection on o, with Newton steps for Gaussian noise (vectorised over eps), and the
    tails are that half-line's A- and B-masses from the component CDFs in log space
    (:func:`_log_half_line_mass`); the lower tail P[L <= eps] is the other half-line's A-mass.
    A Laplace loss is constant beyond the outermost shifts: those flat parts are atoms of L, at the
    ends of ``loss_range``, and come out of the same half-lines.

    Accuracy: the relative error of a tail is the A-hazard at o* times the error of o*, the rounding
    of L(o*) divided by L'(o*), plus the rounding of the standardized o*.  For Gaussian noise both grow
    like u |log P[L > eps]| (as does the tails' own condition number in eps, 2u |log P| for one
    Gaussian); measured against 60-digit mpmath (q = 0.5, 1e-3; remove, add, substitution;
    |log P| <= 745): |error of log P| <= 64u + 12u (|log P| + 4), and a few u for Laplace noise.
    """

    #: The bisection never leaves |o - centre| <= REACH noise scales (beyond, the masses are below e^-1e199).
    REACH = 1e100
    #: Half-widths of the brackets tried around a closed-form guess of o*, relative to |o*| + scale: the guess
    #: is within 2u for about 95 % of eps (then one or two bisection steps reach an ulp), within 1e-15 for
    #: 99.6 % (subsampled Gaussian, q = 0.01), within 1e-13 for all but a few.
    GUESS_WIDTHS = (2 * U, 1e-15, 1e-13, 1e-9)
    #: Most steps of :meth:`_newton` (quadratic convergence from a bracket takes some 5-10; more are bisections).
    NEWTON_STEPS = 40

    def __init__(self, pair: NoiseMixturePair):
        pair = pair.without_empty_components()
        a_shifts, b_shifts = np.asarray(pair.a_shifts), np.asarray(pair.b_shifts)
        if a_shifts.min() >= b_shifts.max():
            self._orientation = 1.0
        elif a_shifts.max() <= b_shifts.min():
            self._orientation = -1.0
        else:
            raise ValueError(f"the loss of {pair} is not monotone in the output (the shifts of A and B interleave)")
        self.pair = pair
        self.inf_mass = 0.0
        limits = self._limits()
        self.loss_range = (min(limits), max(limits))
        # A Gaussian loss only tends to its ends (unless it is constant); a Laplace loss takes them.
        self._bottom_attained = pair.noise == "laplace" or limits[0] == limits[1]
        # A non-constant Gaussian-mixture loss is real-analytic and monotone, hence strictly monotone: no atoms.
        self.atomless = not self._bottom_attained
        self._centre = float(np.ptp(pair.shifts) / 2 + pair.shifts.min())
        self._reach = self.REACH * pair.scale + float(np.max(np.abs(pair.shifts)))

    def _limits(self) -> tuple[float, float]:
        """L(-inf) and L(+inf).  Laplace: L is constant beyond the outermost shifts.  Gaussian: the
        outermost components dominate; L tends to +-inf unless A and B share their outermost shift,
        then to the log-ratio of their weights there."""
        pair = self.pair
        if pair.noise == "laplace":
            ends = pair.privacy_loss(np.array([pair.shifts.min(), pair.shifts.max()]))
            return float(ends[0]), float(ends[1])
        sides = [(np.asarray(pair.a_shifts), np.asarray(pair.a_log_weights)),
                 (np.asarray(pair.b_shifts), np.asarray(pair.b_log_weights))]
        limits = []
        for toward in (-1.0, 1.0):  # the outermost component towards o = toward * inf dominates
            (a_end, a_log_w), (b_end, b_log_w) = [
                (toward * np.max(toward * shifts), log_w) for shifts, log_w in sides]
            if a_end == b_end:
                limits.append(float(np.logaddexp.reduce(a_log_w[sides[0][0] == a_end])
                                    - np.logaddexp.reduce(b_log_w[sides[1][0] == b_end])))
            else:
                limits.append(math.inf if toward * (a_end - b_end) > 0 else -math.inf)
        return limits[0], limits[1]

    def _loss_along(self, x: np.ndarray) -> np.ndarray:
        """g(x) = L(orientation * x), nondecreasing in x."""
        return self.pair.privacy_loss(self._orientation * x)

    def _guess(self, eps: np.ndarray) -> np.ndarray | None:
        """o*(eps) in closed form for Gaussian noise with two distinct shifts s0 < s1 (NaN where it fails).

        With z = e^{kappa(o, s1) - kappa(o, s0)}, A / mu(. - s0) = a0 + a1 z and likewise B, so
        e^L = (a0 + a1 z) / (b0 + b1 z) is a Moebius map: z = (a0 - e^L b0) / (e^L b1 - a1), and
        log z = (s1 - s0)(2 o - s0 - s1) / (2 sigma^2) gives o.  (A starting bracket only: the
        bisection in :meth:`_crossing` still settles o* to an ulp.)
        """
        pair = self.pair
        shifts = pair.shifts
        if pair.noise != "gaussian" or shifts.size != 2:
            return None
        s0, s1 = float(shifts[0]), float(shifts[1])

        def weights(side_shifts, side_log_weights):
            found = dict(zip(side_shifts, np.exp(side_log_weights)))
            return found.get(s0, 0.0), found.get(s1, 0.0)

        (a0, a1), (b0, b1) = weights(pair.a_shifts, pair.a_log_weights), weights(pair.b_shifts, pair.b_log_weights)
        with np.errstate(all="ignore"):
            ratio = np.exp(eps)
            log_z = np.log((a0 - ratio * b0) / (ratio * b1 - a1))
            return pair.scale ** 2 * log_z / (s1 - s0) + (s0 + s1) / 2

    def _crossing(self, eps: np.ndarray) -> np.ndarray:
        """x* with g <= eps below it and g > eps above it (to an ulp), for eps in loss_range.

        The bracket starts at the closed-form guess (:meth:`_guess`) +- the first of GUESS_WIDTHS
        that brackets x*, else at the centre +- one noise scale, widened by doubling; for Gaussian noise,
        Newton's method inside that bracket (:meth:`_newton`) then gives a guess that GUESS_WIDTHS
        brackets in turn.  Bisection settles what is left.
        """
        centre = self._orientation * self._centre
        scale = self.pair.scale
        guess = self._guess(eps)
        if guess is None:
            guess = np.full(eps.shape, np.nan)
        guess = self._orientation * guess
        low, high = np.full(eps.shape, np.nan), np.full(eps.shape, np.nan)
        good = self._bracket_guess(eps, guess, low, high, np.zeros(eps.shape, dtype=bool))
        bounds = []
        for outward in (-1.0, 1.0):  # widen [centre - scale, centre + scale] until it brackets x*
            x = np.where(good, low if outward < 0 else high, centre + outward * scale)
            active = np.flatnonzero(~good)
            active = active[(self._loss_along(x[active]) > eps[active]) == (outward < 0)]
            while active.size:
                x[active] = np.clip(centre + 2 * (x[active] - centre), centre - self._reach, centre + self._reach)
                beyond = (self._loss_along(x[active]) > eps[active]) == (outward < 0)
                active = active[beyond & (np.abs(x[active] - centre) < self._reach)]
            bounds.append(x)
        low, high = bounds
        if self.pair.noise == "gaussian" and not np.all(good):
            rest = np.flatnonzero(~good)
            guess = np.full(eps.shape, np.nan)
            guess[rest] = self._newton(eps[rest], low[rest], high[rest])
            self._bracket_guess(eps, guess, low, high, good)
        active = np.arange(eps.size)
        while active.size:
            middle = low[active] / 2 + high[active] / 2
            crossed = self._loss_along(middle) > eps[active]
            high[active[crossed]] = middle[crossed]
            low[active[~crossed]] = middle[~crossed]
            width = high[active] - low[active]
            active = active[width > 2 * U * np.maximum(np.maximum(np.abs(low[active]), np.abs(high[active])), scale)]
        return low / 2 + high / 2

    def _bracket_guess(self, eps: np.ndarray, guess: np.ndarray, low: np.ndarray, high: np.ndarray,
                       good: np.ndarray) -> np.ndarray:
        """Mark ``good`` (and set ``low``, ``high``) where guess -+ one of GUESS_WIDTHS brackets the crossing
        (the narrowest that does); the others are left as they were.  Returns ``good``."""
        for relative_width in self.GUESS_WIDTHS:
            trying = np.flatnonzero(~good & np.isfinite(guess))
            width = relative_width * (np.abs(guess[trying]) + self.pair.scale)
            below, above = guess[trying] - width, guess[trying] + width
            holds = (self._loss_along(below) <= eps[trying]) & (self._loss_along(above) > eps[trying])
            low[trying[holds]], high[trying[holds]] = below[holds], above[holds]
            good[trying[holds]] = True
        return good

    def _newton(self, eps: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """Safeguarded Newton's method for g(x) = eps inside the brackets [low, high] (Gaussian noise).

        Each step is Newton's from the last point, or the bracket's midpoint where that leaves the
        bracket; the bracket shrinks to the side that the new point's sign allows.  A point stops once its
        Newton step is below 4u (|x| + scale); all stop after NEWTON_STEPS steps.  Returns the last points
        (a guess: :meth:`_crossing` verifies it).
        """
        low, high = low.copy(), high.copy()
        x = low / 2 + high / 2
        active = np.arange(eps.size)
        for _ in range(self.NEWTON_STEPS):
            loss, slope = self.pair.loss_and_slope(self._orientation * x[active])
            gap = loss - eps[active]
            above = gap > 0
            high[active[above]] = x[active[above]]
            low[active[~above]] = x[active[~above]]
            with np.errstate(divide="ignore", invalid="ignore"):
                step = gap / (self._orientation * slope)
            candidate = x[active] - step
            settled = np.abs(step) <= 4 * U * (np.abs(x[active]) + self.pair.scale)
            inside = np.isfinite(candidate) & (candidate >= low[active]) & (candidate <= high[active])
            x[active] = np.where(settled, x[active],
                                 np.where(inside, candidate, low[active] / 2 + high[active] / 2))
            active = active[~settled]
            if active.size == 0:
                break
        return x

    def hockey_stick_error_and_slope(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All three from one evaluation of the tails (see :meth:`LossTails.hockey_stick_error_and_slope`)."""
        return self._from_tails(epsilons)

    def log_tails(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        epsilons = _epsilons(epsilons)
        flat = epsilons.ravel()
        low, high = self.loss_range
        everything = (flat < low) | ((flat == low) & (not self._bottom_attained))
        log_p = np.where(everything, 0.0, -np.inf)
        log_q = log_p.copy()
        inside = np.flatnonzero(~everything & (flat < high))
        if inside.size:
            o_star = self._orientation * self._crossing(flat[inside])
            pair, upper = self.pair, self._orientation > 0  # {L > eps} is (o*, inf), or (-inf, o*)
            log_p[inside] = _log_half_line_mass(pair, pair.a_shifts, pair.a_log_weights, o_star, upper)
            log_q[inside] = _log_half_line_mass(pair, pair.b_shifts, pair.b_log_weights, o_star, upper)
        return log_p.reshape(epsilons.shape), log_q.reshape(epsilons.shape)

    def log_lower_mass(self, epsilons: ArrayLike) -> np.ndarray:
        """log P[L <= eps], from the half-line of outputs on the other side of o*(eps): relatively accurate
        however small (no difference from 1)."""
        epsilons = _epsilons(epsilons)
        flat = epsilons.ravel()
        low, high = self.loss_range
        nothing = (flat < low) | ((flat == low) & (not self._bottom_attained))
        log_lower = np.where(nothing, -np.inf, 0.0)
        inside = np.flatnonzero(~nothing & (flat < high))
        if inside.size:
            o_star = self._orientation * self._crossing(flat[inside])
            pair, upper = self.pair, self._orientation < 0  # {L <= eps} is (-inf, o*], or [o*, inf)
            log_lower[inside] = _log_half_line_mass(pair, pair.a_shifts, pair.a_log_weights, o_star, upper)
        return log_lower.reshape(epsilons.shape)


def _log_half_line_mass(pair: NoiseMixturePair, shifts, log_weights, edges: np.ndarray, upper: bool) -> np.ndarray:
    """log of sum_i w_i mu(o - c_i) over o > edge (``upper``) or o < edge, for every edge.

    With F the standard noise CDF, component i gives F(-z) (upper) or F(z), z = (edge - c_i) / scale;
    F(y) = e^{T(|y|)} for y <= 0 and 1 - e^{T(|y|)} (by log1p) above, T(x) = log F(-x) = log_ndtr(-x)
    (Gaussian) or -x - log 2 (Laplace): the one cell of :func:`afa.engines.certified.log_mixture_masses` that a
    half-line needs, by the same formulas, without its error bounds (their accuracy is measured,
    :data:`TAILS_LOG_RTOL`).
    """
    terms = []
    for shift, log_weight in zip(shifts, log_weights):
        y = (edges - shift) / pair.scale
        y = -y if upper else y
        tail = special.log_ndtr(-np.abs(y)) if pair.noise == "gaussian" else -np.abs(y) - math.log(2.0)
        with np.errstate(divide="ignore"):  # (F = 1: log1p(-0) = 0)
            terms.append(log_weight + np.where(y <= 0, tail, np.log1p(-np.exp(tail))))
    return log_sum_exp(np.array(terms))


class QuadraticGaussianTails(LossTails):
    """The pair P = N(0, own^2), Q = N(shift, other^2), own != other: Gaussian noise with a
    data-dependent variance (Zhu, Dong & Wang 2022, App. A, Example 15).

    The loss is quadratic in the output (:class:`afa.numerics.exact.QuadraticLoss`): unbounded above with
    minimum L* when own > other, bounded above by L* when own < other.  {L > eps} is everything,
    nothing, the complement of an interval or an interval, whose P- and Q-masses come from log Phi
    (:func:`afa.numerics.exact.log_normal_mass`), or, for the narrow interval just below a bounded loss's
    top L* (where that difference of CDFs cancels), from Gauss-Legendre quadrature of the density.
    """

    atomless = True  # a quadratic (own != other) takes each value at two outputs at most

    def __init__(self, own: float, other: float, shift: float):
        self._pair = (own, other, shift)
        self._loss = self.quadratic = QuadraticLoss.of(own, other, shift)
        self.inf_mass = 0.0
        # L* is extreme + extreme_lo: the range's finite end is rounded outwards.
        extreme, below = self._loss.extreme, self._loss.extreme_lo
        if self._loss.gamma > 0:
            self.loss_range = (extreme if below >= 0 else float(np.nextafter(extreme, -math.inf)), math.inf)
        else:
            self.loss_range = (-math.inf, extreme if below <= 0 else float(np.nextafter(extreme, math.inf)))

    def hockey_stick_with_error(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """delta(eps) from the closed form (:func:`afa.numerics.exact.data_dependent_gaussian_delta`), which keeps its
        relative accuracy where the tails' difference would cancel (down to delta ~ 1e-300)."""
        epsilons = _epsilons(epsilons)
        values = np.exp(ddg_log_delta(epsilons.ravel(), *self._pair)).reshape(epsilons.shape)
        return values, CLOSED_FORM_RTOL * values

    def log_tails(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        epsilons = _epsilons(epsilons)
        flat = epsilons.ravel()
        loss = self._loss
        gap = loss.gap(flat)
        everything = (gap <= 0) if loss.gamma > 0 else (flat == -np.inf)
        log_p = np.where(everything, 0.0, -np.inf)
        log_q = log_p.copy()
        inside = np.flatnonzero(np.isfinite(flat) & ((gap > 0) if loss.gamma > 0 else (gap < 0)))
        if inside.size:
            h, (z1, z2), (w1, w2) = loss.roots(flat[inside], gap[inside])
            if loss.gamma > 0:  # the two tails beyond z1 and z2
                log_p[inside] = np.logaddexp(log_normal_mass(-np.inf, z1)[0], log_normal_mass(z2, np.inf)[0])
                log_q[inside] = np.logaddexp(log_normal_mass(-np.inf, w1)[0], log_normal_mass(w2, np.inf)[0])
            else:  # (z1, z2), of half-width h about the vertex
                log_p[inside] = _log_normal_interval(z1, z2, loss.vertex, h)
                log_q[inside] = _log_normal_interval(w1, w2, (loss.vertex - loss.mu) / loss.rho, h / loss.rho)
        return log_p.reshape(epsilons.shape), log_q.reshape(epsilons.shape)


_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(16)


def _log_normal_interval(low: np.ndarray, high: np.ndarray, centre: float, half_width: np.ndarray) -> np.ndarray:
    """log(Phi(high) - Phi(low)) for the interval (low, high) = centre -+ half_width, relatively accurate
    also when it is narrow.

    Where the log-density -z^2/2 changes by at most 1 across the interval, the difference of CDFs
    would cancel (and so would high - low): there the density is integrated over centre + u,
    |u| <= half_width, by 16-point Gauss-Legendre (exact to rounding for so small a change);
    elsewhere from log Phi (:func:`afa.numerics.exact.log_normal_mass`).
    """
    value = log_normal_mass(low, high)[0]
    narrow = np.flatnonzero(half_width * (abs(centre) + half_width) <= 0.5)
    if narrow.size:
        half = half_width[narrow, None]
        z = centre + half * _GL_NODES
        with np.errstate(divide="ignore"):  # (an interval of width 0 has mass 0)
            log_weights = np.log(half * _GL_WEIGHTS)
        value[narrow] = special.logsumexp(-z * z / 2 + log_weights, axis=1) - 0.5 * math.log(2 * math.pi)
    return value


class MixtureTails(LossTails):
    """The direction sum_k w_k (P_k, Q_k) over disjoint outputs: a weighted mixture of privacy-loss distributions.

    On the disjoint union of the components' outputs, P = sum_k w_k P_k and Q = sum_k w_k Q_k have the loss
    L = log(P_k/Q_k) on component k's outputs, so every tail is the weighted sum of the components'
    (P[eps < L < inf] = sum_k w_k P_k[eps < L_k < inf], likewise for Q) and so is the mass at +infinity.  This
    is how a mixture of PLDs is formed (Google DP team 2025, Sec. 4.3, truncated Poisson sampling).

    Parameters
    ----------
    log_weights : sequence of float
        log w_k, the weights summing to one (within 1e-12).
    components : sequence of LossTails
        The components' directions, one per weight.

    Raises
    ------
    ValueError
        No components, lengths that differ, or weights not summing to one.

    Notes
    -----
    Accuracy: a log-sum of positive terms adds a few ulps to the largest component error, so the mixture
    declares the largest component ``log_rtol`` and ``log_ulps`` plus 4 u.

    Examples
    --------
    >>> import math
    >>> from afa.mechanisms.loss_tails import GaussianTails, MixtureTails
    >>> tails = MixtureTails([math.log(0.5), math.log(0.5)], [GaussianTails(1.0), GaussianTails(2.0)])
    >>> expected = (GaussianTails(1.0).hockey_stick(1.0) + GaussianTails(2.0).hockey_stick(1.0)) / 2
    >>> bool(abs(tails.hockey_stick(1.0) - expected) < 1e-15)
    True
    """

    def __init__(self, log_weights, components):
        log_weights = np.asarray(log_weights, dtype=float)
        components = tuple(components)
        if log_weights.ndim != 1 or log_weights.size == 0 or log_weights.size != len(components):
            raise ValueError("log_weights and components must be non-empty and of one length")
        if not abs(float(special.logsumexp(log_weights))) <= 1e-12:
            raise ValueError("the weights exp(log_weights) must sum to one")
        self.log_weights, self.components = log_weights, components
        self.inf_mass = math.fsum(math.exp(w) * part.inf_mass for w, part in zip(log_weights, components))
        ranges = [part.loss_range for part in components if part.loss_range[0] <= part.loss_range[1]]
        self.loss_range = ((min(low for low, _ in ranges), max(high for _, high in ranges)) if ranges
                           else (math.inf, -math.inf))
        self.atomless = all(part.atomless for part in components)
        self.log_rtol = max(part.log_rtol for part in components) + 4 * U
        self.log_ulps = max(part.log_ulps for part in components)

    def hockey_stick_error_and_slope(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All three from one evaluation of the tails (see :meth:`LossTails.hockey_stick_error_and_slope`)."""
        return self._from_tails(epsilons)

    def log_tails(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        epsilons = _epsilons(epsilons)
        parts = [part.log_tails(epsilons) for part in self.components]
        weights = self.log_weights.reshape((-1,) + (1,) * epsilons.ndim)
        log_p = log_sum_exp(weights + np.array([p for p, _ in parts]))
        log_q = log_sum_exp(weights + np.array([q for _, q in parts]))
        return log_p, log_q
