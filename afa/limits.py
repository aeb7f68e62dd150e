"""The fixed ranges afa holds its inputs and computations to: every limit that more than one module checks.

These are properties of afa's numerics, not settings (the settings are option objects, :mod:`afa.options`):
the constructors validate against them, calibration searches within them, and the engines rely on them.
This module imports nothing from afa, so every layer may read it.
"""

from __future__ import annotations

__all__ = ["INTERVAL_RANGE", "LOG_NEGLIGIBLE", "LOSS_LIMIT", "MAX_MU", "MAX_NOISE_SHIFT"]

#: The largest sensitivity / noise scale of a Gaussian (also of a discrete Gaussian and of a mixture's
#: components): its loss has mean mu^2 / 2 and variance mu^2.
MAX_MU = 1e150

#: The largest shift / scale of a noise-mixture pair, and so the largest sensitivity / noise scale of a
#: subsampled Gaussian or Laplace base.  The pair's MGF is an integral over the output
#: (:class:`afa.mechanisms.noise_pair.PairMGF`) that must reach (2 + 2 Re s) shifts within PairMGF.MAX_REACH = 20 000
#: noise scales: a shift of 1000 scales leaves Re s up to about 9.
MAX_NOISE_SHIFT = 1000.0

#: A PLD keeps losses at or above -LOSS_LIMIT, and the greedy hull (which works with e^x) at or below
#: LOSS_LIMIT (e^700 is still a float).
LOSS_LIMIT = 700.0

#: The grid steps a PLD may take (``value_discretization_interval``): from where the grid indices of the
#: losses a PLD keeps would leave the integers exact in floating point (with a margin), to LOSS_LIMIT / 2,
#: where a grid reaching down to -LOSS_LIMIT keeps two points.
INTERVAL_RANGE = (1e-12, LOSS_LIMIT / 2)

#: Atoms of a discrete privacy loss lighter than e^LOG_NEGLIGIBLE are dropped; their mass joins the error bound.
LOG_NEGLIGIBLE = -800.0
