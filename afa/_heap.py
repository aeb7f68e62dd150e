"""The C heap's behaviour while a batch of queries runs in a process whose malloc was tuned at start-up.

This module owns one adjustment, made only where it is needed.  glibc's malloc adapts the size above which
it serves an allocation by a fresh ``mmap`` (and gives it back to the kernel on ``free``) to the program's
largest freed blocks, so a numpy program soon reuses its large temporaries.  Setting any of the malloc
environment variables at start-up (``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TOP_PAD_``, ``MALLOC_MMAP_MAX_`` or a ``glibc.malloc`` tunable) switches that adaptation off, and
every array above 128 KiB is then mapped, faulted in page by page, and unmapped again.  Dask's nanny starts
its workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (to return memory promptly), and there one DP-SGD query
spends a fifth of its time in page faults: 48 queries took 81 000 minor faults against 12 000 in a plain
process (benchmarks/RESULTS.md, section 7).

:func:`reusable_heap` raises the mmap and trim thresholds for the duration of a batch in such a process, then
restores the start-up values and returns the freed memory to the kernel (``malloc_trim``), so the worker
ends each batch as its configuration intends.  Anywhere else (no such variable at start-up, not glibc, not
Linux) it changes nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
from collections.abc import Iterator, Mapping

__all__ = ["reusable_heap", "tuned_at_start"]

#: mallopt's parameter numbers (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: glibc's default mmap and trim thresholds (bytes), what a variable left unset means.
_DEFAULT_THRESHOLD = 128 * 1024
#: The thresholds while a batch runs: glibc's own upper limit for the adaptive mmap threshold on 64-bit
#: systems, and twice that for trimming.
_BATCH_MMAP_THRESHOLD = 32 * 1024 * 1024
_BATCH_TRIM_THRESHOLD = 64 * 1024 * 1024
_MALLOC_VARIABLES = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


@functools.cache
def _start_up_environment() -> Mapping[str, str]:
    """The environment the process was started with (``/proc/self/environ``), which is what malloc read; the
    process's ``os.environ`` may have been changed since (a Dask LocalCluster's nannies write their variables
    into the driver's).  Empty where it cannot be read.  Read once per process."""
    try:
        with open("/proc/self/environ", "rb") as stream:
            raw = stream.read()
    except OSError:
        return {}
    environment = {}
    for entry in raw.split(b"\0"):
        name, _, value = entry.partition(b"=")
        if name:
            environment[name.decode(errors="replace")] = value.decode(errors="replace")
    return environment


def tuned_at_start(environment: Mapping[str, str] | None = None) -> bool:
    """Whether malloc's adaptive mmap threshold was switched off at start-up by a malloc variable or tunable.

    Parameters
    ----------
    environment : dict, optional
        The start-up environment to judge (default: this process's).
    """
    environment = _start_up_environment() if environment is None else environment
    if any(name in environment for name in _MALLOC_VARIABLES):
        return True
    return "glibc.malloc." in environment.get("GLIBC_TUNABLES", "")


def _threshold(environment: Mapping[str, str], variable: str, tunable: str) -> int:
    """The start-up value of one threshold: its variable, else its ``GLIBC_TUNABLES`` entry, else glibc's
    default; clipped to mallopt's int."""
    tunables = dict(entry.partition("=")[::2] for entry in environment.get("GLIBC_TUNABLES", "").split(":"))
    for text in (environment.get(variable), tunables.get(tunable)):
        if text is None:
            continue
        try:
            return min(int(text, 0), 2**31 - 1)
        except ValueError:
            continue
    return _DEFAULT_THRESHOLD


@functools.cache
def _libc():
    """glibc through ctypes (loaded once per process), or None where it is not glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not all(hasattr(libc, symbol) for symbol in ("mallopt", "malloc_trim", "gnu_get_libc_version")):
        return None
    return libc


@contextlib.contextmanager
def reusable_heap() -> Iterator[bool]:
    """Let freed large blocks be reused while the ``with`` block runs, where start-up tuning forbade it.

    Yields whether anything was changed.  On exit the start-up thresholds come back and the free memory is
    returned to the kernel.
    """
    environment = _start_up_environment()
    libc = _libc() if tuned_at_start(environment) else None
    if libc is None:
        yield False
        return
    libc.mallopt(_M_MMAP_THRESHOLD, _BATCH_MMAP_THRESHOLD)
    libc.mallopt(_M_TRIM_THRESHOLD, _BATCH_TRIM_THRESHOLD)
    try:
        yield True
    finally:
        libc.mallopt(_M_MMAP_THRESHOLD,
                     _threshold(environment, "MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold"))
        libc.mallopt(_M_TRIM_THRESHOLD,
                     _threshold(environment, "MALLOC_TRIM_THRESHOLD_", "glibc.malloc.trim_threshold"))
        libc.malloc_trim(0)
