"""Seeded fuzz of heterogeneous compositions (tests/_fuzz.py): bounds contain the truth, never inf where it is
finite, eps non-increasing in delta, answers overlap the PLD's certified bracket, within the time budget.

The default run checks a small sample; ``-m slow`` a larger one; ``benchmarks/fuzz.py`` counts per check over
>= 10^4 compositions.
"""

import pytest

from _fuzz import check_composition, random_composition

FAST_SEEDS = range(24)
SLOW_SEEDS = range(1000, 1200)


def _assert_sound(seed: int, **options) -> None:
    composition = random_composition(seed, **options)
    outcome = check_composition(composition, budget_seconds=20.0)
    assert not outcome.failures, f"{composition!r}: {outcome.failures}"


@pytest.mark.parametrize("seed", FAST_SEEDS)
def test_fuzzed_composition_is_sound(seed):
    _assert_sound(seed, max_count=300, max_distinct=3)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
def test_fuzzed_composition_is_sound_at_full_range(seed):
    _assert_sound(seed)
