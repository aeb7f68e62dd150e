"""Batched evaluation of subsampled mechanisms that differ only in their parameters (sigma, q, counts).

The MGFs of many noise-mixture pairs of one family are evaluated on one shared output rule
(afa.mechanisms.noise_pair.PairMGFBatch); compositions merge such terms into one (ComposedLoss.evaluation_terms).
Checked against: each pair's own quadrature (afa.mechanisms.noise_pair.PairMGF, evaluated alone), an mpmath integral
(tests/_subsampling_reference.py, no afa code), afa's certified PLD bracket, and dp_accounting's optimistic /
pessimistic PLDs.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from _subsampling_reference import log_mgf_mpmath

import afa
from afa.engines.composition import ComposedLoss
from afa.mechanisms.noise_pair import (
    BucketedPairMGF,
    PairFamily,
    PairMGF,
    PairMGFBatch,
    batched_fourier_sums,
    fourier_sums,
)
from afa.mechanisms.privacy_loss import NUMERIC_RTOL


def gaussian_pairs(count: int, seed: int = 0, relation: str = "add_remove"):
    rng = np.random.default_rng(seed)
    return [afa.Gaussian(sigma=s).poisson_subsampled(q).noise_pair(relation)
            for s, q in zip(rng.uniform(0.8, 3.0, count), rng.uniform(0.002, 0.05, count))]


def laplace_pairs(count: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    return [afa.Laplace(scale=b).poisson_subsampled(q).noise_pair()
            for b, q in zip(rng.uniform(0.5, 3.0, count), rng.uniform(0.005, 0.05, count))]


#: Nodes s = c + iu: a few lone ones (direct sums), a 100-point lattice (factored product) and a 400-point
#: lattice (non-uniform FFT) on one line each.
LONE = np.array([0.0, 0.7, 0.7 + 0.3j, 0.7 + 5j, -1.8 - 2j, 2.5 + 40j, 0.0 + 100j])
FACTORED = 1.1 + 1j * 0.37 * np.arange(1, 101)
GRIDDED = 0.4 + 1j * 0.05 * np.arange(400)


def assert_close_to_own(batch_values: np.ndarray, pairs, s: np.ndarray, rtol: float = 50 * NUMERIC_RTOL):
    """|M_batch - M_alone| <= rtol M(Re s) for every member and node (the error the quadratures state)."""
    for index, pair in enumerate(pairs):
        alone = PairMGF(pair).log_mgf(s)
        at_real = PairMGF(pair).log_mgf(s.real.astype(complex)).real
        difference = np.abs(np.exp(batch_values[:, index] - at_real) - np.exp(alone - at_real))
        assert np.all(difference <= rtol), (pair, float(np.max(difference)))


@pytest.mark.parametrize("pairs", [gaussian_pairs(12), [p.swapped() for p in gaussian_pairs(12)],
                                   gaussian_pairs(6, relation="substitution"), laplace_pairs(8)],
                         ids=["gaussian-remove", "gaussian-add", "gaussian-substitution", "laplace"])
@pytest.mark.parametrize("nodes", [LONE, FACTORED, GRIDDED], ids=["direct", "factored", "gridded"])
def test_batch_equals_each_pair_alone(pairs, nodes):
    batch = PairMGFBatch(tuple(pairs))
    assert_close_to_own(batch.log_mgf(nodes), pairs, nodes)
    bucketed = BucketedPairMGF(tuple(pairs))
    assert_close_to_own(bucketed.log_phi(-1j * nodes), pairs, nodes)


def test_batch_against_mpmath():
    sigmas, rates = (0.9, 2.6), (0.04, 0.003)
    pairs = [afa.Gaussian(sigma=s).poisson_subsampled(q).noise_pair() for s, q in zip(sigmas, rates)]
    swapped = tuple(pair.swapped() for pair in pairs)
    nodes = np.array([1.3 + 0.8j, 1.3 + 6j])
    for members, relation in ((tuple(pairs), "remove"), (swapped, "add")):
        values = PairMGFBatch(members).log_mgf(nodes)
        for index, (sigma, q) in enumerate(zip(sigmas, rates)):
            at_real = float(log_mgf_mpmath(1.3, "gaussian", sigma, q, relation=relation, dps=20))
            for node, value in zip(nodes, values[:, index]):
                exact = complex(log_mgf_mpmath(mpmath.mpc(node.real, node.imag), "gaussian", sigma, q,
                                               relation=relation, dps=20))
                assert abs(np.exp(value - at_real) - np.exp(exact - at_real)) <= 10 * NUMERIC_RTOL


def test_batched_fourier_sums_match_single_rows():
    rng = np.random.default_rng(3)
    values, weights = rng.normal(size=(5, 300)), rng.uniform(size=(5, 300))
    for frequencies in (np.array([0.0, 0.3, -2.0, 17.5]), 0.2 + 0.01 * np.arange(120), 0.7 * np.arange(600)):
        together = batched_fourier_sums(frequencies, values, weights, chunk=4096)  # several chunks
        for row in range(5):
            alone = fourier_sums(frequencies, values[row], weights[row])
            assert np.max(np.abs(together[:, row] - alone)) <= 1e-13 * np.sum(weights[row])


def test_members_beyond_reach_are_nan_alone():
    near = afa.Gaussian(1.0).poisson_subsampled(0.1).noise_pair()
    far = afa.Gaussian(0.01).poisson_subsampled(0.1).noise_pair()  # shift 100 scales: beyond reach at Re s = 200
    values = PairMGFBatch((near, far)).log_mgf(np.array([200.0 + 0j, 1.0 + 0j]))
    assert np.isnan(values[0, 1]) and np.isnan(PairMGF(far).log_mgf(np.array([200.0 + 0j]))[0])
    assert np.isfinite(values[0, 0]) and np.all(np.isfinite(values[1]))


def test_family_refuses_mixed_members():
    gaussian, laplace = gaussian_pairs(1)[0], laplace_pairs(1)[0]
    assert PairFamily.of(gaussian) != PairFamily.of(laplace)
    with pytest.raises(ValueError, match="PairFamily"):
        PairMGFBatch((gaussian, laplace))


def heterogeneous(count: int, steps: int = 10, seed: int = 0) -> afa.Accountant:
    rng = np.random.default_rng(seed)
    accountant = afa.Accountant()
    for sigma, q in zip(rng.uniform(1.5, 3.0, count), rng.uniform(0.005, 0.02, count)):
        accountant.compose(afa.Gaussian(sigma=sigma).poisson_subsampled(q), times=steps)
    return accountant


def composed_remove(count: int, seed: int = 0) -> ComposedLoss:
    rng = np.random.default_rng(seed)
    terms = {}
    for sigma, q, steps in zip(rng.uniform(1.5, 3.0, count), rng.uniform(0.005, 0.02, count),
                               rng.integers(1, 50, count)):
        remove, _ = afa.Gaussian(sigma=sigma).poisson_subsampled(q).privacy_losses("add_remove")
        terms[remove] = int(steps)
    return ComposedLoss(terms)


def test_composition_merges_one_family_and_sums_its_errors():
    loss = composed_remove(30)
    (merged, count), = loss.evaluation_terms.items()
    assert count == 1
    assert merged.log_phi_rtol == pytest.approx(NUMERIC_RTOL * sum(loss.terms.values()), rel=1e-12)
    assert loss.log_phi_rtol == pytest.approx(merged.log_phi_rtol, rel=1e-12)
    mean = math.fsum(k * term.cumulants[0] for term, k in loss.terms.items())
    assert merged.cumulants[0] == pytest.approx(mean, rel=1e-12)
    assert merged.loss_max == pytest.approx(loss.loss_max, rel=1e-12)


@pytest.mark.parametrize("nodes", [np.array([0.0, 0.4, -3.0, 25.0]), -1j * np.array([0.8, 2.0 + 3j])],
                         ids=["real-t", "mgf"])
def test_composed_log_phi_is_sum_of_members_alone(nodes):
    loss = composed_remove(25)
    together = loss.log_phi_numeric(nodes)
    # Independent path: each member's own quadrature (PairMGF), weighted by its count and summed.
    alone = sum(k * PairMGF(term.noise_pair).log_mgf(1j * nodes) for term, k in loss.terms.items())
    at_real = sum(k * PairMGF(term.noise_pair).log_mgf((1j * nodes).real.astype(complex)).real
                  for term, k in loss.terms.items())
    assert np.all(np.abs(np.exp(together - at_real) - np.exp(alone - at_real)) <= 4 * loss.log_phi_rtol)


def test_single_member_is_not_wrapped():
    loss = composed_remove(1)
    assert list(loss.evaluation_terms) == list(loss.terms)


def test_heterogeneous_epsilon_inside_certified_bracket():
    accountant = heterogeneous(8)
    result = accountant.epsilon_result(1e-5, method="contour")  # the batched MGFs
    certified = accountant.epsilon_result(1e-5, method="pld")  # the certified discretized PLD's bracket
    assert certified.certified
    assert result.lower <= result.value <= result.upper
    assert certified.lower <= result.lower and result.upper <= certified.upper
    assert result.upper - result.lower <= 1e-8 * result.value
    auto = accountant.epsilon_result(1e-5)
    assert auto.lower <= result.upper and result.lower <= auto.upper


def test_heterogeneous_epsilon_inside_dp_accounting_bracket():
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    rng = np.random.default_rng(5)
    terms = list(zip(rng.uniform(1.5, 3.0, 4), rng.uniform(0.01, 0.03, 4)))
    accountant = afa.Accountant()
    for sigma, q in terms:
        accountant.compose(afa.Gaussian(sigma=sigma).poisson_subsampled(q), times=10)
    result = accountant.epsilon_result(1e-5, method="contour")  # the batched MGFs

    def dp_epsilon(pessimistic: bool) -> float:
        total = None
        for sigma, q in terms:
            one = pld.from_gaussian_mechanism(sigma, sampling_prob=q, value_discretization_interval=1e-4,
                                              pessimistic_estimate=pessimistic, use_connect_dots=pessimistic)
            one = one.self_compose(10)
            total = one if total is None else total.compose(one)
        return total.get_epsilon_for_delta(1e-5)

    optimistic, pessimistic = dp_epsilon(False), dp_epsilon(True)
    assert optimistic <= result.lower <= result.upper <= pessimistic
    assert pessimistic - optimistic < 0.01  # the bracket is tight enough to mean something
