"""The pile/tail split of a subsampled Gaussian's loss law (afa.engines.pile_split) against independent sums.

References: mpmath integrals of the tapered output integrands (40 digits), the difference (P + T)^k - P^k in
mpmath, the vertical contour over the whole law (a second engine) and the step recursion (method='exact', the
loss's CDF by closed-form convolution steps).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import special

import afa
from afa.engines.composition import ComposedLoss
from afa.engines.contour import ContourInversion, contour_inversion
from afa.engines.pile_split import CUT_LOSS, PileSplitContour, cut_output, rest_log_mgf, split_pair
from afa.mechanisms.noise_pair import NoiseMixturePair, OutputTaper, PairMGF
from afa.mechanisms.privacy_loss import NUMERIC_RTOL


def remove_loss(sigma: float, q: float):
    return afa.Gaussian(sigma).poisson_subsampled(q).privacy_losses()[0]


def pair_of(sigma: float, q: float) -> NoiseMixturePair:
    return NoiseMixturePair("gaussian", sigma, (0.0, 1.0), (math.log1p(-q), math.log(q)), (0.0,), (0.0,))


# -- the taper --------------------------------------------------------------------------------------------
def test_taper_weights_add_to_one_and_follow_the_normal_cdf():
    o = np.linspace(-5, 8, 27)
    below, above = OutputTaper(1.5, 0.2, "below"), OutputTaper(1.5, 0.2, "above")
    assert np.allclose(np.logaddexp(below.log_weight(o), above.log_weight(o)), 0.0, atol=1e-15)
    for x in (-3.0, 1.4, 1.5, 2.7):
        assert below.log_weight(np.array([x]))[0] == pytest.approx(float(mp.log(mp.ncdf(-(x - 1.5) / 0.2))),
                                                                 rel=1e-13)


@pytest.mark.parametrize("keep, cut, width", [("middle", 0.0, 1.0), ("below", math.nan, 1.0),
                                              ("above", 0.0, 0.0), ("above", 0.0, -1.0)])
def test_taper_rejects_bad_settings(keep, cut, width):
    with pytest.raises(ValueError, match="keep|cut|width"):
        OutputTaper(cut, width, keep)


def _tapered_mgf_mpmath(pair: NoiseMixturePair, taper: OutputTaper, s: complex) -> complex:
    """int A(o) w(o) e^{s L(o)} do by mpmath, split around the cut and the peak of the tilted integrand."""
    mp.mp.dps = 40
    sigma, q = pair.scale, math.exp(pair.a_log_weights[1])
    s = mp.mpc(s)

    def integrand(o):
        kappa = (2 * o - 1) / (2 * sigma ** 2)
        loss = mp.log(1 - q + q * mp.exp(kappa))
        density = ((1 - q) * mp.npdf(o, 0, sigma) + q * mp.npdf(o, 1, sigma))
        z = (o - taper.cut) / taper.width
        weight = mp.ncdf(-z) if taper.keep == "below" else mp.ncdf(z)
        return density * weight * mp.exp(s * loss)

    # breakpoints every half noise scale and wherever the phase Im(s) L has turned by 2 radians, over the outputs
    # where the real integrand is within e^-120 of its peak (numpy, in double)
    grid = np.linspace(-40 * sigma, 40 * sigma + 10, 200_001)
    loss = np.logaddexp(math.log1p(-q), math.log(q) + (2 * grid - 1) / (2 * sigma ** 2))
    z = (grid - taper.cut) / taper.width
    log_weight = special.log_ndtr(-z if taper.keep == "below" else z)
    log_real = (np.logaddexp(math.log1p(-q) - grid ** 2 / (2 * sigma ** 2), math.log(q) - (grid - 1) ** 2 / (2 * sigma ** 2))
                + log_weight + complex(s).real * loss)
    inside = grid[log_real > log_real.max() - 120]
    low, high = float(inside[0]), float(inside[-1])
    within = (grid >= low) & (grid <= high)
    turned = np.concatenate(([0.0], np.cumsum(np.abs(np.diff(loss[within]))))) * abs(complex(s).imag)
    phase_points = np.interp(np.arange(2.0, turned[-1], 2.0), turned, grid[within]) if turned[-1] > 2 else []
    points = sorted(set(np.arange(low, high, sigma / 2).tolist()) | {high} | set(np.asarray(phase_points).tolist()))
    return mp.quad(integrand, [-mp.inf] + points + [mp.inf], maxdegree=10)


@pytest.mark.parametrize("keep, s", [(keep, s) for keep in ("below", "above") for s in (0.0, 2.0, 6.3 + 30j, 12.0 + 5j)]
                         + [("below", 40.0 + 5j), ("below", 40.0 + 300j)])
def test_tapered_mgf_matches_an_mpmath_integral(keep, s):
    """The tapered output rule's MGF equals the 40-digit integral to NUMERIC_RTOL (2e-15) of its value on the real
    line (the pile's lines reach Re s = 40 and beyond, the rest's stay below 12 at sigma = 0.8)."""
    pair = pair_of(0.8, 0.001)
    taper = OutputTaper(2.8, 0.12, keep)
    log_value = PairMGF(pair, taper=taper).log_mgf(np.array([s], dtype=complex))[0]
    reference = _tapered_mgf_mpmath(pair, taper, s)
    on_real_line = abs(_tapered_mgf_mpmath(pair, taper, complex(s).real))
    assert abs(mp.exp(mp.mpc(log_value)) - reference) <= NUMERIC_RTOL * on_real_line


def test_pile_and_tail_add_up_to_the_whole_law_on_complex_lines():
    pair = pair_of(0.8, 0.001)
    whole = PairMGF(pair)
    pile, tail = PairMGF(pair, taper=OutputTaper(2.8, 0.12, "below")), PairMGF(pair, taper=OutputTaper(2.8, 0.12,
                                                                                                        "above"))
    s = np.array([0.5, 6.3 + 300j, 50 + 10j, 190 + 1000j])
    m = whole.log_mgf(s)
    total = np.exp(pile.log_mgf(s) - m) + np.exp(tail.log_mgf(s) - m)
    assert np.max(np.abs(total - 1)) <= 1e-13 * np.max(np.exp(whole.log_mgf(s.real) - m.real))


# -- the rest term ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("log_pile, log_tail, uses", [
    (-0.3 + 2.0j, -50.0 + 1.0j, 50),      # tail share 1e-22: the difference cancels in double
    (-0.3 + 2.0j, -1.0 - 3.0j, 1000),     # k T / P of order 100
    (-0.3 + 0.1j, 4.0 + 0.5j, 7),         # the tail dominates
    (2.0 + 0.0j, 2.0 - 1e-9 + 1.0j, 2),
])
def test_rest_log_mgf_is_the_difference_of_powers(log_pile, log_tail, uses):
    mp.mp.dps = 60
    a, b = mp.mpc(log_pile), mp.mpc(log_tail)
    reference = (mp.exp(a) + mp.exp(b)) ** uses - mp.exp(uses * a)
    value = np.exp(rest_log_mgf(np.array([log_pile]), np.array([log_tail]), uses)[0])
    assert abs(value - complex(reference)) <= 1e-13 * abs(complex(reference))


# -- which compositions it serves -----------------------------------------------------------------------------
def test_split_serves_many_uses_of_one_small_rate_remove_direction_only():
    remove, add = afa.Gaussian(0.8).poisson_subsampled(0.001).privacy_losses()
    assert split_pair(ComposedLoss({remove: 50})) is not None
    assert isinstance(contour_inversion(ComposedLoss({remove: 50})), PileSplitContour)
    assert split_pair(ComposedLoss({add: 50})) is None
    assert split_pair(ComposedLoss({remove: 1})) is None
    assert split_pair(ComposedLoss({remove_loss(0.8, 0.2): 50})) is None
    assert split_pair(ComposedLoss({remove: 50, remove_loss(1.0, 0.001): 3})) is None
    with pytest.raises(ValueError, match="remove-direction"):
        PileSplitContour(ComposedLoss({add: 50}))


@pytest.mark.parametrize("sigma, q", [(0.8, 0.001), (2.0, 0.02), (1.0, 1e-6)])
def test_cut_lies_at_the_cut_loss(sigma, q):
    cut = cut_output(pair_of(sigma, q), CUT_LOSS)
    assert float(pair_of(sigma, q).privacy_loss(np.array([cut]))[0]) == pytest.approx(CUT_LOSS, rel=1e-13)


# -- delta against a second engine -------------------------------------------------------------------------
@pytest.mark.parametrize("sigma, q, uses, epsilon", [
    (0.8, 0.001, 50, 0.1112902934990087),   # delta 1e-5: both parts summed
    (0.8, 0.001, 50, 1.2130809074733055),   # delta 1e-10: the pile's share below its Chernoff bound
    (2.0, 0.001, 1000, 0.061139089961336816),  # delta 1e-6: the tail's mass below 1e-21
])
def test_split_delta_matches_the_whole_law_contour(sigma, q, uses, epsilon):
    loss = ComposedLoss({remove_loss(sigma, q): uses})
    split = PileSplitContour(loss, 1 << 20)
    split.whole_first = False  # the two parts, not the whole law's contour
    value, error = split.delta(np.array([epsilon]), verify=True)
    whole, whole_error = ContourInversion(loss, 1 << 21).delta(np.array([epsilon]), verify=True)
    assert abs(value[0] - whole[0]) <= error[0] + whole_error[0]
    assert error[0] <= 1e-10 * value[0]


def test_split_epsilon_within_the_step_recursion_bracket():
    """eps(1e-5) of 50 uses (sigma = 0.8, q = 0.001) from the split contour lies in the step recursion's bracket,
    and its own bracket is at most 1e-9 wide relative (the whole law's line refused 1e-9 wide at 3.6e-10)."""
    accountant = afa.Accountant().compose(afa.Gaussian(0.8).poisson_subsampled(0.001), 50)
    contour = accountant.epsilon_result(1e-5)  # the contour's wide retry: the whole law's line refuses
    assert contour.method == "contour"
    exact = accountant.epsilon_result(1e-5, method="exact")
    assert contour.upper - contour.lower <= 1e-9 * contour.value
    assert exact.lower - 1e-12 <= contour.value <= exact.upper + 1e-12
    assert contour.lower <= exact.value <= contour.upper


def test_whole_law_contour_first_and_the_split_once_it_refuses():
    """Many uses of q = 0.01 keep the whole law's contour (it answers within its budget); 50 uses of q = 0.001 run
    it out of nodes and the split answers, to within the step recursion's bracket."""
    wide = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01), 1000)
    wide.epsilon_result(1e-5, method="contour")
    split, = [engine.inversion for engine in wide.planner.engines("contour")
              if isinstance(engine.inversion, PileSplitContour)]
    assert split.whole_first is True
    piled = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.001), 50)
    answer = piled.epsilon_result(1e-10)
    split, = [engine.inversion for engine in piled.planner.engines("contour")
              if isinstance(engine.inversion, PileSplitContour)]
    assert split.whole_first is False
    exact = piled.epsilon_result(1e-10, method="exact")
    assert answer.lower <= exact.upper and exact.lower <= answer.upper
    assert answer.upper - answer.lower <= 1e-9 * answer.value
