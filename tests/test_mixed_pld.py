"""The PLD of finite-output mechanisms composed with continuous ones: exact atoms mixed over the continuous
part's PLDs (afa.engines.mixed_pld).

Truth, independent of afa:

* Gaussians with finite-output mechanisms: the mixture sum_o P(o) delta_Gauss(eps - l(o); mu) at 30 digits
  over the mechanisms' PMFs written from their definitions (tests/_fuzz.py, ``Reference``; Gaussian profile:
  Sommer, Meiser & Mohammadi 2019, Thm 5);
* one Laplace use with binomial randomized-response atoms: the Laplace profile delta(x) = 1 - e^{(x - a)/2} on
  [-a, a] (1 - e^x below, 0 above), a = sensitivity / b, checked here against an mpmath integral of
  (p - e^x q)_+, mixed over the binomial atoms of k uses of RR.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest

import afa
from afa.engines import mixed_pld
from afa.engines.base import PLDEngine

sys.path.insert(0, str(Path(__file__).parent))
import _fuzz  # noqa: E402


def laplace_delta_mp(x, a):
    """delta(x) of one Laplace use with a = sensitivity / scale, in mpmath."""
    x, a = mp.mpf(x), mp.mpf(a)
    if x >= a:
        return mp.mpf(0)
    if x <= -a:
        return -mp.expm1(x)
    return -mp.expm1((x - a) / 2)


def test_laplace_profile_is_the_integral():
    """The closed form used below, against mpmath's integral of (p - e^x q)_+ for Laplace(0, b) vs Laplace(1, b)."""
    b = 2.0
    with mp.workdps(30):
        def integrand(o, x):
            p = mp.exp(-abs(o) / b) / (2 * b)
            q = mp.exp(-abs(o - 1) / b) / (2 * b)
            return max(p - mp.exp(x) * q, 0)

        for x in (-1.0, -0.2, 0.1, 0.4):
            kinks = sorted({0.0, 1.0, min(max(0.5 - b * x / 2, 0.0), 1.0)})  # where p = e^x q, if inside
            value = mp.quad(lambda o: integrand(o, x), [-mp.inf, *kinks, mp.inf])
            assert abs(value - laplace_delta_mp(x, 1 / b)) < 1e-20


def rr_laplace_delta_mp(eps, p, uses, a):
    """delta(eps) of RR(p) x uses composed with one Laplace use (a = 1 / b), remove direction = the larger one
    (both directions of RR and Laplace are symmetric), over the binomial atoms of RR."""
    with mp.workdps(30):
        r = mp.log(mp.mpf(p) / (1 - mp.mpf(p)))
        total = mp.mpf(0)
        for k in range(uses + 1):  # k outputs agree with the true bit: loss (2k - uses) r, mass C p^k (1-p)^(uses-k)
            mass = mp.binomial(uses, k) * mp.mpf(p) ** k * (1 - mp.mpf(p)) ** (uses - k)
            total += mass * laplace_delta_mp(eps - (2 * k - uses) * r, a)
        return total


@pytest.mark.parametrize("uses, eps", [(40, 0.5), (40, 8.0), (40, 30.0), (300, 60.0)])
def test_randomized_response_with_laplace_brackets_the_truth(uses, eps):
    p, b = 0.75, 2.0
    acc = afa.Accountant().compose(afa.RandomizedResponse(p), uses).compose(afa.Laplace(b), 1)
    result = acc.delta_result(eps, method="pld")
    truth = float(rr_laplace_delta_mp(eps, p, uses, 1 / b))
    assert result.certified and result.lower <= truth <= result.upper, (result, truth)
    assert result.upper - result.lower <= 1e-6 * truth


def test_randomized_response_with_laplace_epsilon_bracket_holds_the_crossing():
    p, b, uses, delta = 0.75, 2.0, 40, 1e-9
    acc = afa.Accountant().compose(afa.RandomizedResponse(p), uses).compose(afa.Laplace(b), 1)
    result = acc.epsilon_result(delta, method="pld")
    # the bracket's ends sit on either side of the crossing of the true profile
    assert float(rr_laplace_delta_mp(result.upper, p, uses, 1 / b)) <= delta
    assert float(rr_laplace_delta_mp(result.lower, p, uses, 1 / b)) >= delta * (1 - 1e-12)
    assert result.upper - result.lower <= 1e-4 * result.value


def _gaussian_and_finite(seed, neighboring, specs, deltas=(1e-6,)):
    terms = tuple((_fuzz.Spec(kind, params), count) for kind, params, count in specs)
    return _fuzz.Composition(seed, neighboring, terms, deltas)


@pytest.mark.parametrize("neighboring, specs", [
    ("substitution", [("gaussian", (22.674243728764907,), 9), ("dlap", (0.10499846946844932, 1), 2101)]),
    ("add_remove", [("dgauss", (0.9583826543259171, 1), 40), ("gaussian", (12.006722707221881,), 2)]),
    ("add_remove", [("rr", (0.7,), 50), ("krr", (5, 0.6), 7), ("gaussian", (3.0,), 20)]),
])
def test_gaussians_with_finite_mechanisms_bracket_the_mpmath_mixture(neighboring, specs):
    """Issue 16's compositions of discrete and Gaussian mechanisms: the mixed PLD's certified bounds hold the
    30-digit mixture, at delta(eps) and at the ends of the eps(delta) bracket."""
    composition = _gaussian_and_finite(0, neighboring, specs)
    reference = _fuzz.Reference(composition)
    assert reference.available
    acc = composition.accountant()
    for delta in (1e-5, 1e-12):
        result = acc.epsilon_result(delta, method="pld")
        assert result.certified and math.isfinite(result.upper)
        assert reference.delta(result.upper) <= delta * (1 + 1e-9)
        assert reference.delta(result.lower) >= delta * (1 - 1e-9)
        assert result.upper - result.lower <= 1e-3 * max(result.value, 1.0)
        profile = acc.delta_result(np.array([result.lower, result.value, result.upper]), method="pld")
        truths = [reference.delta(float(eps)) for eps in (result.lower, result.value, result.upper)]
        assert np.all(profile.lower <= np.array(truths) * (1 + 1e-9))
        assert np.all(np.array(truths) <= profile.upper * (1 + 1e-9))


def test_subsampled_gaussian_with_discrete_overlaps_the_single_grid_pld():
    """A second engine: the PLD of every term on one grid (afa.engines.base.PLDEngine) must overlap the mixed one."""
    acc = afa.Accountant(neighboring="substitution")
    acc.compose(afa.Gaussian(0.9).poisson_subsampled(0.05), 20)
    acc.compose(afa.DiscreteLaplace(a=0.3, sensitivity=1), 40)
    acc.compose(afa.RandomizedResponse(0.6), 5)
    mixed = acc.epsilon_result(1e-8, method="pld")
    loss = acc.composed_losses["forward"]
    terms = [(mechanism.loss_tails("substitution")[0], count) for mechanism, count in
             [(afa.Gaussian(0.9).poisson_subsampled(0.05), 20), (afa.DiscreteLaplace(a=0.3, sensitivity=1), 40),
              (afa.RandomizedResponse(0.6), 5)]]
    single = PLDEngine(terms, 1e-4, loss).epsilon_bracket(1e-8)
    assert mixed.lower <= single[2] and single[1] <= mixed.upper, (mixed, single)
    assert mixed.upper - mixed.lower <= single[2] - single[1]


def test_a_finite_part_too_large_falls_back_to_one_grid(active_options):
    """Beyond ExactOptions.max_atoms atoms the finite part goes on the grid with the rest; the answer still holds
    the truth."""
    options = afa.Options(exact=afa.ExactOptions(max_atoms=3))
    p, b, uses, eps = 0.75, 2.0, 40, 8.0
    acc = afa.Accountant(options=options).compose(afa.RandomizedResponse(p), uses).compose(afa.Laplace(b), 1)
    loss = acc.composed_losses["remove"]
    finite = [(term, count) for term, count in loss.terms.items() if not term.continuous]
    active_options(exact=options.exact)
    assert mixed_pld.exact_part(finite) == ([False], None)
    assert type(acc.planner.engines("pld")[0]) is PLDEngine
    result = acc.delta_result(eps, method="pld")
    truth = float(rr_laplace_delta_mp(eps, p, uses, 1 / b))
    assert result.lower <= truth <= result.upper


def test_finite_only_compositions_go_on_one_grid_each_term_composed_exactly():
    """Finite-output terms only (RR x 60, k-RR x 40): every term is composed exactly and put on one grid
    (no mixture), so the grid rounds once per term.  The certified bounds hold the enumerated truth
    (tests/_fuzz.py ``Reference``), and at the same step they are at least 10x tighter than a grid that
    rounds every use (exact powers disabled)."""
    composition = _gaussian_and_finite(0, "add_remove", [("rr", (0.7,), 60), ("krr", (3, 0.5), 40)])
    reference = _fuzz.Reference(composition)
    assert reference.available
    acc = composition.accountant()
    engine = acc.planner.engines("pld")[0]
    assert type(engine) is PLDEngine
    for delta in (1e-4, 1e-10):
        result = acc.epsilon_result(delta, method="pld")
        assert result.certified
        assert reference.delta(result.upper) <= delta * (1 + 1e-9)
        assert reference.delta(result.lower) >= delta * (1 - 1e-9)
    loss = acc.composed_losses["remove"]
    terms = [(mechanism.loss_tails("add_remove")[0], count) for mechanism, count in acc.mechanisms.items()]
    powered = PLDEngine(terms, engine.interval, loss, {}).epsilon_bracket(1e-10)
    per_use = PLDEngine(terms, engine.interval, loss).epsilon_bracket(1e-10)
    assert max(per_use[1], powered[1]) <= min(per_use[2], powered[2])  # both certified: they overlap
    assert powered[2] - powered[1] <= (per_use[2] - per_use[1]) / 10
