"""Time to eps(delta) of one Poisson-subsampled Gaussian composed k times, on a fresh accountant.

The acceptance point of the subsampling issue: <= 100 ms per eps(delta) (both directions) for any step
count.  Grid: q in {0.01, 0.001}, sigma in {0.8, 1, 2}, k in {1, 2, 5, 10, 50, 100, 300, 1000, 3000,
10 000, 100 000}, delta = 1e-5, plus the two near-atom rows (sigma 0.8, q 0.001, k 100, delta 1e-5;
sigma 2, q 0.001, k 1000, delta 1e-6).  Each call builds a new accountant with afa's per-mechanism caches cleared
(cold: the
losses and loss tails are rebuilt too); the one-time per-process set-up is excluded by a warm-up call.
Reported: median wall and CPU (process) time of REPEATS calls, the method 'auto' chose, eps and its
[lower, upper] and relative width.  CPU time is the steadier figure on a shared machine (but counts
every BLAS thread; OPENBLAS_NUM_THREADS=1 makes it the single-core time).

Run: PYTHONPATH=. python benchmarks/bench_small_k.py  (about 10 s on 2 cores).
"""

from __future__ import annotations

import statistics
import time

from timing import clear_afa_caches, machine_note

import afa

REPEATS = 5
CASES = ([(sigma, q, k, 1e-5) for q in (0.01, 0.001) for sigma in (0.8, 1.0, 2.0)
          for k in (1, 2, 5, 10, 50, 100, 300, 1000, 3000, 10_000, 100_000)]
         + [(0.8, 0.001, 100, 1e-5), (2.0, 0.001, 1000, 1e-6)])


def cold_epsilon(sigma: float, q: float, count: int, delta: float) -> tuple[float, float, afa.Result]:
    """(wall seconds, CPU seconds, result) of eps(delta) on a fresh accountant with cold caches."""
    clear_afa_caches()
    wall, cpu = time.perf_counter(), time.process_time()
    result = afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), times=count).epsilon_result(delta)
    return time.perf_counter() - wall, time.process_time() - cpu, result


def main() -> None:
    print(machine_note(()))
    cold_epsilon(1.0, 0.01, 3, 1e-5)  # warm-up
    print(f"{'sigma':>5} {'q':>6} {'k':>5} {'delta':>6} {'wall ms':>8} {'cpu ms':>7}  {'method':8} "
          f"{'eps':>12} {'lower':>12} {'upper':>12} {'rel. width':>10}")
    for sigma, q, count, delta in CASES:
        runs = [cold_epsilon(sigma, q, count, delta) for _ in range(REPEATS)]
        wall, cpu = (statistics.median(run[i] for run in runs) for i in (0, 1))
        result = runs[-1][2]
        width = (result.upper - result.lower) / result.value if result.value > 0 else float("nan")
        print(f"{sigma:5g} {q:6g} {count:5d} {delta:6.0e} {1e3 * wall:8.1f} {1e3 * cpu:7.1f}  {result.method:8} "
              f"{result.value:12.9f} {result.lower:12.9f} {result.upper:12.9f} {width:10.1e}", flush=True)


if __name__ == "__main__":
    main()
