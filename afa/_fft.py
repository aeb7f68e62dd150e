"""The floating-point model of afa's FFTs, shared by the discretized-PLD engines (:mod:`afa.engines.pld`,
:mod:`afa.engines.certified`).

A transform of size M computed by ``scipy.fft`` errs componentwise by at most gamma(M) ||x||_1 with
gamma(M) = FFT_ERROR_CONSTANT log2(M) u (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
Sec. 24.1, for accurately computed twiddle factors); a power z^k formed as |z|^k e^{i k arg z} errs by at most
POWER_ERROR_CONSTANT u (1 + k (pi + |log|z||)) |z|^k.  Both engines push these bounds through their powers and
inverse transforms; this module states them once.
"""

from __future__ import annotations

import math

import numpy as np

from ._accurate import UNIT_ROUNDOFF as U

__all__ = ["FFT_ERROR_CONSTANT", "POWER_ERROR_CONSTANT", "fft_gamma", "fft_size", "power_rounding"]

#: Componentwise FFT rounding: |fl(DFT x) - DFT x| <= FFT_ERROR_CONSTANT log2(M) u ||x||_1.
FFT_ERROR_CONSTANT = 8.0
#: Rounding of z -> z^k: at most POWER_ERROR_CONSTANT u (1 + k (pi + |log|z||)) |z|^k.
POWER_ERROR_CONSTANT = 8.0


def fft_gamma(size: int) -> float:
    """gamma(M): the componentwise rounding of a size-M transform per unit of the input's l1 norm."""
    return FFT_ERROR_CONSTANT * max(1.0, math.log2(size)) * U


def fft_size(length: int) -> int:
    """The smallest power of two holding ``length`` points."""
    return 1 << max(0, (length - 1).bit_length())


def power_rounding(count: int, log_modulus: np.ndarray, power_modulus: np.ndarray) -> np.ndarray:
    """The rounding bound of z^count at each frequency: ``log_modulus`` = log|z| (finite where used),
    ``power_modulus`` = |z|^count."""
    return POWER_ERROR_CONSTANT * U * (1 + count * (math.pi + np.abs(log_modulus))) * power_modulus
