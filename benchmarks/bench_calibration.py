"""Time to calibrate DP-SGD's noise: afa.calibrate_sigma against dp_accounting's calibrate_dp_mechanism.

A DP-SGD user fixes (target epsilon, delta = 1e-5, sampling rate q, steps) and asks for the smallest sigma.
afa's ``calibrate_sigma`` returns a sigma whose *certified* upper epsilon (its PLD's pessimistic bound) meets the
target and shows sigma (1 - rtol) missing it by a certified lower bound (rtol = 1e-3).  The peers:
dp_accounting's ``mechanism_calibration.calibrate_dp_mechanism`` with its ``PLDAccountant`` (pessimistic, grid
1e-4, the library's default) and with its ``RDPAccountant`` (an upper bound, looser), both to an absolute
tolerance of 1e-4 on sigma, bracketed from sigma in [0.1, 100], each in a child process stopped after
PEER_TIMEOUT seconds.

Each calibration runs once per row (they take seconds), afa's per-mechanism caches cleared first; reported:
wall time, sigma, and sigma relative to afa's.  ``--before PATH`` also runs the afa found at PATH (a worktree of
an earlier commit) in its own worker process, the two taking turns row by row.

Run: PYTHONPATH=. benchmarks/.venv/bin/python benchmarks/bench_calibration.py [--before PATH] [--markdown]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DELTA = 1e-5
#: (target epsilon, q, steps)
ROWS = [(1.0, 0.01, 1000), (8.0, 0.004, 10_000), (0.5, 0.001, 100), (3.0, 0.01, 10_000), (1.0, 0.05, 100),
        (2.0, 0.001, 1000), (0.3, 0.01, 50), (4.0, 0.02, 3000)]
PEER_TOLERANCE = 1e-4
PEER_BRACKET = (0.1, 100.0)
#: A peer's calibration is stopped after this many seconds.
PEER_TIMEOUT = 120.0


def afa_row(epsilon: float, q: float, steps: int) -> dict:
    """afa's calibration of one row in this process: seconds and sigma (or the refusal)."""
    from timing import clear_afa_caches

    import afa

    clear_afa_caches()
    start = time.perf_counter()
    try:
        calibration = afa.calibrate_sigma(epsilon, DELTA, steps, sampling_rate=q, progress=False)
    except (afa.AccuracyError, afa.BudgetExceededError, ValueError) as error:
        return {"seconds": time.perf_counter() - start, "sigma": None, "error": f"{type(error).__name__}"}
    return {"seconds": time.perf_counter() - start, "sigma": calibration.value, "error": None}


def peer_row(epsilon: float, q: float, steps: int, kind: str) -> dict:
    """dp_accounting's calibration of one row with its PLD or RDP accountant, in a child process stopped after
    PEER_TIMEOUT seconds."""
    from timing import run_isolated

    try:
        import dp_accounting
        from dp_accounting import mechanism_calibration, pld, rdp
    except ImportError:
        return {"seconds": None, "sigma": None, "error": "not installed"}

    def event(sigma: float):
        step = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma))
        return dp_accounting.SelfComposedDpEvent(step, steps)

    accountant = pld.PLDAccountant if kind == "pld" else rdp.RdpAccountant
    outcome = run_isolated(lambda: float(mechanism_calibration.calibrate_dp_mechanism(
        accountant, event, epsilon, DELTA, mechanism_calibration.ExplicitBracketInterval(*PEER_BRACKET),
        tol=PEER_TOLERANCE)), PEER_TIMEOUT, repeats=1)
    if outcome.status != "ok":
        return {"seconds": outcome.seconds, "sigma": None,
                "error": f"over {PEER_TIMEOUT:g} s" if outcome.status == "timeout" else outcome.error_type}
    return {"seconds": outcome.seconds, "sigma": outcome.value, "error": None}


def worker() -> None:
    """Calibrate rows read from stdin (JSON [epsilon, q, steps] a line) with this process's afa."""
    import afa

    sys.stdout.write(json.dumps({"afa": afa.__file__}) + "\n")
    sys.stdout.flush()
    afa_row(1.0, 0.05, 10)  # warm-up
    for line in sys.stdin:
        epsilon, q, steps = json.loads(line)
        sys.stdout.write(json.dumps(afa_row(epsilon, q, int(steps))) + "\n")
        sys.stdout.flush()


def _cell(row: dict, reference: float | None = None) -> str:
    if row["sigma"] is None:
        return f"{row['error']}" + (f" after {row['seconds']:.2f} s" if row["seconds"] is not None else "")
    text = f"{row['seconds']:.2f} s, σ = {row['sigma']:.5f}"
    if reference:
        text += f" ({row['sigma'] / reference - 1:+.1e})"
    return text


def main() -> None:
    sys.path.insert(0, str(HERE))
    from timing import VersionWorker, comparison_parser, machine_note

    parser = comparison_parser(__doc__)
    arguments = parser.parse_args()
    if arguments.worker:
        worker()
        return

    print(machine_note(("dp-accounting",)))
    after = VersionWorker(__file__, str(HERE.parent))
    before = VersionWorker(__file__, arguments.before) if arguments.before else None
    print(f"after: {after.origin}" + (f"; before: {before.origin}" if before else ""))
    columns = (["afa before"] if before else []) + ["afa", "dp_accounting PLD", "dp_accounting RDP"]
    if arguments.markdown:
        print("| target ε | q | steps | " + " | ".join(columns) + " |")
        print("|---" * (3 + len(columns)) + "|")
    for epsilon, q, steps in ROWS:
        cells = []
        new = after.measure([epsilon, q, steps])
        if before is not None:
            cells.append(_cell(before.measure([epsilon, q, steps]), new["sigma"]))
        cells.append(_cell(new))
        cells += [_cell(peer_row(epsilon, q, steps, kind), new["sigma"]) for kind in ("pld", "rdp")]
        if arguments.markdown:
            print(f"| {epsilon:g} | {q:g} | {steps} | " + " | ".join(cells) + " |", flush=True)
        else:
            print(f"eps={epsilon:g} q={q:g} steps={steps}: " + " | ".join(
                f"{name}: {cell}" for name, cell in zip(columns, cells, strict=True)), flush=True)
    after.close()
    if before is not None:
        before.close()


if __name__ == "__main__":
    main()
