"""afa._accurate: the binomial log-pmf against mpmath, within the error model the exact engine states for it
(BINOMIAL_ULPS units of |log pmf| + log(n + 1) + 8)."""

import math

import mpmath as mp
import numpy as np
import pytest

from afa._accurate import STIRLERR_SMALL, STIRLERR_TABLE, UNIT_ROUNDOFF, binomial_log_pmf, log_sum_exp, stirlerr
from afa.numerics.atoms import BINOMIAL_ULPS

DIGITS = 40


def _worst_units(n, p, js):
    """The largest |computed - exact| / (u (|log pmf| + log(n + 1) + 8)) over ``js``."""
    js = np.asarray(sorted(set(int(j) for j in js if 0 <= j <= n)), dtype=float)
    got = binomial_log_pmf(js, n, p, 1 - p, math.log(p), math.log1p(-p))
    worst = 0.0
    with mp.workdps(DIGITS):
        P = mp.mpf(p)
        for j, value in zip(js.astype(int).tolist(), got):
            exact = mp.log(mp.binomial(n, j)) + j * mp.log(P) + (n - j) * mp.log(1 - P)
            worst = max(worst, float(abs(value - exact)) / (UNIT_ROUNDOFF * (abs(float(exact)) + math.log(n + 1) + 8)))
    return worst


@pytest.mark.parametrize("n,p", [(1, 0.3), (7, 0.75), (100, 0.75), (500, 0.9), (1000, 0.52), (10 ** 4, 0.3),
                                 (10 ** 6, 0.52), (10 ** 7, 0.51)])
def test_binomial_log_pmf_within_its_stated_units(n, p):
    js = list(range(0, min(n, 30) + 1)) + list(range(max(0, n - 30), n + 1)) \
        + np.linspace(0, n, 120).astype(int).tolist() + list(range(max(0, int(n * p) - 40), min(n, int(n * p) + 40)))
    assert _worst_units(n, p, js) <= BINOMIAL_ULPS


@pytest.mark.parametrize("n,p,v", [(3 * 10 ** 6, 0.1, 0.1), (10 ** 5, 0.3, 0.1), (10 ** 6, 0.9, 0.25),
                                   (10 ** 6, 0.5, 0.26)])
def test_binomial_log_pmf_where_the_deviance_changes_form(n, p, v):
    """Counts k with |k - np| / (k + np) near the deviance's switch from its series to the direct form (on
    either side, for both counts k and n - k): the direct form's cancellation there cost 48 units before."""
    js = []
    for mean, flip in ((n * p, False), (n * (1 - p), True)):
        for side in (1, -1):
            for ratio in np.linspace(v - 0.02, v + 0.02, 9):
                k = round(mean * (1 + side * ratio) / (1 - side * ratio))
                js.append(n - k if flip else k)
    assert _worst_units(n, p, js) <= BINOMIAL_ULPS


def test_binomial_log_pmf_next_to_the_top_for_p_near_one():
    """k = n - 1 with p = 1 - 1e-6, n = 1e6: log(1 - k/n) lost 5e5 units there; log(n - k) does not."""
    assert _worst_units(10 ** 6, 1 - 1e-6, range(10 ** 6 - 40, 10 ** 6 + 1)) <= BINOMIAL_ULPS


def test_stirlerr_table_matches_the_series_and_mpmath():
    """The table (below 4096) and the series (beyond) agree with mpmath to 1e-16 absolute (a few ulps of the
    log-pmf's smallest terms; the truncated series is 2e-14 relative at k = 16)."""
    k = np.array([1.0, 15.0, 16.0, 17.0, 100.0, 4095.0, 4096.0, 1e6])
    with mp.workdps(DIGITS):
        exact = [float(mp.log(mp.factorial(int(x))) - (mp.log(mp.sqrt(2 * mp.pi * x)) + x * mp.log(x) - x))
                 for x in k]
    np.testing.assert_allclose(stirlerr(k), exact, rtol=0, atol=2e-16)
    assert STIRLERR_TABLE[:16].tolist() == STIRLERR_SMALL.tolist()
    big = np.arange(16.0, 4096.0)
    assert np.array_equal(stirlerr(big), stirlerr(np.append(big, 1e6))[:-1])  # table == series


def test_log_sum_exp_of_one_row():
    assert log_sum_exp(np.array([])) == -np.inf
    assert log_sum_exp(np.array([-np.inf, -np.inf])) == -np.inf
    assert log_sum_exp(np.array([np.inf, 1.0])) == np.inf
    assert math.isnan(log_sum_exp(np.array([np.nan, 1.0])))
    values = np.array([-1000.0, -1001.0, -1003.5])
    with mp.workdps(DIGITS):
        exact = float(mp.log(mp.fsum(mp.exp(mp.mpf(x)) for x in values)))
    assert float(log_sum_exp(values)) == pytest.approx(exact, rel=1e-15)
