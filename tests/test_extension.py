"""Mechanisms defined outside afa: a class implementing ``dominating_pair`` is answered by every engine
that serves its kind of pair, without touching afa's code.

References: brute-force enumeration of the composed finite pair with mpmath (the hockey-stick divergence
summed over every output tuple), and the exact formula for composed Gaussian mechanisms (Sommer, Meiser &
Mohammadi 2019, Thm 5), which a Gaussian-noise pair declared by hand must reproduce.
"""

import itertools
import math
from dataclasses import dataclass
from typing import ClassVar

import mpmath
import numpy as np
import pytest

import afa
from afa.mechanisms.noise_pair import NoiseMixturePair
from afa.mechanisms.pairs import FinitePair, QuadraticGaussianPair
from afa.numerics import exact


@dataclass(frozen=True)
class ThreeWayVote(afa.Mechanism):
    """A user's mechanism: report one of three answers with probabilities that depend on the record."""

    type_name: ClassVar[str] = "test_three_way_vote"
    lean: float

    def dominating_pair(self, neighboring):
        p = (0.5 + self.lean, 0.3, 0.2 - self.lean)
        return FinitePair.from_pmfs(p, p[::-1])


@dataclass(frozen=True)
class ShiftedGaussian(afa.Mechanism):
    """A user's Gaussian mechanism, declared only through its pair of noise distributions."""

    sigma: float

    def dominating_pair(self, neighboring):
        return NoiseMixturePair("gaussian", self.sigma, (1.0,), (0.0,), (0.0,), (0.0,))


def brute_force_delta(p, q, count: int, epsilon: float) -> float:
    """max(H_{e^eps}(P^k || Q^k), H_{e^eps}(Q^k || P^k)) by enumerating every output tuple at 40 digits."""
    mpmath.mp.dps = 40
    p, q = [mpmath.mpf(x) for x in p], [mpmath.mpf(x) for x in q]
    factor = mpmath.exp(mpmath.mpf(epsilon))
    forward = backward = mpmath.mpf(0)
    for outputs in itertools.product(range(len(p)), repeat=count):
        a = mpmath.fprod(p[i] for i in outputs)
        b = mpmath.fprod(q[i] for i in outputs)
        forward += max(a - factor * b, 0)
        backward += max(b - factor * a, 0)
    return float(max(forward, backward))


@pytest.mark.parametrize("epsilon", [0.0, 0.5, 2.0])
def test_a_user_finite_pair_by_every_engine_that_serves_it(epsilon):
    mechanism = ThreeWayVote(0.1)
    p = (0.6, 0.3, 0.1)
    truth = brute_force_delta(p, p[::-1], 5, epsilon)
    accountant = afa.Accountant().compose(mechanism, 5)
    for method in ("auto", "exact", "pld"):
        result = accountant.delta_result(epsilon, method=method)
        assert result.lower - 1e-15 <= truth <= result.upper + 1e-15, (method, result, truth)
    assert accountant.delta_result(epsilon, method="exact").error <= 1e-12


def test_a_user_finite_pair_subsampled():
    """Poisson subsampling transforms the pair: remove (A, Q), add (Q, A) with A = (1 - q) Q + q P
    (Zhu, Dong & Wang 2022, Thm 11(1)); enumerated here directly from that definition."""
    q_rate = 0.25
    p = np.array([0.6, 0.3, 0.1])
    q = p[::-1]
    mixture = (1 - q_rate) * q + q_rate * p
    truth = brute_force_delta(mixture, q, 4, 0.3)
    result = afa.Accountant().compose(ThreeWayVote(0.1).poisson_subsampled(q_rate), 4).delta_result(0.3)
    assert result.lower - 1e-15 <= truth <= result.upper + 1e-15


@pytest.mark.parametrize("method", ["auto", "contour", "quadrature", "pld"])
def test_a_user_noise_pair_matches_the_gaussian_formula(method):
    sigma, count, delta = 2.0, 30, 1e-6
    mu = math.sqrt(count) / sigma
    truth = exact.gaussian_epsilon(delta, mu)
    result = afa.Accountant().compose(ShiftedGaussian(sigma), count).epsilon_result(delta, method=method)
    assert result.lower - 1e-9 * truth <= truth <= result.upper + 1e-9 * truth, (method, result, truth)
    assert result.upper - result.lower <= 1e-3 * truth


def test_a_user_noise_pair_subsampled_matches_afa_s_own_subsampled_gaussian():
    """Subsampling reads the base's pair: a hand-declared Gaussian pair is subsampled exactly like afa's
    Gaussian (the same mixture, so the same numbers)."""
    own = afa.Accountant().compose(afa.Gaussian(2.0).poisson_subsampled(0.05), 50).epsilon_result(1e-6)
    user = afa.Accountant().compose(ShiftedGaussian(2.0).poisson_subsampled(0.05), 50).epsilon_result(1e-6)
    assert user.lower <= own.upper and own.lower <= user.upper


def test_a_mechanism_without_a_pair_is_refused_clearly():
    @dataclass(frozen=True)
    class Nothing(afa.Mechanism):
        x: float = 1.0

    with pytest.raises(TypeError, match="dominating_pair"):
        afa.Accountant().compose(Nothing())


def test_bad_finite_pairs_name_the_problem():
    with pytest.raises(ValueError, match="sum to 1"):
        FinitePair.from_pmfs([0.5, 0.4], [0.5, 0.5])
    with pytest.raises(ValueError, match="one length"):
        FinitePair.from_pmfs([0.5, 0.5], [1.0])
    far = NoiseMixturePair("gaussian", 1e-4, (1.0, 0.0), (math.log(0.5), math.log(0.5)), (0.0,), (0.0,))
    with pytest.raises(ValueError, match="noise scales"):
        afa.mechanisms.pairs.privacy_losses(far)
    mixture = NoiseMixturePair("gaussian", 1.0, (1.0, 0.0), (math.log(0.5), math.log(0.5)), (0.0,), (0.0,))
    for order in (1, 2.5, True):
        with pytest.raises((ValueError, TypeError), match="quadrature_order"):
            afa.mechanisms.pairs.privacy_losses(mixture, quadrature_order=order)


@dataclass(frozen=True)
class ShiftedLaplace(afa.Mechanism):
    """A user's Laplace mechanism, declared only through its pair."""

    scale: float

    def dominating_pair(self, neighboring):
        return NoiseMixturePair("laplace", self.scale, (1.0,), (0.0,), (0.0,), (0.0,))


@dataclass(frozen=True)
class TwoScales(afa.Mechanism):
    """A user's Gaussian mechanism whose noise scale depends on the record."""

    def dominating_pair(self, neighboring):
        return QuadraticGaussianPair(1.0, 1.5, 1.0)


def test_a_user_pair_of_a_closed_form_shape_gets_the_closed_form():
    """Pairs are read by shape, not by the class that declared them: a hand-declared Gaussian pair 1e4 noise
    scales apart (beyond what quadrature over the output covers) matches the Gaussian formula; Laplace and
    two-scale Gaussian pairs give afa's own mechanisms' numbers exactly."""
    mu = 1e4
    result = afa.Accountant().compose(ShiftedGaussian(1 / mu)).epsilon_result(1e-6)
    truth = exact.gaussian_epsilon(1e-6, mu)
    assert result.lower - 1e-12 * truth <= truth <= result.upper + 1e-12 * truth
    for user, own in ((ShiftedLaplace(0.5), afa.Laplace(0.5)),
                      (TwoScales(), afa.DataDependentGaussian(1.0, 1.5, 1.0))):
        for relation in ("add_remove", "substitution"):
            mine = afa.Accountant(neighboring=relation).compose(user, 7)
            theirs = afa.Accountant(neighboring=relation).compose(own, 7)
            assert mine.epsilon_result(1e-6) == theirs.epsilon_result(1e-6)
            assert mine.delta_result(1.0) == theirs.delta_result(1.0)


def test_a_two_scale_pair_is_one_use_of_the_exact_formula():
    """One use: delta(eps) of (N(0, 1), N(1, 1.5^2)), the larger of its two directions, against their exact
    integrals (afa.numerics.exact.data_dependent_gaussian_delta, Zhu, Dong & Wang 2022, App. A Example 15)."""
    accountant = afa.Accountant().compose(TwoScales())
    for epsilon in (0.0, 0.5, 2.0):
        truth = max(exact.data_dependent_gaussian_delta(epsilon, 1.0, 1.5, 1.0, direction)
                    for direction in ("remove", "add"))
        result = accountant.delta_result(epsilon)
        assert result.lower - 1e-12 * truth <= truth <= result.upper + 1e-12 * truth


def test_a_two_scale_pair_is_validated_and_not_subsampled():
    with pytest.raises(ValueError, match="sigma_p"):
        QuadraticGaussianPair(0.0, 1.0)
    with pytest.raises(ValueError, match="shift"):
        QuadraticGaussianPair(1.0, 1.0, -1.0)
    with pytest.raises(ValueError, match="subsampling is implemented for"):
        afa.Accountant().compose(TwoScales().poisson_subsampled(0.1)).delta(1.0)


@dataclass(frozen=True)
class Indistinguishable(afa.Mechanism):
    """A user's mechanism whose two noise distributions coincide: a zero shift, or two equal scales."""

    quadratic: bool

    def dominating_pair(self, neighboring):
        if self.quadratic:
            return QuadraticGaussianPair(1.3, 1.3, 0.0)
        return NoiseMixturePair("gaussian", 1.3, (0.0,), (0.0,), (0.0,), (0.0,))


@pytest.mark.parametrize("quadratic", [False, True])
def test_a_pair_with_p_equal_to_q_is_perfectly_private(quadratic):
    """P = Q: the hockey-stick divergence H_{e^eps}(P || P) = sum (1 - e^eps)_+ P = 0 for every eps >= 0, so
    delta(eps) = 0 and eps(delta) = 0 at any delta, composed any number of times (at eps = 0 the bound may
    carry the rounding of the loss's position, a few ulps per use)."""
    accountant = afa.Accountant().compose(Indistinguishable(quadratic), 1000)
    for epsilon in (0.0, 1.0):
        result = accountant.delta_result(epsilon)
        assert result.value == result.lower == 0.0
        assert result.upper <= 1000 * 16 * np.finfo(float).eps
    assert accountant.delta_result(1.0).upper == 0.0
    assert accountant.epsilon_result(1e-10).upper == 0.0
