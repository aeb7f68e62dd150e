"""Certified bounds for finite-output mechanisms composed with continuous ones: exact atoms mixed over PLDs.

Write the composed loss of one direction as L = D + C, D the finite-output terms kept exact (randomized
response, discrete Laplace and Gaussian, any finite pair: those :func:`exact_part` picks) and C the rest
(the continuous mechanisms, and the finite terms that would make D too large), independent of D.  With D's
atoms (a_i, w_i) and its mass m at +infinity,

    delta(eps) = E[(1 - e^{eps - L})_+] = m + sum_i w_i delta_C(eps - a_i),

delta_C the privacy profile of C alone, read at every real argument (Google DP team 2025, Sec. 5.1 evaluates
the divergence of two composed PLDs this way).  :class:`MixedPLDEngine` composes D exactly
(:class:`afa.engines.discrete.DiscreteComposition`: atoms with position and mass error bounds) and C as discretized
PLDs (:class:`afa.engines.base.PLDEngine`: a pessimistic and an optimistic PLD, whose deltas bound delta_C from
above and below at every real argument, :mod:`afa.engines.pld`).  As delta_C is non-increasing, the upper bound takes
each atom at the top of its position interval and its mass at the top of its mass interval, the pessimistic
delta_C, the mass dropped as negligible counted whole and the rounding of the sum added; the lower bound takes
the other ends and the optimistic delta_C.  Both are certified.  Atoms whose argument eps - a_i falls off
C's grid are bounded in groups (delta_C at the group's end times its mass), so a bound costs one PLD
lookup per atom on the grid.

This keeps the finite part off the PLD's grid: a large composition of discrete mechanisms (a discrete
Laplace used 7000 times reaches eps in the thousands) would need a grid spanning all of its loss at the step
the continuous part needs, while here the grid spans the continuous part alone.
"""

from __future__ import annotations

import math

import numpy as np

from .. import budget
from .. import options as settings
from .._accurate import UNIT_ROUNDOFF as U
from ..limits import LOG_NEGLIGIBLE
from ..mechanisms.loss_tails import LossTails
from ..mechanisms.privacy_loss import PrivacyLoss
from ..numerics.atoms import CompositionTooLargeError, LossAtoms, estimated_atoms
from .base import Engine, PLDEngine, bracket_answer, checked_crossing, loss_epsilon_scale, pld_tail_mass
from .composition import ComposedLoss
from .discrete import DiscreteComposition
from .pld import composition_tilt, connect_the_dots, greedy_hull_optimistic

__all__ = ["MixedPLDEngine", "exact_part"]

#: Atoms whose shifted argument eps - a lies more than FAR below the continuous grid's first point are bounded
#: as one group: there delta_C is within e^-FAR (relatively) of 1.
FAR = 40.0
#: Relative tolerance of the crossings of the bounds with delta: far below a bracket's width (the grid's
#: discretization), and a few bound evaluations fewer than to an ulp.
CROSSING_RTOL = 1e-11
#: Width, times the PLD's tilt, of the groups of atoms whose shifted argument lies above the grid: across one,
#: the PLD's error term changes by a factor e^CHUNK at most.
CHUNK = 0.25


def exact_part(terms: list[tuple[PrivacyLoss, int]]) -> tuple[list[bool], DiscreteComposition | None]:
    """Which finite-output terms to compose exactly (True) rather than on the other terms' grid, and their
    exact composition (None if no term is chosen).

    A term on the grid costs grid points in proportion to its loss's reach (count times its atoms' range), an
    exact one multiplies the composed atoms.  Terms are taken widest reach first, each kept if the estimated
    composition (:func:`afa.numerics.atoms.estimated_atoms`) stays within ExactOptions.max_atoms (each bound of the
    mixture looks up the PLD once per atom whose shifted argument falls on the grid) and the composition of the terms
    kept so far with it can be formed in full (:class:`afa.engines.discrete.DiscreteComposition`); the rest go on the
    grid.  The query's time budget is checked between terms.

    Parameters
    ----------
    terms : list of (afa.mechanisms.privacy_loss.PrivacyLoss, int)
        Finite-output losses (``continuous`` False) and their counts.

    Returns
    -------
    flags : list of bool
        One per term, in order.
    composition : afa.engines.discrete.DiscreteComposition or None
        The exact composition of the flagged terms, composed in full (``.full``).
    """
    def reach(item):
        loss, count = item[1]
        atoms = loss.atoms
        return count * float(atoms.losses[-1] - atoms.losses[0]) if atoms.size else 0.0

    limit = settings.current().exact.max_atoms
    chosen = [False] * len(terms)
    kept: dict[PrivacyLoss, int] = {}
    composition = None
    for index, (loss, count) in sorted(enumerate(terms), key=reach, reverse=True):
        trial = {**kept, loss: kept.get(loss, 0) + count}
        atoms = [(term.atoms, uses) for term, uses in trial.items()]
        if estimated_atoms(atoms, LOG_NEGLIGIBLE) > limit:
            continue
        budget.check("composing the finite-output terms exactly")
        candidate = DiscreteComposition(atoms, ComposedLoss(trial).inf_mass)
        if candidate.full is not None and candidate.full.size <= limit:
            kept, composition, chosen[index] = trial, candidate, True
    return chosen, composition


class MixedPLDEngine(Engine):
    """Certified bounds on delta of one direction whose finite-output part is composed exactly and whose
    continuous part is a pair of discretized PLDs (see the module docstring).

    Parameters
    ----------
    composition : afa.engines.discrete.DiscreteComposition
        The exact composition of the finite-output terms kept off the grid (:func:`exact_part`).
    finite_tails : list of (afa.mechanisms.loss_tails.LossTails, int)
        The loss tails of the finite-output terms and their counts: their pessimistic PLDs on the continuous
        part's grid join that part's bases in the search for the whole composition's tilt for a query
        (:func:`afa.engines.pld.composition_tilt`); they are never composed.
    continuous : afa.engines.base.PLDEngine
        The PLD engine of the other terms.
    loss : afa.engines.composition.ComposedLoss
        The direction's composed loss: its mass at +infinity and the scale of the eps searches.

    Attributes
    ----------
    atoms : afa.numerics.atoms.LossAtoms
        The finite part's composed atoms.
    inf_mass : float
        The finite part's mass at +infinity.
    epsilon_scale : float
        The scale of the eps searches (:func:`afa.engines.base.loss_epsilon_scale`).

    Raises
    ------
    afa.numerics.atoms.CompositionTooLargeError
        The composition was not formed in full, or has more than ExactOptions.max_atoms atoms.

    Examples
    --------
    >>> import afa
    >>> acc = afa.Accountant().compose(afa.RandomizedResponse(0.75), 40)
    >>> _ = acc.compose(afa.Laplace(2.0), 10)
    >>> result = acc.epsilon_result(1e-6, method="pld")
    >>> bool(result.upper - result.lower < 1e-3 * result.value), result.certified
    (True, True)
    """

    method = "pld"
    certified = True

    def __init__(self, composition: DiscreteComposition, finite_tails: list[tuple[LossTails, int]],
                 continuous: PLDEngine, loss: ComposedLoss):
        if composition.full is None:
            raise CompositionTooLargeError("the finite-output part cannot be composed in full")
        limit = settings.current().exact.max_atoms
        if composition.full.size > limit:
            raise CompositionTooLargeError(f"the finite-output part has {composition.full.size} atoms "
                                           f"(limit {limit})")
        self.atoms: LossAtoms = composition.full
        self.inf_mass = composition.inf_mass
        self._inf_mass_error = composition.inf_mass_error
        self._total_inf_mass = loss.inf_mass
        self._continuous = continuous
        self._finite_tails = finite_tails
        self._finite_bases: dict[float, list] = {}
        self._tilts: dict[tuple, float] = {}
        self._latest: tuple[float, float] | None = None  # (tail mass, tilt) of the latest eps(delta) query
        self.epsilon_scale: float = loss_epsilon_scale(loss)
        atoms = self.atoms
        budget.reserve(10 * 8 * atoms.size, "the moved atoms and running sums of a mixed PLD")
        alpha, beta = atoms.log_mass_error
        # exp of a log-mass y is within 2u (|y| + 1) of the truth, relatively
        spread = alpha + beta * np.abs(atoms.log_masses) + 2 * U * (np.abs(atoms.log_masses) + 1)
        lowest, highest = atoms.position_bounds()
        self._upper_atoms = (highest, np.exp(atoms.log_masses + spread))
        self._lower_atoms = (lowest, np.exp(atoms.log_masses - spread))
        # Running sums of the masses from the top (the group below the grid: no differences of sums) and running
        # extremes of the moved atoms, for the groups of atoms off the continuous grid.  A sum of n non-negative
        # products, each rounded, is within (n + 2) u of the truth relatively.
        self._suffix_mass = {side: np.cumsum(masses[::-1])[::-1]
                             for side, masses in ((True, self._upper_atoms[1]), (False, self._lower_atoms[1]))}
        self._prefix_max = np.maximum.accumulate(self._upper_atoms[0])
        self._suffix_max = np.maximum.accumulate(self._upper_atoms[0][::-1])[::-1]
        self._suffix_min = np.minimum.accumulate(self._lower_atoms[0][::-1])[::-1]
        self._sum_rtol = (atoms.size + 4) * U
        self._settled: dict[int, tuple] = {}  # id(pld) -> (pld, where its delta settles)
        self._dropped = math.exp(atoms.log_dropped) if atoms.log_dropped > -math.inf else 0.0

    def _tilt(self, tail_mass: float, *, delta: float | None = None, epsilon: float | None = None) -> float:
        """The whole composition's Chernoff order for ``delta`` or saddle point at ``epsilon``: the continuous
        part's pessimistic bases and the finite terms' on the same grid (built once per ``tail_mass``; each
        answer kept)."""
        key = (tail_mass, delta, epsilon)
        if key in self._tilts:
            return self._tilts[key]
        if tail_mass not in self._finite_bases:
            uses = sum(count for _, count in self._finite_tails)
            self._finite_bases[tail_mass] = [
                (connect_the_dots(tails, self._continuous.interval, tail_mass / (4 * uses)), count)
                for tails, count in self._finite_tails]
        bases = self._continuous.bases(connect_the_dots, tail_mass) + self._finite_bases[tail_mass]
        self._tilts[key] = composition_tilt(bases, delta=delta, epsilon=epsilon)
        return self._tilts[key]

    def _mixture(self, epsilons: np.ndarray, pld, upper: bool) -> np.ndarray:
        """A bound on sum_i w_i delta_C(eps - a_i) at every eps from ``pld`` (pessimistic for the upper bound,
        optimistic for the lower), over the atoms moved to the matching ends of their intervals.

        Atoms whose x = eps - a lies on the grid or up to FAR below it are evaluated one by one.  The others
        are bounded in groups, each by the PLD's delta at the group's extreme x (delta is non-increasing) times
        the group's mass: below, one group; above the grid, where delta is the mass at +infinity plus an
        error term decaying like e^{-tilt x} (:class:`afa.engines.pld.DiscretePLD`), groups CHUNK / tilt wide up to
        the point where it has settled (:func:`_settled`), then one group.
        """
        losses, masses = self._upper_atoms if upper else self._lower_atoms
        key = id(pld)
        if key not in self._settled or self._settled[key][0] is not pld:
            if len(self._settled) >= 4 * PLDEngine.CACHED:  # the PLDs the continuous engine has let go
                self._settled.clear()
            self._settled[key] = (pld, _settled(pld))
        first, top, settled = float(pld.losses[0]) - FAR, float(pld.losses[-1]), self._settled[key][1]
        width = CHUNK / pld.tilt if pld.tilt > 0 else math.inf
        edges = np.append(np.arange(top, settled, width), settled) if settled > top else np.array([top])
        # x = eps - a is rounded once: moving it by 2u (|eps| + |a|) towards the side of the bound covers that
        toward = -2 * U if upper else 2 * U
        values = np.empty(epsilons.size)
        for index, eps in enumerate(epsilons.ravel()):
            budget.check("mixing the continuous part's PLD over the discrete atoms")
            # atoms [cuts[k + 1], cuts[k]) have x in [edges[k], edges[k + 1]); [0, cuts[-1]): x beyond them all
            cuts = np.searchsorted(self.atoms.losses, eps - edges, side="left")
            end = int(np.searchsorted(self.atoms.losses, eps - first, side="right"))   # from here: x below it
            begin = int(cuts[0])
            points, weights = [], []
            if end > begin:
                window = losses[begin:end]
                shifted = eps - window
                shifted += toward * (abs(eps) + np.abs(window))
                points.append(shifted)
                weights.append(masses[begin:end])
            # the groups above the grid in index order: x beyond ``settled`` first, then the chunks down to the top
            stops = cuts[::-1]
            starts = np.concatenate(([0], stops[:-1]))
            filled = stops > starts  # (dropping empty groups keeps the others contiguous)
            if np.any(filled):
                starts, stops = starts[filled], stops[filled]
                sums = np.add.reduceat(masses[:begin], starts)  # plain sums: no differences of running sums
                # the extreme a of each group, or one beyond it: the largest a^+ up to its end (upper bound), the
                # smallest a^- from its start on (lower bound)
                extreme = self._prefix_max[stops - 1] if upper else self._suffix_min[starts]
                points.append(eps - extreme + toward * (abs(eps) + np.abs(extreme)))
                weights.append(sums)
            if end < losses.size:  # x below the window
                extreme = self._suffix_max[end] if upper else self._suffix_min[end]
                points.append(np.array([eps - extreme + toward * (abs(eps) + abs(extreme))]))
                weights.append(np.array([self._suffix_mass[upper][end]]))
            values[index] = float(pld.delta(np.concatenate(points)) @ np.concatenate(weights)) if points else 0.0
        return values.reshape(epsilons.shape)

    def _upper(self, epsilons: np.ndarray, tail_mass: float, tilt: float | None) -> np.ndarray:
        """Certified upper bounds on delta at ``epsilons`` from the continuous part's pessimistic PLD truncated to
        ``tail_mass`` and composed at ``tilt``."""
        pessimistic = self._continuous.composed(connect_the_dots, tail_mass, tilt)
        upper = self._mixture(epsilons, pessimistic, True) * (1 + self._sum_rtol)
        return np.minimum(upper + self.inf_mass + self._inf_mass_error + self._dropped, 1.0)

    def _lower(self, epsilons: np.ndarray, tail_mass: float, tilt: float | None) -> np.ndarray:
        """Certified lower bounds on delta at ``epsilons`` from the continuous part's optimistic PLD likewise."""
        optimistic = self._continuous.composed(greedy_hull_optimistic, tail_mass, tilt)
        lower = self._mixture(epsilons, optimistic, False) * (1 - self._sum_rtol)
        return np.minimum(np.maximum(lower + max(self.inf_mass - self._inf_mass_error, 0.0), 0.0), 1.0)

    def _bounds(self, epsilons: np.ndarray, tail_mass: float, tilt: float | None) -> tuple[np.ndarray, np.ndarray]:
        """(upper, lower): :meth:`_upper` and :meth:`_lower` (the lower no higher than the upper)."""
        upper = self._upper(epsilons, tail_mass, tilt)
        return upper, np.minimum(self._lower(epsilons, tail_mass, tilt), upper)

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Midpoints and half-widths of the certified brackets: from PLDs truncated at PLDEngine.FIRST_TAIL, then,
        where an upper bound is below the truncation / PLDEngine.DELTA_TAIL (the truncation matters there), once
        more with the truncation scaled to the smallest such lower bound (upper bound, if that is 0), composed
        at the saddle point of the largest such eps; up to PLDOptions.delta_rounds rounds while they tighten.
        The better bound of each side is kept."""
        epsilons = np.asarray(epsilons, dtype=float)
        tail_mass = PLDEngine.FIRST_TAIL
        upper, lower = self._bounds(epsilons, tail_mass, None)
        for _ in range(settings.current().pld.delta_rounds):
            small = np.flatnonzero(upper < tail_mass / PLDEngine.DELTA_TAIL)
            scale = (float(np.min(lower[small])) or float(np.min(upper[small]))) if small.size else 0.0
            if scale <= 0 or pld_tail_mass(scale) >= tail_mass:
                break
            tail_mass = pld_tail_mass(scale)
            tilt = self._tilt(tail_mass, epsilon=float(np.max(epsilons[small])))
            refined_upper, refined_lower = self._bounds(epsilons[small], tail_mass, tilt)
            progress = np.any(refined_upper < upper[small] / 2)
            upper[small] = np.minimum(upper[small], refined_upper)
            lower[small] = np.maximum(lower[small], refined_lower)
            if not progress:
                break
        lower = np.minimum(lower, upper)
        return (lower + upper) / 2, (upper - lower) / 2

    def upper_delta(self, epsilons: np.ndarray, target: float | None = None) -> np.ndarray:
        """A certified upper bound on delta at ``epsilons``: with a ``target``, from the continuous part's PLDs
        as an eps(delta) query of ``target`` builds them (cached: that query reuses them); else from those of the
        latest eps(delta) query, or the upper ends of :meth:`delta` if there was none."""
        epsilons = np.asarray(epsilons, dtype=float)
        if target is not None and target > 0:
            tail_mass = pld_tail_mass(target)
            return self._upper(epsilons, tail_mass, self._tilt(tail_mass, delta=target))
        if self._latest is not None:
            return self._upper(epsilons, *self._latest)
        values, errors = self.delta(epsilons)
        return values + errors

    def epsilon_bracket(self, delta: float) -> tuple[float, float, float]:
        """(midpoint, lower, upper) of eps(delta): the crossings of the certified bounds, the continuous part's
        PLDs truncated for ``delta`` and composed at the whole composition's Chernoff order for it.

        Raises
        ------
        AccuracyError
            No finite upper bound was reached although ``delta`` exceeds the mass at +infinity; the error's
            ``bracket`` holds the certified lower bound.
        """
        tail_mass = pld_tail_mass(delta)
        tilt = self._tilt(tail_mass, delta=delta)
        self._latest = (tail_mass, tilt)

        def side(bound):
            return lambda eps: float(bound(np.array([eps]), tail_mass, tilt)[0])

        upper = checked_crossing(side(self._upper), delta, self.epsilon_scale, above=False, rtol=CROSSING_RTOL)
        near = upper if math.isfinite(upper) and upper > 0 else None
        lower = checked_crossing(side(self._lower), delta, self.epsilon_scale, above=True, near=near,
                                 rtol=CROSSING_RTOL)
        return bracket_answer(self.method, delta, self._total_inf_mass, lower, upper)


def _settled(pld) -> float:
    """A point beyond ``pld``'s grid from which its delta is within 1e-9 of its value far out (the mass at
    +infinity; a pessimistic PLD's error term still decays beyond the grid, at the rate of its tilt), found by
    doubling the distance from the last grid point, at most 2^14 of them."""
    last = float(pld.losses[-1])
    far = float(pld.delta(np.array([last + 2.0 ** 14]))[0])
    distance = 1.0
    while distance < 2.0 ** 14 and float(pld.delta(np.array([last + distance]))[0]) > far * (1 + 1e-9) + 1e-300:
        distance *= 2
    return last + distance
