"""afa: exact differential-privacy accounting with symbolic characteristic functions.

Mechanisms contribute the log characteristic function of their privacy loss
(Zhu, Dong & Wang 2022); an :class:`Accountant` adds them and
inverts the sum into delta(epsilon) and epsilon(delta).  See README.md.
"""

from .accountant import Accountant
from .mechanisms import (
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
from .privacy_loss import t
from .rdp import renyi_divergence
from .calibration import Calibration, calibrate_sampling_rate, calibrate_sigma, calibrate_steps, gaussian_sigma
from .budget import Budget, BudgetExceededError
from .options import AutoOptions, ContourOptions, ExactOptions, Options, PLDOptions
from .results import AccuracyError, Attempt, Result, UnsupportedCompositionError, Validation, ValidationError
from .subsampling import Subsampled, TruncatedPoissonGaussian

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

#: Submodules reachable as attributes (``afa.clt``, ``afa.tradeoff``, ...), imported on first use.
_SUBMODULES = ("cli", "clt", "contour", "discrete", "engines", "exact", "interop", "options", "pairs", "pld", "plot",
               "rdp", "sweep", "tradeoff")
#: Functions of :mod:`afa.interop` reachable as ``afa.from_dp_event`` and ``afa.to_dp_event``, imported on first use.
_INTEROP = ("from_dp_event", "to_dp_event")


def __getattr__(name: str):
    if name in _SUBMODULES:
        import importlib
        return importlib.import_module(f".{name}", __name__)
    if name in _INTEROP:
        from . import interop
        return getattr(interop, name)
    raise AttributeError(f"module 'afa' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBMODULES) | set(_INTEROP))
