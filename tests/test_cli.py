"""The ``afa`` command line (afa/cli.py).

Every number is checked against a source independent of the CLI: the
closed-form Gaussian privacy profile (scipy.stats.norm), brute-force sums
over output distributions, afa.numerics.exact, or an Accountant built in the test.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import comb
from scipy.stats import norm

import afa
from afa.cli import main
from afa.numerics import exact

LINE = re.compile(r"^(epsilon|delta) = (\S+) for (delta|epsilon) = (\S+) "
                  r"\(method: (\w+), estimate (\S+), bounds \[(\S+), (\S+)\]\)$")
JSON_KEYS = {"query", "reported", "value", "lower", "upper", "error", "method", "neighboring"}


# ---------------------------------------------------------------------------
# Independent references
# ---------------------------------------------------------------------------

def gaussian_delta(eps: float, mu: float) -> float:
    """delta(eps) of N(mu, 1) vs N(0, 1): Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), any real eps."""
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps + norm.logcdf(-eps / mu - mu / 2)))


def gaussian_rr_delta(eps: float, sigma: float, n_gauss: int, p: float, n_rr: int) -> float:
    """Brute force: sum_j C(n,j) p^j (1-p)^(n-j) delta_G(eps - xi (2j - n)), xi = log(p / (1 - p))."""
    mu = math.sqrt(n_gauss) / sigma
    xi = math.log(p / (1 - p))
    return sum(comb(n_rr, j, exact=True) * p ** j * (1 - p) ** (n_rr - j) * gaussian_delta(eps - xi * (2 * j - n_rr), mu)
               for j in range(n_rr + 1))


def hockey_stick(p, q, eps: float) -> float:
    """max over both directions of sum (p - e^eps q)_+ for two PMFs on the same outputs."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    return float(max(np.maximum(p - math.exp(eps) * q, 0).sum(), np.maximum(q - math.exp(eps) * p, 0).sum()))


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def run(capsys, *argv):
    """(exit status, stdout, stderr) of main(argv)."""
    status = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return status, out, err


def run_ok(capsys, *argv) -> str:
    status, out, err = run(capsys, *argv)
    assert status == 0, err
    assert err == ""
    return out


def run_json(capsys, *argv) -> dict:
    out = run_ok(capsys, *argv, "--json")
    # Strict JSON: no NaN/Infinity literals.
    data = json.loads(out, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))
    assert JSON_KEYS <= set(data)
    return data


def parse_line(out: str) -> dict:
    lines = out.splitlines()
    assert len(lines) == 1, out
    match = LINE.match(lines[0])
    assert match, lines[0]
    query, reported, given, given_value, method, value, lower, upper = match.groups()
    assert reported == upper, lines[0]  # the headline is the upper bound, never below what the bounds allow
    return {"query": query, "value": float(value), "given": given, "given_value": float(given_value),
            "method": method, "lower": float(lower), "upper": float(upper)}


def assert_usage_error(capsys, argv, *needles):
    status, out, err = run(capsys, *argv)
    assert status == 2
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("afa: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


GAUSS_1000 = ["epsilon", "--mechanism", "gaussian", "--sigma", "1.0", "--compositions", "1000", "--delta", "1e-5"]


# ---------------------------------------------------------------------------
# Single mechanism
# ---------------------------------------------------------------------------

def test_gaussian_epsilon_plain_line(capsys):
    line = parse_line(run_ok(capsys, *GAUSS_1000))
    mu = math.sqrt(1000) / 1.0
    assert line["query"] == "epsilon" and line["given"] == "delta" and line["given_value"] == 1e-5
    assert line["method"] == "exact"
    # Printed with 10 significant digits.
    assert line["value"] == pytest.approx(exact.gaussian_epsilon(1e-5, mu), rel=1e-9)
    assert gaussian_delta(line["value"], mu) == pytest.approx(1e-5, rel=1e-6)
    assert line["lower"] <= line["value"] <= line["upper"]


@pytest.mark.parametrize("deltas", [["--delta", "1e-5", "1e-7"], ["--delta", "1e-5", "--delta", "1e-7"]])
def test_several_deltas_print_a_table_and_a_json_list(capsys, deltas):
    """Several deltas, after one flag or with the flag repeated: one table row each (against the exact Gaussian
    formula), and with --json a list of objects in the same order."""
    argv = ["epsilon", "--mechanism", "gaussian", "--sigma", "1.0", "--compositions", "1000", *deltas, "--quiet"]
    mu = math.sqrt(1000)
    lines = run_ok(capsys, *argv).strip().splitlines()
    assert lines[0].split()[:2] == ["delta", "epsilon"] and len(lines) == 3
    for line, delta in zip(lines[1:], (1e-5, 1e-7)):
        fields = line.split()
        assert float(fields[0]) == delta
        assert float(fields[1]) == pytest.approx(exact.gaussian_epsilon(delta, mu), rel=1e-9)
    data = json.loads(run_ok(capsys, *argv, "--json"))
    assert [row["delta"] for row in data] == [1e-5, 1e-7]
    assert [row["value"] for row in data] == pytest.approx([exact.gaussian_epsilon(d, mu) for d in (1e-5, 1e-7)],
                                                            rel=1e-9)


def test_gaussian_epsilon_json(capsys):
    data = run_json(capsys, *GAUSS_1000)
    mu = math.sqrt(1000)
    assert data["query"] == "epsilon" and data["delta"] == 1e-5
    assert data["neighboring"] == "add_remove" and data["method"] == "exact"
    assert data["value"] == pytest.approx(exact.gaussian_epsilon(1e-5, mu), rel=1e-12)
    assert gaussian_delta(data["value"], mu) == pytest.approx(1e-5, rel=1e-8)
    assert data["lower"] <= data["value"] <= data["upper"]
    assert 0 <= data["error"] < 1e-6


@pytest.mark.parametrize("sensitivity", [None, 3])
def test_gaussian_delta_query(capsys, sensitivity):
    extra = [] if sensitivity is None else ["--sensitivity", sensitivity]
    data = run_json(capsys, "delta", "--epsilon", 1.0, "--mechanism", "gaussian", "--sigma", 2.0,
                    "--compositions", 10, *extra)
    mu = math.sqrt(10) * (sensitivity or 1) / 2.0
    assert data["query"] == "delta" and data["epsilon"] == 1.0
    assert data["value"] == pytest.approx(gaussian_delta(1.0, mu), rel=1e-9)


def test_subprocess_python_m(tmp_path):
    root = Path(afa.__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    completed = subprocess.run(
        [sys.executable, "-m", "afa.cli", "epsilon", "--mechanism", "gaussian", "--sigma", "1.0",
         "--compositions", "1000", "--delta", "1e-5"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""
    line = parse_line(completed.stdout)
    assert line["value"] == pytest.approx(exact.gaussian_epsilon(1e-5, math.sqrt(1000)), rel=1e-9)
    assert gaussian_delta(line["value"], math.sqrt(1000)) == pytest.approx(1e-5, rel=1e-6)


@pytest.mark.parametrize("name", ["randomized-response", "randomized_response"])
def test_randomized_response(capsys, name):
    # One use: delta(eps) = p - e^eps (1 - p) for 0 <= eps <= log(p / (1 - p)).
    data = run_json(capsys, "delta", "--epsilon", 0.1, "--mechanism", name, "--p", 0.6)
    assert data["value"] == pytest.approx(0.6 - math.exp(0.1) * 0.4, rel=1e-12)


def test_randomized_response_composed_epsilon(capsys):
    data = run_json(capsys, "epsilon", "--delta", 1e-3, "--mechanism", "randomized-response", "--p", 0.6,
                    "--compositions", 20)
    assert exact.randomized_response_delta(data["value"], 0.6, 20) == pytest.approx(1e-3, rel=1e-8)


def test_kary_randomized_response_substitution(capsys):
    # Substitution pair P = (p, o, o), Q = (o, p, o), o = (1 - p) / (k - 1).
    p, k, eps = 0.6, 3, 0.2
    other = (1 - p) / (k - 1)
    data = run_json(capsys, "delta", "--epsilon", eps, "--mechanism", "kary-randomized-response",
                    "--k", k, "--p", p, "--neighboring", "substitution")
    assert data["neighboring"] == "substitution"
    assert data["value"] == pytest.approx(hockey_stick([p, other, other], [other, p, other], eps), rel=1e-12)


def test_approx_dp_flags(capsys):
    # delta(eps0) of the (eps0, delta0) dominating pair is delta0.
    data = run_json(capsys, "delta", "--epsilon", 1.0, "--mechanism", "approx-dp",
                    "--dp-epsilon", 1.0, "--dp-delta", 1e-3)
    assert data["value"] == pytest.approx(1e-3, rel=1e-12)


def test_propose_test_release_flags(capsys):
    # One use: mass delta0 at +inf, else a Laplace loss with a = eps0, whose delta is 1 - e^{(eps - a)/2}
    # on [0, a] (Zhu, Dong & Wang 2022, Lemma 34).
    eps0, delta0, eps = 1.0, 1e-3, 0.4
    data = run_json(capsys, "delta", "--epsilon", eps, "--mechanism", "propose-test-release",
                    "--ptr-epsilon", eps0, "--ptr-delta", delta0)
    assert data["value"] == pytest.approx(delta0 + (1 - delta0) * -math.expm1((eps - eps0) / 2), rel=1e-12)


def test_data_dependent_gaussian_flags(capsys):
    # One use: the closed form afa.numerics.exact.data_dependent_gaussian_delta (checked against mpmath in
    # tests/test_data_dependent.py) is delta at the returned epsilon.
    s1, s2, m, target = 1.5, 1.0, 1.0, 1e-10
    data = run_json(capsys, "epsilon", "--delta", target, "--mechanism", "data-dependent-gaussian",
                    "--sigma1", s1, "--sigma2", s2, "--sensitivity", m)
    reached = max(exact.data_dependent_gaussian_delta(data["value"], s1, s2, m, d) for d in ("remove", "add"))
    assert data["method"] == "exact"
    assert reached == pytest.approx(target, rel=1e-9)


def test_dpsgd_sampling_rate(capsys):
    # The flags build the same composition as the library; the literature value (q = 0.01, sigma = 1,
    # 1000 steps, delta = 1e-5) is eps = 1.828237.
    data = run_json(capsys, "epsilon", "--delta", 1e-5, "--mechanism", "gaussian", "--sigma", 1,
                    "--sampling-rate", 0.01, "--compositions", 1000)
    assert abs(data["value"] - 1.828237) <= 5e-7
    subset = run_json(capsys, "epsilon", "--delta", 1e-5, "--mechanism", "gaussian", "--sigma", 1,
                      "--sampling-rate", 0.01, "--sampling", "subset", "--compositions", 1000)
    assert subset["value"] == data["value"]  # additive noise: the same pair (Zhu, Dong & Wang 2022, Thm 11(2))


def test_spec_sampling_rate(tmp_path, capsys):
    spec = tmp_path / "dpsgd.json"
    spec.write_text(json.dumps({"mechanisms": [{"type": "gaussian", "sigma": 1.0, "sampling_rate": 0.01,
                                                "times": 1000}]}))
    data = run_json(capsys, "epsilon", "--delta", 1e-5, "--spec", str(spec))
    assert abs(data["value"] - 1.828237) <= 5e-7


def test_discrete_laplace_sensitivity(capsys):
    a, shift, eps = 0.7, 2, 0.5
    x = np.arange(-400, 401)
    p = math.tanh(a / 2) * np.exp(-a * np.abs(x))
    q = math.tanh(a / 2) * np.exp(-a * np.abs(x - shift))
    data = run_json(capsys, "delta", "--epsilon", eps, "--mechanism", "discrete-laplace", "--a", a,
                    "--sensitivity", shift)
    assert data["value"] == pytest.approx(hockey_stick(p, q, eps), rel=1e-9)


def test_discrete_gaussian(capsys):
    sigma, eps = 2.0, 0.3
    x = np.arange(-200, 202)
    weights = np.exp(-x ** 2 / (2 * sigma ** 2))
    p = weights / weights.sum()
    q = np.exp(-(x - 1) ** 2 / (2 * sigma ** 2)) / weights.sum()
    data = run_json(capsys, "delta", "--epsilon", eps, "--mechanism", "discrete-gaussian", "--sigma", sigma,
                    "--compositions", 1)
    assert data["value"] == pytest.approx(hockey_stick(p, q, eps), rel=1e-9)


def test_infinite_epsilon_is_strict_json(capsys):
    # Randomized response with p = 1 has all its loss at +infinity.
    data = run_json(capsys, "epsilon", "--delta", 1e-5, "--mechanism", "randomized-response", "--p", 1)
    assert data["value"] == "Infinity" and float(data["value"]) == math.inf
    line = parse_line(run_ok(capsys, "epsilon", "--delta", 1e-5, "--mechanism", "randomized-response", "--p", 1))
    assert line["value"] == math.inf


# ---------------------------------------------------------------------------
# Spec files
# ---------------------------------------------------------------------------

MIXED_TOML = """\
[[mechanisms]]
type = "gaussian"
sigma = 5.0
times = 5
[[mechanisms]]
type = "randomized-response"
p = 0.52
times = 5
"""
MIXED_JSON = {"neighboring": "add_remove",
              "mechanisms": [{"type": "gaussian", "sigma": 5.0, "times": 5},
                             {"type": "randomized_response", "p": 0.52, "times": 5}]}


@pytest.fixture(params=["toml", "json"])
def mixed_spec(request, tmp_path) -> Path:
    path = tmp_path / f"mixed.{request.param}"
    path.write_text(MIXED_TOML if request.param == "toml" else json.dumps(MIXED_JSON))
    return path


@pytest.mark.parametrize("eps", [0.0, 0.5, 1.5])
def test_spec_delta_matches_accountant_and_brute_force(capsys, mixed_spec, eps):
    data = run_json(capsys, "delta", "--epsilon", eps, "--spec", mixed_spec)
    direct = afa.Accountant().compose(afa.Gaussian(sigma=5.0), 5).compose(afa.RandomizedResponse(p=0.52), 5)
    assert data["value"] == pytest.approx(direct.delta(eps), rel=1e-14)
    assert data["value"] == pytest.approx(gaussian_rr_delta(eps, 5.0, 5, 0.52, 5), rel=1e-9)
    assert data["neighboring"] == "add_remove"


def test_spec_epsilon_query(capsys, mixed_spec):
    line = parse_line(run_ok(capsys, "epsilon", "--delta", 1e-4, "--spec", mixed_spec))
    assert gaussian_rr_delta(line["value"], 5.0, 5, 0.52, 5) == pytest.approx(1e-4, rel=1e-7)


def test_spec_discrete_mechanism_brute_force(capsys, tmp_path):
    p, q, eps = [0.5, 0.3, 0.2], [0.2, 0.3, 0.5], 0.3
    path = tmp_path / "pmf.json"
    path.write_text(json.dumps({"mechanisms": [{"type": "discrete-mechanism", "p_pmf": p, "q_pmf": q, "times": 2}]}))
    pairs = list(itertools.product(range(3), repeat=2))
    p2 = [p[i] * p[j] for i, j in pairs]
    q2 = [q[i] * q[j] for i, j in pairs]
    data = run_json(capsys, "delta", "--epsilon", eps, "--spec", path)
    assert data["value"] == pytest.approx(hockey_stick(p2, q2, eps), rel=1e-12)


def test_spec_neighboring_and_flag_override(capsys, tmp_path):
    path = tmp_path / "kary.toml"
    path.write_text('neighboring = "substitution"\n[[mechanisms]]\ntype = "kary_randomized_response"\n'
                    "k = 4\np = 0.5\ntimes = 3\n")
    mechanism = afa.KaryRandomizedResponse(k=4, p=0.5)
    from_spec = run_json(capsys, "delta", "--epsilon", 0.4, "--spec", path)
    assert from_spec["neighboring"] == "substitution"
    assert from_spec["value"] == pytest.approx(afa.Accountant("substitution").compose(mechanism, 3).delta(0.4),
                                               rel=1e-14)
    overridden = run_json(capsys, "delta", "--epsilon", 0.4, "--spec", path, "--neighboring", "add_remove")
    assert overridden["neighboring"] == "add_remove"
    assert overridden["value"] == pytest.approx(afa.Accountant("add_remove").compose(mechanism, 3).delta(0.4),
                                                rel=1e-14)
    assert overridden["value"] != pytest.approx(from_spec["value"], rel=1e-3)


SPEC_ERRORS = [
    # (file name, content, substrings the message must contain)
    ("unknown_key.toml", '[[mechanisms]]\ntype = "gaussian"\nsigma = 1.0\nsigmaa = 2.0\n', ["'sigmaa'", "gaussian"]),
    ("unknown_key.json", '{"mechanisms": [{"type": "laplace", "scale": 1, "p": 0.5}]}', ["'p'", "laplace"]),
    ("malformed.toml", '[[mechanisms]]\ntype = "gaussian"\nsigma = \n', ["invalid TOML", "line 3"]),
    ("malformed.json", '{"mechanisms": [{"type": "gaussian", "sigma": 1.0,}]}', ["invalid JSON"]),
    ("unknown_type.toml", '[[mechanisms]]\ntype = "gauss"\nsigma = 1.0\n', ["unknown mechanism type", "'gauss'"]),
    ("missing_type.json", '{"mechanisms": [{"sigma": 1.0}]}', ["'type'"]),
    ("missing_param.json", '{"mechanisms": [{"type": "gaussian"}]}', ["'sigma'", "gaussian"]),
    ("bad_value.json", '{"mechanisms": [{"type": "gaussian", "sigma": -1}]}', ["gaussian", "sigma must be > 0"]),
    ("bad_times.toml", '[[mechanisms]]\ntype = "gaussian"\nsigma = 1.0\ntimes = 0\n', ["times", "[1, 2**53]"]),
    ("bad_neighboring.json", '{"neighboring": "swap", "mechanisms": [{"type": "gaussian", "sigma": 1}]}',
     ["neighboring", "'swap'"]),
    ("top_key.json", '{"mechanism": [{"type": "gaussian", "sigma": 1}]}', ["'mechanism'"]),
    ("empty.toml", "", ["mechanisms"]),
    ("list.json", "[1, 2]", ["top level"]),
    ("mixture.json", '{"mechanisms": [{"type": "mixture_of_gaussians", "sigma": 1, "sensitivities": [1, 2], '
                     '"probabilities": [1]}]}', ["mixture_of_gaussians", "same length"]),
    ("spec.yaml", "mechanisms: []\n", ["extension"]),
]


@pytest.mark.parametrize("name, content, needles", SPEC_ERRORS, ids=[row[0] for row in SPEC_ERRORS])
def test_spec_errors(capsys, tmp_path, name, content, needles):
    path = tmp_path / name
    path.write_text(content)
    assert_usage_error(capsys, ["delta", "--epsilon", 1.0, "--spec", path], name, *needles)


def test_spec_missing_file(capsys, tmp_path):
    assert_usage_error(capsys, ["delta", "--epsilon", 1.0, "--spec", tmp_path / "nope.toml"], "nope.toml", "cannot read")


# ---------------------------------------------------------------------------
# Command-line errors
# ---------------------------------------------------------------------------

GAUSS = ["--mechanism", "gaussian"]
CLI_ERRORS = [
    ("sigma negative", ["epsilon", "--delta", 1e-5, *GAUSS, "--sigma", -1], ["--sigma must be > 0", "-1"]),
    ("sigma nan", ["epsilon", "--delta", 1e-5, *GAUSS, "--sigma", "nan"], ["--sigma", "nan"]),
    ("sigma text", ["epsilon", "--delta", 1e-5, *GAUSS, "--sigma", "abc"], ["--sigma", "'abc'"]),
    ("sigma missing", ["epsilon", "--delta", 1e-5, *GAUSS], ["--sigma"]),
    ("delta zero", ["epsilon", "--delta", 0, *GAUSS, "--sigma", 1], ["--delta", "(0, 1)"]),
    ("delta too big", ["epsilon", "--delta", 1.5, *GAUSS, "--sigma", 1], ["--delta", "1.5"]),
    ("delta missing", ["epsilon", *GAUSS, "--sigma", 1], ["--delta"]),
    ("epsilon nan", ["delta", "--epsilon", "nan", *GAUSS, "--sigma", 1], ["--epsilon"]),
    ("foreign flag", ["epsilon", "--delta", 1e-5, *GAUSS, "--sigma", 1, "--p", 0.6], ["--p", "gaussian"]),
    ("compositions zero", ["epsilon", "--delta", 1e-5, *GAUSS, "--sigma", 1, "--compositions", 0], ["--compositions"]),
    ("compositions fractional", ["epsilon", "--delta", 1e-5, *GAUSS, "--sigma", 1, "--compositions", 2.5],
     ["--compositions"]),
    ("dp-delta", ["delta", "--epsilon", 1, "--mechanism", "approx-dp", "--dp-epsilon", 1, "--dp-delta", 2],
     ["--dp-delta"]),
    ("dp-epsilon", ["delta", "--epsilon", 1, "--mechanism", "approx-dp", "--dp-epsilon", -1, "--dp-delta", 0.1],
     ["--dp-epsilon"]),
    ("dp missing", ["delta", "--epsilon", 1, "--mechanism", "approx-dp", "--dp-epsilon", 1], ["--dp-delta"]),
    ("ptr-delta", ["delta", "--epsilon", 1, "--mechanism", "propose-test-release", "--ptr-epsilon", 1,
                   "--ptr-delta", 1], ["--ptr-delta"]),
    ("sampling rate", ["epsilon", "--delta", 1e-5, *GAUSS, "--sigma", 1, "--sampling-rate", 2], ["--sampling-rate"]),
    ("sampling alone", ["epsilon", "--delta", 1e-5, *GAUSS, "--sigma", 1, "--sampling", "subset"],
     ["--sampling-rate"]),
    ("sigma2 missing", ["delta", "--epsilon", 1, "--mechanism", "data-dependent-gaussian", "--sigma1", 1],
     ["--sigma2"]),
    ("k too small", ["delta", "--epsilon", 1, "--mechanism", "kary-randomized-response", "--k", 1, "--p", 0.9],
     ["--k"]),
    ("p out of range", ["delta", "--epsilon", 1, "--mechanism", "randomized-response", "--p", 0.3], ["--p"]),
    ("integer sensitivity", ["delta", "--epsilon", 1, "--mechanism", "discrete-laplace", "--a", 1,
                             "--sensitivity", 1.5], ["--sensitivity"]),
    ("exact unavailable", ["delta", "--epsilon", 1, *GAUSS, "--sigma", 1, "--sampling-rate", 0.01,
                           "--compositions", 2000, "--method", "exact"],
     ["--method"]),
    ("unknown mechanism", ["delta", "--epsilon", 1, "--mechanism", "gauss"], ["--mechanism"]),
    ("no composition", ["delta", "--epsilon", 1], ["--mechanism", "--spec"]),
    ("both sources", ["delta", "--epsilon", 1, *GAUSS, "--sigma", 1, "--spec", "x.toml"], ["--spec"]),
    ("spec with flag", ["delta", "--epsilon", 1, "--spec", "x.toml", "--sigma", 1], ["--sigma", "--spec"]),
    ("spec with count", ["delta", "--epsilon", 1, "--spec", "x.toml", "--compositions", 2], ["--compositions"]),
    ("no command", [], ["epsilon"]),
]


@pytest.mark.parametrize("argv, needles", [row[1:] for row in CLI_ERRORS], ids=[row[0] for row in CLI_ERRORS])
def test_cli_errors(capsys, argv, needles):
    assert_usage_error(capsys, argv, *needles)


def test_help_documents_spec_format(capsys):
    status, out, _ = run(capsys, "epsilon", "--help")
    assert status == 0
    assert "[[mechanisms]]" in out and "--spec" in out and "--dp-epsilon" in out
    status, out, _ = run(capsys, "--version")
    assert status == 0 and afa.__version__ in out


def test_accuracy_error_is_a_usage_error(capsys, tmp_path):
    path = tmp_path / "laplace_gauss.toml"
    path.write_text('[[mechanisms]]\ntype = "laplace"\nscale = 1.0\n[[mechanisms]]\ntype = "gaussian"\nsigma = 2.0\n'
                    "times = 3\n")
    assert_usage_error(capsys, ["epsilon", "--delta", 1e-300, "--spec", path, "--method", "quadrature"],
                       "--delta", "--method")
    # The default method answers it with the contour inversion (relative accuracy at any delta).
    status, out, _ = run(capsys, "epsilon", "--delta", 1e-300, "--spec", path)
    assert status == 0 and parse_line(out)["method"] == "contour"


# ---------------------------------------------------------------------------
# --compare and calibrate
# ---------------------------------------------------------------------------

def test_compare_on_gaussians_clt_and_gdp_are_exact_and_rdp_is_above(capsys):
    """For composed Gaussians the CLT and the GDP estimate are exact (Sommer, Meiser & Mohammadi 2019, Thm 5), and the
    RDP
    conversions are upper bounds: checked against the closed form written out here."""
    data = json.loads(run_ok(capsys, *GAUSS_1000[:4], "10", *GAUSS_1000[5:], "--compare", "--json"))
    mu = math.sqrt(1000) / 10.0
    truth = brentq_epsilon(1e-5, mu)
    assert data["value"] == pytest.approx(truth, rel=1e-9)
    assert data["compare"]["clt"] == pytest.approx(truth, rel=1e-9)
    assert data["compare"]["gdp"] == pytest.approx(truth, rel=1e-9)
    assert truth < data["compare"]["rdp_improved"] < data["compare"]["rdp_standard"]
    text = run_ok(capsys, *GAUSS_1000[:4], "10", *GAUSS_1000[5:], "--compare")
    assert len(text.splitlines()) == 5 and "upper bound" in text and "estimate" in text


def test_compare_delta_is_above_for_rdp(capsys):
    argv = ["delta", "--mechanism", "laplace", "--scale", "10", "--compositions", "20", "--epsilon", "1"]
    data = json.loads(run_ok(capsys, *argv, "--compare", "--json"))
    assert data["value"] < data["compare"]["rdp_improved"] < data["compare"]["rdp_standard"]


def brentq_epsilon(delta: float, mu: float) -> float:
    return brentq(lambda e: gaussian_delta(e, mu) - delta, 0.0, 100.0, xtol=1e-14)


def test_calibrate_gaussian(capsys):
    out = run_ok(capsys, "calibrate", "--epsilon", "1", "--delta", "1e-5", "--steps", "100", "--json")
    data = json.loads(out)
    assert data["method"] == "exact" and data["certified"]
    assert brentq_epsilon(1e-5, 10 / data["sigma"]) <= 1.0 < brentq_epsilon(1e-5, 10 / data["rejected"])
    line = run_ok(capsys, "calibrate", "--epsilon", "1", "--delta", "1e-5", "--steps", "100")
    assert line.startswith(f"sigma = {data['sigma']:.10g} ")


@pytest.mark.parametrize("argv, flag", [
    (["calibrate", "--epsilon", "1", "--delta", "1e-5", "--steps", "0"], "--steps"),
    (["calibrate", "--epsilon", "1", "--delta", "2", "--steps", "10"], "--delta"),
    (["calibrate", "--epsilon", "1", "--delta", "1e-5", "--steps", "10", "--sampling-rate", "1.5"], "--sampling-rate"),
])
def test_calibrate_errors(capsys, argv, flag):
    assert_usage_error(capsys, argv, flag)
