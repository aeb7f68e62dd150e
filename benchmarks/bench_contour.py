"""Relative accuracy and speed of the contour-shifted inversion (method='contour').

Rows (see the contour-shifted inversion issue):

* composed Gaussians -- one mechanism, 100 and 10 000 distinct ones with
  random sigmas and counts up to 10^9 -- against the exact composed-Gaussian
  formula (Sommer, Meiser & Mohammadi 2019, Thm 5);
* Laplace (scale 1) x 100 -- atoms and all, the lattice contour -- against the
  exact mpmath enumeration in tests/_reference.py (its support ends at
  delta = 2^-100 ~ 8e-31, so its rows stop at 1e-30);
* 100 distinct mechanisms mixing Gaussians and Laplaces, error against the
  real-line quadrature where both are valid (delta >= 1e-5) and otherwise only
  timed;
* Zhu, Dong & Wang 2022, Exp 2 (Gaussian + RR, 1000 uses) against the exact binomial mixture.

For each: the median time of one delta(eps) (engine built), of one eps(delta)
on a warm accountant (another delta was asked before) and on a cold one
(engines rebuilt, so it includes compiling the composition), and the worst
relative errors of delta(eps) and of eps(delta) over delta = 1e-5 ... 1e-300.

Run: python benchmarks/bench_contour.py
"""

from __future__ import annotations

import math

import numpy as np
from references import delta_slope, laplace_delta_mpmath, relative_epsilon_offset
from timing import median_seconds

import afa
from afa.numerics import exact

TARGETS = (1e-5, 1e-10, 1e-30, 1e-100, 1e-300)


def timings(acc: afa.Accountant, epsilon: float, target: float) -> tuple[float, float, float]:
    """(ms per delta, ms per warm eps, ms per cold eps)."""
    delta_ms = 1e3 * median_seconds(lambda: acc.delta(epsilon, method="contour"))
    warm_targets = iter([target * 1.5 ** k for k in range(100)])
    warm_ms = 1e3 * median_seconds(lambda: acc.epsilon(next(warm_targets), method="contour"))

    def cold():
        acc.planner.clear()
        return acc.epsilon(target, method="contour")

    cold_ms = 1e3 * median_seconds(cold, repeats=3)
    return delta_ms, warm_ms, cold_ms


def print_row(name: str, times, delta_errors, epsilon_errors) -> None:
    """One table row; an error list that is empty (no reference) prints as '-'."""
    def worst(errors):
        return f"{max(errors):>11.1e}" if len(errors) else f"{'-':>11}"
    print(f"{name:<34} {times[0]:>8.2f} {times[1]:>8.1f} {times[2]:>8.1f} {worst(delta_errors)} {worst(epsilon_errors)}")


def gaussian_accountant(distinct: int, rng) -> tuple[afa.Accountant, float]:
    sigmas = rng.uniform(1.0, 10.0, distinct) * math.sqrt(1e9)
    counts = rng.integers(1, 10**9, distinct)
    acc = afa.Accountant()
    for sigma, count in zip(sigmas, counts):
        acc.compose(afa.Gaussian(float(sigma)), times=int(count))
    return acc, exact.gaussian_mu(sigmas, counts)


def main() -> None:
    print(f"{'composition':<34} {'ms/delta':>8} {'ms/eps':>8} {'cold eps':>8} "
          f"{'rel err d':>11} {'rel err eps':>11}")
    rng = np.random.default_rng(1)
    for distinct in (1, 100, 10_000):
        acc, mu = gaussian_accountant(distinct, rng)
        epsilons = [exact.gaussian_epsilon(d, mu) for d in TARGETS]
        delta_errors = [abs(acc.delta(e, method="contour") / exact.gaussian_delta(e, mu) - 1) for e in epsilons]
        epsilon_errors = [abs(acc.epsilon(d, method="contour") / e - 1) for d, e in zip(TARGETS, epsilons)]
        print_row(f"Gaussians, {distinct} distinct (mu={mu:.3g})", timings(acc, epsilons[2], 1e-30),
                  delta_errors, epsilon_errors)

    acc = afa.Accountant().compose(afa.Laplace(1.0), times=100)
    laplace_targets = TARGETS[:3]
    epsilons = [acc.epsilon(d, method="contour") for d in laplace_targets]
    truths = [laplace_delta_mpmath(e, 100, 1.0) for e in epsilons]
    delta_errors = [abs(acc.delta(e, method="contour") / t - 1) for e, t in zip(epsilons, truths)]
    # eps error from the reference: |delta_ref(eps_hat) / target - 1| / (eps |d log delta / d eps|).
    slopes = [delta_slope(lambda eps: laplace_delta_mpmath(eps, 100, 1.0), e, t) for e, t in zip(epsilons, truths)]
    epsilon_errors = [abs(relative_epsilon_offset(t, d, e, s))
                      for d, e, t, s in zip(laplace_targets, epsilons, truths, slopes)]
    print_row("Laplace(1) x 100 (to 1e-30)", timings(acc, epsilons[2], 1e-30), delta_errors, epsilon_errors)

    acc = afa.Accountant()
    for index in range(100):
        mechanism = afa.Gaussian(float(rng.uniform(5, 50))) if index % 4 else afa.Laplace(float(rng.uniform(20, 80)))
        acc.compose(mechanism, times=int(rng.integers(1, 100)))
    eps_5 = acc.epsilon(1e-5, method="contour")
    probe = np.array([0.5 * eps_5, eps_5])
    delta_errors = np.abs(acc.privacy_profile(probe, method="contour") / acc.privacy_profile(probe, method="quadrature") - 1)
    print_row("100 distinct Gaussian/Laplace (1e-5)", timings(acc, acc.epsilon(1e-30, method="contour"), 1e-30),
              delta_errors, [])

    acc = afa.Accountant().compose(afa.Gaussian(5.0), times=500).compose(afa.RandomizedResponse(0.52), times=500)
    exp2_targets = TARGETS[:3]
    epsilons = [acc.epsilon(d, method="exact") for d in exp2_targets]
    delta_errors = [abs(acc.delta(e, method="contour") / acc.delta(e, method="exact") - 1) for e in epsilons]
    epsilon_errors = [abs(acc.epsilon(d, method="contour") / e - 1) for d, e in zip(exp2_targets, epsilons)]
    print_row("Zhu, Dong & Wang 2022, Exp 2 (to 1e-30)", timings(acc, epsilons[2], 1e-30), delta_errors, epsilon_errors)


if __name__ == "__main__":
    main()
