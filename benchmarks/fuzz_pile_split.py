"""Random checks of the contour's pile/tail split (afa.engines.pile_split) against the step recursion.

Each seed draws one Poisson-subsampled Gaussian: sigma log-uniform in [0.5, 3], q log-uniform in [1e-4, 0.02],
k log-uniform in [2, 200] (or, with ``--many``, in [41, min(5000, 1.05 / log(1/(1 - q)))], the doubling's fast
reach) and delta log-uniform in [1e-30, 1e-3].  It builds the remove direction's split with the wide node
budget, makes it sum the two parts (not the whole law's line), and asks its eps(delta) bracket; then checks that
delta of the recursion (StepRecursion use by use, or DoublingRecursion with ``--many``) at the bracket's ends,
plus and minus its stated error, straddles the delta asked.

A refusal (AccuracyError) is counted, not a failure.  Prints one line per seed and a summary.

    python benchmarks/fuzz_pile_split.py --start 0 --count 40 [--many]
"""

from __future__ import annotations

import argparse
import math
import random
import time

import numpy as np

import afa
from afa.engines.base import ContourEngine
from afa.engines.composition import ComposedLoss
from afa.engines.pile_split import PileSplitContour
from afa.engines.step_recursion import DoublingRecursion, StepRecursion


def _composition(seed: int, many: bool) -> tuple[float, float, int, float]:
    rng = random.Random(seed)
    sigma = math.exp(rng.uniform(math.log(0.5), math.log(3.0)))
    q = math.exp(rng.uniform(math.log(1e-4), math.log(0.02)))
    if many:
        top = min(5000, int(1.05 / math.log(1 / (1 - q))))
        uses = int(round(math.exp(rng.uniform(math.log(41), math.log(max(top, 42))))))
    else:
        uses = int(round(math.exp(rng.uniform(math.log(2), math.log(200)))))
    delta = math.exp(rng.uniform(math.log(1e-30), math.log(1e-3)))
    return sigma, q, uses, delta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--many", action="store_true", help="41 to 5000 uses, checked by the doubling")
    arguments = parser.parse_args()
    wide = afa.ContourOptions().wide_numeric_nodes
    outcomes = {"agree": 0, "refused": 0, "outside": 0}
    seconds = []
    for seed in range(arguments.start, arguments.start + arguments.count):
        sigma, q, uses, delta = _composition(seed, arguments.many)
        remove = afa.Gaussian(sigma).poisson_subsampled(q).privacy_losses()[0]
        engine = ContourEngine(ComposedLoss({remove: uses}), numeric_nodes=wide)
        split = engine.inversion
        assert isinstance(split, PileSplitContour)
        split.whole_first = False
        began = time.perf_counter()
        try:
            epsilon, lower, upper = engine.epsilon_bracket(delta)
        except afa.AccuracyError as error:
            outcomes["refused"] += 1
            print(f"seed {seed}: sigma={sigma:.4g} q={q:.3g} k={uses} delta={delta:.3g}: refused "
                  f"({str(error)[:80]})", flush=True)
            continue
        seconds.append(time.perf_counter() - began)
        pair = remove.noise_pair
        recursion = DoublingRecursion(pair, uses) if arguments.many else StepRecursion([pair] * uses)
        values, errors = recursion.delta(np.array([lower, upper]))
        inside = (lower == 0.0 or values[0] + errors[0] >= delta) and values[1] - errors[1] <= delta
        outcomes["agree" if inside else "outside"] += 1
        print(f"seed {seed}: sigma={sigma:.4g} q={q:.3g} k={uses} delta={delta:.3g}: eps={epsilon:.10g} "
              f"width {(upper - lower) / max(epsilon, 1e-300):.1e} in {seconds[-1]:.2f} s: "
              f"{'inside' if inside else 'OUTSIDE'} the recursion's delta", flush=True)
    print(f"{outcomes}; seconds per answer: median {np.median(seconds) if seconds else math.nan:.2f}, "
          f"max {max(seconds, default=math.nan):.2f}")


if __name__ == "__main__":
    main()
