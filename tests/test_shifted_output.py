"""The MGF of a Gaussian noise pair on a shifted output line (afa.mechanisms.shifted_output).

Independent references: the 30-digit mpmath integral over the real output line
(``tests/_subsampling_reference.py``; no analytic continuation, so it checks the continuation itself), the
closed form of the unsubsampled Gaussian pair, M(s) = exp(s (1 + s) / (2 sigma^2)), and the real-line rule of
:class:`afa.mechanisms.noise_pair.PairMGF` (a second algorithm).  Errors are measured relative to M(Re s), the
error model of the numeric MGF (NUMERIC_RTOL) that the contour's error budget assumes.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from _subsampling_reference import log_mgf_mpmath

from afa.mechanisms import shifted_output
from afa.mechanisms.noise_pair import NoiseMixturePair, PairMGF, gauss_legendre

NODES, WEIGHTS = gauss_legendre(PairMGF.ORDER)


def _pair(sigma: float, q: float, relation: str) -> NoiseMixturePair:
    """The Poisson-subsampled Gaussian's pair (P, Q) of ``relation`` as in the mpmath reference."""
    rest, sampled = math.log1p(-q), math.log(q)
    if relation == "remove":
        return NoiseMixturePair("gaussian", sigma, (0.0, 1.0), (rest, sampled), (0.0,), (0.0,))
    if relation == "add":
        return NoiseMixturePair("gaussian", sigma, (0.0,), (0.0,), (0.0, 1.0), (rest, sampled))
    return NoiseMixturePair("gaussian", sigma, (0.0, -1.0), (rest, sampled), (0.0, 1.0), (rest, sampled))


def _octave(u: float) -> float:
    return 2.0 ** math.ceil(math.log2(u))


@pytest.mark.parametrize("relation, s", [("remove", 2.0 + 300.0j), ("add", 0.5 + 120.0j),
                                         ("substitution", 1.0 + 150.0j), ("remove", -3.0 + 200.0j)])
def test_shifted_line_matches_the_real_line_integral_at_30_digits(relation, s):
    """The shifted rule, used whatever it costs, against mpmath's integral over the real output: the
    continuation (principal logarithms of the mixtures inside the strip) and the rule are right."""
    pair = _pair(1.0, 0.01, relation)
    rule = shifted_output.rule(pair, s.real, _octave(s.imag), NODES, WEIGHTS)
    assert rule is not None and rule.height != 0
    got = shifted_output.log_sums(rule, np.array([s.imag]))[0]
    with mp.workdps(30):
        truth = complex(log_mgf_mpmath(s, "gaussian", 1.0, 0.01, 1.0, relation))
        at_real = float(mp.re(log_mgf_mpmath(s.real, "gaussian", 1.0, 0.01, 1.0, relation)))
    assert abs(np.exp(got - truth) - 1) * math.exp(truth.real - at_real) < 1e-14, (got, truth)
    # Conjugate symmetry: the pair's MGF at c - iu is the conjugate, as PairMGF uses it.
    assert PairMGF(pair).log_mgf(np.array([np.conj(s)]))[0] == pytest.approx(np.conj(got), abs=1e-13)


@pytest.mark.parametrize("sigma", [0.7, 1.0, 3.0])
def test_shifted_line_matches_the_closed_form_of_the_gaussian_pair(sigma):
    """q = 1: the loss is Gaussian and M(s) = exp(s (1 + s) / (2 sigma^2)) at every complex s; the shifted
    rule (a line with Im o = y, where the integrand is e^{y^2 / (2 sigma^2)} larger) is within 1e-14 M(c) of
    it.  (Far up, a Gaussian loss has no flat end for the shift to isolate: its phase turns as fast on every
    line, and PairMGF keeps the real-line rule there.)"""
    pair = NoiseMixturePair("gaussian", sigma, (1.0,), (0.0,), (0.0,), (0.0,))
    for c in (0.5, 4.0):
        at_real = c * (1 + c) / (2 * sigma ** 2)
        for u in (3.0, 20.0, 70.0):
            rule = shifted_output.rule(pair, c, _octave(u), NODES, WEIGHTS)
            assert rule is not None
            got = shifted_output.log_sums(rule, np.array([u]))[0]
            s = complex(c, u)
            truth = s * (1 + s) / (2 * sigma ** 2)
            assert abs(np.exp(got - at_real) - np.exp(truth - at_real)) < 1e-14, (c, u, got, truth)


def test_pair_mgf_far_up_a_near_atom_line_agrees_with_the_real_line_rule(monkeypatch):
    """sigma = 1, q = 0.001 at Re s = 12.94 (the saddle of 10 steps at delta = 1e-5): from |Im s| = 256 on the
    shifted rule is taken; it agrees with the real-line rule (forced by disabling the shift) to 1e-12 of
    M(c), with 36 to 1063 times fewer output nodes (asserted: more than 15 times)."""
    pair = _pair(1.0, 0.001, "remove")
    c, u = 12.94, np.array([300.0, 1000.0, 5000.0, 16000.0])
    shifted = PairMGF(pair)
    costs = shifted.evaluation_cost(c, u)
    got = shifted.log_mgf(c + 1j * u)
    monkeypatch.setattr(PairMGF, "SHIFT_FROM", math.inf)
    real = PairMGF(pair)
    real_costs = real.evaluation_cost(c, u)
    expected = real.log_mgf(c + 1j * u)
    at_real = float(real.log_mgf(np.array([c + 0j]))[0].real)
    assert np.all(np.abs(np.exp(got - at_real) - np.exp(expected - at_real)) < 1e-12)
    assert np.all(costs * 15 < real_costs), (costs, real_costs)


def test_lattice_sums_match_the_direct_sums():
    """log_sums' factored product for a lattice of frequencies (a contour's chunk) equals the sum formed
    frequency by frequency, to rounding of the rule's sum of |terms|."""
    pair = _pair(0.9, 0.005, "remove")
    rule = shifted_output.rule(pair, 6.0, 1024.0, NODES, WEIGHTS)
    u = 512.25 + 0.75 * np.arange(600)
    u = u[u <= 1024.0]
    multiples = np.arange(u.size)
    factored = shifted_output.log_sums(rule, u, (float(u[0]), 0.75, multiples))
    direct = shifted_output.log_sums(rule, u)
    scale = rule.log_magnitude
    assert np.max(np.abs(np.exp(factored - scale) - np.exp(direct - scale))) < 1e-13


def test_laplace_pairs_and_flat_losses_are_not_shifted():
    """The Laplace density is not analytic (its kink) and a pair without shifts has no loss to follow."""
    assert shifted_output.height(NoiseMixturePair("laplace", 1.0, (0.0, 1.0), (math.log(0.99), math.log(0.01)),
                                                  (0.0,), (0.0,))) is None
    assert shifted_output.height(NoiseMixturePair("gaussian", 1.0, (0.0,), (0.0,), (0.0,), (0.0,))) is None
    laplace = NoiseMixturePair("laplace", 1.0, (0.0, 1.0), (math.log(0.99), math.log(0.01)), (0.0,), (0.0,))
    assert PairMGF(laplace)._shifted(2.0, 8192.0) is None  # the real-line rule serves every node


@pytest.mark.parametrize("sigma, sensitivity", [(1.0, 1.0), (0.5, 2.0), (4.0, 1.0)])
def test_height_stays_inside_the_strip_and_the_inflation_cap(sigma, sensitivity):
    """Every component's phase |c_i y| / sigma^2 stays below pi / 2 (the mixtures' real parts stay
    positive, so their principal logarithms are analytic) and e^{y^2 / (2 sigma^2)} <= e^INFLATION."""
    pair = NoiseMixturePair("gaussian", sigma, (0.0, sensitivity), (math.log(0.9), math.log(0.1)), (0.0,), (0.0,))
    y = shifted_output.height(pair)
    assert y > 0  # the loss rises with the output: u Im L >= 0 for u > 0
    assert sensitivity * y / sigma ** 2 < math.pi / 2
    assert y ** 2 / (2 * sigma ** 2) <= shifted_output.INFLATION * (1 + 1e-12)
    assert shifted_output.height(pair.swapped()) == -y


def test_one_coarse_line_serves_every_octave():
    """The octaves' rules laid out on one coarse line of their real part are the rules each forms alone (the
    coarse line depends on c only), and a pair without a shifted line has no coarse line either."""
    pair = _pair(1.0, 0.01, "remove")
    line = shifted_output.coarse_line(pair, 7.5)
    for octave in (8.0, 64.0, 1024.0, 16384.0):
        alone, shared = (shifted_output.rule(pair, 7.5, octave, NODES, WEIGHTS, coarse) for coarse in (None, line))
        assert (alone is None) == (shared is None)
        if alone is not None:
            np.testing.assert_array_equal(alone.log_terms, shared.log_terms)
            np.testing.assert_array_equal(alone.loss, shared.loss)
            assert alone.log_magnitude == shared.log_magnitude
    flat = NoiseMixturePair("gaussian", 1.0, (0.0,), (0.0,), (0.0,), (0.0,))
    assert shifted_output.coarse_line(flat, 2.0) is None


@pytest.mark.parametrize("u", [300.0, 1000.0])
def test_both_output_rules_keep_the_numeric_error_model_far_up_a_near_atom_line(monkeypatch, u):
    """sigma = 2, q = 0.001 at Re s = 54.125 (the saddle of 20 steps at delta = 1e-10), against the 30-digit
    integral over the real output line: PairMGF's rule (the shifted line) and the real-line rule are each within
    NUMERIC_RTOL of M(c), the error model the contour's node error bound relies on.  (The shifted line's
    mixtures as log(1 + z) formed after 1 + z erred by an ulp of 1, times 1 + c: 5e-15 to 1.3e-14 of M(c).)"""
    from afa.mechanisms.privacy_loss import NUMERIC_RTOL
    pair, c = _pair(2.0, 0.001, "remove"), 54.125
    with mp.workdps(30):
        truth = complex(log_mgf_mpmath(complex(c, u), "gaussian", 2.0, 0.001, 1.0, "remove"))
        at_real = float(mp.re(log_mgf_mpmath(c, "gaussian", 2.0, 0.001, 1.0, "remove")))
    shifted = PairMGF(pair)
    assert shifted._shifted(c, _octave(u)) is not None
    got = [shifted.log_mgf(np.array([complex(c, u)]))[0]]
    monkeypatch.setattr(PairMGF, "SHIFT_FROM", math.inf)
    got.append(PairMGF(pair).log_mgf(np.array([complex(c, u)]))[0])
    for value in got:
        assert abs(np.exp(value - at_real) - np.exp(truth - at_real)) <= NUMERIC_RTOL, (value, truth)
