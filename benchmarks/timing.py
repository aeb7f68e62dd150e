"""Helpers shared by the benchmark scripts: medians (to damp the machine's noise), timed calls that may
refuse, cold afa caches, DP-SGD accountants, and the machine/version line every table starts with."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import statistics
import time

import afa
import afa.mechanisms


def median_seconds(function, repeats: int = 7) -> float:
    """Median wall time of ``repeats`` calls of ``function()``."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def timed(function, repeats: int, single_shot_seconds: float):
    """(result or the exception it raised, seconds, timed calls): the median of ``repeats`` calls after a
    first one, or that first call alone if it took longer than ``single_shot_seconds`` or raised."""
    start = time.perf_counter()
    try:
        result = function()
    except Exception as error:  # a refusal or crash is reported, not raised
        return error, time.perf_counter() - start, 1
    first = time.perf_counter() - start
    if first > single_shot_seconds:
        return result, first, 1
    return result, median_seconds(function, repeats=repeats), repeats


def refusal(error: Exception, width: int | None = None) -> str:
    """'Type: message' on one line (cut to ``width`` characters if given)."""
    return f"{type(error).__name__}: {' '.join(str(error).split())[:width]}"


def clear_afa_caches() -> None:
    """Drop afa's process-wide per-mechanism caches (losses, loss tails): each call starts cold."""
    for name in ("_cached_losses", "_cached_tails"):
        cached = getattr(afa.mechanisms.Mechanism, name, None)
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()


def dp_sgd_accountant(terms, interval: float | None = None) -> afa.Accountant:
    """An accountant of Poisson-subsampled Gaussians, ``terms`` = [(sigma, q, steps), ...]."""
    accountant = afa.Accountant(value_discretization_interval=interval)
    for sigma, q, steps in terms:
        accountant.compose(afa.Gaussian(sigma).poisson_subsampled(q), times=steps)
    return accountant


def machine_note(packages: tuple[str, ...]) -> str:
    """The machine, Python, afa and each of ``packages`` with its version (or 'not installed')."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    versions = [f"afa {afa.__version__}"]
    for package in packages:
        try:
            versions.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{package} not installed")
    return (f"machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} cores ({usable} usable), Python {platform.python_version()}; " + ", ".join(versions))
