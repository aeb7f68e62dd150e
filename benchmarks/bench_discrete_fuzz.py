"""Time of method='auto' on the soundness fuzz's compositions of several discrete mechanisms only.

The fuzz (tests/_fuzz.py) draws 1-5 distinct mechanisms with counts log-uniform in [1, 10^4] and two deltas
log-uniform in [1e-30, 1e-3].  Here every seed in [--start, --stop) whose composition has at least two distinct
mechanisms, all of them finite-output (randomized response, k-ary RR, discrete Laplace, discrete Gaussian), is
queried for eps(delta) at both of its deltas on one fresh accountant, in order, and each query is timed.  The
table counts the queries answered within 1 s (the target of issue 16), the median, 90th percentile and largest
time, and the engines that answered; the slowest queries are listed.  Run it on a quiet machine with one BLAS
thread (OPENBLAS_NUM_THREADS=1): the times are wall-clock.

Run: python benchmarks/bench_discrete_fuzz.py [--start 0 --stop 1500] [--markdown benchmarks/discrete_fuzz_results.md]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from _fuzz import random_composition  # noqa: E402

import afa  # noqa: E402

DISCRETE = {"rr", "krr", "dlap", "dgauss"}


def queries(start: int, stop: int):
    """(seed, delta, seconds, method) of every timed query."""
    for seed in range(start, stop):
        composition = random_composition(seed)
        kinds = {spec.kind for spec, _ in composition.terms}
        if len(composition.terms) < 2 or not kinds <= DISCRETE:
            continue
        accountant = composition.accountant()
        for delta in composition.deltas:
            began = time.perf_counter()
            try:
                method = accountant.epsilon_result(delta).method
            except afa.AccuracyError:
                method = "refused"
            yield seed, delta, time.perf_counter() - began, method


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--stop", type=int, default=1500)
    parser.add_argument("--slowest", type=int, default=10, help="how many of the slowest queries to list")
    parser.add_argument("--markdown", type=Path, help="also write the table as a RESULTS.md section here")
    args = parser.parse_args()
    rows = list(queries(args.start, args.stop))
    seconds = [row[2] for row in rows]
    methods = collections.Counter(row[3] for row in rows)
    within = sum(1 for value in seconds if value <= 1.0)
    lines = ["| queries | within 1 s | median s | p90 s | max s | engines |", "|---:|---:|---:|---:|---:|---|",
             f"| {len(rows)} | {within} | {statistics.median(seconds):.3f} | {percentile(seconds, 0.9):.3f} | "
             f"{max(seconds):.2f} | " + ", ".join(f"{name} {count}" for name, count in methods.most_common()) + " |"]
    slow = sorted(rows, key=lambda row: -row[2])[:args.slowest]
    lines += ["", "| fuzz seed | delta | s | engine |", "|---:|---:|---:|---|"]
    lines += [f"| {seed} | {delta:.3g} | {value:.2f} | {method} |" for seed, delta, value, method in slow]
    print("\n".join(lines))
    if args.markdown:
        day = datetime.date.today().isoformat()
        text = ("## 16. Compositions of several discrete mechanisms (benchmarks/bench_discrete_fuzz.py)\n\n"
                f"`benchmarks/bench_discrete_fuzz.py --start {args.start} --stop {args.stop}`, run {day} on the shared "
                "2-core machine with one BLAS thread: eps(delta) through `method=\"auto\"` at both deltas of every fuzz "
                "seed whose composition has two or more distinct mechanisms, all finite-output, one fresh accountant "
                "per seed (the second query reuses what the first built).\n\n" + "\n".join(lines) + "\n")
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
