"""Compositions of finite privacy losses too large to enumerate in full (:class:`DiscreteComposition`).

A composition sum_t k_t L_t of finite losses (:class:`afa.numerics.atoms.LossAtoms`) answers each query with what it
needs: an eps(delta) query drops atoms lighter than delta e^-PRUNE (counting their mass in the error), or
evaluates two groups of terms against each other (:mod:`afa.engines.two_factor`), or composes only the atoms whose
loss can exceed a threshold just below the crossing, found from a Chernoff bound on the composition's
cumulant generating function; a delta(eps) query composes the atoms that can exceed the smallest eps.  The
full composition is formed only when asked for.  Hopeless compositions are refused early
(:class:`afa.numerics.atoms.CompositionTooLargeError`).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import budget
from .. import options as settings
from .._accurate import log_sum_exp
from ..limits import LOG_NEGLIGIBLE
from ..numerics.atoms import (
    CompositionTooLargeError,
    LossAtoms,
    above_rounding,
    clearly_beyond,
    compose_terms,
    default_mass_error,
    epsilon_bounds_for_delta,
    estimated_atoms,
    hockey_stick_with_error,
    max_atoms,
    pair_allowance,
)
from .two_factor import TwoFactorSum

#: An eps(delta) query may also drop atoms lighter than delta e^-PRUNE (in all, far below delta's rounding).
PRUNE = 80.0
#: The two-group evaluation of an eps(delta) query first drops atoms lighter than delta e^-SPLIT_PRUNE, and keeps
#: that split when the mass it drops is below delta e^-SPLIT_DROPPED (else it drops only below delta e^-PRUNE).
SPLIT_PRUNE, SPLIT_DROPPED = 40.0, 25.0
#: Uses of the lower loss up to which an eps(delta) query of one two-atom term first tries the top of its binomial
#: law (below TOP_BINOMIAL atoms).
TOP_USES = 16
#: The first cutoff of a delta(eps) query answered in two factors (lowered while the dropped mass is not
#: negligible next to the answer).
FIRST_DELTA_CUTOFF = -200.0
class DiscreteComposition:
    """sum_t k_t L_t for finite losses L_t: what each query needs, or in full when that was asked for and fits.

    Parameters
    ----------
    terms : list of (LossAtoms, int)
        Each distinct finite loss and its count.
    inf_mass : float
        The composed mass at +infinity.

    The full composition (:attr:`full`, composed when first asked for: by delta(eps) queries, and by the
    Gaussian mixture and the mixed PLD) drops only atoms lighter than e^LOG_NEGLIGIBLE.  Without it, or when it
    exceeds the pair or atom limits (:class:`afa.ExactOptions`), a query composes only what it needs: an
    eps(delta) query drops atoms lighter than delta e^-PRUNE (or evaluates two groups of terms against each
    other, :meth:`two_factor`), and if that is still too large, composes only the atoms
    that can exceed a threshold (each intermediate keeps what can still reach it, given the
    largest loss the other uses add), lowering the threshold from the top until the crossing
    lies above it; a delta(eps) query composes the atoms that can exceed the smallest eps.
    A query that needs more than the limits raises :class:`CompositionTooLargeError`.
    """

    #: Thresholds tried below the top, as fractions of the loss range: 2^-FIRST_LEVEL, then doubling.
    FIRST_LEVEL = 24
    #: Bisections of the threshold between the last two levels when the lower one has too many atoms.
    REFINEMENTS = 10

    #: Compose in two groups (:class:`afa.engines.two_factor.TwoFactorSum`) when each fits the atom limit and the whole
    #: composition would not, or would have more than this many atoms and each group at most 1/TWO_FACTOR_GAIN
    #: of that.
    TWO_FACTOR_ABOVE = 1 << 16
    TWO_FACTOR_GAIN = 16.0
    #: Up to this many distinct terms every split into two groups is tried; beyond, a greedy one.
    EXHAUSTIVE_SPLIT = 10

    def __init__(self, terms: list[tuple[LossAtoms, int]], inf_mass: float):
        self.terms = [(atoms, int(count)) for atoms, count in terms]
        self._two_factors: dict[float, TwoFactorSum | None] = {}
        self.inf_mass = float(inf_mass)
        self.inf_mass_error = default_mass_error(self.inf_mass)
        self.empty = any(atoms.size == 0 for atoms, _ in self.terms)
        if self.empty:
            self.top = self.bottom = 0.0
        else:
            self.top = above_rounding(math.fsum(count * atoms.top for atoms, count in self.terms))
            self.bottom = math.fsum(count * float(atoms.losses[0] - atoms.loss_errors[0])
                                    for atoms, count in self.terms)
        self._cached: dict[float, tuple[float, LossAtoms]] = {}
        self._heavy_kept: tuple[float, LossAtoms] | None = None
        self._full: LossAtoms | None = None
        self._full_tried = False

    @property
    def full(self) -> LossAtoms | None:
        """Every atom heavier than e^LOG_NEGLIGIBLE, composed when first asked for (None when that does not fit
        the limits).  An eps(delta) query composes only what its delta needs unless this was composed
        already."""
        if not self._full_tried:
            try:
                self._full = self.compose(-math.inf, LOG_NEGLIGIBLE)
            except CompositionTooLargeError:
                self._full = None
            self._full_tried = True
        return self._full

    def compose(self, threshold: float = -math.inf, log_cutoff: float = LOG_NEGLIGIBLE) -> LossAtoms:
        """The composed atoms, complete above ``threshold`` (-inf: all), atoms lighter than
        e^``log_cutoff`` dropped into ``log_dropped``."""
        if self.empty:
            return LossAtoms(np.empty(0), np.empty(0))
        if not self.terms:
            return LossAtoms(np.zeros(1), np.zeros(1))
        if threshold == -math.inf and self.log_multisets > math.log(max_atoms()):
            estimate = self.estimated_size(log_cutoff)
            if clearly_beyond(estimate, max_atoms()):
                raise CompositionTooLargeError(
                    f"exact discrete composition would have about {estimate:.2g} atoms of mass above "
                    f"e^{log_cutoff:.4g} (limit {max_atoms()})")
        tops = [count * atoms.top for atoms, count in self.terms]
        with pair_allowance():
            return self._compose(threshold, log_cutoff, tops)

    @functools.cached_property
    def log_multisets(self) -> float:
        """log of the number of distinct sums the composition can have at most: the product over its terms of the
        multisets of ``count`` of the term's atoms, C(count + size - 1, size - 1) (no estimate is needed below
        the atom limit)."""
        return math.fsum(math.lgamma(count + atoms.size) - math.lgamma(count + 1) - math.lgamma(atoms.size)
                         for atoms, count in self.terms if atoms.size > 1)

    def estimated_size(self, log_cutoff: float) -> float:
        """A rough number of composed atoms heavier than e^``log_cutoff`` (:func:`estimated_atoms`)."""
        return estimated_atoms(self.terms, log_cutoff)

    def _compose(self, threshold: float, log_cutoff: float, tops: list[float]) -> LossAtoms:
        return compose_terms(self.terms, threshold, log_cutoff, tops)

    def atoms_above(self, threshold: float, log_cutoff: float = LOG_NEGLIGIBLE) -> LossAtoms:
        """Atoms complete above ``threshold`` (the full composition when it fits), lighter ones than
        e^``log_cutoff`` dropped."""
        if self._full is not None:
            return self._full
        cached = self._cached.get(log_cutoff)
        if cached is not None and cached[0] <= threshold:
            return cached[1]
        budget.check("composing the atoms above a threshold")
        atoms = self.compose(threshold, log_cutoff)
        self._cached = {log_cutoff: (threshold, atoms)}
        return atoms

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(delta, error) at each eps (refuses with CompositionTooLargeError if the atoms above the
        smallest eps are too many)."""
        epsilons = np.asarray(epsilons, dtype=float)
        if self.full is None and epsilons.size:
            answer = self._two_factor_delta(epsilons)
            if answer is not None:
                return answer
        with pair_allowance(0.5):
            atoms = self.atoms_above(float(np.min(epsilons)) if epsilons.size else math.inf)
        return hockey_stick_with_error(atoms, epsilons, self.inf_mass, self.inf_mass_error)

    def _two_factor_delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(delta, error) from the two-factor evaluation, its cutoff lowered until the mass it drops is
        negligible next to the smallest value (below e^-PRUNE of it) or the cutoff reaches LOG_NEGLIGIBLE;
        the last answer when a lower cutoff no longer splits; None when no split serves."""
        log_cutoff, answer = FIRST_DELTA_CUTOFF, None
        while True:
            split = self.two_factor(log_cutoff)
            if split is None:
                return answer
            answer = hockey_stick_with_error(split, epsilons, self.inf_mass, self.inf_mass_error)
            values = answer[0]
            smallest = float(np.min(values))
            if log_cutoff <= LOG_NEGLIGIBLE or (smallest > 0 and split.log_dropped <= math.log(smallest) - PRUNE):
                return answer
            wanted = math.log(smallest) - PRUNE if smallest > 0 else LOG_NEGLIGIBLE
            log_cutoff = max(LOG_NEGLIGIBLE, min(wanted, log_cutoff - PRUNE / 2))

    def upper_delta(self, epsilons: np.ndarray, target: float) -> np.ndarray:
        """An upper bound on delta at each eps (value plus error bound) from the atoms above the smallest eps
        heavier than ``target`` e^-PRUNE; the lighter ones count whole in the error, so the bound is looser
        than :meth:`delta`'s but needs far fewer atoms when only "is delta <= target?" is asked (refuses with
        CompositionTooLargeError if even those are too many)."""
        epsilons = np.asarray(epsilons, dtype=float)
        if target <= 0 or not epsilons.size:
            values, errors = self.delta(epsilons)
            return values + errors
        log_cutoff = max(LOG_NEGLIGIBLE, math.log(target) - PRUNE)
        split = self.two_factor(log_cutoff) if self.full is None else None
        if split is not None:
            values, errors = hockey_stick_with_error(split, epsilons, self.inf_mass, self.inf_mass_error)
            return values + errors
        with pair_allowance(0.5):
            atoms = self.atoms_above(float(np.min(epsilons)), log_cutoff)
        values, errors = hockey_stick_with_error(atoms, epsilons, self.inf_mass, self.inf_mass_error)
        return values + errors

    def epsilon_bounds(self, delta: float) -> tuple[float, float, float]:
        """(estimate, lower, upper) of eps(delta) (:func:`epsilon_bounds_for_delta`).

        From the full enumeration, the atoms lighter than delta e^-PRUNE are dropped first (their mass joins the
        error bound).  Without it: atoms lighter than delta e^-PRUNE dropped, all of them if
        that fits (or the two-group evaluation, :meth:`two_factor`), else above thresholds
        anchor - span 2^-level for level FIRST_LEVEL down to 1, the anchor the smaller of the top
        and the Chernoff ceiling (:meth:`chernoff_epsilon`) and span its distance to the bottom
        (thresholds top - (top - bottom) 2^-level above the ceiling are composed first, without
        evaluating delta there, to refuse early where the atoms are too many already); at
        the first threshold where delta - error is still above the target, the crossing lies above
        it and the atoms composed there answer it.  When a threshold has too many atoms, the one
        between it and the last point known above the crossing is bisected (REFINEMENTS times).
        """
        if self._full is not None:
            heavy = self.heavy_atoms(max(LOG_NEGLIGIBLE, math.log(delta) - PRUNE))
            return epsilon_bounds_for_delta(heavy, self.inf_mass, delta, 0.0, self.inf_mass_error)
        with pair_allowance(0.5):
            return self._partial_epsilon_bounds(delta)

    def heavy_atoms(self, log_cutoff: float) -> LossAtoms:
        """The full composition without the atoms lighter than e^``log_cutoff`` (into its dropped mass; kept
        for the last cutoff asked)."""
        if self._heavy_kept is None or self._heavy_kept[0] != log_cutoff:
            if self.full is None:
                raise CompositionTooLargeError("the full composition does not fit the limits")
            self._heavy_kept = (log_cutoff, self.full.without_light(log_cutoff))
        return self._heavy_kept[1]

    def _partial_epsilon_bounds(self, delta: float) -> tuple[float, float, float]:
        log_cutoff = max(LOG_NEGLIGIBLE, math.log(delta) - PRUNE)
        split = self._split_for(delta)
        if split is not None:
            return epsilon_bounds_for_delta(split, self.inf_mass, delta, 0.0, self.inf_mass_error,
                                            self.chernoff_epsilon(delta))
        binomial = len(self.terms) == 1 and self.terms[0][0].size == 2
        if binomial:
            answer = self._binomial_top_bounds(delta, log_cutoff)
            if answer is not None:
                return answer
        try:
            # eps >= 0 needs only the atoms above 0: the binomial law of one two-atom term then starts there (other
            # compositions would trim every intermediate for it)
            atoms = self.atoms_above(0.0 if binomial else -math.inf, log_cutoff)
        except CompositionTooLargeError:
            atoms = None
        if atoms is not None:
            return epsilon_bounds_for_delta(atoms, self.inf_mass, delta, 0.0, self.inf_mass_error)
        ceiling = self.chernoff_epsilon(delta)
        # Thresholds above the Chernoff ceiling lie above the crossing: composing the atoms above them, cheap near
        # the top, only shows early when there are too many (then also above every threshold below the crossing).
        above = None  # the lowest point known to lie above the crossing
        span = max(self.top - self.bottom, 1e-300)
        if ceiling < self.top:
            levels = (self.top - span * 2.0 ** -level for level in range(self.FIRST_LEVEL, 0, -1))
            for threshold in [t for t in levels if t > ceiling and t > 0] + ([ceiling] if ceiling > 0 else []):
                try:
                    self.atoms_above(threshold, log_cutoff)
                except CompositionTooLargeError as error:
                    raise CompositionTooLargeError(
                        f"exact discrete composition: the atoms above eps = {threshold:.6g} are too many, and "
                        f"eps({delta:.3g}) lies below {ceiling:.6g} (a Chernoff bound)") from error
            above = ceiling
        # Below the ceiling the levels hang from it.
        anchor = min(self.top, ceiling)
        span = max(anchor - self.bottom, 1e-300)
        for level in range(self.FIRST_LEVEL, 0, -1):
            threshold = anchor - span * 2.0 ** -level
            if threshold <= 0:
                break
            try:
                answer = self._bounds_above(threshold, delta, log_cutoff)
            except CompositionTooLargeError:
                if above is None:
                    raise
                return self._refined_bounds(threshold, above, delta, log_cutoff)
            if answer is not None:
                return answer
            above = threshold
        try:
            atoms = self.atoms_above(0.0, log_cutoff)
        except CompositionTooLargeError:
            if above is None:
                raise
            return self._refined_bounds(0.0, above, delta, log_cutoff)
        return epsilon_bounds_for_delta(atoms, self.inf_mass, delta, 0.0, self.inf_mass_error)

    def _binomial_top_bounds(self, delta: float, log_cutoff: float) -> tuple[float, float, float] | None:
        """eps(delta) bounds of one two-atom term's binomial law from its top TOP_USES + 1 atoms (j >= n -
        TOP_USES uses of the higher loss, which :meth:`afa.numerics.atoms.LossAtoms.power` forms in Python floats)
        when the crossing provably lies above the lowest of them (its verified lower bound does), else None.
        Tried only when Chernoff's bound on the binomial tail, P(J >= a) <= e^(-n KL(a/n || p)) W^n, leaves that
        tail's mass above delta."""
        (atoms, count), = self.terms
        if count <= TOP_USES or self.inf_mass > 0 or not atoms.losses[1] > atoms.losses[0] > -math.inf:
            return None
        log_low, log_high = float(atoms.log_masses[0]), float(atoms.log_masses[1])
        log_total = float(np.logaddexp(log_low, log_high))
        p, share = math.exp(log_high - log_total), (count - TOP_USES) / count
        if share > p:
            divergence = share * math.log(share / p) + (1 - share) * math.log((1 - share) / (1 - p))
            if count * (log_total - divergence) + 1.0 < math.log(delta):  # (a margin of e for rounding)
                return None
        threshold = float(count * atoms.losses[0] + (count - TOP_USES) * (atoms.losses[1] - atoms.losses[0]))
        threshold -= 1e-9 * (1.0 + abs(threshold))  # (below that atom)
        if not threshold > 0:
            return None
        # delta above the threshold is the top atoms' alone: a lower bound verified above the threshold (a point
        # where delta less its error exceeds delta, or the slope's bound from one) shows that the crossing lies
        # there, and then the bracket holds for the whole law (else the floor would stand for the lower bound)
        answer = epsilon_bounds_for_delta(self.atoms_above(threshold, log_cutoff), self.inf_mass, delta, threshold,
                                          self.inf_mass_error)
        return answer if answer[1] > threshold else None

    def chernoff_epsilon(self, delta: float) -> float:
        """An eps at or above eps(delta), from the Chernoff bound on the finite part (+inf if none is found).

        With K(lambda) = sum_t k_t log sum_i w_ti e^(lambda l_ti) and (1 - e^(-x))_+ <= c e^(lambda x),
        c = lambda^lambda / (1 + lambda)^(1 + lambda), delta(eps) - inf_mass <= c e^(K(lambda) - lambda eps)
        for every lambda > 0; the smallest eps at which that reaches delta - inf_mass, over lambda, raised by
        1e-9 relatively for the rounding of K.  It only steers the threshold search of eps(delta) (whose
        answers are verified), so the optimisation over lambda need not be exact.
        """
        target = delta - self.inf_mass
        if self.empty or not target > 0 or not self.terms:
            return math.inf
        from scipy.optimize import minimize_scalar

        log_target = math.log(target)
        terms = [(atoms.losses, atoms.log_masses, count) for atoms, count in self.terms if atoms.size]

        def ceiling(log_lambda: float) -> float:
            lam = math.exp(log_lambda)
            cumulant = math.fsum(count * float(log_sum_exp(log_masses + lam * losses))
                                 for losses, log_masses, count in terms)
            log_c = lam * math.log(lam) - (1 + lam) * math.log1p(lam)
            value = (cumulant + log_c - log_target) / lam
            return value if math.isfinite(value) else math.inf

        found = minimize_scalar(ceiling, bounds=(math.log(1e-8), math.log(1e8)), method="bounded",
                                options={"xatol": 1e-3})
        best = min(float(found.fun), ceiling(float(found.x)))
        return best + 1e-9 * abs(best) + 1e-12 if math.isfinite(best) else math.inf

    def two_factor(self, log_cutoff: float) -> TwoFactorSum | None:
        """The composition as two groups of terms, each composed in full (atoms lighter than
        e^``log_cutoff`` dropped, or the split already composed at the nearest lower cutoff), evaluated without
        forming their pairs; None when the whole
        composition is small, no split makes both groups much smaller than it
        (TWO_FACTOR_ABOVE, TWO_FACTOR_GAIN), or a group cannot be composed."""
        if log_cutoff in self._two_factors:
            return self._two_factors[log_cutoff]
        # A split composed at a lower cutoff holds every atom this one would (and a smaller dropped mass).
        lower = [cutoff for cutoff, split in self._two_factors.items() if split is not None and cutoff < log_cutoff]
        if lower:
            return self._two_factors[max(lower)]
        split = None
        allowed = settings.current().exact.two_factor and len(self.terms) > 1 and not self.empty
        groups = self._split_terms(log_cutoff) if allowed else None
        if groups is not None:
            budget.check("composing two groups of discrete mechanisms")
            try:
                with pair_allowance():
                    factors = [compose_terms(group, -math.inf, log_cutoff) for group in groups]
                split = TwoFactorSum(*factors)
            except CompositionTooLargeError:
                split = None
        self._two_factors[log_cutoff] = split
        return split

    def _split_for(self, delta: float) -> TwoFactorSum | None:
        """The two-group evaluation serving eps(``delta``) (:meth:`two_factor`): atoms lighter than
        delta e^-SPLIT_PRUNE dropped, or, when the mass that drops is not below delta e^-SPLIT_DROPPED, those
        lighter than delta e^-PRUNE (the dropped mass counts whole in every error bound either way)."""
        log_delta = math.log(delta)
        split = self.two_factor(max(LOG_NEGLIGIBLE, log_delta - SPLIT_PRUNE))
        if split is not None and split.log_dropped > log_delta - SPLIT_DROPPED:
            split = self.two_factor(max(LOG_NEGLIGIBLE, log_delta - PRUNE))
        return split

    def _split_terms(self, log_cutoff: float) -> tuple[list, list] | None:
        """The two groups of terms with the smallest larger estimated size, if worth splitting."""
        whole = self.estimated_size(log_cutoff)
        if whole <= min(self.TWO_FACTOR_ABOVE, max_atoms()):
            return None
        n = len(self.terms)
        if n <= self.EXHAUSTIVE_SPLIT:
            candidates = []
            for mask in range(1, 1 << (n - 1)):
                first = [term for i, term in enumerate(self.terms) if mask >> i & 1]
                second = [term for i, term in enumerate(self.terms) if not mask >> i & 1]
                candidates.append((first, second))
        else:
            ranked = sorted(self.terms, key=lambda term: -estimated_atoms([term], log_cutoff))
            first, second = [], []
            for term in ranked:
                smaller = first if estimated_atoms(first, log_cutoff) <= estimated_atoms(second, log_cutoff) else second
                smaller.append(term)
            candidates = [(first, second)]
        best, best_size = None, math.inf
        for first, second in candidates:
            size = max(estimated_atoms(first, log_cutoff), estimated_atoms(second, log_cutoff))
            if size < best_size:
                best, best_size = (first, second), size
        # Worth it when the whole composition is beyond the atom limit, or far larger than either group.
        if best is None or best_size > max_atoms() or (whole <= max_atoms()
                                                        and best_size > whole / self.TWO_FACTOR_GAIN):
            return None
        return best

    def _bounds_above(self, threshold: float, delta: float, log_cutoff: float) -> tuple[float, float, float] | None:
        """eps(delta) bounds from the atoms above ``threshold`` if the crossing provably lies above it, else None."""
        atoms = self.atoms_above(threshold, log_cutoff)
        value, error = hockey_stick_with_error(atoms, np.array([threshold]), self.inf_mass, self.inf_mass_error)
        if value[0] - error[0] > delta:
            return epsilon_bounds_for_delta(atoms, self.inf_mass, delta, threshold, self.inf_mass_error)
        return None

    def _refined_bounds(self, low: float, high: float, delta: float, log_cutoff: float) -> tuple[float, float, float]:
        """Bisect the threshold between ``low`` (too many atoms above it) and ``high`` (the crossing lies
        below it) for one close enough under the crossing to compose; CompositionTooLargeError if none is."""
        for _ in range(self.REFINEMENTS):
            middle = 0.5 * (low + high)
            try:
                answer = self._bounds_above(middle, delta, log_cutoff)
            except CompositionTooLargeError:
                low = middle
                continue
            if answer is not None:
                return answer
            high = middle
        raise CompositionTooLargeError(
            f"exact discrete composition: the atoms above eps = {low:.6g} are too many, and eps({delta:.3g}) "
            f"lies below {high:.6g}")
