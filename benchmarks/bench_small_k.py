"""Time to eps(delta) and delta(eps) of one Poisson-subsampled Gaussian composed k times.

The acceptance points of the subsampling issues: <= 100 ms per eps(delta) (both directions) for any step
count, and <= 20 ms for few steps (k <= 300).  Grid: q in {0.01, 0.001}, sigma in {0.8, 1, 2}, k in {1, 2, 5,
10, 50, 100, 300, 1000, 3000, 10 000, 100 000}, delta = 1e-5, plus the two near-atom rows (sigma 0.8, q 0.001,
k 100, delta 1e-5; sigma 2, q 0.001, k 1000, delta 1e-6).

Each row is timed four ways, each the median of REPEATS calls (a single call when the first one takes longer
than SINGLE_SHOT seconds):

* eps(delta) cold: a new accountant with afa's per-mechanism caches cleared (the losses and loss tails are
  rebuilt too), then ``epsilon_result(delta)``;
* eps(delta) again: the same query repeated on that accountant;
* delta(eps) cold and again: ``delta_result(eps)`` likewise, at the eps the first query answered (so delta
  comes out near the row's delta).

The one-time per-process set-up is excluded by a warm-up call.  Reported: wall and CPU (process) time; CPU
time is the steadier figure on a shared machine (but counts every BLAS thread; OPENBLAS_NUM_THREADS=1 makes
it the single-core time), the method 'auto' chose, eps and its [lower, upper].

``--before PATH`` times the same rows with the afa found at PATH (a worktree of an earlier commit, e.g.
``git worktree add --detach ../afa-before <commit>``) in the same run: each version runs in its own worker
process, and the two take turns row by row, so that the machine's load drifts over both alike.

Run: PYTHONPATH=. python benchmarks/bench_small_k.py [--max-count 300] [--before PATH] [--markdown]
(the whole grid takes minutes on 2 cores; --max-count 300 keeps the few-step rows).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

REPEATS = 5
#: A call slower than this (seconds) is timed once.
SINGLE_SHOT = 1.0
CASES = ([(sigma, q, k, 1e-5) for q in (0.01, 0.001) for sigma in (0.8, 1.0, 2.0)
          for k in (1, 2, 5, 10, 50, 100, 300, 1000, 3000, 10_000, 100_000)]
         + [(0.8, 0.001, 100, 1e-5), (2.0, 0.001, 1000, 1e-6)])
HERE = Path(__file__).resolve().parent


def _timed(call) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def _medians(calls) -> tuple[float, float, object]:
    """(median wall, median CPU, last result) of up to REPEATS calls of the callables ``calls`` yields."""
    runs = []
    for call in calls:
        runs.append(_timed(call))
        if runs[0][0] > SINGLE_SHOT or len(runs) == REPEATS:
            break
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), runs[-1][2]


def measure(sigma: float, q: float, count: int, delta: float) -> dict:
    """The four timings of one row (in this process's afa)."""
    from timing import clear_afa_caches

    import afa

    def fresh():
        clear_afa_caches()
        return afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), times=count)

    row: dict = {}

    def time_direction(name: str, query: str, argument: float):
        """Cold (fresh accountant) and repeated timings of ``query(argument)``; its last answer."""
        accountants: list = []

        def cold():
            accountants.append(fresh())
            return getattr(accountants[-1], query)(argument)

        wall, cpu, answer = _medians(cold for _ in range(REPEATS))
        row[f"{name} cold"] = (wall, cpu)
        row[name] = (answer.value, answer.lower, answer.upper, answer.method)
        last = accountants[-1]
        wall, cpu, _ = _medians((lambda: getattr(last, query)(argument)) for _ in range(REPEATS))
        row[f"{name} again"] = (wall, cpu)
        return answer

    epsilon = time_direction("eps", "epsilon_result", delta).value
    time_direction("delta", "delta_result", epsilon)
    return row


def worker() -> None:
    """Answer rows read from stdin (JSON [sigma, q, k, delta] a line) with JSON timings, one line each."""
    import afa

    sys.stdout.write(json.dumps({"afa": afa.__file__}) + "\n")
    sys.stdout.flush()
    measure(1.0, 0.01, 3, 1e-5)  # warm-up
    for line in sys.stdin:
        sigma, q, count, delta = json.loads(line)
        sys.stdout.write(json.dumps(measure(sigma, q, int(count), delta)) + "\n")
        sys.stdout.flush()


def _ms(seconds: float) -> str:
    return f"{1e3 * seconds:.1f}" if seconds < 10 else f"{seconds:.1f} s"


def main() -> None:
    sys.path.insert(0, str(HERE))
    from timing import VersionWorker, comparison_parser, machine_note

    parser = comparison_parser(__doc__)
    parser.add_argument("--max-count", type=int, default=None, help="only rows with k at most this")
    arguments = parser.parse_args()
    if arguments.worker:
        worker()
        return

    print(machine_note(()))
    cases = [case for case in dict.fromkeys(CASES) if arguments.max_count is None or case[2] <= arguments.max_count]
    after = VersionWorker(__file__, str(HERE.parent))
    before = VersionWorker(__file__, arguments.before) if arguments.before else None
    print(f"after: {after.origin}" + (f"; before: {before.origin}" if before else ""))
    kinds = ("eps cold", "eps again", "delta cold", "delta again")
    if arguments.markdown:
        columns = [f"{kind} (ms, wall / CPU)" for kind in kinds]
        print("| σ | q | k | δ | " + " | ".join(columns) + " | method | ε [lower, upper] |")
        print("|---" * (6 + len(columns)) + "|")
    else:
        print(f"{'sigma':>5} {'q':>6} {'k':>5} {'delta':>6}  " + "  ".join(f"{kind + ' ms':>24}" for kind in kinds)
              + f"  {'method':8} {'eps':>12} {'lower':>12} {'upper':>12}")
    for case in cases:
        rows = {"after": after.measure(case)}
        if before is not None:
            rows["before"] = before.measure(case)
        new = rows["after"]
        cells = []
        for kind in kinds:
            wall, cpu = new[kind]
            cell = f"{_ms(wall)} / {_ms(cpu)}"
            if before is not None:
                old_wall, old_cpu = rows["before"][kind]
                cell = f"{_ms(old_wall)} / {_ms(old_cpu)} → {cell} (×{old_cpu / cpu:.2g})"
            cells.append(cell)
        value, lower, upper, method = new["eps"]
        sigma, q, count, delta = case
        if arguments.markdown:
            print(f"| {sigma:g} | {q:g} | {count} | {delta:.0e} | " + " | ".join(cells)
                  + f" | {method} | {value:.9g} [{lower:.9g}, {upper:.9g}] |", flush=True)
        else:
            print(f"{sigma:5g} {q:6g} {count:5d} {delta:6.0e}  " + "  ".join(f"{cell:>24}" for cell in cells)
                  + f"  {method:8} {value:12.9f} {lower:12.9f} {upper:12.9f}", flush=True)
    after.close()
    if before is not None:
        before.close()


if __name__ == "__main__":
    main()
