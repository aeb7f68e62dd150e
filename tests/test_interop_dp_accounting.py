"""afa.interop.dp_accounting: DpEvent trees to afa and back, and AfaPrivacyAccountant inside dp_accounting.

Expected values come from closed forms (the Gaussian's profile, Sommer, Meiser & Mohammadi 2019, Thm 5;
Laplace's; the (epsilon, 0)-DP pair's), from brute-force enumeration of randomized response's output
distributions, from afa's own API on the composition the mapping documents, and from dp_accounting's
own pessimistic and optimistic PLDs (DP-SGD rows).  Events that dp_accounting 0.6.0 lacks but its
development version defines (EpsilonDeltaDpEvent, DiscreteGaussianDpEvent, ExponentialMechanismDpEvent,
PermuteAndFlipDpEvent) are stood in for by attrs classes with the same fields (the ``newer_events`` fixture).
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from typing import Optional

import numpy as np
import pytest
from _peers import dp_accounting_epsilon_bracket
from scipy.optimize import brentq
from scipy.stats import norm

import afa

dp_accounting = pytest.importorskip("dp_accounting")
import attr  # noqa: E402  (dp_accounting's own dependency)
from dp_accounting import dp_event as events  # noqa: E402

from afa.interop import (  # noqa: E402
    AfaPrivacyAccountant,
    UnsupportedDpEventError,
    from_dp_event,
    to_dp_event,
    to_neighboring_relation,
)

Rel = dp_accounting.NeighboringRelation


def gaussian_delta(epsilon: float, mu: float) -> float:
    """delta(eps) of the Gaussian pair with shift mu (Sommer, Meiser & Mohammadi 2019, Thm 5)."""
    return norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2)


def gaussian_epsilon(delta: float, mu: float) -> float:
    return brentq(lambda eps: gaussian_delta(eps, mu) - delta, 0.0, 100.0, xtol=1e-13)


def pure_dp_delta(epsilon: float, epsilon0: float) -> float:
    """delta(eps) of the (eps0, 0)-DP pair: losses +-eps0 with masses e^eps0 / (1 + e^eps0) and 1 / (1 + e^eps0)."""
    return max(0.0, (math.exp(epsilon0) - math.exp(epsilon)) / (1 + math.exp(epsilon0)))


# ---------------------------------------------------------------------------
# events of dp_accounting's development version, stood in for when this version lacks them
# ---------------------------------------------------------------------------

@attr.s(frozen=True, slots=True, auto_attribs=True)
class EpsilonDeltaDpEvent(events.DpEvent):
    epsilon: float
    delta: float


@attr.s(frozen=True, slots=True, auto_attribs=True)
class DiscreteGaussianDpEvent(events.DpEvent):
    sigma: float
    sensitivity: float = 1.0
    dimension: Optional[int] = None  # noqa: UP045  (the field as dp_accounting spells it)


@attr.s(frozen=True, slots=True, auto_attribs=True)
class ExponentialMechanismDpEvent(events.DpEvent):
    epsilon: float


@attr.s(frozen=True, slots=True, auto_attribs=True)
class PermuteAndFlipDpEvent(events.DpEvent):
    epsilon: float


STAND_INS = (EpsilonDeltaDpEvent, DiscreteGaussianDpEvent, ExponentialMechanismDpEvent, PermuteAndFlipDpEvent)


@pytest.fixture
def newer_events(monkeypatch):
    """dp_event with the development version's classes (this version's own where it has them)."""
    for cls in STAND_INS:
        if not hasattr(events, cls.__name__):
            monkeypatch.setattr(events, cls.__name__, cls, raising=False)
    return events


# ---------------------------------------------------------------------------
# optional dependency
# ---------------------------------------------------------------------------

def test_import_without_dp_accounting():
    code = ("import sys; sys.modules['dp_accounting'] = None\n"
            "import afa\n"
            "assert 'afa.interop' not in sys.modules\n"
            "import afa.interop\n"
            "from afa.interop import from_dp_event\n"
            "assert afa.from_dp_event is from_dp_event\n"
            "try:\n"
            "    from_dp_event(object())\n"
            "except ImportError as error:\n"
            "    assert 'dp-accounting' in str(error)\n"
            "else:\n"
            "    raise AssertionError('no ImportError')\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_lazy_names():
    assert afa.from_dp_event is from_dp_event and afa.to_dp_event is to_dp_event
    assert issubclass(AfaPrivacyAccountant, dp_accounting.PrivacyAccountant)
    assert "from_dp_event" in dir(afa) and "interop" in dir(afa)


# ---------------------------------------------------------------------------
# event -> afa, against closed forms and brute force
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("relation, mu_factor", [("add_remove", 1.0), (Rel.ADD_OR_REMOVE_ONE, 1.0),
                                                 (Rel.REPLACE_SPECIAL, 1.0), (Rel.REPLACE_ONE, 2.0),
                                                 ("substitution", 2.0)])
def test_gaussian_closed_form(relation, mu_factor):
    accountant = from_dp_event(events.SelfComposedDpEvent(events.GaussianDpEvent(2.0), 50), relation)
    mu = mu_factor * math.sqrt(50) / 2.0  # a replacement moves the sum by 2C
    assert accountant.delta(1.0) == pytest.approx(gaussian_delta(1.0, mu), rel=1e-9)
    assert accountant.epsilon(1e-5) == pytest.approx(gaussian_epsilon(1e-5, mu), rel=1e-9)


def test_laplace_closed_form():
    a = 1 / 0.8  # one use: delta(eps) = 1 - e^{(eps - a)/2} on [0, a]
    accountant = from_dp_event(events.LaplaceDpEvent(0.8))
    for epsilon in (0.0, 0.5, 1.0):
        assert accountant.delta(epsilon) == pytest.approx(1 - math.exp((epsilon - a) / 2), rel=1e-9)
    doubled = from_dp_event(events.LaplaceDpEvent(1.6), Rel.REPLACE_ONE)
    assert doubled.delta(0.5) == pytest.approx(1 - math.exp((0.5 - a) / 2), rel=1e-9)


def rr_outputs(noise: float, k: int, value) -> np.ndarray:
    """The output distribution of dp_accounting's randomized response on ``value`` (None: the special record)."""
    out = np.full(k, noise / k)
    if value is not None:
        out[value] += 1 - noise
    else:
        out[:] = 1 / k  # the special record's output is uniform
    return out


def brute_force_delta(p: np.ndarray, q: np.ndarray, uses: int, epsilon: float) -> float:
    """max of both directions' sum_o (P(o) - e^eps Q(o))_+ over every output tuple of ``uses`` independent uses."""
    best = 0.0
    for a, b in ((p, q), (q, p)):
        total = 0.0
        for outputs in itertools.product(range(len(p)), repeat=uses):
            pa = math.prod(a[o] for o in outputs)
            pb = math.prod(b[o] for o in outputs)
            total += max(0.0, pa - math.exp(epsilon) * pb)
        best = max(best, total)
    return best


@pytest.mark.parametrize("noise, k", [(0.5, 2), (0.3, 5), (0.8, 3), (0.05, 4), (1.0, 3), (0.0, 2)])
@pytest.mark.parametrize("relation", [Rel.REPLACE_ONE, Rel.REPLACE_SPECIAL])
def test_randomized_response_brute_force(noise, k, relation):
    uses = 3
    p = rr_outputs(noise, k, 0)
    q = rr_outputs(noise, k, 1 if relation == Rel.REPLACE_ONE else None)
    accountant = from_dp_event(events.SelfComposedDpEvent(events.RandomizedResponseDpEvent(noise, k), uses), relation)
    for epsilon in (0.0, 0.3, 1.0, 2.5):
        expected = brute_force_delta(p, q, uses, epsilon)
        assert accountant.delta(epsilon, method="exact") == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_randomized_response_parameters():
    (mechanism,) = from_dp_event(events.RandomizedResponseDpEvent(0.3, 5), Rel.REPLACE_ONE).mechanisms
    assert isinstance(mechanism, afa.KaryRandomizedResponse) and mechanism.k == 5
    assert mechanism.p == pytest.approx(0.7 + 0.3 / 5, rel=1e-15)  # keeps the input, or draws it uniformly
    (binary,) = from_dp_event(events.RandomizedResponseDpEvent(0.5, 2), Rel.REPLACE_ONE).mechanisms
    assert binary == afa.RandomizedResponse(p=0.75)
    assert not from_dp_event(events.RandomizedResponseDpEvent(0.0, 1), Rel.REPLACE_ONE).mechanisms  # one bucket


def test_discrete_laplace_and_mixture_match_afa():
    accountant = from_dp_event(events.SelfComposedDpEvent(events.DiscreteLaplaceDpEvent(0.7, 2), 5))
    direct = afa.Accountant().compose(afa.DiscreteLaplace(a=0.7, sensitivity=2), 5)
    assert accountant.delta(1.0) == direct.delta(1.0)
    doubled = from_dp_event(events.DiscreteLaplaceDpEvent(0.7, 1), Rel.REPLACE_ONE)
    assert doubled.mechanisms == {afa.DiscreteLaplace(a=0.7, sensitivity=2): 1}
    mixture = events.MixtureOfGaussiansDpEvent(2.0, [0.0, 1.0, 2.0], [0.5, 0.3, 0.2])
    accountant = from_dp_event(events.SelfComposedDpEvent(mixture, 3))
    direct = afa.Accountant().compose(afa.MixtureOfGaussians((0.0, 1.0, 2.0), (0.5, 0.3, 0.2), 2.0), 3)
    assert accountant.mechanisms == direct.mechanisms  # the same composition: the same answers (a query takes ~20 s)
    assert not from_dp_event(events.MixtureOfGaussiansDpEvent(1.0, [0.0], [1.0])).mechanisms


def test_newer_events(newer_events):
    accountant = from_dp_event(newer_events.EpsilonDeltaDpEvent(epsilon=1.0, delta=1e-6))
    assert accountant.delta(0.5) == pytest.approx(1e-6 + (1 - 1e-6) * pure_dp_delta(0.5, 1.0), rel=1e-9)
    # Permute-and-flip is the Laplace pair with sensitivity / scale = epsilon (1 - e^{(eps - a)/2} for 0 <= eps <= a);
    # the exponential mechanism the bounded-range profile (1 - e^{(eps - a)/2})^2 / (1 - e^{-a}) (Dong, Durfee &
    # Rogers 2020), exact at the pair's grid points (eps = 0.32 is one for a = 0.8), both below the pure-DP pair.
    for relation in (Rel.ADD_OR_REMOVE_ONE, Rel.REPLACE_ONE, Rel.REPLACE_SPECIAL):
        flip = from_dp_event(newer_events.PermuteAndFlipDpEvent(epsilon=0.8), relation)
        assert flip.mechanisms == {afa.PermuteAndFlip(0.8): 1}
        assert flip.delta(0.32) == pytest.approx(1 - math.exp((0.32 - 0.8) / 2), rel=1e-9)
        exponential = from_dp_event(newer_events.ExponentialMechanismDpEvent(epsilon=0.8), relation)
        assert exponential.mechanisms == {afa.ExponentialMechanism(0.8): 1}
        bounded_range = (1 - math.exp((0.32 - 0.8) / 2)) ** 2 / -math.expm1(-0.8)
        assert exponential.delta(0.32) == pytest.approx(bounded_range, rel=1e-9)
        assert bounded_range < 1 - math.exp((0.32 - 0.8) / 2) < pure_dp_delta(0.32, 0.8)
        for accountant, cls in ((flip, newer_events.PermuteAndFlipDpEvent),
                                (exponential, newer_events.ExponentialMechanismDpEvent)):
            assert to_dp_event(accountant) == cls(epsilon=0.8)
            assert to_neighboring_relation(accountant) == relation
    for cls in (newer_events.ExponentialMechanismDpEvent, newer_events.PermuteAndFlipDpEvent):
        assert not from_dp_event(cls(epsilon=0.0)).mechanisms
    # Beyond ExponentialMechanism's range the pure epsilon-DP pair (Google DP team 2025, Sec. 3.7) is used.
    assert from_dp_event(newer_events.ExponentialMechanismDpEvent(epsilon=150.0)).mechanisms == {
        afa.ApproxDP(150.0, 0.0): 1}
    discrete = newer_events.DiscreteGaussianDpEvent(sigma=2.0, sensitivity=1.0, dimension=1)
    accountant = from_dp_event(events.SelfComposedDpEvent(discrete, 4))
    assert accountant.mechanisms == {afa.DiscreteGaussian(sigma=2.0): 4}
    with pytest.raises(UnsupportedDpEventError, match=r"DiscreteGaussianDpEvent.*dimension=None"):
        from_dp_event(newer_events.DiscreteGaussianDpEvent(sigma=2.0))
    with pytest.raises(UnsupportedDpEventError, match="dimension=3"):
        from_dp_event(newer_events.DiscreteGaussianDpEvent(sigma=2.0, dimension=3))
    with pytest.raises(ValueError, match="sensitivity must be an integer"):
        from_dp_event(newer_events.DiscreteGaussianDpEvent(sigma=2.0, sensitivity=1.5, dimension=1))
    assert from_dp_event(newer_events.EpsilonDeltaDpEvent(epsilon=math.inf, delta=0.0)).epsilon(0.5) == math.inf


def test_non_private_and_no_op():
    for event in (events.NonPrivateDpEvent(), events.GaussianDpEvent(0.0), events.LaplaceDpEvent(0.0),
                  events.PoissonSampledDpEvent(1.0, events.GaussianDpEvent(0.0))):
        accountant = from_dp_event(events.ComposedDpEvent([events.GaussianDpEvent(5.0), event]))
        assert accountant.epsilon(1e-3) == math.inf and accountant.delta(10.0) == 1.0
    assert not from_dp_event(events.NoOpDpEvent()).mechanisms
    assert not from_dp_event(events.PoissonSampledDpEvent(0.0, events.GaussianDpEvent(1.0))).mechanisms
    # A non-private step on a Poisson sample reveals the record with probability q: delta(eps) = q.
    sampled = from_dp_event(events.PoissonSampledDpEvent(0.01, events.NonPrivateDpEvent()))
    assert sampled.delta(3.0) == pytest.approx(0.01, rel=1e-12)


def test_counts_multiply_and_merge():
    gaussian = events.GaussianDpEvent(3.0)
    tree = events.SelfComposedDpEvent(
        events.ComposedDpEvent([gaussian, events.SelfComposedDpEvent(gaussian, 3), events.LaplaceDpEvent(2.0)]),
        10 ** 6)
    accountant = from_dp_event(tree)
    assert accountant.mechanisms == {afa.Gaussian(3.0): 4 * 10 ** 6, afa.Laplace(2.0): 10 ** 6}
    assert not from_dp_event(events.SelfComposedDpEvent(gaussian, 0)).mechanisms


def test_poisson_sampled():
    step = events.PoissonSampledDpEvent(0.02, events.GaussianDpEvent(1.5))
    accountant = from_dp_event(events.SelfComposedDpEvent(step, 200))
    assert accountant.mechanisms == {afa.Gaussian(1.5).poisson_subsampled(0.02): 200}
    for base, mechanism in [(events.LaplaceDpEvent(2.0), afa.Laplace(2.0)),
                            (events.DiscreteLaplaceDpEvent(0.5, 1), afa.DiscreteLaplace(0.5))]:
        assert from_dp_event(events.PoissonSampledDpEvent(0.1, base)).mechanisms == \
            {mechanism.poisson_subsampled(0.1): 1}
    # Gaussians composed on one sample: one Gaussian of noise multiplier (sum k_i / s_i^2)^(-1/2).
    inner = events.ComposedDpEvent([events.GaussianDpEvent(2.0), events.SelfComposedDpEvent(events.GaussianDpEvent(4.0), 4)])
    (mechanism,) = from_dp_event(events.PoissonSampledDpEvent(0.1, inner)).mechanisms
    assert mechanism.base.sigma == pytest.approx((1 / 4 + 4 / 16) ** -0.5) and mechanism.sampling_rate == 0.1
    substitution = from_dp_event(step, Rel.REPLACE_ONE)
    assert substitution.mechanisms == {afa.Gaussian(1.5).poisson_subsampled(0.02): 1}
    assert substitution.neighboring == "substitution"
    assert from_dp_event(events.PoissonSampledDpEvent(1.0, events.GaussianDpEvent(1.5)), Rel.REPLACE_ONE).mechanisms \
        == {afa.Gaussian(1.5, sensitivity=2.0): 1}


def test_sampled_without_replacement():
    event = events.SampledWithoutReplacementDpEvent(1000, 50, events.GaussianDpEvent(2.0))
    accountant = from_dp_event(events.SelfComposedDpEvent(event, 20))
    # The base is read as a replacement: shift 2C.
    assert accountant.mechanisms == {afa.Gaussian(2.0, sensitivity=2.0).subset_subsampled(0.05): 20}
    with pytest.raises(UnsupportedDpEventError, match="SampledWithoutReplacementDpEvent.*add_remove"):
        from_dp_event(event, Rel.REPLACE_ONE)


@pytest.mark.parametrize("steps, depth", [(1, 1), (2, 2), (3, 2), (4, 3), ([3, 7], 3), (0, 0)])
def test_tree_aggregation(steps, depth):
    event = events.SingleEpochTreeAggregationDpEvent(1.5, steps)
    accountant = from_dp_event(events.SelfComposedDpEvent(event, 5), Rel.REPLACE_SPECIAL)
    if depth == 0:
        assert not accountant.mechanisms
        return
    assert accountant.epsilon(1e-6) == pytest.approx(gaussian_epsilon(1e-6, math.sqrt(5 * depth) / 1.5), rel=1e-9)
    with pytest.raises(UnsupportedDpEventError, match="REPLACE_SPECIAL"):
        from_dp_event(event, Rel.ADD_OR_REMOVE_ONE)


# ---------------------------------------------------------------------------
# refusals and bad input
# ---------------------------------------------------------------------------

class HomemadeDpEvent(events.DpEvent):
    pass


@pytest.mark.parametrize("event, name", [
    (events.ZCDpEvent(0.1), "ZCDpEvent"),
    (events.UnsupportedDpEvent(), "UnsupportedDpEvent"),
    (events.RepeatAndSelectDpEvent(events.GaussianDpEvent(1.0), 3.0, 1.0), "RepeatAndSelectDpEvent"),
    (events.SampledWithReplacementDpEvent(100, 10, events.GaussianDpEvent(1.0)), "SampledWithReplacementDpEvent"),
    (HomemadeDpEvent(), "HomemadeDpEvent"),
])
def test_refused_names_type_and_path(event, name):
    tree = events.ComposedDpEvent([events.GaussianDpEvent(1.0), events.NoOpDpEvent(),
                                   events.SelfComposedDpEvent(event, 3)])
    with pytest.raises(UnsupportedDpEventError) as caught:
        from_dp_event(tree)
    path = f"ComposedDpEvent.events[2] -> SelfComposedDpEvent.event -> {name}"
    assert caught.value.path == path and path in str(caught.value) and caught.value.event is event
    assert not AfaPrivacyAccountant().supports(tree)
    with pytest.raises(dp_accounting.UnsupportedEventError, match=name):
        AfaPrivacyAccountant().compose(tree)


@pytest.mark.parametrize("event, relation, match", [
    (events.RandomizedResponseDpEvent(0.5, 2), Rel.ADD_OR_REMOVE_ONE, "REPLACE_ONE and REPLACE_SPECIAL"),
    (events.MixtureOfGaussiansDpEvent(1.0, [1.0], [1.0]), Rel.REPLACE_ONE, "adding or removing"),
    (events.MixtureOfGaussiansDpEvent(1.0, [1.0], [1.0]), Rel.REPLACE_SPECIAL,
     "MixtureOfGaussians declares no dominating pair under neighboring='replace_special'"),
    (events.PoissonSampledDpEvent(0.1, events.GaussianDpEvent(1.0)), Rel.REPLACE_SPECIAL, "REPLACE_SPECIAL"),
    (events.PoissonSampledDpEvent(0.1, events.LaplaceDpEvent(1.0)), Rel.REPLACE_ONE, "Gaussian base only"),
    (events.PoissonSampledDpEvent(0.1, events.ComposedDpEvent([events.GaussianDpEvent(1.0), events.LaplaceDpEvent(1.0)])),
     Rel.ADD_OR_REMOVE_ONE, "one mechanism"),
])
def test_refused_under_relation(event, relation, match):
    with pytest.raises(UnsupportedDpEventError, match=match):
        from_dp_event(event, relation)
    assert not AfaPrivacyAccountant(relation).supports(event)


@pytest.mark.parametrize("event, error, match", [
    (events.SelfComposedDpEvent(events.GaussianDpEvent(1.0), -1), ValueError, r"SelfComposedDpEvent: count .*>= 0"),
    (events.SelfComposedDpEvent(events.GaussianDpEvent(1.0), 2.5), TypeError, "count must be an integer"),
    (events.GaussianDpEvent(-1.0), ValueError, r"GaussianDpEvent: noise_multiplier must be in \[0"),
    (events.GaussianDpEvent(math.nan), ValueError, "noise_multiplier"),
    (events.PoissonSampledDpEvent(1.5, events.GaussianDpEvent(1.0)), ValueError, "sampling_probability"),
    (events.RandomizedResponseDpEvent(1.2, 3), ValueError, "noise_parameter"),
    (events.SampledWithoutReplacementDpEvent(10, 20, events.GaussianDpEvent(1.0)), ValueError, "sample_size"),
    (events.SingleEpochTreeAggregationDpEvent(1.0, []), ValueError, "step_counts"),
    (events.SelfComposedDpEvent(events.GaussianDpEvent(1.0), 2 ** 53 + 1), ValueError, "2\\*\\*53"),
])
def test_bad_parameters(event, error, match):
    relation = Rel.REPLACE_SPECIAL if isinstance(event, events.SingleEpochTreeAggregationDpEvent) else \
        Rel.REPLACE_ONE if isinstance(event, events.RandomizedResponseDpEvent) else Rel.ADD_OR_REMOVE_ONE
    with pytest.raises(error, match=match):
        from_dp_event(event, relation)


def test_bad_arguments():
    with pytest.raises(TypeError, match="expected a dp_accounting DpEvent"):
        from_dp_event("gaussian")
    with pytest.raises(ValueError, match="neighboring must be one of"):
        from_dp_event(events.GaussianDpEvent(1.0), "replace_one")
    with pytest.raises(ValueError, match="count must be an integer >= 0"):
        AfaPrivacyAccountant().compose(events.GaussianDpEvent(1.0), -2)
    assert not AfaPrivacyAccountant().supports(events.GaussianDpEvent(-1.0))
    with pytest.raises(ValueError, match="method must be one of"):
        AfaPrivacyAccountant(method="fft")
    with pytest.raises(TypeError, match="NeighboringRelation"):
        AfaPrivacyAccountant("add_remove")
    with pytest.raises(TypeError, match="afa.Accountant or an afa.Mechanism"):
        to_dp_event(events.GaussianDpEvent(1.0))


# ---------------------------------------------------------------------------
# afa -> event, round trips
# ---------------------------------------------------------------------------

ROUND_TRIP = [
    ("add_remove", afa.Gaussian(sigma=3.0, sensitivity=1.5), 7),
    ("substitution", afa.Gaussian(sigma=3.0, sensitivity=1.5), 7),
    ("add_remove", afa.Laplace(scale=2.0, sensitivity=0.5), 3),
    ("substitution", afa.Laplace(scale=2.0), 3),
    ("add_remove", afa.DiscreteLaplace(a=0.6, sensitivity=3), 2),
    ("substitution", afa.DiscreteLaplace(a=0.6, sensitivity=4), 2),
    ("substitution", afa.RandomizedResponse(p=0.7), 5),
    ("substitution", afa.KaryRandomizedResponse(k=4, p=0.55), 5),
    ("add_remove", afa.KaryRandomizedResponse(k=4, p=0.55), 5),
    ("add_remove", afa.MixtureOfGaussians((0.0, 1.0), (0.5, 0.5), 1.5), 2),
    ("add_remove", afa.Gaussian(1.2).poisson_subsampled(0.05), 40),
    ("substitution", afa.Gaussian(1.2).poisson_subsampled(0.05), 40),
    ("add_remove", afa.Laplace(1.5).poisson_subsampled(0.1), 10),
    ("add_remove", afa.DiscreteLaplace(0.8).poisson_subsampled(0.2), 10),
    ("add_remove", afa.Gaussian(1.2, sensitivity=2.0).subset_subsampled(0.05), 40),
    ("add_remove", afa.KaryRandomizedResponse(k=3, p=0.6).subset_subsampled(0.25), 4),
    ("add_remove", afa.ApproxDP(epsilon=0.0, delta=1.0), 1),
    ("replace_special", afa.KaryRandomizedResponse(k=4, p=0.55), 5),
    ("replace_special", afa.Laplace(scale=2.0, sensitivity=0.5), 3),
    ("replace_special", afa.DiscreteLaplace(a=0.6, sensitivity=3), 2),
]


@pytest.mark.parametrize("relation, mechanism, count", ROUND_TRIP)
def test_afa_event_afa(relation, mechanism, count):
    accountant = afa.Accountant(relation).compose(mechanism, count).compose(afa.Gaussian(20.0), 2)
    event = to_dp_event(accountant)
    back = from_dp_event(event, to_neighboring_relation(accountant))
    # An add_remove accountant holding k-RR (whose add_remove pair is the replace-special one) is written under
    # REPLACE_SPECIAL and read back as a replace_special accountant with the same pairs.
    special = to_neighboring_relation(accountant) == Rel.REPLACE_SPECIAL
    assert back.neighboring == ("replace_special" if special else accountant.neighboring)
    assert sorted(back.mechanisms.values()) == sorted(accountant.mechanisms.values())
    if back.mechanisms == accountant.mechanisms:
        for epsilon in (0.0, 0.7):  # the same composition: the same answers
            assert back.delta(epsilon) == accountant.delta(epsilon)
        return
    for epsilon in (0.0, 0.7):
        assert back.delta(epsilon) == pytest.approx(accountant.delta(epsilon), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("relation", [Rel.ADD_OR_REMOVE_ONE, Rel.REPLACE_ONE])
def test_event_afa_event(relation):
    trees = [events.GaussianDpEvent(1.3), events.SelfComposedDpEvent(events.LaplaceDpEvent(2.0), 9),
             events.ComposedDpEvent([events.SelfComposedDpEvent(events.GaussianDpEvent(1.0), 1000),
                                     events.DiscreteLaplaceDpEvent(0.5, 1)]),
             events.NonPrivateDpEvent(), events.NoOpDpEvent()]
    if relation == Rel.ADD_OR_REMOVE_ONE:
        trees += [events.SelfComposedDpEvent(events.PoissonSampledDpEvent(0.01, events.GaussianDpEvent(1.0)), 100),
                  events.PoissonSampledDpEvent(0.1, events.DiscreteLaplaceDpEvent(0.5, 2)),
                  events.SampledWithoutReplacementDpEvent(20, 1, events.GaussianDpEvent(2.0)),
                  events.MixtureOfGaussiansDpEvent(1.0, [0.0, 2.0], [0.25, 0.75])]
    else:
        trees += [events.PoissonSampledDpEvent(0.01, events.GaussianDpEvent(1.0)),
                  events.RandomizedResponseDpEvent(0.5, 2)]
    for tree in trees:
        assert to_dp_event(from_dp_event(tree, relation)) == tree
    # A fixed-size subset keeps its rate, in lowest terms.
    subset = events.SampledWithoutReplacementDpEvent(200, 10, events.GaussianDpEvent(2.0))
    if relation == Rel.ADD_OR_REMOVE_ONE:
        assert to_dp_event(from_dp_event(subset, relation)) == attr.evolve(subset, source_dataset_size=20, sample_size=1)


def test_event_afa_event_randomized_response():
    for relation in (Rel.REPLACE_ONE, Rel.REPLACE_SPECIAL):
        accountant = from_dp_event(events.RandomizedResponseDpEvent(0.3, 5), relation)
        event = to_dp_event(accountant)
        assert to_neighboring_relation(accountant) == relation
        assert event.num_buckets == 5 and event.noise_parameter == pytest.approx(0.3, rel=1e-12)


def test_to_dp_event_refusals(newer_events):
    for mechanism, relation, match in [
        (afa.ProposeTestRelease(epsilon=1.0, delta=1e-6), "add_remove", "ProposeTestRelease"),
        (afa.DataDependentGaussian(1.0, 1.5, 1.0), "add_remove", "DataDependentGaussian"),
        (afa.DiscreteMechanism((0.5, 0.5), (0.25, 0.75)), "add_remove", "DiscreteMechanism"),
        (afa.RandomizedResponse(0.7), "add_remove", "REPLACE_ONE only"),
        (afa.DiscreteLaplace(0.5, sensitivity=3), "substitution", "odd sensitivity"),
        (afa.MixtureOfGaussians((1.0,), (1.0,), 1.0), "substitution", "add/remove only"),
        (afa.RandomizedResponse(0.7).poisson_subsampled(0.1), "add_remove", "Poisson-subsampled randomized"),
    ]:
        with pytest.raises(UnsupportedDpEventError, match=match):
            to_dp_event(afa.Accountant(relation).compose(mechanism))
    mixed = afa.Accountant().compose(afa.KaryRandomizedResponse(3, 0.5)).compose(afa.Gaussian(1.0).poisson_subsampled(0.1))
    with pytest.raises(UnsupportedDpEventError, match="no one dp_accounting relation"):
        to_neighboring_relation(mixed)
    assert to_dp_event(afa.ApproxDP(1.0, 1e-6)) == newer_events.EpsilonDeltaDpEvent(epsilon=1.0, delta=1e-6)
    assert to_dp_event(afa.DiscreteGaussian(2.0)) == newer_events.DiscreteGaussianDpEvent(2.0, 1.0, 1)


@pytest.mark.skipif(hasattr(events, "EpsilonDeltaDpEvent"), reason="this dp_accounting has EpsilonDeltaDpEvent")
def test_to_dp_event_missing_class():
    with pytest.raises(UnsupportedDpEventError, match="no EpsilonDeltaDpEvent"):
        to_dp_event(afa.ApproxDP(1.0, 1e-6))


# ---------------------------------------------------------------------------
# AfaPrivacyAccountant inside dp_accounting
# ---------------------------------------------------------------------------

def test_accountant_matches_afa():
    event = events.ComposedDpEvent([events.SelfComposedDpEvent(events.GaussianDpEvent(4.0), 30),
                                    events.LaplaceDpEvent(5.0)])
    accountant = AfaPrivacyAccountant().compose(event).compose(events.GaussianDpEvent(4.0), 10)
    direct = afa.Accountant().compose(afa.Gaussian(4.0), 40).compose(afa.Laplace(5.0))
    assert accountant.accountant.mechanisms == direct.mechanisms
    assert accountant.get_epsilon(1e-6) == direct.epsilon(1e-6)
    assert accountant.get_delta(1.0) == direct.delta(1.0)
    assert isinstance(accountant.ledger, events.ComposedDpEvent)
    empty = AfaPrivacyAccountant()
    assert empty.get_epsilon(1e-5) == 0.0 and empty.get_delta(0.5) == 0.0
    assert AfaPrivacyAccountant().compose(events.NonPrivateDpEvent()).get_epsilon(1e-5) == math.inf
    certified = AfaPrivacyAccountant(method="pld").compose(events.SelfComposedDpEvent(events.GaussianDpEvent(4.0), 40))
    assert certified.get_epsilon(1e-6) >= gaussian_epsilon(1e-6, math.sqrt(40) / 4.0)
    replace = AfaPrivacyAccountant(Rel.REPLACE_ONE).compose(events.GaussianDpEvent(4.0))
    assert replace.get_delta(0.5) == pytest.approx(gaussian_delta(0.5, 2 / 4.0), rel=1e-9)


def test_calibrate_dp_mechanism():
    steps, target_epsilon, target_delta = 100, 2.0, 1e-5
    multiplier = dp_accounting.calibrate_dp_mechanism(
        make_fresh_accountant=AfaPrivacyAccountant,
        make_event_from_param=lambda sigma: events.SelfComposedDpEvent(events.GaussianDpEvent(sigma), steps),
        target_epsilon=target_epsilon, target_delta=target_delta)
    epsilon = afa.Accountant().compose(afa.Gaussian(multiplier), steps).epsilon(target_delta)
    assert epsilon <= target_epsilon
    assert gaussian_epsilon(target_delta, math.sqrt(steps) / multiplier) <= target_epsilon
    assert epsilon == pytest.approx(target_epsilon, abs=1e-4)  # the smallest noise meeting it, to the tolerance


@pytest.mark.slow
def test_calibrate_dp_sgd():
    target_epsilon, target_delta = 1.0, 1e-5
    multiplier = dp_accounting.calibrate_dp_mechanism(
        make_fresh_accountant=AfaPrivacyAccountant,
        make_event_from_param=lambda sigma: events.SelfComposedDpEvent(
            events.PoissonSampledDpEvent(0.01, events.GaussianDpEvent(sigma)), 500),
        target_epsilon=target_epsilon, target_delta=target_delta, tol=1e-4)
    accountant = afa.Accountant().compose(afa.Gaussian(multiplier).poisson_subsampled(0.01), 500)
    assert accountant.epsilon(target_delta) <= target_epsilon + 1e-9


# ---------------------------------------------------------------------------
# DP-SGD rows inside dp_accounting's own pessimistic/optimistic PLD bracket
# ---------------------------------------------------------------------------

DP_SGD = [(0.01, 1.0, 1000), (256 / 60000, 1.1, 14063)]
DELTAS = (1e-5, 1e-8, 1e-10)


def dp_accounting_bracket(q: float, sigma: float, steps: int) -> list[tuple[float, float]]:
    """(optimistic, pessimistic) eps at each of DELTAS from dp_accounting's PLD (grid 1e-4, its default)."""
    return dp_accounting_epsilon_bracket(sigma, q, steps, DELTAS)


@pytest.mark.parametrize("q, sigma, steps", DP_SGD)
def test_dp_sgd_inside_dp_accounting_bracket(q, sigma, steps):
    event = events.SelfComposedDpEvent(events.PoissonSampledDpEvent(q, events.GaussianDpEvent(sigma)), steps)
    accountant = AfaPrivacyAccountant().compose(event)
    for delta, (optimistic, pessimistic) in zip(DELTAS, dp_accounting_bracket(q, sigma, steps)):
        epsilon = accountant.get_epsilon(delta)
        assert optimistic <= epsilon <= pessimistic, (delta, optimistic, epsilon, pessimistic)
