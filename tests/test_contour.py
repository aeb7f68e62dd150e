"""The contour-shifted inversion: relative accuracy of delta down to 1e-300.

Ground truth: afa.numerics.exact (composed Gaussian in log space, checked against
50-digit mpmath in test_exact.py; the discrete x Gaussian mixture for
Zhu, Dong & Wang 2022, Exp 2).  The contour engine shares nothing with either but the
mechanisms' log-CF templates.
"""

import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import afa
from afa.mechanisms.privacy_loss import PrivacyLoss
from afa.numerics import exact

# (sigma, count) with mu = sqrt(count) / sigma from 0.01 to 1000 and counts up to 10^12.
GAUSSIANS = [(100.0, 1), (10.0, 1), (1.0, 1), (1e6, 10**12), (1.0, 100), (0.01, 100), (1e3, 10**12)]


@pytest.mark.parametrize("sigma,count", GAUSSIANS)
def test_gaussian_delta_is_relatively_accurate_to_1e_300(sigma, count):
    mu = math.sqrt(count) / sigma
    acc = afa.Accountant().compose(afa.Gaussian(sigma), times=count)
    epsilons = np.linspace(0.0, exact.gaussian_epsilon(1e-300, mu), 13)
    profile = acc.privacy_profile(epsilons, method="contour")
    truth = exact.gaussian_delta(epsilons, mu)
    assert np.min(truth) < 1e-290  # the grid really reaches the bottom of the double range
    assert np.max(np.abs(profile / truth - 1)) <= 1e-10


@pytest.mark.parametrize("sigma,count", GAUSSIANS)
@pytest.mark.parametrize("delta", [1e-5, 1e-30, 1e-100, 1e-300])
def test_gaussian_epsilon_is_relatively_accurate(sigma, count, delta):
    mu = math.sqrt(count) / sigma
    result = afa.Accountant().compose(afa.Gaussian(sigma), times=count).epsilon_result(delta, method="contour")
    truth = exact.gaussian_epsilon(delta, mu)
    assert result.value == pytest.approx(truth, rel=1e-10)
    assert result.lower * (1 - 1e-12) <= truth <= result.upper * (1 + 1e-12)  # containment


def test_exp2_composition_down_to_1e_30():
    acc = afa.Accountant().compose(afa.Gaussian(5.0), times=500).compose(afa.RandomizedResponse(0.52), times=500)
    epsilons = np.array([0.0, 2.0, 10.0, 30.0, 50.0, exact_epsilon := acc.epsilon(1e-30, method="exact")])
    contour = acc.privacy_profile(epsilons, method="contour")
    truth = acc.privacy_profile(epsilons, method="exact")
    assert truth[-1] == pytest.approx(1e-30, rel=1e-9)
    assert np.max(np.abs(contour / truth - 1)) <= 1e-10
    assert acc.epsilon(1e-30, method="contour") == pytest.approx(exact_epsilon, rel=1e-10)


def test_contour_and_real_line_agree_where_both_are_valid():
    acc = afa.Accountant().compose(afa.Gaussian(3.0), times=10).compose(afa.Laplace(4.0), times=5)
    for eps in (0.0, 1.0, 2.5, 4.0):
        contour, real_line = acc.delta_result(eps, method="contour"), acc.delta_result(eps, method="quadrature")
        assert abs(contour.value - real_line.value) <= real_line.error + contour.error


def test_contour_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="no continuous part"):
        afa.Accountant().compose(afa.RandomizedResponse(0.7)).delta(1.0, method="contour")
    with pytest.raises(ValueError, match="continue to complex arguments"):
        afa.Accountant().compose(_RealLineOnlyGaussian()).delta(1.0, method="contour")


@dataclasses.dataclass(frozen=True)
class _RealLineOnlyGaussian(afa.Mechanism):
    """The loss N(1/2, 1) given as a numeric log-CF for real t only (log phi = -(t^2 - i t) / 2)."""

    def _losses(self, neighboring):
        loss = PrivacyLoss.numeric("log_phi_real_line_only", lambda t: -0.5 * (np.asarray(t) ** 2 - 1j * np.asarray(t)),
                                   (0.5, 1.0))
        return loss, loss


# -- atoms: the lattice contour (Laplace-type and finite-output compositions) --------------

sys.path.insert(0, str(Path(__file__).parent))
from _reference import laplace_delta_mpmath  # noqa: E402

# eps from delta ~ 1e-3 down to delta ~ 5e-31, on, just below and just above lattice points
# (the top is 100), and inside the small-gap series region (gap < 2 / 102).
LAPLACE_100_EPSILONS = [60.0, 80.0, 90.0, 95.5, 98.0 - 1e-9, 98.0, 98.0 + 1e-9, 99.0, 99.9, 99.99]


@pytest.mark.parametrize("epsilon", LAPLACE_100_EPSILONS)
def test_laplace_x100_delta_is_relatively_accurate_to_1e_30(epsilon):
    truth = laplace_delta_mpmath(epsilon, 100, 1.0)
    result = afa.Accountant().compose(afa.Laplace(1.0), times=100).delta_result(epsilon)
    assert result.method == "contour"  # auto picks it for delta(eps) (the Laplace top series: eps(delta) only)
    assert result.value == pytest.approx(truth, rel=1e-9)
    assert abs(result.value - truth) <= max(result.error, 1e-300)  * 10 + 1e-13 * truth


def test_laplace_x100_reaches_below_1e_30():
    acc = afa.Accountant().compose(afa.Laplace(1.0), times=100)
    epsilon = acc.epsilon(1e-30)
    assert laplace_delta_mpmath(epsilon, 100, 1.0) == pytest.approx(1e-30, rel=1e-9)
    result = acc.epsilon_result(1e-30)
    lower, upper = result.lower, result.upper
    assert laplace_delta_mpmath(lower, 100, 1.0) >= 1e-30 >= laplace_delta_mpmath(upper, 100, 1.0)


@pytest.mark.parametrize("k,scale", [(1, 1.0), (3, 0.5), (7, 2.0)])
def test_laplace_small_compositions_over_the_whole_range(k, scale):
    a = 1.0 / scale
    acc = afa.Accountant().compose(afa.Laplace(scale), times=k)
    epsilons = np.linspace(0.0, k * a * (1 - 1e-6), 9)
    profile = acc.privacy_profile(epsilons, method="contour", estimate=True)
    truth = np.array([laplace_delta_mpmath(e, k, a) for e in epsilons])
    assert np.max(np.abs(profile / truth - 1)) <= 1e-11
    assert np.all(acc.privacy_profile(epsilons, method="contour") >= truth * (1 - 1e-15))  # the upper bounds


def test_laplace_with_finite_output_terms_is_an_average_of_shifted_profiles():
    # delta_{L + D}(eps) = E_D[delta_L(eps - D)] for an independent finite loss D (here one RR use).
    p = 0.6
    xi = math.log(p / (1 - p))
    acc = afa.Accountant().compose(afa.Laplace(2.0), times=4).compose(afa.RandomizedResponse(p))
    for epsilon in (0.0, 1.0, 2.0, 2.3, 2.0 + xi - 1e-3):
        truth = p * laplace_delta_mpmath(epsilon - xi, 4, 0.5) + (1 - p) * laplace_delta_mpmath(epsilon + xi, 4, 0.5)
        result = acc.delta_result(epsilon, method="contour")
        assert result.value == pytest.approx(truth, rel=1e-11, abs=0)
        assert result.lower <= truth * (1 + 1e-15) and truth <= result.upper * (1 + 1e-15)


def test_propose_test_release_composes_as_mass_at_infinity_plus_laplace():
    delta0, k = 1e-8, 20
    acc = afa.Accountant().compose(afa.ProposeTestRelease(epsilon=0.5, delta=delta0), times=k)
    inf_mass = -math.expm1(k * math.log1p(-delta0))
    assert acc.inf_mass["remove"] == pytest.approx(inf_mass, rel=1e-14)
    for epsilon in (0.0, 3.0, 6.0, 9.9):
        truth = inf_mass + (1 - inf_mass) * laplace_delta_mpmath(epsilon, k, 0.5)
        assert acc.delta(epsilon, method="contour") == pytest.approx(truth, rel=1e-11, abs=0)
    assert acc.delta(10.0) == pytest.approx(inf_mass, rel=1e-14)  # beyond the largest finite loss
    assert acc.epsilon(inf_mass * 0.999) == math.inf


def test_lattice_contour_and_real_line_agree_on_mixed_compositions():
    acc = (afa.Accountant().compose(afa.Laplace(1.0), times=3).compose(afa.Laplace(0.7, sensitivity=2.0), times=2)
           .compose(afa.KaryRandomizedResponse(4, 0.5), times=2).compose(afa.ProposeTestRelease(1.0, 1e-6)))
    epsilons = np.array([0.0, 1.0, 3.3, 6.0])
    real_line = acc.privacy_profile(epsilons, method="quadrature", estimate=True)  # stated error about 1e-10 here
    assert np.max(np.abs(acc.privacy_profile(epsilons, method="contour", estimate=True) - real_line)) <= 1e-10


def test_node_chunks_follow_the_envelopes_decay():
    """A node sum's next chunk: where the envelope decays exponentially, about as many nodes as reach the
    tail tolerance (not the doubling); never more than the doubling; the doubling where it does not decay."""
    from afa.engines.contour import MIN_CHUNK, _next_chunk

    u = 0.5 * np.arange(1, 65)
    rate = 0.4
    # log E falls 0.4 per unit of u; 20 nats still to go at spacing 0.5: 100 nodes, 25 % margin, 8 spare.
    chunk = _next_chunk(64, u, -rate * u, 20.0, 0.5)
    assert 100 <= chunk <= 1.25 * 100 + 8
    assert _next_chunk(64, u, -rate * u, 1e3, 0.5) == 128  # far to go: at most twice the last chunk
    assert _next_chunk(64, u, -rate * u, 0.01, 0.5) == MIN_CHUNK  # almost there
    assert _next_chunk(64, u, np.zeros(64), 20.0, 0.5) == 128  # no decay: doubling
    assert _next_chunk(64, u, -u ** 2, 20.0, 0.5) <= 128
