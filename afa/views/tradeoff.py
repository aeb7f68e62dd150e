"""f-DP trade-off curves of a composition, and the privacy profile of a trade-off curve.

A trade-off function f = T[P, Q] maps the type I error alpha of a test of P against Q
to the smallest type II error beta (Zhu, Dong & Wang 2022, App. B; Dong, Roth
& Su 2022).  It is the convex conjugate of the privacy profile (Lemmas 20, 21): every
test with rejection region S has alpha = P(S), 1 - beta = Q(S), and
Q(S) - gamma P(S) <= H_gamma(Q||P), so

    T[P, Q](alpha) = sup_{eps in R} max{0, 1 - H_{e^eps}(Q||P) - e^eps alpha}
                   = sup_{eps >= 0} max{0, 1 - H_{e^eps}(Q||P) - e^eps alpha,
                                        e^-eps (1 - H_{e^eps}(P||Q) - alpha)},

the second line from H_gamma(Q||P) = 1 - gamma + gamma H_{1/gamma}(P||Q) (Lemma 46).
Lemma 21 as printed has H(P||Q) in both terms: that is the symmetric case.  With a
mechanism's profile delta(eps) = max of its two directions (what :class:`afa.Accountant`
returns) in both terms, the result is the mechanism's symmetric trade-off function, the
convex hull of min(T[P, Q], T[Q, P]) (Dong et al. Prop. 2.12), valid for both orders of
every pair of neighbouring datasets.

Since H_gamma is convex in gamma, the bracket is concave in gamma = e^eps: the supremum
is found per alpha by golden-section search (after a coarse grid), to about 1e-12.
Every eps gives a valid lower bound on f, so a curve built from *upper* bounds on delta
lies below the true trade-off function (the safe direction).  Conversely (Lemma 20),

    H_{e^eps}(Q||P) = 1 + f^*(-e^eps) = sup_{x in [0, 1]} (1 - f(x) - e^eps x),

concave in x; :func:`privacy_profile_from_tradeoff` maximises it the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from .. import _validation as check
from ..accountant import Accountant
from ..options import METHODS
from ..results import AccuracyError, UnsupportedCompositionError

__all__ = ["privacy_profile_from_tradeoff", "tradeoff_curve", "tradeoff_from_profile"]

Profile = Callable[[np.ndarray], np.ndarray]

#: Coarse grid of |eps| (0 and 1e-6 .. 1e4, ratio 1.33) bracketing each alpha's maximiser.
_EPSILON_GRID = np.concatenate(([0.0], np.geomspace(1e-6, 1e4, 81)))
#: Coarse grid of the type I error x (both ends resolved geometrically) for Lemma 20.
_X_GRID = np.unique(np.concatenate(([0.0, 1.0], np.geomspace(1e-18, 0.5, 121), 1 - np.geomspace(1e-18, 0.5, 121))))
#: A profile within this of its limit counts as flat: the eps grid ends there.
_FLAT = 1e-15
#: Golden-section steps after the grid: they shrink a grid bracket by 0.618^60 = 3e-13 (a maximiser at
#: a kink of the profile -- finite losses -- converges only linearly).
_GOLDEN_STEPS = 60
_INVERSE_GOLDEN = (np.sqrt(5.0) - 1) / 2
#: Default grid points of eps >= 0 of :func:`tradeoff_curve`.
DEFAULT_POINTS = 2001
#: A profile's upper bound within this of its limit ends the grid of :func:`tradeoff_curve` (beyond it
#: a line could raise the curve by no more than that; the error bound accounts for it).
_GRID_FLAT = 1e-13
#: Alphas per block of :func:`_envelope`.
_BLOCK = 64
#: Rounds of bisection of the grid intervals behind the largest errors, and the error below which none is split.
_REFINE_ROUNDS, _REFINE_BELOW = 20, 1e-7
#: The largest eps of the grid of :func:`tradeoff_curve` (e^eps stays finite).
_LARGEST_EPSILON = 700.0
#: Allowance for the rounding of 1 - gamma + gamma delta (a few units in the last place of numbers <= 2).
_ROUNDING = 1e-15


def tradeoff_curve(accountant: Accountant, alphas, method: str = "auto", direction: str | None = None, *,
                   points: int = DEFAULT_POINTS, with_error: bool = False):
    """beta = f(alpha): a lower bound on the trade-off function of the accountant's composition, and its error.

    The privacy profile is evaluated once, on a grid of eps, and the curve is the upper envelope of the
    lines 1 - delta(eps) - e^eps alpha it gives (Dong, Roth & Su 2022, Prop. 2.12; Zhu, Dong & Wang 2022,
    Lemma 21): every line lies below the true trade-off function when delta is an upper bound, so the
    curve is pessimistic (the safe side).

    Parameters
    ----------
    accountant : afa.Accountant
        The composition.
    alphas : array_like
        Type I errors in [0, 1] (any shape).
    method : str, default "auto"
        The engine that evaluates the privacy profile on the grid.  "auto": "exact" where it applies (closed
        forms, finite compositions), else the discretized PLD ("pld", one build, certified), else the
        accountant's "auto".  Any accountant method may be named ("contour" and "quadrature" cost a root
        search per grid point: slow).
    direction : str, optional
        By default (None) the symmetric curve, from delta(eps) = max of both directions (a lower bound
        on both T[P, Q] and T[Q, P]).  The first of ``accountant.directions`` gives T[P, Q] of the
        composed pair (P, Q), the second T[Q, P] (Lemma 21 with H(P||Q) and H(Q||P) in their places).
    points : int, default 2001
        Grid points of eps >= 0 (at least 16) before the refinement (Notes).
    with_error : bool, default False
        Also return the error.

    Returns
    -------
    curve : numpy.ndarray
        The type II errors beta, of the shape of ``alphas``: at most the true trade-off function (up to
        the engine's bounds, see Notes).
    error : numpy.ndarray
        Only with ``with_error=True``, of the same shape: the true trade-off function lies in
        [curve, curve + error].

    Raises
    ------
    TypeError
        ``accountant`` is not an :class:`afa.Accountant`, or ``points`` not an integer.
    ValueError
        ``alphas`` outside [0, 1], an unknown ``method`` or ``direction``, or ``points`` < 16.

    Notes
    -----
    Write H(gamma) = H_gamma(Q||P), convex and non-increasing in gamma > 0, for gamma = e^eps >= 1 the
    profile and for gamma < 1 (Lemma 46) 1 - gamma + gamma delta(-log gamma).  The curve is
    max_j (1 - U_j - gamma_j alpha) over the grid, with U_j the engine's upper bound on H(gamma_j).  The
    error is a bound, not an estimate: between grid points the convexity of H puts it above the secants
    of the neighbouring intervals (computed from the engine's lower and upper bounds), and beyond the grid
    above its mass at infinity (gamma large) and 1 - gamma (gamma small); the supremum of
    1 - H(gamma) - gamma alpha over those lower bounds is an upper bound on the true f(alpha), and
    ``error`` is its distance from the curve.  It holds as far as the engine's bounds do: proved for
    "pld", to rounding (about 1e-13) for "exact", estimated for "contour" and "quadrature".  It contains
    the discretization of the grid and the engine's own bracket (about 1e-6 to 1e-4 for DP-SGD with "pld").
    The grid intervals behind the largest errors are bisected (up to 20 rounds, while the largest error
    exceeds 1e-7 and falls by a tenth or more per round): kinks of the profile (finite-output mechanisms)
    and a coarse grid are resolved, an engine's bracket is not.
    :func:`tradeoff_from_profile` maximises each alpha's bracket by golden-section search instead (to
    about 1e-12, with about 60 profile evaluations).

    Examples
    --------
    Four Gaussian mechanisms with sigma = 1 are 2-GDP: f(alpha) = Phi(Phi^-1(1 - alpha) - 2).

    >>> import afa.views.tradeoff
    >>> accountant = afa.Accountant().compose(afa.Gaussian(1.0), 4)
    >>> curve, error = afa.views.tradeoff.tradeoff_curve(accountant, [0.01, 0.1, 0.5], with_error=True)
    >>> curve.round(4).tolist(), bool(error.max() < 1e-5)
    ([0.6279, 0.2362, 0.0228], True)
    """
    if not isinstance(accountant, Accountant):
        raise TypeError(f"accountant must be an afa.Accountant, got {type(accountant).__name__}")
    alphas = _unit_interval("alphas", alphas)
    points = check.positive_integer("points", points, minimum=16, maximum=10 ** 7)
    check.choice("method", method, METHODS)
    if direction is None:
        names: tuple[str | None, str | None] = (None, None)
    else:
        forward = check.choice("direction", direction, accountant.directions)
        names = (forward, accountant.directions[1 - accountant.directions.index(forward)])
    profile = _GridProfile(accountant, method, names)
    forward_floor, reverse_floor = (float(max(accountant.inf_mass.values())) if name is None
                                    else float(accountant.inf_mass[name]) for name in names)
    floors = (forward_floor, reverse_floor)
    flat = alphas.ravel()
    epsilons = profile.grid(points, floors)
    bounds = profile.bounds(epsilons)
    curve, upper, intervals = _curves(epsilons, bounds, floors, flat)
    # Bisect the grid intervals behind the largest errors (a kink of the profile: finite-output mechanisms)
    # while that lowers the largest error by a tenth or more.
    for _ in range(_REFINE_ROUNDS):
        errors = upper - curve
        worst = float(np.max(errors, initial=0.0))
        split = np.unique(intervals[(errors > _REFINE_BELOW) & (errors > worst / 4) & (intervals >= 0)])
        if split.size == 0:
            break
        middles = (epsilons[split] + epsilons[split + 1]) / 2
        new = profile.bounds(middles)
        order = np.argsort(np.concatenate((epsilons, middles)), kind="stable")
        epsilons = np.concatenate((epsilons, middles))[order]
        bounds = tuple((np.concatenate((old[0], added[0]))[order], np.concatenate((old[1], added[1]))[order])
                       for old, added in zip(bounds, new))
        refined = _curves(epsilons, bounds, floors, flat)
        better = float(np.max(refined[1] - refined[0], initial=0.0)) <= 0.9 * worst
        curve, upper, intervals = (np.maximum(curve, refined[0]), np.minimum(upper, refined[1]), refined[2])
        if not better:
            break
    curve = curve.reshape(alphas.shape)
    if with_error:
        return curve, (upper.reshape(alphas.shape) - curve)
    return curve


def _curves(epsilons: np.ndarray, bounds, floors: tuple[float, float], alphas: np.ndarray):
    """(curve, upper bound on the true curve, the grid interval behind each alpha's upper bound (-1: beyond the
    grid)) from the profiles' (lower, upper) bounds at ``epsilons`` (sorted, from 0)."""
    (low_forward, up_forward), (low_reverse, up_reverse) = bounds
    # H on gamma = e^eps >= 1 is the reverse profile; below 1 it is 1 - gamma + gamma (forward profile)
    gammas_right = np.exp(epsilons)
    gammas_left = np.exp(-epsilons)
    left = (1 - gammas_left + gammas_left * low_forward - _ROUNDING,
            1 - gammas_left + gammas_left * up_forward + _ROUNDING)
    curve = _envelope(np.concatenate((-gammas_right, -gammas_left[1:])),
                      np.concatenate((1 - up_reverse, 1 - left[1][1:])), alphas)[0]
    right_lines = _secant_lines(gammas_right, low_reverse, up_reverse)
    left_lines = _secant_lines(gammas_left[::-1], left[0][::-1], left[1][::-1])
    # beyond the grid: H >= the mass at infinity (gamma > e^eps_max), H >= 1 - gamma (1 - mass) (gamma < e^-eps_max)
    top, bottom = gammas_right[-1], gammas_left[-1]
    upper, line = _envelope(np.concatenate((right_lines[0], left_lines[0], [-top, -bottom])),
                            np.concatenate((right_lines[1], left_lines[1], [1 - floors[1], bottom * (1 - floors[0])])),
                            alphas)
    upper = np.minimum(np.maximum(upper, curve), 1 - alphas)
    # line k < 3 n: right interval k mod n; 3 n <= k < 6 n: left interval (k - 3 n) mod n, counted from eps_max
    n = epsilons.size - 1
    intervals = np.where(line < 3 * n, line % n, n - 1 - (line - 3 * n) % n)
    return curve, upper, np.where(line < 6 * n, intervals, -1)


def tradeoff_from_profile(delta: Profile, alphas, *, delta_reverse: Profile | None = None,
                          floor: float = 0.0) -> np.ndarray:
    """T[P, Q](alpha) from delta(eps) = H_{e^eps}(P||Q) and delta_reverse(eps) = H_{e^eps}(Q||P).

    Parameters
    ----------
    delta : callable
        A vectorised function of eps >= 0 (an array in, an array of the same shape out).
    alphas : array_like
        Type I errors in [0, 1] (any shape).
    delta_reverse : callable, optional
        The same for H_{e^eps}(Q||P); defaults to ``delta`` (a symmetric profile, e.g. a mechanism's).
    floor : float, default 0.0
        The profiles' limit as eps -> infinity (the mass at +infinity; the search stops where both are
        within 1e-15 of it), in [0, 1].

    Returns
    -------
    numpy.ndarray
        The type II errors beta >= 0, of the shape of ``alphas``.  Upper bounds on the profiles give a
        curve below the true one (module docstring).

    Examples
    --------
    Randomized response with p = 3/4 has f(alpha) = max(0, 1 - 3 alpha, (1 - alpha) / 3):

    >>> import afa.views.tradeoff
    >>> profile = afa.Accountant().compose(afa.RandomizedResponse(0.75)).privacy_profile
    >>> afa.views.tradeoff.tradeoff_from_profile(profile, [0.0, 0.25, 0.5]).round(4).tolist()
    [1.0, 0.25, 0.1667]
    """
    alphas = _unit_interval("alphas", alphas)
    flat = alphas.ravel()
    delta_reverse = delta if delta_reverse is None else delta_reverse
    epsilons = _maximisers(delta, delta_reverse, flat, check.in_interval("floor", floor, 0.0, 1.0))
    values = _objective(epsilons, flat, *_profiles(delta, delta_reverse, np.abs(epsilons)))
    return np.maximum(values, 0.0).reshape(alphas.shape)


def privacy_profile_from_tradeoff(tradeoff: Callable[[np.ndarray], np.ndarray], epsilons) -> np.ndarray:
    """delta(eps) = sup_x (1 - f(x) - e^eps x) of a trade-off function f (Zhu, Dong & Wang 2022, Lemma 20).

    Parameters
    ----------
    tradeoff : callable
        A vectorised convex f on [0, 1] (e.g. ``lambda a: tradeoff_curve(acc, a)`` or an interpolation
        of samples).
    epsilons : array_like
        Real, finite values of eps (any shape).

    Returns
    -------
    numpy.ndarray
        delta(eps) in [0, 1], of the shape of ``epsilons``; for f = T[P, Q] it is H_{e^eps}(Q||P).

    Notes
    -----
    Every x gives a lower bound on f's delta, so the answer is a lower estimate accurate to about
    1e-12 absolute.  An f below the true trade-off function gives, up to that error, an
    upper bound on the true delta.

    Examples
    --------
    The trade-off function of randomized response with p = 3/4 gives back its profile:

    >>> import math
    >>> import numpy as np
    >>> import afa.views.tradeoff
    >>> def f(alpha):
    ...     return np.maximum.reduce([np.zeros_like(alpha), 1 - 3 * alpha, (1 - alpha) / 3])
    >>> afa.views.tradeoff.privacy_profile_from_tradeoff(f, [0.0, 0.5, math.log(3)]).round(6).tolist()
    [0.5, 0.33782, 0.0]
    """
    epsilons = check.real_array("epsilons", epsilons)
    flat = epsilons.ravel()

    def objective(x: np.ndarray) -> np.ndarray:
        betas = np.asarray(tradeoff(x.ravel()), dtype=float).reshape(x.shape)
        return 1.0 - betas - _times_exp(x, flat[:, None])

    return np.clip(_maximise(objective, _X_GRID, flat.size)[1], 0.0, 1.0).reshape(epsilons.shape)


def _maximisers(delta: Profile, delta_reverse: Profile, alphas: np.ndarray, floor: float) -> np.ndarray:
    """The eps (signed) maximising each alpha's bracket, on a grid of +-eps then refined.

    The grid is _EPSILON_GRID up to the first of every tenth point where both profiles are
    within _FLAT of ``floor``: a maximiser beyond it could raise the bracket by no more than that.
    """
    top = _EPSILON_GRID.size - 1
    for index in range(10, _EPSILON_GRID.size, 10):
        if max(np.max(values) for values in _profiles(delta, delta_reverse, _EPSILON_GRID[index:index + 1])) \
                <= floor + _FLAT:
            top = index
            break
    positive = _EPSILON_GRID[:top + 1]
    grid = np.concatenate((-positive[:0:-1], positive))

    def objective(epsilons: np.ndarray) -> np.ndarray:
        points, inverse = np.unique(np.abs(epsilons), return_inverse=True)
        forward, reverse = (values[inverse].reshape(epsilons.shape)
                            for values in _profiles(delta, delta_reverse, points))
        return _objective(epsilons, alphas[:, None], forward, reverse)

    return _maximise(objective, grid, alphas.size)[0]


def _profiles(delta: Profile, delta_reverse: Profile, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    forward = np.asarray(delta(points), dtype=float)
    return forward, (forward if delta_reverse is delta else np.asarray(delta_reverse(points), dtype=float))


def _objective(epsilons, alphas, forward, reverse) -> np.ndarray:
    """The bracket of Lemma 21 at signed eps: 1 - H(Q||P) - e^eps alpha for eps >= 0,
    e^eps (1 - H_{e^-eps}(P||Q) - alpha) for eps < 0 (``forward``/``reverse`` taken at |eps|)."""
    positive = 1.0 - reverse - _times_exp(alphas, epsilons)
    negative = np.exp(np.minimum(epsilons, 0.0)) * (1.0 - forward - alphas)
    return np.where(epsilons >= 0, positive, negative)


def _times_exp(x, epsilons) -> np.ndarray:
    """x e^eps for x >= 0, with 0 e^eps = 0 even where e^eps overflows."""
    with np.errstate(over="ignore", divide="ignore"):
        return np.exp(epsilons + np.log(x))


def _maximise(objective: Callable[[np.ndarray], np.ndarray], grid: np.ndarray, rows: int):
    """(argmax, max) per row of a function unimodal along the sorted ``grid``'s segment.

    ``objective`` maps points of shape (rows, k) to values of the same shape.  The best
    grid point's neighbours bracket the maximiser; golden-section steps refine it.  The
    result is the best point actually evaluated, so it never exceeds the supremum.
    """
    values = objective(np.broadcast_to(grid, (rows, grid.size)))
    index = np.argmax(values, axis=1)
    best = [grid[index].astype(float), values[np.arange(rows), index]]

    def keep_best(x: np.ndarray, f: np.ndarray) -> None:
        better = f > best[1]
        best[0], best[1] = np.where(better, x, best[0]), np.where(better, f, best[1])

    low, high = grid[np.maximum(index - 1, 0)], grid[np.minimum(index + 1, grid.size - 1)]
    left, right = high - _INVERSE_GOLDEN * (high - low), low + _INVERSE_GOLDEN * (high - low)
    f_left, f_right = objective(np.stack([left, right], axis=1)).T
    keep_best(left, f_left)
    keep_best(right, f_right)
    for _ in range(_GOLDEN_STEPS):
        in_left = f_left >= f_right  # the maximiser lies in [low, right], else in [left, high]
        high, low = np.where(in_left, right, high), np.where(in_left, low, left)
        new = np.where(in_left, high - _INVERSE_GOLDEN * (high - low), low + _INVERSE_GOLDEN * (high - low))
        f_new = objective(new[:, None])[:, 0]
        keep_best(new, f_new)
        left, f_left, right, f_right = (np.where(in_left, new, right), np.where(in_left, f_new, f_right),
                                        np.where(in_left, left, new), np.where(in_left, f_left, f_new))
    return best[0], best[1]


def _unit_interval(name: str, values) -> np.ndarray:
    array = check.real_array(name, values)
    if np.any(array < 0) or np.any(array > 1):
        raise ValueError(f"{name} must lie in [0, 1], got {values!r}")
    return array


class _GridProfile:
    """The bounds of one accountant's privacy profile in each direction on a grid of eps, from one engine."""

    def __init__(self, accountant: Accountant, method: str, names: tuple[str | None, str | None]):
        self.accountant, self.method, self.names = accountant, method, names
        self.chosen: str | None = None if method == "auto" else method
        self._copies: dict[str, Accountant] = {}  # built once: their engines serve every later grid

    def _engine_accountant(self, method: str) -> Accountant:
        """The accountant that answers ``method``: for "pld" a copy whose delta queries use the first build
        only (PLDOptions.delta_rounds = 0: an absolute error, and no rebuild for the tiny deltas of large eps)."""
        source = self.accountant
        if method != "pld":
            return source
        if method not in self._copies:
            options = dataclasses.replace(source.options, pld=dataclasses.replace(source.options.pld, delta_rounds=0))
            copy = Accountant(source.neighboring, source.value_discretization_interval, source.budget, options)
            for mechanism, count in source.mechanisms.items():
                copy.compose(mechanism, count)
            self._copies[method] = copy
        return self._copies[method]

    def bounds(self, epsilons: np.ndarray) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        """((lower, upper) of the forward profile, (lower, upper) of the reverse one) at ``epsilons``."""
        candidates = [self.chosen] if self.chosen is not None else ["exact", "pld", "auto"]
        for index, method in enumerate(candidates):
            try:
                answers = []
                source = self._engine_accountant(method)
                for name in self.names[:1] if self.names[0] is None else self.names:
                    result = source.delta_result(epsilons, method, name)
                    answers.append((np.asarray(result.lower), np.asarray(result.upper)))
            except (AccuracyError, UnsupportedCompositionError):
                if index == len(candidates) - 1:
                    raise
                continue
            self.chosen = method
            return answers[0], answers[-1]
        raise AssertionError("unreachable")  # the last candidate returns or raises

    def grid(self, points: int, floors: tuple[float, float]) -> np.ndarray:
        """``points`` equally spaced eps from 0 to the first eps of _EPSILON_GRID (up to _LARGEST_EPSILON) where
        both profiles' upper bounds are within _GRID_FLAT of their limits, or of their smallest value on that
        grid plus its excess over the limit (an engine's upper bound may stay above the limit by its slack)."""
        coarse = _EPSILON_GRID[_EPSILON_GRID <= _LARGEST_EPSILON]
        flat = np.ones(coarse.size, dtype=bool)
        for (_, upper), floor in zip(self.bounds(coarse), floors):
            lowest = float(np.min(upper))
            flat &= upper <= max(floor + _GRID_FLAT, lowest + (lowest - floor))
        top = coarse[np.flatnonzero(flat)[0]]
        return np.linspace(0.0, top if top > 0 else coarse[1], points)


def _secant_lines(gammas: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lines (slope, intercept) in alpha whose upper envelope bounds sup_gamma 1 - H(gamma) - gamma alpha over
    [gammas[0], gammas[-1]], for H convex and non-increasing with lower <= H(gammas) <= upper.

    On [g_j, g_j+1] a convex H lies above the extension of the secant of the interval to its left, so above
    the line A through (g_j, lower_j) with slope (lower_j - upper_j-1) / (g_j - g_j-1) (at most the
    secant's), and above the extension of the secant of the interval to its right, so above the line B
    through (g_j+1, lower_j+1) with slope min(0, (upper_j+2 - lower_j+1) / (g_j+2 - g_j+1)) (at least the
    secant's; 0 where that is positive, as H is non-increasing).  1 - max(A, B, 0) - gamma alpha is concave
    and piecewise linear in gamma, so its supremum over the interval is at an end or where A = B: each of
    those gammas gives one line.
    """
    g0, g1 = gammas[:-1], gammas[1:]
    widths = np.diff(gammas)
    n = widths.size
    slope_a = np.full(n, -np.inf)  # A through (g0, lower_j): none on the first interval
    slope_a[1:] = (lower[1:-1] - upper[:-2]) / widths[:-1]
    slope_b = np.full(n, -np.inf)  # B through (g1, lower_j+1): none on the last interval
    slope_b[:-1] = np.minimum((upper[2:] - lower[1:-1]) / widths[1:], 0.0)
    lower0, lower1 = lower[:-1], lower[1:]

    def bound(at: np.ndarray) -> np.ndarray:
        """max(A, B) at ``at`` (-inf where neither exists)."""
        with np.errstate(invalid="ignore"):
            a = np.where(np.isfinite(slope_a), lower0 + slope_a * (at - g0), -np.inf)
            b = np.where(np.isfinite(slope_b), lower1 + slope_b * (at - g1), -np.inf)
        return np.maximum(np.maximum(a, b), 0.0)  # H >= 0 as well

    both = np.isfinite(slope_a) & np.isfinite(slope_b) & (slope_a != slope_b)
    with np.errstate(invalid="ignore", divide="ignore"):
        cross = np.where(both, (lower1 - lower0 + slope_a * g0 - slope_b * g1) / (slope_a - slope_b), g0)
    cross = np.clip(np.nan_to_num(cross, nan=0.0), g0, g1)
    candidates = np.concatenate((g0, g1, cross))
    heights = np.concatenate((bound(g0), bound(g1), bound(cross)))
    return -candidates, 1 - heights


def _envelope(slopes: np.ndarray, intercepts: np.ndarray, alphas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(max(0, max_k intercepts_k + slopes_k alpha), the index k of the highest line) at each alpha in [0, 1],
    in blocks of _BLOCK alphas (memory: a block times the lines)."""
    values, line = np.zeros(alphas.shape), np.zeros(alphas.shape, dtype=int)
    for start in range(0, alphas.size, _BLOCK):
        block = alphas[start:start + _BLOCK, None]
        with np.errstate(over="ignore", invalid="ignore"):  # 0 * slope = 0 also where e^eps overflowed
            heights = np.where(np.isfinite(intercepts), intercepts + np.where(block > 0, slopes * block, 0.0),
                               -np.inf)
        best = np.argmax(heights, axis=1)
        line[start:start + _BLOCK] = best
        values[start:start + _BLOCK] = np.maximum(heights[np.arange(best.size), best], 0.0)
    return values, line
