"""Poisson-subsampled Gaussians (DP-SGD) against the peer libraries dp_accounting and prv_accountant.

Rows (neighboring = add/remove, eps(delta) of k self-compositions of the
Poisson-subsampled Gaussian with noise multiplier sigma and rate q):

* DP-SGD, delta = 1e-5: q = 0.01, sigma = 1, k = 100, 1000, 10 000 (literature
  eps ~ 0.718036 and 1.828237 for k = 100, 1000); q = 0.01, sigma = 2, k = 1500;
  q = 256/60000, sigma = 1.1, k = 14 063 (MNIST, 60 epochs of batches of 256);
* near-atom (small q k, where afa's contour refuses and the real-line inversion
  answers; Table 3 checks it against the certified bracket): sigma = 0.8, q = 0.001, k = 100, delta = 1e-5; sigma = 2,
  q = 0.001,
  k = 1000, delta = 1e-6;
* tiny delta: q = 0.01, sigma = 2, k = 3000, delta = 1e-10, 1e-16, 1e-20;
* heterogeneous: 100 distinct subsampled Gaussians (sigma uniform in [1.5, 3],
  q uniform in [0.005, 0.02], seed 0), 10 steps each, delta = 1e-5.

Table 1, for each row: afa's eps, its [lower, upper], the method chosen, and the
time to the first eps(delta) on a fresh accountant (cold: the mechanisms' losses
are rebuilt too; only the one-time per-process compilation is excluded by a
warm-up); then each peer's eps (with its bracket where it gives one), its time
and the ratio peer time / afa time.  Peers: dp_accounting's PLDAccountant (its
default value_discretization_interval 1e-4) and prv_accountant's PRVAccountant
(eps_error = 0.01, delta_error = delta / 1000, as its deprecated Accountant
wrapper uses).  Times are medians over 3 repeats after a first call, or the
single first call when that took over 5 s (column n).

Table 2, independent checks of afa's eps: dp_accounting's PLD built with
pessimistic and optimistic estimates at a fine value_discretization_interval
(column interval; the optimistic side sits about k * interval / 2 low) gives a
bracket [optimistic, pessimistic], and dp_accounting's RDP accountant gives a
valid upper bound.  Where the PLD's "optimistic" eps exceeds the RDP upper bound,
the bracket is invalid (the FFT composition's round-off, ~1e-16 of the mass,
swamps delta) and is flagged so; where afa falls outside an otherwise plausible
bracket, the pessimistic eps is recomputed on grids 7% finer and coarser, and a
spread larger than afa's distance to the bracket is flagged as unresolved.

Table 3: afa's own certified bracket (Zhu, Dong & Wang 2022, Algorithm 2, afa.engines.certified) on
delta at afa's eps for the single-mechanism rows with k <= 1500: its relative width,
and whether it contains afa's delta there.

Run: PYTHONPATH=. python benchmarks/bench_subsampled.py
(peers optional: pip install dp-accounting==0.4.4 prv-accountant==0.2.0;
about 6-8 minutes on 2 cores.)
"""

from __future__ import annotations

import logging
import math
import time
import warnings

import contenders
import numpy as np
from contenders import INSTALLED, subsampled_terms
from timing import clear_afa_caches, dp_sgd_accountant, machine_note, refusal, timed

import afa
import afa.mechanisms.catalog
from afa.engines.certified import certified_delta

#: A call slower than this (seconds) is timed once, not repeated.
SINGLE_SHOT_SECONDS = 5.0
REPEATS = 3


class Row:
    """One composition: ``terms`` = [(sigma, q, steps)], asked at ``delta``."""

    def __init__(self, name: str, terms, delta: float, interval: float | None = None):
        self.name, self.terms, self.delta = name, [(float(s), float(q), int(k)) for s, q, k in terms], delta
        steps = sum(k for _, _, k in self.terms)
        # Fine PLD grid: the optimistic side is about steps * interval / 2 low, so aim for <= 0.01.
        self.interval = interval if interval is not None else min(1e-4, max(3e-6, 0.02 / steps))


def rows() -> list[Row]:
    table = [Row(f"q=0.01 s=1 k={k}", [(1.0, 0.01, k)], 1e-5) for k in (100, 1000, 10_000)]
    table.append(Row("q=0.01 s=2 k=1500", [(2.0, 0.01, 1500)], 1e-5))
    table.append(Row("q=256/60000 s=1.1 k=14063", [(1.1, 256 / 60000, 14_063)], 1e-5))
    table.append(Row("near-atom q=0.001 s=0.8 k=100", [(0.8, 0.001, 100)], 1e-5))
    table.append(Row("near-atom q=0.001 s=2 k=1000", [(2.0, 0.001, 1000)], 1e-6))
    table += [Row("q=0.01 s=2 k=3000", [(2.0, 0.01, 3000)], delta) for delta in (1e-10, 1e-16, 1e-20)]
    rng = np.random.default_rng(0)
    sigmas, rates = rng.uniform(1.5, 3.0, 100), rng.uniform(0.005, 0.02, 100)
    # 100 distinct PLD compositions: a coarser grid keeps the bracket affordable (k * interval / 2 = 0.025).
    table.append(Row("100 distinct, 10 steps each", list(zip(sigmas, rates, [10] * 100)), 1e-5, interval=5e-5))
    return table


# --------------------------------------------------------------------------- afa

def afa_cold(row: Row):
    clear_afa_caches()
    return dp_sgd_accountant(row.terms).epsilon_result(row.delta)


def warm_up() -> None:
    """One-time per-process work (symbolic templates compiled, numpy/scipy paths touched) outside the rows."""
    afa_cold(Row("warm-up", [(3.0, 0.05, 7)], 1e-5))
    afa_cold(Row("warm-up", [(0.9, 0.002, 3)], 1e-5))


# --------------------------------------------------------------------------- peers (benchmarks/contenders.py)

def dp_pld_epsilon(row: Row) -> float:
    return contenders.dp_pld_epsilon(subsampled_terms(row.terms), row.delta)


def dp_rdp_epsilon(row: Row) -> float:
    return contenders.dp_rdp_epsilon(subsampled_terms(row.terms), row.delta)


def prv_epsilon(row: Row) -> tuple[float, float, float]:
    """(lower, estimate, upper) from PRVAccountant (prv_accountant.Accountant is deprecated)."""
    return contenders.prv_epsilon(subsampled_terms(row.terms), row.delta)


def pld_epsilon(row: Row, pessimistic: bool, interval: float) -> float:
    """eps from dp_accounting's PLD built with the given estimate type on a grid of ``interval``."""
    steps = sum(k for _, _, k in row.terms)
    # Truncated mass goes to the pessimistic infinity atom: keep it far below delta.
    log_mass_bound = min(-50.0, math.log(row.delta / steps) - 7)
    tail = min(1e-15, row.delta / 1000)
    return contenders.dp_gaussian_pld_epsilon(row.terms, row.delta, interval, pessimistic,
                                              use_connect_dots=pessimistic,  # connect-the-dots is pessimistic only
                                              log_mass_truncation_bound=log_mass_bound, tail_mass_truncation=tail)


def pld_bracket(row: Row) -> tuple[float, float]:
    """(optimistic, pessimistic) eps from dp_accounting's PLD on the row's fine grid."""
    return pld_epsilon(row, False, row.interval), pld_epsilon(row, True, row.interval)


def grid_jitter(row: Row, pessimistic: float) -> float:
    """Spread of the pessimistic eps over the row's grid and grids 7% finer and coarser.

    A discretization bound refines smoothly; a spread larger than its gap to afa means
    the PLD does not resolve this delta (the FFT composition's round-off).
    """
    values = [pessimistic] + [pld_epsilon(row, True, row.interval * f) for f in (1 / 1.07, 1.07)]
    return max(values) - min(values)


# --------------------------------------------------------------------------- tables

def cell(value, width: int, fmt: str = ".6f") -> str:
    if isinstance(value, Exception):
        return f"{'refused':>{width}}"
    return f"{value:>{width}{fmt}}" if isinstance(value, float) else f"{value:>{width}}"


def main() -> None:
    logging.getLogger().setLevel(logging.ERROR)  # dp_accounting's absl warnings
    warnings.simplefilter("ignore")
    print(machine_note(("numpy", "scipy", "dp-accounting", "prv-accountant")))
    started = time.perf_counter()
    warm_up()
    table = rows()
    notes: list[str] = []
    checks = []

    print("\nTable 1: eps(delta), time to the first eps on a fresh accountant, peer/afa time ratio")
    print(f"{'case':<30} {'delta':>6} {'afa eps':>12} {'afa lower':>12} {'afa upper':>12} {'method':>9} "
          f"{'afa s':>7} {'n':>1} | {'PLD eps':>10} {'PLD s':>6} {'x':>6} | "
          f"{'PRV eps':>10} {'PRV s':>6} {'x':>6} {'PRV [lower, upper]'}")
    for row in table:
        result, afa_seconds, n = timed(lambda: afa_cold(row), REPEATS, SINGLE_SHOT_SECONDS)
        if isinstance(result, Exception):
            print(f"{row.name:<30} {row.delta:>6.0e} afa refused: {refusal(result)}")
            continue
        line = (f"{row.name:<30} {row.delta:>6.0e} {result.value:>12.8f} {float(result.lower):>12.8f} "
                f"{float(result.upper):>12.8f} {result.method:>9} {afa_seconds:>7.2f} {n:>1} |")

        if not INSTALLED["dp-accounting"]:
            line += f" {'not installed':>24} |"
        else:
            eps, seconds, _ = timed(lambda: dp_pld_epsilon(row), REPEATS, SINGLE_SHOT_SECONDS)
            line += f" {cell(eps, 10)} {seconds:>6.2f} {seconds / afa_seconds:>6.2f} |"
            if isinstance(eps, Exception):
                notes.append(f"dp_accounting PLD, {row.name}, delta={row.delta:.0e}: refused: {refusal(eps)}")

        if not INSTALLED["prv-accountant"]:
            line += " not installed"
        else:
            bracket, seconds, _ = timed(lambda: prv_epsilon(row), REPEATS, SINGLE_SHOT_SECONDS)
            if isinstance(bracket, Exception):
                line += f" {'-':>10} {seconds:>6.2f} {seconds / afa_seconds:>6.2f} refused: {refusal(bracket)}"
            else:
                lower, estimate, upper = bracket
                line += (f" {estimate:>10.6f} {seconds:>6.2f} {seconds / afa_seconds:>6.2f} "
                         f"[{lower:.6f}, {upper:.6f}]")
        print(line, flush=True)
        checks.append((row, result))

    if not INSTALLED["dp-accounting"]:
        print("\nTable 2 skipped: dp_accounting is not installed")
    else:
        print("\nTable 2: afa's eps against dp_accounting's PLD bracket [optimistic, pessimistic] "
              "on a fine grid, and its RDP upper bound")
        print(f"{'case':<30} {'delta':>6} {'afa eps':>12} {'interval':>8} {'PLD optimistic':>14} "
              f"{'PLD pessimistic':>15} {'inside':>6} {'s':>6} {'RDP upper':>10} {'<= RDP':>6}  note")
        for row, result in checks:
            start = time.perf_counter()
            try:
                optimistic, pessimistic = pld_bracket(row)
                failure = None
            except Exception as error:
                optimistic = pessimistic = math.nan
                failure = error
            seconds = time.perf_counter() - start
            rdp = dp_rdp_epsilon(row)
            eps = result.value
            note = ""
            if failure is not None:
                inside, note = "-", f"refused: {refusal(failure)}"
            else:
                inside = "yes" if optimistic <= eps <= pessimistic else "NO"
                if optimistic > rdp:
                    note = "bracket invalid: optimistic > RDP upper bound (FFT round-off swamps delta)"
                elif not math.isfinite(pessimistic):
                    note = "pessimistic eps infinite"
                elif inside == "NO":
                    gap = max(optimistic - eps, eps - pessimistic)
                    spread = grid_jitter(row, pessimistic)
                    note = (f"afa outside by {gap:.1e}; the pessimistic eps moves by {spread:.1e} under a 7% "
                            f"grid change" + (" (> the gap: not resolved at this delta)" if spread > gap else ""))
            print(f"{row.name:<30} {row.delta:>6.0e} {eps:>12.8f} {row.interval:>8.1e} {optimistic:>14.8f} "
                  f"{pessimistic:>15.8f} {inside:>6} {seconds:>6.1f} {rdp:>10.6f} "
                  f"{'yes' if eps <= rdp else 'NO':>6}  {note}", flush=True)

    print_certified_widths(checks)
    for note in notes:
        print(note)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


def print_certified_widths(checks) -> None:
    """Table 3: Zhu, Dong & Wang 2022, Algorithm 2's certified delta bracket at afa's eps (max over the two
    directions, afa.engines.certified at its default 2^18 cells), for the single-mechanism rows with k <= 1500."""
    print("\nTable 3: the certified Algorithm 2 bracket on delta at afa's eps (both directions), its relative "
          "width and build time")
    print(f"{'case':<30} {'delta':>6} {'afa eps':>12} {'lower':>13} {'upper':>13} {'rel width':>9} "
          f"{'contains':>8} {'s':>6}")
    for row, result in checks:
        (sigma, q, steps), = row.terms if len(row.terms) == 1 else ((None, None, 0),)
        if not 0 < steps <= 1500:
            continue
        pair = afa.Gaussian(sigma).poisson_subsampled(q).noise_pair()
        start = time.perf_counter()
        sides = [certified_delta(side, steps, [result.value]) for side in (pair, pair.swapped())]
        seconds = time.perf_counter() - start
        lower, upper = max(side[0][0] for side in sides), max(side[1][0] for side in sides)
        delta = afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), times=steps).delta(result.value)
        print(f"{row.name:<30} {row.delta:>6.0e} {result.value:>12.8f} {lower:>13.6e} {upper:>13.6e} "
              f"{(upper - lower) / row.delta:>9.1e} {'yes' if lower <= delta <= upper else 'NO':>8} "
              f"{seconds:>6.1f}", flush=True)


if __name__ == "__main__":
    main()
