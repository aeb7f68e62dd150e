"""Heterogeneous subsampled compositions: n distinct Poisson-subsampled Gaussians x 10 steps, eps(1e-5).

The composition of issue 22 (point 5): sigma uniform in [1.5, 3], q uniform in [0.005, 0.02] (numpy seed 0),
each mechanism used 10 times, add/remove, delta = 1e-5; n = 100 and 1000.  One row per n and afa tree: the
median wall time of the first eps(delta) on a fresh accountant with afa's per-mechanism caches cleared (the
time includes composing the n mechanisms), after one warm-up query in the same process, with the eps, its
[lower, upper] and the method auto chose.  Each measurement runs in its own child process, with the trees
(this one, and ``--before PATH``, a checkout of an earlier commit, e.g. ``git worktree add --detach PATH
d43f8cc``) alternating, so that both see the same machine load; the ratio column is before / after, of the wall times and of the processes' CPU times
(``time.process_time``, all threads: less sensitive to a shared machine's load).

Run: PYTHONPATH=. python benchmarks/bench_heterogeneous.py [--before PATH] [--repeats 5] [--output PATH]
(``--output benchmarks/heterogeneous_results.md`` writes the section that run_all.py keeps in RESULTS.md).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, sys, time
import numpy as np
import afa, afa.mechanisms.catalog

def clear():
    for name in ("_cached_losses", "_cached_tails"):
        cached = getattr(afa.mechanisms.catalog.Mechanism, name, None)
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()

def first_query(n):
    rng = np.random.default_rng(0)
    seconds = float(sys.argv[2])
    accountant = afa.Accountant(budget=afa.Budget(seconds=seconds)) if seconds > 0 else afa.Accountant()
    for sigma, q in zip(rng.uniform(1.5, 3.0, n), rng.uniform(0.005, 0.02, n)):
        accountant.compose(afa.Gaussian(sigma=sigma).poisson_subsampled(q), times=10)
    return accountant.epsilon_result(1e-5)

first_query(3)  # warm-up: imports, compiled templates
clear()
n = int(sys.argv[1])
start, cpu = time.perf_counter(), time.process_time()
try:
    result = first_query(n)
    row = {"eps": result.value, "lower": result.lower, "upper": result.upper, "method": result.method}
except Exception as error:  # a refusal is reported, not raised
    row = {"error": f"{type(error).__name__}: {error}"[:200]}
row["seconds"], row["cpu"] = time.perf_counter() - start, time.process_time() - cpu
print(json.dumps(row))
"""


def measure(tree: Path, n: int, budget: float) -> dict:
    environment = dict(os.environ, PYTHONPATH=str(tree))
    output = subprocess.run([sys.executable, "-c", CHILD, str(n), str(budget)], env=environment, capture_output=True,
                            text=True, check=True, cwd=tree)
    return json.loads(output.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a checkout of the afa tree to compare against")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--output", type=Path, help="write the table as a RESULTS.md section to this file")
    parser.add_argument("--note", default="", help="a sentence on the machine's state, for the section")
    parser.add_argument("--budget", type=float, default=0.0,
                        help="each query's time budget in seconds (default: afa's own, afa.Budget())")
    arguments = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    trees = ([("before", arguments.before.resolve())] if arguments.before else []) + [("after", here)]
    lines = ["| n distinct x 10 steps | tree | median wall s (first eps) | runs (s) | median CPU s | eps | "
             "[lower, upper] | method | before / after (wall, CPU) |", "|---|---|---|---|---|---|---|---|---|"]
    for n in arguments.sizes:
        runs: dict[str, list[dict]] = {name: [] for name, _ in trees}
        for _ in range(arguments.repeats):
            for name, tree in trees:
                runs[name].append(measure(tree, n, arguments.budget))
                print(f"n={n} {name}: {runs[name][-1]}", file=sys.stderr, flush=True)
        medians = {name: statistics.median(r["seconds"] for r in rows) for name, rows in runs.items()}
        cpus = {name: statistics.median(r["cpu"] for r in rows) for name, rows in runs.items()}
        for name, _ in trees:
            last = runs[name][-1]
            ratio = (f"{medians['before'] / medians['after']:.1f}x, {cpus['before'] / cpus['after']:.1f}x"
                     if "before" in medians and name == "after" else "")
            if "error" in last:
                answer = f"refused: {last['error']}", "", ""
            else:
                answer = (f"{last['eps']:.12f}", f"[{last['lower']:.12f}, {last['upper']:.12f}]", last["method"])
            times = ", ".join(f"{r['seconds']:.2f}" for r in runs[name])
            lines.append(f"| {n} | {name} | {medians[name]:.2f} | {times} | {cpus[name]:.2f} | {answer[0]} | "
                         f"{answer[1]} | {answer[2]} | {ratio} |")
    print("\n".join(lines))
    if arguments.output:
        labels = {name: revision(tree) for name, tree in trees}
        head = ("## 11. Heterogeneous subsampled compositions (benchmarks/bench_heterogeneous.py)\n\n"
                "ε(δ = 1e-5) of n distinct Poisson-subsampled Gaussians (σ uniform in [1.5, 3], q in [0.005, 0.02], "
                "numpy seed 0), 10 steps each, add/remove, `method='auto'`: the first query on a fresh accountant "
                "with afa's per-mechanism caches cleared (composing the n mechanisms included), each run in its own "
                f"process, the trees alternating (median of {arguments.repeats}).  Trees: "
                + ", ".join(f"{name} = {label}" for name, label in labels.items())
                + (f"; time budget {arguments.budget:g} s" if arguments.budget > 0 else "; afa's default budget")
                + f".  {datetime.date.today().isoformat()}, 2 cores. {arguments.note}\n\n")
        arguments.output.write_text(head + "\n".join(lines) + "\n")


def revision(tree: Path) -> str:
    """The tree's commit (short hash), or its path when it is not a git checkout."""
    try:
        return subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return str(tree)


if __name__ == "__main__":
    main()
