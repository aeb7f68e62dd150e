"""The package's surface: public names and submodules reachable as attributes, imported on first use."""

import importlib
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sympy

import afa

ROOT = Path(afa.__file__).resolve().parent.parent
#: What ``import afa`` and the ``afa`` command's parser leave unloaded: the heavy third-party modules (afa._lazy)
#: and the engines (loaded with afa.accountant).
DEFERRED = ("sympy", "mpmath", "scipy.special", "scipy.signal", "scipy.stats", "scipy.optimize", "scipy.fft",
            "afa.accountant", "afa.engines.planner", "afa.engines.base", "afa.engines.contour", "afa.engines.pld", "afa.calibration", "afa.views.rdp",
            "afa.views.clt")


def _loaded_after(code: str) -> list[str]:
    """The modules of DEFERRED in sys.modules after running ``code`` in a fresh interpreter (stdout discarded)."""
    probe = (f"import contextlib, io, sys\nwith contextlib.redirect_stdout(io.StringIO()):\n    {code}\n"
             f"print(' '.join(name for name in {DEFERRED!r} if name in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


@pytest.mark.parametrize("code", [
    "import afa",
    "import afa; afa.__version__; dir(afa)",
    "import afa.cli; afa.cli.build_parser().format_help()",
    "import afa.cli; afa.cli.main(['--help'])",
    "import afa.cli; afa.cli.main(['epsilon', '--help'])",
    "import afa.cli; afa.cli.main(['--version'])",
])
def test_import_and_the_command_line_parser_leave_the_heavy_modules_unloaded(code):
    """Importing afa, and building the afa command's parser (its --help), load neither SymPy, mpmath, the scipy
    modules nor the engines: they are imported when a mechanism's loss or a query first needs them."""
    assert _loaded_after(code) == []


def test_a_query_loads_what_it_needs():
    """The probe sees the modules a query imports (so that the empty lists above are not vacuous)."""
    loaded = _loaded_after("import afa; afa.Accountant().compose(afa.Laplace(1.0), 3).delta(1.0)")
    assert {"sympy", "scipy.special", "afa.accountant", "afa.engines.base"} <= set(loaded)


def test_composed_gaussians_answer_without_sympy_or_scipy_optimize():
    """The closed form of composed Gaussians (an epsilon and a delta query) needs neither SymPy (the Gaussian
    family's template is built only when its expression is read) nor scipy.optimize (root finders some other
    searches use)."""
    loaded = _loaded_after("import afa; a = afa.Accountant().compose(afa.Gaussian(1.0), 100); "
                           "a.epsilon(1e-5); a.delta(1.0)")
    assert "afa.accountant" in loaded and not {"sympy", "scipy.optimize"} & set(loaded)


def test_a_deferred_template_builds_once_and_pickles():
    from afa.mechanisms.privacy_loss import Template, variable
    calls = []

    def build():
        calls.append(1)
        h = sympy.Symbol("h", positive=True)
        return -h * variable() ** 2, (h,)

    template = Template(builder=build)
    assert calls == []
    assert template.parameters == (sympy.Symbol("h", positive=True),) and calls == [1]
    assert template.expression == -sympy.Symbol("h", positive=True) * variable() ** 2 and calls == [1]
    copy = pickle.loads(pickle.dumps(template))
    assert copy.expression == template.expression and copy.parameters == template.parameters
    with pytest.raises(TypeError, match="builder"):
        Template()
    with pytest.raises(TypeError, match="builder"):
        Template(template.expression, template.parameters, builder=build)


def test_public_names_resolve_on_first_access_to_their_home_modules():
    """Every name of afa.__all__ (and the dp_accounting bridge) is its home module's object, in dir(afa)."""
    for name, home in afa._HOMES.items():
        if home == "interop":
            continue  # needs dp_accounting at call time only; resolved below
        assert getattr(afa, name) is getattr(importlib.import_module(f"afa.{home}"), name), name
        assert name in dir(afa)
    assert set(afa.__all__) <= set(afa._HOMES)
    assert callable(afa.from_dp_event) and callable(afa.to_dp_event)


def test_t_clt_tradeoff_and_rdp_still_resolve_in_a_fresh_interpreter():
    """afa.t (the real SymPy symbol t), the short names afa.clt, afa.tradeoff, afa.rdp for the views' modules,
    and afa.accountant."""
    probe = ("import afa; from afa import t; "
             "print(afa.t is t, afa.t.name, afa.t.is_real, afa.clt.__name__, afa.tradeoff.__name__, afa.rdp.__name__, "
             "afa.accountant.__name__, afa.mechanisms.privacy_loss.t is t)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.split() == ["True", "t", "True", "afa.views.clt", "afa.views.tradeoff", "afa.views.rdp",
                           "afa.accountant", "True"]
    assert afa.t == sympy.Symbol("t", real=True)


def test_submodules_are_attributes_imported_on_first_use():
    """A subpackage's modules are its attributes, imported on first read, like afa's short names."""
    probe = ("import sys, afa; before = 'afa.views.clt' in sys.modules; afa.views.clt.clt_delta; "
             "afa.engines.contour.ContourInversion; print(before, 'afa.views.clt' in sys.modules, afa.clt is afa.views.clt)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout.split()
    assert out == ["False", "True", "True"]
    assert "tradeoff" in dir(afa) and "clt" in dir(afa.views) and "contour" in dir(afa.engines)
    assert callable(afa.views.clt.privacy_loss_class)


def test_every_public_module_is_an_attribute():
    """Each module of the package whose name has no leading underscore resolves as an attribute of its package
    (afa.<name>, afa.engines.<name>, ...), and each subpackage as afa.<subpackage>."""
    root = ROOT / "afa"
    for path in sorted(root.rglob("*.py")):
        if path.stem.startswith("_") or "__pycache__" in path.parts:
            continue
        parts = path.relative_to(root).with_suffix("").parts
        value = afa
        for part in parts:
            value = getattr(value, part)
        assert value.__name__ == "afa." + ".".join(parts)
    for package in ("engines", "interop", "mechanisms", "numerics", "views"):
        assert getattr(afa, package).__name__ == f"afa.{package}"


def test_the_layers_import_only_the_layers_below():
    """numerics imports no mechanism, engine or front-end module; mechanisms no engine or front end; engines
    no front end (afa/engines, afa/mechanisms, afa/numerics: relative imports only, checked in the source)."""
    above = {"numerics": ("mechanisms", "engines", "views", "accountant", "calibration", "sweep", "cli", "interop"),
             "mechanisms": ("engines", "views", "accountant", "calibration", "sweep", "cli", "interop"),
             "engines": ("views", "accountant", "calibration", "sweep", "cli", "interop")}
    for layer, forbidden in above.items():
        for path in (ROOT / "afa" / layer).glob("*.py"):
            for line in path.read_text().splitlines():
                match = re.match(r"\s*from \.\.(\w+)", line) or re.match(r"\s*import afa\.(\w+)", line)
                assert not (match and match.group(1) in forbidden), f"{path.name}: {line.strip()}"
                names = re.match(r"\s*from \.\. import ([\w ,]+)", line)  # from .. import budget, options
                imported = {name.split(" as ")[0].strip() for name in names.group(1).split(",")} if names else set()
                assert not imported & set(forbidden), f"{path.name}: {line.strip()}"


def test_an_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        afa.nothing  # noqa: B018


def test_one_name_for_the_sampling_rate_old_names_warn():
    """sampling_rate in Python, on the command line (--sampling-rate) and in spec files; q and
    sampling_probability still work for one version, with a DeprecationWarning."""
    mechanism = afa.Gaussian(1.0).poisson_subsampled(sampling_rate=0.01)
    assert mechanism.sampling_rate == 0.01 and mechanism.to_dict()["sampling_rate"] == 0.01
    with pytest.warns(DeprecationWarning, match="sampling_rate"):
        assert afa.Gaussian(1.0).poisson_subsampled(q=0.01) == mechanism
    with pytest.warns(DeprecationWarning, match="sampling_rate"):
        assert mechanism.q == 0.01
    with pytest.raises(TypeError, match="once"), pytest.warns(DeprecationWarning):
        afa.Gaussian(1.0).subset_subsampled(0.1, q=0.1)
    with pytest.raises(TypeError, match="sampling_rate"):
        afa.Gaussian(1.0).poisson_subsampled()
    with pytest.warns(DeprecationWarning, match="sampling_probability"):
        old = afa.calibrate_steps(1.0, 1e-5, 3.8, sampling_probability=0.01, method="pld", rtol=0.05)
    new = afa.calibrate_steps(1.0, 1e-5, 3.8, sampling_rate=0.01, method="pld", rtol=0.05)
    assert old.value == new.value
