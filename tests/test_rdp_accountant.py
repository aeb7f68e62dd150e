"""RDP views of a composition: subsampled Renyi divergences, the symbolic D_alpha, the RDP accountant.

References (computed here, not by afa):
* Poisson-subsampled Gaussian at integer orders (Mironov, Talwar & Zhang 2019, Sec. 3.3):
  D_alpha = log sum_k C(alpha, k) (1 - q)^{alpha - k} q^k exp((k^2 - k) / (2 sigma^2)) / (alpha - 1),
  summed in mpmath;
* subsampled Laplace / randomized response: the divergence integral (sum) of the mixture pair
  A = (1 - q) Q + q P against Q, by mpmath quadrature (direct summation);
* Mironov 2017 (Renyi DP, Table II) for Laplace and randomized response;
* the Gaussian standard conversion's continuous optimum eps = rho + 2 sqrt(rho log(1/delta)),
  rho = k / (2 sigma^2);
* dp_accounting's RdpAccountant (optional) on the same integer orders;
* Zhu, Dong & Wang 2022, Sec. 3 / Fig. 1 (pane a): randomized response with
  p = e/(1+e) satisfies the RDP curve alpha/2 of the Gaussian mechanism with sigma = 1.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import sympy

import afa
from afa.views.rdp import (
    CONVERSIONS,
    RdpAccountant,
    alpha,
    composed_rdp,
    delta_from_rdp,
    epsilon_from_rdp,
    renyi_divergence,
    renyi_divergence_expression,
)

INTEGER_ORDERS = (2, 3, 4, 5, 8, 12, 16, 24, 32, 48, 64, 128, 256)


def mironov_subsampled_gaussian(order: int, q: float, sigma: float) -> float:
    with mpmath.workdps(50):
        q, sigma = mpmath.mpf(q), mpmath.mpf(sigma)
        total = mpmath.fsum(mpmath.binomial(order, k) * (1 - q) ** (order - k) * q ** k
                            * mpmath.exp((k * k - k) / (2 * sigma ** 2)) for k in range(order + 1))
        return float(mpmath.log(total) / (order - 1))


def mironov_laplace(order, eps0):
    return math.log(order / (2 * order - 1) * math.exp((order - 1) * eps0)
                    + (order - 1) / (2 * order - 1) * math.exp(-order * eps0)) / (order - 1)


def mironov_rr(order, p):
    return math.log(p ** order * (1 - p) ** (1 - order) + (1 - p) ** order * p ** (1 - order)) / (order - 1)


# -- subsampled mechanisms ------------------------------------------------------------------------

@pytest.mark.parametrize("q, sigma", [(0.01, 1.1), (0.001, 0.8), (0.1, 2.0), (0.5, 0.5)])
def test_poisson_subsampled_gaussian_matches_the_integer_order_formula(q, sigma):
    mech = afa.Gaussian(sigma).poisson_subsampled(q)
    for order in INTEGER_ORDERS:
        expected = mironov_subsampled_gaussian(order, q, sigma)
        assert renyi_divergence(mech, order) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("order", [0.5, 1.5, 2.0, 7.0])
def test_poisson_subsampled_laplace_both_directions_by_quadrature(order):
    q, b = 0.2, 1.0  # P = Lap(1, b), Q = Lap(0, b), A = (1 - q) Q + q P
    with mpmath.workdps(30):
        lap = lambda x, c: mpmath.exp(-abs(x - c) / b) / (2 * b)
        mix = lambda x: (1 - q) * lap(x, 0) + q * lap(x, 1)
        pieces = [-mpmath.inf, 0, 1, mpmath.inf]
        remove = mpmath.log(mpmath.quad(lambda x: mix(x) ** order * lap(x, 0) ** (1 - order), pieces)) / (order - 1)
        add = mpmath.log(mpmath.quad(lambda x: lap(x, 0) ** order * mix(x) ** (1 - order), pieces)) / (order - 1)
    got = renyi_divergence(afa.Laplace(b).poisson_subsampled(q), order)
    assert got == pytest.approx(float(max(remove, add)), rel=1e-10)


def test_poisson_subsampled_randomized_response_by_direct_sum():
    p, q, order = 0.8, 0.3, 3.0
    P, Q = np.array([p, 1 - p]), np.array([1 - p, p])
    A = (1 - q) * Q + q * P
    expected = max(math.log(np.sum(A ** order * Q ** (1 - order))), math.log(np.sum(Q ** order * A ** (1 - order))))
    got = renyi_divergence(afa.RandomizedResponse(p).poisson_subsampled(q), order)
    assert got == pytest.approx(expected / (order - 1), rel=1e-12)


# -- the symbolic view ---------------------------------------------------------------------------

@pytest.mark.parametrize("sigma", [sympy.Integer(1), sympy.Integer(2), sympy.Rational(1, 2), sympy.Rational(1, 4)])
def test_symbolic_gaussian_is_alpha_over_two_sigma_squared(sigma):
    expression = renyi_divergence_expression(afa.Gaussian(float(sigma)))
    assert expression.free_symbols == {alpha}
    assert sympy.simplify(expression - alpha / (2 * sigma ** 2)) == 0


def test_symbolic_laplace_and_randomized_response_match_mironov():
    laplace = sympy.lambdify(alpha, renyi_divergence_expression(afa.Laplace(2.0, sensitivity=1.5)), "mpmath")
    rr = sympy.lambdify(alpha, renyi_divergence_expression(afa.RandomizedResponse(0.7)), "mpmath")
    for order in (0.3, 1.5, 2.0, 9.0):
        assert float(laplace(order)) == pytest.approx(mironov_laplace(order, 0.75), rel=1e-12)
        assert float(rr(order)) == pytest.approx(mironov_rr(order, 0.7), rel=1e-12)


def test_symbolic_composition_adds_along_each_direction():
    p, q = (0.5, 0.3, 0.2), (0.1, 0.6, 0.3)
    acc = afa.Accountant().compose(afa.DiscreteMechanism(p, q), 2).compose(afa.Laplace(1.0), 3)
    expression = renyi_divergence_expression(acc)
    assert isinstance(expression, sympy.Max)
    value = sympy.lambdify(alpha, expression, "mpmath")
    P, Q = np.array(p), np.array(q)
    for order in (0.3, 2.0, 4.0):
        forward = math.log(np.sum(P ** order * Q ** (1 - order))) / (order - 1)
        backward = math.log(np.sum(Q ** order * P ** (1 - order))) / (order - 1)
        expected = 2 * max(forward, backward) + 3 * mironov_laplace(order, 1.0)
        assert float(value(order)) == pytest.approx(expected, rel=1e-12)


def test_symbolic_view_of_mass_at_infinity_and_refusals():
    expression = renyi_divergence_expression(afa.ApproxDP(1.0, 1e-6))
    assert expression.subs(alpha, 2) == sympy.oo
    with pytest.raises(ValueError, match="no symbolic expression"):
        renyi_divergence_expression(afa.Gaussian(1.0).poisson_subsampled(0.1))
    with pytest.raises(TypeError, match="source"):
        renyi_divergence_expression("gaussian")


# -- Zhu, Dong & Wang 2022, Sec. 3, Fig. 1 (a) -----------------------------------------------------------------

def test_fig1_randomized_response_satisfies_the_gaussian_rdp_curve():
    """RR with p = e/(1+e) satisfies the RDP alpha/2 of the Gaussian with sigma = 1 (1-zCDP), for every alpha;
    the curves are not equal.  So any RDP conversion applied to the Gaussian's curve must also be valid for RR,
    whose tight eps(0.3) is >= 0.471: RDP cannot give the Gaussian's tight 0.277 (Zhu, Dong & Wang 2022, Sec. 3)."""
    rr, gaussian = afa.RandomizedResponse(math.e / (1 + math.e)), afa.Gaussian(1.0)
    for order in np.concatenate((np.linspace(0.05, 0.95, 10), np.geomspace(1.01, 500, 25))):
        assert renyi_divergence(gaussian, order) == pytest.approx(order / 2, rel=1e-13)
        assert renyi_divergence(rr, order) < order / 2
    for conversion in CONVERSIONS:
        assert RdpAccountant().compose(gaussian).epsilon(0.3, conversion) >= 0.471
    assert afa.Accountant().compose(gaussian).epsilon(0.3) < 0.2775


# -- composition and conversion ------------------------------------------------------------------

def test_composed_curve_is_count_times_the_closed_forms():
    orders = [1.05, 1.5, 2.0, 3.5, 10.0, 64.0, 256.0]  # (the references overflow beyond)
    acc = RdpAccountant(orders=orders).compose(afa.Laplace(2.0), 7).compose(afa.RandomizedResponse(0.6), 5)
    expected = [7 * mironov_laplace(a, 0.5) + 5 * mironov_rr(a, 0.6) for a in acc.orders]
    assert np.allclose(acc.rdp, expected, rtol=1e-12, atol=0)


def test_composed_curve_takes_the_larger_direction_of_the_sums():
    """M = (P, Q) composed with its swap: both directions sum to D(P||Q) + D(Q||P), below 2 max(...)."""
    p, q = (0.5, 0.3, 0.2), (0.1, 0.6, 0.3)
    acc = afa.Accountant().compose(afa.DiscreteMechanism(p, q)).compose(afa.DiscreteMechanism(q, p))
    orders = (1.5, 2.0, 5.0)
    P, Q = np.array(p), np.array(q)
    forward = np.array([math.log(np.sum(P ** a * Q ** (1 - a))) / (a - 1) for a in orders])
    backward = np.array([math.log(np.sum(Q ** a * P ** (1 - a))) / (a - 1) for a in orders])
    assert np.allclose(composed_rdp(acc, orders), forward + backward, rtol=1e-12)
    assert np.all(forward + backward < 2 * np.maximum(forward, backward))


def test_standard_conversion_of_a_gaussian_curve_approaches_its_continuous_optimum():
    k, sigma, delta = 50, 3.0, 1e-6
    rho = k / (2 * sigma ** 2)
    optimum = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    orders = np.linspace(1.01, 100, 20000)
    eps, order = epsilon_from_rdp(orders, rho * orders, delta, "standard")
    assert optimum <= eps <= optimum + 1e-5  # grid step 0.005 near the optimum
    assert order == pytest.approx(1 + math.sqrt(math.log(1 / delta) / rho), abs=0.01)
    # delta(eps) is the inverse conversion: at the optimum's eps it gives delta back
    assert delta_from_rdp(orders, rho * orders, optimum, "standard")[0] == pytest.approx(delta, rel=1e-4)
    assert epsilon_from_rdp(orders, rho * orders, delta, "improved")[0] < eps


@pytest.mark.parametrize("build", [
    lambda acc: acc.compose(afa.Gaussian(2.0), 20),
    lambda acc: acc.compose(afa.Laplace(3.0), 30),
    lambda acc: acc.compose(afa.RandomizedResponse(0.6), 40).compose(afa.Gaussian(4.0), 10),
    lambda acc: acc.compose(afa.Gaussian(1.0).poisson_subsampled(0.02), 500),
])
def test_rdp_is_an_upper_bound_on_the_tight_values(build):
    tight = build(afa.Accountant())
    rdp = RdpAccountant.from_accountant(tight)
    for delta in (1e-3, 1e-6, 1e-9):
        exact_eps = tight.epsilon(delta)
        improved, standard = rdp.epsilon(delta, "improved"), rdp.epsilon(delta, "standard")
        assert exact_eps <= improved * (1 + 1e-9) and improved <= standard
    for epsilon in (0.5, 2.0, 4.0):
        assert tight.delta(epsilon) <= rdp.delta(epsilon, "improved") * (1 + 1e-9) + 1e-15


@pytest.mark.parametrize("q, sigma, steps", [(0.01, 1.1, 1000), (0.001, 0.8, 10000), (0.05, 2.0, 300)])
def test_dp_sgd_matches_dp_accounting(q, sigma, steps):
    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting.rdp import rdp_privacy_accountant as reference_rdp

    orders = [float(a) for a in range(2, 65)] + [128.0, 256.0]  # integer orders: dp_accounting is exact there
    reference = reference_rdp.RdpAccountant(orders, reference_rdp.NeighborRel.ADD_OR_REMOVE_ONE)
    reference.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)
    ours = RdpAccountant(orders=orders).compose(afa.Gaussian(sigma).poisson_subsampled(q), steps)
    for delta in (1e-5, 1e-8):
        assert ours.epsilon(delta) == pytest.approx(reference.get_epsilon(delta), rel=1e-6)
    for epsilon in (1.0, 3.0):
        assert ours.delta(epsilon) == pytest.approx(reference.get_delta(epsilon), rel=1e-6)


def test_validation_names_the_parameter():
    with pytest.raises(ValueError, match="orders"):
        RdpAccountant(orders=(0.5, 2.0))
    with pytest.raises(ValueError, match="conversion"):
        epsilon_from_rdp((2.0,), (1.0,), 1e-5, conversion="balle")
    with pytest.raises(ValueError, match="delta"):
        epsilon_from_rdp((2.0,), (1.0,), 0.0)
    with pytest.raises(ValueError, match="epsilon"):
        delta_from_rdp((2.0,), (1.0,), -1.0)
    with pytest.raises(ValueError, match="rdp"):
        delta_from_rdp((2.0, 3.0), (1.0,), 1.0)
    with pytest.raises(TypeError, match="accountant"):
        composed_rdp(RdpAccountant())


def test_infinite_rdp_gives_no_bound():
    """ApproxDP puts mass at +infinity: every order > 1 is infinite, so RDP says nothing (Zhu, Dong & Wang 2022, App. A)."""
    acc = RdpAccountant().compose(afa.ApproxDP(1.0, 1e-6))
    assert acc.epsilon(1e-3) == math.inf
    assert acc.delta(5.0) == 1.0
