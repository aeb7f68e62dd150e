"""Mechanisms: parameters, dominating pairs and the privacy losses they induce.

Every mechanism is a small immutable, validated, hashable object.  Its only
duty towards the accountant is :meth:`Mechanism.privacy_losses`: for a
neighbouring relation it returns the two directions of its dominating pair
(papers/002_658ea0213f8272c6.txt Def. 7, Lemma 37) -- the loss
L = log(p/q)(o), o ~ P, and the loss L' = log(q/p)(o), o ~ Q.  Under
add/remove these are the *remove* and *add* directions; under substitution,
the pair and its swap.  The final delta is the larger of the two.

Sensitivity enters in one place per family: additive-noise mechanisms shift
their noise by ``sensitivity`` (given for the relation the accountant uses),
and every finite-output mechanism goes through :func:`_pair_from_pmfs`, which
derives both directions, their atoms and their masses at +infinity.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import sympy
from scipy.special import log_ndtr, logsumexp, roots_legendre

from . import _validation as check
from .privacy_loss import PrivacyLoss, t

NEIGHBORING_RELATIONS = ("add_remove", "substitution")
#: Tail mass of the discrete Gaussian sent to +infinity (pessimistic truncation).
DISCRETE_GAUSSIAN_TAIL = 1e-30


class Mechanism:
    """Base class.  Subclasses are frozen dataclasses implementing ``_losses``."""

    def privacy_losses(self, neighboring: str = "add_remove") -> tuple[PrivacyLoss, PrivacyLoss]:
        """The two directions (L under P, L' under Q) of the dominating pair for ``neighboring``."""
        check.choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
        return self._cached_losses(neighboring)

    @functools.lru_cache(maxsize=None)
    def _cached_losses(self, neighboring: str) -> tuple[PrivacyLoss, PrivacyLoss]:
        return self._losses(neighboring)

    def _losses(self, neighboring: str) -> tuple[PrivacyLoss, PrivacyLoss]:
        raise NotImplementedError

    @property
    def symmetric(self) -> bool:
        """Whether both directions have the same privacy-loss distribution."""
        first, second = self.privacy_losses("add_remove")
        return first is second


def _set(instance, **values) -> None:
    for name, value in values.items():
        object.__setattr__(instance, name, value)


# ---------------------------------------------------------------------------
# Continuous additive noise
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Gaussian(Mechanism):
    """f(D) + N(0, sigma^2) for f of the given sensitivity (papers/002 Table 2, Lemma 35).

    The privacy loss is N(mu^2/2, mu^2) with mu = sensitivity / sigma, in both
    directions; log phi(t) = -mu^2 (t^2 - i t) / 2.
    """

    sigma: float
    sensitivity: float = 1.0

    def __post_init__(self):
        _set(self, sigma=check.positive("sigma", self.sigma),
             sensitivity=check.positive("sensitivity", self.sensitivity))

    @property
    def mu(self) -> float:
        """sensitivity / sigma: the Gaussian-DP parameter of one use."""
        return self.sensitivity / self.sigma

    def _losses(self, neighboring):
        half_mu2 = sympy.Float(self.mu ** 2 / 2, 17)
        loss = PrivacyLoss.symbolic(-half_mu2 * (t ** 2 - sympy.I * t))
        return loss, loss


@dataclass(frozen=True)
class Laplace(Mechanism):
    """f(D) + Lap(0, scale) for f of the given sensitivity (papers/002 Table 2, Lemma 34).

    With a = sensitivity / scale the loss has atoms +a (mass 1/2) and -a
    (mass e^{-a}/2) and density e^{l/2 - a/2}/4 on (-a, a), so
    phi(t) = e^{iat}/2 + e^{-a-iat}/2 + (e^{iat} - e^{-a-iat}) / (2 (1 + 2it)),
    the same in both directions.  (This is Lemma 34's first line with
    lambda = scale / sensitivity; the last line of its proof has a sign slip.)
    """

    scale: float
    sensitivity: float = 1.0

    def __post_init__(self):
        _set(self, scale=check.positive("scale", self.scale),
             sensitivity=check.positive("sensitivity", self.sensitivity))

    @property
    def epsilon0(self) -> float:
        """sensitivity / scale: the pure-DP epsilon of one use."""
        return self.sensitivity / self.scale

    def _losses(self, neighboring):
        a = sympy.Float(self.epsilon0, 17)
        up = sympy.exp(sympy.I * a * t)
        down = sympy.exp(-a - sympy.I * a * t)
        log_phi = sympy.log(up / 2 + down / 2 + (up - down) / (2 * (1 + 2 * sympy.I * t)))
        atoms = PrivacyLoss.discrete([self.epsilon0, -self.epsilon0],
                                     [-math.log(2), -self.epsilon0 - math.log(2)]).atoms
        loss = PrivacyLoss.symbolic(log_phi, atoms=atoms)
        return loss, loss


@dataclass(frozen=True)
class MixtureOfGaussians(Mechanism):
    """Gaussian noise with a random sensitivity (papers/003_83ef780bcc67edb1.txt Sec. 3.3).

    The sensitivity is ``sensitivities[i]`` with probability ``probabilities[i]``;
    the dominating pair is P = sum_i p_i N(c_i, 1), Q = N(0, 1) with
    c_i = sensitivities[i] / sigma.  The pair is asymmetric, so the two
    directions differ.  Their log-CFs have no closed form: they are computed
    by Gauss-Legendre quadrature over the output, log M(s) with
    M(s) = E_Q[exp(s l(o))], s = 1 + it (direction P) and s = -it (direction Q),
    l(o) = log sum_i p_i exp(c_i o - c_i^2 / 2).
    """

    sensitivities: tuple
    probabilities: tuple
    sigma: float

    def __post_init__(self):
        sigma = check.positive("sigma", self.sigma)
        sensitivities = check.real_array("sensitivities", self.sensitivities)
        if sensitivities.ndim != 1 or sensitivities.size == 0 or np.any(sensitivities < 0):
            raise ValueError(f"sensitivities must be a non-empty sequence of numbers >= 0, got {self.sensitivities!r}")
        probabilities = check.probability_vector("probabilities", self.probabilities)
        if probabilities.size != sensitivities.size:
            raise ValueError("sensitivities and probabilities must have the same length, "
                             f"got {sensitivities.size} and {probabilities.size}")
        if not np.any((sensitivities > 0) & (probabilities > 0)):
            raise ValueError("sensitivities must have a positive value with positive probability")
        _set(self, sigma=sigma, sensitivities=tuple(map(float, sensitivities)),
             probabilities=tuple(map(float, probabilities)))

    def _losses(self, neighboring):
        shifts = np.asarray(self.sensitivities) / self.sigma
        log_p = np.log(np.asarray(self.probabilities))
        keep = log_p > -np.inf
        integral = _OutputQuadrature(shifts[keep], log_p[keep])
        label = f"log_phi_MoG_sigma{self.sigma:g}"
        return (PrivacyLoss.numeric(label + "_P", lambda nodes: integral.log_mgf(1 + 1j * nodes),
                                    integral.cumulants(1.0)),
                PrivacyLoss.numeric(label + "_Q", lambda nodes: integral.log_mgf(-1j * nodes, reverse=True),
                                    integral.cumulants(0.0, reverse=True)))


class _OutputQuadrature:
    """log E_Q[exp(s l(o))] for Q = N(0, 1) and l(o) = log sum_i p_i e^{c_i o - c_i^2/2}.

    Composite Gauss-Legendre over o, with panels narrow enough to resolve the
    phase Im(s) l(o) (|l'(o)| <= max c_i) and wide enough to cover every
    component's mass to e^{-14^2/2}.
    """

    ORDER = 20
    REACH = 14.0

    def __init__(self, shifts: np.ndarray, log_weights: np.ndarray):
        self.shifts, self.log_weights = shifts, log_weights
        self.low = min(0.0, shifts.min()) - self.REACH
        self.high = max(0.0, shifts.max()) + self.REACH
        self.slope = max(shifts.max(), 1e-300)

    def _nodes(self, frequency: float) -> tuple[np.ndarray, np.ndarray]:
        width = min(1.0, 1.0 / (frequency * self.slope + 1e-300))
        panels = int(math.ceil((self.high - self.low) / width))
        x, w = roots_legendre(self.ORDER)
        edges = np.linspace(self.low, self.high, panels + 1)
        half = np.diff(edges)[:, None] / 2
        nodes = (edges[:-1, None] + half * (x + 1)).ravel()
        return nodes, (half * w).ravel()

    def _log_ratio(self, o: np.ndarray) -> np.ndarray:
        return logsumexp(self.log_weights + self.shifts * o[:, None] - self.shifts ** 2 / 2, axis=1)

    def _log_integrand_base(self, o: np.ndarray) -> np.ndarray:
        return -o ** 2 / 2 - 0.5 * math.log(2 * math.pi)

    def log_mgf(self, s: np.ndarray, reverse: bool = False) -> np.ndarray:
        s = np.asarray(s, dtype=complex)
        out = np.empty(s.shape, dtype=complex)
        flat_s, flat_out = s.ravel(), out.reshape(-1)
        sign = -1.0 if reverse else 1.0
        order = np.argsort(np.abs(flat_s.imag))
        # Process nodes in blocks of similar frequency, each with its own panel width.
        start = 0
        while start < order.size:
            # The block's largest frequency (its last node) sets the panel width.
            end = min(order.size, start + 256)
            o, w = self._nodes(float(abs(flat_s[order[end - 1]].imag)))
            end = min(end, start + max(1, 4_000_000 // o.size))
            block = order[start:end]
            log_base = self._log_integrand_base(o) + np.log(w)
            exponent = log_base[None, :] + flat_s[block, None] * (sign * self._log_ratio(o))[None, :]
            flat_out[block] = logsumexp(exponent, axis=1)
            start = end
        return out

    def cumulants(self, s: float, reverse: bool = False) -> tuple[float, float]:
        o, w = self._nodes(0.0)
        sign = -1.0 if reverse else 1.0
        loss = sign * self._log_ratio(o)
        weights = w * np.exp(self._log_integrand_base(o) + s * self._log_ratio(o))
        weights /= weights.sum()
        mean = float(np.dot(weights, loss))
        return mean, float(np.dot(weights, (loss - mean) ** 2))


# ---------------------------------------------------------------------------
# Finite-output mechanisms
# ---------------------------------------------------------------------------

def _pair_from_pmfs(log_p: np.ndarray, log_q: np.ndarray) -> tuple[PrivacyLoss, PrivacyLoss]:
    """Both directions of a finite dominating pair given by log-PMFs (papers/002 Def. 36).

    Outputs where the other distribution is zero send their mass to +infinity
    (App. D.2).  A symmetric pair returns the same object twice.
    """
    log_p, log_q = np.asarray(log_p, dtype=float), np.asarray(log_q, dtype=float)

    def direction(log_a, log_b):
        finite = (log_a > -np.inf) & (log_b > -np.inf)
        to_infinity = (log_a > -np.inf) & (log_b == -np.inf)
        inf_mass = float(np.exp(logsumexp(log_a[to_infinity]))) if np.any(to_infinity) else 0.0
        return PrivacyLoss.discrete(log_a[finite] - log_b[finite], log_a[finite], inf_mass=inf_mass)

    forward, backward = direction(log_p, log_q), direction(log_q, log_p)
    if (forward.inf_mass == backward.inf_mass
            and np.array_equal(forward.atoms.losses, backward.atoms.losses)
            and np.allclose(forward.atoms.log_masses, backward.atoms.log_masses, rtol=0, atol=1e-15)):
        return forward, forward
    return forward, backward


def _log(values) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(values, dtype=float))


@dataclass(frozen=True)
class RandomizedResponse(Mechanism):
    """Binary randomized response: report the true bit with probability p (papers/002 Lemma 33).

    Dominating pair P = (p, 1-p), Q = (1-p, p), the same under both relations.
    """

    p: float

    def __post_init__(self):
        _set(self, p=check.in_interval("p", self.p, 0.5, 1.0))

    def _losses(self, neighboring):
        return _pair_from_pmfs(_log([self.p, 1 - self.p]), _log([1 - self.p, self.p]))


@dataclass(frozen=True)
class KaryRandomizedResponse(Mechanism):
    """k-ary randomized response: output the true value with probability p, each other value with (1-p)/(k-1).

    (papers/003_83ef780bcc67edb1.txt Sec. 3.6 writes the same mechanism with
    randomisation probability r = k (1 - p) / (k - 1).)  ``p`` must be in
    [1/k, 1]; with k = 2 this is :class:`RandomizedResponse`.

    * substitution: the pair (R(x), R(x')) over the outputs {x, x', other};
    * add_remove: the *replace-special* relation of Sec. 3.6, the pair
      (R(x), R(bottom)) with R(bottom) uniform -- its two directions differ.
    """

    k: int
    p: float

    def __post_init__(self):
        k = check.positive_integer("k", self.k, minimum=2)
        _set(self, k=k, p=check.in_interval("p", self.p, 1.0 / k, 1.0))

    def _losses(self, neighboring):
        k, p = self.k, self.p
        other = (1 - p) / (k - 1)
        if neighboring == "substitution":
            return _pair_from_pmfs(_log([p, other, (k - 2) * other]), _log([other, p, (k - 2) * other]))
        return _pair_from_pmfs(_log([p, 1 - p]), _log([1 / k, (k - 1) / k]))


@dataclass(frozen=True)
class ApproxDP(Mechanism):
    """The dominating pair of every (epsilon, delta)-DP mechanism (papers/003 Sec. 3.7, Theorem 1).

    P = (delta, (1-delta) e^eps/(1+e^eps), (1-delta)/(1+e^eps), 0) and Q its
    reversal: loss +infinity with mass delta, +eps and -eps on the rest.
    """

    epsilon: float
    delta: float

    def __post_init__(self):
        _set(self, epsilon=check.non_negative("epsilon", self.epsilon),
             delta=check.in_interval("delta", self.delta, 0.0, 1.0))

    def _losses(self, neighboring):
        eps = self.epsilon
        log_rest = math.log1p(-self.delta) if self.delta < 1 else -np.inf
        log_high = log_rest + eps - np.logaddexp(0.0, eps)
        log_low = log_rest - np.logaddexp(0.0, eps)
        log_delta = _log(self.delta)
        return _pair_from_pmfs(np.array([log_delta, log_high, log_low, -np.inf]),
                               np.array([-np.inf, log_low, log_high, log_delta]))


@dataclass(frozen=True)
class DiscreteLaplace(Mechanism):
    """f(D) + DLap(a): integer noise with P[x] proportional to e^{-a|x|} (papers/003 Sec. 3.4).

    The outputs x <= 0, 0 < x < sensitivity and x >= sensitivity carry the
    losses a*sensitivity, a*(sensitivity - 2x) and -a*sensitivity, so the
    privacy loss is finite and exact.
    """

    a: float
    sensitivity: int = 1

    def __post_init__(self):
        _set(self, a=check.positive("a", self.a),
             sensitivity=check.positive_integer("sensitivity", self.sensitivity))

    def _losses(self, neighboring):
        a, shift = self.a, self.sensitivity
        log_norm = math.log(math.tanh(a / 2))
        inner = np.arange(1, shift)
        # P = DLap(0, a) on {x <= 0}, 1..shift-1, {x >= shift}; Q is its mirror image.
        log_p = np.concatenate(([-np.logaddexp(0, -a)], log_norm - a * inner, [-a * shift - np.logaddexp(0, -a)]))
        return _pair_from_pmfs(log_p, log_p[::-1])


@dataclass(frozen=True)
class DiscreteGaussian(Mechanism):
    """f(D) + N_Z(0, sigma^2): integer noise with P[x] proportional to e^{-x^2/(2 sigma^2)} (papers/003 Sec. 3.5).

    The noise is not truncated: the normaliser is summed until its terms
    underflow, and only outputs with P-mass below ``DISCRETE_GAUSSIAN_TAIL``
    in total (|x| beyond about 11.8 sigma) are dropped, their mass sent to
    +infinity -- a pessimistic change that raises delta by at most that mass
    per use (papers/003 Sec. 3.5, Proposition 1).
    """

    sigma: float
    sensitivity: int = 1

    def __post_init__(self):
        _set(self, sigma=check.positive("sigma", self.sigma),
             sensitivity=check.positive_integer("sensitivity", self.sensitivity))

    def _losses(self, neighboring):
        sigma, shift = self.sigma, self.sensitivity
        reach = int(math.ceil(40 * sigma)) + 1
        x = np.arange(-reach, reach + 1)
        log_unnormalised = -x.astype(float) ** 2 / (2 * sigma ** 2)
        log_norm = logsumexp(log_unnormalised)
        # Keep |x| <= tau, where the Gaussian tail bound puts less than the allowed mass beyond.
        tau = int(math.ceil(sigma * math.sqrt(-2 * math.log(DISCRETE_GAUSSIAN_TAIL / 4))))
        outputs = np.arange(-tau, tau + shift + 1)
        log_p = np.where(np.abs(outputs) <= tau, -outputs.astype(float) ** 2 / (2 * sigma ** 2) - log_norm, -np.inf)
        shifted = outputs - shift
        log_q = np.where(np.abs(shifted) <= tau, -shifted.astype(float) ** 2 / (2 * sigma ** 2) - log_norm, -np.inf)
        forward, backward = _pair_from_pmfs(log_p, log_q)
        dropped = float(-np.expm1(logsumexp(log_p)))
        if dropped <= 0:
            return forward, backward

        def widened(loss: PrivacyLoss) -> PrivacyLoss:
            # Mass dropped by truncation goes to +infinity as well (pessimistic).
            return PrivacyLoss.discrete(loss.atoms.losses, loss.atoms.log_masses, inf_mass=loss.inf_mass + dropped)

        first = widened(forward)
        return (first, first) if forward is backward else (first, widened(backward))


@dataclass(frozen=True)
class DiscreteMechanism(Mechanism):
    """Any finite dominating pair, given by its two PMFs over the same outputs (papers/002 Def. 36).

    Outputs with q = 0 < p send their P-mass to +infinity (and vice versa).
    """

    p_pmf: tuple
    q_pmf: tuple

    def __post_init__(self):
        p = check.probability_vector("p_pmf", self.p_pmf)
        q = check.probability_vector("q_pmf", self.q_pmf)
        if p.shape != q.shape:
            raise ValueError(f"p_pmf and q_pmf must have the same length, got {p.size} and {q.size}")
        _set(self, p_pmf=tuple(map(float, p)), q_pmf=tuple(map(float, q)))

    def _losses(self, neighboring):
        return _pair_from_pmfs(_log(self.p_pmf), _log(self.q_pmf))
