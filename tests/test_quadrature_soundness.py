"""The real-line quadrature's stated error bounds its true error on lattice x Gaussian compositions.

A lattice-valued loss (discrete Gaussian, discrete Laplace) makes the CF periodic in t, so the
integrand has replicas of its bump at multiples of 2 pi / spacing, damped only by the Gaussian
part.  Compositions with a wide-spaced lattice and a weak Gaussian put many replicas inside the
integration range.  The truth is the definition-based mpmath reference of ``tests/_fuzz.py``
(direct convolution of the mechanisms' PMFs; the Gaussians' mixture in closed form).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _fuzz import Composition, Reference, Spec

import afa

#: Rounding of the reference itself (direct convolution, a few ulps per step).
REFERENCE_RTOL = 1e-12


def _composition(seed: int) -> Composition:
    rng = np.random.default_rng(seed)
    if seed % 2:
        lattice = Spec("dlap", (float(np.exp(rng.uniform(math.log(0.3), math.log(1.5)))), 1))
    else:
        lattice = Spec("dgauss", (float(np.exp(rng.uniform(math.log(0.7), math.log(1.2)))), 1))
    gaussian = Spec("gaussian", (float(np.exp(rng.uniform(math.log(8.0), math.log(30.0)))),))
    neighboring = ("add_remove", "substitution")[int(rng.integers(2))]
    terms = ((lattice, int(rng.integers(20, 120))), (gaussian, int(rng.integers(1, 4))))
    return Composition(seed, neighboring, terms, ())


#: The replicas lie between the tail scan's nodes: without them the stated error was 28x too small here.
WEAK_GAUSSIAN = Composition(-1, "substitution", ((Spec("dgauss", (1.167242101971219, 1)), 164),
                                                 (Spec("gaussian", (13.99885790157064,)), 1)), ())


@pytest.mark.parametrize("composition", [WEAK_GAUSSIAN] + [_composition(seed) for seed in range(8)],
                         ids=lambda composition: f"seed{composition.seed}")
def test_quadrature_error_bounds_its_true_error_with_lattice_replicas(composition):
    reference = Reference(composition)
    assert reference.available
    acc = composition.accountant()
    for target in (1e-3, 1e-6):
        epsilon = acc.epsilon(target, method="exact")
        try:
            result = acc.delta_result(epsilon, method="quadrature")
        except afa.AccuracyError:
            continue  # a refusal is sound
        truth = reference.delta(epsilon)
        assert abs(result.value - truth) <= result.error + REFERENCE_RTOL * truth, (composition, epsilon, result, truth)
