"""The pile/tail split of a subsampled Gaussian's loss law for the contour: many uses of a small sampling rate.

With a small sampling rate q the remove direction's loss L(o) = log(1 - q + q e^{kappa(o)}) is piled up just
above log(1 - q) for most outputs and has a thin tail up to +infinity.  Tilted by e^{cL}, one use's law is the
narrow pile for c below the point where the tail's e^{cL} takes over; the saddle of a k-fold composition sits
near that point, and there the integrand along the vertical line decays only as fast as the pile's narrow bulk
lets it: the line runs to tens of thousands of nodes (:mod:`afa.engines.contour`).  Split one use's law with a
smooth weight in the output, chi(o) = Phi(-(o - o_c) / w_o) (:class:`afa.mechanisms.noise_pair.OutputTaper`),
o_c where L(o_c) = CUT_LOSS and w_o = CUT_WIDTH / L'(o_c):

    M = P + T,  P = chi law (the pile),  T = (1 - chi) law (the tail),
    M^k = P^k + R,  R = M^k - P^k = P^k expm1(k log1p(T / P)),

both parts positive measures, so delta = delta[P^k] + delta[R] (the hockey-stick functional is linear in the
measure).  Each part is inverted on the saddle of its own MGF (:class:`afa.engines.contour.ContourInversion`,
each value checked on a second line): P^k's MGF is entire and its saddle moves out to where its tilted law is a
bump of the cut's width; R holds at least one tail use, whose spread makes its line short.  A part whose share
is provably negligible is not summed: R has mass 1 - (1 - m_T)^k <= k m_T (m_T = T's mass) and delta[R] is at
most that; delta[P^k] is at most its Chernoff bound.  Below NEGLIGIBLE times the other part's value, that bound
is added to the error (and half of it to the value) instead.  Many uses of a larger q compose to a loss whose
whole contour is short: the whole law's contour is tried first, with at most WHOLE_NODES nodes, until it refuses
(for its node budget, under a budget of at most WHOLE_NODES: that refusal is passed on, and the wide retry of
method='auto' tries it again with WHOLE_NODES first).

The error of R's MGF at a node: with P and T each known to NUMERIC_RTOL of their values on the real line, the
moduli of R's partial derivatives in P and T are at most their values on the real line (sums of products with
non-negative coefficients), which give |dR| <= (k eps_P + (k + 1) eps_T) R(c) (:func:`_rest_rtol`).
Measured against the whole law's contour and the step recursion in the tests; the speed in
``benchmarks/bench_near_atom.py``.
"""

from __future__ import annotations

import copy
import math
from typing import cast

import numpy as np

from .. import options as settings
from .._accurate import complex_log1p
from ..budget import BudgetExceededError
from ..mechanisms.noise_pair import NoiseMixturePair, OutputTaper, PairMGF
from ..mechanisms.privacy_loss import NUMERIC_RTOL, PrivacyLoss
from ..results import AccuracyError
from .composition import ComposedLoss
from .contour import ContourInversion, NodeBudgetError

#: The loss at the cut between pile and tail, and the width of the cut in loss (Gaussian-smooth in the output).
CUT_LOSS, CUT_WIDTH = 0.3, 0.03
#: A part is not summed when a bound on its share of delta is below this fraction of the other part's value.
NEGLIGIBLE = 1e-10
#: Most nodes of one sum of the whole law's contour, tried first; the split is summed only under a node budget
#: beyond it (ContourOptions.wide_numeric_nodes, the retry of method='auto'): where the whole law's line needs at
#: most this many nodes, it is faster than the two parts (measured: 27 vs 66 ms at sigma = 0.8, q = 0.001,
#: 1000 uses, eps(1e-5)).
WHOLE_NODES = 16_384
#: The split serves compositions of at least MIN_USES uses of one pair with sampling rate at most MAX_RATE.
MIN_USES, MAX_RATE = 2, 0.02


def _rest_rtol(uses: int) -> float:
    """The relative error of R's MGF (see the module's docstring), with room for the rounding of its formula."""
    return (2 * uses + 4) * NUMERIC_RTOL


def split_pair(loss: ComposedLoss) -> tuple[NoiseMixturePair, int] | None:
    """(pair, uses) when ``loss`` is ``uses`` >= MIN_USES uses of one Poisson-subsampled Gaussian's remove-direction
    pair, A = (1 - q) N(0, s^2) + q N(d, s^2) against B = N(0, s^2) with d > 0 and q <= MAX_RATE; else None."""
    if len(loss.terms) != 1:
        return None
    (term, uses), = loss.terms.items()
    pair = term.noise_pair
    if (pair is None or uses < MIN_USES or pair.noise != "gaussian" or not term.continues_to_complex
            or term.inf_mass or term.atoms.size):
        return None
    if pair.b_shifts != (0.0,) or len(pair.a_shifts) != 2 or pair.a_shifts[0] != 0.0 or not pair.a_shifts[1] > 0:
        return None
    if not math.exp(pair.a_log_weights[1]) <= MAX_RATE:
        return None
    return pair, int(uses)


class PileSplitContour:
    """delta(eps) of ``uses`` uses of a subsampled Gaussian's remove direction: the whole law's contour while it
    answers within its node budget (at most WHOLE_NODES), else delta[P^k] + delta[R] (see the module's docstring),
    each part by its own contour inversion.

    Parameters
    ----------
    loss : afa.engines.composition.ComposedLoss
        The composed loss; :func:`split_pair` must accept it.
    numeric_nodes : int, optional
        The node budget of each contour sum (default the active :class:`afa.ContourOptions`'); the whole law's
        at most WHOLE_NODES.

    Raises
    ------
    ValueError
        A composition :func:`split_pair` does not accept.
    """

    def __init__(self, loss: ComposedLoss, numeric_nodes: int | None = None):
        found = split_pair(loss)
        if found is None:
            raise ValueError("PileSplitContour needs uses of one subsampled Gaussian's remove-direction pair")
        self.pair, self.uses = found
        self.loss = loss
        self.inf_mass = 0.0
        self.numeric_nodes = numeric_nodes or settings.current().contour.numeric_nodes
        #: The whole law's vertical contour, tried first (:meth:`_parts`); also the Chernoff bounds and the scale.
        self.whole = ContourInversion(loss, min(self.numeric_nodes, WHOLE_NODES))
        #: Whether the whole law's contour is still tried first (:meth:`_parts`): until it refuses.
        self.whole_first = True
        #: Whether it refused for its node budget (a larger one may let it answer: :meth:`widened`).
        self.whole_out_of_nodes = False
        self.scale = self.whole.scale
        #: (pile inversion, rest inversion, bound on R's mass), built when first needed (:meth:`split`).
        self._split: tuple[ContourInversion, ContourInversion, float] | None = None

    def split(self) -> tuple[ContourInversion, ContourInversion, float]:
        """(the inversion of P^k, that of R, an upper bound k m_T (1 + 1e-9) on R's mass), built once."""
        if self._split is None:
            cut = cut_output(self.pair, CUT_LOSS)
            width = CUT_WIDTH / float(self.pair.loss_and_slope(np.array([cut]))[1][0])
            below, above = OutputTaper(cut, width, "below"), OutputTaper(cut, width, "above")
            # the pile part and the rest sum on lines of their own: each has its own rules for the pile's MGF
            pile_mgf, rest_pile_mgf = PairMGF(self.pair, taper=below), PairMGF(self.pair, taper=below)
            tail_mgf = PairMGF(self.pair, taper=above)
            rest_mass = self.uses * float(np.exp(tail_mgf.log_mgf(np.zeros(1))[0].real)) * (1 + 1e-9)
            self._split = (ContourInversion(ComposedLoss({_pile_loss(pile_mgf): self.uses}), self.numeric_nodes),
                           ContourInversion(ComposedLoss({_rest_loss(rest_pile_mgf, tail_mgf, self.uses): 1}),
                                            self.numeric_nodes),
                           rest_mass)
        return self._split

    def widened(self, numeric_nodes: int) -> PileSplitContour:
        """This inversion with the node budget ``numeric_nodes`` for the parts (the whole law's stays at most
        WHOLE_NODES), sharing what they evaluated and whether the whole law's contour is still tried first."""
        wide = copy.copy(self)
        wide.numeric_nodes = numeric_nodes
        wide.whole = cast(ContourInversion, self.whole.widened(min(numeric_nodes, WHOLE_NODES)))
        wide.whole_first = self.whole_first or (self.whole_out_of_nodes
                                                and wide.whole.max_nodes > self.whole.max_nodes)
        if self._split is not None:
            pile, rest, rest_mass = self._split
            wide._split = (cast(ContourInversion, pile.widened(numeric_nodes)),
                           cast(ContourInversion, rest.widened(numeric_nodes)), rest_mass)
        return wide

    def chernoff_bound(self, epsilon: float, target: float | None = None) -> float:
        """The whole law's Chernoff bound on delta(eps) (:meth:`ContourInversion.chernoff_bound`)."""
        return self.whole.chernoff_bound(epsilon, target)

    def _parts(self, epsilon: float, verify: bool) -> tuple[float, float, float]:
        """(delta, error, slope) at ``epsilon``: from the whole law's contour while it answers, else from the two
        parts together, each summed (and with ``verify`` checked on its second line) unless its share is
        negligible."""
        if self.whole_first:
            try:
                return _summed(self.whole, epsilon, verify)
            except BudgetExceededError:
                raise
            except NodeBudgetError:
                self.whole_first, self.whole_out_of_nodes = False, True
                if self.numeric_nodes <= WHOLE_NODES:  # a larger budget tries it first again (the wide retry)
                    raise
            except AccuracyError:  # its nodes' errors, or lines that disagree: the split from here on
                self.whole_first = False
        pile, rest, rest_mass = self.split()
        pile_bound = pile.chernoff_bound(epsilon)
        first, second, second_bound = (pile, rest, rest_mass) if pile_bound >= rest_mass else (rest, pile, pile_bound)
        value, error, slope = _summed(first, epsilon, verify)
        if second_bound <= NEGLIGIBLE * value:
            return value + second_bound / 2, error + second_bound / 2, slope
        more = _summed(second, epsilon, verify)
        return value + more[0], error + more[1], slope + more[2]

    def delta_and_slope(self, epsilon: float) -> tuple[float, float, float]:
        """(delta, absolute error, -d delta / d eps) at one ``epsilon`` (unchecked: Newton's iterates)."""
        return self._parts(epsilon, verify=False)

    def delta(self, epsilons: np.ndarray, verify: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """delta(eps) and absolute errors; ``verify``: each value summed checked on a second line."""
        epsilons = np.asarray(epsilons, dtype=float)
        values, errors = np.empty(epsilons.size), np.empty(epsilons.size)
        for index, epsilon in enumerate(epsilons.ravel()):
            values[index], errors[index], _ = self._parts(float(epsilon), verify)
        return values.reshape(epsilons.shape), errors.reshape(epsilons.shape)


def _summed(inversion: ContourInversion, epsilon: float, verify: bool) -> tuple[float, float, float]:
    """(delta, error, slope) of one inversion at ``epsilon``, with ``verify`` checked on its second line."""
    value, error, slope = inversion.delta_and_slope(epsilon)
    if verify:
        inversion.verify(epsilon)
    return value, error, slope


def _pile_loss(mgf: PairMGF) -> PrivacyLoss:
    """One use's pile P as a numeric loss (a sub-probability measure) with the tapered MGF ``mgf``."""
    return PrivacyLoss.numeric(f"log_phi_pile_{id(mgf):x}", lambda t: mgf.log_mgf(1j * np.asarray(t)),
                               mgf.cumulants, continues=True, cost=lambda t: mgf.mgf_cost(1j * np.asarray(t)))


def _rest_loss(pile: PairMGF, tail: PairMGF, uses: int) -> PrivacyLoss:
    """R = M^k - P^k as a numeric loss of count one (:func:`rest_log_mgf`); its cumulants are those of R's leading
    part, k - 1 pile uses and one tail use (a first guess of its saddle)."""

    def log_mgf(t):
        s = 1j * np.asarray(t)
        return rest_log_mgf(pile.log_mgf(s), tail.log_mgf(s), uses)

    def cumulants() -> tuple[float, float]:
        (pile_mean, pile_variance), (tail_mean, tail_variance) = pile.cumulants(), tail.cumulants()
        return (uses - 1) * pile_mean + tail_mean, (uses - 1) * pile_variance + tail_variance

    def cost(t):
        s = 1j * np.asarray(t)
        return pile.mgf_cost(s) + tail.mgf_cost(s)

    return PrivacyLoss.numeric(f"log_phi_rest_{id(tail):x}", log_mgf, cumulants, continues=True, cost=cost,
                               rtol=_rest_rtol(uses))


def cut_output(pair: NoiseMixturePair, level: float) -> float:
    """The output o with L(o) = ``level`` for the pairs :func:`split_pair` accepts: e^L = 1 - q + q e^kappa with
    kappa(o) = d (2 o - d) / (2 s^2)."""
    shift, scale, log_rate = pair.a_shifts[1], pair.scale, pair.a_log_weights[1]
    kappa = math.log(math.expm1(level) + math.exp(log_rate)) - log_rate
    return kappa * scale ** 2 / shift + shift / 2


def rest_log_mgf(log_pile: np.ndarray, log_tail: np.ndarray, uses: int) -> np.ndarray:
    """log R = log(M^k - P^k) = k log P + log expm1(k log1p(T / P)) from log P and log T (complex), without the
    cancellation of the difference."""
    ratio = log_tail - log_pile
    small = ratio.real < 0
    log1p_ratio = np.where(small, complex_log1p(np.exp(np.where(small, ratio, 0))),
                           ratio + complex_log1p(np.exp(-np.where(small, 0, ratio))))
    y = uses * log1p_ratio
    large = y.real > 1
    with np.errstate(divide="ignore"):
        log_expm1 = np.where(large, y + complex_log1p(-np.exp(-np.where(large, y, 0))),
                             np.log(np.expm1(np.where(large, 0, y))))
    return uses * log_pile + log_expm1
