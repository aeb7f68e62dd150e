"""Renyi divergence by analytic continuation of the log-CF, against closed forms.

References (computed here, not by afa):
* Gaussian: D_alpha(N(0, s^2) || N(1, s^2)) = alpha / (2 s^2);
* Laplace: Mironov 2017 (Renyi DP, Table II), eps0 = sensitivity / scale,
  D_alpha = log[(alpha/(2alpha-1)) e^{(alpha-1) eps0} + ((alpha-1)/(2alpha-1)) e^{-alpha eps0}] / (alpha-1),
  and its limit eps0 - 2 log(1 + eps0/2) at alpha = 1/2 (where the formula is 0/0);
* randomized response: log(p^alpha (1-p)^{1-alpha} + (1-p)^alpha p^{1-alpha}) / (alpha - 1);
* two normals: D_alpha(N(m1, a^2) || N(m2, b^2)) = log(b/a) + log(b^2/v)/(2(alpha-1)) + alpha (m1-m2)^2/(2v),
  v = alpha b^2 + (1-alpha) a^2 > 0, +inf otherwise (Zhu, Dong & Wang 2022, App. A Example 15);
* a direct sum over the outputs of a finite pair.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import afa
from afa import renyi_divergence
from afa.mechanisms.privacy_loss import PrivacyLoss


def gaussian_pair(alpha, mean1, sd1, mean2, sd2):
    v = alpha * sd2 ** 2 + (1 - alpha) * sd1 ** 2
    if v <= 0:
        return math.inf
    return (math.log(sd2 / sd1) + math.log(sd2 ** 2 / v) / (2 * (alpha - 1))
            + alpha * (mean1 - mean2) ** 2 / (2 * v))


def mironov_laplace(alpha, eps0):
    if alpha == 0.5:
        return eps0 - 2 * math.log1p(eps0 / 2)
    return math.log(alpha / (2 * alpha - 1) * math.exp((alpha - 1) * eps0)
                    + (alpha - 1) / (2 * alpha - 1) * math.exp(-alpha * eps0)) / (alpha - 1)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0, 40.0])
@pytest.mark.parametrize("alpha", [1e-6, 0.25, 0.5, 1 + 1e-9, 1.5, 2.0, 10.0, 64.0])
def test_gaussian(sigma, alpha):
    assert renyi_divergence(afa.Gaussian(sigma), alpha) == pytest.approx(alpha / (2 * sigma ** 2), rel=1e-12)


def test_gaussian_with_sensitivity_and_substitution():
    mech = afa.Gaussian(2.0, sensitivity=3.0)
    for neighboring in ("add_remove", "substitution"):
        assert renyi_divergence(mech, 4.0, neighboring) == pytest.approx(4.0 * 9 / 8, rel=1e-12)


@pytest.mark.parametrize("alpha", [1.5, 2.0, 10.0, 0.5])
@pytest.mark.parametrize("scale, sensitivity", [(1.0, 1.0), (2.0, 1.0), (0.5, 2.0)])
def test_laplace_matches_mironov(alpha, scale, sensitivity):
    mech = afa.Laplace(scale, sensitivity=sensitivity)
    assert renyi_divergence(mech, alpha) == pytest.approx(mironov_laplace(alpha, sensitivity / scale), rel=1e-12)


def test_laplace_near_the_removable_singularity():
    """alpha = 1/2 is 0/0 in the closed form; nearby orders are continuous through it."""
    values = [renyi_divergence(afa.Laplace(1.0), a) for a in (0.5 - 1e-7, 0.5, 0.5 + 1e-7)]
    assert values[1] == pytest.approx(mironov_laplace(0.5, 1.0), rel=1e-12)
    assert values[0] < values[1] < values[2]
    # the two sides straddle the value at 1/2 symmetrically (smooth through the 0/0 point)
    assert (values[1] - values[0]) == pytest.approx(values[2] - values[1], rel=1e-3)


@pytest.mark.parametrize("p", [0.5, 0.6, 0.75, 0.99])
@pytest.mark.parametrize("alpha", [0.3, 0.5, 2.0, 7.5, 100.0])
def test_randomized_response(p, alpha):
    expected = math.log(p ** alpha * (1 - p) ** (1 - alpha) + (1 - p) ** alpha * p ** (1 - alpha)) / (alpha - 1)
    assert renyi_divergence(afa.RandomizedResponse(p), alpha) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_randomized_response_p_one_is_infinite():
    assert renyi_divergence(afa.RandomizedResponse(1.0), 2.0) == math.inf
    assert renyi_divergence(afa.RandomizedResponse(1.0), 0.5) == math.inf  # mutually singular


def test_discrete_mechanism_takes_the_larger_direction():
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.1, 0.6, 0.3])
    mech = afa.DiscreteMechanism(tuple(p), tuple(q))
    for alpha in (0.5, 2.0, 5.0):
        forward = math.log(np.sum(p ** alpha * q ** (1 - alpha))) / (alpha - 1)
        backward = math.log(np.sum(q ** alpha * p ** (1 - alpha))) / (alpha - 1)
        if alpha != 0.5:  # (D_1/2 is symmetric)
            assert forward != pytest.approx(backward, rel=1e-3)
        assert renyi_divergence(mech, alpha) == pytest.approx(max(forward, backward), rel=1e-12)


def test_approx_dp_is_infinite_above_one():
    mech = afa.ApproxDP(1.0, 1e-6)
    assert renyi_divergence(mech, 2.0) == math.inf
    assert renyi_divergence(mech, 1.0001) == math.inf
    # below 1 the mass at infinity does not count: sum over the finite outputs
    alpha, eps, delta = 0.5, 1.0, 1e-6
    p = np.array([(1 - delta) * math.exp(eps) / (1 + math.exp(eps)), (1 - delta) / (1 + math.exp(eps))])
    expected = math.log(np.sum(p ** alpha * p[::-1] ** (1 - alpha))) / (alpha - 1)
    assert renyi_divergence(mech, alpha) == pytest.approx(expected, rel=1e-12)


def test_data_dependent_gaussian_example_15():
    """sigma1^2 = 2, sigma2^2 = 1: D_alpha(P||Q) = +inf for alpha >= 2 (Zhu, Dong & Wang 2022, App. A Example 15)."""
    mech = afa.DataDependentGaussian(sigma1=math.sqrt(2), sigma2=1.0)
    for alpha in (2.0, 2.5, 10.0, 100.0):
        assert renyi_divergence(mech, alpha) == math.inf
    for alpha in (1.5, 1.9, 0.5, 0.1):
        expected = max(gaussian_pair(alpha, 0, math.sqrt(2), 0, 1.0), gaussian_pair(alpha, 0, 1.0, 0, math.sqrt(2)))
        assert math.isfinite(expected)
        assert renyi_divergence(mech, alpha) == pytest.approx(expected, rel=1e-12)
    assert renyi_divergence(mech, 1.5) == pytest.approx(gaussian_pair(1.5, 0, math.sqrt(2), 0, 1.0), rel=1e-12)


@pytest.mark.parametrize("s1, s2, m", [(1.5, 1.0, 1.0), (1.0, 1.3, 2.0), (1.0, 1.0, 1.0), (3.0, 0.5, 0.2)])
def test_data_dependent_gaussian_with_shift(s1, s2, m):
    mech = afa.DataDependentGaussian(s1, s2, m)
    for alpha in (0.3, 0.5, 1.2, 1.5, 2.0, 3.0, 8.0):
        expected = max(gaussian_pair(alpha, 0, s1, m, s2), gaussian_pair(alpha, m, s2, 0, s1))
        got = renyi_divergence(mech, alpha)
        if math.isinf(expected):
            assert got == math.inf
        else:
            assert got == pytest.approx(expected, rel=1e-12)


def test_data_dependent_gaussian_edge_of_the_strip():
    """The add direction of sigma2 > sigma1 is infinite from alpha = s2^2 / (s2^2 - s1^2) on."""
    mech = afa.DataDependentGaussian(1.0, 2.0, 0.5)  # edge at alpha = 4/3
    assert math.isfinite(renyi_divergence(mech, 4 / 3 - 1e-9))
    assert renyi_divergence(mech, 4 / 3 + 1e-9) == math.inf


def test_mixture_of_gaussians_through_its_pair():
    """One component is the Gaussian pair: D_alpha(N(Delta, sigma^2) || N(0, sigma^2)) = alpha Delta^2 / (2 sigma^2)."""
    assert renyi_divergence(afa.MixtureOfGaussians((0.0, 2.0), (0.0, 1.0), 1.5), 3.0) == pytest.approx(
        3.0 * 4.0 / (2 * 1.5 ** 2), rel=1e-9)


@dataclasses.dataclass(frozen=True)
class _RealLineOnlyGaussian(afa.Mechanism):
    """The loss N(1/2, 1) given as a numeric log-CF for real t only."""

    def _losses(self, neighboring):
        loss = PrivacyLoss.numeric("log_phi_real_line_only", lambda t: -0.5 * (np.asarray(t) ** 2 - 1j * np.asarray(t)),
                                   (0.5, 1.0))
        return loss, loss


def test_real_line_only_log_phi_is_not_supported():
    with pytest.raises(NotImplementedError, match="closed-form"):
        renyi_divergence(_RealLineOnlyGaussian(), 2.0)


@pytest.mark.parametrize("alpha", [1.0, 0.0, -1.0, math.nan, math.inf])
def test_bad_alpha_names_the_parameter(alpha):
    with pytest.raises(ValueError, match="alpha"):
        renyi_divergence(afa.Gaussian(1.0), alpha)


def test_bad_arguments():
    with pytest.raises(TypeError, match="alpha"):
        renyi_divergence(afa.Gaussian(1.0), "2")
    with pytest.raises(TypeError, match="mechanism"):
        renyi_divergence("gaussian", 2.0)
    with pytest.raises(ValueError, match="neighboring"):
        renyi_divergence(afa.Gaussian(1.0), 2.0, neighboring="swap")


def test_propose_test_release_rdp_is_infinite_but_its_profile_is_finite():
    """PTR puts mass delta0 at +inf (Zhu, Dong & Wang 2022, App. A Examples 14, 16): every RDP order > 1 is infinite,
    so an RDP accountant has no bound at all; the tight profile is finite.  One use: delta(eps) =
    delta0 + (1 - delta0)(1 - e^{(eps - eps0)/2}) on [0, eps0] (Laplace loss, Zhu, Dong & Wang 2022, Lemma 34)."""
    eps0, delta0 = 0.5, 1e-6
    mech = afa.ProposeTestRelease(epsilon=eps0, delta=delta0)
    for alpha in (1.01, 2.0, 32.0):
        assert renyi_divergence(mech, alpha) == math.inf
    target = 1e-4
    closed = eps0 + 2 * math.log1p(-(target - delta0) / (1 - delta0))
    assert afa.Accountant().compose(mech).epsilon(target) == pytest.approx(closed, rel=1e-10)


def test_data_dependent_gaussian_example_15_profile_is_finite():
    """Example 15's RDP is infinite for alpha >= 2 (above), yet the tight eps(delta) is finite and exact."""
    mech = afa.DataDependentGaussian(sigma1=math.sqrt(2), sigma2=1.0)
    eps = afa.Accountant().compose(mech).epsilon(1e-6)
    reached = max(afa.numerics.exact.data_dependent_gaussian_delta(eps, math.sqrt(2), 1.0, 0.0, d) for d in ("remove", "add"))
    assert math.isfinite(eps) and reached == pytest.approx(1e-6, rel=1e-9)
