"""Sweeps: many privacy queries at once, deduplicated, in parallel, streamed to disk; and per-record accounting.

This module owns the batch interface of afa (issue 21): :func:`sweep` answers one query for each of many
*configurations* -- a grid (every combination of some parameters) or a table (a list of rows, or a CSV,
TOML or JSON file) -- and returns a tidy table, one row per configuration; :func:`per_record` gives every
record of a population its own epsilon(delta) from its own participation and sensitivity.  It owns the row
schema (:data:`ROW_FIELDS`, documented in ``docs/sweeps.md`` and in :func:`sweep`), the deduplication of
identical compositions, the execution back-ends (serial, local processes, a Dask cluster), the streamed
CSV/Parquet output with resumption, and the progress display.  It computes nothing itself: every value
comes from :class:`afa.Accountant` or :func:`afa.calibrate_sigma`.

Row schema (one configuration; absent keys, None and NaN mean "not given")
-----------------------------------------------------------------------------
The composition, one of

- ``sigma``, ``steps`` [, ``sampling_rate``, ``sampling``, ``sensitivity``]: ``steps`` uses of
  ``Gaussian(sigma, sensitivity)`` (sensitivity default 1), each on a random subsample with rate
  ``sampling_rate`` when it is given (``sampling``: "poisson", the default, or "subset") -- DP-SGD;
- ``mechanisms``: a list of mechanism tables as in :meth:`afa.Accountant.to_dict` (each with ``type``, the
  class's parameters, optional ``sampling_rate``/``sampling`` and ``times``), or that list as a JSON string
  (a CSV cell);

and the query, one of

- ``delta`` alone: epsilon(delta) (query "epsilon");
- ``epsilon`` alone: delta(epsilon) (query "delta");
- ``target_epsilon``, ``delta``, ``steps`` [, ``sampling_rate``, ``sensitivity``, ``rtol``]: the calibrated
  sigma (:func:`afa.calibrate_sigma`; query "sigma", no ``sigma`` or ``mechanisms``).

Optional: ``neighboring`` ("add_remove", the default, or "substitution"), ``method`` (an accountant method,
default "auto"; for calibration the certifying method, default as in :func:`afa.calibrate_sigma`), ``query``
(say which when both ``delta`` and ``epsilon`` are given), ``id`` (the configuration's id, unique) and
``label`` (free text, copied to the output).  Any other key is an error (a misspelt ``sampling_rate`` must not
silently mean "no subsampling").
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import itertools
import json
import math
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from . import _heap
from . import _validation as check
from .accountant import Accountant
from .budget import Budget
from .calibration import calibrate_sigma
from .mechanisms.catalog import NEIGHBORING_RELATIONS, Mechanism
from .options import METHODS

__all__ = ["ROW_FIELDS", "RESULT_COLUMNS", "QUERIES", "SchedulerError", "SweepReport", "PerRecord", "batch_bounds",
           "grid", "read_configurations", "sweep", "per_record"]

#: The keys a configuration row may have (the module docstring says what each means).
ROW_FIELDS = ("id", "label", "query", "delta", "epsilon", "target_epsilon", "sigma", "steps", "sampling_rate",
              "sampling", "sensitivity", "mechanisms", "neighboring", "method", "rtol")
#: The queries a row can ask: epsilon at delta, delta at epsilon, the calibrated sigma.
QUERIES = ("epsilon", "delta", "sigma")
#: The columns every output row ends with (after ``row``, ``config_id`` and the input columns).
RESULT_COLUMNS = ("query", "value", "lower", "upper", "error", "method", "certified", "seconds", "error_message",
                  "composition")
#: Input fields not repeated as input columns: ``id`` is ``config_id``, ``query`` is the (resolved) ``query`` column;
#: ``method`` (the requested engine) is written as ``requested_method`` beside the answering engine's ``method``.
_INPUT_RENAMES = {"id": None, "query": None, "method": "requested_method"}
#: Seconds to wait for a Dask scheduler before giving up (``sweep(scheduler=...)``).
SCHEDULER_TIMEOUT = 5.0
#: Output rows are written at least every FLUSH_SECONDS seconds (and every ``flush_rows`` rows, :func:`sweep`).
FLUSH_SECONDS = 10.0
#: Batches in flight per worker: enough to keep every worker busy, few enough to bound memory.
IN_FLIGHT_PER_WORKER = 2
#: Largest automatic batch (distinct compositions per task) and the tasks aimed for per worker.
MAX_BATCH, TASKS_PER_WORKER = 32, 8


def batch_bounds(count: int, size: int, workers: int | None = None) -> list[tuple[int, int]]:
    """The (start, stop) of each batch of ``count`` tasks taken in order, at most ``size`` each.

    With ``workers`` the sizes are guided: each batch holds at most the tasks left over twice the workers
    (rounded up), so the last batches shrink to single tasks and no worker is left with a long batch while
    the others are idle; without, every batch but the last holds ``size``.

    Parameters
    ----------
    count : int
        The number of tasks, >= 0.
    size : int
        The largest batch, >= 1.
    workers : int, optional
        The workers the batches go to (None: fixed batches).

    Returns
    -------
    list of (int, int)
        Consecutive half-open ranges covering ``range(count)``.

    Examples
    --------
    >>> from afa.sweep import batch_bounds
    >>> [stop - start for start, stop in batch_bounds(40, 8, workers=2)]
    [8, 8, 6, 5, 4, 3, 2, 1, 1, 1, 1]
    >>> batch_bounds(5, 2)
    [(0, 2), (2, 4), (4, 5)]
    """
    bounds, start = [], 0
    while start < count:
        left = count - start
        step = min(size, left) if workers is None else max(1, min(size, math.ceil(left / (2 * workers))))
        bounds.append((start, start + step))
        start += step
    return bounds


class SchedulerError(ConnectionError):
    """A Dask scheduler that cannot be reached within the timeout; the message names its address.

    Examples
    --------
    >>> from afa import sweep
    >>> issubclass(sweep.SchedulerError, ConnectionError)
    True
    """


# ---------------------------------------------------------------------------
# Configurations: grids, tables and files
# ---------------------------------------------------------------------------

def grid(parameters: Mapping[str, Any]) -> list[dict]:
    """Every combination of the parameters' values (the Cartesian product), as configuration rows.

    Parameters
    ----------
    parameters : mapping of str to list
        Each row field (:data:`ROW_FIELDS`) with a list (or tuple or 1-d array) of its values; a value that is
        not a list is the only value.  ``mechanisms`` takes a list of compositions (each a list of tables).

    Returns
    -------
    list of dict
        One row per combination, in :func:`itertools.product` order (the last parameter varies fastest).

    Raises
    ------
    ValueError
        A parameter with an empty list of values.
    TypeError
        ``parameters`` is not a mapping.

    Examples
    --------
    >>> from afa import sweep
    >>> sweep.grid({"sigma": [1.0, 2.0], "steps": [10, 20], "delta": 1e-5})
    ... # doctest: +NORMALIZE_WHITESPACE
    [{'sigma': 1.0, 'steps': 10, 'delta': 1e-05}, {'sigma': 1.0, 'steps': 20, 'delta': 1e-05},
     {'sigma': 2.0, 'steps': 10, 'delta': 1e-05}, {'sigma': 2.0, 'steps': 20, 'delta': 1e-05}]
    """
    if not isinstance(parameters, Mapping):
        raise TypeError(f"parameters must be a mapping of field -> list of values, got {type(parameters).__name__}")
    names = list(parameters)
    choices = []
    for name in names:
        values = parameters[name]
        values = list(values) if isinstance(values, (list, tuple, np.ndarray)) else [values]
        if not values:
            raise ValueError(f"grid parameter {name!r} has no values")
        choices.append([value.item() if isinstance(value, np.generic) else value for value in values])
    return [dict(zip(names, combination)) for combination in itertools.product(*choices)]


def _cell(text: str):
    """A CSV cell as a value: empty -> None, integers and floats as numbers, JSON lists/objects decoded."""
    text = text.strip()
    if not text:
        return None
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        pass
    if text[0] in "[{":
        with contextlib.suppress(ValueError):
            return json.loads(text)
    return text


def read_configurations(path: str | Path) -> list[dict]:
    """The configuration rows a file describes (CSV, TOML or JSON, by extension).

    Parameters
    ----------
    path : str or pathlib.Path
        ``.csv``: one configuration per line under a header of row fields (empty cells are absent; numbers
        are read as numbers; a ``mechanisms`` cell holds a JSON list).  ``.toml`` or ``.json``: a table with
        either ``grid`` (a table of field -> list of values, expanded by :func:`grid`) or ``rows`` (a list of
        tables); a JSON file may also be a bare list of rows.

    Returns
    -------
    list of dict
        The rows, in file order (row numbers count from 0 at the first data row).

    Raises
    ------
    ValueError
        An unsupported extension, a file that cannot be read or parsed, or a top level that is neither.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from afa import sweep
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "grid.toml"
    ...     _ = path.write_text('[grid]\\nsigma = [1.0, 2.0]\\nsteps = [100]\\ndelta = [1e-5]\\n')
    ...     sweep.read_configurations(path)
    [{'sigma': 1.0, 'steps': 100, 'delta': 1e-05}, {'sigma': 2.0, 'steps': 100, 'delta': 1e-05}]
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".toml", ".json"):
        raise ValueError(f"configurations file {str(path)!r}: unsupported extension {path.suffix!r} "
                         "(use .csv, .toml or .json)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as error:
        raise ValueError(f"configurations file {str(path)!r}: cannot read: {error}") from None
    if suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        return [{key: value for key, value in ((key, _cell(cell or "")) for key, cell in line.items() if key)
                 if value is not None} for line in reader]
    try:
        if suffix == ".toml":
            try:
                import tomllib
            except ModuleNotFoundError:  # Python < 3.11
                import tomli as tomllib
            data: Any = tomllib.loads(text)
        else:
            data = json.loads(text)
    except ValueError as error:
        raise ValueError(f"configurations file {str(path)!r}: invalid {suffix[1:].upper()}: "
                         f"{' '.join(str(error).split())}") from None
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and set(data) == {"grid"} and isinstance(data["grid"], dict):
        return grid(data["grid"])
    if isinstance(data, dict) and set(data) == {"rows"} and isinstance(data["rows"], list):
        return data["rows"]
    raise ValueError(f"configurations file {str(path)!r}: the top level must hold exactly one of 'grid' (a table "
                     f"of field -> list of values) or 'rows' (a list of tables)")


def _rows(configurations) -> list:
    if isinstance(configurations, (str, Path)):
        return read_configurations(configurations)
    if isinstance(configurations, Mapping):
        return grid(configurations)
    if isinstance(configurations, Iterable):
        return list(configurations)
    raise TypeError(f"configurations must be a grid (mapping of field -> list), a list of rows or a file path, got "
                    f"{type(configurations).__name__}")


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, default=str, allow_nan=True)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _config_ids(rows: Sequence) -> list[str]:
    """A stable id per row: its ``id`` field, else a digest of its fields (repeats of a row get ``-2``, ``-3``...)."""
    ids: list[str] = []
    seen: dict[str, int] = {}
    for row in rows:
        if isinstance(row, Mapping) and row.get("id") is not None:
            base = str(row["id"])
        else:
            base = _digest(_canonical(row))
        seen[base] = seen.get(base, 0) + 1
        ids.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return ids


# ---------------------------------------------------------------------------
# Parsing a row into a task: (dedup key, what a worker computes)
# ---------------------------------------------------------------------------

def _given(row: Mapping) -> dict:
    """The row's fields that are given (not None, not NaN)."""
    return {key: value for key, value in row.items()
            if value is not None and not (isinstance(value, float) and math.isnan(value))}


def _query(fields: Mapping) -> str:
    query = fields.get("query")
    if query is not None:
        query = check.choice("query", query, QUERIES)
        needed = {"epsilon": ("delta",), "delta": ("epsilon",), "sigma": ("target_epsilon", "delta")}[query]
        for name in needed:
            if name not in fields:
                raise ValueError(f"missing field {name!r} (query {query!r})")
        return query
    if "target_epsilon" in fields:
        if "delta" not in fields:
            raise ValueError("missing field 'delta' (target_epsilon asks for the calibrated sigma at delta)")
        return "sigma"
    if "delta" in fields and "epsilon" in fields:
        raise ValueError("both delta and epsilon are given: add query='epsilon' (epsilon at delta) or "
                         "query='delta' (delta at epsilon)")
    if "delta" in fields:
        return "epsilon"
    if "epsilon" in fields:
        return "delta"
    raise ValueError("missing field: 'delta' (query epsilon at delta), 'epsilon' (delta at epsilon) or "
                     "'target_epsilon' with 'delta' (calibrated sigma)")


def _forbid(fields: Mapping, names: Iterable[str], why: str) -> None:
    for name in names:
        if name in fields:
            raise ValueError(f"field {name!r} does not apply {why}")


def _require(fields: Mapping, names: Iterable[str], why: str) -> None:
    for name in names:
        if name not in fields:
            raise ValueError(f"missing field {name!r} ({why})")


class _Parser:
    """Turns rows into tasks; mechanisms are built once per distinct table (most rows of a grid share them)."""

    def __init__(self, budget: Budget | None):
        self.budget = budget
        self._mechanisms: dict[str, Mechanism | Exception] = {}

    def mechanism(self, table: Mapping) -> Mechanism:
        key = _canonical(table)
        if key not in self._mechanisms:
            try:
                self._mechanisms[key] = Mechanism.from_dict(table)
            except (ValueError, TypeError, OverflowError) as error:
                self._mechanisms[key] = error
        found = self._mechanisms[key]
        if isinstance(found, Exception):
            raise type(found)(*found.args)
        return found

    def parse(self, row) -> tuple[str, str, dict]:
        """(query, dedup key, task) of a row; ValueError or TypeError naming the field if it is malformed."""
        if not isinstance(row, Mapping):
            raise TypeError(f"a configuration must be a table/dict of fields, got {type(row).__name__}")
        unknown = [key for key in row if key not in ROW_FIELDS]
        if unknown:
            raise ValueError(f"unknown field {unknown[0]!r} (allowed: {', '.join(ROW_FIELDS)})")
        fields = _given(row)
        query = _query(fields)
        neighboring = fields.get("neighboring", "add_remove")
        if isinstance(neighboring, str):
            neighboring = neighboring.strip().lower().replace("-", "_")
        neighboring = check.choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
        if query == "sigma":
            key, task = self._calibration(fields, neighboring)
            return query, key, task
        _forbid(fields, ("target_epsilon", "rtol"), "to an epsilon or delta query (they belong to calibration)")
        at_name = "delta" if query == "epsilon" else "epsilon"
        at = check.real_number(at_name, fields[at_name])
        method = check.choice("method", fields.get("method", "auto"), METHODS)
        if "mechanisms" in fields:
            _forbid(fields, ("sigma", "steps", "sampling_rate", "sampling", "sensitivity"), "beside 'mechanisms' "
                    "(give them in the mechanism tables)")
            tables = fields["mechanisms"]
            if isinstance(tables, str):
                try:
                    tables = json.loads(tables)
                except ValueError as error:
                    raise ValueError(f"mechanisms is not valid JSON: {error}") from None
            if not isinstance(tables, (list, tuple)) or not tables:
                raise ValueError(f"mechanisms must be a non-empty list of mechanism tables, got {tables!r}")
            counts: dict[Mechanism, int] = {}
            for index, table in enumerate(tables):
                try:
                    if not isinstance(table, Mapping):
                        raise TypeError(f"must be a table/object, got {table!r}")
                    mechanism = self.mechanism({key: value for key, value in table.items() if key != "times"})
                    times = check.positive_integer("times", table.get("times", 1), maximum=check.MAX_COUNT)
                except (ValueError, TypeError, OverflowError) as error:
                    raise type(error)(f"mechanisms[{index}]: {error}") from None
                counts[mechanism] = counts.get(mechanism, 0) + times
        else:
            _require(fields, ("sigma", "steps"), "a Gaussian/DP-SGD row needs sigma and steps; a general one "
                     "'mechanisms'")
            if "sampling" in fields and "sampling_rate" not in fields:
                raise ValueError("field 'sampling' needs 'sampling_rate'")
            table = {"type": "gaussian", "sigma": fields["sigma"], "sensitivity": fields.get("sensitivity", 1.0)}
            if "sampling_rate" in fields:
                table.update(sampling_rate=fields["sampling_rate"], sampling=fields.get("sampling", "poisson"))
            steps = check.positive_integer("steps", fields["steps"], maximum=check.MAX_COUNT)
            counts = {self.mechanism(table): steps}
        spec: dict = {"neighboring": neighboring,
                      "mechanisms": sorted(({**mechanism.to_dict(), "times": count}
                                            for mechanism, count in counts.items()), key=_canonical)}
        if self.budget is not None:
            spec["budget"] = {"seconds": _finite_or_none(self.budget.seconds),
                              "memory_bytes": _finite_or_none(self.budget.memory_bytes)}
        task = {"query": query, "spec": spec, "at": at, "method": method}
        return query, _canonical(task), task

    def _calibration(self, fields: Mapping, neighboring: str) -> tuple[str, dict]:
        why = "to calibration (query 'sigma'), which chooses sigma for a Gaussian/DP-SGD composition"
        _forbid(fields, ("sigma", "mechanisms", "epsilon", "sampling"), why)
        _require(fields, ("steps",), "calibration needs target_epsilon, delta and steps")
        method = fields.get("method")
        if method is not None:
            method = check.choice("method", method, METHODS)
        parameters = {"target_epsilon": check.real_number("target_epsilon", fields["target_epsilon"]),
                      "delta": check.real_number("delta", fields["delta"]),
                      "steps": check.positive_integer("steps", fields["steps"], maximum=check.MAX_COUNT),
                      "sampling_rate": (None if "sampling_rate" not in fields
                                        else check.real_number("sampling_rate", fields["sampling_rate"])),
                      "sensitivity": check.real_number("sensitivity", fields.get("sensitivity", 1.0)),
                      "rtol": check.real_number("rtol", fields.get("rtol", 1e-3)),
                      "neighboring": neighboring, "method": method}
        task = {"query": "sigma", "parameters": parameters, "budget": self.budget}
        return _canonical({"query": "sigma", **parameters}), task


def _finite_or_none(value: float) -> float | None:
    return None if math.isinf(value) else value


# ---------------------------------------------------------------------------
# Evaluation (runs in the workers)
# ---------------------------------------------------------------------------

_EMPTY = {"value": None, "lower": None, "upper": None, "error": None, "method": None, "certified": None}


def _one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


def _evaluate(task: Mapping) -> dict:
    """One distinct composition's answer, or its failure reason; never raises (a failure is a row)."""
    start = time.perf_counter()
    outcome: dict
    try:
        if task["query"] == "sigma":
            parameters = dict(task["parameters"])
            calibration = calibrate_sigma(
                parameters.pop("target_epsilon"), parameters.pop("delta"), parameters.pop("steps"),
                parameters.pop("sampling_rate"), budget=task["budget"], **parameters)
            # The smallest sigma meeting the target lies in [rejected, value] (rejected misses it, value meets it).
            outcome = {"value": calibration.value, "lower": calibration.rejected, "upper": calibration.value,
                       "error": calibration.value - calibration.rejected, "method": calibration.method,
                       "certified": bool(calibration.certified)}
        else:
            accountant = Accountant.from_dict(task["spec"])
            if task["query"] == "epsilon":
                result = accountant.epsilon_result(task["at"], method=task["method"])
            else:
                result = accountant.delta_result(task["at"], method=task["method"])
            outcome = {"value": result.value, "lower": result.lower, "upper": result.upper, "error": result.error,
                       "method": result.method, "certified": bool(result.certified)}
        outcome["error_message"] = None
    except Exception as error:  # noqa: BLE001 -- any failure of one configuration is that row's answer
        outcome = {**_EMPTY, "error_message": _one_line(error)}
    outcome["seconds"] = time.perf_counter() - start
    return outcome


def _evaluate_batch(batch: Sequence[tuple[str, Mapping]]) -> list[tuple[str, dict]]:
    """The outcomes of a batch of (key, task): the unit of work sent to a process or a Dask worker, run with one
    BLAS thread (:func:`_one_blas_thread`) and, in a process whose malloc was tuned at start-up (a Dask
    worker), a heap that reuses large blocks (:func:`afa._heap.reusable_heap`)."""
    with _one_blas_thread(), _heap.reusable_heap():
        return [(key, _evaluate(task)) for key, task in batch]


def _failed_batch(batch: Sequence[tuple[str, Mapping]], error: BaseException) -> list[tuple[str, dict]]:
    message = f"worker failed: {_one_line(error)}"
    return [(key, {**_EMPTY, "error_message": message, "seconds": None}) for key, _ in batch]


def _serial(batches: Iterator[list]) -> Iterator[list]:
    for batch in batches:
        yield _evaluate_batch(batch)


def _one_blas_thread() -> contextlib.AbstractContextManager:
    """One BLAS thread while a batch runs, through threadpoolctl when it is installed (extra ``afa[sweep]``; else
    nothing changes).  A sweep already runs one batch per core, so BLAS threads of each query only
    oversubscribe them (and its matrices are small): on 2 cores, 200 DP-SGD configurations on 2 processes ran
    1.42x faster than serially with numpy's default threads and 1.53-1.66x with one each (benchmarks/RESULTS.md,
    section 7).  The previous limits come back after the batch, also on a user's Dask workers."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1)


def _processes(batches: Iterator[list], workers: int) -> Iterator[list]:
    pool = ProcessPoolExecutor(max_workers=workers)
    try:
        pending: dict = {}
        for batch in itertools.islice(batches, workers * IN_FLIGHT_PER_WORKER):
            pending[pool.submit(_evaluate_batch, batch)] = batch
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                batch = pending.pop(future)
                try:
                    outcomes = future.result()
                except Exception as error:  # noqa: BLE001 -- a crashed worker fails its batch, not the sweep
                    outcomes = _failed_batch(batch, error)
                for following in itertools.islice(batches, 1):
                    pending[pool.submit(_evaluate_batch, following)] = following
                yield outcomes
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _dask(batches: Iterator[list], client) -> Iterator[list]:
    from distributed import as_completed

    workers = max(1, len(client.scheduler_info().get("workers", {})))
    futures = {}
    for batch in itertools.islice(batches, workers * IN_FLIGHT_PER_WORKER):
        futures[client.submit(_evaluate_batch, batch, pure=False)] = batch
    completed = as_completed(list(futures))
    try:
        for future in completed:
            batch = futures.pop(future)
            try:
                outcomes = future.result()
            except Exception as error:  # noqa: BLE001 -- a lost worker fails its batch, not the sweep
                outcomes = _failed_batch(batch, error)
            future.release()
            for following in itertools.islice(batches, 1):
                new = client.submit(_evaluate_batch, following, pure=False)
                futures[new] = following
                completed.add(new)
            yield outcomes
    finally:
        for future in futures:
            future.cancel()


def _connect(address: str, timeout: float):
    """A Dask client of the scheduler at ``address``, or SchedulerError within ``timeout`` seconds."""
    try:
        from distributed import Client
    except ImportError:
        raise ImportError("scheduler= needs Dask's distributed scheduler: pip install 'afa[dask]'") from None
    try:
        return Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as error:
        raise SchedulerError(f"cannot reach the Dask scheduler at {address!r} within {timeout:g} s "
                             f"({_one_line(error)})") from None


# ---------------------------------------------------------------------------
# Output: memory, CSV, Parquet
# ---------------------------------------------------------------------------

def _plain(value):
    """A value for a CSV cell or a Parquet string column: JSON for lists and tables."""
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value)
    return value


class _MemorySink:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def done(self) -> set[str]:
        return set()

    def write(self, rows: list[dict]) -> None:
        self.rows.extend(rows)

    def close(self, complete: bool) -> None:
        self.rows.sort(key=lambda row: row["row"])


class _CsvSink:
    """Appends rows to a CSV file (or writes them to a stream); a file from an interrupted run is resumed."""

    def __init__(self, target: Path | TextIO, columns: list[str]):
        self.columns = columns
        self._done: set[str] = set()
        self._owned = isinstance(target, Path)
        if isinstance(target, Path):
            if target.exists() and target.stat().st_size > 0:
                self._done = self._resume(target)
                self.stream: TextIO = open(target, "a", newline="", encoding="utf-8")
                self.writer = csv.writer(self.stream)
            else:
                self.stream = open(target, "w", newline="", encoding="utf-8")
                self.writer = csv.writer(self.stream)
                self.writer.writerow(columns)
        else:
            self.stream = target
            self.writer = csv.writer(self.stream)
            self.writer.writerow(columns)

    def _resume(self, path: Path) -> set[str]:
        with open(path, "rb+") as raw:  # a run killed mid-write leaves a partial last line: cut it off
            size = raw.seek(0, os.SEEK_END)
            tail_start = max(0, size - 2 ** 20)
            raw.seek(tail_start)
            tail = raw.read()
            if not tail.endswith(b"\n"):
                raw.truncate(tail_start + tail.rfind(b"\n") + 1)
        with open(path, newline="", encoding="utf-8") as stream:
            reader = csv.reader(stream)
            header = next(reader, None)
            if header != self.columns:
                raise ValueError(f"output {str(path)!r} holds another sweep (columns {header}); this sweep writes "
                                 f"{self.columns}: choose another file")
            position = self.columns.index("config_id")
            return {line[position] for line in reader if len(line) == len(self.columns)}

    def done(self) -> set[str]:
        return self._done

    def write(self, rows: list[dict]) -> None:
        self.writer.writerows([["" if row[column] is None else _plain(row[column]) for column in self.columns]
                               for row in rows])
        self.stream.flush()

    def close(self, complete: bool) -> None:
        if self._owned:
            self.stream.close()


class _ParquetSink:
    """Writes each flush as a part file beside the output and merges them into it when the sweep completes.

    A Parquet file is readable only once its footer is written, so the parts (``OUT.parquet.parts/``) are what a
    run interrupted midway leaves; the next run with the same output reads their ids, skips those rows and
    merges everything into ``OUT.parquet`` at the end.
    """

    def __init__(self, path: Path, columns: list[str], types: Mapping[str, str]):
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise ImportError("Parquet output needs pyarrow: pip install 'afa[parquet]' (or write .csv)") from None
        self.pa, self.pq = pa, pq
        self.path, self.columns, self.types = path, columns, types
        arrow = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string()}
        self.schema = pa.schema([(column, arrow[types[column]]) for column in columns])
        self.parts = Path(str(path) + ".parts")
        self._done: set[str] = set()
        for file in self._files():
            if not pq.read_schema(file).equals(self.schema):
                raise ValueError(f"output {str(file)!r} holds another sweep (its columns differ from "
                                 f"{self.columns}): choose another file")
            self._done.update(pq.read_table(file, columns=["config_id"]).column(0).to_pylist())
        self._next = 1 + max((int(part.stem.split("-")[1]) for part in self._part_files()), default=0)

    def _part_files(self) -> list[Path]:
        return sorted(self.parts.glob("part-*.parquet")) if self.parts.is_dir() else []

    def _files(self) -> list[Path]:
        return ([self.path] if self.path.exists() else []) + self._part_files()

    def done(self) -> set[str]:
        return self._done

    def _convert(self, value, kind: str):
        if value is None:
            return None
        if kind == "str":
            return value if isinstance(value, str) else (json.dumps(value) if isinstance(value, (list, tuple, dict))
                                                         else str(value))
        return value

    def write(self, rows: list[dict]) -> None:
        table = self.pa.Table.from_pylist([{column: self._convert(row[column], self.types[column])
                                            for column in self.columns} for row in rows], schema=self.schema)
        self.parts.mkdir(exist_ok=True)
        part = self.parts / f"part-{self._next:06d}.parquet"
        self._next += 1
        temporary = part.with_suffix(".tmp")
        self.pq.write_table(table, temporary)
        os.replace(temporary, part)  # a part is either whole or absent

    def close(self, complete: bool) -> None:
        if not complete or (self.path.exists() and not self._part_files()):
            return
        temporary = Path(str(self.path) + ".tmp")
        with self.pq.ParquetWriter(temporary, self.schema) as writer:  # streamed: one row group at a time
            for file in self._files():
                parquet = self.pq.ParquetFile(file)
                for group in range(parquet.num_row_groups):
                    writer.write_table(parquet.read_row_group(group))
        os.replace(temporary, self.path)
        for part in self._part_files():
            part.unlink()
        self.parts.rmdir()


def _column_type(values: Iterable) -> str:
    """The Parquet type of an input column: int, float, bool or (anything else, lists as JSON) str."""
    present = [value for value in values if value is not None]
    if present and all(isinstance(value, bool) for value in present):
        return "bool"
    if present and all(isinstance(value, (int, np.integer)) and not isinstance(value, bool) for value in present):
        return "int"
    if present and all(isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
                       for value in present):
        return "float"
    return "str"


# ---------------------------------------------------------------------------
# Progress
# ---------------------------------------------------------------------------

class _Progress:
    """A tqdm bar on a terminal (a one-line stderr counter without tqdm); nothing when quiet or not a TTY."""

    def __init__(self, total: int, initial: int, enabled: bool):
        self.total, self.count, self._bar, self._shown = total, initial, None, 0.0
        self.enabled = enabled and sys.stderr.isatty()
        if self.enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                self._show()
            else:
                self._bar = tqdm(total=total, initial=initial, unit="config", desc="afa sweep", file=sys.stderr)

    def _show(self) -> None:
        sys.stderr.write(f"\rafa sweep: {self.count}/{self.total} configurations")
        sys.stderr.flush()
        self._shown = time.monotonic()

    def update(self, count: int) -> None:
        self.count += count
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(count)
        elif time.monotonic() - self._shown > 0.2 or self.count == self.total:
            self._show()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.enabled:
            self._show()
            sys.stderr.write("\n")


# ---------------------------------------------------------------------------
# The sweep
# ---------------------------------------------------------------------------

@dataclass
class SweepReport:
    """What a sweep did, and its rows when they were kept in memory.

    Attributes
    ----------
    rows : list of dict or None
        One dict per configuration, sorted by ``row`` (when no output file was given; else None: the rows are
        in the file).  Keys: ``row``, ``config_id``, the input fields, then :data:`RESULT_COLUMNS`.
    output : pathlib.Path or None
        The output file.
    configurations : int
        Configurations in the input.
    skipped : int
        Configurations already in the output file (a resumed sweep), not recomputed.
    written : int
        Rows produced by this run.
    failed : int
        Of them, rows with an ``error_message`` (malformed rows included).
    malformed : int
        Of them, rows rejected before any computation (unknown field, missing field, bad value).
    problems : list of str
        The malformed rows' messages, each starting ``row N:`` (N counts from 0).
    compositions : int
        Distinct (composition, query) pairs among the rows this run computed.
    evaluations : int
        Queries this run evaluated: each distinct composition once, so ``compositions`` when the run completed.
    seconds : float
        Wall-clock time of the run.

    Examples
    --------
    >>> import afa
    >>> from afa import sweep
    >>> report = sweep.sweep({"sigma": [1.0, 2.0], "steps": [10], "delta": [1e-5]}, workers=1, quiet=True)
    >>> report.configurations, report.written, report.failed
    (2, 2, 0)
    >>> report.rows[0]["value"] == afa.Accountant().compose(afa.Gaussian(1.0), times=10).epsilon_result(1e-5).value
    True
    """

    rows: list[dict] | None
    output: Path | None
    configurations: int
    skipped: int
    written: int
    failed: int
    malformed: int
    problems: list[str]
    compositions: int
    evaluations: int
    seconds: float

    def to_frame(self):
        """The rows as a pandas DataFrame (pandas is needed for this method only).

        Returns
        -------
        pandas.DataFrame
            The in-memory rows, or the output file read back (CSV or Parquet).

        Examples
        --------
        >>> from afa import sweep
        >>> report = sweep.sweep({"sigma": [1.0, 2.0], "steps": [10], "delta": [1e-5]}, workers=1, quiet=True)
        >>> report.to_frame().shape[0]  # doctest: +SKIP
        2
        """
        try:
            import pandas
        except ImportError:
            raise ImportError("to_frame() needs pandas; the rows are in SweepReport.rows") from None
        if self.rows is not None:
            return pandas.DataFrame(self.rows)
        if self.output is None:
            raise ValueError("this sweep wrote its rows to a stream: there is nothing to read back")
        if self.output.suffix.lower() == ".parquet":
            return pandas.read_parquet(self.output)
        return pandas.read_csv(self.output)


def _output_kind(output) -> str:
    if output is None:
        return "memory"
    if not isinstance(output, (str, Path)):
        return "stream"
    suffix = Path(output).suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise ValueError(f"output must end in .csv or .parquet, got {str(output)!r}")
    return suffix[1:]


def _sink(kind: str, output, columns: list[str], types: Mapping[str, str]) -> Any:
    if kind == "memory":
        return _MemorySink()
    if kind == "parquet":
        return _ParquetSink(Path(output), columns, types)
    return _CsvSink(Path(output) if kind == "csv" else output, columns)


def sweep(configurations, output: str | Path | TextIO | None = None, *, workers: int | None = None, client=None,
          scheduler: str | None = None, batch_size: int | None = None, budget: Budget | None = None,
          quiet: bool = False, timeout: float = SCHEDULER_TIMEOUT, flush_rows: int = 1000) -> SweepReport:
    """Answer one privacy query per configuration: deduplicated, in parallel, streamed to ``output``.

    Parameters
    ----------
    configurations : mapping, list of mapping, str or pathlib.Path
        A grid (a mapping of field -> list of values: every combination, :func:`grid`), a table (a list of
        rows) or a file (:func:`read_configurations`).  Each row follows the schema of the module docstring
        (``docs/sweeps.md``): a composition (``sigma``/``steps``/``sampling_rate``/``sensitivity`` or
        ``mechanisms``) and a query (``delta``, ``epsilon``, or ``target_epsilon`` with ``delta``).
    output : str, pathlib.Path or text stream, optional
        A ``.csv`` or ``.parquet`` file the rows stream to, in batches, in completion order (sort by ``row``);
        None (default) keeps them in memory (:attr:`SweepReport.rows`); a text stream receives CSV.  An
        existing file of the same sweep is resumed: configurations whose ``config_id`` it holds are skipped.
    workers : int, optional
        Local processes (default: every core, ``os.cpu_count()``); 1 runs serially in this process.
    client : distributed.Client, optional
        A Dask client: batches run on its cluster (``workers`` is then ignored).
    scheduler : str, optional
        The address of a Dask scheduler (``tcp://host:8786``) to connect to, instead of ``client``.
    batch_size : int, optional
        Distinct compositions per task (default: enough for about 8 tasks per worker, at most 32, and the last
        tasks smaller, :func:`batch_bounds`).
    budget : afa.Budget, optional
        Each query's budget (default: the accountant's, 30 s; the calibration's, 120 s).
    quiet : bool, default False
        No progress display (it is shown only on a terminal anyway).
    timeout : float, default 5
        Seconds to wait for ``scheduler``.
    flush_rows : int, default 1000
        Rows buffered before they are written (they are also written every 10 s): what an interrupted sweep
        can lose and must redo on resuming.

    Returns
    -------
    SweepReport
        Counts (configurations, skipped, written, failed, malformed, compositions, evaluations), the wall
        time, and the rows (in memory) or the output path.  Each row has ``row`` (position in the input,
        from 0), ``config_id`` (the row's ``id`` or a digest of its fields: stable across runs), the input
        fields (``method`` as ``requested_method``), ``query`` ("epsilon", "delta" or "sigma"), ``value``,
        ``lower``, ``upper``, ``error``, ``method`` and ``certified`` (as in :class:`afa.Result`; for
        "sigma": the calibrated sigma, the sigma shown to miss the target, their difference, and
        :class:`afa.Calibration`'s method), ``seconds`` (the evaluation time of the row's composition, shared
        by the rows that have it), ``error_message`` (None, or why the row failed: a malformed row's
        ``row N: ...``, an :class:`afa.AccuracyError`, ...) and ``composition`` (a digest of the deduplication
        key).

    Raises
    ------
    ValueError, TypeError
        Unreadable configurations, an unsupported output extension, an output file of another sweep, or bad
        ``workers``/``batch_size``/``timeout``; ``client`` and ``scheduler`` together.  A malformed *row*
        never raises: it is a row with its error.
    SchedulerError
        ``scheduler`` cannot be reached within ``timeout`` seconds.

    Notes
    -----
    Identical queries on the same multiset of mechanisms under the same relation are computed once: the key
    is the canonical JSON (sorted keys and mechanisms) of the spec :meth:`afa.Accountant.to_dict` writes, with
    the query, its argument and the method.  The distinct compositions are evaluated in batches (a query
    takes milliseconds to a second; batching amortises the scheduling), at most two batches per worker in
    flight, and every row of a composition is written when it completes.

    Examples
    --------
    >>> from afa import sweep
    >>> report = sweep.sweep({"sigma": [2.0, 4.0], "steps": [10, 40], "delta": [1e-5]}, workers=1)
    >>> report.configurations, report.compositions, report.failed
    (4, 4, 0)
    >>> for row in report.rows:
    ...     print(row["sigma"], row["steps"], round(row["upper"], 6), row["method"])
    2.0 10 7.511276 exact
    2.0 40 17.856587 exact
    4.0 10 3.341409 exact
    4.0 40 7.511276 exact

    A malformed row is a row with its error; the rest still runs:

    >>> rows = [{"sigma": 1.0, "steps": 10, "delta": 1e-5}, {"sigma": 1.0, "steps": 10, "sampling_rate": 2.0,
    ...         "delta": 1e-5}]
    >>> report = sweep.sweep(rows, workers=1)
    >>> report.rows[1]["error_message"]
    'row 1: ValueError: sampling_rate must be in [0, 1], got 2.0'
    """
    start = time.perf_counter()
    if client is not None and scheduler is not None:
        raise ValueError("give client or scheduler, not both")
    if workers is not None:
        workers = check.positive_integer("workers", workers)
    if batch_size is not None:
        batch_size = check.positive_integer("batch_size", batch_size)
    if budget is not None and not isinstance(budget, Budget):
        raise TypeError(f"budget must be an afa.Budget, got {type(budget).__name__}")
    timeout = check.positive("timeout", timeout)
    flush_rows = check.positive_integer("flush_rows", flush_rows)
    kind = _output_kind(output)
    rows = _rows(configurations)
    ids = _config_ids(rows)

    # The input columns: every field of every row, first seen first (a table's rows may differ).
    inputs: dict[str, str] = {}
    for row in rows:
        if isinstance(row, Mapping):
            for key in row:
                name = _INPUT_RENAMES[key] if key in _INPUT_RENAMES else key
                if name is not None and name not in inputs:
                    inputs[name] = key
    columns = ["row", "config_id", *inputs, *RESULT_COLUMNS]
    types = {"row": "int", "config_id": "str", "query": "str", "value": "float", "lower": "float", "upper": "float",
             "error": "float", "method": "str", "certified": "bool", "seconds": "float", "error_message": "str",
             "composition": "str"}
    for name, key in inputs.items():
        types[name] = _column_type(row.get(key) for row in rows if isinstance(row, Mapping))

    owned = _connect(scheduler, timeout) if scheduler is not None else None  # fails fast, before any output
    try:
        sink = _sink(kind, output, columns, types)
    except BaseException:
        if owned is not None:
            owned.close()
        raise
    done = sink.done()

    def shaped(index: int, query: str | None, key: str | None, outcome: Mapping) -> dict:
        row = rows[index]
        out: dict = {"row": index, "config_id": ids[index]}
        for name, field_name in inputs.items():
            out[name] = row.get(field_name) if isinstance(row, Mapping) else None
        out.update(query=query, **{column: outcome[column] for column in RESULT_COLUMNS[1:-1]},
                   composition=None if key is None else _digest(key))
        return out

    parser = _Parser(budget)
    groups: dict[str, list[int]] = {}
    tasks: dict[str, tuple[str, dict]] = {}
    buffer: list[dict] = []
    malformed = failed = written = evaluations = 0
    problems: list[str] = []
    for index, row in enumerate(rows):
        if ids[index] in done:
            continue
        try:
            query, key, task = parser.parse(row)
        except (ValueError, TypeError, OverflowError) as error:
            query_name = None
            if isinstance(row, Mapping) and isinstance(row.get("query"), str):
                query_name = row["query"]
            problems.append(f"row {index}: {_one_line(error)}")
            buffer.append(shaped(index, query_name, None, {**_EMPTY, "seconds": None, "error_message": problems[-1]}))
            malformed += 1
            continue
        if key not in groups:
            groups[key] = []
            tasks[key] = (query, task)
        groups[key].append(index)
    skipped = sum(1 for config_id in ids if config_id in done)
    compositions = len(groups)

    if client is None and scheduler is None:
        workers = workers or os.cpu_count() or 1
    dask_client = client if client is not None else owned
    if dask_client is not None:
        workers = max(1, len(dask_client.scheduler_info().get("workers", {})))
    assert workers is not None
    size = batch_size or max(1, min(MAX_BATCH, math.ceil(compositions / (workers * TASKS_PER_WORKER))))
    keys = list(groups)
    batches = iter([[(key, tasks[key][1]) for key in keys[start:stop]]
                    for start, stop in batch_bounds(len(keys), size, None if batch_size else workers)])
    if dask_client is not None:
        completed = _dask(batches, dask_client)
    elif workers == 1:
        completed = _serial(batches)
    else:
        completed = _processes(batches, workers)

    progress = _Progress(len(rows), skipped, not quiet)
    progress.update(len(buffer))
    last_flush = time.monotonic()
    complete = False
    try:
        for outcomes in completed:
            for key, outcome in outcomes:
                indices, (query, _) = groups.pop(key), tasks.pop(key)
                buffer.extend(shaped(index, query, key, outcome) for index in indices)
                progress.update(len(indices))
                evaluations += 1
            if len(buffer) >= flush_rows or time.monotonic() - last_flush > FLUSH_SECONDS:
                failed += sum(row["error_message"] is not None for row in buffer)
                written += len(buffer)
                sink.write(buffer)
                buffer, last_flush = [], time.monotonic()
        complete = True
    finally:
        if buffer:
            failed += sum(row["error_message"] is not None for row in buffer)
            written += len(buffer)
            sink.write(buffer)
        sink.close(complete)
        progress.close()
        if owned is not None:
            owned.close()
    return SweepReport(rows=sink.rows if kind == "memory" else None,
                       output=Path(output) if kind in ("csv", "parquet") else None,  # type: ignore[arg-type]
                       configurations=len(rows), skipped=skipped, written=written, failed=failed,
                       malformed=malformed, problems=problems, compositions=compositions, evaluations=evaluations,
                       seconds=time.perf_counter() - start)


# ---------------------------------------------------------------------------
# Per-record accounting
# ---------------------------------------------------------------------------

#: Default quantiles of the per-record epsilons in :attr:`PerRecord.summary`.
QUANTILES = (0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99)


@dataclass
class PerRecord:
    """Each record's epsilon(delta), the distinct compositions behind them and a summary.

    Attributes
    ----------
    epsilon : numpy.ndarray
        One epsilon per record: the upper end of the bounds of its composition's epsilon(delta), as
        :meth:`afa.Accountant.epsilon` reports it; 0 for a record in no composition (no step, or sensitivity
        0); NaN where its composition failed (the reason is in ``compositions``).
    composition : numpy.ndarray
        Each record's index into ``compositions`` (-1: the empty composition, epsilon 0).
    compositions : list of dict
        One sweep row per distinct composition (:func:`sweep`'s columns: ``mechanisms``, ``delta``, ``value``,
        ``lower``, ``upper``, ..., ``error_message``) plus ``records``, how many records have it.
    summary : dict
        ``count`` (records), ``failed`` (records without an epsilon), ``compositions`` (distinct ones), ``min``,
        ``quantiles`` ({q: epsilon}), ``max`` and ``histogram`` ({"counts": [...], "edges": [...]}) of the
        finite epsilons.

    Examples
    --------
    Three records: two with 10 steps (sensitivities 1 and 0.5), one with 20; sigma 2, no subsampling.

    >>> import afa
    >>> from afa import sweep
    >>> records = sweep.per_record([10, 10, 20], [1.0, 0.5, 1.0], sigma=2.0, delta=1e-5, workers=1, quiet=True)
    >>> records.summary["compositions"]
    3
    >>> bool(records.epsilon[1] == afa.Accountant().compose(afa.Gaussian(4.0), times=10).epsilon(1e-5))
    True
    """

    epsilon: np.ndarray
    composition: np.ndarray
    compositions: list[dict]
    summary: dict


def _dpsgd_rows(steps, sensitivity, sigma, sampling_rate, sampling, buckets) -> tuple[np.ndarray, list[list[dict]]]:
    """Inverse indices and mechanism lists of the distinct (steps, bucketed sensitivity) pairs."""
    steps = np.asarray(steps)
    if steps.ndim != 1 or steps.size == 0:
        raise ValueError(f"steps must be a non-empty 1-d array (one count per record), got shape {steps.shape}")
    if not np.issubdtype(steps.dtype, np.number) or np.any(steps < 0) or np.any(steps != np.round(steps)):
        raise ValueError("steps must hold non-negative integers (the steps each record takes part in)")
    if sensitivity is None:
        sensitivity = np.ones(steps.shape)
    sensitivity = np.asarray(sensitivity, dtype=float)
    if sensitivity.ndim == 0:
        sensitivity = np.full(steps.shape, float(sensitivity))
    if sensitivity.shape != steps.shape:
        raise ValueError(f"sensitivity must have one value per record ({steps.size}), got shape {sensitivity.shape}")
    if not np.all((sensitivity >= 0) & (sensitivity <= 1)):
        raise ValueError("sensitivity must be in [0, 1] (a record's gradient norm over the clipping norm)")
    if buckets is not None:
        edges = np.unique(np.asarray(buckets, dtype=float))
        if edges.ndim != 1 or edges.size == 0 or edges[0] <= 0 or edges[-1] < 1 or not np.all(np.isfinite(edges)):
            raise ValueError("buckets must be positive finite sensitivity bounds, the largest >= 1")
        # Round each sensitivity up to its bucket's bound (0 stays 0: such a record never affects the output).
        sensitivity = np.where(sensitivity > 0, edges[np.searchsorted(edges, sensitivity, side="left")], 0.0)
    sigma = check.positive("sigma", sigma)
    pairs = np.column_stack([steps.astype(float), sensitivity])
    pairs[(pairs[:, 0] == 0) | (pairs[:, 1] == 0)] = 0.0  # no step or no influence: the empty composition
    distinct, inverse = np.unique(pairs, axis=0, return_inverse=True)
    compositions: list[list[dict]] = []
    for count, bound in distinct:
        if count == 0:
            compositions.append([])
            continue
        table: dict = {"type": "gaussian", "sigma": sigma / bound, "times": int(count)}
        if sampling_rate is not None:
            table.update(sampling_rate=sampling_rate, sampling=sampling)
        compositions.append([table])
    return inverse.reshape(-1), compositions


def _matrix_rows(counts, mechanisms) -> tuple[np.ndarray, list[list[dict]]]:
    """Inverse indices and mechanism lists of the distinct rows of a record x mechanism count matrix."""
    if not isinstance(mechanisms, (list, tuple)) or not all(isinstance(m, Mechanism) for m in mechanisms):
        raise TypeError("mechanisms must be a list of afa.Mechanism, one per column of counts")
    tables = [mechanism.to_dict() for mechanism in mechanisms]
    if hasattr(counts, "tocsr"):  # a scipy.sparse matrix or array: one key per row from its non-zeros
        matrix = counts.tocsr()
        matrix.sum_duplicates()
        matrix.sort_indices()
        if matrix.shape[1] != len(mechanisms):
            raise ValueError(f"counts has {matrix.shape[1]} columns but there are {len(mechanisms)} mechanisms")
        if matrix.nnz and (matrix.data.min() < 0 or np.any(matrix.data != np.round(matrix.data))):
            raise ValueError("counts must hold non-negative integers")
        matrix.eliminate_zeros()
        index: dict[bytes, int] = {}
        inverse = np.empty(matrix.shape[0], dtype=np.int64)
        rows: list[tuple[np.ndarray, np.ndarray]] = []
        for record in range(matrix.shape[0]):
            begin, end = matrix.indptr[record], matrix.indptr[record + 1]
            columns, values = matrix.indices[begin:end], matrix.data[begin:end]
            key = columns.tobytes() + b"|" + values.astype(np.int64).tobytes()
            found = index.get(key)
            if found is None:
                found = index[key] = len(rows)
                rows.append((columns, values))
            inverse[record] = found
    else:
        dense = np.asarray(counts)
        if dense.ndim != 2 or dense.shape[1] != len(mechanisms):
            raise ValueError(f"counts must be a (records, {len(mechanisms)}) matrix, got shape {dense.shape}")
        if not np.issubdtype(dense.dtype, np.number) or np.any(dense < 0) or np.any(dense != np.round(dense)):
            raise ValueError("counts must hold non-negative integers")
        distinct, inverse = np.unique(dense, axis=0, return_inverse=True)
        rows = [(np.flatnonzero(row), row[row != 0]) for row in distinct]
        inverse = inverse.reshape(-1)
    compositions = [[{**tables[column], "times": int(value)} for column, value in zip(columns, values)]
                    for columns, values in rows]
    return inverse, compositions


def per_record(steps=None, sensitivity=None, *, delta: float, sigma: float | None = None,
               sampling_rate: float | None = None, sampling: str = "poisson", buckets=None, counts=None,
               mechanisms: Sequence[Mechanism] | None = None, neighboring: str = "add_remove", method: str = "auto",
               quantiles: Sequence[float] = QUANTILES, bins: int = 20, workers: int | None = None, client=None,
               batch_size: int | None = None, budget: Budget | None = None, quiet: bool = False) -> PerRecord:
    """Each record's own epsilon(delta): identical compositions grouped and each distinct one computed once.

    Give a population in one of two forms:

    - DP-SGD: ``steps`` (per record, how many steps it takes part in: with ``sampling_rate``, the steps in
      which it is eligible for Poisson sampling; without, the steps whose batch holds it) and
      ``sensitivity`` (per record, in [0, 1]: a bound on its per-step gradient norm relative to the clipping
      norm; default 1), the noise multiplier ``sigma``, and optionally ``buckets`` (sensitivity bounds; each
      record's sensitivity is rounded up to the smallest bound at or above it).  Record i's composition is
      ``steps[i]`` uses of ``Gaussian(sigma / sensitivity[i])``, each subsampled at ``sampling_rate`` if given.
    - General: ``counts``, a (records x mechanisms) matrix of non-negative integers (numpy, or scipy.sparse),
      and ``mechanisms``, one :class:`afa.Mechanism` per column: record i's composition uses mechanism j
      ``counts[i, j]`` times.

    Parameters
    ----------
    steps, sensitivity : array_like, optional
        The DP-SGD form (above), one value per record.
    delta : float
        The delta at which every record's epsilon is computed, in (0, 1).
    sigma : float, optional
        The noise multiplier (DP-SGD form), > 0.
    sampling_rate : float, optional
        The Poisson sampling rate of every step (DP-SGD form), in [0, 1]; None: no subsampling.
    sampling : {"poisson", "subset"}, default "poisson"
        The subsampling scheme with ``sampling_rate``.
    buckets : array_like, optional
        Sensitivity bounds fixed in advance (DP-SGD form), positive, the largest >= 1.
    counts : array_like or scipy.sparse matrix, optional
        The general form (above).
    mechanisms : list of Mechanism, optional
        The general form: the mechanism of each column of ``counts``.
    neighboring : {"add_remove", "substitution"}, default "add_remove"
        The neighbouring relation.
    method : str, default "auto"
        The accountant method.
    quantiles : sequence of float, default (0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99)
        The quantiles of the per-record epsilons in the summary.
    bins : int, default 20
        Histogram bins of the summary.
    workers, client, batch_size, budget, quiet
        As for :func:`sweep` (the distinct compositions run as a sweep).

    Returns
    -------
    PerRecord
        ``epsilon`` per record, ``composition`` (each record's distinct composition), ``compositions`` (the
        sweep row of each) and ``summary`` (count, min, quantiles, max, histogram counts).

    Raises
    ------
    ValueError, TypeError
        Both forms or neither, arrays of mismatched shapes, negative or non-integer counts, a sensitivity
        outside [0, 1] or above the largest bucket, bad ``delta``, ``sigma``, ``quantiles`` or ``bins``.  A
        composition the accountant cannot answer does not raise: its records' epsilon is NaN.

    Notes
    -----
    **When these epsilons are valid.**  Record i's epsilon is a (epsilon_i, delta) guarantee for record i when
    its composition -- its participation and its per-step sensitivity bound -- is fixed before the run (e.g.
    the steps in which it is eligible, or a sensitivity bucket that bounds its clipped gradient norm at every
    step, set from public information), so that every step's privacy loss with respect to record i is
    dominated by the stated mechanism.  When the per-record parameters are chosen adaptively, from earlier
    outputs of the same run (e.g. observed gradient norms), the composition is not fixed and these numbers are
    not guarantees: individual privacy filters are needed -- Feldman & Zrnic 2021 ("Individual privacy
    accounting via a Renyi filter") for RDP, Koskela, Tobaben & Honkela 2023 ("Individual privacy accounting
    with Gaussian differential privacy") for GDP/PLD accounting -- which this function does not implement.
    The epsilons depend on the records themselves: publishing them is itself a release of information.

    Examples
    --------
    Four records of a DP-SGD run without subsampling (each record's steps are known), two sensitivity buckets:

    >>> from afa import sweep
    >>> out = sweep.per_record(steps=[100, 100, 50, 0], sensitivity=[0.3, 1.0, 0.45, 1.0], sigma=10.0,
    ...                        buckets=[0.5, 1.0], delta=1e-5, workers=1)
    >>> [round(float(e), 4) for e in out.epsilon]
    [1.9931, 4.3772, 1.3565, 0.0]
    >>> out.summary["count"], out.summary["compositions"], round(out.summary["max"], 4)
    (4, 3, 4.3772)
    """
    delta = check.in_interval("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    if (counts is None) == (steps is None):
        raise ValueError("give either steps (with sigma; the DP-SGD form) or counts with mechanisms (the general "
                         "form)")
    if not isinstance(bins, (int, np.integer)) or isinstance(bins, bool) or bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")
    levels = np.asarray(quantiles, dtype=float)
    if levels.ndim != 1 or not np.all((levels >= 0) & (levels <= 1)):
        raise ValueError(f"quantiles must be a list of numbers in [0, 1], got {quantiles!r}")
    if steps is not None:
        if counts is not None or mechanisms is not None:
            raise ValueError("counts and mechanisms do not combine with steps")
        if sigma is None:
            raise ValueError("sigma (the noise multiplier) is needed with steps")
        inverse, tables = _dpsgd_rows(steps, sensitivity, sigma, sampling_rate, sampling, buckets)
    else:
        for name, value in (("sensitivity", sensitivity), ("sigma", sigma), ("sampling_rate", sampling_rate),
                            ("buckets", buckets)):
            if value is not None:
                raise ValueError(f"{name} belongs to the DP-SGD form (steps), not to counts with mechanisms")
        if mechanisms is None:
            raise ValueError("mechanisms (one per column of counts) is needed with counts")
        inverse, tables = _matrix_rows(counts, mechanisms)
    # The distinct non-empty compositions run as a sweep; the empty one (if any) has epsilon 0.
    nonempty = [index for index, composition in enumerate(tables) if composition]
    rows = [{"mechanisms": tables[index], "delta": delta, "neighboring": neighboring, "method": method}
            for index in nonempty]
    report = sweep(rows, workers=workers, client=client, batch_size=batch_size, budget=budget, quiet=quiet)
    assert report.rows is not None
    values = np.zeros(len(tables))
    position = -np.ones(len(tables), dtype=np.int64)
    records = np.bincount(inverse, minlength=len(tables))
    compositions = []
    for number, (index, row) in enumerate(zip(nonempty, report.rows)):
        values[index] = np.nan if row["upper"] is None else row["upper"]
        position[index] = number
        compositions.append({**row, "records": int(records[index])})
    epsilon = values[inverse]
    finite = epsilon[np.isfinite(epsilon)]
    summary: dict = {"count": int(epsilon.size), "failed": int(np.isnan(epsilon).sum()),
                     "compositions": len(nonempty)}
    if finite.size:
        histogram, edges = np.histogram(finite, bins=int(bins))
        summary.update(min=float(finite.min()),
                       quantiles={float(level): float(value)
                                  for level, value in zip(levels, np.quantile(finite, levels))},
                       max=float(finite.max()),
                       histogram={"counts": histogram.tolist(), "edges": edges.tolist()})
    else:
        summary.update(min=None, quantiles={float(level): None for level in levels}, max=None,
                       histogram={"counts": [], "edges": []})
    return PerRecord(epsilon=epsilon, composition=position[inverse], compositions=compositions, summary=summary)
