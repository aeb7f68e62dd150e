"""Few steps of a small sampling rate under method='auto' (issue 22, point 3): which engine answers, how
tight, how fast.

Each row composes a Poisson-subsampled Gaussian k times on a fresh accountant with the default options and
budget and asks eps(delta), once, in this process (afa imported and warmed up by one DP-SGD query first).
The relative width is (upper - lower) / eps of the answer's stated bracket.  Prints a markdown table.

    python benchmarks/bench_near_atom.py
"""

from __future__ import annotations

import time

import afa

ROWS = [(2.0, 0.001, 10, 1e-5), (0.8, 0.001, 10, 1e-5), (1.0, 0.001, 10, 1e-5), (2.0, 0.001, 5, 1e-5),
        (2.0, 0.01, 2, 1e-5), (0.8, 0.01, 5, 1e-5), (0.8, 0.001, 50, 1e-5), (1.0, 0.001, 100, 1e-5),
        (0.8, 0.001, 100, 1e-6), (0.8, 0.001, 1000, 1e-6), (2.0, 0.001, 1000, 1e-6), (2.0, 0.001, 10, 1e-14),
        (2.0, 0.001, 10, 1e-30), (0.8, 0.01, 10, 1e-30), (1.0, 0.01, 100, 1e-5), (0.8, 0.001, 100_000, 1e-10),
        # a few dozen uses of a small q: beyond the contour's default node budget
        (2.0, 0.001, 16, 1e-5), (2.0, 0.001, 20, 1e-5), (0.8, 0.01, 20, 1e-5), (0.8, 0.001, 13, 1e-10),
        (1.0, 0.001, 16, 1e-10), (2.0, 0.001, 30, 1e-10), (0.8, 0.001, 40, 1e-10),
        # beyond 40 uses, where the contour's node errors forbid an answer at a tiny delta
        (2.0, 0.001, 50, 1e-10), (2.0, 0.001, 100, 1e-10),
        # beyond 200 uses at a tiny delta (the recursion by doubling)
        (2.0, 0.001, 300, 1e-10), (2.0, 0.001, 1000, 1e-12), (1.0, 0.001, 500, 1e-12), (2.0, 0.001, 3000, 1e-15),
        # beyond the doubling's fast reach (k log(1/(1 - q)) > 1.05): the PLD's bracket, then the far doubling
        (2.0, 0.001, 1100, 1e-30), (2.0, 0.001, 3000, 1e-30), (2.0, 0.001, 10_000, 1e-15),
        # the whole law's contour refuses or runs long: the wide contour's pile/tail split (afa.engines.pile_split)
        (0.8, 0.001, 50, 1e-10), (1.0, 0.001, 100, 1e-10), (0.8, 0.001, 100, 1e-30), (1.0, 0.001, 1000, 1e-30),
        (2.0, 0.01, 100, 1e-30), (2.0, 0.001, 10_000, 1e-30)]


def main() -> None:
    afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01), 100).epsilon_result(1e-5)
    print("| σ | q | k | δ | method | ε | relative width | time |")
    print("|---|---|---|---|---|---|---|---|")
    for sigma, q, steps, delta in ROWS:
        accountant = afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), steps)
        began = time.perf_counter()
        try:
            result = accountant.epsilon_result(delta)
            cells = [result.method, f"{result.value:.12g}", f"{(result.upper - result.lower) / result.value:.1e}"]
        except afa.AccuracyError as error:
            cells = [type(error).__name__, "", ""]
        seconds = time.perf_counter() - began
        print(f"| {sigma:g} | {q:g} | {steps} | {delta:g} | " + " | ".join(cells) + f" | {seconds:.2f} s |", flush=True)


if __name__ == "__main__":
    main()
