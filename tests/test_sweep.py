"""afa.sweep: sweeps over grids and tables, deduplication, failures as rows, resumption, the local-process and Dask
back-ends, and per-record accounting -- checked against afa's own API per configuration and against the Gaussian
closed form (Sommer, Meiser & Mohammadi 2019, Thm 5: delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu))."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse
from scipy.stats import norm

import afa
from afa import _heap
from afa import sweep as sw

ROOT = Path(__file__).resolve().parents[1]
NUMBERS = ("value", "lower", "upper", "error")


def gaussian_delta(epsilon: float, mu: float) -> float:
    """The composed Gaussian's tight delta(epsilon), written out independently of afa (scipy's normal CDF)."""
    return norm.cdf(mu / 2 - epsilon / mu) - math.exp(epsilon) * norm.cdf(-mu / 2 - epsilon / mu)


def gaussian_epsilon(delta: float, mu: float) -> float:
    from scipy.optimize import brentq
    return brentq(lambda eps: gaussian_delta(eps, mu) - delta, 0.0, 200.0, xtol=1e-14, rtol=1e-15)


def direct(row: dict) -> afa.Result:
    """The same configuration through afa's own API."""
    mechanism = afa.Gaussian(row["sigma"])
    if row.get("sampling_rate") is not None:
        mechanism = mechanism.poisson_subsampled(row["sampling_rate"])
    return afa.Accountant().compose(mechanism, times=row["steps"]).epsilon_result(row["delta"])


GRID = {"sigma": [0.9, 3.0], "sampling_rate": [0.05, 1.0], "steps": [10, 200], "delta": [1e-5]}


@pytest.fixture(scope="module")
def serial():
    return sw.sweep(GRID, workers=1, quiet=True)


def values(rows):
    return {row["config_id"]: tuple(row[name] for name in (*NUMBERS, "method", "certified", "error_message"))
            for row in rows}


def test_serial_sweep_equals_the_accountant_and_the_closed_form(serial):
    assert serial.configurations == serial.written == 8 and serial.failed == 0 and serial.compositions == 8
    assert [row["row"] for row in serial.rows] == list(range(8))
    for row in serial.rows:
        result = direct(row)
        # The same answer up to the last bits: a sweep runs each batch with one BLAS thread (afa.sweep), and the
        # thread count changes the rounding of the subsampled MGF's matrix products.
        assert (row["method"], row["certified"]) == (result.method, result.certified)
        for name in ("value", "lower", "upper"):
            assert row[name] == pytest.approx(getattr(result, name), rel=1e-14, abs=0.0), name
        # An error estimate at the rounding floor moves with those bits too.
        assert row["error"] == pytest.approx(result.error, rel=1e-6, abs=1e-14 * abs(result.value) + 1e-300)
        assert row["query"] == "epsilon" and row["error_message"] is None and row["seconds"] > 0
        if row["sampling_rate"] == 1.0:  # q = 1: plain composed Gaussians, mu = sqrt(steps) / sigma
            mu = math.sqrt(row["steps"]) / row["sigma"]
            assert row["value"] == pytest.approx(gaussian_epsilon(1e-5, mu), rel=1e-9)
            assert gaussian_delta(row["upper"], mu) <= 1e-5 * (1 + 1e-9)


def test_delta_and_calibration_queries():
    rows = [{"epsilon": 1.0, "mechanisms": [{"type": "laplace", "scale": 2.0, "times": 3},
                                            {"type": "gaussian", "sigma": 5.0, "times": 10}]},
            {"target_epsilon": 1.0, "delta": 1e-5, "steps": 10, "label": "calibrate"},
            {"query": "delta", "epsilon": 0.5, "delta": 1e-5, "sigma": 4.0, "steps": 16}]
    report = sw.sweep(rows, workers=1, quiet=True)
    first, second, third = report.rows
    expected = (afa.Accountant().compose(afa.Laplace(2.0), 3).compose(afa.Gaussian(5.0), 10).delta_result(1.0))
    assert (first["query"], first["value"], first["upper"]) == ("delta", expected.value, expected.upper)
    calibration = afa.calibrate_sigma(1.0, 1e-5, steps=10)
    assert second["query"] == "sigma" and second["value"] == calibration.value
    assert second["lower"] == calibration.rejected and second["certified"] == calibration.certified
    assert second["label"] == "calibrate"
    assert third["query"] == "delta" and third["value"] == pytest.approx(gaussian_delta(0.5, 1.0), rel=1e-9)


def test_identical_compositions_are_computed_once(monkeypatch):
    calls = []
    original = afa.Accountant.from_dict.__func__

    def counting(cls, spec):
        calls.append(json.dumps(spec, sort_keys=True))
        return original(cls, spec)

    monkeypatch.setattr(afa.Accountant, "from_dict", classmethod(counting))
    laplace, gauss = {"type": "laplace", "scale": 3.0}, {"type": "gaussian", "sigma": 4.0}
    rows = [
        {"sigma": 4.0, "steps": 20, "delta": 1e-6},
        {"sigma": 4.0, "steps": 20, "delta": 1e-6, "label": "same, labelled"},
        {"mechanisms": [{**gauss, "times": 20}], "delta": 1e-6},                    # the same, as a table
        {"mechanisms": [{**gauss, "times": 5}, {**gauss, "times": 15}], "delta": 1e-6},  # the same, split
        {"mechanisms": [{**laplace, "times": 2}, {**gauss, "times": 3}], "delta": 1e-6},
        {"mechanisms": [{**gauss, "times": 3}, {**laplace, "times": 2}], "delta": 1e-6},  # order swapped
        {"mechanisms": [{**gauss, "times": 3}, {**laplace, "times": 2}], "delta": 1e-7},  # another query
        {"sigma": 4.0, "steps": 20, "delta": 1e-6, "neighboring": "substitution"},  # another relation
    ]
    report = sw.sweep(rows, workers=1, quiet=True)
    assert report.compositions == report.evaluations == len(calls) == 4
    by_row = report.rows
    assert len({row["composition"] for row in by_row[:4]}) == 1 and by_row[4]["composition"] == by_row[5]["composition"]
    assert len({row["config_id"] for row in by_row}) == 8
    assert len({row["upper"] for row in by_row[:4]}) == 1 and by_row[4]["upper"] == by_row[5]["upper"]
    mu = math.sqrt(20) / 4.0
    assert by_row[0]["value"] == pytest.approx(gaussian_epsilon(1e-6, mu), rel=1e-9)


def test_failures_are_rows_and_malformed_rows_name_their_row():
    rows = [{"sigma": 1.0, "steps": 10, "delta": 1e-20, "method": "quadrature"},  # AccuracyError
            {"sigma": 1.0, "steps": 10, "delta": 1e-5},
            {"sigma": 1.0, "steps": 10, "sampling_rate": 1.5, "delta": 1e-5},      # sampling_rate outside [0, 1]
            {"mechanisms": [{"type": "gausian", "sigma": 1.0}], "delta": 1e-5},     # unknown mechanism
            {"sigma": 1.0, "delta": 1e-5},                                          # missing steps
            {"sigma": 1.0, "steps": 10},                                            # no query
            {"sigma": 1.0, "steps": 10, "sampling_rat": 0.1, "delta": 1e-5},        # misspelt field
            "not a row",
            {"sigma": 2.0, "steps": 10, "delta": 1e-5}]
    report = sw.sweep(rows, workers=1, quiet=True)
    messages = [row["error_message"] for row in report.rows]
    assert messages[0].startswith("AccuracyError: delta=1e-20 is below what method='quadrature' resolves")
    assert report.rows[0]["value"] is None and report.rows[0]["requested_method"] == "quadrature"
    assert messages[2] == "row 2: ValueError: sampling_rate must be in [0, 1], got 1.5"
    assert messages[3].startswith("row 3: ValueError: mechanisms[0]: unknown mechanism type 'gausian'")
    assert messages[4].startswith("row 4: ValueError: missing field 'steps'")
    assert messages[5].startswith("row 5: ValueError: missing field: 'delta'")
    assert messages[6].startswith("row 6: ValueError: unknown field 'sampling_rat'")
    assert messages[7] == "row 7: TypeError: a configuration must be a table/dict of fields, got str"
    assert report.problems == messages[2:8] and report.malformed == 6 and report.failed == 7
    for index in (1, 8):
        mu = math.sqrt(10) / rows[index]["sigma"]
        assert messages[index] is None
        assert report.rows[index]["value"] == pytest.approx(gaussian_epsilon(1e-5, mu), rel=1e-9)


def read_csv(path):
    with open(path, newline="") as stream:
        return list(csv.DictReader(stream))


def test_csv_output_resumes_after_an_interruption(tmp_path):
    grid = {"sigma": [2.0, 3.0, 5.0], "steps": [10, 20, 40], "delta": [1e-5]}
    complete = sw.sweep(grid, workers=1, quiet=True)
    output = tmp_path / "out.csv"
    sw.sweep(grid, output, workers=1, quiet=True)
    lines = output.read_text().splitlines(keepends=True)
    output.write_text("".join(lines[:4]) + lines[4][:25])  # three rows and a row cut off mid-write
    report = sw.sweep(grid, output, workers=1, quiet=True)
    assert (report.skipped, report.written, report.evaluations) == (3, 6, 6)
    rows = read_csv(output)
    assert sorted(int(row["row"]) for row in rows) == list(range(9))
    expected = {row["config_id"]: row["upper"] for row in complete.rows}
    assert all(float(row["upper"]) == expected[row["config_id"]] for row in rows)
    again = sw.sweep(grid, output, workers=1, quiet=True)
    assert (again.skipped, again.written, again.evaluations) == (9, 0, 0)
    with pytest.raises(ValueError, match="holds another sweep"):
        sw.sweep({"sigma": [2.0], "steps": [10], "epsilon": [1.0]}, output, workers=1, quiet=True)


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_a_sweep_stopped_after_some_batches_resumes(tmp_path, monkeypatch, suffix):
    if suffix == "parquet":
        pytest.importorskip("pyarrow")
    grid = {"sigma": [2.0, 3.0], "steps": [10, 20, 40], "delta": [1e-5]}
    output = tmp_path / f"out.{suffix}"
    calls = []
    original = afa.Accountant.from_dict.__func__

    def interrupted(cls, spec):
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.append(1)
        return original(cls, spec)

    monkeypatch.setattr(afa.Accountant, "from_dict", classmethod(interrupted))
    with pytest.raises(KeyboardInterrupt):
        sw.sweep(grid, output, workers=1, batch_size=1, quiet=True, flush_rows=1)
    monkeypatch.setattr(afa.Accountant, "from_dict", classmethod(original))
    report = sw.sweep(grid, output, workers=1, quiet=True)
    assert (report.skipped, report.written, report.evaluations) == (3, 3, 3)
    if suffix == "parquet":
        import pyarrow.parquet as pq
        rows = pq.read_table(output).to_pylist()
        assert not Path(str(output) + ".parts").exists()
    else:
        rows = read_csv(output)
    assert sorted(int(row["row"]) for row in rows) == list(range(6))
    for row in rows:
        mu = math.sqrt(int(row["steps"])) / float(row["sigma"])
        assert float(row["value"]) == pytest.approx(gaussian_epsilon(1e-5, mu), rel=1e-9)


def test_local_processes_equal_serial(serial):
    parallel = sw.sweep(GRID, workers=2, batch_size=1, quiet=True)
    assert values(parallel.rows) == values(serial.rows)


def test_dask_local_cluster_equals_serial(monkeypatch):
    distributed = pytest.importorskip("distributed")
    # The workers are fresh processes: they must import this checkout's afa.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    # Parameters the contour answers well within its time share (few steps of a small sampling rate can make
    # method="auto" fall back to the PLD on a loaded machine, so that the engine would depend on the timing).
    grid = {"sigma": [0.8, 1.5, 3.0], "sampling_rate": [0.1, 1.0], "steps": [50, 300], "delta": [1e-5, 1e-8]}
    rows = sw.grid(grid) + sw.grid({**grid, "sigma": [1.5]}) + [{"sigma": 1.0, "steps": 10, "sampling_rate": 3.0,
                                                                  "delta": 1e-5}]
    reference = sw.sweep(rows, workers=1, quiet=True)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        report = sw.sweep(rows, client=client, quiet=True)
        # Dask's nanny starts the workers with malloc tuning, the case afa._heap adjusts for during a batch.
        assert all(client.run(_heap.tuned_at_start).values())
    assert report.configurations == 33 and report.compositions == 24 and report.malformed == 1
    assert values(report.rows) == values(reference.rows)


def test_an_unreachable_scheduler_fails_fast():
    pytest.importorskip("distributed")
    start = time.monotonic()
    with pytest.raises(sw.SchedulerError, match=r"cannot reach the Dask scheduler at 'tcp://127\.0\.0\.1:9' within 2 s"):
        sw.sweep(GRID, scheduler="tcp://127.0.0.1:9", timeout=2.0, quiet=True)
    assert time.monotonic() - start < 15


def test_bad_arguments_name_the_parameter(tmp_path):
    with pytest.raises(ValueError, match="output must end in .csv or .parquet"):
        sw.sweep(GRID, tmp_path / "out.txt")
    with pytest.raises(ValueError, match="workers must be an integer"):
        sw.sweep(GRID, workers=0)
    with pytest.raises(ValueError, match="flush_rows must be an integer"):
        sw.sweep(GRID, flush_rows=0)
    with pytest.raises(TypeError, match="flush_rows"):
        sw.sweep(GRID, flush_rows=2.5)
    with pytest.raises(ValueError, match="grid parameter 'sigma' has no values"):
        sw.sweep({"sigma": [], "steps": [1], "delta": [1e-5]})
    with pytest.raises(ValueError, match="give client or scheduler"):
        sw.sweep(GRID, client=object(), scheduler="tcp://x:1")


def test_configuration_files(tmp_path):
    (tmp_path / "grid.json").write_text(json.dumps({"grid": {"sigma": [2.0, 4.0], "steps": [10], "delta": 1e-5}}))
    (tmp_path / "rows.toml").write_text('[[rows]]\nsigma = 2.0\nsteps = 10\ndelta = 1e-5\n'
                                        '[[rows]]\nepsilon = 1.0\nmechanisms = [{type = "laplace", scale = 2.0}]\n')
    (tmp_path / "rows.csv").write_text('sigma,steps,delta,epsilon,mechanisms\n2.0,10,1e-5,,\n'
                                       ',,,1.0,"[{""type"": ""laplace"", ""scale"": 2.0}]"\n')
    assert sw.read_configurations(tmp_path / "grid.json") == [{"sigma": 2.0, "steps": 10, "delta": 1e-5},
                                                              {"sigma": 4.0, "steps": 10, "delta": 1e-5}]
    assert sw.read_configurations(tmp_path / "rows.toml") == sw.read_configurations(tmp_path / "rows.csv") == [
        {"sigma": 2.0, "steps": 10, "delta": 1e-5}, {"epsilon": 1.0, "mechanisms": [{"type": "laplace", "scale": 2.0}]}]
    with pytest.raises(ValueError, match="exactly one of 'grid'"):
        (tmp_path / "bad.json").write_text('{"grid": {}, "rows": []}')
        sw.read_configurations(tmp_path / "bad.json")


def test_cli_sweep(tmp_path):
    spec = tmp_path / "rows.csv"
    spec.write_text("sigma,steps,sampling_rate,delta\n2.0,10,,1e-5\n2.0,10,7,1e-5\n4.0,40,1.0,1e-5\n")
    output = tmp_path / "out.csv"
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "afa.cli", "sweep", str(spec), "-o", str(output), "--workers", "1"],
                         capture_output=True, text=True, env=environment, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "afa sweep: row 1: ValueError: sampling_rate must be in [0, 1], got 7.0" in run.stderr
    rows = read_csv(output)
    assert [row["error_message"] for row in rows if row["row"] == "1"] == [
        "row 1: ValueError: sampling_rate must be in [0, 1], got 7.0"]
    good = {row["row"]: float(row["value"]) for row in rows if row["error_message"] == ""}
    assert good["0"] == pytest.approx(gaussian_epsilon(1e-5, math.sqrt(10) / 2.0), rel=1e-9)
    assert good["2"] == pytest.approx(good["0"], rel=1e-12)  # the same mu
    run = subprocess.run([sys.executable, "-m", "afa.cli", "sweep", str(spec), "--quiet", "--workers", "1"],
                         capture_output=True, text=True, env=environment, cwd=tmp_path)
    assert run.returncode == 0 and run.stderr == "" and run.stdout.startswith("row,config_id,sigma,steps")
    run = subprocess.run([sys.executable, "-m", "afa.cli", "sweep", str(tmp_path / "missing.csv")],
                         capture_output=True, text=True, env=environment, cwd=tmp_path)
    assert run.returncode == 2 and "afa: error: configurations file" in run.stderr


def test_per_record_equals_per_configuration_calls():
    rng = np.random.default_rng(7)
    n, sigma, delta = 20_000, 8.0, 1e-6
    steps = rng.choice([0, 50, 100, 400], size=n)
    sensitivity = rng.uniform(0, 1, size=n)
    sensitivity[:10] = 0.0
    out = sw.per_record(steps, sensitivity, sigma=sigma, buckets=[0.25, 0.5, 0.75, 1.0], delta=delta, workers=1,
                        quiet=True)
    bucket = np.ceil(sensitivity * 4) / 4
    mu = np.sqrt(steps) * bucket / sigma
    assert out.summary["compositions"] == 12 and out.summary["count"] == n and out.summary["failed"] == 0
    truth = {m: (gaussian_epsilon(delta, m) if m > 0 else 0.0) for m in np.unique(mu)}
    np.testing.assert_allclose(out.epsilon, [truth[m] for m in mu], rtol=1e-9, atol=0)
    assert np.all(out.epsilon[:10] == 0) and np.all(out.composition[:10] == -1)
    for row in out.compositions:  # each distinct composition is the accountant's own answer
        (table,) = row["mechanisms"]
        accountant = afa.Accountant().compose(afa.Gaussian(table["sigma"]), table["times"])
        assert row["upper"] == accountant.epsilon(delta)
    assert sum(row["records"] for row in out.compositions) == np.count_nonzero(mu)
    assert out.summary["max"] == out.epsilon.max() and out.summary["min"] == 0.0
    assert sum(out.summary["histogram"]["counts"]) == n
    assert out.summary["quantiles"][0.5] == np.quantile(out.epsilon, 0.5)


def test_per_record_subsampled_and_count_matrix():
    steps = np.array([200, 200, 400, 400, 200])
    subsampled = sw.per_record(steps, [1.0, 0.5, 1.0, 1.0, 0.5], sigma=1.0, sampling_rate=0.05, delta=1e-5,
                               workers=1, quiet=True)
    step = afa.Gaussian(1.0).poisson_subsampled(0.05)
    assert subsampled.epsilon[2] == afa.Accountant().compose(step, 400).epsilon(1e-5)
    half = afa.Gaussian(2.0).poisson_subsampled(0.05)
    assert subsampled.epsilon[1] == subsampled.epsilon[4] == afa.Accountant().compose(half, 200).epsilon(1e-5)
    mechanisms = [afa.Gaussian(4.0), afa.Laplace(10.0), afa.RandomizedResponse(0.55)]
    counts = np.array([[10, 0, 3], [0, 5, 0], [10, 0, 3], [0, 0, 0], [1, 1, 1]])
    dense = sw.per_record(counts=counts, mechanisms=mechanisms, delta=1e-6, workers=1, quiet=True)
    sparse = sw.per_record(counts=scipy.sparse.csr_matrix(counts), mechanisms=mechanisms, delta=1e-6, workers=1,
                           quiet=True)
    np.testing.assert_array_equal(dense.epsilon, sparse.epsilon)
    for record, row in enumerate(counts):
        accountant = afa.Accountant()
        for mechanism, count in zip(mechanisms, row):
            if count:
                accountant.compose(mechanism, int(count))
        assert dense.epsilon[record] == (accountant.epsilon(1e-6) if row.any() else 0.0)
    assert dense.summary["compositions"] == 3
    with pytest.raises(ValueError, match="sensitivity must be in"):
        sw.per_record([1, 2], [0.5, 1.5], sigma=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="give either steps"):
        sw.per_record(delta=1e-5)
    with pytest.raises(ValueError, match="delta must be in"):
        sw.per_record([1], sigma=1.0, delta=0.0)


def test_sweeps_page_examples():
    import doctest
    result = doctest.testfile(str(ROOT / "docs" / "sweeps.md"), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted >= 8


@pytest.mark.parametrize("count, size, workers", [(0, 4, 2), (1, 4, 2), (40, 8, 2), (200, 13, 2), (1000, 32, 7),
                                                  (17, 5, None)])
def test_batches_cover_the_tasks_in_order_and_end_small(count, size, workers):
    """Consecutive, disjoint, covering; at most ``size`` each; guided (workers given): each batch holds at most
    the tasks left over twice the workers, so at least the last 2 * workers - 1 batches are single tasks."""
    bounds = sw.batch_bounds(count, size, workers)
    assert [start for start, _ in bounds] == ([0] + [stop for _, stop in bounds[:-1]] if bounds else [])
    assert (bounds[-1][1] if bounds else 0) == count
    sizes = [stop - start for start, stop in bounds]
    assert all(0 < s <= size for s in sizes)
    if workers is None:
        assert all(s == size for s in sizes[:-1])
    else:
        left = count
        for s in sizes:
            assert s <= max(1, -(-left // (2 * workers)))
            left -= s
        trailing = len(sizes) - next((i + 1 for i in range(len(sizes) - 1, -1, -1) if sizes[i] != 1), 0)
        assert trailing >= min(count, 2 * workers - 1)
