"""Soundness fuzz: counts per check over many seeded random compositions.

    python benchmarks/fuzz.py --start 0 --count 10000 --workers 2 [--cross-every 10] [--progress progress.txt]

Each seed gives one composition (tests/_fuzz.py: 1-5 distinct mechanisms among Gaussian, Laplace,
randomized response, k-ary RR, discrete Laplace, discrete Gaussian and Poisson-subsampled Gaussian,
counts log-uniform in [1, 10^4], a random neighbouring relation, deltas log-uniform in [1e-30, 1e-3]).
Every check of ``check_composition`` is counted; a composition that does not finish within
``--hard-timeout`` seconds counts as a hang.  The table goes to stdout, each failure (seed, check,
detail) to ``--failures``.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from _fuzz import check_composition, random_composition  # noqa: E402


def _run(seed: int, budget: float, cross: bool, max_count: int):
    composition = random_composition(seed, max_count=max_count)
    try:
        outcome = check_composition(composition, budget_seconds=budget, cross_engines=cross)
    except Exception as error:  # a crash is a finding, not a reason to stop the fuzz
        return seed, repr(composition), [("no exception", False, f"{type(error).__name__}: {error}")], 0.0
    return seed, repr(composition), outcome.checks, outcome.seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--budget", type=float, default=30.0, help="time budget of each query (s)")
    parser.add_argument("--hard-timeout", type=float, default=300.0, help="a composition taking longer is a hang (s)")
    parser.add_argument("--max-count", type=int, default=10_000, help="largest count of one mechanism")
    parser.add_argument("--no-cross", action="store_true", help="skip the PLD cross-checks")
    parser.add_argument("--cross-every", type=int, default=1,
                        help="run the PLD cross-checks on every k-th seed only (they cost most of the time)")
    parser.add_argument("--markdown", default=None,
                        help="also write the table as a RESULTS.md section to this file (benchmarks/fuzz_results.md "
                             "is included by run_all.py)")
    parser.add_argument("--progress", default=None,
                        help="rewrite the table in this file every 100 compositions (a long run can be read early)")
    parser.add_argument("--failures", default="fuzz_failures.txt")
    args = parser.parse_args(argv)

    counts = collections.defaultdict(lambda: [0, 0])
    hangs, times = [], []
    began = time.monotonic()
    seeds = list(range(args.start, args.start + args.count))
    with open(args.failures, "w") as failures:
        while seeds:
            pool = multiprocessing.Pool(args.workers, maxtasksperchild=50)
            pending = {seed: pool.apply_async(_run, (seed, args.budget,
                                                     not args.no_cross and seed % args.cross_every == 0,
                                                     args.max_count))
                       for seed in seeds}
            seeds = []
            restart = False
            for seed, job in pending.items():
                if restart:
                    seeds.append(seed)
                    continue
                try:
                    _, text, checks, seconds = job.get(timeout=args.hard_timeout)
                except multiprocessing.TimeoutError:
                    hangs.append(seed)
                    counts["no hang"][1] += 1
                    failures.write(f"{seed}\tno hang\t{repr(random_composition(seed, max_count=args.max_count))}\n")
                    restart = True  # the stuck worker is terminated with the pool; the rest are resubmitted
                    continue
                counts["no hang"][0] += 1
                times.append(seconds)
                for name, passed, detail in checks:
                    counts[name][0 if passed else 1] += 1
                    if not passed:
                        failures.write(f"{seed}\t{name}\t{text}\t{detail}\n")
                failures.flush()
                if args.progress and len(times) % 100 == 0:
                    with open(args.progress, "w") as progress:
                        progress.write(_table(args, counts, times, hangs, time.monotonic() - began, len(times)))
            pool.terminate()
            pool.join()
    print(_table(args, counts, times, hangs, time.monotonic() - began, len(times)), end="")
    if args.markdown:
        with open(args.markdown, "w") as markdown:
            markdown.write(markdown_section(_table(args, counts, times, hangs, time.monotonic() - began, len(times))))
    return 0 if all(failed == 0 for _, failed in counts.values()) else 1


def _table(args, counts, times, hangs, elapsed: float, done: int) -> str:
    lines = [f"# afa soundness fuzz: seeds {args.start}..{args.start + args.count - 1} ({done} done), query budget "
             f"{args.budget:g} s, PLD cross-checks on seeds divisible by {args.cross_every}"
             f"{' (none)' if args.no_cross else ''}, {elapsed / 60:.1f} min on {args.workers} workers",
             f"{'check':45s} {'passed':>9s} {'failed':>7s}"]
    lines += [f"{name:45s} {passed:9d} {failed:7d}" for name, (passed, failed) in sorted(counts.items())]
    if times:
        ordered = sorted(times)
        lines.append(f"seconds per composition: median {ordered[len(ordered) // 2]:.2f}, max {ordered[-1]:.1f}")
    if hangs:
        lines.append("hangs (seeds): " + " ".join(map(str, hangs)))
    return "\n".join(lines) + "\n"


def markdown_section(text: str, note: str = "") -> str:
    """A RESULTS.md section from a table of :func:`_table` (its first line the header, then the counts)."""
    lines = text.rstrip("\n").split("\n")
    header, rows, rest = lines[0].lstrip("# "), [], []
    for line in lines[2:]:
        parts = line.rsplit(None, 2)
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            rows.append(f"| {parts[0]} | {parts[1]} | {parts[2]} |")
        else:
            rest.append(line)
    body = ["## 6. Soundness fuzz (benchmarks/fuzz.py)", "", header + ".", "", "| check | passed | failed |",
            "|---|---|---|"] + rows + [""] + [f"{line}  " for line in rest]
    return "\n".join(body + ([note] if note else [])) + "\n"


if __name__ == "__main__":
    sys.exit(main())
