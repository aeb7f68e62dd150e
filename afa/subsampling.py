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
  ((1 - q) N(0) + q N(-Delta), (1 - q) N(0) + q N(Delta)), one symmetric direction.

Additive continuous noise (Gaussian, Laplace) gives a pair of noise mixtures whose
log-CF has no closed form: it is computed by quadrature over the output
(:class:`afa.noise_pair.PairMGF`), for complex arguments too, so the contour method
applies.  Discrete-output bases (randomized response, k-RR, discrete Laplace, discrete
Gaussian with its tails sent to +infinity, any DiscreteMechanism) give a finite pair
again, composed exactly.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from . import _validation as check
from . import pairs
from .mechanisms import Gaussian, Mechanism
from .noise_pair import NoiseMixturePair
from .pairs import FinitePair

__all__ = ["Subsampled", "SCHEMES"]

SCHEMES = ("poisson", "subset")
#: The largest sensitivity / noise scale of a subsampled Gaussian or Laplace base.  The mixture's MGF is
#: an integral over the output (:class:`afa.noise_pair.PairMGF`) that must reach (2 + 2 |Re s|) shifts
#: within PairMGF.MAX_REACH = 20 000 noise scales: a shift of 1000 scales leaves |Re s| up to about 9.
MAX_SUBSAMPLED_SHIFT = 1000.0


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
        :class:`afa.pairs.FinitePair`).
    sampling_rate : float
        Sampling rate, in [0, 1]: each record's inclusion probability ("poisson"), or m/n ("subset").
        For a Gaussian or Laplace base with 0 < q < 1, ``sensitivity / sigma`` (or ``/ scale``) must be
        <= ``MAX_SUBSAMPLED_SHIFT`` = 1000.
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

    Other combinations raise ValueError when the losses are asked for, as does, for 0 < q < 1, a base that
    gives its losses without declaring a pair (e.g. :class:`afa.ApproxDP`, :class:`afa.MixtureOfGaussians`).

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
        noise = _additive_noise(self.base)
        if noise is not None and 0 < self.sampling_rate < 1 and not noise[2] / noise[1] <= MAX_SUBSAMPLED_SHIFT:
            kind, scale, shift = noise
            name = "sigma" if kind == "gaussian" else "scale"
            raise ValueError(f"{name} is out of range for a subsampled {type(self.base).__name__}: sensitivity / "
                             f"{name} must be <= {MAX_SUBSAMPLED_SHIFT:g}, got {shift / scale:.4g} ({name}={scale:g}, "
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

    def _check(self, neighboring: str) -> None:
        """Raise for a relation the subsampled pair is not derived for."""
        if self.scheme == "subset" and neighboring != "add_remove":
            raise ValueError("subset sampling is analysed under neighboring='add_remove' (Zhu, Dong & Wang 2022, "
                             "Thm 11(2), from the base's replacement pair)")
        noise = _additive_noise(self.base)
        if 0 < self.sampling_rate < 1 and neighboring == "substitution" and (noise is None or noise[0] != "gaussian"):
            raise ValueError("Poisson subsampling under substitution is implemented for a Gaussian base only "
                             "(Google DP team 2025, Sec. 4.2)")

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
        noise = _additive_noise(self.base)
        if neighboring == "substitution" and noise is not None and noise[0] == "gaussian":
            return Gaussian(sigma=noise[1], sensitivity=2 * noise[2]), neighboring
        return self.base, neighboring

    def dominating_pair(self, neighboring: str) -> FinitePair | NoiseMixturePair:
        """The base's pair transformed by the sampling (module docstring).

        Parameters
        ----------
        neighboring : {"add_remove", "substitution"}
            The neighbouring relation (see the class docstring for which are served).

        Returns
        -------
        afa.pairs.FinitePair or afa.noise_pair.NoiseMixturePair
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
        noise = _additive_noise(self.base)
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
        kind, scale, shift = _additive_noise(self.base)
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
        afa.noise_pair.NoiseMixturePair
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
        noise = _additive_noise(self.base)
        if noise is None:
            raise ValueError(f"{type(self.base).__name__} is not a continuous additive-noise mechanism")
        return _mixture_pair(noise, self.sampling_rate, neighboring)


def _base_pair(base: Mechanism, neighboring: str) -> FinitePair | NoiseMixturePair | None:
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
