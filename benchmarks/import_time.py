"""Start-up time: ``import afa``, ``afa --help`` and a first epsilon, each in fresh interpreters.

Each command runs in its own subprocess with ``PYTHONPATH`` and the working directory set to a checkout
(so that checkout's afa is imported; checked), wall time from start to exit around the subprocess, and the
child's CPU time (user + system).  With several checkouts the runs alternate, checkout by checkout and
command by command, so that the machine's load falls on all of them alike; the table gives each checkout's
median and the ratio to the first.  The top-10 modules by cumulative import time come from
``python -X importtime`` (per-module medians over the repeats), leaving out what the interpreter imports at
start-up (``site`` and what it loads, the same for every command).

By default the children write and read Python's bytecode cache (``__pycache__``), as an installed package does;
one untimed run per checkout and command warms it.  ``--no-bytecode-cache`` sets PYTHONDONTWRITEBYTECODE and
removes afa's caches first, so that every run compiles afa's sources.  The machine is shared: read the load
average printed with the table, and the ratios.

    python benchmarks/import_time.py [CHECKOUT ...] [--labels before,after] [--repeats 7] [--no-bytecode-cache]

Without a checkout, the one this script belongs to is measured.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: The console script of ``[project.scripts] afa = "afa.cli:main"`` as pip writes it (run with ``python -c``, so
#: that every checkout is measured alike whatever is installed).
CONSOLE_SCRIPT = ("import re, sys; from afa.cli import main; "
                  "sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0]); sys.exit(main())")
#: Row label -> the interpreter's arguments.
COMMANDS = {
    "`python -c pass` (the interpreter alone)": ["-c", "pass"],
    "`import afa`": ["-c", "import afa"],
    "`afa --help`": ["-c", CONSOLE_SCRIPT, "--help"],
    "`import afa; afa.Gaussian(1.0)`": ["-c", "import afa; afa.Gaussian(1.0)"],
    "first ε: `afa.Accountant().compose(afa.Gaussian(1.0), times=100).epsilon(1e-5)`":
        ["-c", "import afa; print(afa.Accountant().compose(afa.Gaussian(1.0), times=100).epsilon(1e-5))"],
}
#: Commands whose imports are listed module by module (``-X importtime``); the first is the interpreter alone.
PROFILED = ("`python -c pass` (the interpreter alone)", "`import afa`", "`afa --help`")
TOP = 10
_IMPORT_LINE = re.compile(r"import time:\s*(\d+)\s*\|\s*(\d+)\s*\|(\s*)(\S+)")


def environment(checkout: Path, bytecode_cache: bool) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(checkout), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    if not bytecode_cache:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run(checkout: Path, arguments: list[str], bytecode_cache: bool, *flags: str) -> tuple[float, float, str]:
    """(wall seconds, child CPU seconds, stderr) of one fresh interpreter; raises if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    result = subprocess.run([sys.executable, *flags, *arguments], cwd=checkout, capture_output=True, text=True,
                            env=environment(checkout, bytecode_cache))
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise RuntimeError(f"{arguments} in {checkout} failed:\n{result.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result.stderr


def check_checkout(checkout: Path, bytecode_cache: bool) -> str:
    """The checkout's git revision; raises unless ``import afa`` there imports its own afa."""
    probe = ["-c", "import afa; print(afa.__file__)"]
    out = subprocess.run([sys.executable, *probe], cwd=checkout, capture_output=True, text=True, check=True,
                         env=environment(checkout, bytecode_cache)).stdout.strip()
    if not Path(out).resolve().is_relative_to(checkout.resolve()):
        raise RuntimeError(f"{checkout}: import afa gives {out}")
    revision = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (revision or "?") + (" (modified)" if dirty else "")


def clear_afa_bytecode(checkout: Path) -> None:
    for folder in (checkout / "afa").rglob("__pycache__"):
        shutil.rmtree(folder, ignore_errors=True)


def imports(stderr: str) -> dict[str, tuple[int, int]]:
    """module -> (self, cumulative) microseconds of one ``-X importtime`` report."""
    found = {}
    for line in stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if match:
            found[match.group(4)] = (int(match.group(1)), int(match.group(2)))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", type=Path, default=[Path(__file__).resolve().parent.parent],
                        help="afa checkouts to measure (default: this one); the first is the ratios' base")
    parser.add_argument("--labels", default=None, help="comma-separated column names (default: the git revisions)")
    parser.add_argument("--repeats", type=int, default=7, help="fresh interpreters per command and checkout")
    parser.add_argument("--no-bytecode-cache", dest="bytecode_cache", action="store_false",
                        help="compile afa's sources in every run (PYTHONDONTWRITEBYTECODE=1)")
    args = parser.parse_args()
    checkouts = [checkout.resolve() for checkout in args.checkouts]
    revisions = [check_checkout(checkout, args.bytecode_cache) for checkout in checkouts]
    labels = args.labels.split(",") if args.labels else revisions
    if len(labels) != len(checkouts):
        parser.error("--labels needs one name per checkout")
    load_before = os.getloadavg()

    for checkout in checkouts:
        if args.bytecode_cache:
            for arguments in COMMANDS.values():  # warm the bytecode cache
                run(checkout, arguments, True)
        else:
            clear_afa_bytecode(checkout)
    walls: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    reports: dict[tuple[str, str], list[dict[str, tuple[int, int]]]] = {}
    for _ in range(args.repeats):
        for row, arguments in COMMANDS.items():
            for label, checkout in zip(labels, checkouts):
                wall, cpu, _ = run(checkout, arguments, args.bytecode_cache)
                walls.setdefault((row, label), []).append(wall)
                cpus.setdefault((row, label), []).append(cpu)
        for row in PROFILED:
            for label, checkout in zip(labels, checkouts):
                _, _, stderr = run(checkout, COMMANDS[row], args.bytecode_cache, "-X", "importtime")
                reports.setdefault((row, label), []).append(imports(stderr))
    load_after = os.getloadavg()

    cache = "bytecode cache warm" if args.bytecode_cache else "no bytecode cache (afa compiled in every run)"
    print(f"Medians of {args.repeats} fresh interpreters per cell ({cache}); "
          + "; ".join(f"{label} = {revision}" if label != revision else label
                      for label, revision in zip(labels, revisions))
          + f"; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after "
          + f"({os.cpu_count()} cores); Python {sys.version.split()[0]}.\n")
    header = ["command"] + [f"{label} wall (s)" for label in labels] + [f"{label} CPU (s)" for label in labels]
    header += [f"{label} / {labels[0]} (wall)" for label in labels[1:]]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in COMMANDS:
        wall = [statistics.median(walls[row, label]) for label in labels]
        cpu = [statistics.median(cpus[row, label]) for label in labels]
        cells = [f"{value:.3f}" for value in wall + cpu] + [f"{value / wall[0]:.2f}" for value in wall[1:]]
        print(f"| {row} | " + " | ".join(cells) + " |")
    for row in PROFILED[1:]:
        for label in labels:
            runs = reports[row, label]
            start_up = {name for report in reports[PROFILED[0], label] for name in report}
            modules = {name for report in runs for name in report} - start_up
            medians = {name: (statistics.median(report.get(name, (0, 0))[0] for report in runs),
                              statistics.median(report.get(name, (0, 0))[1] for report in runs))
                       for name in modules}
            top = sorted(medians.items(), key=lambda item: -item[1][1])[:TOP]
            print(f"\nTop {TOP} modules by cumulative import time, {row}, {label} (`-X importtime`, medians):\n")
            print("| module | cumulative (ms) | self (ms) |")
            print("|---|---|---|")
            for name, (own, cumulative) in top:
                print(f"| {name} | {cumulative / 1000:.1f} | {own / 1000:.1f} |")


if __name__ == "__main__":
    main()
