"""afa's subsampled-Gaussian eps against the peer library dp_accounting (optional: skipped when absent).

dp_accounting's privacy-loss distribution built with pessimistic and optimistic
estimates brackets the true eps(delta) (Poisson subsampling, add/remove); afa's
eps must lie inside that bracket.  Grids are chosen so the whole file runs in a few
seconds.  The literature values for q = 0.01, sigma = 1, delta = 1e-5 (eps ~ 0.718036
after 100 steps, 1.828237 after 1000) are checked to 1e-6.
"""

from __future__ import annotations

import pytest
from _peers import dp_accounting_epsilon_bracket

import afa

dp_accounting = pytest.importorskip("dp_accounting")

DELTA = 1e-5

# (q, sigma, steps, value_discretization_interval): the optimistic side sits about
# steps * interval / 2 below the truth, the connect-the-dots pessimistic side far closer.
CASES = [(0.01, 1.0, 100, 1e-4), pytest.param(0.01, 1.0, 1000, 2e-5, marks=pytest.mark.slow),
         pytest.param(0.01, 2.0, 1500, 2e-5, marks=pytest.mark.slow)]


def afa_epsilon(q: float, sigma: float, steps: int) -> float:
    accountant = afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), times=steps)
    return accountant.epsilon_result(DELTA).value


def dp_accounting_bracket(q: float, sigma: float, steps: int, interval: float) -> tuple[float, float]:
    """(optimistic, pessimistic) eps(DELTA) from dp_accounting's PLD (max over the add and remove directions)."""
    return dp_accounting_epsilon_bracket(sigma, q, steps, [DELTA], interval)[0]


@pytest.mark.parametrize("q, sigma, steps, interval", CASES)
def test_epsilon_inside_dp_accounting_bracket(q, sigma, steps, interval):
    optimistic, pessimistic = dp_accounting_bracket(q, sigma, steps, interval)
    epsilon = afa_epsilon(q, sigma, steps)
    assert optimistic < pessimistic
    assert optimistic <= epsilon <= pessimistic, (optimistic, epsilon, pessimistic)


@pytest.mark.parametrize("steps, expected", [(100, 0.718036), (1000, 1.828237)])
def test_literature_values(steps, expected):
    assert afa_epsilon(0.01, 1.0, steps) == pytest.approx(expected, abs=1e-6)
