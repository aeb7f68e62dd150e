"""Subsampled mechanisms (Zhu, Dong & Wang 2022, Thm 11; Google DP team 2025, Sec. 4).

Independent references: ``tests/_subsampling_reference.py`` (mpmath log M(s) and one-use hockey
stick, a brute-force pessimistic/optimistic PLD bracket), the certified discretization of
``afa.engines.certified`` (a second algorithm), exact enumeration for finite bases, and the DP-SGD values
of the literature (q = 0.01, sigma = 1, delta = 1e-5: eps = 0.718036, 1.828237, 6.187712 for
k = 100, 1000, 10 000, as quoted in the subsampled-mechanisms issue).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import mpmath as mp
import numpy as np
import pytest
from _subsampling_reference import (
    delta_bracket_bruteforce,
    delta_one_use_mpmath,
    epsilon_bracket_bruteforce,
    log_mgf_mpmath,
)

import afa
from afa.engines import contour as contour_module
from afa.engines import planner as planner_module
from afa.engines.certified import certified_delta
from afa.engines.composition import ComposedLoss
from afa.engines.contour import ContourInversion
from afa.mechanisms import pairs
from afa.mechanisms.noise_pair import PairMGF
from afa.mechanisms.privacy_loss import batched_log_phi
from afa.numerics import exact

NODES = [0.5, 5.0, 40.0, 2.0 + 1.0j, 2.0 + 10.0j, 8.0 + 60.0j, 0.3 + 150.0j]


@pytest.mark.parametrize("noise, scale, q, relation", [
    ("gaussian", 1.0, 0.01, "remove"), ("gaussian", 1.0, 0.01, "add"), ("gaussian", 2.0, 0.2, "substitution"),
    ("laplace", 1.0, 0.05, "remove"), ("laplace", 0.5, 0.05, "add")])
def test_log_mgf_matches_mpmath(noise, scale, q, relation):
    """log M(s) at real and complex s, against 30-digit mpmath; the error is measured relative to
    M(Re s) (what the contour's error budget assumes, k times per use), and must be below 1e-13
    plus the rounding of log M itself."""
    base = afa.Gaussian(scale) if noise == "gaussian" else afa.Laplace(scale)
    mechanism = base.poisson_subsampled(q)
    neighboring = "substitution" if relation == "substitution" else "add_remove"
    loss = mechanism.privacy_losses(neighboring)[relation == "add"]
    for s in NODES:
        got = ComposedLoss({loss: 1}).log_phi_numeric(np.array([-1j * s]))[0]  # the contour's path
        with mp.workdps(30):
            truth = complex(log_mgf_mpmath(s, noise, scale, q, 1.0, relation))
            at_real = float(mp.re(log_mgf_mpmath(complex(s).real, noise, scale, q, 1.0, relation)))
        error = abs(np.exp(got - truth) - 1) * math.exp(truth.real - at_real)
        # A few ulps of log M itself (log M(40) is about 631) plus 1e-13.
        assert error < 1e-13 + 4 * np.finfo(float).eps * abs(truth), (s, got, truth)


def test_real_line_characteristic_function_is_the_mgf_on_the_imaginary_axis():
    mechanism = afa.Gaussian(1.0).poisson_subsampled(0.02)
    remove, add = mechanism.privacy_losses()
    t = np.array([0.0, 0.7, -3.0, 25.0])
    integral = PairMGF(mechanism.noise_pair())
    np.testing.assert_allclose(remove.log_phi_numeric(t), integral.log_mgf(1j * t), rtol=0, atol=1e-15)
    np.testing.assert_allclose(add.log_phi_numeric(t), integral.log_mgf(-1 - 1j * t), rtol=0, atol=1e-15)


@pytest.mark.parametrize("count, expected", [(100, 0.718036), (1000, 1.828237), (10_000, 6.187712)])
def test_dpsgd_literature_values(count, expected):
    result = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01), times=count).epsilon_result(1e-5)
    assert result.method == "contour"
    assert abs(result.value - expected) <= 5e-7  # the literature quotes 6 decimals
    assert result.upper - result.lower <= 1e-10 * result.value


@pytest.mark.parametrize("sigma, q, count", [(1.0, 0.01, 100), (2.0, 0.01, 1500), (1.1, 256 / 60000, 14063)])
def test_contour_lies_inside_the_certified_bracket(sigma, q, count):
    """Zhu, Dong & Wang 2022, Exp 3 (sigma 2, q 0.01, 1500 steps) and the MNIST DP-SGD setting among them."""
    mechanism = afa.Gaussian(sigma).poisson_subsampled(q)
    acc = afa.Accountant().compose(mechanism, times=count)
    epsilon = acc.epsilon(1e-5)
    pair = mechanism.noise_pair()
    brackets = [certified_delta(side, count, [epsilon]) for side in (pair, pair.swapped())]
    lower, upper = max(b[0][0] for b in brackets), max(b[1][0] for b in brackets)
    assert lower <= acc.delta(epsilon) <= upper
    assert (upper - lower) / 1e-5 < 1e-3


def test_contour_lies_inside_the_bruteforce_bracket():
    """A second, independently written discretization (tests/_subsampling_reference.py)."""
    acc = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01), times=100)
    epsilons = np.array([0.3, 0.718036, 1.2])
    lower, upper = delta_bracket_bruteforce(epsilons, 100, "gaussian", 1.0, 0.01, relation="add_remove")
    values = acc.privacy_profile(epsilons)
    assert np.all((lower <= values) & (values <= upper))


@dataclass(frozen=True)
class SecondRule(afa.Mechanism):
    """A mechanism with ``base``'s pair whose log-CFs use a Gauss-Legendre rule of another order over the output."""

    base: afa.Mechanism
    order: int

    def dominating_pair(self, neighboring):
        return self.base.dominating_pair(neighboring)

    def _losses(self, neighboring):
        return pairs.privacy_losses(self.dominating_pair(neighboring), quadrature_order=self.order)


@pytest.mark.parametrize("target", [1e-5, 1e-10, 1e-16, 1e-20])
def test_tiny_delta_two_quadrature_rules_agree(target):
    """q = 0.01, sigma = 2, 3000 steps: eps(delta) to 1e-20 with its error estimate, and delta at that
    eps recomputed with a different output rule (Gauss-Legendre 32 instead of 20) agrees to 1e-9."""
    mechanism = afa.Gaussian(2.0).poisson_subsampled(0.01)
    result = afa.Accountant().compose(mechanism, times=3000).epsilon_result(target)
    assert result.method == "contour" and math.isfinite(result.value)
    assert result.upper - result.lower <= 1e-9 * result.value
    check = afa.Accountant().compose(SecondRule(mechanism, 32), times=3000)
    assert check.delta(result.value) == pytest.approx(target, rel=1e-9, abs=0)


def test_a_second_rule_differs_in_rounding_only():
    """The order-32 losses are a different computation (not the default rule's cached ones): their log-CFs
    differ from the order-20 ones in the last digits and agree to 1e-12."""
    mechanism = afa.Gaussian(2.0).poisson_subsampled(0.01)
    own, other = mechanism.privacy_losses()[0], SecondRule(mechanism, 32).privacy_losses()[0]
    t = np.array([0.3, 1.0, 3.0])
    first, second = batched_log_phi(t, [own]).ravel(), batched_log_phi(t, [other]).ravel()
    assert np.allclose(first, second, rtol=1e-12, atol=1e-14) and not np.array_equal(first, second)
    assert other.family is None and own.family is not None


def test_near_atom_regime_real_line_inside_the_certified_brackets():
    """sigma 2, q 0.001, 1000 steps (q k = 1): the contour refuses at its default node budget (the tilted
    loss is bimodal) and 'auto' retries it with a larger one.  Its answer and the real line's (to 2e-6
    relative by its own error estimate) lie inside the discretized PLD's certified bracket and the
    certified Algorithm 2 bracket (independent algorithms)."""
    acc = afa.Accountant().compose(afa.Gaussian(2.0).poisson_subsampled(0.001), times=1000)
    with pytest.raises(afa.AccuracyError, match="nodes"):
        acc.epsilon_result(1e-6, method="contour")
    real_line = acc.epsilon_result(1e-6, method="quadrature")
    assert real_line.upper - real_line.lower <= 2e-6 * real_line.value
    auto = acc.epsilon_result(1e-6)
    assert auto.method == "contour" and auto.upper - auto.lower <= 1e-9 * auto.value
    assert auto.lower <= real_line.upper and real_line.lower <= auto.upper
    for method in ("pld", "certified"):
        bracket = acc.epsilon_result(1e-6, method=method)
        assert bracket.certified and bracket.method == method
        for result in (real_line, auto):
            assert bracket.lower <= result.lower <= result.upper <= bracket.upper
    assert (bracket.upper - bracket.lower) / bracket.value < 2e-5


@pytest.mark.parametrize("count", [1, 2, 5])
@pytest.mark.parametrize("make, noise, neighboring, relation", [
    (lambda: afa.Gaussian(1.0).poisson_subsampled(0.05), "gaussian", "substitution", "substitution"),
    (lambda: afa.Gaussian(1.0).subset_subsampled(0.05), "gaussian", "add_remove", "add_remove"),
    (lambda: afa.Laplace(0.5).poisson_subsampled(0.2), "laplace", "add_remove", "add_remove")])
def test_small_counts_against_bruteforce(make, noise, neighboring, relation, count):
    """k in {1, 2, 5}: the answer's bounds overlap the brute-force bracket, and for one use they contain
    the exact mpmath hockey stick.  (Subset sampling of additive noise uses the same pair as Poisson
    under add/remove, Zhu, Dong & Wang 2022, Thm 11(2), so its reference is the Poisson pair.)"""
    scale = 1.0 if noise == "gaussian" else 0.5
    q = 0.05 if noise == "gaussian" else 0.2
    acc = afa.Accountant(neighboring=neighboring).compose(make(), times=count)
    for epsilon in (0.05, 0.3):
        result = acc.delta_result(epsilon)
        lower, upper = delta_bracket_bruteforce(np.array([epsilon]), count, noise, scale, q, relation=relation)
        assert result.lower <= upper[0] + 1e-15 and lower[0] - 1e-15 <= result.upper
        assert abs(result.value - (lower[0] + upper[0]) / 2) <= result.error + (upper[0] - lower[0]) + 1e-15
        if count == 1:
            truth = float(delta_one_use_mpmath(epsilon, noise, scale, q, relation=relation))
            assert result.lower <= truth * (1 + 1e-12) and truth * (1 - 1e-12) <= result.upper


def test_subset_equals_poisson_for_additive_noise():
    poisson = afa.Accountant().compose(afa.Gaussian(1.5).poisson_subsampled(0.02), times=300)
    subset = afa.Accountant().compose(afa.Gaussian(1.5).subset_subsampled(0.02), times=300)
    assert subset.delta(1.0) == poisson.delta(1.0)


def _enumerated_delta(log_a, log_b, count, epsilon):
    total = 0.0
    for outputs in itertools.product(range(len(log_a)), repeat=count):
        a = math.exp(sum(log_a[i] for i in outputs))
        b = math.exp(sum(log_b[i] for i in outputs))
        total += max(a - math.exp(epsilon) * b, 0.0)
    return total


@pytest.mark.parametrize("base, pmfs", [
    (afa.RandomizedResponse(0.8), ([0.8, 0.2], [0.2, 0.8])),
    (afa.KaryRandomizedResponse(4, 0.7), ([0.7, 0.3], [0.25, 0.75])),
    (afa.DiscreteMechanism((0.5, 0.3, 0.2), (0.2, 0.3, 0.5)), ([0.5, 0.3, 0.2], [0.2, 0.3, 0.5]))])
def test_finite_bases_against_enumeration(base, pmfs):
    """A = (1 - q) Q + q P against Q, both directions, by enumerating every output tuple."""
    q, count = 0.3, 4
    p_pmf, q_pmf = map(np.array, pmfs)
    mixture = (1 - q) * q_pmf + q * p_pmf
    acc = afa.Accountant().compose(base.poisson_subsampled(q), times=count)
    for epsilon in (0.0, 0.2, 0.6):
        truth = max(_enumerated_delta(np.log(mixture), np.log(q_pmf), count, epsilon),
                    _enumerated_delta(np.log(q_pmf), np.log(mixture), count, epsilon))
        assert acc.delta(epsilon) == pytest.approx(truth, rel=1e-12, abs=1e-15)


def test_rates_zero_and_one():
    never = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.0), times=10).delta_result(0.0)
    assert never.value == 0.0 and 0.0 <= never.upper <= 1e-13  # read value: the upper bound, rounding only
    full = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(1.0), times=4)
    # q = 1 is the base mechanism itself (answered by the contour, the base by the closed form)
    assert full.delta(1.0) == pytest.approx(exact.gaussian_delta(1.0, 2.0), rel=1e-12)


@pytest.mark.parametrize("build, error, match", [
    (lambda: afa.Gaussian(1.0).poisson_subsampled(1.5), ValueError, "sampling_rate"),
    (lambda: afa.Gaussian(1.0).poisson_subsampled(float("nan")), ValueError, "sampling_rate"),
    (lambda: afa.Subsampled(afa.Gaussian(1.0), 0.1, "stratified"), ValueError, "scheme"),
    (lambda: afa.Gaussian(1.0).poisson_subsampled(0.1).poisson_subsampled(0.1), TypeError, "base"),
    (lambda: afa.Subsampled("gaussian", 0.1), TypeError, "base")])
def test_validation(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_unsupported_combinations_name_what_is_supported():
    with pytest.raises(ValueError, match="add_remove"):
        afa.Gaussian(1.0).subset_subsampled(0.1).privacy_losses("substitution")
    with pytest.raises(ValueError, match="Gaussian base only"):
        afa.Laplace(1.0).poisson_subsampled(0.1).privacy_losses("substitution")
    with pytest.raises(ValueError, match="not MixtureOfGaussians"):
        afa.MixtureOfGaussians((0.0, 1.0), (0.5, 0.5), 1.0).poisson_subsampled(0.1).privacy_losses()
    with pytest.raises(ValueError, match="certified"):
        acc = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.1)).compose(afa.Gaussian(2.0))
        acc.delta(1.0, method="certified")


def test_discrete_gaussian_base_against_enumeration():
    """N_Z(2, 1.5^2) vs N_Z(0, 1.5^2) subsampled at q = 0.2, two uses, against the untruncated pmfs on
    [-40, 42] (normalised by a direct sum) enumerated pair by pair; afa's truncation sends < 1e-30 to +inf."""
    sigma, shift, q, count = 1.5, 2, 0.2, 2
    x = np.arange(-40, 43)
    weights = np.exp(-x.astype(float) ** 2 / (2 * sigma ** 2))
    norm = math.fsum(np.exp(-np.arange(-200, 201.0) ** 2 / (2 * sigma ** 2)))
    q_pmf = weights / norm
    p_pmf = np.exp(-(x - shift).astype(float) ** 2 / (2 * sigma ** 2)) / norm
    mixture = (1 - q) * q_pmf + q * p_pmf
    acc = afa.Accountant().compose(afa.DiscreteGaussian(sigma, shift).poisson_subsampled(q), times=count)
    for epsilon in (0.0, 0.1, 0.5):
        truth = max(_enumerated_delta(np.log(mixture), np.log(q_pmf), count, epsilon),
                    _enumerated_delta(np.log(q_pmf), np.log(mixture), count, epsilon))
        assert acc.delta(epsilon) == pytest.approx(truth, rel=1e-11, abs=1e-15)


def test_real_line_bounds_cover_the_numeric_cf_error():
    """The real-line inversion counts k times the numeric CF's error: its eps(1e-8) bounds contain the
    contour's value, and it refuses delta = 1e-10 (it once reported bounds 1.1e-4 off there)."""
    acc = afa.Accountant().compose(afa.Gaussian(2.0).poisson_subsampled(0.01), times=3000)
    contour = acc.epsilon(1e-8)
    real_line = acc.epsilon_result(1e-8, method="quadrature")
    assert real_line.lower <= contour <= real_line.upper
    with pytest.raises(afa.AccuracyError, match="reliable for delta"):
        acc.epsilon(1e-10, method="quadrature")


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
@pytest.mark.parametrize("q", [0.001, 0.3])
def test_add_direction_loss_is_bounded_by_minus_log_one_minus_q(noise, q):
    base = afa.Gaussian(0.8) if noise == "gaussian" else afa.Laplace(0.8)
    pair = base.poisson_subsampled(q).noise_pair()
    assert math.isinf(pair.loss_upper_bound)  # remove direction: unbounded above
    add = pair.swapped()
    assert add.loss_upper_bound == pytest.approx(-math.log1p(-q), rel=1e-15)
    outputs = np.linspace(-60, 60, 20001)
    losses = add.privacy_loss(outputs)
    assert np.max(losses) <= add.loss_upper_bound + 1e-15
    if noise == "gaussian":  # approached as o -> -inf: the bound is the supremum
        assert np.max(losses) >= add.loss_upper_bound - 1e-9


def test_bounded_direction_has_zero_delta_beyond_its_maximum():
    # sigma 0.8, q 0.001, k 100: the add direction's loss is <= 100 (-log(1 - q)) = 0.10005, so its delta at
    # eps 0.141 is exactly 0 (the contour used to find a spurious saddle point there and refuse).
    acc = afa.Accountant().compose(afa.Gaussian(0.8).poisson_subsampled(0.001), times=100)
    add = ContourInversion(acc.planner.composed(1))
    assert add.delta(np.array([0.1001, 0.141]))[0].tolist() == [0.0, 0.0]


def test_contour_saddle_search_survives_a_far_gaussian_guess():
    # k = 2: the Gaussian guess of the saddle point is ~150, where a phase-based slope wrapped
    # and Newton stopped at a non-stationary point (an OverflowError followed).
    acc = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01), times=2)
    remove = ContourInversion(acc.planner.composed(0))
    c, psi, curvature = remove.saddle(0.0539)
    assert 1 < c < 20 and psi < 0
    slope = (remove._psi(c * (1 + 1e-4), 0.0539)[0] - remove._psi(c * (1 - 1e-4), 0.0539)[0]) / (2e-4 * c)
    assert abs(slope) * abs(slope) / curvature < 1e-3  # a stationary point of Psi


def test_nearby_eps_share_the_snapped_contour_line(monkeypatch):
    """Numeric MGF nodes are costly; eps(delta) asks for delta at eps a few ulps apart (Newton's last steps,
    the bracket checks), so the contour's line is snapped to a coarse grid and its log M values kept.  The
    second eps computes no new node (only its saddle search, the snapped line's Psi'' and the far-node check: a
    handful of points against some 1 900 nodes), and both deltas agree to 1e-13 with those of the saddle's own
    line (snapping turned off) -- the same integral along another vertical line."""
    acc = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01), times=100)
    inversion = ContourInversion(acc.planner.composed(0))
    computed = []  # numeric MGF values computed at the contour's nodes
    evaluate = contour_module.batched_log_phi
    monkeypatch.setattr(contour_module, "batched_log_phi",
                        lambda nodes, losses: computed.append(np.size(nodes)) or evaluate(nodes, losses))
    epsilons = (0.718, float(np.nextafter(0.718, 1.0)))
    first = inversion.delta_and_slope(epsilons[0])
    nodes = sum(computed)
    second = inversion.delta_and_slope(epsilons[1])
    assert nodes > 500 and sum(computed) - nodes <= 10, (nodes, computed)
    monkeypatch.setattr(ContourInversion, "_snapped_line", lambda self, c, psi, curvature, eps: (c, psi, curvature))
    unsnapped = ContourInversion(acc.planner.composed(0))
    for epsilon, (value, error, slope) in zip(epsilons, (first, second)):
        reference = unsnapped.delta_and_slope(epsilon)
        assert value == pytest.approx(reference[0], rel=1e-13) and slope == pytest.approx(reference[2], rel=1e-12)
        assert abs(value - reference[0]) <= error + reference[1]


def test_snapped_line_measures_its_own_curvature():
    """The contour's step follows Psi''; the saddle search's value moved by several per cent between eps ulps
    apart (0.494 .. 0.534 seen at sigma = 2, q = 0.001, k = 3000), so the snapped line measures Psi'' again on
    the line itself: the same line, Psi and Psi'' (to rounding) whatever the search gave.  Psi'' changes fast
    with c here (0.55 at the saddle, 0.38 on the line 0.056 away, by central differences of Psi along the real
    axis); the line's value is that of the line, within the 10 % its probe's O(g^4) term allows (measured 6 %)."""
    acc = afa.Accountant().compose(afa.Gaussian(2.0).poisson_subsampled(0.001), times=3000)
    inversion = ContourInversion(acc.planner.composed(0))
    epsilon = 0.0904089136399
    c, psi, curvature = inversion.saddle(epsilon)
    # The search's c moves by up to 0.004, less where c is that close to where its snapping rounds the other way.
    grain = 2.0 ** math.floor(math.log2(0.1 / math.sqrt(curvature)))
    shift = min(0.004, 0.5 * grain * abs((c / grain) % 1 - 0.5))
    lines = [inversion._snapped_line(c + move, psi, curvature * factor, epsilon + ulps * 1e-17)
             for move, factor, ulps in ((0.0, 1.0, 0), (shift, 0.96, 3), (-shift, 1.04, -5))]
    line, line_psi, line_curvature = lines[0]
    for other in lines[1:]:
        assert other[0] == line and other[1:] == pytest.approx((line_psi, line_curvature), rel=1e-9)
    assert 0 < abs(line - c) <= 0.5 * 2.0 ** math.floor(math.log2(0.1 / math.sqrt(curvature)))
    h = 1e-3
    for point, value in ((c, curvature), (line, line_curvature)):
        sides = inversion._psi(np.array([point - h, point, point + h]), epsilon)
        assert value == pytest.approx((sides[0] - 2 * sides[1] + sides[2]) / h ** 2, rel=0.1)
    assert line_curvature < 0.8 * curvature


def test_three_thousand_steps_of_small_q_by_the_contour_inside_the_pld_bracket():
    """sigma = 2, q = 0.001, k = 3000 needs most of the contour's node budget; with the noisy search curvature
    setting the step, its bracket checks got fresh nodes and, on one BLAS thread, a refusal.  'auto' now answers
    by the contour, inside the PLD's certified bracket (relative width 3.4e-4)."""
    acc = afa.Accountant().compose(afa.Gaussian(2.0).poisson_subsampled(0.001), times=3000)
    result = acc.epsilon_result(1e-5)
    assert result.method == "contour" and result.upper - result.lower <= 1e-10 * result.value
    pld = acc.epsilon_result(1e-5, method="pld")
    assert pld.lower <= result.value <= pld.upper and pld.upper - pld.lower < 1e-3 * pld.value


def test_fifty_steps_contour_inside_the_pld_bracket():
    """sigma = 1, q = 0.01, k = 50: the contour (snapped lines, smaller power-of-two steps) converges within
    its node budget, so 'auto' answers with it rather than the PLD; its eps lies inside the PLD's certified
    bracket (relative width 1.8e-6), an independent discretization of the loss."""
    acc = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01), times=50)
    result = acc.epsilon_result(1e-5)
    assert result.method == "contour" and result.upper - result.lower <= 1e-11 * result.value
    bracket = acc.epsilon_result(1e-5, method="pld")
    assert bracket.lower <= result.value <= bracket.upper


@pytest.mark.slow
@pytest.mark.parametrize("sigma, q, count, delta", [(0.8, 0.001, 100, 1e-5), (2.0, 0.001, 1000, 1e-6)])
def test_near_atom_two_inversions_and_the_pld_agree(monkeypatch, sigma, q, count, delta):
    """The near-atom rows of the subsampling issue, by three independent routes: the real-line inversion's
    eps (Zhu, Dong & Wang 2022, Algorithm 1), the saddle-point contour's delta at that eps with a node budget 64x the
    default (a different inversion and quadrature family: it must give back delta to 1e-7 relative, i.e.
    eps to about 1e-7 / (c* eps) relative), and the PLD's certified bracket at a fine grid."""
    acc = afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), times=count)
    real_line = acc.epsilon_result(delta, method="quadrature")
    assert real_line.error <= 1e-6 * real_line.value
    wide = afa.Options(contour=afa.ContourOptions(numeric_nodes=2 ** 18))
    contour = afa.Accountant(options=wide).compose(afa.Gaussian(sigma).poisson_subsampled(q), times=count)
    assert contour.delta(real_line.value, method="contour") == pytest.approx(delta, rel=1e-7)
    fine = afa.Accountant(value_discretization_interval=2e-5).compose(afa.Gaussian(sigma).poisson_subsampled(q),
                                                                       times=count)
    bracket = fine.epsilon_result(delta, method="pld")
    assert bracket.lower <= real_line.value <= bracket.upper
    assert bracket.upper - bracket.lower <= 1e-3 * real_line.value


@pytest.mark.parametrize("delta", [1e-5, 1e-10])
def test_many_steps_of_small_q_by_the_contour_inside_the_pld_bracket(delta):
    """q = 0.001, sigma = 0.8, k = 1e5 (a DP-SGD benchmark row): the contour answers within its ordinary node
    budget (its halvings stop at the rounding level of k numeric MGFs, 1e-10 here, instead of chasing noise
    below it), with relative accuracy, inside the PLD's certified bracket (an independent engine)."""
    acc = afa.Accountant().compose(afa.Gaussian(0.8).poisson_subsampled(0.001), 100_000)
    result = acc.epsilon_result(delta)
    bracket = acc.epsilon_result(delta, method="pld")
    assert result.method == "contour" and result.error < 1e-9 * result.value
    assert bracket.certified and bracket.lower <= result.value <= bracket.upper


def test_auto_retries_a_wide_certified_bracket_with_a_larger_contour_budget(monkeypatch):
    """The same composition at delta = 1e-10 with the ordinary node budget cut to 256: the contour refuses,
    the PLD's certified bracket is several percent wide, so 'auto' retries the contour with the wide budget
    (ContourOptions.wide_numeric_nodes, unchanged) and answers with it, inside the bracket."""
    acc = afa.Accountant(options=afa.Options(contour=afa.ContourOptions(numeric_nodes=256))).compose(afa.Gaussian(0.8).poisson_subsampled(0.001), 100_000)
    with pytest.raises(afa.AccuracyError):
        acc.epsilon_result(1e-10, method="contour")  # the (cut) ordinary budget refuses
    bracket = acc.epsilon_result(1e-10, method="pld")
    assert (bracket.upper - bracket.lower) / bracket.value > 1e-2  # so the retry path is taken
    result = acc.epsilon_result(1e-10)
    assert result.method == "contour" and result.error < 1e-9 * result.value
    assert bracket.lower <= result.value <= bracket.upper


@pytest.mark.parametrize("sigma, q, steps", [(1.0, 0.001, 10), (2.0, 0.01, 2)])
def test_few_step_near_atom_compositions_answer_with_the_step_recursion(sigma, q, steps):
    """Few steps of a small q (issue 22, point 3): the ordinary node budget refuses, and 'auto' answers with the
    step recursion (afa.engines.step_recursion) to 1e-10 of eps, inside the PLD's certified bracket (1e-4 wide or
    more here) and within 1e-10 of the contour's wide retry -- its far nodes on shifted output lines -- a second
    algorithm."""
    acc = afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), steps)
    with pytest.raises(contour_module.NodeBudgetError):
        acc.epsilon_result(1e-5, method="contour")
    result = acc.epsilon_result(1e-5)
    bracket = acc.epsilon_result(1e-5, method="pld")
    assert result.method == "exact" and result.error < 1e-10 * result.value
    assert bracket.lower <= result.value <= bracket.upper
    wide = acc.planner.engines(planner_module.WIDE_CONTOUR)[0].epsilon_bracket(1e-5)  # the remove direction's
    assert wide[0] == pytest.approx(result.value, rel=1e-10)


def test_a_sum_cancelling_beyond_its_rounding_is_refused_at_once():
    """sigma = 2, q = 0.001, 10 steps at delta = 1e-14: on the saddle's line the terms cancel by 10^5 to 10^9,
    so the nodes' rounding alone allows no error below 1e-6 -- the contour refuses as soon as it sees that
    (not after its halvings run out), and 'auto' answers with the step recursion, inside the PLD's certified
    bracket."""
    acc = afa.Accountant(options=afa.Options(contour=afa.ContourOptions(numeric_nodes=786_432))).compose(
        afa.Gaussian(2.0).poisson_subsampled(0.001), 10)
    with pytest.raises(afa.AccuracyError, match="cancels beyond its nodes' accuracy"):
        acc.epsilon_result(1e-14, method="contour")
    result = acc.epsilon_result(1e-14)
    assert result.method == "exact" and result.error < 1e-10 * result.value
    bracket = acc.epsilon_result(1e-14, method="pld")
    assert bracket.certified and bracket.lower <= result.value <= bracket.upper


@pytest.mark.slow
def test_a_coarse_first_level_does_not_predict_a_refusal():
    """sigma = 0.8, q = 0.001, 10 steps: the first halving changes the sum by 5e-3 (its first step is far too
    coarse for the aliases), from which squared changes would predict more nodes than the wide budget; the
    next halving changes it by 1e-9 and the sum converges.  Predictions start below PREDICT_BELOW, and the wide
    contour answers (2.4e-10 wide, its nodes' errors counted), inside the PLD's certified bracket (2e-4 wide) and
    around the step recursion's eps, which 'auto' answers with (it comes before the wide retry up to 40 uses)."""
    acc = afa.Accountant().compose(afa.Gaussian(0.8).poisson_subsampled(0.001), 10)
    value, lower, upper = max(engine.epsilon_bracket(1e-5)
                              for engine in acc.planner.engines(planner_module.WIDE_CONTOUR))
    assert upper - lower <= 1e-9 * value
    bracket = acc.epsilon_result(1e-5, method="pld")
    assert bracket.lower <= value <= bracket.upper
    result = acc.epsilon_result(1e-5)
    assert result.method == "exact" and lower - result.error <= result.value <= upper + result.error


def test_near_atom_quadrature_stays_within_its_work_budget(monkeypatch):
    """q = 0.002, sigma = 0.9, k = 3 (benchmark case): the CF decays only slowly, and on the real output line
    each numeric-CF evaluation costs ~8 t output nodes, so the real-line grid would need ~1e5 nodes at
    t ~ 5e4.  The numeric-CF work is budgeted (output nodes summed, on the real line or on a shifted one):
    delta(eps) keeps within it, and with the far CF values on shifted output lines (a few hundred nodes
    each) the budget reaches an error of 1e-4 of delta, and the stated interval meets a brute-force
    bracket and the certified PLD's."""
    import afa.mechanisms.noise_pair as noise_pair
    from afa.engines import quadrature
    from afa.mechanisms import shifted_output
    work = []
    original, original_shifted = noise_pair.fourier_sums, shifted_output.log_sums

    def counted(frequencies, values, weights):
        work.append(np.size(frequencies) * np.size(values))
        return original(frequencies, values, weights)

    def counted_shifted(rule, frequencies, lattice=None):
        work.append(np.size(frequencies) * rule.size)
        return original_shifted(rule, frequencies, lattice)

    monkeypatch.setattr(noise_pair, "fourier_sums", counted)
    monkeypatch.setattr(shifted_output, "log_sums", counted_shifted)
    acc = afa.Accountant().compose(afa.Gaussian(0.9).poisson_subsampled(0.002), 3)
    result = acc.delta_result(0.05, method="quadrature")
    # One grid build for the query: the scan plus two grids, each within the budget.
    assert sum(work) <= 3 * quadrature.MAX_WORK
    assert result.error < 1e-4 * result.value
    # The truth lies in the brute-force bracket and in the certified PLD's: the stated interval meets both.
    lower, upper = delta_bracket_bruteforce(0.05, 3, "gaussian", 0.9, 0.002, relation="add_remove", grid=1e-4)
    assert np.ravel(lower)[0] <= result.upper and result.lower <= np.ravel(upper)[0]
    certified = acc.delta_result(0.05, method="pld")
    assert certified.lower <= result.upper and result.lower <= certified.upper


@pytest.mark.parametrize("direction", [0, 1])
def test_numeric_mgf_cost_at_complex_nodes_counts_the_output_nodes_summed(monkeypatch, direction):
    """A subsampled loss's ``evaluation_cost(t)`` at complex t = -is (the contour's nodes, on lines Re s = 0.5 and 6)
    must be the number of output nodes its evaluation at t actually sums (counted inside fourier_sums, or on a
    shifted output line inside shifted_output.log_sums), in both directions: the contour's work allowance and
    the quadrature's budget rest on it."""
    import afa.mechanisms.noise_pair as noise_pair
    summed = []
    original = noise_pair.fourier_sums

    def counted(frequencies, values, weights):
        summed.extend([np.size(values)] * np.size(frequencies))
        return original(frequencies, values, weights)

    def counted_shifted(rule, frequencies, lattice=None):
        summed.extend([rule.size] * np.size(frequencies))
        return original_shifted(rule, frequencies, lattice)

    from afa.mechanisms import shifted_output
    original_shifted = shifted_output.log_sums
    monkeypatch.setattr(noise_pair, "fourier_sums", counted)
    monkeypatch.setattr(shifted_output, "log_sums", counted_shifted)
    loss = afa.Gaussian(0.9).poisson_subsampled(0.01).privacy_losses()[direction]
    for c in (0.5, 6.0):
        for u in (3.0, 700.0, 12000.0):
            t = np.array([-1j * complex(c, u)])
            summed.clear()
            batched_log_phi(t, [loss])  # as the contour evaluates a numeric term
            assert summed == [loss.evaluation_cost(t)[0]], (c, u)


@pytest.mark.parametrize("layout", ["long progression", "lattice with gaps", "short progression", "irregular",
                                    "single"])
def test_fourier_sums_match_a_30_digit_sum(layout):
    """noise_pair.fourier_sums: lattices f_0 + m d spanning >= GRIDDED_SPAN points go through the non-uniform
    FFT (Gaussian gridding), shorter ones through the factored product, others term by term.  Each equals
    sum_j w_j e^{i f x_j} summed at 30 digits to a few ulps of sum |w| plus the rounding of the phases
    (16 ulps of f x_j per term: the direct double-precision sum carries the same) -- the error model of
    the numeric MGF (NUMERIC_RTOL, relative to M at the node's real part)."""
    from afa.mechanisms.noise_pair import GRIDDED_SPAN, fourier_sums
    rng = np.random.default_rng(7)
    values, weights = rng.normal(0.0, 2.0, 400), rng.random(400) * np.exp(rng.normal(0.0, 2.0, 400))
    step = 0.0703125
    frequencies = {"long progression": step * (1 + 2 * np.arange(2 * GRIDDED_SPAN)),
                   "lattice with gaps": step * np.sort(rng.choice(np.arange(1, 1200), 300, replace=False)),
                   "short progression": 0.9375 * (1 + 2 * np.arange(GRIDDED_SPAN // 2)),
                   "irregular": np.sort(rng.uniform(0.1, 60.0, 100)),
                   "single": np.array([12.5])}[layout]
    computed = fourier_sums(frequencies, values, weights)
    eps = np.finfo(float).eps
    with mp.workdps(30):
        for index in sorted({0, frequencies.size // 3, frequencies.size - 1}):
            frequency = frequencies[index]
            exact = complex(mp.fsum(mp.mpf(float(w)) * mp.expj(mp.mpf(float(frequency)) * mp.mpf(float(x)))
                                    for w, x in zip(weights, values)))
            allowed = 8 * eps * np.sum(weights) + 16 * eps * np.sum(weights * np.abs(frequency * values))
            assert abs(computed[index] - exact) <= allowed, (index, abs(computed[index] - exact), allowed)


def test_hopeless_contour_sums_refuse_before_spending_their_budget(monkeypatch):
    """sigma = 2, q = 0.001, k = 100 (near-atom): the integrand has not decayed where a quarter of the node
    budget would end, so the contour refuses after the decay probe instead of after two full levels of
    ~2000 nodes (0.28 s of the 0.3 s 'auto' took); 'auto' then answers from the contour with a 64x node
    budget, inside the PLD's certified bracket, which straddles delta = 1e-5 by that contour (the remove
    direction, which dominates).  The budget is generous so that the answer does not depend on the
    machine's load (the wide contour gets a quarter of it)."""
    acc = afa.Accountant(budget=afa.Budget(seconds=600)).compose(afa.Gaussian(2.0).poisson_subsampled(0.001), times=100)
    inversion = ContourInversion(acc.planner.composed(0))
    evaluated = []
    log_mgf = inversion.log_mgf
    monkeypatch.setattr(inversion, "log_mgf", lambda s: evaluated.append(np.size(s)) or log_mgf(s))
    with pytest.raises(afa.AccuracyError, match="needs more than"):
        inversion.delta_and_slope(0.0134)
    assert sum(evaluated) < 100, evaluated
    answer = acc.epsilon_result(1e-5)
    wide = ContourInversion(acc.planner.composed(0), numeric_nodes=afa.ContourOptions().wide_numeric_nodes)
    bracket = acc.epsilon_result(1e-5, method="pld")
    assert answer.method == "contour"
    assert bracket.lower <= answer.lower <= answer.upper <= bracket.upper
    assert wide.delta_and_slope(bracket.upper)[0] <= 1e-5 <= wide.delta_and_slope(bracket.lower)[0]


def test_pld_tilt_for_few_steps_of_small_q_at_tiny_delta():
    """sigma = 0.8, q = 0.001, k = 2: the loss piles up near log(1 - q) with a heavy upper tail, and the Chernoff
    orders that aim the PLD's tilted power lie hundreds of times below the Gaussian-approximation one (a
    floor at 1/64 of it would leave brackets [0.7614, 0.7729] at delta = 1e-10 and [1.19, 7.68] at 1e-14;
    the test asks for 2e-4 and 1e-5 relative).  At 1e-10 the bracket lies inside a separately
    written brute-force PLD bracket (tests/_subsampling_reference.py, grid 1e-5); at 1e-14 (below what that
    reference resolves) 'auto' answers inside it."""
    acc = afa.Accountant().compose(afa.Gaussian(0.8).poisson_subsampled(0.001), times=2)
    moderate = acc.epsilon_result(1e-10, method="pld")
    reference = epsilon_bracket_bruteforce(1e-10, 2, "gaussian", 0.8, 0.001, relation="add_remove", grid=1e-5)
    assert reference[0] <= moderate.lower <= moderate.upper <= reference[1]
    assert moderate.upper - moderate.lower < 2e-4 * moderate.value
    tiny = acc.epsilon_result(1e-14, method="pld")
    assert moderate.upper < tiny.lower and tiny.upper - tiny.lower < 1e-5 * tiny.value
    assert tiny.lower <= acc.epsilon(1e-14) <= tiny.upper


def test_pld_direct_power_for_two_steps_of_small_q_at_tiny_delta():
    """sigma = 2, q = 0.001, k = 2: the per-step loss tail decays like exp(-c log^2 l) (log-normal-like), so no
    exponential tilt helps the FFT's absolute rounding; the PLD of two uses (8 400 grid points) is a direct
    convolution, relatively accurate at every point (an FFT power's rounding would leave the certified
    bracket of eps(1e-14) at [0.0188, 0.0368]).  At 1e-10 it lies inside the separately written brute-force
    bracket (tests/_subsampling_reference.py, grid 1e-5)."""
    acc = afa.Accountant().compose(afa.Gaussian(2.0).poisson_subsampled(0.001), times=2)
    moderate = acc.epsilon_result(1e-10, method="pld")
    reference = epsilon_bracket_bruteforce(1e-10, 2, "gaussian", 2.0, 0.001, relation="add_remove", grid=1e-5)
    assert reference[0] <= moderate.lower <= moderate.upper <= reference[1]
    tiny = acc.epsilon_result(1e-14, method="pld")
    assert moderate.upper < tiny.lower
    assert tiny.upper - tiny.lower < 1e-5 * tiny.value
    assert tiny.lower <= acc.epsilon(1e-14) <= tiny.upper  # 'auto' (the step recursion) inside it


@pytest.mark.parametrize("sigma,sensitivity", [(1.0, 1.0), (3.0, 0.5)])
def test_poisson_subsampled_gaussian_under_substitution_is_continuous_at_rate_one(sigma, sensitivity):
    """Under substitution the pair for q < 1 puts the record's contribution at -Delta against +Delta
    (Google DP team 2025, Sec. 4.2); at q = 1 it is therefore N(-Delta) against N(Delta), the Gaussian
    mechanism with shift 2 Delta, whose delta is the closed form Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu)
    with mu = 2 Delta / sigma (Balle & Wang 2018, Thm 8); at q = 1 - 1e-9 delta moves by about 1e-9 relative
    per unit of eps (a jump to the shift-Delta pair would move it by orders of magnitude)."""
    mu = 2 * sensitivity / sigma
    for eps in (0.5, 2.0):
        truth = float(mp.ncdf(mu / 2 - eps / mu) - mp.exp(eps) * mp.ncdf(-mu / 2 - eps / mu))
        for q, rtol in ((1.0, 1e-10), (1 - 1e-9, 1e-7)):
            mechanism = afa.Gaussian(sigma, sensitivity=sensitivity).poisson_subsampled(q)
            got = afa.Accountant(neighboring="substitution").compose(mechanism).delta_result(eps)
            assert abs(got.value - truth) <= rtol * truth, (q, eps, got, truth)
