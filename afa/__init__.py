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
    Gaussian,
    KaryRandomizedResponse,
    Laplace,
    Mechanism,
    MixtureOfGaussians,
    ProposeTestRelease,
    RandomizedResponse,
)
from .privacy_loss import t
from .rdp import renyi_divergence
from .calibration import Calibration, calibrate_sampling_rate, calibrate_sigma, calibrate_steps, gaussian_sigma
from .budget import Budget, BudgetExceededError
from .options import AutoOptions, ContourOptions, ExactOptions, Options, PLDOptions
from .results import AccuracyError, Attempt, Result, UnsupportedCompositionError, Validation, ValidationError
from .subsampling import Subsampled

__all__ = [
    "Accountant", "AccuracyError", "ApproxDP", "Attempt", "AutoOptions", "ContourOptions", "ExactOptions",
    "Options", "PLDOptions", "Budget", "BudgetExceededError", "Calibration", "calibrate_sampling_rate",
    "calibrate_sigma", "calibrate_steps", "gaussian_sigma", "DataDependentGaussian", "DiscreteGaussian",
    "DiscreteLaplace", "DiscreteMechanism", "Gaussian", "KaryRandomizedResponse", "Laplace", "Mechanism",
    "MixtureOfGaussians", "ProposeTestRelease", "RandomizedResponse", "Result", "Subsampled",
    "UnsupportedCompositionError", "Validation", "ValidationError", "renyi_divergence", "t",
]
__version__ = "0.1.0"
