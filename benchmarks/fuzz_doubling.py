"""Random checks of the doubling recursion (afa.engines.step_recursion.DoublingRecursion) against two
independent algorithms.

Each seed draws one Poisson-subsampled Gaussian within the doubling's reach: sigma log-uniform in [0.5, 3],
q log-uniform in [1e-4, 0.05], k log-uniform in [41, min(5000, 1.05 / log(1/(1 - q)))], delta log-uniform in
[1e-30, 1e-3].  It asks each direction's step-recursion engine for eps(delta) (so both directions are built,
as 'auto' does only when a Chernoff bound cannot rule one out) and checks that

* the bracket lies inside the PLD's certified bracket (method='pld'), and
* for k <= 200, that delta of the recursion use by use (StepRecursion) at the bracket's ends, plus and minus
  its stated error, straddles the delta asked (eps = 0 when delta(0) is already below it).

With ``--far`` each seed draws k beyond the doubling's fast reach instead (and beyond MAX_USES), up to
FAR_REACH: log-uniform in [max(MAX_REACH / log(1/(1 - q)), MAX_USES + 1), min(FAR_REACH / log(1/(1 - q)),
FAR_USES)], and asks
the far doubling's engines ('auto''s last resort, afa.engines.planner.FAR_DOUBLING); the second check is
then the contour with its wide node budget where it answers: its eps and the doubling's must agree within the
sum of their stated errors.

A refusal (AccuracyError) is counted, not a failure.  Prints one line per seed and a summary.

    python benchmarks/fuzz_doubling.py --start 0 --count 80 [--far]
"""

from __future__ import annotations

import argparse
import math
import random
import time

import numpy as np

import afa
from afa.engines import planner
from afa.engines.step_recursion import FAR_REACH, FAR_USES, MAX_REACH, MAX_USES, StepRecursion


def _composition(seed: int, far: bool = False) -> tuple[float, float, int, float] | None:
    rng = random.Random(seed)
    sigma = math.exp(rng.uniform(math.log(0.5), math.log(3.0)))
    q = math.exp(rng.uniform(math.log(1e-4), math.log(0.05)))
    top = int(MAX_REACH / -math.log1p(-q))
    if far:
        bottom, top = max(top + 1, MAX_USES + 1), min(int(FAR_REACH / -math.log1p(-q)), FAR_USES)
    else:
        bottom, top = planner.DOUBLING_FROM, min(top, 5000)
    if top <= bottom:
        return None
    count = int(math.exp(rng.uniform(math.log(bottom), math.log(top))))
    return sigma, q, count, math.exp(rng.uniform(math.log(1e-30), math.log(1e-3)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=80)
    parser.add_argument("--far", action="store_true", help="counts beyond the doubling's fast reach")
    args = parser.parse_args()
    tally = {"inside the PLD bracket": 0, "outside the PLD bracket": 0, "agrees use by use": 0,
             "disagrees use by use": 0, "agrees with the wide contour": 0, "disagrees with the wide contour": 0,
             "refused": 0}
    seconds = []
    for seed in range(args.start, args.start + args.count):
        drawn = _composition(seed, args.far)
        if drawn is None:
            continue
        sigma, q, count, delta = drawn
        accountant = afa.Accountant().compose(afa.Gaussian(sigma).poisson_subsampled(q), count)
        began = time.perf_counter()
        engines = accountant.planner.engines(planner.FAR_DOUBLING if args.far else planner.STEP_RECURSION)
        try:
            estimate, lower, upper = max(engine.epsilon_bracket(delta) for engine in engines)
        except afa.AccuracyError as error:
            tally["refused"] += 1
            print(f"{seed} sigma={sigma:.3g} q={q:.3g} k={count} delta={delta:.1e} refused: {str(error)[:90]}")
            continue
        seconds.append(time.perf_counter() - began)
        certified = accountant.epsilon_result(delta, method="pld")
        inside = certified.lower <= lower and upper <= certified.upper
        tally["inside the PLD bracket" if inside else "outside the PLD bracket"] += 1
        line = (f"{seed} sigma={sigma:.3g} q={q:.3g} k={count} delta={delta:.1e} eps={estimate:.10g} "
                f"width={(upper - lower) / max(estimate, 1e-300):.1e} {seconds[-1]:.1f}s "
                f"{'inside' if inside else 'OUTSIDE'} [{certified.lower:.8g}, {certified.upper:.8g}]")
        if count <= MAX_USES:
            pairs = [accountant.planner.step_recursion(index).use.pair
                     for index in accountant.planner.distinct_directions]
            ends = [StepRecursion([pair] * count).delta(np.array([lower, upper])) for pair in pairs]
            above = max(float(values[0] + errors[0]) for values, errors in ends)
            below = max(float(values[1] - errors[1]) for values, errors in ends)
            agrees = (above >= delta or lower == 0.0) and below <= delta
            tally["agrees use by use" if agrees else "disagrees use by use"] += 1
            line += " use by use: " + ("agrees" if agrees else f"DISAGREES ({above:.6g}, {below:.6g})")
        if args.far:
            try:
                contour = accountant.epsilon_result(delta, method=planner.WIDE_CONTOUR)
            except afa.AccuracyError:
                line += " wide contour: refused"
            else:
                agrees = abs(contour.value - estimate) <= contour.error + (upper - lower) / 2
                tally["agrees with the wide contour" if agrees else "disagrees with the wide contour"] += 1
                line += f" wide contour: {'agrees' if agrees else 'DISAGREES'} ({contour.value:.12g})"
        print(line, flush=True)
    print("\n| check | compositions |\n|---|---|")
    for name, number in tally.items():
        print(f"| {name} | {number} |")
    if seconds:
        seconds.sort()
        print(f"\nseconds per eps(delta), both directions: median {seconds[len(seconds) // 2]:.1f}, "
              f"max {seconds[-1]:.1f}")


if __name__ == "__main__":
    main()
