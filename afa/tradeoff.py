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

from collections.abc import Callable

import numpy as np

from . import _validation as check
from .accountant import Accountant

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


def tradeoff_curve(accountant: Accountant, alphas, method: str = "auto", direction: str | None = None) -> np.ndarray:
    """beta = f(alpha): the trade-off function of the accountant's composition (Zhu, Dong & Wang 2022, Lemma 21).

    Parameters
    ----------
    accountant : afa.Accountant
        The composition.
    alphas : array_like
        Type I errors in [0, 1] (any shape).
    method : str, default "auto"
        The accountant engine that computes the privacy profile.
    direction : str, optional
        By default (None) the symmetric curve, from delta(eps) = max of both directions (a lower bound
        on both T[P, Q] and T[Q, P]).  The first of ``accountant.directions`` gives T[P, Q] of the
        composed pair (P, Q), the second T[Q, P] (Lemma 21 with H(P||Q) and H(Q||P) in their places).

    Returns
    -------
    numpy.ndarray
        The type II errors beta >= 0, of the shape of ``alphas``.

    Notes
    -----
    The profile (engine ``method``) locates each supremum; the value is then taken with the engine's
    *upper* bounds on delta at that eps, so the curve lies below the true trade-off function up to the
    engine's error estimate (certified with ``method="pld"`` or ``"certified"``).  Costs about 60
    profile evaluations of len(alphas) points each, plus one delta query per alpha: the per-eps cost of
    the engine matters ("exact" and "quadrature" are cheap per point, "contour" is not).

    Examples
    --------
    Four Gaussian mechanisms with sigma = 1 are 2-GDP: f(alpha) = Phi(Phi^-1(1 - alpha) - 2).

    >>> import afa.tradeoff
    >>> accountant = afa.Accountant().compose(afa.Gaussian(1.0), 4)
    >>> afa.tradeoff.tradeoff_curve(accountant, [0.01, 0.1, 0.5]).round(4).tolist()
    [0.6279, 0.2362, 0.0228]
    """
    if not isinstance(accountant, Accountant):
        raise TypeError(f"accountant must be an afa.Accountant, got {type(accountant).__name__}")
    alphas = _unit_interval("alphas", alphas)
    flat = alphas.ravel()
    if direction is None:
        forward_name = reverse_name = None
    else:
        forward_name = check.choice("direction", direction, accountant.directions)
        reverse_name = accountant.directions[1 - accountant.directions.index(forward_name)]

    def profile_of(name):
        return lambda epsilons: accountant.privacy_profile(epsilons, method, name, estimate=True)

    forward = profile_of(forward_name)
    reverse = forward if direction is None else profile_of(reverse_name)
    epsilons = _maximisers(forward, reverse, flat, max(accountant.inf_mass.values()))

    def upper(name):
        return np.array([accountant.delta_result(float(e), method, name).upper for e in np.abs(epsilons)])

    forward_upper = upper(forward_name)
    reverse_upper = forward_upper if direction is None else upper(reverse_name)
    return np.maximum(_objective(epsilons, flat, forward_upper, reverse_upper), 0.0).reshape(alphas.shape)


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

    >>> import afa.tradeoff
    >>> profile = afa.Accountant().compose(afa.RandomizedResponse(0.75)).privacy_profile
    >>> afa.tradeoff.tradeoff_from_profile(profile, [0.0, 0.25, 0.5]).round(4).tolist()
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
    >>> import afa.tradeoff
    >>> def f(alpha):
    ...     return np.maximum.reduce([np.zeros_like(alpha), 1 - 3 * alpha, (1 - alpha) / 3])
    >>> afa.tradeoff.privacy_profile_from_tradeoff(f, [0.0, 0.5, math.log(3)]).round(6).tolist()
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
