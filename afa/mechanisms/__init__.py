"""The mechanisms: what each one is, its dominating pairs, and the privacy losses derived from them.

* :mod:`afa.mechanisms.catalog` -- :class:`~afa.mechanisms.catalog.Mechanism` (the extension point,
  ``dominating_pair``) and the built-in mechanisms (Gaussian, Laplace, randomized response, ...);
* :mod:`afa.mechanisms.subsampling` -- Poisson and fixed-size subsampling as transforms of a mechanism;
* :mod:`afa.mechanisms.pairs` and :mod:`afa.mechanisms.noise_pair` -- the kinds of dominating pair (finite
  pairs of log-pmfs, mixtures of shifted Gaussian or Laplace noise, two-scale Gaussians) and their log-MGFs;
* :mod:`afa.mechanisms.shifted_output` -- a Gaussian noise pair's MGF far up a contour, along a shifted output
  line; :mod:`afa.mechanisms.output_rules` -- the composite Gauss-Legendre rules both lay over the output;
* :mod:`afa.mechanisms.closed_forms` -- the closed-form losses of the pair shapes that have one;
* :mod:`afa.mechanisms.privacy_loss` -- one direction's privacy loss and its symbolic log-CF;
* :mod:`afa.mechanisms.loss_tails` -- the loss tails the discretized PLD needs.

The mechanism classes are also reachable here (``afa.mechanisms.Gaussian``), imported on first access, and
at the top level (``afa.Gaussian``).  Nothing here imports the engines or the accountant.
"""

import importlib

from .._lazy import lazy_submodules

_SUBSAMPLED = ("Subsampled", "TruncatedPoissonGaussian")
_CATALOG = ("ApproxDP", "DataDependentGaussian", "DiscreteGaussian", "DiscreteLaplace", "DiscreteMechanism",
            "ExponentialMechanism", "Gaussian", "KaryRandomizedResponse", "Laplace", "Mechanism",
            "MixtureOfGaussians", "PermuteAndFlip", "ProposeTestRelease", "RandomizedResponse")
_MODULES = ("catalog", "closed_forms", "loss_tails", "noise_pair", "output_rules", "pairs", "privacy_loss",
            "shifted_output", "subsampling")
__all__ = [*_CATALOG, *_SUBSAMPLED]
_submodule, _names = lazy_submodules(__name__, _MODULES)


def __getattr__(name: str):
    if name in _CATALOG or name in _SUBSAMPLED:
        module = "catalog" if name in _CATALOG else "subsampling"
        value = getattr(importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value
        return value
    return _submodule(name)


def __dir__() -> list[str]:
    return sorted(set(_names()) | set(__all__))
