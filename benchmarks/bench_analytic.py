"""Accuracy and speed of the analytical accountant against closed forms.

Prints three tables:

1. composed Gaussians (Sommer, Meiser & Mohammadi 2019, Thm 5 is the truth): the real-line
   quadrature's worst |delta - exact| on eps in [0, 6], relative error of
   eps(delta), and the median time of one query;
2. Zhu, Dong & Wang 2022, Exp 2 (Gaussian sigma=5 alternating with RR p=0.52): delta(2.0)
   against the exact binomial mixture;
3. a composition of 100 distinct closed-form mechanisms: median time of one
   cold eps(delta) (engines rebuilt), with counts ~10^2, and with the counts
   times 10^9 and the noise times sqrt(10^9) (cost must not depend on counts).

Timings are medians over repeats; compare ratios, not absolute numbers.
Run: python benchmarks/bench_analytic.py
"""

from __future__ import annotations

import math

import numpy as np
from timing import median_seconds

import afa
from afa.numerics import exact


def cold(acc: afa.Accountant, query):
    """Run ``query`` on ``acc`` with its engines (quadrature grids) discarded first."""
    def run():
        acc.planner.clear()
        return query(acc)
    return run


def gaussian_table() -> None:
    print("\n1. Composed Gaussians, method='quadrature' vs Sommer, Meiser & Mohammadi 2019, Thm 5")
    print(f"{'sigma':>7} {'k':>9} {'mu':>6} {'max|d-d*|':>10} {'rel eps(1e-5)':>13} {'ms/delta':>9} {'ms/eps':>8}")
    epsilons = np.linspace(0, 6, 61)
    for sigma, count in [(0.5, 1), (1, 1), (2, 10), (5, 100), (50, 10_000), (100, 1), (100, 1_000_000)]:
        mu = math.sqrt(count) / sigma
        acc = afa.Accountant().compose(afa.Gaussian(sigma), times=count)
        try:
            profile = acc.privacy_profile(epsilons, method="quadrature")
            delta_error = f"{np.max(np.abs(profile - exact.gaussian_delta(epsilons, mu))):.1e}"
        except afa.AccuracyError:
            delta_error = "refused"
        try:
            eps = acc.epsilon(1e-5, method="quadrature")
            eps_error = f"{abs(eps / exact.gaussian_epsilon(1e-5, mu) - 1):.1e}"
            eps_time = f"{1e3 * median_seconds(cold(acc, lambda a: a.epsilon(1e-5, method='quadrature'))):.1f}"
        except afa.AccuracyError:
            eps_error, eps_time = "refused", "-"
        delta_time = 1e3 * median_seconds(cold(acc, lambda a: a.delta(1.0, method="quadrature")))
        print(f"{sigma:>7g} {count:>9d} {mu:>6.3g} {delta_error:>10} {eps_error:>13} {delta_time:>9.1f} {eps_time:>8}")


def exp2_table() -> None:
    print("\n2. Zhu, Dong & Wang 2022, Exp 2: Gaussian(5) and RR(0.52) alternating, delta(2.0)")
    print(f"{'k total':>8} {'quadrature':>20} {'exact':>20} {'|diff|':>9} {'est. err':>9} {'ms':>7}")
    for total in (10, 100, 1000, 10_000):
        acc = (afa.Accountant().compose(afa.Gaussian(5.0), times=total // 2)
               .compose(afa.RandomizedResponse(0.52), times=total // 2))
        result = acc.delta_result(2.0, method="quadrature")
        truth = acc.delta(2.0, method="exact")
        elapsed = 1e3 * median_seconds(cold(acc, lambda a: a.delta(2.0, method="quadrature")))
        print(f"{total:>8d} {result.value:>20.15g} {truth:>20.15g} {abs(result.value - truth):>9.1e} "
              f"{result.error:>9.1e} {elapsed:>7.1f}")


def distinct_mechanisms_table() -> None:
    print("\n3. 100 distinct closed-form mechanisms (40 Gaussian, 30 Laplace, 30 RR), cold eps(1e-5)")
    print("   counts k_i <= 100, then k_i * 10^9 with every mechanism's noise scaled by sqrt(10^9)")
    print("   (so the composition, and its eps, stay comparable: only the counts change)")
    rng = np.random.default_rng(0)
    sigmas, scales = rng.uniform(20, 200, 40), rng.uniform(20, 200, 30)
    biases = rng.uniform(0.0, 0.01, 30)
    counts = rng.integers(1, 100, size=100)
    print(f"{'count factor':>12} {'eps(1e-5)':>14} {'median ms':>10} {'nodes':>8}")
    for factor in (1, 10**9):
        root = math.sqrt(factor)
        mechanisms = ([afa.Gaussian(float(s * root)) for s in sigmas]
                      + [afa.Laplace(float(b * root)) for b in scales]
                      + [afa.RandomizedResponse(0.5 + float(b) / root) for b in biases])
        acc = afa.Accountant()
        for mechanism, count in zip(mechanisms, counts):
            acc.compose(mechanism, times=int(count) * factor)
        eps = acc.epsilon(1e-5, method="quadrature")
        elapsed = 1e3 * median_seconds(cold(acc, lambda a: a.epsilon(1e-5, method="quadrature")))
        nodes = acc.planner.engines("quadrature")[0].inversion._grids["delta"].nodes.size
        print(f"{factor:>12.0e} {eps:>14.6g} {elapsed:>10.1f} {nodes:>8d}")


if __name__ == "__main__":
    gaussian_table()
    exp2_table()
    distinct_mechanisms_table()
