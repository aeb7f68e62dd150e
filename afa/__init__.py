"""afa: exact differential-privacy accounting with symbolic characteristic functions.

Mechanisms contribute the log characteristic function of their privacy loss
(Zhu, Dong & Wang 2022); an :class:`Accountant` adds them and
inverts the sum into delta(epsilon) and epsilon(delta).  See README.md.

``import afa`` imports none of afa's modules: each public name (and each submodule) is imported on first
access (PEP 562), so that the ``afa`` command and scripts that need one corner of the library start fast.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ below imports each name on first use
    from .accountant import Accountant
    from .mechanisms.catalog import (
        ApproxDP,
        DataDependentGaussian,
        DiscreteGaussian,
        DiscreteLaplace,
        DiscreteMechanism,
        ExponentialMechanism,
        Gaussian,
        KaryRandomizedResponse,
        Laplace,
        Mechanism,
        MixtureOfGaussians,
        PermuteAndFlip,
        ProposeTestRelease,
        RandomizedResponse,
    )
    from .mechanisms.privacy_loss import t
    from .views.rdp import renyi_divergence
    from .calibration import Calibration, calibrate_sampling_rate, calibrate_sigma, calibrate_steps, gaussian_sigma
    from .budget import Budget, BudgetExceededError
    from .options import AutoOptions, ContourOptions, ExactOptions, Options, PLDOptions
    from .results import AccuracyError, Attempt, Result, UnsupportedCompositionError, Validation, ValidationError
    from .mechanisms.subsampling import Subsampled, TruncatedPoissonGaussian
    from .interop import from_dp_event as from_dp_event, to_dp_event as to_dp_event  # not in __all__

__all__ = [
    "Accountant", "AccuracyError", "ApproxDP", "Attempt", "AutoOptions", "ContourOptions", "ExactOptions",
    "Options", "PLDOptions", "Budget", "BudgetExceededError", "Calibration", "calibrate_sampling_rate",
    "calibrate_sigma", "calibrate_steps", "gaussian_sigma", "DataDependentGaussian", "DiscreteGaussian",
    "DiscreteLaplace", "DiscreteMechanism", "ExponentialMechanism", "Gaussian", "KaryRandomizedResponse", "Laplace",
    "Mechanism", "MixtureOfGaussians", "PermuteAndFlip", "ProposeTestRelease", "RandomizedResponse", "Result",
    "Subsampled", "TruncatedPoissonGaussian", "UnsupportedCompositionError", "Validation", "ValidationError",
    "renyi_divergence", "t",
]
__version__ = "0.1.0"

#: The public names of each module, imported on a name's first access (``afa.from_dp_event`` and
#: ``afa.to_dp_event`` are dp_accounting's bridge, :mod:`afa.interop`).
_EXPORTS = {
    "accountant": ("Accountant",),
    "mechanisms.catalog": ("ApproxDP", "DataDependentGaussian", "DiscreteGaussian", "DiscreteLaplace",
                           "DiscreteMechanism", "ExponentialMechanism", "Gaussian", "KaryRandomizedResponse",
                           "Laplace", "Mechanism", "MixtureOfGaussians", "PermuteAndFlip", "ProposeTestRelease",
                           "RandomizedResponse"),
    "mechanisms.privacy_loss": ("t",),
    "views.rdp": ("renyi_divergence",),
    "calibration": ("Calibration", "calibrate_sampling_rate", "calibrate_sigma", "calibrate_steps", "gaussian_sigma"),
    "budget": ("Budget", "BudgetExceededError"),
    "options": ("AutoOptions", "ContourOptions", "ExactOptions", "Options", "PLDOptions"),
    "results": ("AccuracyError", "Attempt", "Result", "UnsupportedCompositionError", "Validation", "ValidationError"),
    "mechanisms.subsampling": ("Subsampled", "TruncatedPoissonGaussian"),
    "interop": ("from_dp_event", "to_dp_event"),
}
_HOMES = {name: module for module, names in _EXPORTS.items() for name in names}
#: Submodules reachable as attributes, imported on first use: the subpackages and top-level modules under their
#: own names, and short names for the modules a user reaches for most (``afa.exact`` is :mod:`afa.numerics.exact`,
#: ``afa.tradeoff`` :mod:`afa.views.tradeoff`, ...).
_SUBMODULES = {name: name for name in (
    "accountant", "budget", "calibration", "cli", "engines", "interop", "limits", "mechanisms", "numerics",
    "options", "progress", "results", "sweep", "views")}
_SUBMODULES.update(exact="numerics.exact", clt="views.clt", plot="views.plot", rdp="views.rdp",
                   tradeoff="views.tradeoff")


def __getattr__(name: str):
    if name in _HOMES:
        value = getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
        globals()[name] = value  # later reads find it without this function
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f".{_SUBMODULES[name]}", __name__)
    raise AttributeError(f"module 'afa' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES) | set(_SUBMODULES))
