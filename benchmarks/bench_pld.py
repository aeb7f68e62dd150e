"""afa's discretized-PLD backend (method='pld') against dp_accounting's PLD, on DP-SGD compositions.

Rows (neighboring = add/remove, eps(delta = 1e-5) of Poisson-subsampled Gaussians with noise
multiplier sigma and rate q), each at value_discretization_interval 1e-3 and 1e-4:

* q = 0.01, sigma = 1, k = 1000 and 10 000 (literature eps 1.828237 and 6.187712);
* q = 0.01, sigma = 2, k = 3000 (issue 5's case, eps 1.1195389);
* q = 256/60000, sigma = 1.1, k = 14 063 (MNIST, 60 epochs of batches of 256);
* 100 distinct subsampled Gaussians (sigma uniform in [1.5, 3], q uniform in [0.005, 0.02],
  numpy seed 0), 10 steps each.

Columns: afa's certified bracket [optimistic, pessimistic] (greedy hull and connect-the-dots,
Doroshenko et al. 2022, Secs. 4-5) from ``Accountant(value_discretization_interval=h).epsilon_result(delta,
method='pld')``, its width and its time; dp_accounting's PLD at the same interval, pessimistic with
connect-the-dots and optimistic (dp_accounting has no optimistic connect-the-dots and falls back to
privacy buckets, rounding every loss down), its bracket and its time (both PLDs built and
queried); the ratio dp_accounting time / afa time; and the error of each bound against the
contour engine's eps (``method='contour'``, relative accuracy ~1e-12), the reference.

Times are wall-clock medians of 3 calls, each on a fresh accountant / fresh PLDs (afa's
per-mechanism caches are cleared first, so the loss tails are rebuilt), after a warm-up of the
one-time per-process work; a call slower than SINGLE_SHOT_SECONDS is timed once (column n).
dp_accounting runs with its defaults otherwise (tail_mass_truncation 1e-15).  A peer that is
missing or raises is recorded as such.

Run: PYTHONPATH=. python benchmarks/bench_pld.py
(peer optional: pip install dp-accounting==0.4.4; about 6 minutes on 2 cores.)
"""

from __future__ import annotations

import logging
import math
import time
import warnings

import numpy as np
from contenders import INSTALLED, dp_gaussian_pld_epsilon
from timing import clear_afa_caches, dp_sgd_accountant, machine_note, refusal, timed

DELTA = 1e-5
INTERVALS = (1e-3, 1e-4)
REPEATS = 3
#: A call slower than this (seconds) is timed once, not REPEATS times.
SINGLE_SHOT_SECONDS = 30.0


class Row:
    """One composition: ``terms`` = [(sigma, q, steps)]."""

    def __init__(self, name: str, terms):
        self.name, self.terms = name, [(float(s), float(q), int(k)) for s, q, k in terms]


def rows() -> list[Row]:
    table = [Row(f"q=0.01 s=1 k={k}", [(1.0, 0.01, k)]) for k in (1000, 10_000)]
    table.append(Row("q=0.01 s=2 k=3000", [(2.0, 0.01, 3000)]))
    table.append(Row("q=256/60000 s=1.1 k=14063", [(1.1, 256 / 60000, 14_063)]))
    rng = np.random.default_rng(0)
    sigmas, rates = rng.uniform(1.5, 3.0, 100), rng.uniform(0.005, 0.02, 100)
    table.append(Row("100 distinct x 10 steps", list(zip(sigmas, rates, [10] * 100))))
    return table


# --------------------------------------------------------------------------- afa

def afa_pld(row: Row, interval: float) -> tuple[float, float]:
    """(optimistic, pessimistic) eps from afa's PLD on a fresh accountant."""
    clear_afa_caches()
    result = dp_sgd_accountant(row.terms, interval).epsilon_result(DELTA, method="pld")
    return float(result.lower), float(result.upper)


def afa_contour(row: Row) -> float:
    result = dp_sgd_accountant(row.terms).epsilon_result(DELTA, method="contour")
    return float(result.value)


def warm_up() -> None:
    """One-time per-process work (symbolic templates, numpy/scipy paths) outside the rows."""
    small = Row("warm-up", [(3.0, 0.05, 7)])
    afa_pld(small, 1e-3)
    afa_contour(small)
    if INSTALLED["dp-accounting"]:
        dp_bracket(small, 1e-3)


# --------------------------------------------------------------------------- dp_accounting

def dp_epsilon(row: Row, interval: float, pessimistic: bool) -> float:
    return dp_gaussian_pld_epsilon(row.terms, DELTA, interval, pessimistic, use_connect_dots=True)


def dp_bracket(row: Row, interval: float) -> tuple[float, float]:
    """(optimistic, pessimistic) eps from dp_accounting: connect-the-dots pessimistic, and the optimistic
    estimate (use_connect_dots is ignored there: it falls back to privacy buckets)."""
    return dp_epsilon(row, interval, False), dp_epsilon(row, interval, True)


# --------------------------------------------------------------------------- tables

def signed(value: float, reference: float) -> str:
    if not (math.isfinite(value) and math.isfinite(reference)):
        return f"{'-':>9}"
    return f"{value - reference:>+9.1e}"


def main() -> None:
    logging.getLogger().setLevel(logging.ERROR)  # dp_accounting's absl warnings
    warnings.simplefilter("ignore")
    print(machine_note(("numpy", "scipy", "dp-accounting")))
    started = time.perf_counter()
    warm_up()
    notes: list[str] = []

    print(f"\neps(delta={DELTA:g}) of Poisson-subsampled Gaussians (add/remove): afa method='pld' vs dp_accounting PLD "
          f"at the same interval h.\nbracket = [optimistic, pessimistic]; err = bound - contour eps; "
          f"x = dp_accounting time / afa time; n = timed calls (median)")
    header = (f"{'case':<26} {'h':>6} {'contour eps':>11} | {'afa opt':>9} {'afa pess':>9} {'width':>8} "
              f"{'err opt':>9} {'err pess':>9} {'afa s':>7} {'n':>1} | {'dp opt':>9} {'dp pess':>9} {'width':>8} "
              f"{'err opt':>9} {'err pess':>9} {'dp s':>7} {'n':>1} {'x':>6}")
    print(header)
    print("-" * len(header))
    for row in rows():
        start = time.perf_counter()
        try:
            reference = afa_contour(row)
        except Exception as error:
            reference = math.nan
            notes.append(f"contour, {row.name}: {refusal(error, 160)}")
        contour_seconds = time.perf_counter() - start
        for interval in INTERVALS:
            ours, afa_seconds, afa_calls = timed(lambda: afa_pld(row, interval), REPEATS, SINGLE_SHOT_SECONDS)
            line = f"{row.name:<26} {interval:>6.0e} {reference:>11.7f} |"
            if isinstance(ours, Exception):
                line += f" {'afa failed':>57} |"
                notes.append(f"afa, {row.name}, h={interval:g}: {refusal(ours, 160)}")
            else:
                low, high = ours
                line += (f" {low:>9.6f} {high:>9.6f} {high - low:>8.1e} {signed(low, reference)} "
                         f"{signed(high, reference)} {afa_seconds:>7.2f} {afa_calls:>1} |")
            if not INSTALLED["dp-accounting"]:
                line += " dp_accounting not installed"
            else:
                theirs, dp_seconds, dp_calls = timed(lambda: dp_bracket(row, interval), REPEATS,
                                                     SINGLE_SHOT_SECONDS)
                if isinstance(theirs, Exception):
                    line += f" {'crashed':>57}"
                    notes.append(f"dp_accounting, {row.name}, h={interval:g}: {refusal(theirs, 160)}")
                else:
                    low, high = theirs
                    ratio = dp_seconds / afa_seconds if not isinstance(ours, Exception) else math.nan
                    line += (f" {low:>9.6f} {high:>9.6f} {high - low:>8.1e} {signed(low, reference)} "
                             f"{signed(high, reference)} {dp_seconds:>7.2f} {dp_calls:>1} {ratio:>6.2f}")
            print(line, flush=True)
        notes.append(f"contour reference, {row.name}: {contour_seconds:.2f} s (one call)")
    print()
    for note in notes:
        print(note)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
