"""The floating-point model of afa's FFTs, shared by the discretized-PLD engines (:mod:`afa.engines.pld`,
:mod:`afa.engines.certified`).

A transform of size M computed by ``scipy.fft`` errs componentwise by at most gamma(M) ||x||_1 with
gamma(M) = FFT_ERROR_CONSTANT log2(M) u (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
Sec. 24.1, for accurately computed twiddle factors); a power z^k formed as |z|^k e^{i k arg z} errs by at most
POWER_ERROR_CONSTANT u (1 + k (pi + |log|z||)) |z|^k.  Both engines push these bounds through their powers and
inverse transforms; this module states them once, with the mass a k-fold power gives +infinity
(:func:`composed_inf_mass`), which both engines carry beside their grids.
"""

from __future__ import annotations

import math

import numpy as np

from ._accurate import UNIT_ROUNDOFF as U

__all__ = ["FFT_ERROR_CONSTANT", "POWER_ERROR_CONSTANT", "composed_inf_mass", "fft_gamma", "fft_size",
           "power_rounding"]

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


def composed_inf_mass(finite: float, inf_mass: float, count: int, upward: bool = True) -> float:
    """Mass at +inf of the count-fold power of a measure with finite mass F and mass a at +inf:
    (F + a)^k - F^k (1 - (1 - a)^k for F + a = 1), rounded up (``upward``) or down by its rounding (a few ulps
    per factor)."""
    if inf_mass == 0.0:
        return 0.0
    if finite == 0.0:
        value = math.exp(count * math.log(inf_mass))
    else:
        total = finite + inf_mass
        value = math.exp(count * math.log(total)) * -math.expm1(count * math.log1p(-inf_mass / total))
    margin = 16 * U * (4 + count * (1 + abs(math.log(finite + inf_mass))))
    return min(1.0, value * (1 + margin)) if upward else value * max(0.0, 1 - margin)
