"""Time of eps(delta) for MixtureOfGaussians((0, 1), (0.99, 0.01), sigma=1) x 100 under method="auto".

Each run is a fresh subprocess per checkout (afa imported before the clock starts), alternating between
checkouts: "first" is a fresh Accountant's first query in that process (the mechanism's privacy losses
are built then), "again" the same query on a second fresh Accountant (the mechanism's losses are cached
per mechanism; the engines are rebuilt).  The table gives the medians over the runs, the method that
answered, and eps.  The machine is shared: compare ratios within a run.

    python benchmarks/bench_mixture_of_gaussians.py [CHECKOUT ...] [--runs 5] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
root = {root!r}
if root:
    sys.path.insert(0, root)
import afa
if root:
    assert afa.__file__.startswith(root), afa.__file__
mechanism = afa.MixtureOfGaussians((0.0, 1.0), (0.99, 0.01), sigma=1.0)
out = []
for _ in range(2):
    began = time.perf_counter()
    try:
        result = afa.Accountant().compose(mechanism, 100).epsilon_result({delta!r})
        answer = [result.upper, result.method]
    except afa.AccuracyError as error:
        answer = [None, "refused: " + str(error)[:60]]
    out.append([time.perf_counter() - began] + answer)
print(json.dumps(out))
"""


def run(root: str, delta: float) -> list:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    source = CHILD.format(root=os.path.abspath(root) if root else "", delta=delta)
    out = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def profile(delta: float) -> None:
    """cProfile of one warm query (the mechanism's losses already built) in this process."""
    import cProfile
    import pstats

    import afa

    mechanism = afa.MixtureOfGaussians((0.0, 1.0), (0.99, 0.01), sigma=1.0)
    afa.Accountant().compose(mechanism, 100).epsilon(delta)
    profiler = cProfile.Profile()
    profiler.enable()
    afa.Accountant().compose(mechanism, 100).epsilon(delta)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", help="afa source trees to compare (default: the importable afa)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one warm query per delta")
    args = parser.parse_args()
    if args.profile:
        for delta in (1e-5, 1e-10):
            profile(delta)
        return
    checkouts = args.checkouts or [""]
    print("| afa checkout | delta | first query, median s | again, median s | method | eps |")
    print("|---|---|---|---|---|---|")
    for delta in (1e-5, 1e-10):
        rows: dict[str, list] = {root: [] for root in checkouts}
        for _ in range(args.runs):
            for root in checkouts:
                rows[root].append(run(root, delta))
        for root in checkouts:
            first = statistics.median(r[0][0] for r in rows[root])
            again = statistics.median(r[1][0] for r in rows[root])
            _, value, method = rows[root][-1][1]
            shown = "—" if value is None else f"{value:.12g}"
            print(f"| {root or 'importable afa'} | {delta:g} | {first:.3f} | {again:.3f} | {method} | {shown} |",
                  flush=True)


if __name__ == "__main__":
    main()
