"""MixtureOfGaussians through its declared dominating pair (Google DP team 2025, Sec. 3.3).

P = sum_i p_i N(Delta_i, sigma^2) against Q = N(0, sigma^2); the remove direction is H_{e^eps}(P || Q) and
the add direction H_{e^eps}(Q || P).  References:

* one use: the hockey stick integral of the mixture densities, by mpmath quadrature at 30 digits over the
  outputs where the integrand is positive (the loss is non-decreasing in the output, so that is a
  half-line, found by mpmath's root finder);
* k uses: the discretized PLD's certified bracket (a second engine, loss tails on a grid and FFT
  composition, sharing nothing with the contour's moment-generating function);
* the real-line quadrature's answers, within their absolute error of the contour's.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

import afa

ISSUE = afa.MixtureOfGaussians((0.0, 1.0), (0.99, 0.01), sigma=1.0)
MIXTURES = [ISSUE, afa.MixtureOfGaussians((0.5, 1.0, 2.0), (0.2, 0.5, 0.3), sigma=2.0),
            afa.MixtureOfGaussians((1.0, 3.0), (0.5, 0.5), sigma=1.5)]


def mp_hockey_stick(mechanism: afa.MixtureOfGaussians, epsilon: float, direction: str) -> mp.mpf:
    """H_{e^eps}(P || Q) ("remove") or H_{e^eps}(Q || P) ("add") by integrating the densities in mpmath."""
    with mp.workdps(30):
        probabilities = [mp.mpf(p) for p in mechanism.probabilities]
        total = mp.fsum(probabilities)
        weights = [p / total for p in probabilities]
        shifts = [mp.mpf(s) for s in mechanism.sensitivities]
        sigma, scale = mp.mpf(mechanism.sigma), mp.exp(mp.mpf(epsilon))

        def density_p(o):
            return mp.fsum(w * mp.npdf(o, c, sigma) for w, c in zip(weights, shifts) if w > 0)

        def density_q(o):
            return mp.npdf(o, 0, sigma)

        def log_ratio(o):  # log(P/Q)(o) = log sum_i p_i e^{(c_i o - c_i^2 / 2) / sigma^2}, non-decreasing in o
            return mp.log(mp.fsum(w * mp.exp((c * o - c * c / 2) / sigma ** 2) for w, c in zip(weights, shifts)
                                  if w > 0))

        level = mp.mpf(epsilon) if direction == "remove" else -mp.mpf(epsilon)
        low, high = mp.mpf(-1), mp.mpf(1)
        floor = log_ratio(-mp.mpf(10) ** 6)  # log of the weight of the zero shifts, or about -inf
        if level <= floor:  # the loss exceeds the level everywhere
            crossing = None
        else:
            while log_ratio(low) > level:
                low *= 2
            while log_ratio(high) < level:
                high *= 2
            crossing = mp.findroot(lambda o: log_ratio(o) - level, (low, high), solver="anderson")
        if direction == "remove":  # P - e^eps Q > 0 where log(P/Q) > eps: above the crossing
            integrand = lambda o: density_p(o) - scale * density_q(o)  # noqa: E731
            interval = [-mp.inf, mp.inf] if crossing is None else [crossing, crossing + 10 * sigma, mp.inf]
        else:  # Q - e^eps P > 0 where log(P/Q) < -eps: below the crossing
            if crossing is None:
                return mp.mpf(0)
            integrand = lambda o: density_q(o) - scale * density_p(o)  # noqa: E731
            interval = [-mp.inf, crossing - 10 * sigma, crossing]
        return mp.quad(integrand, interval)


def test_the_pair_is_the_mixture_against_the_unshifted_noise():
    mechanism = afa.MixtureOfGaussians((0.0, 1.0, 2.0), (0.2, 0.0, 0.8), sigma=3.0)
    for relation in ("add_remove", "substitution"):
        pair = mechanism.dominating_pair(relation)
        assert pair.noise == "gaussian" and pair.scale == 3.0
        assert pair.a_shifts == (0.0, 2.0) and pair.b_shifts == (0.0,)  # the zero-probability component dropped
        np.testing.assert_allclose(np.exp(pair.a_log_weights), [0.2, 0.8], rtol=1e-15)


@pytest.mark.parametrize("mechanism", MIXTURES, ids=repr)
@pytest.mark.parametrize("epsilon", [0.0, 0.3, 1.0, 3.0])
def test_one_use_against_mpmath_integration(mechanism, epsilon):
    acc = afa.Accountant().compose(mechanism)
    # "auto" answers one use from the pair's loss tails; the contour may refuse one use for its node budget
    # (a declared AccuracyError: one use of ISSUE piles 99 % of the loss up near log 0.99, as a subsampled
    # Gaussian with q = 0.01 does), and must be right where it answers.
    for direction in ("remove", "add"):
        truth = float(mp_hockey_stick(mechanism, epsilon, direction))
        for method in ("auto", "contour"):
            try:
                result = acc.delta_result(epsilon, method=method, direction=direction)
            except afa.AccuracyError:
                assert method == "contour"
                continue
            if truth == 0.0:
                assert result.value <= 1e-300 + result.error
                continue
            assert result.value == pytest.approx(truth, rel=1e-9), (direction, method)
            assert result.lower <= truth <= result.upper, (direction, method)


def test_one_use_by_default_is_the_larger_direction():
    acc = afa.Accountant().compose(MIXTURES[1])
    truth = max(float(mp_hockey_stick(MIXTURES[1], 0.5, direction)) for direction in ("remove", "add"))
    assert acc.delta_result(0.5).value == pytest.approx(truth, rel=1e-9)


@pytest.mark.parametrize("mechanism, count", [(ISSUE, 100), (MIXTURES[2], 5)], ids=["issue x100", "two x5"])
@pytest.mark.parametrize("delta", [1e-5, 1e-10])
def test_k_uses_inside_the_pld_bracket(mechanism, count, delta):
    acc = afa.Accountant().compose(mechanism, count)
    result = acc.epsilon_result(delta)
    assert result.method == "contour"
    assert result.upper - result.lower <= 1e-9 * result.value  # relative accuracy
    # A coarser grid than the default keeps the PLD's time down; its bracket is certified all the same.
    coarse = afa.Accountant(value_discretization_interval=1e-3).compose(mechanism, count)
    bracket = coarse.epsilon_result(delta, method="pld")
    assert bracket.certified
    assert bracket.lower <= result.value <= bracket.upper


def test_issue_example_answers_tiny_delta_by_default():
    acc = afa.Accountant().compose(ISSUE, 100)
    epsilons = acc.epsilon([1e-10, 1e-30])
    assert np.all(np.isfinite(epsilons)) and epsilons[0] < epsilons[1]
    for epsilon, delta in zip(epsilons, (1e-10, 1e-30)):  # delta at the returned eps is the target (relative)
        assert acc.delta_result(epsilon).value == pytest.approx(delta, rel=1e-6)


@pytest.mark.parametrize("mechanism, count", [(ISSUE, 100), (MIXTURES[2], 5)], ids=["issue x100", "two x5"])
def test_real_line_answers_within_their_error_of_the_contour(mechanism, count):
    acc = afa.Accountant().compose(mechanism, count)
    # (eps = 1 is left out: there the contour refuses ISSUE x 100 -- no usable saddle point, Psi'' not finite
    # near c = 1e4 -- as it refuses the same pair as Gaussian(1).poisson_subsampled(0.01) x 100; auto then
    # answers with the PLD)
    for epsilon in (0.0, 0.5, 2.0):
        contour, real_line = acc.delta_result(epsilon, method="contour"), acc.delta_result(epsilon, method="quadrature")
        assert abs(contour.value - real_line.value) <= real_line.error + contour.error, epsilon


def test_renyi_divergence_now_available():
    """The pair's MGF continues to real s: the Renyi divergence of one use, against mpmath's integral."""
    mechanism = MIXTURES[2]
    alpha = 3.0
    with mp.workdps(30):
        weights = [mp.mpf(p) for p in mechanism.probabilities]
        sigma = mp.mpf(mechanism.sigma)

        def integrand(o):
            p = mp.fsum(w * mp.npdf(o, mp.mpf(c), sigma) for w, c in zip(weights, mechanism.sensitivities))
            return p ** alpha * mp.npdf(o, 0, sigma) ** (1 - alpha)

        truth = float(mp.log(mp.quad(integrand, [-mp.inf, 0, 5, mp.inf])) / (alpha - 1))
    value = afa.views.rdp.renyi_divergence(mechanism, alpha)
    assert value == pytest.approx(truth, rel=1e-9)


def test_subsampling_several_components_still_refused():
    with pytest.raises(ValueError, match="subsampling is implemented"):
        afa.Accountant().compose(MIXTURES[1].poisson_subsampled(0.1))


def test_single_component_is_the_gaussian_closed_form():
    mixture = afa.MixtureOfGaussians((0.0, 2.0), (0.0, 1.0), sigma=4.0)
    result = afa.Accountant().compose(mixture, 3).epsilon_result(1e-6)
    mu = math.sqrt(3) * 2.0 / 4.0
    with mp.workdps(40):
        target = mp.log(mp.mpf(1e-6))
        log_delta = lambda e: mp.log(mp.ncdf(mu / 2 - e / mu) - mp.exp(e) * mp.ncdf(-mu / 2 - e / mu))  # noqa: E731
        truth = float(mp.findroot(lambda e: log_delta(e) - target, (1.0, 10.0), solver="anderson"))
    assert result.method == "exact"
    assert result.lower <= truth <= result.upper
