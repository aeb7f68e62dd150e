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
from dataclasses import dataclass

import numpy as np

from . import _validation as check
from . import pairs
from .mechanisms import Mechanism
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
    """

    base: Mechanism
    q: float
    scheme: str = "poisson"

    def __post_init__(self):
        if not isinstance(self.base, Mechanism) or isinstance(self.base, Subsampled):
            raise TypeError(f"base must be an afa mechanism that is not itself subsampled, got {self.base!r}")
        check.assign(self, q=check.in_interval("q", self.q, 0.0, 1.0))
        check.choice("scheme", self.scheme, SCHEMES)
        noise = _additive_noise(self.base)
        if noise is not None and 0 < self.q < 1 and not noise[2] / noise[1] <= MAX_SUBSAMPLED_SHIFT:
            kind, scale, shift = noise
            name = "sigma" if kind == "gaussian" else "scale"
            raise ValueError(f"{name} is out of range for a subsampled {type(self.base).__name__}: sensitivity / "
                             f"{name} must be <= {MAX_SUBSAMPLED_SHIFT:g}, got {shift / scale:.4g} ({name}={scale:g}, "
                             f"sensitivity={shift:g}); with such a shift delta(epsilon) is nearly q at every "
                             "epsilon >= 0, and ApproxDP(epsilon=0, delta=q) is a valid bound to compose instead")

    def to_dict(self) -> dict:
        """The base's table with ``sampling_rate`` (q) and ``sampling`` (the scheme); see
        :meth:`afa.Mechanism.to_dict`."""
        return {**self.base.to_dict(), "sampling_rate": self.q, "sampling": self.scheme}

    def _check(self, neighboring: str) -> None:
        """Raise for a relation the subsampled pair is not derived for."""
        if self.scheme == "subset" and neighboring != "add_remove":
            raise ValueError("subset sampling is analysed under neighboring='add_remove' (Zhu, Dong & Wang 2022, "
                             "Thm 11(2), from the base's replacement pair)")
        noise = _additive_noise(self.base)
        if 0 < self.q < 1 and neighboring == "substitution" and (noise is None or noise[0] != "gaussian"):
            raise ValueError("Poisson subsampling under substitution is implemented for a Gaussian base only "
                             "(Google DP team 2025, Sec. 4.2)")

    @property
    def truncated_mass(self) -> float:
        """The base's: the mixture (1 - q) Q + q P loses at most what each side loses."""
        return self.base.truncated_mass if self.q > 0 else 0.0

    def _full_relation(self, neighboring: str) -> str:
        """The base's relation when q = 1 (subset sampling uses the replacement pair)."""
        return "substitution" if self.scheme == "subset" else neighboring

    def dominating_pair(self, neighboring: str) -> FinitePair | NoiseMixturePair:
        """The base's pair transformed by the sampling (module docstring): a noise-mixture pair for a
        Gaussian or Laplace base, a finite pair for a finite-output one."""
        self._check(neighboring)
        if self.q == 0:
            return FinitePair(np.zeros(1), np.zeros(1))  # the record is never used
        if self.q == 1:
            return self.base.dominating_pair(self._full_relation(neighboring))
        noise = _additive_noise(self.base)
        if noise is not None:
            return _mixture_pair(noise, self.q, neighboring)
        pair = _base_pair(self.base, self._full_relation(neighboring))  # neighboring is add_remove here (_check)
        if not isinstance(pair, FinitePair):
            raise ValueError(f"subsampling is implemented for Gaussian, Laplace and finite-output bases "
                             f"(randomized response, k-RR, discrete Laplace, discrete Gaussian, DiscreteMechanism), "
                             f"not {type(self.base).__name__}")
        return FinitePair(np.logaddexp(math.log1p(-self.q) + pair.log_q, math.log(self.q) + pair.log_p), pair.log_q)

    def _losses(self, neighboring):
        self._check(neighboring)
        if self.q == 1:
            return self.base.privacy_losses(self._full_relation(neighboring))  # the base's closed forms
        pair = self.dominating_pair(neighboring)
        if not isinstance(pair, NoiseMixturePair):
            return pairs.privacy_losses(pair)
        kind, scale, shift = _additive_noise(self.base)
        label = f"log_phi_{self.scheme}_q{self.q:g}_{type(self.base).__name__}_{kind[0]}{scale:g}_d{shift:g}"
        return pairs.privacy_losses(pair, (f"{label}_remove", f"{label}_add"))

    def _tails(self, neighboring):
        self._check(neighboring)
        if self.q == 1:
            return self.base.loss_tails(self._full_relation(neighboring))
        return super()._tails(neighboring)

    def noise_pair(self, neighboring: str = "add_remove") -> NoiseMixturePair:
        """The remove direction's pair of noise mixtures (continuous bases only); the add direction is its swap."""
        check.choice("neighboring", neighboring, ("add_remove", "substitution"))
        noise = _additive_noise(self.base)
        if noise is None:
            raise ValueError(f"{type(self.base).__name__} is not a continuous additive-noise mechanism")
        return _mixture_pair(noise, self.q, neighboring)


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
