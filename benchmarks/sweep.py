"""afa.sweep at population scale (issue 21): a DP-SGD grid serially, on local processes and on a 2-worker
Dask LocalCluster, and per-record accounting of 10^6 synthetic records.

1. The grid: sigma in 40 values (geometric, 0.6 to 6), sampling rate q in 10 (geometric, 1e-3 to 0.1), steps
   in 25 (geometric, 100 to 100 000), delta = 1e-5: 10^4 configurations, all distinct.  A query takes about
   0.3 s here (more in the "near-atom" corner of few steps at a small q), so the whole grid is about an hour
   of one core: the script times a random SUBSET of it (seeded) with each back-end and extrapolates the
   serial time per composition to 10^4.  Parallel efficiency = serial time / parallel time (2 workers).
2. Per-record accounting: 10^6 records, each in one of 100 participation counts (steps 100..10 000) and with
   a clip-relative sensitivity in [0, 1] rounded up to 10 buckets (0.1, ..., 1.0): 1000 distinct
   compositions.  (a) known participation, no subsampling: steps uses of Gaussian(sigma / bucket), the
   closed form; (b) Poisson-subsampled (q = 0.01) with 10 participation counts: 100 distinct compositions.
   Wall time and peak resident memory (getrusage: this process, and the largest worker).

Run: PYTHONPATH=. python benchmarks/sweep.py [--subset N] [--repeats R] [--skip-dask]  (about 6 minutes on 2 idle cores).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import time
from pathlib import Path

import numpy as np

import afa
from afa import sweep as sw

ROOT = Path(__file__).resolve().parents[1]
GRID = {"sigma": [float(x) for x in np.geomspace(0.6, 6.0, 40)],
        "sampling_rate": [float(x) for x in np.geomspace(1e-3, 0.1, 10)],
        "steps": sorted({int(round(x)) for x in np.geomspace(100, 100_000, 25)}),
        "delta": [1e-5]}


def peak_mib(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # Linux reports KiB


def _dask_cluster():
    """A 2-worker LocalCluster, one thread each (Dask's settings apply as set when it is created)."""
    import distributed

    return distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)


def _warm_up() -> float:
    """Import afa and answer one DP-SGD query (which loads the contour engine's modules): what a long-lived
    worker has already done before a sweep arrives.  Returns the seconds taken."""
    start = time.perf_counter()
    accountant = afa.Accountant()
    accountant.compose(afa.Gaussian(1.0).poisson_subsampled(0.01), times=100)
    accountant.epsilon(1e-5)
    return time.perf_counter() - start


def grid_benchmark(subset: int, skip_dask: bool, repeats: int) -> list[str]:
    rows = sw.grid(GRID)
    chosen = np.random.default_rng(2026).choice(len(rows), size=subset, replace=False)
    sample = [rows[i] for i in sorted(chosen)]
    lines = [f"Grid: {len(rows)} configurations (sigma x q x steps = {len(GRID['sigma'])} x "
             f"{len(GRID['sampling_rate'])} x {len(GRID['steps'])}, delta 1e-5); timed on a seeded random subset of "
             f"{subset}; the back-ends alternate, {repeats} round(s), medians.", "",
             "| back-end | wall (s), median | walls of the rounds (s) | speed-up vs serial | median query (ms) | "
             "workers busy | failed |", "|---|---|---|---|---|---|---|"]
    backends = ["serial (workers=1)", "local processes (workers=2)"]
    if not skip_dask:
        import dask
        import distributed

        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        backends += ["Dask LocalCluster (2 workers x 1 thread)", "Dask LocalCluster, profiler off"]
    reports: dict[str, list] = {name: [] for name in backends}
    started: list[float] = []
    for _ in range(repeats):
        reports[backends[0]].append(sw.sweep(sample, workers=1, quiet=True))
        reports[backends[1]].append(sw.sweep(sample, workers=2, quiet=True))
        for name, profile in zip(backends[2:], (True, False)):
            start = time.perf_counter()
            with dask.config.set({"distributed.worker.profile.enabled": profile}), _dask_cluster() as cluster, \
                    distributed.Client(cluster) as client:
                client.run(_warm_up)
                started.append(time.perf_counter() - start)
                reports[name].append(sw.sweep(sample, client=client, quiet=True))
    serial_wall = statistics.median(report.seconds for report in reports[backends[0]])
    for name, runs in reports.items():
        # Busy fraction: summed query time over (workers x wall) -- how well the sweep keeps its workers fed;
        # the median query time shows how much slower each query runs when two share the machine.
        report = sorted(runs, key=lambda run: run.seconds)[len(runs) // 2]
        queries = [row["seconds"] or 0.0 for row in report.rows]
        workers = 1 if name == backends[0] else 2
        lines.append(f"| {name} | {report.seconds:.1f} | {', '.join(f'{run.seconds:.1f}' for run in runs)} | "
                     f"{serial_wall / report.seconds:.2f}x | {1000 * statistics.median(queries):.0f} | "
                     f"{sum(queries) / (workers * report.seconds):.0%} | {sum(run.failed for run in runs)} |")
    for name, runs in reports.items():
        for report in runs:
            for row in report.rows:
                if row["error_message"]:
                    lines.append(f"<!-- {name}: row {row['row']} (sigma {row['sigma']:.4g}, q "
                                 f"{row['sampling_rate']:.4g}, steps {row['steps']}) failed: "
                                 f"{row['error_message'][:300]} -->")
    serial = reports[backends[0]][0]
    per_query = [row["seconds"] for row in serial.rows]
    methods: dict[str, int] = {}
    for row in serial.rows:
        methods[row["method"]] = methods.get(row["method"], 0) + 1
    processes_wall = statistics.median(report.seconds for report in reports[backends[1]])
    lines += ["", f"Per query (serial, first round): median {1000 * statistics.median(per_query):.0f} ms, "
                  f"90 % {1000 * float(np.quantile(per_query, 0.9)):.0f} ms, max {max(per_query):.1f} s; methods "
                  + ", ".join(f"{name} {count}" for name, count in sorted(methods.items())) + ".",
              *([f"The Dask walls are of a warm cluster: started, afa imported and one query answered in each "
                 f"worker first (cluster start-up and warm-up {min(started):.1f}-{max(started):.1f} s, not counted)."]
                if started else []),
              f"Extrapolated to all {len(rows)} configurations: serial {serial_wall / subset * len(rows) / 60:.0f} "
              f"min; 2 local processes {processes_wall / subset * len(rows) / 60:.0f} min."]
    return lines


def per_record_benchmark() -> list[str]:
    rng = np.random.default_rng(21)
    n = 1_000_000
    lines = ["| population | records | distinct compositions | workers | wall (s) | summed query time (s) | "
             "peak RSS driver / worker (MiB) | epsilon min / median / max |", "|---|---|---|---|---|---|---|---|"]
    buckets = np.linspace(0.1, 1.0, 10)
    cases = [("known participation, Gaussian(sigma / bucket) x steps, sigma = 20", 100, None, 20.0),
             ("Poisson q = 0.01, subsampled Gaussian(sigma / bucket) x steps, sigma = 2", 10, 0.01, 2.0)]
    for label, step_values, q, sigma in cases:
        steps = rng.choice(np.linspace(100, 10_000, step_values).astype(int), size=n)
        sensitivity = rng.uniform(0.0, 1.0, size=n)
        for workers in (1, 2):
            if q is not None and workers == 1:
                continue  # the subsampled case only in parallel (a serial run doubles the script's time)
            start = time.perf_counter()
            out = sw.per_record(steps, sensitivity, sigma=sigma, sampling_rate=q, buckets=buckets, delta=1e-6,
                                workers=workers, quiet=True)
            wall = time.perf_counter() - start
            evaluation = sum(row["seconds"] for row in out.compositions)
            s = out.summary
            lines.append(f"| {label} | {n:,} | {s['compositions']} | {workers} | {wall:.1f} | {evaluation:.1f} | "
                         f"{peak_mib(resource.RUSAGE_SELF):.0f} / {peak_mib(resource.RUSAGE_CHILDREN):.0f} | "
                         f"{s['min']:.3f} / {s['quantiles'][0.5]:.3f} / {s['max']:.3f} |")
            lines.append(f"<!-- {label}, workers {workers}: {1000 * evaluation / s['compositions']:.0f} ms per "
                         f"composition, failed {s['failed']} -->")
    start = time.perf_counter()
    pairs = np.column_stack([rng.choice(100, size=n).astype(float), rng.uniform(0, 1, size=n).round(1)])
    np.unique(pairs, axis=0, return_inverse=True)
    lines.append(f"\nnp.unique over 10^6 (steps, bucket) pairs alone: {time.perf_counter() - start:.2f} s.")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subset", type=int, default=200)
    parser.add_argument("--skip-dask", action="store_true")
    parser.add_argument("--skip-grid", action="store_true")
    parser.add_argument("--skip-per-record", action="store_true")
    parser.add_argument("--repeats", type=int, default=1, help="rounds of the grid's back-ends (medians)")
    args = parser.parse_args()
    print(f"afa {afa.__version__} from {afa.__file__}; {platform.python_version()}; {os.cpu_count()} cores; "
          f"load average at start {os.getloadavg()}")
    if not args.skip_grid:
        print("\n".join(grid_benchmark(args.subset, args.skip_dask, args.repeats)))
    if not args.skip_per_record:
        print()
        print("\n".join(per_record_benchmark()))
    print(f"\nload average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
