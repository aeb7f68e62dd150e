"""Subsampled mechanisms: Poisson subsampling and sampling a fixed-size subset (DP-SGD).

Dominating pairs (Zhu, Dong & Wang 2022, Thm 11; Google DP team 2025
Sec. 4).  For a base mechanism whose remove direction has the pair (P, Q) -- P the
output with the individual's record, Q without -- and sampling rate q, the mixture
A = (1 - q) Q + q P gives

* Poisson subsampling, add/remove (Thm 11(1)): remove (A, Q), add (Q, A);
* a fixed-size subset with rate q = m/n of a base analysed under replacement
  (Thm 11(2)): remove (A, P'), add (P', A) built from the base's *replacement*
  pair; for additive noise (Gaussian, Laplace) with sensitivity Delta that pair is the
  same shift by Delta, so the numbers coincide with Poisson subsampling;
* Poisson-subsampled Gaussian under substitution (Google DP team 2025, Sec. 4.2):
  ((1 - q) N(0) + q N(-Delta), (1 - q) N(0) + q N(Delta)), one symmetric direction;
* truncated Poisson sampling of a Gaussian (Google DP team 2025, Sec. 4.3; Ganesh 2025):
  :class:`TruncatedPoissonGaussian`, a mixture of two such pairs (:class:`afa.mechanisms.pairs.PairMixture`), dominating
  but not tight.

Additive continuous noise (Gaussian, Laplace) gives a pair of noise mixtures whose
log-CF has no closed form: it is computed by quadrature over the output
(:class:`afa.mechanisms.noise_pair.PairMGF`), for complex arguments too, so the contour method
applies.  Discrete-output bases (randomized response, k-RR, discrete Laplace, discrete
Gaussian with its tails sent to +infinity, any DiscreteMechanism) give a finite pair
again, composed exactly.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import _validation as check
from .._accurate import binomial_log_tails
from ..limits import MAX_NOISE_SHIFT
from . import pairs
from .catalog import CLASSICAL_RELATIONS, NEIGHBORING_RELATIONS, Gaussian, Mechanism
from .noise_pair import NoiseMixturePair
from .pairs import FinitePair, PairMixture

__all__ = ["Subsampled", "SCHEMES", "TruncatedPoissonGaussian"]

SCHEMES = ("poisson", "subset")


@dataclass(frozen=True)
class Subsampled(Mechanism):
    """``base`` run on a random subsample with rate ``q``: scheme "poisson" or "subset" (Zhu, Dong & Wang 2022, Thm 11).

    Build it with ``base.poisson_subsampled(q)`` or ``base.subset_subsampled(q)``.

    Parameters
    ----------
    base : Mechanism
        The mechanism run on the subsample; not itself a :class:`Subsampled`.  Subsampling is
        implemented for Gaussian, Laplace and finite-output bases (randomized response, k-RR, discrete
        Laplace, discrete Gaussian, :class:`afa.DiscreteMechanism`, or any mechanism declaring a
        :class:`afa.mechanisms.pairs.FinitePair`).
    sampling_rate : float
        Sampling rate, in [0, 1]: each record's inclusion probability ("poisson"), or m/n ("subset").
        For a Gaussian or Laplace base with 0 < q < 1, ``sensitivity / sigma`` (or ``/ scale``) must be
        <= :data:`afa.limits.MAX_NOISE_SHIFT` = 1000.
    scheme : {"poisson", "subset"}, default "poisson"
        Poisson subsampling, or a random subset of fixed size.

    Raises
    ------
    TypeError
        ``base`` is not an afa mechanism, or is itself subsampled.
    ValueError
        ``q`` or ``scheme`` out of range, or a base whose noise is too narrow for its sensitivity.

    Notes
    -----
    The dominating pair is the base's transformed by the sampling (module docstring): with A = (1 - q) Q + q P
    built from the base's pair (P, Q), remove (A, Q) and add (Q, A) for Poisson subsampling, and the
    same from the base's replacement pair for subset sampling.  q = 0 gives a mechanism that never uses
    the record (its true delta is 0); q = 1 the base itself (under substitution for "subset").

    Which relations are served:

    * "subset": ``neighboring="add_remove"`` only (Zhu, Dong & Wang 2022, Thm 11(2));
    * "poisson" under substitution, with 0 < q < 1: a Gaussian base only (Google DP team 2025, Sec. 4.2).
      There the base's ``sensitivity`` Delta bounds each record's contribution: the pair has the record at
      -Delta against +Delta, so a replacement moves the output by up to 2 Delta (as in dp_accounting's
      replace-one relation); at q = 1 the pair is its limit, the Gaussian with sensitivity 2 Delta.

    * "poisson" under replace_special, with 0 < q < 1: a Gaussian or Laplace base, with the add/remove pair.
      The special record contributes f = 0, so when the position is sampled the output is that of the
      subsample without x, exactly as when x is absent: the pair of x against the special record is the
      add/remove pair (Google DP team 2025, Sec. 4.1), "remove" for x -> special.  Other bases only at
      q = 0 (the record is never used) and q = 1 (the base itself).

    Other combinations raise ValueError when the losses are asked for, as does, for 0 < q < 1, a base that
    gives its losses without declaring a pair (e.g. :class:`afa.ApproxDP`) or declares a noise-mixture pair of
    several components (:class:`afa.MixtureOfGaussians`).

    Examples
    --------
    >>> import afa
    >>> mechanism = afa.RandomizedResponse(0.75).poisson_subsampled(0.1)
    >>> mechanism
    Subsampled(base=RandomizedResponse(p=0.75), sampling_rate=0.1, scheme='poisson')
    >>> round(afa.Accountant().compose(mechanism).delta(0.0), 6)
    0.05
    """

    base: Mechanism
    sampling_rate: float
    scheme: str = "poisson"

    def __post_init__(self):
        if not isinstance(self.base, Mechanism) or isinstance(self.base, Subsampled):
            raise TypeError(f"base must be an afa mechanism that is not itself subsampled, got {self.base!r}")
        check.assign(self, sampling_rate=check.in_interval("sampling_rate", self.sampling_rate, 0.0, 1.0))
        check.choice("scheme", self.scheme, SCHEMES)
        noise = self._noise
        if noise is not None and 0 < self.sampling_rate < 1 and not noise[2] / noise[1] <= MAX_NOISE_SHIFT:
            kind, scale, shift = noise
            name = "sigma" if kind == "gaussian" else "scale"
            raise ValueError(f"{name} is out of range for a subsampled {type(self.base).__name__}: sensitivity / "
                             f"{name} must be <= {MAX_NOISE_SHIFT:g}, got {shift / scale:.4g} ({name}={scale:g}, "
                             f"sensitivity={shift:g}); with such a shift delta(epsilon) is nearly q at every "
                             "epsilon >= 0, and ApproxDP(epsilon=0, delta=q) is a valid bound to compose instead")

    def to_dict(self) -> dict:
        """The base's table with ``sampling_rate`` (q) and ``sampling`` (the scheme).

        Returns
        -------
        dict
            See :meth:`afa.Mechanism.to_dict`; :meth:`afa.Mechanism.from_dict` inverts it.

        Examples
        --------
        >>> import afa
        >>> afa.Gaussian(2.0).poisson_subsampled(0.1).to_dict()
        {'type': 'gaussian', 'sigma': 2.0, 'sensitivity': 1.0, 'sampling_rate': 0.1, 'sampling': 'poisson'}
        """
        return {**self.base.to_dict(), "sampling_rate": self.sampling_rate, "sampling": self.scheme}

    @property
    def q(self) -> float:
        """Deprecated name of :attr:`sampling_rate` (it goes in the next version)."""
        warnings.warn("Subsampled.q is deprecated: use Subsampled.sampling_rate", DeprecationWarning, stacklevel=2)
        return self.sampling_rate

    @property
    def relations(self) -> tuple[str, ...]:
        """The relations of the class Notes: "add_remove" for "subset"; for "poisson" the base's at q = 1, every
        relation at q = 0, and otherwise "add_remove" and "substitution" (the latter for a Gaussian base only),
        with "replace_special" for a Gaussian or Laplace base.

        Examples
        --------
        >>> import afa
        >>> afa.Gaussian(1.0).poisson_subsampled(0.1).relations
        ('add_remove', 'substitution', 'replace_special')
        >>> afa.RandomizedResponse(0.75).poisson_subsampled(0.1).relations
        ('add_remove', 'substitution')
        """
        if self.scheme == "subset":
            return ("add_remove",)
        if self.sampling_rate == 1:
            return self.base.relations
        if self.sampling_rate == 0:
            return NEIGHBORING_RELATIONS
        noise = self._noise
        if noise is None:
            return CLASSICAL_RELATIONS
        return NEIGHBORING_RELATIONS if noise[0] == "gaussian" else ("add_remove", "replace_special")

    def _require_relation(self, neighboring: str) -> None:
        """The base class's check, after :meth:`_check`'s messages saying why a relation is not served."""
        check.choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
        self._check(neighboring)
        super()._require_relation(neighboring)

    @functools.cached_property
    def _noise(self) -> tuple[str, float, float] | None:
        """The base's additive noise (kind, scale, sensitivity), or None (:func:`_additive_noise`), read once."""
        return _additive_noise(self.base)

    def _check(self, neighboring: str) -> None:
        """Raise for a relation the subsampled pair is not derived for."""
        if self.scheme == "subset" and neighboring != "add_remove":
            raise ValueError(f"subset sampling is analysed under neighboring='add_remove' (Zhu, Dong & Wang 2022, "
                             f"Thm 11(2), from the base's replacement pair), not {neighboring!r}")
        noise = self._noise
        if 0 < self.sampling_rate < 1 and neighboring == "substitution" and (noise is None or noise[0] != "gaussian"):
            raise ValueError("Poisson subsampling under substitution is implemented for a Gaussian base only "
                             "(Google DP team 2025, Sec. 4.2)")
        if 0 < self.sampling_rate < 1 and neighboring == "replace_special" and noise is None:
            raise ValueError(f"Subsampled declares no dominating pair under neighboring='replace_special' for a "
                             f"{type(self.base).__name__} base: Poisson subsampling is served under it for Gaussian "
                             f"and Laplace bases (the add/remove pair: the special record contributes f = 0)")

    @property
    def truncated_mass(self) -> float:
        """The base's (0 when q = 0): the mixture (1 - q) Q + q P loses at most what each side loses."""
        return self.base.truncated_mass if self.sampling_rate > 0 else 0.0

    def _at_full_rate(self, neighboring: str) -> tuple[Mechanism, str]:
        """The mechanism and relation whose pair is this one's when q = 1: subset sampling uses the base's
        replacement pair; a Poisson-subsampled Gaussian under substitution, whose pair for q < 1 has the
        record's contribution at -Delta against +Delta, tends to the Gaussian with sensitivity 2 Delta (its
        limit, so the pair is continuous in q); otherwise the base under ``neighboring``."""
        if self.scheme == "subset":
            return self.base, "substitution"
        noise = self._noise
        if neighboring == "substitution" and noise is not None and noise[0] == "gaussian":
            return Gaussian(sigma=noise[1], sensitivity=2 * noise[2]), neighboring
        return self.base, neighboring

    def dominating_pair(self, neighboring: str) -> pairs.AnyPair:
        """The base's pair transformed by the sampling (module docstring).

        Parameters
        ----------
        neighboring : {"add_remove", "substitution"}
            The neighbouring relation (see the class docstring for which are served).

        Returns
        -------
        afa.mechanisms.pairs.FinitePair or afa.mechanisms.noise_pair.NoiseMixturePair
            A noise-mixture pair for a Gaussian or Laplace base, a finite pair for a finite-output one
            (the remove direction's).  q = 0 gives a one-output pair (P = Q), q = 1 the base's pair.

        Raises
        ------
        ValueError
            A relation the scheme is not analysed under, or a base that declares no finite or additive-noise pair.

        Examples
        --------
        >>> import afa
        >>> import numpy as np
        >>> pair = afa.RandomizedResponse(0.75).poisson_subsampled(0.1).dominating_pair("add_remove")
        >>> np.exp(pair.log_p).round(4).tolist(), np.exp(pair.log_q).round(4).tolist()
        ([0.3, 0.7], [0.25, 0.75])
        """
        self._check(neighboring)
        if self.sampling_rate == 0:
            return FinitePair(np.zeros(1), np.zeros(1))  # the record is never used
        if self.sampling_rate == 1:
            mechanism, relation = self._at_full_rate(neighboring)
            return mechanism.dominating_pair(relation)
        noise = self._noise
        if noise is not None:
            return _mixture_pair(noise, self.sampling_rate, neighboring)
        pair = _base_pair(*self._at_full_rate(neighboring))  # neighboring is add_remove here (_check)
        if not isinstance(pair, FinitePair):
            raise ValueError(f"subsampling is implemented for Gaussian, Laplace and finite-output bases "
                             f"(randomized response, k-RR, discrete Laplace, discrete Gaussian, DiscreteMechanism), "
                             f"not {type(self.base).__name__}")
        rate = self.sampling_rate
        return FinitePair(np.logaddexp(math.log1p(-rate) + pair.log_q, math.log(rate) + pair.log_p), pair.log_q)

    def _losses(self, neighboring):
        self._check(neighboring)
        if self.sampling_rate == 1:
            mechanism, relation = self._at_full_rate(neighboring)
            return mechanism.privacy_losses(relation)  # the closed forms
        pair = self.dominating_pair(neighboring)
        if not isinstance(pair, NoiseMixturePair):
            return pairs.privacy_losses(pair)
        kind, scale, shift = self._noise
        label = (f"log_phi_{self.scheme}_q{self.sampling_rate:g}_{type(self.base).__name__}"
                 f"_{kind[0]}{scale:g}_d{shift:g}")
        return pairs.privacy_losses(pair, (f"{label}_remove", f"{label}_add"))

    def _tails(self, neighboring):
        self._check(neighboring)
        if self.sampling_rate == 1:
            mechanism, relation = self._at_full_rate(neighboring)
            return mechanism.loss_tails(relation)
        return super()._tails(neighboring)

    def noise_pair(self, neighboring: str = "add_remove") -> NoiseMixturePair:
        """The remove direction's pair of noise mixtures (continuous bases only); the add direction is its swap.

        Parameters
        ----------
        neighboring : {"add_remove", "substitution"}, default "add_remove"
            The neighbouring relation.

        Returns
        -------
        afa.mechanisms.noise_pair.NoiseMixturePair
            ((1 - q) N(0) + q N(Delta), N(0)) under add/remove and ((1 - q) N(0) + q N(-Delta),
            (1 - q) N(0) + q N(Delta)) under substitution (Laplace noise for a Laplace base), for the
            base's noise scale and sensitivity Delta.

        Raises
        ------
        ValueError
            The base is not a continuous additive-noise mechanism (Gaussian, Laplace), or an unknown relation.

        Examples
        --------
        >>> import afa
        >>> pair = afa.Gaussian(1.0).poisson_subsampled(0.1).noise_pair()
        >>> pair.a_shifts, pair.b_shifts
        ((0.0, 1.0), (0.0,))
        """
        check.choice("neighboring", neighboring, ("add_remove", "substitution"))
        noise = self._noise
        if noise is None:
            raise ValueError(f"{type(self.base).__name__} is not a continuous additive-noise mechanism")
        return _mixture_pair(noise, self.sampling_rate, neighboring)


def _base_pair(base: Mechanism, neighboring: str) -> pairs.AnyPair | None:
    """The base's dominating pair, or None where it declares none."""
    try:
        return base.dominating_pair(neighboring)
    except NotImplementedError:
        return None


def _additive_noise(base: Mechanism) -> tuple[str, float, float] | None:
    """(noise, scale, sensitivity) of a base whose pair is one shifted noise against the unshifted one
    (Gaussian, Laplace), else None."""
    pair = _base_pair(base, "add_remove")
    if isinstance(pair, NoiseMixturePair) and len(pair.a_shifts) == 1 and pair.b_shifts == (0.0,):
        return pair.noise, pair.scale, pair.a_shifts[0]
    return None


def _mixture_pair(noise: tuple[str, float, float], q: float, neighboring: str) -> NoiseMixturePair:
    kind, scale, shift = noise
    log_rest, log_q = math.log1p(-q), math.log(q)
    if neighboring == "substitution":
        return NoiseMixturePair(kind, scale, (0.0, -shift), (log_rest, log_q), (0.0, shift), (log_rest, log_q))
    return NoiseMixturePair(kind, scale, (0.0, shift), (log_rest, log_q), (0.0,), (0.0,))


@dataclass(frozen=True)
class TruncatedPoissonGaussian(Mechanism):
    """The Gaussian mechanism on a truncated Poisson sample (Google DP team 2025, Sec. 4.3; Ganesh 2025).

    Each of the ``dataset_size`` records is sampled with probability ``sampling_rate``; if more than
    ``batch_size`` are sampled, a uniformly random subset of ``batch_size`` of them is kept; then
    f(sample) + N(0, sigma^2) is released, f of the given ``sensitivity`` (e.g. a sum of gradients clipped
    to that norm).  Build it with ``afa.Gaussian(sigma, sensitivity).truncated_poisson_subsampled(...)``.

    Parameters
    ----------
    sigma : float
        Standard deviation of the noise, > 0 (finite).
    sampling_rate : float
        q, each record's inclusion probability, in (0, 1].
    batch_size : int
        B, the largest batch, an integer in [1, 2**53].
    dataset_size : int
        n, the number of records, an integer in [``batch_size``, 2**53].
    sensitivity : float, default 1.0
        Delta, the largest change of f when one record is added or removed, > 0 (finite), with
        ``2 * sensitivity / sigma`` <= 1000 (:data:`afa.limits.MAX_NOISE_SHIFT`).

    Raises
    ------
    ValueError
        A parameter out of range (named in the message).
    TypeError
        ``batch_size`` or ``dataset_size`` not an integer, or another parameter not a real number.

    Notes
    -----
    Ganesh 2025 (as stated in Google DP team 2025, Sec. 4.3) shows that the mixture of privacy-loss
    distributions

    * with weight 1 - w, w = Pr[Binom(n - 1, q) >= B]: the Poisson-subsampled Gaussian's pair under the
      relation (add_remove: remove ((1 - q) N(0) + q N(Delta), N(0)) and add its swap; substitution:
      ((1 - q) N(0) + q N(-Delta), (1 - q) N(0) + q N(Delta)), Sec. 4.2);
    * with weight w: the pair ((1 - q') N(0) + q' N(-2 Delta), (1 - q') N(0) + q' N(2 Delta)), one symmetric
      direction, with q' = Pr[Binom(n, q) > B] B / (n w) (the probability that a record is in the batch
      given that the sample was truncated)

    (all with noise N(0, sigma^2)) is a dominating pair under either relation.  For the second part Ganesh
    states the tighter ((1 - q') N(0) + q' N(2 Delta), N(0)) under add/remove; the section's implementation
    (dp_accounting) uses the substitution-type pair above for every relation, "a dominating pair for all
    neighboring relations", and so does afa, so that the two libraries analyse the same pair.  q = 1 gives the
    unsampled pairs (the part of weight 1 - w is then the Gaussian's; under substitution N(-Delta) against
    N(Delta), the Sec. 4.2 pair at q = 1).  When w = 0 (B = n) truncation never happens and the pair is the
    Poisson-subsampled Gaussian's, exactly.

    Under replace_special (the record x against the special record bottom, which contributes f = 0 and, like x,
    takes a place in the sample) the first part is the add/remove one: when x's batch is not truncated the output
    is N(f(rest) + x) if x is sampled and N(f(rest)) otherwise, against N(f(rest)) with bottom -- the Poisson
    pair of Sec. 4.1, as dp_accounting's PLD accountant builds it under REPLACE_SPECIAL; the second part is the
    substitution-type pair above, as under the other relations.

    The pair is dominating but not tight (Sec. 4.3: "optimistic estimates ... are not supported"):
    :attr:`tight` is False whenever w > 0, and results of a composition holding it say so
    (``Result.tight``): their ``upper`` bounds the true delta or epsilon, their ``lower`` only the pair's.

    Examples
    --------
    >>> import afa
    >>> mechanism = afa.Gaussian(1.0).truncated_poisson_subsampled(0.01, batch_size=120, dataset_size=10_000)
    >>> mechanism.truncation_probability < 1e-10, mechanism.tight
    (False, False)
    >>> result = afa.Accountant().compose(mechanism, 100).delta_result(1.0)
    >>> result.tight, bool(0.0 < result.upper < 1e-3)
    (False, True)
    """

    type_name: ClassVar[str] = "truncated_poisson_gaussian"
    _relations: ClassVar[tuple[str, ...]] = NEIGHBORING_RELATIONS

    sigma: float
    sampling_rate: float
    batch_size: int
    dataset_size: int
    sensitivity: float = 1.0

    def __post_init__(self):
        sigma = check.positive("sigma", self.sigma)
        sensitivity = check.positive("sensitivity", self.sensitivity)
        rate = check.in_interval("sampling_rate", self.sampling_rate, 0.0, 1.0, low_open=True)
        batch = check.positive_integer("batch_size", self.batch_size, maximum=check.MAX_COUNT)
        size = check.positive_integer("dataset_size", self.dataset_size, maximum=check.MAX_COUNT)
        if size < batch:
            raise ValueError(f"dataset_size must be an integer >= batch_size ({batch}), got {size}")
        if not 2 * sensitivity / sigma <= MAX_NOISE_SHIFT:
            raise ValueError(f"sigma is out of range for truncated Poisson sampling: 2 sensitivity / sigma must be "
                             f"<= {MAX_NOISE_SHIFT:g}, got {2 * sensitivity / sigma:.4g} (sigma={sigma:g}, "
                             f"sensitivity={sensitivity:g})")
        check.assign(self, sigma=sigma, sensitivity=sensitivity, sampling_rate=rate, batch_size=batch,
                     dataset_size=size)

    @property
    def truncation_probability(self) -> float:
        """w = Pr[Binom(n - 1, q) >= B]: the chance that a sampled record's batch is truncated.

        Examples
        --------
        >>> import afa
        >>> mechanism = afa.Gaussian(1.0).truncated_poisson_subsampled(0.5, batch_size=2, dataset_size=3)
        >>> mechanism.truncation_probability  # both other records sampled
        0.25
        """
        return float(math.exp(self._log_weights()[1]))

    def _log_weights(self) -> tuple[float, float]:
        """(log (1 - w), log w) from the binomial's log-CDF and log-survival function (no cancellation)."""
        n, q, b = self.dataset_size, self.sampling_rate, self.batch_size
        return binomial_log_tails(b - 1, n - 1, q)

    @property
    def conditional_sampling_rate(self) -> float:
        """q' = Pr[Binom(n, q) > B] B / (n w): a record's chance of being in a truncated batch (0 when w = 0).

        Examples
        --------
        >>> import afa
        >>> mechanism = afa.Gaussian(1.0).truncated_poisson_subsampled(1.0, batch_size=10, dataset_size=40)
        >>> round(mechanism.conditional_sampling_rate, 12)  # every sample is truncated to 10 of the 40
        0.25
        """
        log_w = self._log_weights()[1]
        if log_w == -math.inf:
            return 0.0
        n, q, b = self.dataset_size, self.sampling_rate, self.batch_size
        log_rate = binomial_log_tails(b, n, q)[1] + math.log(b) - math.log(n) - log_w
        return min(1.0, math.exp(log_rate))

    @property
    def tight(self) -> bool:
        """False whenever truncation can happen (w > 0): the pair only dominates (Google DP team 2025, Sec. 4.3)."""
        return self._log_weights()[1] == -math.inf

    def poisson_subsampled(self, sampling_rate=None, *, q=None) -> Mechanism:
        """Refused: the mechanism is already subsampled (``subset_subsampled`` is this same method).

        Parameters
        ----------
        sampling_rate : float, optional
            Ignored: the call is refused whatever it is.
        q : float, optional
            Ignored, as ``sampling_rate``.

        Returns
        -------
        Mechanism
            Never: the call always raises.  Subsample the Gaussian instead (:meth:`afa.Mechanism.poisson_subsampled`),
            or build this mechanism with another ``sampling_rate``.

        Raises
        ------
        TypeError
            Always.

        Examples
        --------
        >>> import afa
        >>> mechanism = afa.Gaussian(1.0).truncated_poisson_subsampled(0.01, batch_size=120, dataset_size=10_000)
        >>> mechanism.poisson_subsampled(0.5)
        Traceback (most recent call last):
            ...
        TypeError: a TruncatedPoissonGaussian is already subsampled; subsample the Gaussian instead
        >>> mechanism.subset_subsampled(0.5)
        Traceback (most recent call last):
            ...
        TypeError: a TruncatedPoissonGaussian is already subsampled; subsample the Gaussian instead
        """
        raise TypeError("a TruncatedPoissonGaussian is already subsampled; subsample the Gaussian instead")

    subset_subsampled = poisson_subsampled

    def dominating_pair(self, neighboring: str) -> PairMixture | NoiseMixturePair:
        """The mixture of the two pairs of the class Notes (the first alone when truncation never happens).

        Parameters
        ----------
        neighboring : {"add_remove", "substitution", "replace_special"}
            The relation of the first part (the second is the same under all three; replace_special's first
            part is add_remove's, see the class Notes).

        Returns
        -------
        afa.mechanisms.pairs.PairMixture or afa.mechanisms.noise_pair.NoiseMixturePair
            Components (untruncated Poisson part, truncated part) with weights (1 - w, w), in the scale of
            the noise (sigma); the remove (forward) direction's pair, the add direction being its swap.

        Examples
        --------
        >>> import afa
        >>> pair = afa.Gaussian(1.0).truncated_poisson_subsampled(0.5, 2, 3).dominating_pair("add_remove")
        >>> [round(float(w), 4) for w in np.exp(pair.log_weights)]
        [0.75, 0.25]
        >>> pair.components[1].a_shifts, pair.components[1].b_shifts
        ((0.0, -2.0), (0.0, 2.0))
        """
        check.choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
        shift, rate = self.sensitivity, self.sampling_rate
        keep, move = _log_complement(rate), math.log(rate)
        if neighboring == "substitution":
            poisson = _gaussian_mixture(self.sigma, ((0.0, keep), (-shift, move)), ((0.0, keep), (shift, move)))
        else:
            poisson = _gaussian_mixture(self.sigma, ((0.0, keep), (shift, move)), ((0.0, 0.0),))
        log_rest, log_w = self._log_weights()
        if log_w == -math.inf:
            return poisson
        inner = self.conditional_sampling_rate
        keep, move = _log_complement(inner), (math.log(inner) if inner > 0 else -math.inf)
        truncated = _gaussian_mixture(self.sigma, ((0.0, keep), (-2 * shift, move)), ((0.0, keep), (2 * shift, move)))
        if log_rest == -math.inf:
            return truncated
        return PairMixture((log_rest, log_w), (poisson, truncated))

    def _losses(self, neighboring):
        label = (f"log_phi_truncated_poisson_q{self.sampling_rate:g}_B{self.batch_size}_n{self.dataset_size}"
                 f"_g{self.sigma:g}_d{self.sensitivity:g}")
        return pairs.privacy_losses(self.dominating_pair(neighboring), (f"{label}_forward", f"{label}_backward"))


def _log_complement(rate: float) -> float:
    """log(1 - rate), -inf at rate = 1."""
    return math.log1p(-rate) if rate < 1 else -math.inf


def _gaussian_mixture(sigma: float, a_side, b_side) -> NoiseMixturePair:
    """The pair of Gaussian mixtures with the given (shift, log-weight) components, those of weight 0 dropped."""
    sides = []
    for side in (a_side, b_side):
        kept = [(float(shift), float(log_weight)) for shift, log_weight in side if log_weight > -math.inf]
        sides += [tuple(shift for shift, _ in kept), tuple(log_weight for _, log_weight in kept)]
    return NoiseMixturePair("gaussian", sigma, *sides)
