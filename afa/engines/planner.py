"""The engine planner: which engines answer a composition's queries, how they are built, in what order.

A :class:`Planner` serves one composition -- a fixed multiset of mechanisms under one neighbouring relation,
with the options it is queried under.  It owns

* building each method's engines (:mod:`afa.engines.base`) for each distinct direction of the composed loss, once,
  with the discretized PLD's grid policy (:meth:`Planner.pld_interval`);
* the policy of ``method="auto"``: closed forms first where they apply, then relative accuracy (the contour),
  then the fallbacks, each with a share of the time left (:class:`afa.options.AutoOptions`); and
* the record of every attempt (:class:`afa.results.Attempt`), returned with the answer or carried by the
  refusal.

Only an engine's declared refusal -- :class:`afa.AccuracyError` (a :class:`afa.BudgetExceededError`
included) or :class:`afa.UnsupportedCompositionError` -- moves ``auto`` on; any other exception propagates.
The accountant (:mod:`afa.accountant`) holds the composition, validates queries and assembles results; a new
planner serves each state of it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from .. import _validation as check
from .. import budget as budgets
from .. import options as settings
from ..budget import BudgetExceededError
from ..limits import INTERVAL_RANGE
from ..mechanisms.catalog import Mechanism
from ..mechanisms.noise_pair import NoiseMixturePair
from ..mechanisms.pairs import QuadraticGaussianPair
from ..options import METHODS, Options
from ..results import AccuracyError, Attempt, UnsupportedCompositionError
from .base import (
    CertainRevealEngine,
    CertifiedEngine,
    ClosedFormEngine,
    ContourEngine,
    Engine,
    ExactEngine,
    PLDEngine,
    QuadratureEngine,
    gaussian_epsilon_guess,
    loss_epsilon_scale,
)
from .composition import ComposedLoss
from .contour import ContourInversion, NodeBudgetError
from .laplace_top import LaplaceTopEngine
from .mixed_pld import MixedPLDEngine, exact_part
from .pld import PLDTooLargeError
from .quadratic import QuadraticComposition
from .step_recursion import (
    FAR_REACH,
    FAR_USES,
    MAX_DOUBLING_USES,
    MAX_REACH,
    MAX_USES,
    DoublingRecursion,
    StepRecursion,
)

#: Default grid step of method='pld' (at most), and the bulk of the composed loss it must fit in PLD_POINTS points.
DEFAULT_INTERVAL, PLD_SPREAD, PLD_POINTS = 1e-4, 40.0, 2 ** 22
#: The grid points of that bulk when every term is finite and composed exactly before it is put on the grid: the
#: grid's rounding then happens once per distinct term, not once per use.
EXACT_POWER_POINTS = 2 ** 18
#: Grid points per standard deviation of the narrowest term's loss (at least) under the default interval.
STEP_RESOLUTION = 20.0
#: Engine key of the contour method with the wide node budget (ContourOptions.wide_numeric_nodes).
WIDE_CONTOUR = "contour (wide node budget)"
#: Engine key of the discretized PLD on a grid AutoOptions.coarse_grid times coarser, which 'auto' tries before a
#: PLD of more than LARGE_PLD_POINTS grid points.
COARSE_PLD = "pld (coarse grid)"
LARGE_PLD_POINTS = 2 ** 21
#: Engine key of method 'exact' served by the step recursion (:class:`afa.engines.step_recursion.StepRecursion`),
#: which 'auto' tries after the contour (faster wherever it answers) and before the contour's wide retry.
STEP_RECURSION = "exact (step recursion)"
#: An eps(delta) query of at most this many uses of noise pairs goes to the step recursion first (some 10-25 ms:
#: no more than the contour takes to answer, or to refuse for its node budget); a delta(eps) query, which may lie
#: far out in the tail, stays the contour's, whose error stays relative there.
RECURSION_FIRST = 3
#: An eps(delta) query of up to RECURSION_EARLY uses whose recursions' reach (the loss's pile-up, count *
#: log(1/(1 - q)) for subsampled Gaussians) is at most PILED_REACH, and at most PILED_NOISE over their noise
#: ratio (sigma / sensitivity), goes to the step recursion first too: there the contour refuses for its node
#: budget.  Measured at delta 1e-5 and 1e-12 (4 to 40 uses): sigma 0.3 to 3, reach up to 0.121, and sigma 4 and 6
#: up to 0.101: all refused (in 10 to 225 ms, median 35 ms); it answers from reach 0.12 at sigma = 4, 0.16 at
#: sigma = 6, 0.08 at sigma = 10.
PILED_REACH, PILED_NOISE = 0.11, 0.4
#: method='auto' tries a step recursion of at most this many uses right after the default contour; one of more
#: uses only after the contour with its wide node budget, just before the PLD (its time grows with the uses).
RECURSION_EARLY = 40
#: Uses of one noise pair (without Gaussians) from which the recursion doubles the count
#: (:class:`afa.engines.step_recursion.DoublingRecursion`) instead of adding one use per level: beyond
#: RECURSION_EARLY (up to there, use by use is about as fast, to 1e-12 instead of 1e-9).
DOUBLING_FROM = RECURSION_EARLY + 1
#: Engine key of method 'exact' served by the doubling recursion beyond its fast reach, up to
#: :data:`afa.engines.step_recursion.FAR_REACH` (:meth:`Planner.far_recursion`): 'auto''s last resort for an
#: eps(delta) or delta(eps) query after a certified bracket wider than AutoOptions.retry_rtol (seconds where the
#: PLD takes a fraction of one, for a stated relative error near 1e-7 where the bracket was 3e-4 to 1 wide).
FAR_DOUBLING = "exact (doubling, far reach)"
#: Engine key of method 'exact' served by the Laplace top series (:class:`afa.engines.laplace_top.LaplaceTopEngine`),
#: which 'auto' tries first for an eps(delta) query it reaches (delta below its value at eps = (k - 2) a).
LAPLACE_TOP = "exact (Laplace top)"
#: The methods a composition of Gaussians alone answers from its closed form without building engines.
CLOSED_FORM_METHODS = ("auto", "exact")
#: The least first bracket of the step recursion's eps searches (its stages are fitted up to the eps asked).
RECURSION_SCALE = 1e-3


class Answer(NamedTuple):
    """What :meth:`Planner.run` returns.

    Attributes
    ----------
    name : str
        The engine key that answered (a method name, or :data:`WIDE_CONTOUR`; :func:`label` gives the method).
    answer : object
        What the query returned on that method's engines.
    attempts : tuple of afa.results.Attempt
        Every engine tried, in order, the one that answered last.
    certified : bool
        Whether the answering engines' bounds are proved.
    """

    name: str
    answer: Any
    attempts: tuple
    certified: bool


def label(name: str) -> str:
    """The method name a result reports for engine key ``name`` (the wide-budget contour is the contour, the
    coarse-grid PLD the PLD)."""
    return {WIDE_CONTOUR: "contour", COARSE_PLD: "pld", STEP_RECURSION: "exact", FAR_DOUBLING: "exact",
            LAPLACE_TOP: "exact"}.get(name, name)


def closed_form_mu(counts: Mapping[Mechanism, int], gaussian_mu: Mapping[Mechanism, float],
                   method: str) -> float | None:
    """mu = sqrt(sum_i k_i mu_i^2) of a composition when every composed mechanism's pair is a pure Gaussian pair,
    no mass is truncated and ``method`` is one of CLOSED_FORM_METHODS (the closed form is what "exact" computes
    and what "auto" chooses first); else None.

    Parameters
    ----------
    counts : mapping of Mechanism to int
        The composed mechanisms and their uses.
    gaussian_mu : mapping of Mechanism to float
        mu of the composed mechanisms whose pair is a pure Gaussian pair (others absent).
    method : str
        The method asked.

    Returns
    -------
    float or None

    Examples
    --------
    >>> import afa
    >>> from afa.engines.planner import closed_form_mu
    >>> closed_form_mu({afa.Gaussian(2.0): 4}, {afa.Gaussian(2.0): 0.5}, "auto")
    1.0
    >>> closed_form_mu({afa.Gaussian(2.0): 4}, {afa.Gaussian(2.0): 0.5}, "pld") is None
    True
    """
    if method not in CLOSED_FORM_METHODS or not counts:
        return None
    total = 0.0
    for mechanism, count in counts.items():
        mu = gaussian_mu.get(mechanism)
        if mu is None or mechanism.truncated_mass > 0:
            return None
        total += count * mu * mu
    return math.sqrt(total) if total > 0 else None


class Planner:
    """Builds and orders the engines that answer one composition's queries.

    Parameters
    ----------
    neighboring : str
        The neighbouring relation.
    counts : mapping of Mechanism to int
        Each distinct mechanism with its number of uses (copied; the planner never changes it).
    losses : mapping of Mechanism to tuple of afa.mechanisms.privacy_loss.PrivacyLoss
        Each mechanism's privacy losses in the two directions (``Mechanism.privacy_losses(neighboring)``).
    gaussian_mu : mapping of Mechanism to float
        mu of the mechanisms whose losses are the Gaussian mechanism's
        (:attr:`afa.mechanisms.privacy_loss.PrivacyLoss.gaussian_mu`: a pure Gaussian pair).
    options : Options
        The settings the engines are built and queried under.
    value_discretization_interval : float, optional
        The user's grid step for ``method="pld"`` (None: :meth:`pld_interval` chooses one).

    Notes
    -----
    Engines are built on first use and kept; so is what ``auto`` learnt from earlier queries (a method that
    cannot serve the composition, a contour that failed even with its wide node budget).

    Examples
    --------
    >>> import afa
    >>> acc = afa.Accountant().compose(afa.Gaussian(sigma=10.0), times=100).compose(afa.Laplace(1.0), times=3)
    >>> planner = acc.planner
    >>> planner.first_choice(), planner.distinct_directions  # symmetric mechanisms: one direction to evaluate
    ('contour', [0])
    >>> [type(engine).__name__ for engine in planner.engines("pld")]
    ['PLDEngine']
    """

    def __init__(self, neighboring: str, counts: Mapping[Mechanism, int], losses: Mapping[Mechanism, tuple],
                 gaussian_mu: Mapping[Mechanism, float], options: Options,
                 value_discretization_interval: float | None = None):
        self.neighboring = neighboring
        self.counts = dict(counts)
        self.losses = {mechanism: losses[mechanism] for mechanism in self.counts}
        self.gaussian_mu = {mechanism: mu for mechanism, mu in gaussian_mu.items() if mechanism in self.counts}
        self.options = options
        self.value_discretization_interval = value_discretization_interval
        self._engines: dict[str, list] = {}
        self._unbuildable: dict[str, str] = {}  # methods whose engines refused this composition, and why
        self._contour_demoted = False  # the wide contour failed a query: later ones try the PLD before the contour
        self._quadratic: dict[int, QuadraticComposition | None] = {}  # direction -> quadratic_composition's answer
        #: direction -> step_recursion's answer
        self._recursions: dict[int, StepRecursion | DoublingRecursion | None] = {}
        self._far_recursions: dict[int, DoublingRecursion | None] = {}  # direction -> far_recursion's answer
        #: (finite-output losses, counts) of a direction -> exact_part's answer (directions often share them)
        self._exact_parts: dict[tuple, tuple] = {}
        #: (loss tails, count) -> exact power of the PLD engines (:class:`afa.engines.base.PLDEngine`'s ``powers``)
        self._exact_powers: dict = {}

    # -- the composition ---------------------------------------------------
    def composed(self, index: int, keep: Callable[[Mechanism], bool] = lambda mechanism: True) -> ComposedLoss:
        """The composed loss of direction ``index`` (0 or 1) over the mechanisms ``keep`` accepts."""
        terms: dict = {}
        for mechanism, count in self.counts.items():
            if keep(mechanism):
                loss = self.losses[mechanism][index]
                terms[loss] = terms.get(loss, 0) + count
        return ComposedLoss(terms)

    @property
    def distinct_directions(self) -> list[int]:
        """Direction indices to evaluate: [0] if every mechanism is symmetric, else [0, 1]."""
        same = all(first is second for first, second in self.losses.values())
        return [0] if same else [0, 1]

    def loss_reach(self) -> float:
        """An upper bound on every direction's composed finite loss (+inf when one is unbounded above): beyond
        it delta(eps) is the mass at +infinity alone."""
        return max(self.composed(index).loss_max for index in self.distinct_directions)

    @property
    def truncated_mass(self) -> float:
        """An upper bound on the mass the composition's truncated mechanisms (DiscreteGaussian) send to
        +infinity: sum_i k_i m_i >= 1 - prod_i (1 - m_i)^k_i."""
        return float(sum(count * mechanism.truncated_mass for mechanism, count in self.counts.items()))

    def single_use(self) -> Mechanism | None:
        """The mechanism if the composition is one use of one mechanism with a continuous loss (a closed
        form from its loss tails), else None."""
        if len(self.counts) == 1:
            (mechanism, count), = self.counts.items()
            if count == 1 and mechanism not in self.gaussian_mu and any(loss.continuous
                                                                         for loss in self.losses[mechanism]):
                return mechanism
        return None

    def certain_reveal(self) -> bool:
        """Whether some direction's composed loss is +infinity with probability 1 (a mechanism with no finite
        loss): then delta = 1 at every eps, whatever the other uses."""
        return any(self.composed(index).log_finite_mass == -math.inf for index in self.distinct_directions)

    def exact_available(self, scheduled: bool = True) -> bool:
        """Whether method="exact" can serve the composition: Gaussian and finite-output mechanisms only, one
        use of a single mechanism, quadratic losses sharing their curvature with Gaussians
        (:meth:`quadratic_composition`), or a certain reveal; and, unless ``scheduled`` is False (as 'auto''s
        first choice: 'auto' schedules these itself), a few uses of Gaussian noise pairs (:meth:`step_recursion`;
        beyond its reach one pair's many uses, :meth:`far_recursion`) or uses of one Laplace loss (near their top
        only, :meth:`laplace_top`)."""
        return self.certain_reveal() or self.single_use() is not None or all(
            m in self.gaussian_mu or not losses[0].continuous for m, losses in self.losses.items()) or all(
            self.quadratic_composition(index) is not None for index in self.distinct_directions) or (
            scheduled and (self.recursion_available() or self.far_recursion_available()
                           or self.laplace_top() is not None))

    def laplace_top(self) -> tuple[float, int] | None:
        """(a, k) when the composition is k uses of Laplace losses of one a = sensitivity / scale (both
        directions; no mass at infinity), which :class:`afa.engines.laplace_top.LaplaceTopEngine` answers
        within 2a of their top k a; else None."""
        shifts = {loss.laplace_shift if loss.inf_mass == 0 else None
                  for losses in self.losses.values() for loss in losses}
        count = sum(self.counts.values())
        if len(shifts) != 1 or count != int(count) or self.gaussian_mu:
            return None
        a, = shifts
        if a is None or not LaplaceTopEngine.serves(float(a), int(count)):
            return None
        return float(a), int(count)

    def recursion_available(self) -> bool:
        """Whether every direction is a step recursion (:meth:`step_recursion`)."""
        return all(self.step_recursion(index) is not None for index in self.distinct_directions)

    def recursion_uses(self) -> int | None:
        """The most uses of noise pairs among the directions' step recursions (:meth:`step_recursion`), None
        unless every direction is one."""
        recursions = [self.step_recursion(index) for index in self.distinct_directions]
        if any(recursion is None for recursion in recursions):
            return None
        return max(recursion.count for recursion in recursions if recursion is not None)

    def piled_up(self) -> bool:
        """Whether every direction's step recursion reaches at most PILED_REACH and PILED_NOISE over its noise
        ratio (:attr:`afa.engines.step_recursion.StepRecursion.noise_ratio`): a loss piled up so near one value
        that the contour runs out of nodes."""
        recursions = [self.step_recursion(index) for index in self.distinct_directions]
        return all(recursion is not None and recursion.reach <= min(PILED_REACH, PILED_NOISE / recursion.noise_ratio)
                   for recursion in recursions)

    def step_recursion(self, index: int) -> StepRecursion | DoublingRecursion | None:
        """Direction ``index`` as a recursion over a few uses (:class:`afa.engines.step_recursion.StepRecursion`) when
        every mechanism is a Gaussian or has a Gaussian noise pair (subsampled Gaussians, mixtures of Gaussians) and
        those pairs' uses number 2 to MAX_USES (1 to MAX_USES with Gaussians), or by doubling
        (:class:`afa.engines.step_recursion.DoublingRecursion`) for DOUBLING_FROM or more uses of one pair without
        Gaussians, within its reach; else None.  Built once per direction."""
        if index not in self._recursions:
            self._recursions[index] = self._step_recursion(index)
        return self._recursions[index]

    def _step_recursion(self, index: int) -> StepRecursion | DoublingRecursion | None:
        uses = self._pair_uses(index)
        if uses is None:
            return None
        counted, mu_squared = uses
        total = sum(counted.values())
        if len(counted) == 1 and mu_squared == 0 and DOUBLING_FROM <= total <= MAX_DOUBLING_USES:
            (pair, count), = counted.items()
            try:
                return DoublingRecursion(pair, count)
            except UnsupportedCompositionError:  # (its reach: then use by use, if few enough)
                pass
        if not (1 if mu_squared > 0 else 2) <= total <= MAX_USES:
            return None
        return StepRecursion([pair for pair, count in counted.items() for _ in range(count)], math.sqrt(mu_squared))

    def _pair_uses(self, index: int) -> tuple[dict[NoiseMixturePair, int], float] | None:
        """(uses of each Gaussian noise pair, the Gaussians' summed mu^2) of direction ``index`` when every
        mechanism is a Gaussian or has a Gaussian noise pair, used a whole number of times, and nothing is
        truncated; else None."""
        if self.truncated_mass > 0:
            return None
        counted: dict[NoiseMixturePair, int] = {}
        mu_squared = 0.0
        for mechanism, count in self.counts.items():
            if mechanism in self.gaussian_mu:
                mu_squared += count * self.gaussian_mu[mechanism] ** 2
                continue
            pair = self.losses[mechanism][index].noise_pair
            if pair is None or pair.noise != "gaussian" or count != int(count):
                return None
            counted[pair] = counted.get(pair, 0) + int(count)
        return counted, mu_squared

    def far_recursion(self, index: int) -> DoublingRecursion | None:
        """Direction ``index`` as a doubling recursion beyond its fast reach (up to
        :data:`afa.engines.step_recursion.FAR_REACH`) when it is DOUBLING_FROM to FAR_USES uses of one Gaussian
        noise pair without Gaussians that :meth:`step_recursion` does not serve; else None.  Built once per
        direction."""
        if index not in self._far_recursions:
            recursion = None
            uses = self._pair_uses(index) if self.step_recursion(index) is None else None
            if uses is not None and len(uses[0]) == 1 and uses[1] == 0:
                (pair, count), = uses[0].items()
                if DOUBLING_FROM <= count <= FAR_USES:
                    try:
                        recursion = DoublingRecursion(pair, count, max_reach=FAR_REACH)
                    except UnsupportedCompositionError:
                        pass
            self._far_recursions[index] = recursion
        return self._far_recursions[index]

    def far_recursion_available(self) -> bool:
        """Whether every direction is a doubling recursion beyond its fast reach (:meth:`far_recursion`)."""
        return all(self.far_recursion(index) is not None for index in self.distinct_directions)

    def quadratic_composition(self, index: int) -> QuadraticComposition | None:
        """Direction ``index`` as one noncentral chi-square integral
        (:class:`afa.engines.quadratic.QuadraticComposition`) when every mechanism is a Gaussian or has a quadratic
        loss (:attr:`afa.mechanisms.loss_tails.LossTails.quadratic`, e.g. :class:`afa.DataDependentGaussian`), at
        least one has, and all of those share one curvature; else None."""
        if index not in self._quadratic:
            self._quadratic[index] = self._quadratic_composition(index)
        return self._quadratic[index]

    def _quadratic_composition(self, index: int) -> QuadraticComposition | None:
        quadratic, mu_squared = [], 0.0
        for mechanism, count in self.counts.items():
            if mechanism in self.gaussian_mu:
                mu_squared += count * self.gaussian_mu[mechanism] ** 2
                continue
            # (a finite-output loss is not quadratic: its pair need not be built)
            loss = _quadratic_loss(mechanism, self.neighboring, index) if self.losses[mechanism][index].continuous \
                else None
            if loss is None:
                return None
            quadratic.append((loss, count))
        if not quadratic or len({loss.gamma for loss, _ in quadratic}) != 1:
            return None
        return QuadraticComposition.of(quadratic, math.sqrt(mu_squared))

    # -- engines -------------------------------------------------------------
    def resolve(self, method: str) -> str:
        """The engine key a query with ``method`` starts from ('auto''s first choice for "auto").

        Raises
        ------
        ValueError
            An unknown ``method`` or an empty composition.
        UnsupportedCompositionError
            ``method="exact"`` for a composition it cannot serve.
        """
        if method in (WIDE_CONTOUR, COARSE_PLD, STEP_RECURSION, FAR_DOUBLING, LAPLACE_TOP):  # auto's own schedule
            return method
        check.choice("method", method, METHODS)
        if not self.counts:
            raise ValueError("the accountant is empty: compose at least one mechanism first")
        if method == "auto":
            return self.first_choice()
        if method == "exact" and not self.exact_available():
            raise UnsupportedCompositionError(
                "method='exact' needs a composition of Gaussian and finite-output mechanisms only, of data-dependent "
                f"Gaussians sharing sigma1/sigma2 with Gaussians, of 2 to {MAX_USES} uses of subsampled Gaussians or "
                "mixtures of Gaussians (with any Gaussians), of more uses of one subsampled Gaussian while count * "
                f"log(1/(1 - q)) <= {FAR_REACH:g} (up to {FAR_USES} uses; beyond, while it is at most "
                f"{MAX_REACH:g}), or one use of a single mechanism; use "
                "method='contour', 'pld' or 'quadrature'")
        return method

    def first_choice(self) -> str:
        """'auto''s first choice (see :meth:`auto_first`)."""
        return self.auto_first()[0]

    def auto_first(self, delta: float | None = None) -> tuple[str, dict[str, str]]:
        """'auto''s first choice and the candidates passed over with their reasons: closed forms first (for an
        eps(``delta``) query the Laplace top series where it reaches ``delta``), then relative accuracy
        (contour), then the real line if every mechanism is continuous, else the PLD (which composes
        finite-output terms exactly, :class:`afa.engines.mixed_pld.MixedPLDEngine`, where the real line would
        evaluate their atoms at every node).  Building a candidate's engines gets AutoOptions.share of the time
        left, as trying it would."""
        if delta is not None and self.laplace_top() is not None and all(
                getattr(engine, "reaches", lambda delta: False)(delta) for engine in self.engines(LAPLACE_TOP)):
            return LAPLACE_TOP, {}
        passed_over = {}
        for candidate, available in (("exact", lambda: self.exact_available(scheduled=False)),
                                     ("contour", lambda: True)):
            if not available():
                continue
            if candidate in self._unbuildable:  # refused before, whatever the budget
                passed_over[candidate] = self._unbuildable[candidate]
                continue
            try:
                with budgets.limits(seconds=budgets.remaining() * self.options.auto.share):
                    self.engines(candidate)
                return candidate, passed_over
            except BudgetExceededError as error:
                passed_over[candidate] = str(error)
            except UnsupportedCompositionError as error:
                self._unbuildable[candidate] = passed_over[candidate] = str(error)
        return ("quadrature" if self.all_continuous() else "pld"), passed_over

    def all_continuous(self) -> bool:
        """Whether every mechanism's loss is continuous (no finite-output mechanism, whose atoms the PLD
        composes exactly and the contour evaluates at every node)."""
        return all(losses[0].continuous for losses in self.losses.values())

    def engines(self, method: str) -> list[Engine]:
        """The engines of ``method`` (an engine key) for each distinct direction, built once.

        Raises
        ------
        UnsupportedCompositionError, AccuracyError
            The method's engines cannot serve this composition.
        """
        if method not in self._engines:
            if self.certain_reveal():
                self._engines[method] = [CertainRevealEngine()]
            else:
                build = self._BUILDERS[method]
                with settings.using(self.options):
                    self._engines[method] = [build(self, index) for index in self.distinct_directions]
        return self._engines[method]

    def clear(self) -> None:
        """Drop the engines built so far and what 'auto' learnt (the next query starts afresh)."""
        self._engines.clear()
        self._unbuildable.clear()
        self._exact_parts.clear()
        self._exact_powers.clear()
        self._contour_demoted = False

    def _exact_engine(self, index: int) -> ExactEngine | ClosedFormEngine | LaplaceTopEngine:
        if self.single_use() is not None:
            return self._single_use_engine(index)
        quadratic = self.quadratic_composition(index)
        if quadratic is not None:
            return ClosedFormEngine(quadratic.delta, self.composed(index))
        if self.laplace_top() is not None:
            return self._laplace_top_engine(index)
        if self.step_recursion(index) is not None:
            return self._step_recursion_engine(index)
        if self.far_recursion(index) is not None:
            return self._far_doubling_engine(index)
        mu = math.sqrt(sum(count * self.gaussian_mu[m] ** 2 for m, count in self.counts.items()
                           if m in self.gaussian_mu))
        return ExactEngine(mu, self.composed(index, lambda m: m not in self.gaussian_mu))

    def _step_recursion_engine(self, index: int) -> ClosedFormEngine:
        recursion = self.step_recursion(index)
        if recursion is None:
            raise UnsupportedCompositionError(
                f"the step recursion needs 2 to {MAX_USES} uses of Gaussian noise pairs (subsampled Gaussians, "
                "mixtures of Gaussians), with any Gaussian mechanisms")
        return self._recursion_engine(index, recursion)

    def _far_doubling_engine(self, index: int) -> ClosedFormEngine:
        recursion = self.far_recursion(index)
        if recursion is None:
            raise UnsupportedCompositionError(
                f"the doubling recursion's far reach needs {DOUBLING_FROM} to {FAR_USES} uses of one "
                f"Gaussian noise pair whose count times its bounded loss end is at most {FAR_REACH:g}")
        return self._recursion_engine(index, recursion)

    def _recursion_engine(self, index: int, recursion: StepRecursion | DoublingRecursion) -> ClosedFormEngine:
        """The engine of direction ``index`` answering from ``recursion``."""
        composed = self.composed(index)  # (its stages are fitted up to the eps asked: the search starts small)
        # a direction shown below another by the MGF's Chernoff bound is not fitted at all
        return ClosedFormEngine(recursion.delta, composed,
                                epsilon_scale=loss_epsilon_scale(composed, smallest=RECURSION_SCALE),
                                chernoff=ContourInversion(composed).chernoff_bound,
                                with_slope=recursion.delta_and_slope, epsilon_rtol=recursion.epsilon_rtol,
                                epsilon_guess=functools.partial(gaussian_epsilon_guess, composed))

    def _laplace_top_engine(self, index: int) -> LaplaceTopEngine:
        laplace = self.laplace_top()
        if laplace is None:
            raise UnsupportedCompositionError("the Laplace top series needs uses of one Laplace loss only")
        return LaplaceTopEngine(*laplace)

    def _contour_engine(self, index: int) -> ContourEngine:
        return ContourEngine(self.composed(index))

    def _wide_contour_engine(self, index: int) -> ContourEngine:
        """The contour with the wide node budget: the default-budget engine widened when it was built (a retry
        after it ran out of nodes starts from the node values it evaluated), else a new one."""
        nodes = self.options.contour.wide_numeric_nodes
        built = self._engines.get("contour")
        widen = getattr(built[list(self.distinct_directions).index(index)], "widened", None) if built else None
        return widen(nodes) if widen is not None else ContourEngine(self.composed(index), numeric_nodes=nodes)

    def _certified_engine(self, index: int) -> CertifiedEngine:
        return CertifiedEngine(self.composed(index))

    def _quadrature_engine(self, index: int) -> QuadratureEngine:
        return QuadratureEngine(self.composed(index))

    def _coarse_pld_engine(self, index: int) -> PLDEngine | MixedPLDEngine:
        """:meth:`_pld_engine` on a grid AutoOptions.coarse_grid times coarser."""
        return self._pld_engine(index, self.options.auto.coarse_grid)

    def large_pld(self) -> bool:
        """Whether some direction's discretized PLD (at the default grid step) would hold more than
        LARGE_PLD_POINTS points over the composed loss's bulk (False under a user's grid step)."""
        if self.value_discretization_interval is not None:
            return False
        for index in self.distinct_directions:
            gridded = self._gridded_loss(index)
            try:
                interval = self._grid_step(index)
            except UnsupportedCompositionError:
                return False
            if 2 * PLD_SPREAD * math.sqrt(max(gridded.cumulants[1], 0.0)) / interval > LARGE_PLD_POINTS:
                return True
        return False

    def _grid_step(self, index: int) -> float:
        """The default grid step of direction ``index``'s PLD (:meth:`_pld_engine`): fitted to the part it puts
        on a grid, in EXACT_POWER_POINTS points when every term is finite-output (each composed exactly first)."""
        if all(not self.losses[mechanism][index].continuous for mechanism in self.counts):
            return self.pld_interval(self.composed(index), EXACT_POWER_POINTS)
        return self.pld_interval(self._gridded_loss(index))

    def _gridded_loss(self, index: int) -> ComposedLoss:
        """The part of direction ``index`` that its PLD puts on a grid (:meth:`_pld_engine`): every term when all
        are finite-output or none is composed exactly, else the terms :func:`afa.engines.mixed_pld.exact_part`
        leaves."""
        finite = [mechanism for mechanism in self.counts if not self.losses[mechanism][index].continuous]
        if not finite or len(finite) == len(self.counts):
            return self.composed(index)
        exact, composition = self._exact_part(index, finite)
        if composition is not None and len(exact) < len(self.counts):
            return self.composed(index, lambda mechanism: mechanism not in exact)
        return self.composed(index)

    def _exact_part(self, index: int, finite: list[Mechanism]) -> tuple[set[Mechanism], Any]:
        """The finite-output mechanisms among ``finite`` that direction ``index``'s mixed PLD composes exactly, and
        their composition (None: the PLD is not mixed), from :func:`afa.engines.mixed_pld.exact_part`."""
        key = tuple((self.losses[mechanism][index], self.counts[mechanism]) for mechanism in finite)
        if key not in self._exact_parts:  # a symmetric mechanism's two directions are one loss
            self._exact_parts[key] = exact_part(list(key))
        flags, composition = self._exact_parts[key]
        return {mechanism for mechanism, flag in zip(finite, flags) if flag}, composition

    def _pld_engine(self, index: int, coarsen: float = 1.0) -> PLDEngine | MixedPLDEngine:
        """The PLD engine of one direction.  With only finite-output terms, every term goes on one grid, each
        composed exactly first (one grid rounding per term, :meth:`afa.mechanisms.loss_tails.LossTails.exact_power`), so
        the grid may be coarser: the composed loss's bulk must fit in EXACT_POWER_POINTS.  Otherwise the
        finite-output terms that :func:`afa.engines.mixed_pld.exact_part` picks are composed exactly and mixed over the
        PLDs of the other terms, on a grid fitted to those alone (:class:`afa.engines.mixed_pld.MixedPLDEngine`), when
        both groups are non-empty; else every term goes on one grid."""
        terms = [(mechanism.loss_tails(self.neighboring)[index], count) for mechanism, count in self.counts.items()]
        loss = self.composed(index)
        finite = [mechanism for mechanism in self.counts if not self.losses[mechanism][index].continuous]
        step = min(self._grid_step(index) * coarsen, INTERVAL_RANGE[1])
        if len(finite) == len(self.counts):
            return PLDEngine(terms, step, loss, self._exact_powers)
        exact, composition = self._exact_part(index, finite) if finite else (set(), None)
        if composition is not None and len(exact) < len(self.counts):
            gridded = [(tails, count) for (tails, count), mechanism in zip(terms, self.counts)
                       if mechanism not in exact]
            return MixedPLDEngine(composition, [(tails, count) for (tails, count), mechanism
                                                in zip(terms, self.counts) if mechanism in exact],
                                  PLDEngine(gridded, step, loss), loss)
        return PLDEngine(terms, step, loss)

    def pld_interval(self, loss: ComposedLoss, points: int = PLD_POINTS) -> float:
        """The grid step of method="pld" for ``loss``: the user's value_discretization_interval, else the
        smaller of DEFAULT_INTERVAL and the narrowest term's loss standard deviation / STEP_RESOLUTION, widened
        so that the composed loss's bulk (mean +- PLD_SPREAD standard deviations) fits in ``points`` grid points.

        Raises
        ------
        afa.engines.pld.PLDTooLargeError
            Even the widest step allowed (INTERVAL_RANGE) cannot hold that bulk.
        """
        if self.value_discretization_interval is not None:
            return self.value_discretization_interval
        narrowest = min(math.sqrt(max(term.cumulants[1], 0.0)) or math.inf for term in loss.terms)
        interval = min(DEFAULT_INTERVAL, narrowest / STEP_RESOLUTION)
        spread = math.sqrt(max(loss.cumulants[1], 0.0))
        interval = max(interval, 2 * PLD_SPREAD * spread / points)
        if not interval <= INTERVAL_RANGE[1]:
            raise PLDTooLargeError(f"method='pld' cannot hold this composition: its privacy loss spreads over a "
                                   f"standard deviation of {spread:.3g}, which {points} grid points cover only "
                                   f"with a step of {interval:.3g}, above the largest {INTERVAL_RANGE[1]:g}")
        return interval

    def _single_use_engine(self, index: int) -> ClosedFormEngine:
        mechanism = self.single_use()
        if mechanism is None:
            raise UnsupportedCompositionError("the closed form of one use needs a composition of one use")
        tails = mechanism.loss_tails(self.neighboring)[index]
        return ClosedFormEngine(tails.hockey_stick_with_error, self.composed(index),
                                with_slope=tails.hockey_stick_error_and_slope)

    #: How each method's engine for one direction is built (the methods of METHODS but 'auto', WIDE_CONTOUR and
    #: COARSE_PLD).
    _BUILDERS: dict[str, Callable[[Planner, int], Engine]] = {
        "exact": _exact_engine, "contour": _contour_engine, WIDE_CONTOUR: _wide_contour_engine,
        "certified": _certified_engine, "pld": _pld_engine, COARSE_PLD: _coarse_pld_engine,
        "quadrature": _quadrature_engine, STEP_RECURSION: _step_recursion_engine,
        FAR_DOUBLING: _far_doubling_engine, LAPLACE_TOP: _laplace_top_engine,
    }

    # -- running a query ------------------------------------------------------
    def run(self, method: str, query: Callable[[list], Any], relative_width: Callable[[Any], float] | None = None,
            delta: float | None = None, agrees: Callable[[Any, Any], bool] | None = None) -> Answer:
        """``query(engines)`` on the engines of ``method``, or under "auto" on each candidate until one answers.

        Parameters
        ----------
        method : str
            A method of :data:`afa.options.METHODS` (or an engine key).
        query : callable
            Takes the list of a method's engines (one per distinct direction) and returns the answer.
        relative_width : callable, optional
            The relative width of a certified answer (for 'auto': a wide bracket is retried by the contour).
        delta : float, optional
            The target of an eps(delta) query, so that 'auto' sees which later candidates cannot serve it.
        agrees : callable, optional
            ``agrees(estimate, certified)``: whether an estimate's bounds meet a certified answer's (for 'auto': an
            estimate answered while a certified bracket is kept must, else it is refused and the bracket stands).

        Returns
        -------
        Answer
            The engine key that answered, its answer, every attempt, and whether its bounds are certified.

        Raises
        ------
        AccuracyError
            The named method refused, or under "auto" every candidate did (with the attempts and the best
            certified bracket a refusal carried).

        Notes
        -----
        A named method answers or refuses.  Under 'auto' the candidates are tried in order -- the first choice
        of :meth:`auto_first` (closed forms, else the contour), then the contour and AutoOptions.fallbacks -- each with
        AutoOptions.share of the time left (the last with all of it), so no engine spends the whole budget while
        another would answer.  A refusal (AccuracyError, an engine that cannot serve the composition) moves on
        to the next; a contour refused for its node budget (:class:`afa.engines.contour.NodeBudgetError`, a loss
        piled up near one value) is retried with a larger one (AutoOptions.wide_share of the time left): when
        every mechanism is continuous, before the fallbacks (after the step recursion where that applies); with
        finite-output mechanisms, whose atoms the PLD composes exactly and the contour evaluates at every node,
        right after the PLD unless the PLD's bracket is within AutoOptions.retry_rtol (it is kept in case the
        retry fails; the PLD then gets the time left but the retry's share, at least AutoOptions.share of it).
        Once that retry fails, later queries of the same composition try the PLD before the contour, with the
        same share.  A PLD of more than LARGE_PLD_POINTS grid points is first
        built on a grid AutoOptions.coarse_grid times coarser (:data:`COARSE_PLD`): a bracket within
        AutoOptions.retry_rtol answers, a wider one is kept while the fine grid tries, which is passed over when
        the coarse grid's time times AutoOptions.coarse_grid exceeds its share.  A certified answer whose
        ``relative_width(answer)`` exceeds AutoOptions.bracket_rtol is retried by the contour method with a larger
        node budget; a certified answer
        with an infinite upper bound lets the remaining engines try for a finite one.  A certified bracket (of eps
        or of delta) still wider than AutoOptions.retry_rtol is kept while the doubling recursion beyond its fast reach
        (:data:`FAR_DOUBLING`, :meth:`far_recursion`) tries, last, with all the time left.  An estimate answered
        while a certified bracket is kept must meet it (``agrees``), else it is refused.  When no engine does
        better, the best certified answer is the result.  Only declared refusals move on: an AccuracyError
        (BudgetExceededError included) or an UnsupportedCompositionError; any other exception propagates.
        """
        with settings.using(self.options):
            if method != "auto":
                name = self.resolve(method)
                began = time.monotonic()
                engines = self.engines(name)
                budgets.check(f"preparing method={name!r}")
                answer = query(engines)
                return Answer(name, answer, (Attempt(name, "answered", "", time.monotonic() - began),),
                              engines[0].certified)
            return self._run_auto(query, relative_width, delta, agrees)

    def may_serve(self, name: str, delta: float | None) -> bool:
        """False where a cheap check shows that method ``name`` refuses: the quadrature below its rounding
        floor or without a continuous part, the certified bracket for anything but one noise pair."""
        if name == "quadrature":
            continuous = any(losses[0].continuous for losses in self.losses.values())
            return continuous and (delta is None or QuadratureEngine.may_resolve(delta))
        if name == "certified":
            try:
                self.engines(name)
            except UnsupportedCompositionError:
                return False
        return True

    def _run_auto(self, query, relative_width: Callable | None, delta: float | None = None,
                  agrees: Callable[[Any, Any], bool] | None = None) -> Answer:
        if not self.counts:
            raise ValueError("the accountant is empty: compose at least one mechanism first")
        first, passed_over = self.auto_first(delta)
        attempts = [Attempt(name, "passed over", reason) for name, reason in passed_over.items()]
        candidates = [first] + [name for name in ("contour",) + self.options.auto.fallbacks
                                if name != first and name not in passed_over]
        if self._contour_demoted and "contour" in candidates and "pld" in candidates:
            candidates.remove("contour")  # both contours failed an earlier query: the PLD first
            candidates.insert(candidates.index("pld") + 1, "contour")
        recursion_uses = self.recursion_uses() if first != "exact" and self.options.auto.recursions else None
        if recursion_uses is not None:
            # first for an eps(delta) query of a few uses, or of up to RECURSION_EARLY piled up (piled_up);
            # up to RECURSION_EARLY uses right after the contour (before the wide retries) and before the PLD;
            # beyond, just before the PLD
            if delta is not None and (recursion_uses <= RECURSION_FIRST or (
                    recursion_uses <= RECURSION_EARLY and self.piled_up())):
                position = 0
            elif recursion_uses > RECURSION_EARLY:
                position = candidates.index("pld") if "pld" in candidates else len(candidates)
            else:
                position = candidates.index("contour") + 1 if "contour" in candidates else 1
                if "pld" in candidates:
                    position = min(position, candidates.index("pld"))
            candidates.insert(position, STEP_RECURSION)
        late_recursion = recursion_uses is not None and recursion_uses > RECURSION_EARLY
        kept, bracket = None, None  # bracket: the best certified bound a refusal carried
        coarse_seconds = 0.0
        wide_tried, node_retry = self._contour_demoted, False
        coarse_tried = far_tried = False
        while candidates:
            name = candidates.pop(0)
            policy = self.options.auto
            if name == "pld" and not coarse_tried:
                coarse_tried = True
                if policy.coarse_grid > 1 and self.large_pld():  # a bracket in a small share of the time first
                    candidates.insert(0, name)
                    name = COARSE_PLD
            later = kept is not None or any(self.may_serve(other, delta) for other in candidates)
            share = policy.wide_share if name == WIDE_CONTOUR else policy.share
            refined_by_retry = node_retry and candidates and candidates[0] == WIDE_CONTOUR
            if refined_by_retry or (name == "pld" and self._contour_demoted):  # the others are the fallbacks
                share = max(policy.share, 1 - policy.wide_share)
            share = budgets.remaining() * (share if later and name != FAR_DOUBLING else 1.0)
            if name == "pld" and kept is not None and kept[0] == COARSE_PLD:
                predicted = coarse_seconds * policy.coarse_grid  # the work grows with the grid's points
                if predicted > share:
                    attempts.append(Attempt(name, "passed over", f"a grid {policy.coarse_grid:g} times finer than the "
                                            f"coarse one would take about {predicted:.3g} s, more than its "
                                            f"{share:.3g} s"))
                    continue
            began = time.monotonic()
            try:
                with budgets.limits(seconds=share):
                    engines = self.engines(name)
                    budgets.check(f"preparing method={label(name)!r}")
                    answer = query(engines)
            except BudgetExceededError as error:
                attempts.append(Attempt(name, "out of time", str(error), time.monotonic() - began))
                if name == WIDE_CONTOUR and node_retry:
                    self._contour_demoted = True
                if budgets.remaining() <= 0:
                    break
                continue
            except (AccuracyError, UnsupportedCompositionError) as error:
                attempts.append(Attempt(name, "refused", str(error), time.monotonic() - began))
                partial = getattr(error, "bracket", None)
                if partial is not None and (bracket is None or partial.lower > bracket.lower):
                    bracket = partial
                if isinstance(error, NodeBudgetError) and not wide_tried:  # a larger node budget may answer:
                    wide_tried = node_retry = True  # before the PLD, or right after it with finite-output terms
                    position = 0
                    if "pld" in candidates:
                        position = candidates.index("pld") + (0 if self.all_continuous() else 1)
                    if late_recursion and STEP_RECURSION in candidates:  # the faster retry first
                        position = min(position, candidates.index(STEP_RECURSION))
                    candidates.insert(position, WIDE_CONTOUR)
                elif name == WIDE_CONTOUR and node_retry:
                    self._contour_demoted = True
                continue
            seconds = time.monotonic() - began
            width = relative_width(answer) if relative_width is not None else 0.0
            certified = engines[0].certified
            if not certified and kept is not None and agrees is not None and not agrees(answer, kept[1]):
                attempts.append(Attempt(name, "refused", f"its bounds miss the certified bracket of {label(kept[0])!r} "
                                        "(an estimate that contradicts a proof)", seconds))
                continue
            if name == COARSE_PLD and width > policy.retry_rtol:  # kept while the fine grid tries
                coarse_seconds = seconds
                attempts.append(Attempt(name, "wide bracket", f"relative width {width:.3g}", seconds))
                if math.isfinite(width) and (kept is None or width < kept[2]):
                    kept = (name, answer, width, len(attempts) - 1)
                continue
            # after the contour ran out of nodes, its wide retry may still give a tighter answer than a bracket
            pending = node_retry and WIDE_CONTOUR in candidates and width > policy.retry_rtol
            # a certified bracket (eps or delta) wider than retry_rtol: the doubling's far reach may tighten it, last
            far = (certified and relative_width is not None and width > policy.retry_rtol and not far_tried
                   and self.options.auto.recursions and self.far_recursion_available())
            if not certified or (width <= policy.bracket_rtol and not pending and not far):
                return Answer(name, answer, tuple(attempts) + (Attempt(name, "answered", "", seconds),), certified)
            attempts.append(Attempt(name, "wide bracket", f"relative width {width:.3g}", seconds))
            if kept is None or width < kept[2]:
                kept = (name, answer, width, len(attempts) - 1)
            if width <= policy.bracket_rtol and not pending:  # (far) only the far doubling is left to try
                candidates = []
            elif not wide_tried or WIDE_CONTOUR in candidates:  # a finite but wide bracket: only the wide contour
                wide_tried = True                                    # may beat it
                rest = [other for other in candidates if other != WIDE_CONTOUR]
                candidates = [WIDE_CONTOUR] + (rest if math.isinf(width) else [])
            elif math.isfinite(width):
                if not far:
                    break
                candidates = []
            if far:
                far_tried = True
                candidates = [other for other in candidates if other != FAR_DOUBLING] + [FAR_DOUBLING]
        if kept is not None:
            name, answer, _, index = kept
            attempts[index] = dataclasses.replace(attempts[index], outcome="answered")
            return Answer(name, answer, tuple(attempts), True)
        refusal = BudgetExceededError if budgets.remaining() <= 0 else AccuracyError
        raise refusal("no method answers this query for this composition; "
                      + "; ".join(f"{attempt.method}: {attempt.reason}" for attempt in attempts)
                      + ("" if bracket is None else f"; certified: eps in [{bracket.lower!r}, {bracket.upper!r}] "
                         "(the error's .bracket)"), bracket=bracket, attempts=tuple(attempts))


def _quadratic_loss(mechanism: Mechanism, neighboring: str, index: int):
    """Direction ``index``'s quadratic loss (:attr:`afa.mechanisms.loss_tails.LossTails.quadratic`) of a mechanism
    whose dominating pair is a :class:`afa.mechanisms.pairs.QuadraticGaussianPair`, else None."""
    try:
        pair = mechanism.dominating_pair(neighboring)
    except NotImplementedError:
        return None
    return mechanism.loss_tails(neighboring)[index].quadratic if isinstance(pair, QuadraticGaussianPair) else None
