"""Figures of a composition's privacy guarantees, drawn with matplotlib (the optional extra ``afa[plot]``).

This module owns the plotting of afa's answers; it computes nothing itself.  Each function asks an
:class:`afa.Accountant` (or :func:`afa.views.tradeoff.tradeoff_curve`) for its numbers, draws them on a matplotlib
``Axes`` and returns it:

- :func:`privacy_profile`: delta(eps) on a log delta axis;
- :func:`epsilon_curve`: eps(delta) on a log delta axis;
- :func:`tradeoff`: the f-DP trade-off curve beta(alpha) beside the no-privacy line 1 - alpha;
- :func:`epsilon_vs_steps`: eps(delta) against the number of steps, one line per accountant and method.

The line drawn is the number to report -- the upper bound on delta or eps (:meth:`afa.Accountant.delta`,
:meth:`afa.Accountant.epsilon`), the lower bound on beta -- and the engine's bounds, when they differ, are
a shaded band around it.  Every function takes ``ax=`` (draw on that Axes; by default a new figure) and
passes further keyword arguments to the line's ``Axes.plot`` (``color=``, ``linewidth=``, ...).

matplotlib is imported inside the functions, so ``import afa`` does not need it.  ``afa plot`` draws the
same figures from the command line (:mod:`afa.cli`).

Examples
--------
>>> import matplotlib
>>> matplotlib.use("Agg")
>>> import afa, afa.views.plot
>>> accountant = afa.Accountant().compose(afa.Gaussian(10.0), 100)
>>> ax = afa.views.plot.privacy_profile(accountant)
>>> ax.get_xlabel(), ax.get_ylabel(), ax.get_yscale()
('ε', 'δ(ε)', 'log')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _validation as check
from ..accountant import Accountant
from ..options import METHODS
from .tradeoff import tradeoff_curve

__all__ = ["epsilon_curve", "epsilon_vs_steps", "privacy_profile", "tradeoff"]

#: Points of the default eps grid of :func:`privacy_profile`.
PROFILE_POINTS = 200
#: The default eps grid of :func:`privacy_profile` ends at eps(delta) for the first of these deltas whose
#: eps is finite and positive (a mass at infinity above 1e-10 makes the smaller ones infinite).
PROFILE_DELTAS = (1e-10, 1e-6, 1e-3)
#: The default delta grid of :func:`epsilon_curve`: 1e-10 to 1e-1, four points a decade.
EPSILON_CURVE_DELTAS = np.geomspace(1e-10, 1e-1, 37)
#: The default alpha grid of :func:`tradeoff`: 201 even steps, and 25 more points in [1e-6, 1e-2] where the
#: curve falls steeply from 1.
TRADEOFF_ALPHAS = np.unique(np.concatenate((np.linspace(0.0, 1.0, 201), np.geomspace(1e-6, 1e-2, 25))))
#: The shaded band of the bounds, unless ``band=`` says otherwise.
BAND_STYLE = {"alpha": 0.25, "linewidth": 0.0}


def _pyplot():
    """matplotlib.pyplot, or an ImportError that says how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError("afa.views.plot needs matplotlib: pip install 'afa[plot]'") from error
    return plt


def _axes(ax):
    """``ax``, or the Axes of a new figure when it is None."""
    plt = _pyplot()
    if ax is None:
        return plt.subplots()[1]
    from matplotlib.axes import Axes

    if not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")
    return ax


def _check_accountant(accountant) -> Accountant:
    if not isinstance(accountant, Accountant):
        raise TypeError(f"accountant must be an afa.Accountant, got {type(accountant).__name__}")
    return accountant


def _grid(name: str, values, low: float | None = None, high: float | None = None, *, low_open: bool = False,
          high_open: bool = False) -> np.ndarray:
    """A non-empty 1-d float array of finite values in the given range, or an error naming ``name``."""
    array = check.real_array(name, values)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d sequence of numbers, got shape {array.shape}")
    too_low = low is not None and bool(np.any(array <= low if low_open else array < low))
    too_high = high is not None and bool(np.any(array >= high if high_open else array > high))
    if too_low or too_high:
        left, right = "(" if low_open else "[", ")" if high_open else "]"
        raise ValueError(f"{name} must lie in {left}{low}, {high}{right}, got values from {array.min()!r} "
                         f"to {array.max()!r}")
    return array


def _band(band) -> dict | None:
    """The keyword arguments of the bounds' fill_between (None: no band)."""
    if band is True:
        return dict(BAND_STYLE)
    if band is False or band is None:
        return None
    if isinstance(band, dict):
        return {**BAND_STYLE, **band}
    raise TypeError(f"band must be True, False or a dict of fill_between arguments, got {type(band).__name__}")


def _positive_or_nan(values) -> np.ndarray:
    """Values <= 0 (and infinities) as NaN: a log axis cannot show them, and the line breaks there."""
    values = np.array(values, dtype=float)
    values[~(np.isfinite(values) & (values > 0))] = np.nan
    return values


def _finite_or_nan(values) -> np.ndarray:
    values = np.array(values, dtype=float)
    values[~np.isfinite(values)] = np.nan
    return values


def _default_epsilons(accountant: Accountant, method: str) -> np.ndarray:
    """0 to the eps of the first delta of PROFILE_DELTAS with a finite positive eps (else 0 to 1)."""
    top = 1.0
    for delta in PROFILE_DELTAS:
        epsilon = float(accountant.epsilon(delta, method))
        if math.isfinite(epsilon) and epsilon > 0:
            top = epsilon
            break
    return np.linspace(0.0, top, PROFILE_POINTS)


def privacy_profile(accountant: Accountant, epsilons=None, *, method: str = "auto", ax=None,
                    label: str | None = None, band: bool | dict = True, **kwargs: Any):
    """Draw the privacy profile delta(eps) of a composition on a log delta axis.

    The line is the upper end of the bounds of :meth:`afa.Accountant.delta_result` (what
    :meth:`afa.Accountant.delta` reports); the bounds [lower, upper] are a shaded band (invisible where they
    coincide, e.g. closed forms).  A delta of 0 cannot be drawn on a log axis: the line stops there.

    Parameters
    ----------
    accountant : afa.Accountant
        The composition.
    epsilons : array_like, optional
        The eps values (a 1-d sequence of finite numbers).  By default 200 even steps from 0 to
        eps(1e-10) (eps(1e-6) or eps(1e-3) when the mass at infinity makes it infinite; 1 when all are).
    method : {"auto", "exact", "quadrature", "contour", "certified", "pld"}, default "auto"
        The engine (:meth:`afa.Accountant.delta_result`).
    ax : matplotlib.axes.Axes, optional
        Draw on it; by default on a new figure.
    label : str, optional
        The line's legend entry (default "δ(ε), upper bound (METHOD)").
    band : bool or dict, default True
        Shade the bounds; a dict gives ``fill_between`` arguments (e.g. ``{"color": "C1"}``).
    **kwargs
        Passed to ``Axes.plot`` for the line (``color=``, ``linewidth=``, ``linestyle=``, ...).

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on: its first new line holds (eps, upper delta), labelled axes and a legend.

    Raises
    ------
    TypeError
        ``accountant`` is not an :class:`afa.Accountant`, ``ax`` not an Axes, ``band`` not a bool or dict.
    ValueError
        ``epsilons`` empty, not 1-d or not finite, an unknown ``method``; the accountant's errors
        (:class:`afa.AccuracyError` when every engine refused).
    ImportError
        matplotlib is not installed.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import afa, afa.views.plot
    >>> accountant = afa.Accountant().compose(afa.Gaussian(10.0), 100)
    >>> ax = afa.views.plot.privacy_profile(accountant, [0.5, 1.0, 2.0], color="C3")
    >>> ax.get_lines()[0].get_ydata().round(6)
    array([0.238422, 0.126937, 0.020924])
    >>> ax.get_legend().get_texts()[0].get_text()
    'δ(ε), upper bound (exact)'
    """
    _check_accountant(accountant)
    check.choice("method", method, METHODS)
    fill = _band(band)
    ax = _axes(ax)
    epsilons = _default_epsilons(accountant, method) if epsilons is None else _grid("epsilons", epsilons)
    result = accountant.delta_result(epsilons, method)
    upper = _positive_or_nan(result.upper)
    ax.plot(epsilons, upper, label=f"δ(ε), upper bound ({result.method})" if label is None else label, **kwargs)
    if fill is not None and np.any(np.asarray(result.lower) != np.asarray(result.upper)):
        lower = np.where(np.asarray(result.lower) > 0, result.lower, np.nan)
        fill.setdefault("color", ax.get_lines()[-1].get_color())
        ax.fill_between(epsilons, lower, upper, label=fill.pop("label", "bounds"), **fill)
    ax.set_yscale("log")
    ax.set_xlabel("ε")
    ax.set_ylabel("δ(ε)")
    ax.legend()
    return ax


def epsilon_curve(accountant: Accountant, deltas=None, *, method: str = "auto", ax=None, label: str | None = None,
                  band: bool | dict = True, **kwargs: Any):
    """Draw eps(delta) of a composition against delta on a log delta axis.

    The line is the upper end of the bounds of :meth:`afa.Accountant.epsilon_result` (what
    :meth:`afa.Accountant.epsilon` reports), the bounds a shaded band.  An infinite eps (delta below the
    mass at infinity) is not drawn.

    Parameters
    ----------
    accountant : afa.Accountant
        The composition.
    deltas : array_like, optional
        The delta values, in (0, 1) (a 1-d sequence).  By default 1e-10 to 1e-1, four points a decade
        (each is one query).
    method : {"auto", "exact", "quadrature", "contour", "certified", "pld"}, default "auto"
        The engine (:meth:`afa.Accountant.epsilon_result`).
    ax : matplotlib.axes.Axes, optional
        Draw on it; by default on a new figure.
    label : str, optional
        The line's legend entry (default "ε(δ), upper bound (METHOD)").
    band : bool or dict, default True
        Shade the bounds; a dict gives ``fill_between`` arguments.
    **kwargs
        Passed to ``Axes.plot`` for the line.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on: its first new line holds (delta, upper eps).

    Raises
    ------
    TypeError
        ``accountant`` is not an :class:`afa.Accountant`, ``ax`` not an Axes, ``band`` not a bool or dict.
    ValueError
        ``deltas`` empty, not 1-d or outside (0, 1), an unknown ``method``; the accountant's errors.
    ImportError
        matplotlib is not installed.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import afa, afa.views.plot
    >>> accountant = afa.Accountant().compose(afa.Gaussian(10.0), 100)
    >>> ax = afa.views.plot.epsilon_curve(accountant, [1e-6, 1e-5])
    >>> ax.get_lines()[0].get_ydata().round(4), ax.get_xscale()
    (array([4.8866, 4.3772]), 'log')
    """
    _check_accountant(accountant)
    check.choice("method", method, METHODS)
    fill = _band(band)
    ax = _axes(ax)
    deltas = EPSILON_CURVE_DELTAS if deltas is None else _grid("deltas", deltas, 0.0, 1.0, low_open=True,
                                                                    high_open=True)
    result = accountant.epsilon_result(deltas, method)
    upper = _finite_or_nan(result.upper)
    ax.plot(deltas, upper, label=f"ε(δ), upper bound ({result.method})" if label is None else label, **kwargs)
    if fill is not None and np.any(np.asarray(result.lower) != np.asarray(result.upper)):
        fill.setdefault("color", ax.get_lines()[-1].get_color())
        ax.fill_between(deltas, _finite_or_nan(result.lower), upper, label=fill.pop("label", "bounds"), **fill)
    ax.set_xscale("log")
    ax.set_xlabel("δ")
    ax.set_ylabel("ε(δ)")
    ax.legend()
    return ax


def tradeoff(accountant: Accountant, alphas=None, *, method: str = "auto", ax=None, label: str | None = None,
             band: bool | dict = True, **kwargs: Any):
    """Draw the f-DP trade-off curve beta = f(alpha) of a composition, with the no-privacy line 1 - alpha.

    The line is :func:`afa.views.tradeoff.tradeoff_curve`, a lower bound on the trade-off function (the safe
    side); the band reaches up to it plus the curve's proved error (``with_error=True``), capped at
    1 - alpha, which no trade-off function exceeds.  The no-privacy line is dashed, the aspect equal.

    Parameters
    ----------
    accountant : afa.Accountant
        The composition.
    alphas : array_like, optional
        Type I errors in [0, 1] (a 1-d sequence).  By default 201 even steps and 25 points in [1e-6, 1e-2].
    method : {"auto", "exact", "quadrature", "contour", "certified", "pld"}, default "auto"
        The engine of :func:`afa.views.tradeoff.tradeoff_curve` ("auto": closed forms, else the discretized PLD).
    ax : matplotlib.axes.Axes, optional
        Draw on it; by default on a new figure.
    label : str, optional
        The curve's legend entry (default "trade-off curve β(α)").
    band : bool or dict, default True
        Shade [curve, curve + error]; a dict gives ``fill_between`` arguments.
    **kwargs
        Passed to ``Axes.plot`` for the curve.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on: its first new line holds (alpha, beta), the next the no-privacy line.

    Raises
    ------
    TypeError
        ``accountant`` is not an :class:`afa.Accountant`, ``ax`` not an Axes, ``band`` not a bool or dict.
    ValueError
        ``alphas`` empty, not 1-d or outside [0, 1], an unknown ``method``; the accountant's errors.
    ImportError
        matplotlib is not installed.

    Examples
    --------
    Four Gaussian mechanisms with sigma = 1 are 2-GDP: f(alpha) = Phi(Phi^-1(1 - alpha) - 2).

    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import afa, afa.views.plot
    >>> ax = afa.views.plot.tradeoff(afa.Accountant().compose(afa.Gaussian(1.0), 4), [0.01, 0.1, 0.5])
    >>> ax.get_lines()[0].get_ydata().round(4), len(ax.get_lines())
    (array([0.6279, 0.2362, 0.0228]), 2)
    """
    _check_accountant(accountant)
    check.choice("method", method, METHODS)
    fill = _band(band)
    ax = _axes(ax)
    alphas = TRADEOFF_ALPHAS if alphas is None else _grid("alphas", alphas, 0.0, 1.0)
    curve, error = tradeoff_curve(accountant, alphas, method, with_error=True)
    ax.plot(alphas, curve, label="trade-off curve β(α)" if label is None else label, **kwargs)
    if fill is not None and np.any(error > 0):
        fill.setdefault("color", ax.get_lines()[-1].get_color())
        ax.fill_between(alphas, curve, np.minimum(curve + error, 1.0 - alphas), label=fill.pop("label", "error"),
                        **fill)
    ax.plot([0.0, 1.0], [1.0, 0.0], linestyle="--", color="gray", label="no privacy: β = 1 − α")
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_aspect("equal")
    ax.set_xlabel("α (type I error)")
    ax.set_ylabel("β (type II error)")
    ax.legend()
    return ax


def _curves(make_accountant) -> list[tuple[str | None, Callable[[int], Accountant]]]:
    """(label, steps -> accountant) pairs from one callable or a sequence of (label, callable)."""
    if callable(make_accountant):
        return [(None, make_accountant)]
    if isinstance(make_accountant, (str, bytes)) or not isinstance(make_accountant, Sequence) or not make_accountant:
        raise TypeError("make_accountant must be a callable steps -> afa.Accountant or a non-empty list of "
                        f"(label, callable) pairs, got {type(make_accountant).__name__}")
    curves = []
    for entry in make_accountant:
        if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str) and callable(entry[1])):
            raise TypeError(f"make_accountant's entries must be (label, callable) pairs, got {entry!r}")
        curves.append(entry)
    return curves


def epsilon_vs_steps(make_accountant, steps, delta: float, *, methods: Sequence[str] = ("auto",),
                     labels: Sequence[str] | None = None, ax=None, xscale: str | None = None, **kwargs: Any):
    """Draw eps(delta) against the number of steps: one line per accountant and method.

    Each point is ``make_accountant(k).epsilon(delta, method)``, the upper bound that
    :meth:`afa.Accountant.epsilon` reports, for k in ``steps``.  An infinite eps is not drawn.

    Parameters
    ----------
    make_accountant : callable or sequence of (str, callable)
        A function of the number of steps (an int) returning the :class:`afa.Accountant` of that many
        steps, or several as (label, function) pairs, e.g. DP-SGD at two noise levels.
    steps : sequence of int
        The numbers of steps (positive integers, a 1-d sequence).
    delta : float
        In (0, 1).
    methods : sequence of str, default ("auto",)
        The engines: each accountant gets one line per method.
    labels : sequence of str, optional
        One legend entry per line (accountants in order, each with its methods in order).  By default the
        pair's label, followed by the method in parentheses when there are several methods; with one
        function and no labels, "ε(δ) (METHOD)".
    ax : matplotlib.axes.Axes, optional
        Draw on it; by default on a new figure.
    xscale : {"linear", "log"}, optional
        The steps axis; by default "log" when the largest step is 100 or more times the smallest.
    **kwargs
        Passed to ``Axes.plot`` for every line (give colours through separate calls with ``ax=``).

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on: one new line per (accountant, method), with (steps, upper eps).

    Raises
    ------
    TypeError
        ``make_accountant`` neither a callable nor (label, callable) pairs, a function returning something
        other than an :class:`afa.Accountant`, ``steps`` not integers, ``ax`` not an Axes.
    ValueError
        ``steps`` empty or below 1, ``delta`` outside (0, 1), an unknown method in ``methods``, ``labels``
        of the wrong length, an unknown ``xscale``; the accountant's errors.
    ImportError
        matplotlib is not installed.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import afa, afa.views.plot
    >>> gaussian = lambda sigma: lambda k: afa.Accountant().compose(afa.Gaussian(sigma), k)
    >>> ax = afa.views.plot.epsilon_vs_steps([("σ = 10", gaussian(10.0)), ("σ = 20", gaussian(20.0))], [10, 100], 1e-5)
    >>> [line.get_label() for line in ax.get_lines()], ax.get_lines()[0].get_ydata().round(4)
    (['σ = 10', 'σ = 20'], array([1.1994, 4.3772]))
    """
    curves = _curves(make_accountant)
    steps_array = check.real_array("steps", steps)
    if steps_array.ndim != 1 or steps_array.size == 0:
        raise ValueError(f"steps must be a non-empty 1-d sequence of positive integers, got shape {steps_array.shape}")
    counts = [check.positive_integer("steps", value) for value in np.asarray(steps).tolist()]
    delta = check.in_interval("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    if isinstance(methods, str) or not isinstance(methods, Sequence) or not methods:
        raise TypeError(f"methods must be a non-empty sequence of method names, got {methods!r}")
    for method in methods:
        check.choice("methods", method, METHODS)
    lines = [(name, make, method) for name, make in curves for method in methods]
    if labels is not None:
        if isinstance(labels, str) or len(labels) != len(lines):
            raise ValueError(f"labels must give one label per line ({len(lines)}: accountants x methods), "
                             f"got {labels!r}")
        names = [str(label) for label in labels]
    else:
        names = [(f"ε(δ) ({method})" if name is None else name if len(methods) == 1 else f"{name} ({method})")
                 for name, _, method in lines]
    if xscale is None:
        xscale = "log" if max(counts) >= 100 * min(counts) else "linear"
    check.choice("xscale", xscale, ("linear", "log"))
    ax = _axes(ax)
    for name, (_, make, method) in zip(names, lines):
        values = []
        for count in counts:
            accountant = make(count)
            if not isinstance(accountant, Accountant):
                raise TypeError(f"make_accountant({count}) must return an afa.Accountant, "
                                f"got {type(accountant).__name__}")
            values.append(float(accountant.epsilon(delta, method)))
        ax.plot(counts, _finite_or_nan(values), label=name, **{"marker": "o" if len(counts) <= 30 else None,
                                                                  **kwargs})
    ax.set_xscale(xscale)
    ax.set_xlabel("steps")
    ax.set_ylabel(f"ε (δ = {delta:g})")
    ax.legend()
    return ax
