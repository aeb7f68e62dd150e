"""Time of a closed-form answer: a fresh accountant, a composition of Gaussians, one eps(delta) or delta(eps).

Each checkout given (default: the afa this script imports) runs in its own subprocess, in rounds that
alternate between checkouts; every call builds a fresh Accountant, composes Gaussian(10) x 100 and
Gaussian(3, sensitivity=2) x 7 ("mixed", mu = 2.03) or Gaussian(1) x 10 ("ten", mu = sqrt(10)), and asks
eps(1e-5) or delta(1.0).  The table gives the median and the
quartiles over all calls.  autodp's analytic Gaussian (Balle & Wang 2018, via its ComposeGaussian of the
same mu) is timed beside it when autodp is importable.  The machine is shared: compare ratios within a run.

    python benchmarks/bench_gaussian_closed_form.py [CHECKOUT ...] [--calls 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, math, sys, time
root = {root!r}
if root:
    sys.path.insert(0, root)
import afa
if root:
    assert afa.__file__.startswith(root), afa.__file__
calls, query = {calls}, {query!r}

def one():
    acc = afa.Accountant()
    if {case!r} == "mixed":
        acc.compose(afa.Gaussian(10.0), 100)
        acc.compose(afa.Gaussian(3.0, 2.0), 7)
    else:
        acc.compose(afa.Gaussian(1.0), 10)
    return acc.epsilon(1e-5) if query == "epsilon" else acc.delta(1.0)

one()
times = []
for _ in range(calls):
    began = time.perf_counter()
    value = one()
    times.append(time.perf_counter() - began)
print(json.dumps([times, float(value)]))
"""

AUTODP_CHILD = r"""
import json, math, time
from autodp.mechanism_zoo import GaussianMechanism
from autodp.transformer_zoo import ComposeGaussian
calls = {calls}
mu = math.sqrt(100 * (1 / 10.0) ** 2 + 7 * (2 / 3.0) ** 2)

def one():
    mechanism = ComposeGaussian()([GaussianMechanism(1 / mu, name="g")], [1])
    return mechanism.get_approxDP(1e-5)

one()
times = []
for _ in range(calls):
    began = time.perf_counter()
    value = one()
    times.append(time.perf_counter() - began)
print(json.dumps([times, float(value)]))
"""


def run(source: str) -> tuple[list[float], float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, check=True, env=env)
    times, value = json.loads(out.stdout.strip().splitlines()[-1])
    return times, value


def autodp_available() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import autodp"], capture_output=True)
    return probe.returncode == 0


def summary(times: list[float]) -> str:
    q1, median, q3 = statistics.quantiles(times, n=4)
    return f"{median * 1e3:.3f} ({q1 * 1e3:.3f}-{q3 * 1e3:.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", help="afa source trees to compare (default: the importable afa)")
    parser.add_argument("--calls", type=int, default=1000, help="calls per checkout and query, over all rounds")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    checkouts = args.checkouts or [""]
    per_round = max(1, args.calls // args.rounds)
    peers = autodp_available()
    print("| afa checkout | composition | query | median ms (quartiles) | value |")
    print("|---|---|---|---|---|")
    for case in ("mixed", "ten"):
        for query in ("epsilon", "delta"):
            times: dict[str, list[float]] = {root: [] for root in checkouts}
            values: dict[str, float] = {}
            for _ in range(args.rounds):
                for root in checkouts:
                    new, values[root] = run(CHILD.format(root=os.path.abspath(root) if root else "",
                                                         calls=per_round, query=query, case=case))
                    times[root] += new
            for root in checkouts:
                label = root or "importable afa"
                print(f"| {label} | {case} | {query} | {summary(times[root])} | {values[root]:.12g} |", flush=True)
    if peers:
        peer_times: list[float] = []
        for _ in range(args.rounds):
            new, value = run(AUTODP_CHILD.format(calls=per_round))
            peer_times += new
        print(f"| autodp analytic Gaussian (ComposeGaussian) | mixed | epsilon | {summary(peer_times)} | "
              f"{value:.12g} |")
    else:
        print("\n(autodp is not importable: the peer is skipped)")


if __name__ == "__main__":
    main()
