"""Exact compositions of lattice laws (method='exact'): time of one query, this checkout against another.

Rows: DiscreteGaussian(3) x100 eps(1e-6) on a fresh accountant (construction, composition and search) and
repeated on one accountant; its delta(10); DiscreteGaussian(3) x1000; DiscreteGaussian(3) x100 with
DiscreteLaplace(1/18) x300 (one lattice, step 1/9); k-RR(5, 0.21) under substitution (three atoms on a
lattice) x10^4; RR(0.6) and k-RR(5, 0.21) add/remove x10^6 (two atoms: the binomial law).  Each tree is
measured in its own child process, the trees alternating over ``--rounds`` rounds; a cell is the median
over rounds of each round's median of ``--repeats`` calls.  The machine is shared: compare the ratio
within a run, not absolute numbers across runs.

Run: python benchmarks/bench_lattice.py [--before PATH_TO_OTHER_CHECKOUT]
(e.g. ``git worktree add --detach /tmp/afa-before main`` for PATH).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def cases() -> dict:
    import afa

    def fresh(build, query):
        return lambda: query(build())

    def dg(count):
        return afa.Accountant().compose(afa.DiscreteGaussian(sigma=3), times=count)

    def mixed():
        return dg(100).compose(afa.DiscreteLaplace(a=1 / 18), times=300)

    def krr_substitution():
        return afa.Accountant(neighboring="substitution").compose(afa.KaryRandomizedResponse(k=5, p=0.21),
                                                                  times=10_000)

    def eps(accountant):
        return accountant.epsilon_result(1e-6, method="exact")

    shared = dg(100)
    eps(shared)
    return {
        "DG(3) x100 eps(1e-6), fresh": fresh(lambda: dg(100), eps),
        "DG(3) x100 eps(1e-6), repeated": lambda: eps(shared),
        "DG(3) x100 delta(10), fresh": fresh(lambda: dg(100), lambda a: a.delta_result(10.0, method="exact")),
        "DG(3) x1000 eps(1e-6), fresh": fresh(lambda: dg(1000), eps),
        "DG(3) x100 + DLap(1/18) x300 eps(1e-6)": fresh(mixed, eps),
        "k-RR(5) substitution x10^4 eps(1e-6)": fresh(krr_substitution, eps),
        "RR(0.6) x10^6 eps(1e-6)": fresh(lambda: afa.Accountant().compose(afa.RandomizedResponse(p=0.6),
                                                                          times=10**6), eps),
        "k-RR(5) add/remove x10^6 eps(1e-6)": fresh(
            lambda: afa.Accountant().compose(afa.KaryRandomizedResponse(k=5, p=0.21), times=10**6), eps),
    }


def child(repeats: int) -> None:
    out = {}
    for name, run in cases().items():
        run()  # warm (imports, caches of mechanisms)
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            samples.append(time.perf_counter() - start)
        out[name] = statistics.median(samples)
    print(json.dumps(out))


def measure(tree: Path, repeats: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run([sys.executable, __file__, "--child", "--repeats", str(repeats)], env=env, cwd="/",
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="another checkout of afa to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.repeats)
        return
    here = Path(__file__).resolve().parent.parent
    trees = {"this": here} if args.before is None else {"before": args.before.resolve(), "this": here}
    rounds: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            rounds[name].append(measure(tree, args.repeats))
    medians = {name: {case: statistics.median(r[case] for r in results) for case in results[0]}
               for name, results in rounds.items()}
    header = f"| {'case':<42} |" + "".join(f" {name + ' ms':>10} |" for name in trees)
    if "before" in trees:
        header += " ratio |"
    print(header)
    print("|" + "-" * 44 + "|" + "".join("-" * 12 + "|" for _ in trees) + ("-------|" if "before" in trees else ""))
    for case in medians["this"]:
        row = f"| {case:<42} |" + "".join(f" {1e3 * medians[name][case]:>10.1f} |" for name in trees)
        if "before" in trees:
            row += f" {medians['before'][case] / medians['this'][case]:>5.1f} |"
        print(row)


if __name__ == "__main__":
    main()
