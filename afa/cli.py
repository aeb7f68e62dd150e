"""The ``afa`` command: epsilon(delta) or delta(epsilon) of a composition, from the shell.

Usage
-----
One mechanism, repeated ``--compositions`` times (default 1)::

    afa epsilon --delta 1e-5 --mechanism gaussian --sigma 1.0 --compositions 1000
    afa delta --epsilon 1.0 --mechanism randomized-response --p 0.6 --compositions 20
    afa epsilon --delta 1e-6 --mechanism approx-dp --dp-epsilon 0.1 --dp-delta 1e-8 --compositions 50
    afa epsilon --delta 1e-5 --mechanism gaussian --sigma 1 --sampling-rate 0.01 --compositions 10000

``--sampling-rate Q`` runs the mechanism on a Poisson subsample (``--sampling subset``: a
fixed-size subset) -- DP-SGD is the Gaussian with Q = batch size / data size.

Mechanisms and their flags (named after the constructor parameters; a flag
without a default is required):

    gaussian                  --sigma [--sensitivity]
    laplace                   --scale [--sensitivity]
    randomized-response       --p
    kary-randomized-response  --k --p
    discrete-laplace          --a [--sensitivity]
    discrete-gaussian         --sigma [--sensitivity]
    approx-dp                 --dp-epsilon --dp-delta   (ApproxDP(epsilon, delta))
    propose-test-release      --ptr-epsilon --ptr-delta (ProposeTestRelease(epsilon, delta))
    data-dependent-gaussian   --sigma1 --sigma2 [--sensitivity]

A heterogeneous composition comes from a spec file instead::

    afa delta --epsilon 1.0 --spec composition.toml

Common options: ``--neighboring {add_remove,substitution}`` (default
add_remove; a spec file's own value is used unless the flag is given),
``--method {auto,exact,quadrature,contour,certified,pld}`` (default auto) and ``--json``.

Output is one line, e.g.
``epsilon = 0.84738 for delta = 1e-05 (method: exact, estimate 0.84738, bounds [0.84738, 0.84738])``:
the headline number is the upper end of the bounds (never below what they allow
for the truth), followed by the method, its best estimate and the bounds.  With
``--json`` it is an object with the keys query ("epsilon" or "delta"), reported
(the headline: the upper bound), value (the estimate), lower, upper, error,
method, certified, the input ("delta" or "epsilon") and neighboring.
Non-finite numbers (an infinite epsilon when
delta is below the mass at infinity) appear as the strings "Infinity",
"-Infinity" and "NaN", so that the output stays strict JSON.

``--compare`` adds what an RDP accountant (improved and standard conversions, upper bounds),
the CLT of the privacy-loss class and a Gaussian-DP estimate say about the same query
(JSON: a "compare" object).

Noise calibration (the smallest sigma whose certified upper epsilon meets the target)::

    afa calibrate --epsilon 1.0 --delta 1e-5 --steps 10000 --sampling-rate 0.01

One query per configuration of a grid or table (docs/sweeps.md), written to CSV or Parquet::

    afa sweep grid.toml -o results.csv [--workers N] [--scheduler tcp://host:8786] [--quiet]

A figure of a composition (afa.views.plot; needs matplotlib, ``pip install 'afa[plot]'``), with the composition
options of ``epsilon`` and ``delta``; the format follows the extension::

    afa plot profile --mechanism gaussian --sigma 10 --compositions 100 -o profile.png   # delta(epsilon)
    afa plot epsilon --spec composition.toml -o epsilon.pdf                             # epsilon(delta)
    afa plot tradeoff --mechanism gaussian --sigma 1 --compositions 4 -o tradeoff.svg    # f-DP curve

``--quiet`` (epsilon, delta, calibrate, sweep, plot): no progress bar on stderr (afa.progress.silenced);
for sweep also no summary.

Bad input exits with status 2 and one line ``afa: error: ...`` on stderr.

Spec file format
----------------
TOML (``.toml``) or JSON (``.json``), chosen by the file extension:

    neighboring = "add_remove"      # optional: add_remove or substitution
    [[mechanisms]]
    type = "gaussian"
    sigma = 5.0
    times = 500                     # optional, default 1
    [[mechanisms]]
    type = "randomized_response"
    p = 0.52
    times = 500

    {"neighboring": "add_remove",
     "mechanisms": [{"type": "gaussian", "sigma": 5.0, "times": 500},
                    {"type": "randomized_response", "p": 0.52, "times": 500}]}

Optional top-level keys: value_discretization_interval (the PLD's grid step),
a budget table (seconds, memory_bytes) and an options table (the engines'
settings, afa.Options).  Accountant.to_dict() writes this format and
Accountant.from_dict() reads it.

Each mechanism's ``type`` is one of gaussian, laplace, randomized_response,
kary_randomized_response, discrete_laplace, discrete_gaussian, approx_dp,
propose_test_release, data_dependent_gaussian, mixture_of_gaussians,
discrete_mechanism (hyphens or underscores).  Its other
keys, besides ``times`` and the optional ``sampling_rate`` and ``sampling``
(poisson or subset), are the keyword arguments of the class:

    gaussian                  sigma, sensitivity
    laplace                   scale, sensitivity
    randomized_response       p
    kary_randomized_response  k, p
    discrete_laplace          a, sensitivity
    discrete_gaussian         sigma, sensitivity
    approx_dp                 epsilon, delta
    propose_test_release      epsilon, delta
    data_dependent_gaussian   sigma1, sigma2, sensitivity
    mixture_of_gaussians      sensitivities, probabilities, sigma  (lists, lists, number)
    discrete_mechanism        p_pmf, q_pmf                         (two lists)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .mechanisms.catalog import (
    NEIGHBORING_RELATIONS,
    ApproxDP,
    Mechanism,
    ProposeTestRelease,
)
from .mechanisms.subsampling import SCHEMES, Subsampled
from .options import METHODS
from .progress import silenced
from .results import AccuracyError, Result

if TYPE_CHECKING:
    from .accountant import Accountant

__all__ = ["MECHANISM_TYPES", "SpecError", "accountant_from_spec", "build_parser", "load_spec", "main"]

#: Spec-file type names (underscore form) and their classes.
MECHANISM_TYPES: dict[str, type[Mechanism]] = Mechanism.types()
#: The --compare lines: RDP accountant (upper bounds, Zhu, Dong & Wang 2022, App. F), CLT and GDP (estimates, Sommer,
#: Meiser & Mohammadi 2019).
COMPARISONS = {"rdp_improved": "RDP accountant, improved conversion (upper bound)",
               "rdp_standard": "RDP accountant, standard conversion (upper bound)",
               "clt": "CLT of the privacy-loss class (estimate)",
               "gdp": "Gaussian DP with the loss variance (estimate)"}
#: Types available through ``--mechanism`` (the others take lists: use ``--spec``).
FLAG_MECHANISMS = ("gaussian", "laplace", "randomized_response", "kary_randomized_response",
                   "discrete_laplace", "discrete_gaussian", "approx_dp", "propose_test_release",
                   "data_dependent_gaussian")
#: Command-line flags whose name differs from the constructor parameter.
_RENAMED_FLAGS: dict[type[Mechanism], dict[str, str]] = {
    ApproxDP: {"epsilon": "--dp-epsilon", "delta": "--dp-delta"},
    ProposeTestRelease: {"epsilon": "--ptr-epsilon", "delta": "--ptr-delta"},
}
#: What --quiet does, on every subcommand that can show progress (afa.progress.silenced around the work).
QUIET_HELP = "no progress bar on stderr"
#: The figures of ``afa plot``: kind -> (afa.views.plot function, what it shows).
PLOT_KINDS = {"profile": ("privacy_profile", "delta(epsilon), log delta axis"),
              "epsilon": ("epsilon_curve", "epsilon(delta), log delta axis"),
              "tradeoff": ("tradeoff", "the f-DP trade-off curve beta(alpha)")}
_EPILOG = __doc__[__doc__.index("Spec file format"):] if __doc__ else None  # None under python -OO


class SpecError(ValueError):
    """A spec file that cannot be read or does not describe a composition; the message names the file.

    A ValueError, raised by :func:`load_spec` and :func:`accountant_from_spec`.

    Examples
    --------
    >>> from afa import cli
    >>> issubclass(cli.SpecError, ValueError)
    True
    """


class _UsageError(Exception):
    """Bad command-line input: reported as one line on stderr with exit status 2."""


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def _type_key(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def _cli_name(type_key: str) -> str:
    return type_key.replace("_", "-")


def _parameters(cls: type[Mechanism]) -> list[tuple[str, bool]]:
    """(name, required) of each constructor parameter, from the dataclass fields."""
    return [(field.name, field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING)
            for field in _fields(cls) if field.init]


def _fields(cls: type[Mechanism]) -> tuple[dataclasses.Field, ...]:
    """The dataclass fields of a mechanism class (every mechanism is a dataclass)."""
    return dataclasses.fields(cls)  # type: ignore[arg-type]


def _toml_loads(text: str) -> dict:
    """Parse TOML with the standard library (Python >= 3.11) or tomli."""
    try:
        import tomllib
        return tomllib.loads(text)
    except ModuleNotFoundError:  # Python < 3.11
        import tomli
        return tomli.loads(text)


def _flag(cls: type[Mechanism], parameter: str) -> str:
    return _RENAMED_FLAGS.get(cls, {}).get(parameter, "--" + parameter.replace("_", "-"))


def _one_line(message: object) -> str:
    return " ".join(str(message).split())


def _rename(message: str, names: Mapping[str, str]) -> str:
    """Replace the parameter name a library message starts with by its flag, and method='x' by --method x."""
    message = _one_line(message)
    match = re.match(r"[A-Za-z_]\w*(?=[ =])", message)
    if match and match.group(0) in names:
        message = names[match.group(0)] + message[match.end():]
    return re.sub(r"\bmethod='(\w+)'", r"--method \1", message)


def _number(text: str):
    """An int when the text is one (keeps integer parameters exact), else a float; the library checks ranges."""
    try:
        value = int(text)
    except ValueError:
        pass
    else:
        if abs(value) < 2 ** 1000:  # larger ints become float('inf'), which the library rejects by name
            return value
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _real(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _mechanism_choice(text: str) -> str:
    return _cli_name(_type_key(text))


def _json_number(value: float):
    value = float(value)
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


# ---------------------------------------------------------------------------
# Spec files
# ---------------------------------------------------------------------------

def load_spec(path: str | Path) -> dict:
    """Read a spec file (TOML or JSON by extension) into a dict; raise :class:`SpecError` naming the file.

    Parameters
    ----------
    path : str or pathlib.Path
        A file ending in ``.toml`` or ``.json`` (either case), UTF-8 encoded; the module docstring describes
        the format.

    Returns
    -------
    dict
        The parsed top-level table/object, not yet checked against the spec format
        (:func:`accountant_from_spec` does that).

    Raises
    ------
    SpecError
        Another extension, a file that cannot be read, invalid TOML or JSON (or UTF-8), or a top level
        that is not a table/object.

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> from afa import cli
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "composition.json"
    ...     _ = path.write_text(json.dumps({"mechanisms": [{"type": "gaussian", "sigma": 10.0, "times": 100}]}))
    ...     cli.load_spec(path)
    {'mechanisms': [{'type': 'gaussian', 'sigma': 10.0, 'times': 100}]}
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise SpecError(f"spec file {str(path)!r}: unsupported extension {path.suffix!r} (use .toml or .json)")
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise SpecError(f"spec file {str(path)!r}: cannot read: {error.strerror or error}") from None
    try:
        if suffix == ".toml":
            data = _toml_loads(raw.decode("utf-8"))
        else:
            data = json.loads(raw.decode("utf-8"))
    except ValueError as error:  # TOMLDecodeError, JSONDecodeError and UnicodeDecodeError are ValueErrors
        kind = "TOML" if suffix == ".toml" else "JSON"
        raise SpecError(f"spec file {str(path)!r}: invalid {kind}: {_one_line(error)}") from None
    if not isinstance(data, dict):
        raise SpecError(f"spec file {str(path)!r}: the top level must be a table/object with a 'mechanisms' list, "
                        f"got {type(data).__name__}")
    return data


def _subsampled(mechanism: Mechanism, rate, scheme) -> Mechanism:
    """``mechanism`` on a random subsample with ``rate`` (scheme poisson or subset), or itself if no rate."""
    if rate is None:
        return mechanism
    return Subsampled(mechanism, rate, "poisson" if scheme is None else scheme)


def accountant_from_spec(spec: Mapping, neighboring: str | None = None, source: str = "spec") -> Accountant:
    """An :class:`Accountant` holding the composition a spec describes (:meth:`afa.Accountant.from_dict`).

    Parameters
    ----------
    spec : mapping
        The spec (e.g. from :func:`load_spec`): a ``mechanisms`` list and the optional top-level keys
        :meth:`afa.Accountant.from_dict` accepts.
    neighboring : {"add_remove", "substitution", "replace_special"}, optional
        Overrides the spec's own ``neighboring`` (default add_remove).
    source : str, default "spec"
        What the spec came from (the file name): it prefixes every error message.

    Returns
    -------
    Accountant
        A new accountant with the spec's composition and settings.

    Raises
    ------
    SpecError
        Any ValueError, TypeError or OverflowError of :meth:`afa.Accountant.from_dict`, as one line
        prefixed with ``source``.

    Examples
    --------
    >>> from afa import cli
    >>> spec = {"mechanisms": [{"type": "gaussian", "sigma": 10.0, "times": 100}]}
    >>> cli.accountant_from_spec(spec, neighboring="substitution")
    Accountant(neighboring='substitution', [Gaussian(sigma=10.0, sensitivity=1.0) x100])
    >>> cli.accountant_from_spec({"mechanisms": []}, source="composition.toml")
    Traceback (most recent call last):
        ...
    afa.cli.SpecError: composition.toml: spec needs a non-empty list 'mechanisms' ([[mechanisms]] tables in TOML)
    """
    from .accountant import Accountant

    if neighboring is not None and isinstance(spec, Mapping):
        spec = {**spec, "neighboring": neighboring}
    try:
        return Accountant.from_dict(spec)
    except (ValueError, TypeError, OverflowError) as error:
        raise SpecError(f"{source}: {_one_line(error)}") from None


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _UsageError(message)


def _parameter_flags() -> dict[str, tuple[str, str]]:
    """flag -> (argparse dest, help text naming the --mechanism values that use it), for every mechanism flag."""
    users: dict[str, list[str]] = {}
    defaults: dict[str, set] = {}
    for key in FLAG_MECHANISMS:
        cls = MECHANISM_TYPES[key]
        for field in _fields(cls):
            flag = _flag(cls, field.name)
            users.setdefault(flag, []).append(_cli_name(key))
            if field.default is not dataclasses.MISSING:
                defaults.setdefault(flag, set()).add(field.default)
    flags = {}
    for flag, names in users.items():
        text = "for " + ", ".join(names)
        if len(defaults.get(flag, ())) == 1:
            text += f" (optional, default {next(iter(defaults[flag]))})"
        flags[flag] = (flag[2:].replace("-", "_"), text)
    return flags


def _composition_arguments(command: argparse.ArgumentParser) -> Any:
    """Add the options that describe a composition (--mechanism and its parameters, or --spec) and how it is
    queried (--neighboring, --method, --quiet) to ``command``; return the query options' group."""
    source = command.add_argument_group("composition (one of --mechanism or --spec)")
    exclusive = source.add_mutually_exclusive_group(required=True)
    names = [_cli_name(key) for key in FLAG_MECHANISMS]
    exclusive.add_argument("--mechanism", type=_mechanism_choice, choices=names, metavar="NAME",
                           help="one mechanism, repeated --compositions times: " + ", ".join(names))
    exclusive.add_argument("--spec", metavar="FILE", help="a heterogeneous composition (.toml or .json, see below)")
    source.add_argument("--compositions", type=_number, default=None, metavar="K",
                        help="how many times --mechanism is used (default 1)")
    source.add_argument("--sampling-rate", type=_real, default=None, metavar="Q",
                        help="run --mechanism on a random subsample with rate Q (DP-SGD: Q = batch / data size)")
    source.add_argument("--sampling", choices=SCHEMES, default=None,
                        help="subsampling scheme with --sampling-rate (default poisson)")
    parameters = command.add_argument_group("mechanism parameters (with --mechanism)")
    for flag, (dest, text) in _parameter_flags().items():
        parameters.add_argument(flag, dest=dest, type=_number, default=None, metavar=dest.upper(), help=text)
    options = command.add_argument_group("query options")
    options.add_argument("--neighboring", choices=NEIGHBORING_RELATIONS, default=None,
                         help="neighbouring relation (default: the spec file's, else add_remove)")
    options.add_argument("--method", choices=METHODS, default="auto", help="engine (default auto)")
    options.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    return options


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``afa`` command.

    Returns
    -------
    argparse.ArgumentParser
        A parser with the subcommands ``epsilon`` (``--delta``), ``delta`` (``--epsilon``), ``calibrate``,
        ``sweep`` (:mod:`afa.sweep`) and ``plot`` (:mod:`afa.views.plot`);
        the module docstring lists their options.  Bad input raises an internal usage error (reported by
        :func:`main` as one line with exit status 2) instead of exiting; ``--help`` and ``--version`` exit
        through SystemExit as usual.

    Examples
    --------
    >>> from afa import cli
    >>> args = cli.build_parser().parse_args(["delta", "--epsilon", "1", "--mechanism", "gaussian", "--sigma", "10"])
    >>> args.query, args.epsilon, args.mechanism, args.sigma, args.method
    ('delta', [1.0], 'gaussian', 10, 'auto')
    """
    formatter = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="afa", formatter_class=formatter, epilog=_EPILOG,
                     description="Tight (epsilon, delta) of a composition of differentially private mechanisms.")
    parser.add_argument("--version", action="version", version=f"afa {__version__}")
    commands = parser.add_subparsers(dest="query", required=True,
                                   metavar="{epsilon,delta,calibrate,sweep,plot}")
    for query, target, text in (("epsilon", "--delta", "the smallest epsilon with delta(epsilon) <= DELTA"),
                                ("delta", "--epsilon", "the tight delta(EPSILON)")):
        command = commands.add_parser(query, help=text, description=f"Compute {text}.", epilog=_EPILOG,
                                      formatter_class=formatter)
        command.add_argument(target, type=_real, required=True, nargs="+", action="extend", metavar=target[2:].upper(),
                             help=f"the given {target[2:]}; several values (after one flag, or the flag repeated) "
                                  "print a table (one row each)")
        options = _composition_arguments(command)
        options.add_argument("--json", action="store_true", help="print a JSON object instead of a line of text")
        options.add_argument("--compare", action="store_true",
                             help="also print what an RDP accountant (improved and standard conversions), the CLT "
                                  "and a GDP estimate say (upper bounds and estimates, not tight values)")
    calibrate = commands.add_parser("calibrate", help="the smallest Gaussian sigma meeting (epsilon, delta)",
                                    description="The smallest Gaussian noise sigma whose certified upper "
                                                "epsilon(delta) "
                                                "after --steps uses (Poisson-subsampled with --sampling-rate) is <= "
                                                "--epsilon.", formatter_class=formatter)
    calibrate.add_argument("--epsilon", type=_real, required=True, help="the target epsilon")
    calibrate.add_argument("--delta", type=_real, required=True, help="the target delta")
    calibrate.add_argument("--steps", type=_number, required=True, help="how many times the mechanism runs")
    calibrate.add_argument("--sampling-rate", type=_real, default=None, metavar="Q",
                           help="Poisson sampling rate (DP-SGD)")
    calibrate.add_argument("--sensitivity", type=_real, default=1.0, help="sensitivity (default 1)")
    calibrate.add_argument("--rtol", type=_real, default=1e-3, help="relative tolerance of sigma (default 1e-3)")
    calibrate.add_argument("--neighboring", choices=NEIGHBORING_RELATIONS, default="add_remove")
    calibrate.add_argument("--json", action="store_true", help="print a JSON object instead of a line of text")
    calibrate.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    sweep = commands.add_parser("sweep", help="one query per configuration of a grid or table (docs/sweeps.md)",
                                description="Answer the query of every configuration of SPEC (a .csv table, or a "
                                            ".toml/.json grid or rows; docs/sweeps.md has the row schema), "
                                            "computing identical compositions once, in parallel.  Rows are "
                                            "written as they complete; an existing OUT of the same sweep is "
                                            "resumed.", formatter_class=formatter)
    sweep.add_argument("spec", metavar="SPEC", help="the configurations (.csv, .toml or .json)")
    sweep.add_argument("-o", "--output", metavar="OUT", default=None,
                       help="OUT.csv or OUT.parquet (default: CSV on stdout)")
    sweep.add_argument("--workers", type=_number, default=None, metavar="N",
                       help="local worker processes (default: every core; 1: serial)")
    sweep.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="run on the Dask scheduler at ADDRESS (tcp://host:8786) instead of local processes")
    sweep.add_argument("--quiet", action="store_true", help=QUIET_HELP + ", and no summary or row problems")
    plot = commands.add_parser("plot", help="draw a figure of the composition to a file (needs matplotlib)",
                               description="Draw a figure of the composition (afa.views.plot) into OUT: "
                                           + "; ".join(f"{kind}: {text}" for kind, (_, text) in PLOT_KINDS.items())
                                           + ".  The format follows OUT's extension (.png, .pdf, .svg, ...).",
                               epilog=_EPILOG, formatter_class=formatter)
    plot.add_argument("kind", choices=tuple(PLOT_KINDS), metavar="KIND",
                      help="what to draw: " + ", ".join(PLOT_KINDS))
    plot.add_argument("-o", "--output", metavar="OUT", required=True, help="the figure's file (.png, .pdf, .svg, ...)")
    _composition_arguments(plot)
    return parser


def _accountant_from_flags(args) -> Accountant:
    from .accountant import Accountant

    key = _type_key(args.mechanism)
    cls = MECHANISM_TYPES[key]
    own = {_flag(cls, parameter): parameter for parameter, _ in _parameters(cls)}
    for flag, (dest, _) in _parameter_flags().items():
        if getattr(args, dest) is not None and flag not in own:
            accepted = " ".join(own) or "no parameters"
            raise _UsageError(f"{flag} does not apply to --mechanism {args.mechanism} (it takes {accepted})")
    missing = [_flag(cls, parameter) for parameter, required in _parameters(cls)
               if required and getattr(args, _flag(cls, parameter)[2:].replace("-", "_")) is None]
    if missing:
        raise _UsageError(f"--mechanism {args.mechanism} requires {', '.join(missing)}")
    kwargs = {parameter: getattr(args, flag[2:].replace("-", "_")) for flag, parameter in own.items()}
    kwargs = {parameter: value for parameter, value in kwargs.items() if value is not None}
    try:
        mechanism = cls(**kwargs)
    except (ValueError, TypeError, OverflowError) as error:
        raise _UsageError(_rename(str(error), {parameter: flag for flag, parameter in own.items()})) from None
    if args.sampling is not None and args.sampling_rate is None:
        raise _UsageError("--sampling needs --sampling-rate")
    try:
        mechanism = _subsampled(mechanism, args.sampling_rate, args.sampling)
    except (ValueError, TypeError) as error:
        names = {parameter: flag for flag, parameter in own.items()}
        names.update({"q": "--sampling-rate", "sampling_rate": "--sampling-rate", "scheme": "--sampling"})
        raise _UsageError(_rename(str(error), names)) from None
    accountant = Accountant(args.neighboring or "add_remove")
    times = 1 if args.compositions is None else args.compositions
    try:
        accountant.compose(mechanism, times)
    except (ValueError, TypeError, OverflowError) as error:
        raise _UsageError(_rename(str(error), {"times": "--compositions", "neighboring": "--neighboring"})) from None
    return accountant


def _accountant(args) -> Accountant:
    if args.mechanism is not None:
        return _accountant_from_flags(args)
    for flag, (dest, _) in _parameter_flags().items():
        if getattr(args, dest) is not None:
            raise _UsageError(f"{flag} cannot be combined with --spec (give the mechanism's keys in the spec file)")
    if args.compositions is not None:
        raise _UsageError("--compositions cannot be combined with --spec (use 'times' in the spec file)")
    if args.sampling_rate is not None or args.sampling is not None:
        raise _UsageError("--sampling-rate/--sampling cannot be combined with --spec "
                          "(use 'sampling_rate' and 'sampling' in the spec file)")
    try:
        return accountant_from_spec(load_spec(args.spec), args.neighboring, source=f"spec file {args.spec!r}")
    except SpecError as error:
        raise _UsageError(str(error)) from None


def _query(args, accountant: Accountant) -> list[Result]:
    """One result per given value (``--delta`` or ``--epsilon``, in the order given)."""
    given = "delta" if args.query == "epsilon" else "epsilon"
    try:
        if args.query == "epsilon":
            return [accountant.epsilon_result(value, method=args.method) for value in args.delta]
        if len(args.epsilon) == 1:
            return [accountant.delta_result(args.epsilon[0], method=args.method)]
        many = accountant.delta_result(args.epsilon, method=args.method)  # one pass over the engine's nodes
        return [Result(value, lower, upper, error, many.method, many.certified)
                for value, lower, upper, error in zip(many.value, many.lower, many.upper, many.error)]
    except (ValueError, TypeError, OverflowError, AccuracyError) as error:
        raise _UsageError(_rename(str(error), {given: "--" + given})) from None


def _record(args, accountant: Accountant, value: float, result: Result) -> dict:
    """The JSON object of one answer."""
    given = "delta" if args.query == "epsilon" else "epsilon"
    return {
        "query": args.query,
        "reported": _json_number(result.upper),
        "value": _json_number(result.value),
        "lower": _json_number(result.lower),
        "upper": _json_number(result.upper),
        "error": _json_number(result.error),
        "method": result.method,
        "certified": bool(result.certified),
        given: _json_number(value),
        "neighboring": accountant.neighboring,
    }


def _report(args, accountant: Accountant, result: Result, comparison: dict[str, float] | None = None) -> str:
    given = "delta" if args.query == "epsilon" else "epsilon"
    value = float(getattr(args, given)[0])
    if args.json:
        extra = {} if comparison is None else {"compare": {k: _json_number(v) for k, v in comparison.items()}}
        return json.dumps({**extra, **_record(args, accountant, value, result)})
    line = (f"{args.query} = {result.upper:.10g} for {given} = {value:.10g} "
            f"(method: {result.method}, estimate {result.value:.10g}, "
            f"bounds [{result.lower:.10g}, {result.upper:.10g}])")
    if comparison is not None:
        line += "".join(f"\n  {COMPARISONS[key]}: {args.query} = {number:.10g}" for key, number in comparison.items())
    return line


def _table(args, accountant: Accountant, results: list[Result]) -> str:
    """Several answers: a JSON list of :func:`_record` objects, or a text table with one row per given value
    (the upper bound is the number to report, as in the one-line output)."""
    given = "delta" if args.query == "epsilon" else "epsilon"
    values = [float(value) for value in getattr(args, given)]
    if args.json:
        return json.dumps([_record(args, accountant, value, result) for value, result in zip(values, results)])
    header = [given, f"{args.query} (upper)", "estimate", "lower", "method", "certified"]
    rows = [[f"{value:.10g}", f"{result.upper:.10g}", f"{result.value:.10g}", f"{result.lower:.10g}",
             result.method, str(bool(result.certified))] for value, result in zip(values, results)]
    widths = [max(len(row[column]) for row in [header] + rows) for column in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in [header] + rows)


def main(argv: list[str] | None = None) -> int:
    """Run the ``afa`` command with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    Parameters
    ----------
    argv : list of str, optional
        The command-line arguments without the program name (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 after printing the answer (one line, or a JSON object with ``--json``) to stdout; 2 after bad input
        (including a query that the chosen method refuses), reported as one line ``afa: error: ...`` on
        stderr; ``--help`` and ``--version`` return their own status.

    Examples
    --------
    >>> from afa import cli
    >>> cli.main(["epsilon", "--delta", "1e-5", "--mechanism", "gaussian", "--sigma", "10", "--compositions", "100"])
    epsilon = 4.377178096 for delta = 1e-05 (method: exact, estimate 4.377178096, bounds [4.377178096, 4.377178096])
    0
    """
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exit_:  # --help and --version
            return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        with silenced() if args.quiet else contextlib.nullcontext():
            return _run(args)
    except _UsageError as error:
        print(f"afa: error: {_one_line(error)}", file=sys.stderr)
        return 2


def _run(args) -> int:
    """Answer the parsed command (printing the answer); bad input raises _UsageError."""
    if args.query == "calibrate":
        print(_calibrate(args))
        return 0
    if args.query == "sweep":
        return _sweep(args)
    if args.query == "plot":
        print(_plot(args))
        return 0
    several = len(getattr(args, "delta" if args.query == "epsilon" else "epsilon")) > 1
    if several and args.compare:
        raise _UsageError("--compare takes one --delta or --epsilon value")
    accountant = _accountant(args)
    results = _query(args, accountant)
    comparison = _comparison(args, accountant) if args.compare else None
    print(_table(args, accountant, results) if several else _report(args, accountant, results[0], comparison))
    return 0


def _plot(args) -> str:
    """``afa plot``: draw the figure with the Agg backend (no display needed) and save it to --output."""
    try:
        import matplotlib
    except ImportError:
        raise _UsageError("afa plot needs matplotlib: pip install 'afa[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .views import plot

    accountant = _accountant(args)
    function, _ = PLOT_KINDS[args.kind]
    try:
        ax = getattr(plot, function)(accountant, method=args.method)
    except (ValueError, TypeError, OverflowError, AccuracyError) as error:
        raise _UsageError(_rename(str(error), {})) from None
    figure = ax.get_figure()
    try:
        figure.tight_layout()
        figure.savefig(args.output, dpi=150)
    except (ValueError, OSError) as error:  # an unknown extension, a folder that does not exist
        raise _UsageError(f"-o {args.output}: {_one_line(error)}") from None
    finally:
        plt.close(figure)
    return f"{args.kind} of {accountant!r} -> {args.output}"


def _comparison(args, accountant: Accountant) -> dict[str, float]:
    """What the looser accountants say about the same query (Zhu, Dong & Wang 2022, App. F, Sommer, Meiser & Mohammadi
    2019, Thm 4)."""
    from .engines.base import smallest_epsilon
    from .numerics import exact
    from .views import clt, rdp

    rdp_accountant = rdp.RdpAccountant.from_accountant(accountant)
    mu = clt.gdp_mu(accountant)
    if args.query == "epsilon":
        delta = args.delta[0]
        clt_epsilon = smallest_epsilon(lambda eps: float(clt.clt_delta(accountant, eps)), delta, scale=1.0)
        return {"rdp_improved": rdp_accountant.epsilon(delta, "improved"),
                "rdp_standard": rdp_accountant.epsilon(delta, "standard"),
                "clt": clt_epsilon, "gdp": exact.gaussian_epsilon(delta, mu) if mu > 0 else 0.0}
    epsilon = args.epsilon[0]
    return {"rdp_improved": rdp_accountant.delta(epsilon, "improved"),
            "rdp_standard": rdp_accountant.delta(epsilon, "standard"),
            "clt": float(clt.clt_delta(accountant, epsilon)),
            "gdp": float(exact.gaussian_delta(epsilon, mu)) if mu > 0 else 0.0}


def _sweep(args) -> int:
    """``afa sweep``: the rows go to the output file (or stdout), the malformed rows and a summary to stderr."""
    from . import sweep

    try:
        report = sweep.sweep(args.spec, sys.stdout if args.output is None else args.output, workers=args.workers,
                             scheduler=args.scheduler, quiet=args.quiet)
    except (ValueError, TypeError, ImportError, ConnectionError) as error:
        raise _UsageError(_rename(str(error), {"workers": "--workers"})) from None
    if not args.quiet:
        for problem in report.problems:
            print(f"afa sweep: {problem}", file=sys.stderr)
        where = "" if report.output is None else f" -> {report.output}"
        print(f"afa sweep: {report.written} rows ({report.skipped} already written), {report.evaluations} distinct "
              f"compositions evaluated, {report.failed} failed, {report.seconds:.1f} s{where}", file=sys.stderr)
    return 0


def _calibrate(args) -> str:
    from .calibration import calibrate_sigma

    try:
        result = calibrate_sigma(args.epsilon, args.delta, args.steps, args.sampling_rate,
                                 sensitivity=args.sensitivity, neighboring=args.neighboring, rtol=args.rtol)
    except (ValueError, TypeError, AccuracyError) as error:
        names = {"target_epsilon": "--epsilon", "delta": "--delta", "steps": "--steps",
                 "sampling_rate": "--sampling-rate", "sensitivity": "--sensitivity", "rtol": "--rtol"}
        raise _UsageError(_rename(str(error), names)) from None
    if args.json:
        return json.dumps({"query": "calibrate", "sigma": result.value, "epsilon_upper": result.epsilon_upper,
                           "rejected": result.rejected, "rtol": result.rtol, "method": result.method,
                           "certified": result.certified, "epsilon": args.epsilon, "delta": args.delta})
    return (f"sigma = {result.value:.10g} for epsilon = {args.epsilon:.10g}, delta = {args.delta:.10g} "
            f"(upper epsilon {result.epsilon_upper:.10g}, method: {result.method}, certified: {result.certified}; "
            f"sigma = {result.rejected:.10g} misses the target)")


if __name__ == "__main__":
    raise SystemExit(main())
