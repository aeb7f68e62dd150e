"""The tunable settings of afa's engines and of ``method="auto"``: frozen, validated option objects.

:class:`Options` groups one object per engine -- :class:`ExactOptions`, :class:`ContourOptions`,
:class:`PLDOptions` -- and the policy of ``method="auto"`` (:class:`AutoOptions`), each with documented
defaults.  An :class:`afa.Accountant` holds one (``Accountant(options=...)``) and makes it the active
options while it answers a query (:func:`using`); the engines read their settings from :func:`current`.
The active options live in a context variable, so accountants with different options can answer side
by side, in threads too.  Outside any query the defaults are active.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import numbers
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["METHODS", "AutoOptions", "ContourOptions", "ExactOptions", "Options", "PLDOptions", "current", "using"]

#: The methods a query may name (``method=``): ``"auto"`` and one per engine (also ``afa.accountant.METHODS``).
METHODS = ("auto", "exact", "quadrature", "contour", "certified", "pld")


def _check_int(owner: str, name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{owner}.{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{owner}.{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_bool(owner: str, name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{owner}.{name} must be True or False, got {value!r} of type {type(value).__name__}")
    return bool(value)


#: The engines 'auto' may fall back to after its first choice and the contour (:attr:`AutoOptions.fallbacks`).
FALLBACK_METHODS = ("pld", "quadrature", "certified")


def _check_methods(owner: str, name: str, value) -> tuple[str, ...]:
    allowed = ", ".join(map(repr, FALLBACK_METHODS))
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{owner}.{name} must be a sequence of distinct names among {allowed}, got {value!r}")
    for item in value:
        if not isinstance(item, str):
            raise TypeError(f"{owner}.{name} must hold names among {allowed}, got {item!r}")
        if item not in FALLBACK_METHODS:
            raise ValueError(f"{owner}.{name} must hold names among {allowed}, got {item!r}")
    if len(set(value)) != len(value):
        raise ValueError(f"{owner}.{name} must not repeat a method, got {value!r}")
    return tuple(value)


def _check_real(owner: str, name: str, value, low: float, high: float, *, low_open: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}.{name} must be a number in {'(' if low_open else '['}{low:g}, {high:g}], "
                        f"got {value!r}")
    value = float(value)
    if math.isnan(value) or not (low < value if low_open else low <= value) or not value <= high:
        raise ValueError(f"{owner}.{name} must be in {'(' if low_open else '['}{low:g}, {high:g}], got {value!r}")
    return value


class _Validated:
    """Runs each field's check in ``_CHECKS`` (name -> function of (owner, name, value)) after __init__."""

    _CHECKS: dict = {}

    def __post_init__(self):
        for name, check in self._CHECKS.items():
            object.__setattr__(self, name, check(type(self).__name__, name, getattr(self, name)))


@dataclass(frozen=True)
class ExactOptions(_Validated):
    """Limits of the exact discrete composition (``method="exact"``).

    Parameters
    ----------
    max_atoms : int
        Most distinct loss values one composed distribution may hold (default 2 000 000, at least 1).
        A composition or query needing more is refused (:class:`afa.numerics.atoms.CompositionTooLargeError`)
        and ``method="auto"`` moves on.
    max_pairs : int
        Most atom pairs one convolution may form (default 20 000 000, at least 1): its time and memory.
    two_factor : bool
        Whether a composition of several discrete mechanisms too large to enumerate may be evaluated as
        two groups, each composed in full and searched against the other without forming their pairs
        (:class:`afa.engines.two_factor.TwoFactorSum`; default True).
    lattice : bool
        Whether finite losses on a common lattice (discrete Gaussian and Laplace, randomized response, ...) are
        composed by dense convolution on it (default True); False composes them by sorting atom pairs, the
        general path (slower; for checking one against the other).

    Raises
    ------
    ValueError
        A setting below its minimum.
    TypeError
        A setting that is not an integer (``two_factor``, ``lattice``: not a bool).

    Examples
    --------
    >>> import afa
    >>> afa.ExactOptions(max_atoms=10_000)
    ExactOptions(max_atoms=10000, max_pairs=20000000, two_factor=True, lattice=True)
    """

    max_atoms: int = 2_000_000
    max_pairs: int = 20_000_000
    two_factor: bool = True
    lattice: bool = True

    _CHECKS = {"max_atoms": lambda o, n, v: _check_int(o, n, v, 1),
               "max_pairs": lambda o, n, v: _check_int(o, n, v, 1),
               "two_factor": lambda o, n, v: _check_bool(o, n, v),
               "lattice": lambda o, n, v: _check_bool(o, n, v)}


@dataclass(frozen=True)
class ContourOptions(_Validated):
    """Node budgets of the saddle-point contour (``method="contour"``).

    Parameters
    ----------
    numeric_nodes : int
        Most nodes of one contour sum when the composition has terms whose MGF is computed numerically
        (subsampled mechanisms); default 4096, at least 16.  A sum needing more is refused
        (:class:`afa.engines.contour.NodeBudgetError`).
    wide_numeric_nodes : int
        The budget of the retry ``method="auto"`` makes after such a refusal (default 192 * 4096), at least
        ``numeric_nodes``.
    work_per_node : int
        The work allowance of one contour sum, in terms of its finite and numeric MGFs per node of its node
        budget (default 4096, at least 1): a finite term costs its atoms at each node, a numeric MGF its
        output nodes.  A sum needing more is refused (:class:`afa.engines.contour.NodeBudgetError`) before the work
        is spent.

    Raises
    ------
    ValueError
        A budget below 16, a work allowance below 1, or ``wide_numeric_nodes`` below ``numeric_nodes``.
    TypeError
        A budget that is not an integer.

    Examples
    --------
    >>> import afa
    >>> afa.ContourOptions()
    ContourOptions(numeric_nodes=4096, wide_numeric_nodes=786432, work_per_node=4096)
    """

    numeric_nodes: int = 4_096
    wide_numeric_nodes: int = 192 * 4_096
    work_per_node: int = 4_096

    _CHECKS = {"numeric_nodes": lambda o, n, v: _check_int(o, n, v, 16),
               "wide_numeric_nodes": lambda o, n, v: _check_int(o, n, v, 16),
               "work_per_node": lambda o, n, v: _check_int(o, n, v, 1)}

    def __post_init__(self):
        super().__post_init__()
        if self.wide_numeric_nodes < self.numeric_nodes:
            raise ValueError(f"ContourOptions.wide_numeric_nodes must be >= numeric_nodes ({self.numeric_nodes}), "
                             f"got {self.wide_numeric_nodes}")


@dataclass(frozen=True)
class PLDOptions(_Validated):
    """Truncation and size of the discretized PLD (``method="pld"``).

    The grid step is the accountant's ``value_discretization_interval``.

    Parameters
    ----------
    tail_fraction : float
        Tail mass truncated from each PLD, relative to the delta asked about (default 1e-7, in (0, 0.01]).
    smallest_tail : float
        The smallest truncated tail mass (default 1e-305, in (0, 1e-12]): below it the PLD cannot resolve
        delta and refuses with its certified lower bound.
    max_grid_points : int
        Most points of one PLD's grid (default 2**26, at least 1024); more is refused
        (:class:`afa.engines.pld.PLDTooLargeError`).
    delta_rounds : int
        Rounds in which a delta(eps) query rebuilds the PLDs, truncated deeper, for the eps whose delta is
        too small for the first build to resolve relative to it (default 3, at least 0).  With 0 every
        delta comes from the first build: certified still, with an *absolute* error of about 1e-12 plus
        the discretization's (what a trade-off curve needs, see :func:`afa.views.tradeoff.tradeoff_curve`).
    direct_power_limit : int
        Most multiply-adds of a PLD's self-composition by direct convolution, taken instead of the FFT where
        the FFT's rounding would exceed the tolerance (default 10**8, at least 0; 0 always takes the FFT).

    Raises
    ------
    ValueError
        A setting out of its range.
    TypeError
        A setting of the wrong type (a real number, or an integer for ``max_grid_points``).

    Examples
    --------
    >>> import afa
    >>> afa.PLDOptions(tail_fraction=1e-6)  # doctest: +NORMALIZE_WHITESPACE
    PLDOptions(tail_fraction=1e-06, smallest_tail=1e-305, max_grid_points=67108864, delta_rounds=3,
               direct_power_limit=100000000)
    """

    tail_fraction: float = 1e-7
    smallest_tail: float = 1e-305
    max_grid_points: int = 2 ** 26
    delta_rounds: int = 3
    direct_power_limit: int = 10 ** 8

    _CHECKS = {"tail_fraction": lambda o, n, v: _check_real(o, n, v, 0.0, 1e-2),
               "smallest_tail": lambda o, n, v: _check_real(o, n, v, 0.0, 1e-12),
               "max_grid_points": lambda o, n, v: _check_int(o, n, v, 1024),
               "delta_rounds": lambda o, n, v: _check_int(o, n, v, 0),
               "direct_power_limit": lambda o, n, v: _check_int(o, n, v, 0)}


@dataclass(frozen=True)
class AutoOptions(_Validated):
    """The policy of ``method="auto"``.

    Parameters
    ----------
    share : float
        The share of the time left that each engine but the last gets (default 0.5, in (0, 1]).
    wide_share : float
        The share of the time left for the contour's retry with ``ContourOptions.wide_numeric_nodes`` after the
        contour ran out of nodes (default 0.25, in (0, 1]).  Every mechanism continuous: the retry comes before
        the PLD; with finite-output mechanisms it is queued behind the PLD, which then gets the time left but this
        share (at least ``share`` of it): the retry only refines the PLD's bracket.  Once the retry has failed,
        the PLD gets that share in later queries of the composition.
    bracket_rtol : float
        A certified bracket wider than this, relative to its value, makes 'auto' try the contour with the
        wide node budget for a tighter answer (default 0.01, in (0, inf]).
    retry_rtol : float
        With finite-output mechanisms, after the contour ran out of nodes, a certified bracket wider than this,
        relative to its value, is kept while the contour retries with the wide node budget; a bracket of the
        coarse PLD grid (see ``coarse_grid``) within this is the answer, a wider one is kept while the fine grid
        tries; a bracket (of eps or delta) still wider than this is kept while, for one subsampled Gaussian, the
        doubling recursion tries beyond its fast reach (``afa.engines.planner.FAR_DOUBLING``: seconds, last, with
        the time left) (default 1e-6, in (0, inf]).
    reserve : float
        The share of an eps(delta) query's time kept back for a certified lower bound to attach to a refusal
        when no engine answers in the rest (default 0.1, in [0, 0.5]; 0: none).
    fallbacks : tuple of str
        The engines tried, in this order, after 'auto''s first choice and the contour refuse a query: distinct
        names among "pld", "quadrature" and "certified" (default all three in that order; empty: none).
    coarse_grid : float
        Before a discretized PLD of more than ``afa.engines.planner.LARGE_PLD_POINTS`` grid points, 'auto' tries
        one on a grid this many times coarser (a certified bracket in a small share of the time): within
        ``retry_rtol`` it is the answer, else it is kept while the fine grid tries (passed over when the coarse
        build's time times this factor exceeds the fine grid's share) and answers if no engine does better
        (default 16, in [1, 1024]; 1: no coarse attempt).
    recursions : bool
        Whether 'auto' may answer by the step recursion and the doubling (:mod:`afa.engines.step_recursion`:
        relative accuracy where the contour's sums cancel, at seconds for hundreds of uses) (default True;
        False leaves those queries to the fallbacks, e.g. the PLD's certified brackets: calibration's search,
        which needs a fast estimate, does so).

    Raises
    ------
    ValueError
        A setting out of its range.
    TypeError
        A setting that is not a real number, ``fallbacks`` not a sequence of names, or ``recursions`` not a bool.

    Examples
    --------
    >>> import afa
    >>> afa.AutoOptions(share=0.25)  # doctest: +NORMALIZE_WHITESPACE
    AutoOptions(share=0.25, wide_share=0.25, bracket_rtol=0.01, retry_rtol=1e-06, reserve=0.1,
                fallbacks=('pld', 'quadrature', 'certified'), coarse_grid=16.0, recursions=True)
    """

    share: float = 0.5
    wide_share: float = 0.25
    bracket_rtol: float = 1e-2
    retry_rtol: float = 1e-6
    reserve: float = 0.1
    fallbacks: tuple[str, ...] = FALLBACK_METHODS
    coarse_grid: float = 16.0
    recursions: bool = True

    _CHECKS = {"share": lambda o, n, v: _check_real(o, n, v, 0.0, 1.0),
               "wide_share": lambda o, n, v: _check_real(o, n, v, 0.0, 1.0),
               "bracket_rtol": lambda o, n, v: _check_real(o, n, v, 0.0, math.inf),
               "retry_rtol": lambda o, n, v: _check_real(o, n, v, 0.0, math.inf),
               "reserve": lambda o, n, v: _check_real(o, n, v, 0.0, 0.5, low_open=False),
               "fallbacks": lambda o, n, v: _check_methods(o, n, v),
               "coarse_grid": lambda o, n, v: _check_real(o, n, v, 1.0, 1024.0, low_open=False),
               "recursions": lambda o, n, v: _check_bool(o, n, v)}


_GROUPS = {"exact": ExactOptions, "contour": ContourOptions, "pld": PLDOptions, "auto": AutoOptions}


@dataclass(frozen=True)
class Options:
    """All of afa's tunable settings (each group's defaults are documented on its class).

    Parameters
    ----------
    exact : ExactOptions, optional
        Limits of the exact discrete composition (default ``ExactOptions()``).
    contour : ContourOptions, optional
        Node budgets of the saddle-point contour (default ``ContourOptions()``).
    pld : PLDOptions, optional
        Truncation and size of the discretized PLD (default ``PLDOptions()``).
    auto : AutoOptions, optional
        The policy of ``method="auto"`` (default ``AutoOptions()``).

    Raises
    ------
    TypeError
        A group that is not an instance of its class.

    Examples
    --------
    >>> import afa
    >>> options = afa.Options(exact=afa.ExactOptions(max_atoms=10_000))
    >>> accountant = afa.Accountant(options=options)
    """

    exact: ExactOptions = field(default_factory=ExactOptions)
    contour: ContourOptions = field(default_factory=ContourOptions)
    pld: PLDOptions = field(default_factory=PLDOptions)
    auto: AutoOptions = field(default_factory=AutoOptions)

    def __post_init__(self):
        for name, kind in _GROUPS.items():
            if not isinstance(getattr(self, name), kind):
                raise TypeError(f"Options.{name} must be an afa.{kind.__name__}, got {getattr(self, name)!r}")

    def replace(self, **groups) -> Options:
        """A copy with some groups replaced.

        Parameters
        ----------
        **groups
            New groups by name (``exact``, ``contour``, ``pld``, ``auto``).

        Returns
        -------
        Options

        Examples
        --------
        >>> import afa
        >>> afa.Options().replace(pld=afa.PLDOptions(smallest_tail=1e-100)).pld.smallest_tail
        1e-100
        """
        return dataclasses.replace(self, **groups)

    def to_dict(self) -> dict:
        """The settings that differ from the defaults, as {group: {name: value}} (JSON-ready).

        Returns
        -------
        dict
            ``{group: {name: value}}`` with only the groups and settings that differ from ``Options()``'s
            (empty for the defaults); :meth:`from_dict` inverts it.

        Examples
        --------
        >>> import afa
        >>> afa.Options().to_dict()
        {}
        >>> afa.Options(pld=afa.PLDOptions(tail_fraction=1e-6)).to_dict()
        {'pld': {'tail_fraction': 1e-06}}
        """
        default = Options()
        spec = {}
        for name in _GROUPS:
            group, base = getattr(self, name), getattr(default, name)
            changed = {f.name: _plain(getattr(group, f.name)) for f in dataclasses.fields(group)
                       if getattr(group, f.name) != getattr(base, f.name)}
            if changed:
                spec[name] = changed
        return spec

    @classmethod
    def from_dict(cls, spec) -> Options:
        """The inverse of :meth:`to_dict`: ``{group: {name: value}}`` over the defaults.

        Parameters
        ----------
        spec : dict
            ``{group: {name: value}}``; groups and names left out keep their defaults.

        Returns
        -------
        Options

        Raises
        ------
        ValueError
            An unknown group or key, or a value out of range.
        TypeError
            ``spec`` or a group that is not a dict, or a value of the wrong type.

        Examples
        --------
        >>> import afa
        >>> afa.Options.from_dict({"exact": {"max_atoms": 10_000}}).exact.max_atoms
        10000
        """
        if not isinstance(spec, dict):
            raise TypeError(f"options must be a table of groups ({', '.join(_GROUPS)}), got {spec!r}")
        groups: dict = {}
        for name, values in spec.items():
            if name not in _GROUPS:
                raise ValueError(f"unknown options group {name!r} (allowed: {', '.join(_GROUPS)})")
            if not isinstance(values, dict):
                raise TypeError(f"options.{name} must be a table, got {values!r}")
            allowed = [f.name for f in dataclasses.fields(_GROUPS[name])]  # type: ignore[arg-type]
            for key in values:
                if key not in allowed:
                    raise ValueError(f"unknown key {key!r} in options.{name} (allowed: {', '.join(allowed)})")
            groups[name] = _GROUPS[name](**values)
        return cls(**groups)


def _plain(value):
    """A setting as JSON and TOML write it (a tuple as a list)."""
    return list(value) if isinstance(value, tuple) else value


DEFAULT = Options()
_ACTIVE: contextvars.ContextVar[Options] = contextvars.ContextVar("afa_options", default=DEFAULT)


def current() -> Options:
    """The options in effect: those of the query being answered, else the defaults.

    Returns
    -------
    Options
        The active :class:`Options`.

    Examples
    --------
    >>> import afa
    >>> afa.options.current() == afa.Options()
    True
    """
    return _ACTIVE.get()


@contextlib.contextmanager
def using(options: Options | None) -> Iterator[Options]:
    """Make ``options`` the active options inside the block (None keeps the current ones).

    Parameters
    ----------
    options : Options or None
        The options to activate.

    Yields
    ------
    Options
        The options active inside the block.

    Raises
    ------
    TypeError
        ``options`` is neither None nor an :class:`Options`.

    Examples
    --------
    >>> import afa
    >>> with afa.options.using(afa.Options(auto=afa.AutoOptions(share=0.25))):
    ...     afa.options.current().auto.share
    0.25
    """
    if options is None:
        yield current()
        return
    if not isinstance(options, Options):
        raise TypeError(f"options must be an afa.Options, got {type(options).__name__}")
    token = _ACTIVE.set(options)
    try:
        yield options
    finally:
        _ACTIVE.reset(token)
