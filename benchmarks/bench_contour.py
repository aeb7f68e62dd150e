"""Relative accuracy and speed of the contour-shifted inversion (method='contour').

For compositions of closed-form mechanisms (one Gaussian; 100 and 10 000
distinct Gaussians with random sigmas and counts up to 10^9), prints the
median time of one delta(eps) and of one eps(delta) (engines rebuilt for the
latter), and the worst relative error of delta against the exact composed
Gaussian formula (papers/004 Thm 5) at the eps where delta = 1e-5, 1e-30,
1e-100, 1e-300.  Then the same for papers/002 Exp 2 (Gaussian + RR, 1000
uses) against the exact binomial mixture, down to 1e-30.

Run: python benchmarks/bench_contour.py
"""

from __future__ import annotations

import math

import numpy as np

import afa
from afa import exact
from timing import median_seconds

TARGETS = (1e-5, 1e-30, 1e-100, 1e-300)


def gaussian_rows() -> None:
    print("Composed Gaussians, method='contour' vs papers/004 Thm 5")
    print(f"{'distinct':>8} {'mu':>8} {'ms/delta':>9} {'ms/eps':>8} " + " ".join(f"{'rel@' + format(d, '.0e'):>11}"
                                                                         for d in TARGETS))
    rng = np.random.default_rng(1)
    for distinct in (1, 100, 10_000):
        sigmas = rng.uniform(1.0, 10.0, distinct) * math.sqrt(1e9)
        counts = rng.integers(1, 10**9, distinct)
        acc = afa.Accountant()
        for sigma, count in zip(sigmas, counts):
            acc.compose(afa.Gaussian(float(sigma)), times=int(count))
        mu = exact.gaussian_mu(sigmas, counts)
        epsilons = [exact.gaussian_epsilon(d, mu) for d in TARGETS]
        errors = [abs(acc.delta(e, method="contour") / exact.gaussian_delta(e, mu) - 1) for e in epsilons]
        delta_ms = 1e3 * median_seconds(lambda: acc.delta(epsilons[1], method="contour"))

        def cold_epsilon():
            acc._engines.clear()
            return acc.epsilon(1e-30, method="contour")

        eps_ms = 1e3 * median_seconds(cold_epsilon, repeats=3)
        print(f"{distinct:>8d} {mu:>8.3g} {delta_ms:>9.2f} {eps_ms:>8.1f} " + " ".join(f"{e:>11.1e}" for e in errors))


def exp2_rows() -> None:
    print("\npapers/002 Exp 2 (Gaussian 5 and RR 0.52, 500 uses each), method='contour' vs exact mixture")
    acc = afa.Accountant().compose(afa.Gaussian(5.0), times=500).compose(afa.RandomizedResponse(0.52), times=500)
    print(f"{'delta':>8} {'eps':>10} {'rel error':>10} {'ms/delta':>9}")
    for target in (1e-5, 1e-10, 1e-20, 1e-30):
        eps = acc.epsilon(target, method="exact")
        truth = acc.delta(eps, method="exact")
        value = acc.delta(eps, method="contour")
        elapsed = 1e3 * median_seconds(lambda: acc.delta(eps, method="contour"))
        print(f"{target:>8.0e} {eps:>10.5f} {abs(value / truth - 1):>10.1e} {elapsed:>9.2f}")


if __name__ == "__main__":
    gaussian_rows()
    exp2_rows()
