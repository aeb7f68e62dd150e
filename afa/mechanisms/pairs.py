"""Dominating pairs a mechanism declares, and the representations the engines derive from them.

A mechanism's one duty is :meth:`afa.Mechanism.dominating_pair`: for a neighbouring relation, a pair
(P, Q) of output distributions whose hockey-stick divergences bound those of every pair of neighbouring
datasets (Zhu, Dong & Wang 2022, Def. 7).  The two directions of the privacy loss are L = log(P/Q)(o)
with o ~ P and L' = log(Q/P)(o) with o ~ Q (Lemma 37).  The pair kinds:

* :class:`FinitePair` -- P and Q over the same finite outputs, as log-probabilities (Def. 36); outputs
  where one side is 0 send the other's mass to +infinity (App. D.2);
* :class:`afa.mechanisms.noise_pair.NoiseMixturePair` -- two mixtures of shifted Gaussian or Laplace noise of one
  scale (a noise mechanism, its Poisson or subset subsampling, random sensitivities);
* :class:`QuadraticGaussianPair` -- two Gaussians of different scales (a quadratic privacy loss);
* :class:`PairMixture` -- a weighted mixture of noise-mixture pairs over disjoint outputs, i.e. a mixture of
  their privacy-loss distributions (truncated Poisson sampling, Google DP team 2025, Sec. 4.3).

:func:`privacy_losses` and :func:`loss_tails` turn a pair into what the engines read: the two
directions' losses (log-characteristic functions, atoms, masses at +infinity) and the tails of each
loss (for the discretized PLD).  Pairs of a shape with a closed form -- one shifted Gaussian or Laplace
noise against the unshifted one, two Gaussians of different scales -- get it
(:mod:`afa.mechanisms.closed_forms`), whichever mechanism declared them; other noise-mixture pairs get
log-CFs by quadrature over the output.  A mechanism whose parameters determine its losses more accurately
than log-probabilities can (randomized response near p = 1/2, the discrete Gaussian's losses
s (s - 2x) / (2 sigma^2)) gives them through the hook ``Mechanism._losses``; its pair stays its definition.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from .. import _validation as check
from .._accurate import complex_log1p
from ..limits import MAX_MU, MAX_NOISE_SHIFT
from . import closed_forms
from .loss_tails import (
    AtomTails,
    GaussianTails,
    LaplaceTails,
    LossTails,
    MixtureTails,
    NoisePairTails,
    QuadraticGaussianTails,
)
from .noise_pair import NoiseMixturePair, PairFamily, PairMGF
from .privacy_loss import PrivacyLoss, batched_log_phi

__all__ = ["AnyPair", "FinitePair", "NoiseMixturePair", "PairMixture", "QuadraticGaussianPair", "atom_tails",
           "finite_losses", "gaussian_mu", "loss_tails", "privacy_losses"]

_KINDS_MESSAGE = ("dominating_pair must return an afa.mechanisms.pairs.FinitePair, NoiseMixturePair, "
                  "QuadraticGaussianPair or PairMixture")


@dataclass(frozen=True, eq=False)
class FinitePair:
    """P and Q over the same finite outputs, as log-probabilities (Zhu, Dong & Wang 2022, Def. 36).

    Build it from probabilities with :meth:`from_pmfs`.

    Parameters
    ----------
    log_p : array_like
        ``log_p[i]`` is the log-probability of output i under P (-inf for probability 0); a non-empty
        1-d array of values <= 0 (no NaN), stored as a float array.
    log_q : array_like
        The same for Q, of the same length.  Each side's probabilities must sum to one (within 1e-9).

    Raises
    ------
    ValueError
        Arrays that are empty, not 1-d or of different lengths, values that are NaN or > 0, or
        probabilities not summing to one.

    Notes
    -----
    Outputs where one side is 0 send the other's mass to +infinity (App. D.2).  Instances compare by
    identity (the fields are arrays).

    Examples
    --------
    >>> import afa
    >>> import numpy as np
    >>> pair = afa.mechanisms.pairs.FinitePair.from_pmfs([0.75, 0.25], [0.25, 0.75])
    >>> declared = afa.RandomizedResponse(0.75).dominating_pair("add_remove")  # the same pair
    >>> np.array_equal(pair.log_p, declared.log_p) and np.array_equal(pair.log_q, declared.log_q)
    True
    """

    log_p: np.ndarray
    log_q: np.ndarray

    def __post_init__(self):
        log_p = np.asarray(self.log_p, dtype=float)
        log_q = np.asarray(self.log_q, dtype=float)
        if log_p.ndim != 1 or log_p.shape != log_q.shape or log_p.size == 0:
            raise ValueError(f"log_p and log_q must be non-empty 1-d arrays of one length, got shapes "
                             f"{log_p.shape} and {log_q.shape}")
        for name, side in (("log_p", log_p), ("log_q", log_q)):
            if np.any(np.isnan(side)) or np.any(side > 0):
                raise ValueError(f"{name} must hold log-probabilities (<= 0, -inf for 0), got {side!r}")
            if not abs(math.fsum(np.exp(side)) - 1.0) <= 1e-9:
                raise ValueError(f"the probabilities exp({name}) must sum to 1, got {math.fsum(np.exp(side))!r}")
        object.__setattr__(self, "log_p", log_p)
        object.__setattr__(self, "log_q", log_q)

    @classmethod
    def from_pmfs(cls, p, q) -> FinitePair:
        """The pair of two probability vectors over the same outputs.

        Parameters
        ----------
        p, q : array_like
            The probabilities of P and Q (zeros allowed), each summing to one (within 1e-9).

        Returns
        -------
        FinitePair

        Examples
        --------
        >>> import afa
        >>> pair = afa.mechanisms.pairs.FinitePair.from_pmfs([0.5, 0.5], [1.0, 0.0])
        >>> pair.log_q.tolist()
        [0.0, -inf]
        """
        with np.errstate(divide="ignore"):
            return cls(np.log(np.asarray(p, dtype=float)), np.log(np.asarray(q, dtype=float)))



@dataclass(frozen=True)
class QuadraticGaussianPair:
    """P = N(0, sigma_p^2) and Q = N(shift, sigma_q^2): a quadratic privacy loss (Zhu, Dong & Wang 2022, App. A
    Example 15).

    Parameters
    ----------
    sigma_p, sigma_q : float
        The standard deviations of P and Q, > 0 (finite).
    shift : float, default 0.0
        Q's mean, >= 0 (finite).

    Raises
    ------
    ValueError, TypeError
        A parameter out of range or not a real number (named in the message).

    Notes
    -----
    With X = sigma_p Z, Z ~ N(0, 1), the loss L = log(p/q)(X) is alpha + beta Z + gamma Z^2
    (:func:`afa.mechanisms.closed_forms.quadratic_coefficients`); a direction with gamma > 0 is unbounded
    above and heavy-tailed, one with gamma < 0 bounded above.  Equal scales give a Gaussian shift.

    Examples
    --------
    >>> import afa
    >>> afa.DataDependentGaussian(1.0, 1.5, 1.0).dominating_pair("add_remove")
    QuadraticGaussianPair(sigma_p=1.0, sigma_q=1.5, shift=1.0)
    """

    sigma_p: float
    sigma_q: float
    shift: float = 0.0

    def __post_init__(self):
        check.assign(self, sigma_p=check.positive("sigma_p", self.sigma_p),
                     sigma_q=check.positive("sigma_q", self.sigma_q), shift=check.non_negative("shift", self.shift))

    def swapped(self) -> QuadraticGaussianPair:
        """(Q, P) moved by -shift: N(0, sigma_q^2) against N(shift, sigma_p^2) (the same losses, mirrored)."""
        return QuadraticGaussianPair(self.sigma_q, self.sigma_p, self.shift)


@dataclass(frozen=True)
class PairMixture:
    """The pair (sum_k w_k A_k, sum_k w_k B_k) over the disjoint union of the components' outputs.

    Each component (A_k, B_k) is a :class:`afa.mechanisms.noise_pair.NoiseMixturePair`; on component k's outputs the
    privacy loss is that pair's, so each direction's privacy-loss distribution is the w-weighted mixture of
    the components' (their characteristic functions, MGFs and tails mix linearly).  This is the "mixture of
    PLDs" of Google DP team 2025, Sec. 4.3 (truncated Poisson sampling).

    Parameters
    ----------
    log_weights : tuple of float
        log w_k; the weights are positive and sum to one (within 1e-12).
    components : tuple of afa.mechanisms.noise_pair.NoiseMixturePair
        The component pairs, one per weight, at least two.

    Raises
    ------
    ValueError
        Fewer than two components, lengths that differ, a zero weight or weights not summing to one.
    TypeError
        A component that is not a NoiseMixturePair.

    Examples
    --------
    >>> import math
    >>> import afa
    >>> one = afa.Gaussian(1.0).dominating_pair("add_remove")
    >>> two = afa.Gaussian(0.5).dominating_pair("add_remove")
    >>> pair = afa.mechanisms.pairs.PairMixture((math.log(0.75), math.log(0.25)), (one, two))
    >>> remove, add = afa.mechanisms.pairs.loss_tails(pair)
    >>> one_delta = afa.Accountant().compose(afa.Gaussian(1.0)).delta(1.0)
    >>> expected = 0.75 * one_delta + 0.25 * afa.Accountant().compose(afa.Gaussian(0.5)).delta(1.0)
    >>> bool(abs(remove.hockey_stick(1.0) - expected) < 1e-12)
    True
    """

    log_weights: tuple[float, ...]
    components: tuple[NoiseMixturePair, ...]

    def __post_init__(self):
        log_weights = tuple(float(w) for w in self.log_weights)
        components = tuple(self.components)
        if len(components) < 2 or len(log_weights) != len(components):
            raise ValueError("a PairMixture needs at least two components and one weight per component")
        for component in components:
            if not isinstance(component, NoiseMixturePair):
                raise TypeError(f"PairMixture components must be NoiseMixturePair, got {component!r}")
        if not all(w > -math.inf for w in log_weights) or not abs(float(np.logaddexp.reduce(log_weights))) <= 1e-12:
            raise ValueError(f"the weights exp(log_weights) must be positive and sum to one, got {log_weights!r}")
        object.__setattr__(self, "log_weights", log_weights)
        object.__setattr__(self, "components", components)

    def swapped(self) -> PairMixture:
        """(sum_k w_k B_k, sum_k w_k A_k): the other direction's pair."""
        return PairMixture(self.log_weights, tuple(component.swapped() for component in self.components))

    @property
    def loss_upper_bound(self) -> float:
        """A bound on the loss of the forward direction: the largest of the components' bounds."""
        return max(component.loss_upper_bound for component in self.components)


#: Every kind of dominating pair (what :meth:`afa.Mechanism.dominating_pair` returns).
AnyPair = FinitePair | NoiseMixturePair | QuadraticGaussianPair | PairMixture


def privacy_losses(pair: AnyPair, names: tuple[str, str] | None = None, *,
                   quadrature_order: int | None = None) -> tuple[PrivacyLoss, PrivacyLoss]:
    """The two directions (L under P, L' under Q) of ``pair``; a symmetric pair returns one object twice.

    Parameters
    ----------
    pair : FinitePair, NoiseMixturePair or PairMixture
        The dominating pair.
    names : tuple of str, optional
        Labels of a noise-mixture pair's two numerically computed log-CFs (default: from its parameters).
    quadrature_order : int, optional
        Nodes per panel of the Gauss-Legendre rule over the output of a noise-mixture pair without a closed
        form (default :attr:`afa.mechanisms.noise_pair.PairMGF.ORDER`; a second rule for checking the first).

    Returns
    -------
    tuple of afa.mechanisms.privacy_loss.PrivacyLoss
        L = log(P/Q)(o), o ~ P, and L' = log(Q/P)(o), o ~ Q (Lemma 37).  A finite pair gives
        :func:`finite_losses`; a noise-mixture pair log-CFs by quadrature over the output (for complex
        arguments too, so the contour method applies).

    Raises
    ------
    TypeError
        ``pair`` is of neither kind.
    ValueError
        A noise-mixture pair with a shift beyond :data:`afa.limits.MAX_NOISE_SHIFT` noise scales (one shifted
        noise against the unshifted one: beyond :data:`afa.limits.MAX_MU` for Gaussian noise, 1e300 for Laplace
        noise, which its closed form covers).

    Examples
    --------
    >>> from afa.mechanisms.pairs import FinitePair, privacy_losses
    >>> first, second = privacy_losses(FinitePair.from_pmfs([0.75, 0.25], [0.25, 0.75]))
    >>> first is second
    True
    """
    if isinstance(pair, FinitePair):
        return finite_losses(pair.log_p, pair.log_q)
    if isinstance(pair, NoiseMixturePair):
        shape = _single_shift(pair)
        if shape is None:
            return _mixture_losses(pair, names, quadrature_order)
        noise, shift = shape
        if shift == 0:
            return closed_forms.identical_losses()
        return closed_forms.gaussian_losses(shift) if noise == "gaussian" else closed_forms.laplace_losses(shift)
    if isinstance(pair, QuadraticGaussianPair):
        return closed_forms.quadratic_gaussian_losses(pair.sigma_p, pair.sigma_q, pair.shift)
    if isinstance(pair, PairMixture):
        return _pair_mixture_losses(pair, names, quadrature_order)
    raise TypeError(_KINDS_MESSAGE + f", got {pair!r}")


def loss_tails(pair: AnyPair) -> tuple[LossTails, LossTails]:
    """The tails of the two directions' losses of ``pair`` (same order as :func:`privacy_losses`).

    Parameters
    ----------
    pair : FinitePair, NoiseMixturePair or PairMixture
        The dominating pair.

    Returns
    -------
    tuple of afa.mechanisms.loss_tails.LossTails
        What the discretized PLD builds from: the atoms of a finite pair's losses, the noise pair's
        tails, or the mixture of its components' tails (:class:`afa.mechanisms.loss_tails.MixtureTails`); the same
        object twice for a symmetric pair.

    Raises
    ------
    TypeError
        ``pair`` is of neither kind.
    ValueError
        A noise-mixture pair with a shift beyond :data:`afa.limits.MAX_NOISE_SHIFT` noise scales (one shifted
        noise against the unshifted one: beyond :data:`afa.limits.MAX_MU` for Gaussian noise, 1e300 for Laplace
        noise, which its closed form covers).
    """
    if isinstance(pair, FinitePair):
        return atom_tails(*finite_losses(pair.log_p, pair.log_q))
    if isinstance(pair, QuadraticGaussianPair):
        if pair.sigma_p != pair.sigma_q:
            return (QuadraticGaussianTails(pair.sigma_p, pair.sigma_q, pair.shift),
                    QuadraticGaussianTails(pair.sigma_q, pair.sigma_p, pair.shift))
        pair = NoiseMixturePair("gaussian", pair.sigma_p, (pair.shift,), (0.0,), (0.0,), (0.0,))
    if isinstance(pair, NoiseMixturePair):
        shape = _single_shift(pair)
        if shape is not None:
            kind, shift = shape
            if shift == 0:
                return atom_tails(*privacy_losses(pair))
            tails = GaussianTails(shift) if kind == "gaussian" else LaplaceTails(shift)
            return tails, tails
        _check_reach(pair)
        noise = NoisePairTails(pair)
        return (noise, noise) if _is_own_swap(pair) else (noise, NoisePairTails(pair.swapped()))
    if isinstance(pair, PairMixture):
        parts = [loss_tails(component) for component in pair.components]
        forward = MixtureTails(pair.log_weights, [first for first, _ in parts])
        if all(first is second for first, second in parts):
            return forward, forward
        return forward, MixtureTails(pair.log_weights, [second for _, second in parts])
    raise TypeError(_KINDS_MESSAGE + f", got {pair!r}")


def atom_tails(first: PrivacyLoss, second: PrivacyLoss) -> tuple[LossTails, LossTails]:
    """The tails of two finite losses (the directions of a finite pair) from their atoms; one object
    twice when the directions are one loss."""
    forward = AtomTails(first.atoms, first.inf_mass)
    return (forward, forward) if second is first else (forward, AtomTails(second.atoms, second.inf_mass))


def _single_shift(pair: NoiseMixturePair) -> tuple[str, float] | None:
    """(noise, |shift| / scale) of a pair of one shifted noise against the unshifted one, else None."""
    if len(pair.a_shifts) != 1 or pair.b_shifts != (0.0,):
        return None
    shift, limit = abs(pair.a_shifts[0]) / pair.scale, MAX_MU if pair.noise == "gaussian" else check.MAX_LOSS
    if not shift <= limit:
        raise ValueError(f"a {pair.noise} pair's shift must be within {limit:g} noise scales, got {shift:.4g} "
                         f"(scale={pair.scale:g})")
    return pair.noise, shift


def gaussian_mu(pair: AnyPair) -> float | None:
    """mu = |shift| / scale of a pure Gaussian pair (N(shift, s^2), N(0, s^2)); None for every other pair.

    The composition of pure Gaussian pairs has a closed form (Sommer, Meiser & Mohammadi 2019, Thm 5).

    Parameters
    ----------
    pair : FinitePair or NoiseMixturePair
        The dominating pair.

    Returns
    -------
    float or None

    Examples
    --------
    >>> import afa
    >>> afa.mechanisms.pairs.gaussian_mu(afa.Gaussian(sigma=2.0).dominating_pair("add_remove"))
    0.5
    >>> afa.mechanisms.pairs.gaussian_mu(afa.Laplace(scale=2.0).dominating_pair("add_remove")) is None
    True
    """
    if (isinstance(pair, NoiseMixturePair) and pair.noise == "gaussian" and len(pair.a_shifts) == 1
            and pair.b_shifts == (0.0,)):
        return abs(pair.a_shifts[0]) / pair.scale
    return None


def finite_losses(log_p: np.ndarray, log_q: np.ndarray) -> tuple[PrivacyLoss, PrivacyLoss]:
    """Both directions of a finite pair given by log-PMFs (Zhu, Dong & Wang 2022, Def. 36).

    Parameters
    ----------
    log_p, log_q : array_like
        The log-probabilities of P and Q over the same outputs (-inf for probability 0).

    Returns
    -------
    tuple of afa.mechanisms.privacy_loss.PrivacyLoss
        (L under P, L' under Q), discrete.  A symmetric pair returns the same object twice.

    Notes
    -----
    Outputs where the other distribution is zero send their mass to +infinity (App. D.2); a single such
    output keeps its probability exactly (e.g. ApproxDP's delta).

    Examples
    --------
    >>> import afa
    >>> pair = afa.mechanisms.pairs.FinitePair.from_pmfs([0.5, 0.5], [1.0, 0.0])
    >>> first, second = afa.mechanisms.pairs.finite_losses(pair.log_p, pair.log_q)
    >>> first.inf_mass, second.inf_mass
    (0.5, 0.0)
    """
    log_p, log_q = np.asarray(log_p, dtype=float), np.asarray(log_q, dtype=float)

    def direction(log_a, log_b):
        finite = (log_a > -np.inf) & (log_b > -np.inf)
        to_infinity = (log_a > -np.inf) & (log_b == -np.inf)
        inf_mass = math.fsum(np.exp(log_a[to_infinity]))
        return PrivacyLoss.discrete(log_a[finite] - log_b[finite], log_a[finite], inf_mass=inf_mass)

    forward, backward = direction(log_p, log_q), direction(log_q, log_p)
    if (forward.inf_mass == backward.inf_mass
            and np.array_equal(forward.atoms.losses, backward.atoms.losses)
            and np.allclose(forward.atoms.log_masses, backward.atoms.log_masses, rtol=0, atol=1e-15)):
        return forward, forward
    return forward, backward


def _check_reach(pair: NoiseMixturePair) -> None:
    largest = max(abs(shift) for shift in pair.a_shifts + pair.b_shifts) / pair.scale
    if not largest <= MAX_NOISE_SHIFT:
        raise ValueError(f"a noise-mixture pair's shifts must be within {MAX_NOISE_SHIFT:g} noise scales, got "
                         f"{largest:.4g} (scale={pair.scale:g})")


def _mixture_losses(pair: NoiseMixturePair, names: tuple[str, str] | None,
                    order: int | None = None) -> tuple[PrivacyLoss, PrivacyLoss]:
    """The two directions of a noise-mixture pair: log-CFs by quadrature over the output (for complex
    arguments too, so the contour method applies); a pair equal to its swap has one direction.  A loss with
    a rule of its own ``order`` declares no family (the engines' batches share the default rule)."""
    _check_reach(pair)
    if order is not None:
        order = check.positive_integer("quadrature_order", order, minimum=2, maximum=1000)
    if names is None:
        digest = hashlib.sha1(repr(pair).encode()).hexdigest()[:10]
        names = (f"log_phi_{pair.noise}_mixture_{digest}_forward", f"log_phi_{pair.noise}_mixture_{digest}_backward")
    if order is not None:
        names = (f"{names[0]}_gl{order}", f"{names[1]}_gl{order}")
    integral = PairMGF(pair, order)
    forward = PrivacyLoss.numeric(names[0], lambda t: integral.log_mgf(1j * np.asarray(t)),
                                  integral.cumulants, continues=True, noise_pair=pair,
                                  cost=lambda t: integral.mgf_cost(1j * np.asarray(t)),
                                  family=(PairFamily.of(pair), pair) if order is None else None)
    if _is_own_swap(pair):
        return forward, forward
    swapped = pair.swapped()
    backward = PrivacyLoss.numeric(names[1], lambda t: integral.log_mgf(-1 - 1j * np.asarray(t)),
                                   lambda: PairMGF(swapped, order).cumulants(), continues=True,
                                   noise_pair=swapped, cost=lambda t: integral.mgf_cost(-1 - 1j * np.asarray(t)),
                                   family=(PairFamily.of(swapped), swapped) if order is None else None)
    return forward, backward


def _is_own_swap(pair: NoiseMixturePair) -> bool:
    """Whether L' under B has the law of L under A: B is A mirrored about the output 0 (A(-o) = B(o))."""
    mirrored = sorted(zip((-s for s in pair.a_shifts), pair.a_log_weights, strict=True))
    return mirrored == sorted(zip(pair.b_shifts, pair.b_log_weights, strict=True))


def _pair_mixture_losses(pair: PairMixture, names: tuple[str, str] | None,
                         order: int | None = None) -> tuple[PrivacyLoss, PrivacyLoss]:
    """The two directions of a mixture of noise-mixture pairs: each direction's CF (and MGF, for complex
    arguments) is the weighted sum of its components' (so the contour method applies); a mixture of pairs
    that are each their own swap has one direction."""
    if names is None:
        digest = hashlib.sha1(repr(pair).encode()).hexdigest()[:10]
        names = (f"log_phi_pair_mixture_{digest}_forward", f"log_phi_pair_mixture_{digest}_backward")
    parts = [_mixture_losses(component, None, order) for component in pair.components]
    forward = _weighted_loss(names[0], pair.log_weights, [first for first, _ in parts])
    if all(first is second for first, second in parts):
        return forward, forward
    return forward, _weighted_loss(names[1], pair.log_weights, [second for _, second in parts])


def _weighted_loss(name: str, log_weights: tuple[float, ...], parts: list[PrivacyLoss]) -> PrivacyLoss:
    """The loss whose law is sum_k w_k (law of parts[k]): log phi = log sum_k w_k phi_k.

    Near t = 0 (every |log phi_k| < 1) it is formed as log1p(sum_k w_k expm1(log phi_k)), relatively accurate
    however small; elsewhere as a log-sum-exp relative to the largest real part.  Each part's MGF is known
    to NUMERIC_RTOL of M_k(c), so the sum is known to that of M(c) = sum_k w_k M_k(c).
    """
    weights = np.exp(np.asarray(log_weights))
    means = np.array([part.cumulants[0] for part in parts])
    variances = np.array([part.cumulants[1] for part in parts])
    mean = float(weights @ means)
    variance = float(weights @ (variances + (means - mean) ** 2))

    def evaluate(t):
        nodes = np.asarray(t)
        flat = nodes.ravel()
        values = batched_log_phi(flat if np.iscomplexobj(flat) else flat.astype(float), parts)  # (nodes, parts)
        near = np.all(np.abs(values) < 1.0, axis=1)
        out = np.empty(flat.shape, dtype=complex)
        out[near] = complex_log1p(np.expm1(values[near]) @ weights)
        top = np.max(values[~near].real, axis=1, initial=-np.inf)[:, None]
        out[~near] = top[:, 0] + np.log(np.exp(values[~near] - top) @ weights)
        return out.reshape(nodes.shape)

    costs = [part.evaluation_cost for part in parts if part.evaluation_cost is not None]

    def cost(t: np.ndarray) -> np.ndarray:
        total = np.zeros(np.shape(t))
        for part_cost in costs:
            total = total + part_cost(t)
        return total

    return PrivacyLoss.numeric(name, evaluate, (mean, variance), continues=all(p.continues_to_complex for p in parts),
                               cost=cost,
                               loss_bound=max(part.loss_max for part in parts))
