"""Tail probabilities of one direction of a dominating pair: what the PLD backend builds from.

One direction of a mechanism's dominating pair (P, Q) (papers/002_658ea0213f8272c6.txt
Def. 7) has the privacy loss L = log(p/q)(o), o ~ P.  The discretized-PLD builders
(privacy buckets, connect-the-dots, greedy + convex hull; papers/003_83ef780bcc67edb1.txt
Sec. 2, papers/001_3ee39eb892cc4de2.txt Secs. 4-5) need only

* the tails P[eps < L < inf] and Q[eps < L < inf] (logarithms, for every real eps),
* the mass P[L = +inf],

because the hockey-stick curve and its slope follow from them:

    delta(eps)  = P[L = inf] + P[eps < L < inf] - e^eps Q[eps < L < inf],
    delta'(eps) = -e^eps Q[eps < L < inf]        (right derivative).

Mechanisms implement :class:`LossTails` for each direction; the builders never ask
which mechanism they hold.
"""

from __future__ import annotations

import abc

import numpy as np
from numpy.typing import ArrayLike


class LossTails(abc.ABC):
    """One direction (P, Q) of a dominating pair, seen through the tails of L = log(p/q)(o), o ~ P.

    Attributes
    ----------
    inf_mass:
        P[L = +inf] (the mass where q = 0; papers/002 App. D.2).
    loss_range:
        (lowest, highest) finite loss value with positive P-mass, the smallest closed
        interval holding all of it; either end may be infinite.
    """

    inf_mass: float
    loss_range: tuple[float, float]

    @abc.abstractmethod
    def log_tails(self, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """(log P[eps < L < inf], log Q[eps < L < inf]) for each eps, relatively accurate (-inf for 0)."""

    def hockey_stick(self, epsilons: ArrayLike) -> np.ndarray:
        """delta(eps) = H_{e^eps}(P || Q), formed from the tails without cancellation of e^eps Q against P."""
        epsilons = np.asarray(epsilons, dtype=float)
        log_p, log_q = self.log_tails(epsilons)
        with np.errstate(invalid="ignore", divide="ignore"):
            gap = np.where(log_p > -np.inf, epsilons + log_q - log_p, -np.inf)
            finite_part = np.where(log_p > -np.inf, np.exp(log_p) * -np.expm1(np.minimum(gap, 0.0)), 0.0)
        return self.inf_mass + finite_part

    def hockey_stick_slope(self, epsilons: ArrayLike) -> np.ndarray:
        """The right derivative d delta / d eps = -e^eps Q[eps < L < inf] (<= 0)."""
        epsilons = np.asarray(epsilons, dtype=float)
        _, log_q = self.log_tails(epsilons)
        return -np.exp(epsilons + log_q)
