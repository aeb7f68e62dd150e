"""Time to first epsilon: a fresh accountant's first eps(delta) per row, for two checkouts in one run.

Each (row, checkout) is timed in its own subprocess (afa and the third-party libraries it imports on first
use -- SymPy, mpmath, SciPy's submodules -- imported before the clock starts, so those imports are not counted;
afa's own modules and every cache the first query builds are), interleaved checkout by checkout and
repeated; the table gives each checkout's median and the ratio.  The machine is shared: read the ratios,
not the absolute times.

    python benchmarks/first_epsilon.py OLD_CHECKOUT NEW_CHECKOUT [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

ROWS = {
    "Gaussian(sigma=10) x 100, eps(1e-5)": "afa.Gaussian(10.0), 100, 1e-5",
    "DP-SGD MNIST: q=256/60000, sigma=1.1, 14063 steps, eps(1e-5)":
        "afa.Gaussian(1.1).poisson_subsampled(256 / 60000), 14063, 1e-5",
    "DP-SGD q=0.01, sigma=1, 1000 steps, eps(1e-5)": "afa.Gaussian(1.0).poisson_subsampled(0.01), 1000, 1e-5",
    "Laplace(1) x 100, eps(1e-5)": "afa.Laplace(1.0), 100, 1e-5",
    "RandomizedResponse(0.75) x 1000, eps(1e-6)": "afa.RandomizedResponse(0.75), 1000, 1e-6",
    "DiscreteLaplace(a=0.5) x 100, eps(1e-6)": "afa.DiscreteLaplace(0.5), 100, 1e-6",
    "KaryRandomizedResponse(k=5, p=0.6) x 100, eps(1e-6)": "afa.KaryRandomizedResponse(5, 0.6), 100, 1e-6",
    "Laplace(1).poisson_subsampled(0.1) x 100, eps(1e-5)": "afa.Laplace(1.0).poisson_subsampled(0.1), 100, 1e-5",
}

SCRIPT = """
import sys, time, json
sys.path.insert(0, {root!r})
import afa
assert afa.__file__.startswith({root!r}), afa.__file__
import mpmath, scipy.fft, scipy.optimize, scipy.special, scipy.stats, sympy  # third-party, imported lazily by afa
mechanism, times, delta = {row}
began = time.perf_counter()
acc = afa.Accountant()
acc.compose(mechanism, times=times)
value = float(acc.epsilon(delta))
print(json.dumps([time.perf_counter() - began, value]))
"""


def run(root: str, row: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(root=root, row=row)], capture_output=True, text=True,
                         check=True, cwd=root, env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                                                    "PATH": "/usr/bin:/bin"})
    seconds, value = json.loads(out.stdout.strip().splitlines()[-1])
    return seconds, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("| row | old (s) | new (s) | new / old | eps old | eps new |")
    print("|---|---|---|---|---|---|")
    for label, row in ROWS.items():
        times: dict[str, list[float]] = {"old": [], "new": []}
        values = {}
        for _ in range(args.repeats):
            for name in ("old", "new"):
                seconds, values[name] = run(getattr(args, name), row)
                times[name].append(seconds)
        old, new = statistics.median(times["old"]), statistics.median(times["new"])
        print(f"| {label} | {old:.3f} | {new:.3f} | {new / old:.2f} | {values['old']:.6f} | {values['new']:.6f} |",
              flush=True)


if __name__ == "__main__":
    main()
