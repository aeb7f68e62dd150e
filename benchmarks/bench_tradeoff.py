"""Time and error of afa.views.tradeoff.tradeoff_curve on DP-SGD compositions (issue 20, item 7).

Before: the golden-section maximisation of each alpha's bracket on the contour method's profile
(``tradeoff_from_profile``, what ``tradeoff_curve`` did by default until this change, minus its final
per-alpha delta queries, so a lower bound on the old time).  After: ``tradeoff_curve`` (the profile on a grid,
one PLD build, error bound returned).  Each call is on a fresh accountant; "cold" clears afa's per-mechanism
caches first.  Median of REPEATS calls (one call of the slow route), wall and CPU seconds.

Run: PYTHONPATH=. python benchmarks/bench_tradeoff.py
"""

from __future__ import annotations

import statistics
import time

import numpy as np
from timing import clear_afa_caches, machine_note

import afa
from afa.views.tradeoff import tradeoff_curve, tradeoff_from_profile

REPEATS = 3
CASES = [("MNIST: sigma=1.1, q=256/60000, 14063 steps", 1.1, 256 / 60000, 14063),
         ("sigma=1, q=0.01, 1000 steps", 1.0, 0.01, 1000)]


def timed(function, cold: bool, repeats: int = REPEATS):
    walls, cpus = [], []
    for _ in range(repeats):
        if cold:
            clear_afa_caches()
        wall, cpu = time.perf_counter(), time.process_time()
        result = function()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), result


def main() -> None:
    print(machine_note(()))
    print("| case | alphas | route | wall s | CPU s | largest stated error |")
    print("|---|---|---|---|---|---|")
    for label, sigma, q, steps in CASES:
        def fresh():
            return afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), steps)
        alphas = np.linspace(0, 1, 100)
        for cold in (True, False):
            wall, cpu, (_, error) = timed(lambda: tradeoff_curve(fresh(), alphas, with_error=True), cold)
            print(f"| {label} | 100 | grid (after){' cold' if cold else ''} | {wall:.2f} | {cpu:.2f} | "
                  f"{np.max(error):.1e} |", flush=True)
        few = np.linspace(0, 1, 20)
        def before(accountant):
            return tradeoff_from_profile(lambda eps: accountant.privacy_profile(eps, method="contour", estimate=True),
                                         few)
        wall, cpu, _ = timed(lambda: before(fresh()), False, repeats=1)
        print(f"| {label} | 20 | golden section on the contour (before) | {wall:.2f} | {cpu:.2f} | none stated |",
              flush=True)


if __name__ == "__main__":
    main()
