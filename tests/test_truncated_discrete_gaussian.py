"""The truncated discrete Gaussian mechanism (Google DP team 2025, Sec. 3.5): ``DiscreteGaussian(truncation=tau)``.

Independent truth: the two output distributions written out from the definition (mass proportional to
e^{-x^2/(2 sigma^2)} on {-tau, ..., tau}, shifted by the sensitivity) in 40-digit mpmath, and the
hockey-stick divergence of their k-fold products by brute-force enumeration of every output tuple; and
dp_accounting's own PLD of the truncated discrete Gaussian (``truncation_bound``), when installed.
"""

from __future__ import annotations

import itertools
import json
import pickle

import mpmath
import numpy as np
import pytest

import afa

mpmath.mp.dps = 40


def truncated_pmfs(sigma: float, tau: int, shift: int) -> tuple[list, list]:
    """(P, Q) over the outputs -tau..tau + shift: P = N_Z^tau(shift, sigma^2), Q = N_Z^tau(0, sigma^2)."""
    sigma = mpmath.mpf(sigma)
    weight = {x: mpmath.exp(-mpmath.mpf(x) ** 2 / (2 * sigma ** 2)) for x in range(-tau, tau + 1)}
    norm = mpmath.fsum(weight.values())
    outputs = range(-tau, tau + shift + 1)
    p = [weight.get(y - shift, mpmath.mpf(0)) / norm for y in outputs]
    q = [weight.get(y, mpmath.mpf(0)) / norm for y in outputs]
    return p, q


def brute_force_delta(p: list, q: list, k: int, epsilon: float) -> float:
    """max over both directions of sum over output k-tuples of (P^k(o) - e^eps Q^k(o))_+."""
    factor = mpmath.e ** mpmath.mpf(epsilon)
    best = mpmath.mpf(0)
    for first, second in ((p, q), (q, p)):
        total = mpmath.mpf(0)
        for tuple_ in itertools.product(range(len(p)), repeat=k):
            a = mpmath.fprod(first[i] for i in tuple_)
            b = mpmath.fprod(second[i] for i in tuple_)
            if a > factor * b:
                total += a - factor * b
        best = max(best, total)
    return float(best)


@pytest.mark.parametrize("sigma, tau, shift, k", [(1.0, 1, 1, 1), (1.5, 3, 1, 3), (2.0, 4, 2, 2), (0.7, 2, 1, 3),
                                                  (1.0, 1, 3, 2)])
@pytest.mark.parametrize("relation", ["add_remove", "substitution"])
def test_composition_matches_brute_force_enumeration(sigma, tau, shift, k, relation):
    mechanism = afa.DiscreteGaussian(sigma=sigma, sensitivity=shift, truncation=tau)
    assert mechanism.tight and mechanism.truncated_mass == 0.0
    p, q = truncated_pmfs(sigma, tau, shift)
    epsilons = [0.0, 0.25, 1.0, 3.0]
    expected = np.array([brute_force_delta(p, q, k, eps) for eps in epsilons])
    accountant = afa.Accountant(relation).compose(mechanism, k)
    exact = accountant.delta_result(epsilons)
    assert np.allclose(exact.upper, expected, rtol=1e-12, atol=1e-15), (exact, expected)
    pld = accountant.delta_result(epsilons, method="pld")
    assert np.all(pld.lower <= expected * (1 + 1e-12) + 1e-15) and np.all(pld.upper >= expected * (1 - 1e-12))
    # epsilon(delta) inverts the brute-force profile: delta at the returned epsilon is at most the target
    if expected[1] >= 1:  # disjoint supports (2 tau < shift): not private at all
        assert accountant.epsilon(0.5) == np.inf
        return
    target = float(expected[1]) if expected[1] > 1e-12 else 1e-3
    epsilon = accountant.epsilon(target)
    assert brute_force_delta(p, q, k, epsilon) <= target * (1 + 1e-9)


def test_pmfs_of_the_pair_are_the_definition():
    p, q = truncated_pmfs(1.3, 5, 2)
    pair = afa.DiscreteGaussian(sigma=1.3, sensitivity=2, truncation=5).dominating_pair("add_remove")
    assert np.allclose(np.exp(pair.log_p), [float(v) for v in p], rtol=1e-14, atol=0)
    assert np.allclose(np.exp(pair.log_q), [float(v) for v in q], rtol=1e-14, atol=0)


def test_mass_at_infinity_is_the_unmatched_end():
    # In each direction the mass at +infinity is Pr[N_Z^tau(0) > tau - shift], the outputs only one side reaches.
    p, q = truncated_pmfs(2.0, 4, 2)
    accountant = afa.Accountant().compose(afa.DiscreteGaussian(sigma=2.0, sensitivity=2, truncation=4))
    assert accountant.inf_mass["remove"] == pytest.approx(float(p[-1] + p[-2]), rel=1e-13)
    assert accountant.inf_mass["add"] == pytest.approx(float(q[0] + q[1]), rel=1e-13)


def test_wide_truncation_approaches_the_untruncated_mechanism():
    truncated = afa.Accountant().compose(afa.DiscreteGaussian(sigma=2.0, truncation=200), 5).delta(1.0)
    untruncated = afa.Accountant().compose(afa.DiscreteGaussian(sigma=2.0), 5).delta(1.0)
    assert truncated == pytest.approx(untruncated, rel=1e-9)


def test_poisson_subsampled_truncated_matches_brute_force():
    p, q = truncated_pmfs(1.0, 2, 1)
    rate = mpmath.mpf("0.2")
    mixed = [(1 - rate) * b + rate * a for a, b in zip(p, q)]
    mechanism = afa.DiscreteGaussian(sigma=1.0, truncation=2).poisson_subsampled(0.2)
    accountant = afa.Accountant().compose(mechanism, 2)
    for eps in (0.0, 0.3, 1.0):
        assert accountant.delta(eps) == pytest.approx(brute_force_delta(mixed, q, 2, eps), rel=1e-10, abs=1e-15)


@pytest.mark.parametrize("truncation, error", [(0, ValueError), (-2, ValueError), (2.5, TypeError), ("3", TypeError),
                                               (True, TypeError), (10 ** 7, ValueError)])
def test_bad_truncation_names_the_parameter(truncation, error):
    with pytest.raises(error, match="truncation"):
        afa.DiscreteGaussian(sigma=1.0, truncation=truncation)


def test_serialisation():
    mechanism = afa.DiscreteGaussian(sigma=1.5, sensitivity=2, truncation=7)
    table = json.loads(json.dumps(mechanism.to_dict()))
    assert table == {"type": "discrete_gaussian", "sigma": 1.5, "sensitivity": 2, "truncation": 7}
    assert afa.Mechanism.from_dict(table) == mechanism and pickle.loads(pickle.dumps(mechanism)) == mechanism
    assert "truncation" not in afa.DiscreteGaussian(sigma=1.5).to_dict()
    assert afa.DiscreteGaussian(sigma=1.5, truncation=7.0).truncation == 7  # an integral float is accepted


def test_against_dp_accounting_truncated_pld():
    dp_pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    sigma, tau, shift, k = 2.0, 10, 1, 30
    reference = dp_pld.from_discrete_gaussian_mechanism(sigma, sensitivity=shift, truncation_bound=tau,
                                                        value_discretization_interval=1e-4).self_compose(k)
    accountant = afa.Accountant().compose(afa.DiscreteGaussian(sigma=sigma, sensitivity=shift, truncation=tau), k)
    for delta in (1e-3, 1e-6):
        ours, theirs = accountant.epsilon(delta), reference.get_epsilon_for_delta(delta)
        assert ours <= theirs <= ours + 1e-3, (delta, ours, theirs)


def test_to_dp_event_refuses_the_truncation():
    pytest.importorskip("dp_accounting")
    from afa.interop import UnsupportedDpEventError, to_dp_event
    with pytest.raises(UnsupportedDpEventError, match="truncation"):
        to_dp_event(afa.DiscreteGaussian(sigma=1.0, truncation=5))
