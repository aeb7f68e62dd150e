"""Invariants of every privacy profile, over random compositions: delta in [0, 1], non-increasing in eps,
(1 - e^eps)_+ <= delta, and never lowered by composing one more mechanism."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import afa

gaussians = st.builds(afa.Gaussian, sigma=st.floats(0.5, 20.0))
discrete = st.one_of(
    st.builds(afa.RandomizedResponse, p=st.floats(0.5, 0.95)),
    st.builds(afa.ApproxDP, epsilon=st.floats(0.0, 2.0), delta=st.floats(0.0, 1e-3)),
    st.integers(2, 6).flatmap(lambda k: st.builds(afa.KaryRandomizedResponse, k=st.just(k),
                                                  p=st.floats(1.0 / k, 0.95))),
    st.builds(afa.DiscreteLaplace, a=st.floats(0.2, 3.0), sensitivity=st.integers(1, 3)),
)
continuous = st.one_of(gaussians, st.builds(afa.Laplace, scale=st.floats(0.5, 5.0)))


@st.composite
def compositions(draw):
    """A Gaussian plus up to two other mechanisms, or up to three discrete ones, with counts."""
    if draw(st.booleans()):
        mechanisms = [draw(gaussians)] + draw(st.lists(st.one_of(continuous, discrete), max_size=2))
    else:
        mechanisms = draw(st.lists(discrete, min_size=1, max_size=3))
    counts = draw(st.lists(st.integers(1, 20), min_size=len(mechanisms), max_size=len(mechanisms)))
    neighboring = draw(st.sampled_from(["add_remove", "substitution"]))
    return neighboring, list(zip(mechanisms, counts))


def build(neighboring, pairs):
    acc = afa.Accountant(neighboring)
    for mechanism, count in pairs:
        acc.compose(mechanism, times=count)
    return acc


PROPERTY = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
EPSILONS = np.array([-1.0, -0.1, 0.0, 0.2, 0.5, 1.0, 2.0, 4.0, 8.0])


@PROPERTY
@given(compositions())
def test_profile_is_a_valid_privacy_profile(spec):
    acc = build(*spec)
    results = [acc.delta_result(float(eps)) for eps in EPSILONS]
    values = np.array([r.value for r in results])
    errors = np.array([r.error for r in results])
    assert np.all(np.isfinite(values))
    assert np.all((values >= 0) & (values <= 1))
    assert np.all(values >= -np.expm1(np.minimum(EPSILONS, 0)) - 1e-15)
    assert np.all(np.diff(values) <= errors[1:] + errors[:-1] + 1e-15)   # non-increasing
    np.testing.assert_allclose(acc.privacy_profile(EPSILONS, estimate=True), values, rtol=0, atol=1e-15)
    np.testing.assert_allclose(acc.privacy_profile(EPSILONS), [r.upper for r in results], rtol=0, atol=1e-15)


@PROPERTY
@given(compositions(), st.floats(0.05, 3.0))
def test_epsilon_inverts_delta(spec, eps):
    acc = build(*spec)
    delta = acc.delta_result(eps)
    inf_mass = max(acc.inf_mass.values())
    assume(1e-9 < delta.value < 1 - 1e-9 and delta.value > inf_mass * (1 + 1e-6) + 1e-12)
    assume(delta.value > 1e4 * max(delta.error, 1e-300))
    assume(delta.value < acc.delta(0.0) * (1 - 1e-9))
    result = acc.epsilon_result(delta.value)
    assert result.lower - 1e-9 <= eps <= result.upper + 1e-9
    assert result.value == pytest.approx(eps, rel=1e-6, abs=1e-9)


@PROPERTY
@given(compositions(), st.one_of(gaussians, discrete))
def test_composing_more_never_decreases_delta(spec, extra):
    # (A Laplace added to a purely discrete composition is left to test_reference_accuracy:
    # without a Gaussian factor its CF decays slowly and each query takes seconds.)
    neighboring, pairs = spec
    before = build(neighboring, pairs)
    after = build(neighboring, pairs + [(extra, 1)])
    for eps in (0.0, 0.5, 2.0):
        a, b = before.delta_result(eps), after.delta_result(eps)
        assert b.value >= a.value - a.error - b.error - 1e-15


@PROPERTY
@given(compositions())
def test_times_k_equals_k_separate_compose_calls(spec):
    neighboring, pairs = spec
    separate = afa.Accountant(neighboring)
    for mechanism, count in pairs:
        for _ in range(count):
            separate.compose(mechanism)
    together = build(neighboring, pairs)
    assert separate.mechanisms == together.mechanisms
    assert separate.delta(0.7) == together.delta(0.7)


def test_no_query_returns_nan_for_extreme_epsilon():
    acc = afa.Accountant().compose(afa.Gaussian(1.0), times=3).compose(afa.Laplace(2.0))
    for eps in (-50.0, 0.0, 50.0, 500.0):
        value = acc.delta(eps)
        assert not math.isnan(value) and 0.0 <= value <= 1.0
