"""method='pld' on compositions with finite-output mechanisms: afa's default (finite terms composed exactly,
then mixed over the other terms' PLDs, afa.engines.mixed_pld, or put on the grid as one use each) against every use
rounded on one grid, in the same process.

Rows (eps(delta) on a fresh accountant, both directions):

* issue 16, case 3: Poisson-subsampled Gaussian (sigma 0.909, q 0.0747) x4 + DiscreteGaussian(0.703) x522,
  substitution, delta 1.22e-6 (the contour's estimate is 679.86524267);
* fuzz seed 4501: DiscreteLaplace(1.986, 2) x206 + subsampled Gaussian (0.660, 0.0324) x9 +
  DiscreteGaussian(2.845, 2) x12 + DiscreteGaussian(19.80, 2) x1, delta 8.9e-18;
* RR(0.75) x40 + Laplace(2) x10, delta 1e-6;
* Gaussian(22.67) x9 + DiscreteLaplace(0.105) x2101, substitution, delta 1e-5 (exact: 31.328623953);
* fuzz seed 4462 (finite terms only, too many atoms for the exact engine): DiscreteLaplace(0.138) x1151 +
  k-RR(3, 0.733) x635 + DiscreteGaussian(12.76) x9815 + DiscreteGaussian(2.767, 2) x8, delta 1.1e-15;
* fuzz seed 599 (finite terms only): DiscreteLaplace(0.696) x2490 + DiscreteGaussian(5.76, 2) x884 +
  DiscreteGaussian(10.08) x8308 + k-RR(5, 0.306) x139 + k-RR(3, 0.891) x29, add/remove, delta 5.2e-30.

"every use on one grid" is the same accountant with no finite term kept exact (the mixture's atom limit
``afa.ExactOptions(max_atoms=1)``), none composed exactly before the grid (``AtomTails.POWER_ATOMS = 0``) and the
general grid rule for finite-only compositions too (``afa.engines.planner.EXACT_POWER_POINTS = PLD_POINTS``).  A cell is the median of ``--repeats``
runs, the two variants alternating; the machine is shared, so compare within a run.

Run: python benchmarks/bench_mixed_pld.py [--repeats 3] [--markdown benchmarks/mixed_pld_results.md]
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import time
from pathlib import Path

import afa
from afa.engines import planner
from afa.mechanisms.loss_tails import AtomTails


def cases() -> dict:
    def case3():
        acc = afa.Accountant(neighboring="substitution")
        acc.compose(afa.Gaussian(sigma=0.9094952892879938).poisson_subsampled(0.07469277030303016), times=4)
        return acc.compose(afa.DiscreteGaussian(sigma=0.7031323755755451, sensitivity=1), times=522)

    def seed4501():
        acc = afa.Accountant()
        acc.compose(afa.DiscreteLaplace(1.9863721235258724, 2), 206)
        acc.compose(afa.Gaussian(0.65963203955266).poisson_subsampled(0.032436181619257286), 9)
        acc.compose(afa.DiscreteGaussian(2.8447208667456643, 2), 12)
        return acc.compose(afa.DiscreteGaussian(19.799769054041956, 2), 1)

    def rr_laplace():
        return afa.Accountant().compose(afa.RandomizedResponse(0.75), 40).compose(afa.Laplace(2.0), 10)

    def gaussian_dlap():
        acc = afa.Accountant(neighboring="substitution")
        acc.compose(afa.Gaussian(sigma=22.674243728764907), times=9)
        return acc.compose(afa.DiscreteLaplace(a=0.10499846946844932, sensitivity=1), times=2101)

    def seed4462():
        acc = afa.Accountant()
        acc.compose(afa.DiscreteLaplace(0.13846004391539535, 1), 1151)
        acc.compose(afa.KaryRandomizedResponse(3, 0.7333626880287856), 635)
        acc.compose(afa.DiscreteGaussian(12.764719107401744, 1), 9815)
        return acc.compose(afa.DiscreteGaussian(2.7670585954977587, 2), 8)

    def seed599():
        acc = afa.Accountant()
        acc.compose(afa.DiscreteLaplace(0.6956608482551473, 1), 2490)
        acc.compose(afa.DiscreteGaussian(5.760805026242195, 2), 884)
        acc.compose(afa.DiscreteGaussian(10.083872375826429, 1), 8308)
        acc.compose(afa.KaryRandomizedResponse(5, 0.30552004028388186), 139)
        return acc.compose(afa.KaryRandomizedResponse(3, 0.8910241025495089), 29)

    return {
        "issue 16 case 3, eps(1.22e-6)": (case3, 1.2240781897817797e-06),
        "fuzz seed 4501, eps(8.9e-18)": (seed4501, 8.919239881448835e-18),
        "RR x40 + Laplace x10, eps(1e-6)": (rr_laplace, 1e-6),
        "Gaussian x9 + DLap x2101, eps(1e-5)": (gaussian_dlap, 1e-5),
        "fuzz seed 4462 (finite only), eps(1.1e-15)": (seed4462, 1.107603966782953e-15),
        "fuzz seed 599 (finite only), eps(5.2e-30)": (seed599, 5.201665718849089e-30),
    }


def run(build, delta: float, single_grid: bool) -> tuple[float, afa.Result]:
    saved = AtomTails.POWER_ATOMS, planner.EXACT_POWER_POINTS
    if single_grid:
        AtomTails.POWER_ATOMS, planner.EXACT_POWER_POINTS = 0, planner.PLD_POINTS
    try:
        accountant = build()
        accountant.budget = afa.Budget(seconds=600)
        if single_grid:
            accountant.options = afa.Options(exact=afa.ExactOptions(max_atoms=1))
        start = time.perf_counter()
        result = accountant.epsilon_result(delta, method="pld")
        return time.perf_counter() - start, result
    finally:
        AtomTails.POWER_ATOMS, planner.EXACT_POWER_POINTS = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--markdown", type=Path, help="also write the table as a RESULTS.md section here")
    args = parser.parse_args()
    lines = ["| composition | afa s | every use on one grid s | ratio | afa bracket | every-use bracket |",
             "|---|---:|---:|---:|---|---|"]
    for name, (build, delta) in cases().items():
        times = {False: [], True: []}
        results = {}
        for _ in range(args.repeats):
            for single in (False, True):
                seconds, results[single] = run(build, delta, single)
                times[single].append(seconds)
        mixed, single = (statistics.median(times[flag]) for flag in (False, True))
        brackets = [f"[{results[flag].lower:.10g}, {results[flag].upper:.10g}]" for flag in (False, True)]
        lines.append(f"| {name} | {mixed:.2f} | {single:.2f} | {single / mixed:.1f} | {brackets[0]} | {brackets[1]} |")
        print(lines[-1], flush=True)
    if args.markdown:
        day = datetime.date.today().isoformat()
        text = ("## 15. PLD with finite-output terms composed exactly\n\n"
                f"`benchmarks/bench_mixed_pld.py --repeats {args.repeats}`, run {day}: eps(delta) through "
                "`method=\"pld\"` on a fresh accountant (both directions), afa's default against every use rounded on one "
                "grid (`afa.ExactOptions(max_atoms=1)` for the mixture, `AtomTails.POWER_ATOMS = 0`, the general grid rule), medians "
                "over the repeats, the two alternating in one process on the shared 2-core machine.\n\n" + "\n".join(lines) + "\n")
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
