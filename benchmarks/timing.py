"""Timing helper shared by the benchmark scripts: medians, to damp the machine's noise."""

from __future__ import annotations

import statistics
import time


def median_seconds(function, repeats: int = 7) -> float:
    """Median wall time of ``repeats`` calls of ``function()``."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
