"""eps(delta) of DataDependentGaussian(1, 1.5, 1) x k (k = 2, 3, 4) under method="auto" and method="pld".

Each (k, delta, method) is timed in a fresh subprocess (afa and its lazily imported libraries loaded before the
clock): the first query on a fresh accountant, then the same query on a second fresh accountant ("again": the
mechanism's losses are cached).  The reference is the eps where the 30-digit noncentral chi-square integral of the
composed loss (the larger of the two directions) crosses delta, found by bisection in mpmath; the table gives
afa's eps, its stated bracket, and |eps - reference|.  The machine is shared: compare rows of one run.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_data_dependent.py [--runs 3] [--markdown PATH]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

import mpmath as mp

SIGMA1, SIGMA2, SENSITIVITY = 1.0, 1.5, 1.0
ROWS = [(k, delta) for k in (2, 3, 4) for delta in (1e-5, 1e-10, 1e-20)]

CHILD = r"""
import json, sys, time
import afa, mpmath, scipy.special, scipy.optimize, sympy  # noqa: F401  (imported before the clock)
mechanism = afa.DataDependentGaussian({s1!r}, {s2!r}, {m!r})
out = []
for _ in range(2):
    began = time.perf_counter()
    result = afa.Accountant().compose(mechanism, times={k!r}).epsilon_result({delta!r}, method={method!r})
    out.append([time.perf_counter() - began, result.value, result.lower, result.upper, result.method])
print(json.dumps(out))
"""


def run(k: int, delta: float, method: str) -> list:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    source = CHILD.format(s1=SIGMA1, s2=SIGMA2, m=SENSITIVITY, k=k, delta=delta, method=method)
    out = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def chi_square_delta(eps: mp.mpf, k: int, direction: str) -> mp.mpf:
    """delta(eps) of k uses in one direction: the hockey-stick payoff integrated against the noncentral
    chi-square law of the composed quadratic loss, in mpmath (L = k L* + gamma W, W ~ chi'^2_k(k z*^2))."""
    own, other = (SIGMA1, SIGMA2) if direction == "remove" else (SIGMA2, SIGMA1)
    mu, rho = mp.mpf(SENSITIVITY) / own, mp.mpf(other) / own
    gamma = (1 - rho ** 2) / (2 * rho ** 2)
    vertex = mu / (1 - rho ** 2)
    extreme = mp.log(rho) - mu ** 2 / (2 * (1 - rho ** 2))
    lam, nu, base = k * vertex ** 2, mp.mpf(k) / 2, k * extreme

    def density(w):
        return mp.exp(-(w + lam) / 2) / 2 * (w / lam) ** (nu / 2 - mp.mpf(1) / 2) * mp.besseli(nu - 1, mp.sqrt(lam * w))

    cut = (eps - base) / gamma
    if gamma > 0:
        low = max(cut, mp.mpf(0))
        scale = density(low + 1)
        points = [low] + [low + d for d in (0.01, 0.1, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256)] + [mp.inf]
        return scale * mp.quad(lambda w: density(w) * -mp.expm1(eps - base - gamma * w) / scale, points)
    if cut <= 0:
        return mp.mpf(0)
    return mp.quad(lambda w: density(w) * -mp.expm1(eps - base - gamma * w),
                   [0, cut * mp.mpf("1e-4"), cut * mp.mpf("1e-2"), cut / 2, cut])


def reference_epsilon(k: int, delta: float, guess: float) -> mp.mpf:
    """The eps where max over directions of chi_square_delta crosses delta (bisection to 1e-15 relative)."""
    with mp.workdps(30):
        def value(eps):
            return max(chi_square_delta(mp.mpf(eps), k, direction) for direction in ("remove", "add"))

        low, high = mp.mpf(guess) * (1 - mp.mpf("1e-6")), mp.mpf(guess) * (1 + mp.mpf("1e-6"))
        while value(low) <= delta:
            low -= (high - low)
        while value(high) > delta:
            high += (high - low)
        while high - low > mp.mpf("1e-15") * high:
            middle = (low + high) / 2
            low, high = (middle, high) if value(middle) > delta else (low, middle)
        return (low + high) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per row of method='auto'")
    parser.add_argument("--pld-runs", type=int, default=1, help="fresh processes per row of method='pld' (slow)")
    parser.add_argument("--markdown", help="also write the table as a RESULTS.md section to this file")
    args = parser.parse_args()
    lines = ["| k | δ | method | first s | again s | ε | stated bracket width | abs. error vs reference |",
             "|---:|---:|---|---:|---:|---:|---:|---:|"]
    for k, delta in ROWS:
        reference = None
        for method in ("auto", "pld"):
            runs = [run(k, delta, method) for _ in range(args.runs if method == "auto" else args.pld_runs)]
            first = statistics.median(r[0][0] for r in runs)
            again = statistics.median(r[1][0] for r in runs)
            _, value, lower, upper, answered = runs[0][0]
            if reference is None:
                reference = reference_epsilon(k, delta, value)
            error = float(abs(mp.mpf(value) - reference))
            lines.append(f"| {k} | {delta:g} | {answered} | {first:.3f} | {again:.3f} | {value:.12f} | "
                         f"{upper - lower:.1e} | {error:.1e} |")
            print(lines[-1], flush=True)
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        day = datetime.date.today().isoformat()
        text = ("## 17. Data-dependent Gaussians, 2-4 uses (benchmarks/bench_data_dependent.py)\n\n"
                f"`benchmarks/bench_data_dependent.py --runs {args.runs} --pld-runs {args.pld_runs}`, run {day} on the "
                "shared 2-core machine "
                f"with one BLAS thread: eps(delta) of DataDependentGaussian({SIGMA1:g}, {SIGMA2:g}, {SENSITIVITY:g}) "
                "x k on a fresh accountant, medians of fresh processes (\"again\": a second accountant in the same "
                "process).  The reference is the eps where the 30-digit noncentral chi-square integral crosses "
                "delta.\n\n" + table + "\n")
        with open(args.markdown, "w") as handle:
            handle.write(text)


if __name__ == "__main__":
    main()
