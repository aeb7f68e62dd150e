"""Helpers shared by the benchmark scripts: medians (to damp the machine's noise), timed calls that may
refuse, timed calls isolated in a child process with a time limit, cold afa caches, DP-SGD accountants,
and the machine/version description every table starts with."""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import math
import multiprocessing
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import afa
import afa.mechanisms.catalog


def median_seconds(function, repeats: int = 7) -> float:
    """Median wall time of ``repeats`` calls of ``function()``."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


#: Fast calls are repeated until their repeats take about FILL_SECONDS (as timeit's autorange), up to MAX_REPEATS:
#: the first calls in a fresh forked child run slower while the pages they touch are copied (a sub-millisecond
#: call can take 1.5x its steady time for some ten calls), and a median of three would fall among them.
FILL_SECONDS, MAX_REPEATS = 0.1, 25


def timed(function, repeats: int, single_shot_seconds: float):
    """(result or the exception it raised, seconds, timed calls): the median of at least ``repeats`` calls after
    a first one (more for fast calls: as many as fill FILL_SECONDS, at most MAX_REPEATS), or that first call alone
    if it took longer than ``single_shot_seconds`` or raised."""
    start = time.perf_counter()
    try:
        result = function()
    except Exception as error:  # a refusal or crash is reported, not raised
        return error, time.perf_counter() - start, 1
    first = time.perf_counter() - start
    if first > single_shot_seconds:
        return result, first, 1
    calls = max(repeats, min(MAX_REPEATS, int(FILL_SECONDS / max(first, 1e-9))))
    return result, median_seconds(function, repeats=calls), calls


@dataclass
class Outcome:
    """What :func:`run_isolated` saw: ``status`` is 'ok' (``value`` holds the result), 'raised' (``error_type``
    and ``message`` say what), 'timeout' (killed after the limit) or 'died' (the child ended without an answer,
    e.g. killed for memory)."""

    status: str
    value: object = None
    seconds: float = math.nan
    calls: int = 0
    error_type: str = ""
    message: str = ""


def run_isolated(function, timeout: float, repeats: int = 3, single_shot_seconds: float = 0.5,
                 memory_limit_bytes: int | None = None) -> Outcome:
    """:func:`timed` (``function`` called, then repeated if fast) in a forked child process, killed after
    ``timeout`` seconds.  The child inherits everything already imported and compiled (so a warm-up in the
    parent is excluded from the times), prints nothing (peers' progress output goes to /dev/null), and may be
    given an address-space limit; the time is measured inside the child, so the fork is not counted."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)

    def child() -> None:
        receiver.close()
        if memory_limit_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
            result, seconds, calls = timed(function, repeats, single_shot_seconds)
        if isinstance(result, BaseException):
            payload = ("raised", None, seconds, calls, type(result).__name__, refusal(result).partition(": ")[2])
        else:
            payload = ("ok", result, seconds, calls, "", "")
        try:
            sender.send(payload)
        except Exception as error:  # an answer that does not pickle is reported, not lost
            sender.send(("raised", None, seconds, calls, type(error).__name__, f"result not transferable: {error}"))

    process = context.Process(target=child, daemon=True)
    process.start()
    sender.close()
    payload = None
    if receiver.poll(timeout):
        try:
            payload = receiver.recv()
        except EOFError:
            payload = None
        timed_out = False
    else:
        timed_out = True
    if process.is_alive() and payload is None:
        process.kill()
    process.join()
    receiver.close()
    if payload is None:
        if timed_out:
            return Outcome("timeout", seconds=timeout)
        return Outcome("died", message=f"child exited with code {process.exitcode} without an answer")
    status, value, seconds, calls, error_type, message = payload
    return Outcome(status, value, seconds, calls, error_type, message)


def refusal(error: Exception, width: int | None = None) -> str:
    """'Type: message' on one line (cut to ``width`` characters if given)."""
    return f"{type(error).__name__}: {' '.join(str(error).split())[:width]}"


def clear_afa_caches() -> None:
    """Drop afa's process-wide per-mechanism caches (losses, loss tails): each call starts cold."""
    for name in ("_cached_losses", "_cached_tails"):
        cached = getattr(afa.mechanisms.catalog.Mechanism, name, None)
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()


def dp_sgd_accountant(terms, interval: float | None = None) -> afa.Accountant:
    """An accountant of Poisson-subsampled Gaussians, ``terms`` = [(sigma, q, steps), ...]."""
    accountant = afa.Accountant(value_discretization_interval=interval)
    for sigma, q, steps in terms:
        accountant.compose(afa.Gaussian(sigma).poisson_subsampled(q), times=steps)
    return accountant


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count()


def package_versions(packages: tuple[str, ...]) -> list[tuple[str, str]]:
    """(name, version or 'not installed') for afa and each of ``packages`` (distribution names)."""
    versions = [("afa", afa.__version__)]
    for package in packages:
        try:
            versions.append((package, importlib.metadata.version(package)))
        except importlib.metadata.PackageNotFoundError:
            versions.append((package, "not installed"))
    return versions


def machine_facts() -> list[tuple[str, str]]:
    """(label, value) pairs describing the machine: CPU model, cores, memory, OS, Python, load."""
    model = platform.processor() or platform.machine()
    memory = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), model)
    with contextlib.suppress(OSError, StopIteration, ValueError), open("/proc/meminfo") as meminfo:
        kib = int(next(line for line in meminfo if line.startswith("MemTotal")).split()[1])
        memory = f"{kib / 2 ** 20:.1f} GiB"
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg()) if hasattr(os, "getloadavg") else "unknown"
    return [("CPU", model), ("cores", f"{os.cpu_count()} ({usable_cores()} usable)"), ("memory", memory),
            ("OS", platform.platform()), ("Python", f"{platform.python_version()} ({platform.python_implementation()})"),
            ("load average (1, 5, 15 min) at start", load)]


def machine_note(packages: tuple[str, ...]) -> str:
    """The machine, Python, afa and each of ``packages`` with its version (or 'not installed')."""
    versions = [f"{name} {version}" for name, version in package_versions(packages)]
    return (f"machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} cores ({usable_cores()} usable), Python {platform.python_version()}; "
            + ", ".join(versions))


class VersionWorker:
    """A process running ``script --worker`` with the afa found at ``path`` first on PYTHONPATH (a checkout, or a
    worktree of an earlier commit), answering JSON lines: a script's before/after comparisons run each version in
    its own worker, the two taking turns row by row so that the machine's load drifts over both alike.  The worker
    writes ``{"afa": afa.__file__}`` first, then one JSON line per line it reads."""

    def __init__(self, script: str, path: str):
        here = str(Path(__file__).resolve().parent)
        environment = dict(os.environ, PYTHONPATH=os.pathsep.join([here, path, os.environ.get("PYTHONPATH", "")]))
        self.process = subprocess.Popen([sys.executable, str(Path(script).resolve()), "--worker"], cwd=path,
                                        env=environment, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.origin = json.loads(self.process.stdout.readline())["afa"]

    def measure(self, case) -> dict:
        self.process.stdin.write(json.dumps(case) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def comparison_parser(doc: str) -> argparse.ArgumentParser:
    """The command line of a script that compares this checkout's afa with another's (:class:`VersionWorker`):
    ``--before PATH``, ``--markdown`` and the hidden ``--worker``; described by ``doc``'s first line."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--before", default=None, help="a directory holding the afa to compare against")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    return parser
