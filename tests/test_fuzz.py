"""Seeded fuzz of heterogeneous compositions (tests/_fuzz.py): bounds contain the truth, never inf where it is
finite, eps non-increasing in delta, answers overlap the PLD's certified bracket, within the time budget.

The default run checks a small sample; ``-m slow`` a larger one; ``benchmarks/fuzz.py`` counts per check over
>= 10^4 compositions.
"""

import pytest
from _fuzz import check_composition, random_composition

import afa

#: Seeds of the fast sample that still fail, with what fails (none today).
KNOWN_OPEN: dict[int, str] = {}
FAST_SEEDS = [pytest.param(seed, marks=pytest.mark.xfail(reason=KNOWN_OPEN[seed], strict=False))
              if seed in KNOWN_OPEN else seed for seed in range(12)]
SLOW_SEEDS = range(1000, 1200)
#: Full-range seeds that once failed (benchmarks/fuzz.py): 16, three discrete mechanisms whose second direction
#: was too large to evaluate at the first's answer; 50, the contour and quadrature composing 8e6 discrete
#: Gaussian atoms until the budget ran out; 51, the PLD given half the budget although nothing after it applied.
REGRESSION_SEEDS = [16, 50, 51]


def _assert_sound(seed: int, budget_seconds: float = afa.Budget().seconds, **options) -> None:
    composition = random_composition(seed, **options)
    outcome = check_composition(composition, budget_seconds=budget_seconds)
    assert not outcome.failures, f"{composition!r}: {outcome.failures}"


@pytest.mark.parametrize("seed", FAST_SEEDS)
def test_fuzzed_composition_is_sound(seed):
    _assert_sound(seed, budget_seconds=afa.Budget().seconds, max_count=300, max_distinct=3)


@pytest.mark.slow
@pytest.mark.parametrize("seed", REGRESSION_SEEDS + list(SLOW_SEEDS))
def test_fuzzed_composition_is_sound_at_full_range(seed):
    _assert_sound(seed)
