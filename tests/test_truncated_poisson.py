"""Truncated Poisson sampling of the Gaussian mechanism (Google DP team 2025, Sec. 4.3; Ganesh 2025).

Independent truth:

* the weights w = Pr[Binom(n - 1, q) >= B] and q' = Pr[Binom(n, q) > B] B / (n w) from exact binomial sums
  in mpmath (small n);
* one use's delta(eps) of the mixture pair in closed form: each part's loss is monotone in the output, so
  {L > eps} is a half-line whose end is found by bisection in 40-digit mpmath, and its A- and B-masses are
  sums of normal tails (the pairs are written out here from the section's statement, not taken from afa);
* compositions against dp_accounting's own PLD accountant (``TruncatedSubsampledGaussianDpEvent``,
  pessimistic, grid 1e-4), when installed: afa's epsilon must lie inside its value and within 1e-4 of it.
"""

from __future__ import annotations

import math
import pickle

import mpmath
import numpy as np
import pytest

import afa
from afa.mechanisms.pairs import PairMixture

mpmath.mp.dps = 40


# ---------------------------------------------------------------------------
# independent references
# ---------------------------------------------------------------------------

def binomial_weights(n: int, q: float, batch: int) -> tuple[mpmath.mpf, mpmath.mpf]:
    """(w, q') by exact sums: w = P[Binom(n-1, q) >= B], q' = P[Binom(n, q) > B] B / (n w)."""
    q = mpmath.mpf(q)

    def pmf(m, k):
        return mpmath.binomial(m, k) * q ** k * (1 - q) ** (m - k)

    w = mpmath.fsum(pmf(n - 1, k) for k in range(batch, n))
    above = mpmath.fsum(pmf(n, k) for k in range(batch + 1, n + 1))
    return w, above * batch / (n * w)


def section_pairs(relation: str, q, inner, shift: float):
    """The two parts of Sec. 4.3 as ((A components), (B components)), each component (shift, weight), sigma = 1."""
    if relation == "add_remove":
        poisson = (((0, 1 - q), (shift, q)), ((0, 1),))
    else:
        poisson = (((0, 1 - q), (-shift, q)), ((0, 1 - q), (shift, q)))
    truncated = (((0, 1 - inner), (-2 * shift, inner)), ((0, 1 - inner), (2 * shift, inner)))
    return poisson, truncated


def pair_delta(a_side, b_side, epsilon: float, sigma: float) -> mpmath.mpf:
    """H_{e^eps}(A || B) for Gaussian mixtures A, B of noise N(0, sigma^2) whose loss is monotone in o."""
    def density(side, o):
        return mpmath.fsum(w * mpmath.npdf(o, c, sigma) for c, w in side)

    def loss(o):
        return mpmath.log(density(a_side, o)) - mpmath.log(density(b_side, o))

    def mass_above(side, o):  # mass of (o, inf)
        return mpmath.fsum(w * mpmath.ncdf(-(o - c) / sigma) for c, w in side)

    far = 60 * sigma + 10
    increasing = loss(mpmath.mpf(far)) > loss(mpmath.mpf(-far))
    low, high = mpmath.mpf(-far), mpmath.mpf(far)
    if (loss(high) if increasing else loss(low)) <= epsilon:
        return mpmath.mpf(0)
    for _ in range(200):  # bisection for the crossing L(o) = eps
        middle = (low + high) / 2
        if (loss(middle) > epsilon) == increasing:
            high = middle
        else:
            low = middle
    o = (low + high) / 2
    if increasing:  # {L > eps} = (o, inf)
        return mass_above(a_side, o) - mpmath.e ** epsilon * mass_above(b_side, o)
    return (1 - mass_above(a_side, o)) - mpmath.e ** epsilon * (1 - mass_above(b_side, o))


def brute_force_delta(relation: str, sigma: float, q: float, batch: int, n: int, epsilon: float,
                      direction: str = "forward", shift: float = 1.0) -> float:
    w, inner = binomial_weights(n, q, batch)
    parts = section_pairs(relation, mpmath.mpf(q), inner, shift)
    total = mpmath.mpf(0)
    for weight, (a_side, b_side) in zip((1 - w, w), parts):
        if direction == "backward":
            a_side, b_side = b_side, a_side
        total += weight * pair_delta(a_side, b_side, epsilon, sigma)
    return float(total)


# ---------------------------------------------------------------------------
# the weights and the pair
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("n, q, batch", [(50, 0.1, 5), (50, 0.1, 3), (200, 0.02, 6), (40, 1.0, 10), (30, 0.5, 30)])
def test_weights_match_exact_binomial_sums(n, q, batch):
    mechanism = afa.Gaussian(1.0).truncated_poisson_subsampled(q, batch, n)
    w = mpmath.fsum(mpmath.binomial(n - 1, k) * mpmath.mpf(q) ** k * (1 - mpmath.mpf(q)) ** (n - 1 - k)
                    for k in range(batch, n))
    assert mechanism.truncation_probability == pytest.approx(float(w), rel=1e-12, abs=1e-300)
    if w > 0:
        assert mechanism.conditional_sampling_rate == pytest.approx(float(binomial_weights(n, q, batch)[1]),
                                                                    rel=1e-12)
        assert not mechanism.tight
    else:
        assert mechanism.conditional_sampling_rate == 0.0 and mechanism.tight


@pytest.mark.parametrize("relation", ["add_remove", "substitution"])
@pytest.mark.parametrize("sigma, q, batch, n", [(1.0, 0.1, 5, 50), (0.8, 0.3, 4, 20), (2.0, 1.0, 10, 40)])
def test_single_use_delta_matches_brute_force(relation, sigma, q, batch, n):
    mechanism = afa.Gaussian(sigma).truncated_poisson_subsampled(q, batch, n)
    accountant = afa.Accountant(relation, value_discretization_interval=1e-3).compose(mechanism)
    epsilons = [0.0, 0.3, 1.0, 2.0]
    for direction, name in zip(("forward", "backward"), accountant.directions):
        expected = np.array([brute_force_delta(relation, sigma, q, batch, n, eps, direction) for eps in epsilons])
        # auto: one use of one mechanism is answered from its loss tails (the mixture's); pld: its certified grid.
        for method, rtol in (("auto", 1e-9), ("pld", 1e-5)):
            result = accountant.delta_result(epsilons, method=method, direction=name)
            assert not result.tight
            slack = 1e-9 * expected + 1e-13
            assert np.all(result.lower <= expected + slack), (method, name, result.lower, expected)
            assert np.all(result.upper >= expected - slack), (method, name, result.upper, expected)
            assert np.allclose(result.upper, expected, rtol=rtol, atol=0), (method, name, result.upper, expected)


def test_sensitivity_scales_the_shifts():
    mechanism = afa.Gaussian(2.0, sensitivity=1.5).truncated_poisson_subsampled(0.2, 3, 20)
    expected = brute_force_delta("add_remove", 2.0, 0.2, 3, 20, 0.5, shift=1.5)
    accountant = afa.Accountant(value_discretization_interval=1e-3).compose(mechanism)
    assert accountant.delta_result(0.5, direction="remove").upper == pytest.approx(expected, rel=1e-9)


def test_no_truncation_is_poisson_subsampling():
    # B = n: Pr[Binom(n - 1, q) >= n] = 0, so the pair is the Poisson-subsampled Gaussian's and is tight.
    mechanism = afa.Gaussian(1.0).truncated_poisson_subsampled(0.05, batch_size=30, dataset_size=30)
    assert mechanism.tight and mechanism.truncation_probability == 0.0
    for relation in ("add_remove", "substitution"):
        ours = afa.Accountant(relation).compose(mechanism, 400).delta_result(1.0)
        theirs = afa.Accountant(relation).compose(afa.Gaussian(1.0).poisson_subsampled(0.05), 400).delta_result(1.0)
        assert ours.tight and theirs.tight
        assert ours.value == pytest.approx(theirs.value, rel=1e-10)


def test_composition_is_not_tight_and_engines_agree():
    mechanism = afa.Gaussian(1.0).truncated_poisson_subsampled(0.01, batch_size=12, dataset_size=1000)
    accountant = afa.Accountant(value_discretization_interval=1e-3).compose(mechanism, 50).compose(afa.Gaussian(5.0), 3)
    assert not accountant.tight and not mechanism.tight and afa.Gaussian(1.0).tight
    contour = accountant.epsilon_result(1e-6, method="contour")
    pld = accountant.epsilon_result(1e-6, method="pld")
    assert not contour.tight and not pld.tight and pld.certified
    assert pld.lower <= contour.value <= pld.upper
    assert not accountant.epsilon_result([1e-6, 1e-5], method="contour").tight
    assert afa.Accountant().compose(afa.Gaussian(5.0), 3).delta_result(1.0).tight


# ---------------------------------------------------------------------------
# bad input, serialisation
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("arguments, error, name", [
    ((0.0, 10, 100), ValueError, "sampling_rate"),
    ((1.5, 10, 100), ValueError, "sampling_rate"),
    ((float("nan"), 10, 100), ValueError, "sampling_rate"),
    ((0.1, 0, 100), ValueError, "batch_size"),
    ((0.1, -3, 100), ValueError, "batch_size"),
    ((0.1, 2.5, 100), TypeError, "batch_size"),
    ((0.1, 10, 9), ValueError, "dataset_size"),
    ((0.1, 10, 100.5), TypeError, "dataset_size"),
    ((0.1, 10, "100"), TypeError, "dataset_size"),
])
def test_bad_parameters_name_the_parameter(arguments, error, name):
    with pytest.raises(error, match=name):
        afa.Gaussian(1.0).truncated_poisson_subsampled(*arguments)


def test_bad_sigma_and_sensitivity():
    with pytest.raises(ValueError, match="sigma"):
        afa.TruncatedPoissonGaussian(sigma=0.0, sampling_rate=0.1, batch_size=2, dataset_size=10)
    with pytest.raises(ValueError, match="sigma"):
        afa.TruncatedPoissonGaussian(sigma=1e-3, sampling_rate=0.1, batch_size=2, dataset_size=10)
    with pytest.raises(ValueError, match="sensitivity"):
        afa.TruncatedPoissonGaussian(sigma=1.0, sampling_rate=0.1, batch_size=2, dataset_size=10, sensitivity=-1)


def test_cannot_be_subsampled_again():
    mechanism = afa.Gaussian(1.0).truncated_poisson_subsampled(0.1, 2, 10)
    with pytest.raises(TypeError, match="already subsampled"):
        mechanism.poisson_subsampled(0.5)
    with pytest.raises(TypeError, match="already subsampled"):
        mechanism.subset_subsampled(0.5)


def test_serialisation_round_trips():
    mechanism = afa.Gaussian(1.1, sensitivity=2.0).truncated_poisson_subsampled(0.01, 12, 1000)
    table = mechanism.to_dict()
    assert table == {"type": "truncated_poisson_gaussian", "sigma": 1.1, "sampling_rate": 0.01, "batch_size": 12,
                     "dataset_size": 1000, "sensitivity": 2.0}
    assert afa.Mechanism.from_dict(table) == mechanism
    assert pickle.loads(pickle.dumps(mechanism)) == mechanism
    assert hash(pickle.loads(pickle.dumps(mechanism))) == hash(mechanism)
    accountant = afa.Accountant("substitution").compose(mechanism, 7)
    rebuilt = afa.Accountant.from_dict(accountant.to_dict())
    assert rebuilt.mechanisms == accountant.mechanisms and rebuilt.neighboring == "substitution"
    assert pickle.loads(pickle.dumps(accountant)).mechanisms == accountant.mechanisms


def test_pair_mixture_validation():
    one = afa.Gaussian(1.0).dominating_pair("add_remove")
    with pytest.raises(ValueError, match="two components"):
        PairMixture((0.0,), (one,))
    with pytest.raises(ValueError, match="sum to one"):
        PairMixture((math.log(0.5), math.log(0.6)), (one, one))
    with pytest.raises(TypeError, match="NoiseMixturePair"):
        PairMixture((math.log(0.5), math.log(0.5)), (one, afa.RandomizedResponse(0.7).dominating_pair("add_remove")))


# ---------------------------------------------------------------------------
# against dp_accounting
# ---------------------------------------------------------------------------

def _dp_accounting_event():
    dp_accounting = pytest.importorskip("dp_accounting")
    event = getattr(dp_accounting.dp_event, "TruncatedSubsampledGaussianDpEvent", None)
    if event is None:
        pytest.skip("this dp_accounting has no TruncatedSubsampledGaussianDpEvent")
    return dp_accounting, event


@pytest.mark.parametrize("batch, relation", [(256, "add_remove"), pytest.param(300, "add_remove", marks=pytest.mark.slow),
                                             pytest.param(256, "substitution", marks=pytest.mark.slow)])
def test_dp_sgd_inside_dp_accounting_pessimistic_value(batch, relation):
    dp_accounting, event_class = _dp_accounting_event()
    n, q, sigma, steps, delta = 60_000, 256 / 60_000, 1.1, 1_000, 1e-5
    neighboring = (dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE if relation == "add_remove"
                   else dp_accounting.NeighboringRelation.REPLACE_ONE)
    reference = dp_accounting.pld.PLDAccountant(neighboring)
    reference.compose(dp_accounting.SelfComposedDpEvent(event_class(n, q, batch, sigma), steps))
    expected = reference.get_epsilon(delta)
    mechanism = afa.Gaussian(sigma).truncated_poisson_subsampled(q, batch, n)
    result = afa.Accountant(relation).compose(mechanism, steps).epsilon_result(delta)
    assert not result.tight
    assert result.upper <= expected <= result.upper + 1e-4, (result, expected)


def test_interop_maps_the_event_both_ways():
    dp_accounting, event_class = _dp_accounting_event()
    from afa.interop import AfaPrivacyAccountant, from_dp_event, to_dp_event
    event = dp_accounting.SelfComposedDpEvent(event_class(1000, 0.02, 25, 1.3), 500)
    for relation in ("add_remove", "substitution"):
        accountant = from_dp_event(event, relation)
        mechanism = afa.TruncatedPoissonGaussian(sigma=1.3, sampling_rate=0.02, batch_size=25, dataset_size=1000)
        assert accountant.mechanisms == {mechanism: 500} and accountant.neighboring == relation
        assert to_dp_event(accountant) == event
    # A batch above the dataset size never truncates; zero sizes or rates cost nothing.
    assert from_dp_event(event_class(10, 0.5, 20, 1.0)).mechanisms == {
        afa.TruncatedPoissonGaussian(sigma=1.0, sampling_rate=0.5, batch_size=10, dataset_size=10): 1}
    assert from_dp_event(event_class(10, 0.0, 5, 1.0)).mechanisms == {}
    # Under REPLACE_SPECIAL the pair is add/remove's (Google DP team 2025, Sec. 4.3; bottom contributes 0), as
    # dp_accounting builds it.
    special = from_dp_event(event, "replace_special")
    assert special.neighboring == "replace_special"
    assert special.delta(1.0) == from_dp_event(event, "add_remove").delta(1.0)
    ours = AfaPrivacyAccountant()
    ours.compose(event)
    assert ours.get_epsilon(1e-6) == pytest.approx(from_dp_event(event).epsilon(1e-6))


@pytest.mark.parametrize("k,n,p", [(255, 59_999, 256 / 60_000), (299, 59_999, 256 / 60_000), (3, 10, 0.5),
                                   (0, 1000, 0.3), (900, 1000, 0.3), (2, 2000, 0.9), (1990, 2000, 0.1)])
def test_binomial_log_tails_against_exact_sums(k, n, p):
    """log Pr[X <= k] and log Pr[X > k] of X ~ Binom(n, p), against the two sums of binomial terms in 60-digit
    mpmath; the last three put one tail below the smallest double (summed from log-PMF terms instead)."""
    from afa._accurate import binomial_log_tails
    with mpmath.workdps(60):
        p_ = mpmath.mpf(p)
        ratio = p_ / (1 - p_)
        terms = [(1 - p_) ** n]
        for j in range(n):  # C(n, j + 1) p^(j+1) (1-p)^(n-j-1) from the term before it
            terms.append(terms[-1] * (n - j) / (j + 1) * ratio)
        truth = (float(mpmath.log(mpmath.fsum(terms[:k + 1]))), float(mpmath.log(mpmath.fsum(terms[k + 1:]))))
    got = binomial_log_tails(k, n, p)
    for value, expected in zip(got, truth):
        assert abs(value - expected) <= 1e-13 * max(1.0, abs(expected)), (got, truth)
