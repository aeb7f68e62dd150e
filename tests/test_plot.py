"""afa.views.plot and ``afa plot``: the figures are written, and what they draw matches independent numbers.

The references are closed forms computed here: a composition of k Gaussian mechanisms with noise sigma is
mu-GDP with mu = sqrt(k)/sigma, so delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu) (Balle & Wang
2018, Thm 8; evaluated with mpmath at 40 digits) and the trade-off function is
f(alpha) = Phi(Phi^-1(1 - alpha) - mu) (Dong, Roth & Su 2022, Gaussian DP).
"""

from __future__ import annotations

import io
import math

import mpmath
import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import afa  # noqa: E402
import afa.views.plot  # noqa: E402
from afa.cli import main  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SIGMA, STEPS = 10.0, 100
MU = math.sqrt(STEPS) / SIGMA


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def gaussian_delta(eps: float, mu: float, log: bool = False) -> float:
    """delta(eps) of mu-GDP (or its log), to 40 digits before rounding to a float."""
    with mpmath.workdps(40):
        eps, mu = mpmath.mpf(eps), mpmath.mpf(mu)
        value = mpmath.ncdf(mu / 2 - eps / mu) - mpmath.exp(eps) * mpmath.ncdf(-mu / 2 - eps / mu)
        return float(mpmath.log(value) if log else value)


def gaussian_epsilon(delta: float, mu: float) -> float:
    """The eps with delta(eps) = delta, by root-finding on the closed form (in log space)."""
    return brentq(lambda eps: gaussian_delta(eps, mu, log=True) - math.log(delta), 0.0, 50.0, xtol=1e-14, rtol=1e-14)


def composed_gaussian(steps: int = STEPS, sigma: float = SIGMA) -> afa.Accountant:
    return afa.Accountant().compose(afa.Gaussian(sigma), steps)


def assert_png(path) -> None:
    data = path.read_bytes()
    assert len(data) > 1000 and data[:8] == PNG_MAGIC


def save(ax, path) -> None:
    ax.get_figure().savefig(path)
    assert_png(path)


# ---------------------------------------------------------------------------
# The drawn numbers
# ---------------------------------------------------------------------------

def test_profile_line_is_the_gaussian_closed_form(tmp_path):
    ax = afa.views.plot.privacy_profile(composed_gaussian())
    epsilons, deltas = ax.get_lines()[0].get_xydata().T
    assert len(epsilons) == afa.views.plot.PROFILE_POINTS and epsilons[0] == 0.0
    # the default grid ends at eps(1e-10)
    assert epsilons[-1] == pytest.approx(gaussian_epsilon(1e-10, MU), rel=1e-9)
    reference = np.array([gaussian_delta(eps, MU) for eps in epsilons])
    np.testing.assert_allclose(deltas, reference, rtol=1e-9)
    assert ax.get_yscale() == "log" and ax.get_xlabel() == "ε" and ax.get_ylabel() == "δ(ε)"
    assert ax.get_legend() is not None
    save(ax, tmp_path / "profile.png")


def test_profile_band_holds_the_bounds_and_the_line_is_the_upper_one():
    accountant = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(sampling_rate=0.01), 1000)
    epsilons = [0.5, 1.0, 2.0]
    ax = afa.views.plot.privacy_profile(accountant, epsilons, method="pld")
    result = accountant.delta_result(epsilons, method="pld")
    np.testing.assert_array_equal(ax.get_lines()[0].get_ydata(), result.upper)
    assert np.all(result.lower < result.upper)  # the PLD's bracket has a width: a band is drawn
    band = ax.collections[0].get_paths()[0].vertices
    assert band[:, 1].min() == pytest.approx(result.lower.min()) and band[:, 1].max() == pytest.approx(result.upper.max())


def test_epsilon_curve_is_the_gaussian_inverse(tmp_path):
    accountant = composed_gaussian()
    ax = afa.views.plot.epsilon_curve(accountant, [1e-8, 1e-5, 1e-2])
    deltas, epsilons = ax.get_lines()[0].get_xydata().T
    np.testing.assert_array_equal(epsilons, accountant.epsilon(deltas))
    np.testing.assert_allclose(epsilons, [gaussian_epsilon(delta, MU) for delta in deltas], rtol=1e-8)
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "δ"
    default = afa.views.plot.epsilon_curve(accountant)
    assert len(default.get_lines()[0].get_xdata()) == len(afa.views.plot.EPSILON_CURVE_DELTAS)
    save(default, tmp_path / "epsilon.png")


def test_tradeoff_curve_within_its_error_of_gaussian_dp(tmp_path):
    mu = 2.0
    accountant = afa.Accountant().compose(afa.Gaussian(1.0), 4)  # sqrt(4) / 1 = 2
    ax = afa.views.plot.tradeoff(accountant)
    alphas, betas = ax.get_lines()[0].get_xydata().T
    truth = norm.cdf(norm.ppf(1 - alphas) - mu)
    _, error = afa.views.tradeoff.tradeoff_curve(accountant, alphas, with_error=True)
    assert np.all(betas <= truth + 1e-12) and np.all(truth <= betas + error + 1e-12)
    assert error.max() < 1e-5
    identity = ax.get_lines()[1]
    np.testing.assert_array_equal(identity.get_xydata(), [[0, 1], [1, 0]])
    assert identity.get_linestyle() == "--" and ax.get_aspect() == 1.0
    assert ax.get_xlabel().startswith("α") and ax.get_ylabel().startswith("β")
    save(ax, tmp_path / "tradeoff.png")


def test_epsilon_vs_steps_values(tmp_path):
    steps = [10, 100, 1000]
    delta = 1e-5
    make = {"σ = 10": lambda k: composed_gaussian(k, 10.0), "σ = 20": lambda k: composed_gaussian(k, 20.0)}
    ax = afa.views.plot.epsilon_vs_steps(list(make.items()), steps, delta)
    assert [line.get_label() for line in ax.get_lines()] == list(make)
    for line, (sigma, function) in zip(ax.get_lines(), ((10.0, make["σ = 10"]), (20.0, make["σ = 20"]))):
        counts, epsilons = line.get_xydata().T
        assert counts.tolist() == steps
        assert epsilons.tolist() == [function(k).epsilon(delta) for k in steps]
        np.testing.assert_allclose(epsilons, [gaussian_epsilon(delta, math.sqrt(k) / sigma) for k in steps], rtol=1e-8)
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "steps"
    save(ax, tmp_path / "steps.png")


def test_epsilon_vs_steps_one_function_several_methods_and_labels():
    ax = afa.views.plot.epsilon_vs_steps(composed_gaussian, [10, 20], 1e-5, methods=("exact", "contour"))
    assert [line.get_label() for line in ax.get_lines()] == ["ε(δ) (exact)", "ε(δ) (contour)"]
    exact, contour = (line.get_ydata() for line in ax.get_lines())
    np.testing.assert_allclose(contour, exact, rtol=1e-6)
    ax = afa.views.plot.epsilon_vs_steps(composed_gaussian, [10, 20], 1e-5, labels=["mine"], color="C3")
    assert ax.get_lines()[0].get_label() == "mine" and ax.get_xscale() == "linear"
    assert matplotlib.colors.same_color(ax.get_lines()[0].get_color(), "C3")


def test_draws_on_a_given_axes_with_styles():
    figure, axes = plt.subplots(1, 2)
    returned = afa.views.plot.privacy_profile(composed_gaussian(), [0.5, 1.0], ax=axes[1], color="red", linewidth=3)
    assert returned is axes[1] and not axes[0].get_lines()
    line = returned.get_lines()[0]
    assert matplotlib.colors.same_color(line.get_color(), "red") and line.get_linewidth() == 3


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

def test_bad_input_names_the_parameter():
    accountant = composed_gaussian()
    with pytest.raises(TypeError, match="accountant"):
        afa.views.plot.privacy_profile("gaussian")
    with pytest.raises(ValueError, match="epsilons"):
        afa.views.plot.privacy_profile(accountant, [])
    with pytest.raises(ValueError, match="epsilons"):
        afa.views.plot.privacy_profile(accountant, [0.0, math.nan])
    with pytest.raises(ValueError, match="method"):
        afa.views.plot.privacy_profile(accountant, method="fast")
    with pytest.raises(TypeError, match="ax"):
        afa.views.plot.privacy_profile(accountant, [1.0], ax="left")
    with pytest.raises(TypeError, match="band"):
        afa.views.plot.privacy_profile(accountant, [1.0], band="yes")
    with pytest.raises(ValueError, match="deltas"):
        afa.views.plot.epsilon_curve(accountant, [0.0, 1e-5])
    with pytest.raises(ValueError, match="alphas"):
        afa.views.plot.tradeoff(accountant, [0.5, 1.5])
    with pytest.raises(ValueError, match="steps"):
        afa.views.plot.epsilon_vs_steps(composed_gaussian, [0, 10], 1e-5)
    with pytest.raises(TypeError, match="steps"):
        afa.views.plot.epsilon_vs_steps(composed_gaussian, [1.5], 1e-5)
    with pytest.raises(ValueError, match="delta"):
        afa.views.plot.epsilon_vs_steps(composed_gaussian, [10], 2.0)
    with pytest.raises(ValueError, match="labels"):
        afa.views.plot.epsilon_vs_steps(composed_gaussian, [10], 1e-5, labels=["a", "b"])
    with pytest.raises(TypeError, match="make_accountant"):
        afa.views.plot.epsilon_vs_steps([("a", "not callable")], [10], 1e-5)
    with pytest.raises(TypeError, match=r"make_accountant\(10\)"):
        afa.views.plot.epsilon_vs_steps(lambda k: None, [10], 1e-5)


# ---------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["profile", "epsilon", "tradeoff"])
def test_cli_writes_a_png(kind, tmp_path, capsys):
    out = tmp_path / f"{kind}.png"
    assert main(["plot", kind, "--mechanism", "gaussian", "--sigma", "10", "--compositions", "100", "-o", str(out),
                 "--quiet"]) == 0
    assert_png(out)
    captured = capsys.readouterr()
    assert str(out) in captured.out and captured.err == ""


def test_cli_plot_reads_a_spec_file(tmp_path):
    spec = tmp_path / "composition.json"
    spec.write_text('{"mechanisms": [{"type": "gaussian", "sigma": 10.0, "times": 100}]}')
    out = tmp_path / "figure.svg"
    assert main(["plot", "profile", "--spec", str(spec), "-o", str(out)]) == 0
    assert out.read_text().lstrip().startswith("<?xml")


@pytest.mark.parametrize("args,message", [
    (["plot", "surface", "--mechanism", "gaussian", "--sigma", "1", "-o", "x.png"], "invalid choice: 'surface'"),
    (["plot", "profile", "--mechanism", "gaussian", "--sigma", "1"], "required: -o/--output"),
    (["plot", "profile", "--mechanism", "gaussian", "-o", "x.png"], "requires --sigma"),
    (["plot", "profile", "--mechanism", "gaussian", "--sigma", "1", "-o", "x.unknown"], "-o x.unknown: Format"),
])
def test_cli_plot_bad_input_exits_2(args, message, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("afa: error: ") and message in err and err.count("\n") == 1
    assert not list(tmp_path.iterdir())


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("quiet", [False, True])
def test_quiet_silences_progress_during_the_command(quiet, monkeypatch, capsys):
    """--quiet runs the command inside afa.progress.silenced(): a bar on a terminal is not wanted there."""
    seen = []

    def delta_result(self, epsilon, method="auto", direction=None):
        seen.append(afa.progress.wanted(None, Terminal()))
        return original(self, epsilon, method, direction)

    original = afa.Accountant.delta_result
    monkeypatch.setattr(afa.Accountant, "delta_result", delta_result)
    args = ["delta", "--epsilon", "1", "--mechanism", "gaussian", "--sigma", "10"] + (["--quiet"] if quiet else [])
    assert main(args) == 0
    assert seen == [not quiet]
    assert afa.progress.wanted(None, Terminal()) is True  # only inside the command


def test_quiet_is_accepted_by_every_command_that_computes():
    parser = afa.cli.build_parser()
    for args in (["epsilon", "--delta", "1e-5", "--mechanism", "gaussian", "--sigma", "1"],
                 ["delta", "--epsilon", "1", "--mechanism", "gaussian", "--sigma", "1"],
                 ["calibrate", "--epsilon", "1", "--delta", "1e-5", "--steps", "10"],
                 ["sweep", "grid.toml"],
                 ["plot", "profile", "--mechanism", "gaussian", "--sigma", "1", "-o", "x.png"]):
        assert parser.parse_args(args + ["--quiet"]).quiet is True
        assert parser.parse_args(args).quiet is False


def test_plot_is_a_lazy_submodule_and_import_afa_needs_no_matplotlib():
    import subprocess
    import sys

    probe = ("import sys, afa; print('matplotlib' in sys.modules, 'plot' in dir(afa)); afa.views.plot.tradeoff; "
             "print('afa.views.plot' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True", "True"]
