"""The engines behind the accountant: each answers for one direction of a composition.

Every engine follows one contract (:class:`Engine`): delta(eps) with an absolute error for each
value, eps(delta) as (estimate, lower, upper), and a flag saying whether its bounds are certified.
The engines:

* :class:`ExactEngine` -- closed forms: composed Gaussians (Sommer, Meiser &
  Mohammadi 2019, Thm 5) convolved with the exact composition of every
  finite-output mechanism (Zhu, Dong & Wang 2022, Exp 2 uses this for RR x
  Gaussian); its error bounds the rounding of the atoms' positions and masses
  and of the evaluation (:mod:`afa.engines.discrete`), and eps(delta) is a verified bracket.
* :class:`ClosedFormEngine` -- one use of a mechanism with a continuous loss, from a
  closed form with its error bound; eps(delta) is a verified bracket.
* :class:`QuadratureEngine` -- the real-line Levy inversion of the composed
  CF (:mod:`afa.engines.quadrature`); its error is the quadrature's estimate.
* :class:`ContourEngine` -- the saddle-point contour inversion of the MGF
  (:mod:`afa.engines.contour`); its error is relative to delta.
* :class:`CertifiedEngine` -- Zhu, Dong & Wang 2022, Algorithm 2 for one subsampled mechanism.
* :class:`PLDEngine` -- the discretized PLD backend (:mod:`afa.engines.pld`): certified lower and
  upper bounds for every mechanism that has loss tails.
"""

from __future__ import annotations

import abc
import collections
import copy
import math
import numbers
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from scipy.special import log_ndtr, logsumexp

from .. import budget
from .. import options as settings
from .._accurate import UNIT_ROUNDOFF
from .._lazy import optimize
from ..limits import INTERVAL_RANGE
from ..mechanisms.loss_tails import GaussianTails, LossTails
from ..mechanisms.noise_pair import NoiseMixturePair
from ..numerics import exact
from ..numerics.atoms import CompositionTooLargeError, LossAtoms, verified_epsilon_bounds
from ..progress import progress
from ..results import AccuracyError, Result, UnsupportedCompositionError
from .certified import CertifiedBracket
from .composition import ComposedLoss
from .contour import contour_inversion
from .discrete import DiscreteComposition
from .pld import (
    DiscretePLD,
    chernoff_log_mass,
    composition_tilt,
    connect_the_dots,
    greedy_hull_optimistic,
)
from .quadrature import LevyInversion

#: Relative rounding error assumed for closed-form values.
EXACT_RTOL = 1e-13
#: epsilon(delta) needs delta to exceed the engine's absolute error by this factor.
RESOLUTION_FACTOR = 100.0
#: Most atoms ExactEngine mixes with a Gaussian profile (each evaluation costs about 0.5 us per atom).
MAX_MIXTURE_ATOMS = 100_000
#: Widest eps bracket (relative to max(1, eps)) ClosedFormEngine returns before refusing.
CLOSED_FORM_EPSILON_RTOL = 1e-8
#: Iterations of the eps(delta) Newton solver (bisection steps included).
MAX_NEWTON_EPSILON = 100
#: eps(delta) answers the contour, quadrature and closed-form engines keep (each serves one direction of one
#: composition, and their answers do not depend on the options active at query time).
KEPT_ANSWERS = 32


class Engine(abc.ABC):
    """What an engine offers the accountant for one direction of a composition.

    ``method`` names the method it serves (several engines may serve one); ``certified`` says whether
    its bounds are proved (True) or come from an error estimate checked at run time (False).  An engine
    that cannot serve a composition at all raises :class:`afa.UnsupportedCompositionError` when built;
    one that cannot answer a query to a known accuracy raises :class:`afa.AccuracyError`.  These are the
    declared refusals on which ``method="auto"`` moves on; anything else is a bug and propagates.

    Attributes
    ----------
    method : str
        The method the engine serves: "exact", "quadrature", "contour", "certified" or "pld".
    certified : bool
        Whether its bounds are proved (True) or come from an error estimate checked at run time (False).
    inf_mass : float
        Pr[loss = +infinity] of the direction: delta(eps) >= it at every eps.

    Notes
    -----
    The engines take checked input: :class:`afa.Accountant` validates every query before it reaches them,
    and builds one engine per distinct direction.

    Examples
    --------
    >>> import afa, numpy as np
    >>> from afa.engines.composition import ComposedLoss
    >>> from afa.engines.base import QuadratureEngine
    >>> remove, add = afa.Gaussian(sigma=10.0).privacy_losses()
    >>> engine = QuadratureEngine(ComposedLoss({remove: 100}))
    >>> engine.method, engine.certified
    ('quadrature', False)
    >>> values, errors = engine.delta(np.array([1.0]))
    >>> values.round(6), bool(errors[0] < 1e-12)
    (array([0.126937]), True)
    >>> [round(float(x), 6) for x in engine.epsilon_bracket(1e-5)]
    [4.377178, 4.377178, 4.377178]
    """

    method: ClassVar[str]
    certified: ClassVar[bool] = False
    #: Pr[loss = +infinity] of the direction: delta(eps) >= it at every eps.
    inf_mass: float = 0.0

    @abc.abstractmethod
    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, absolute errors) of delta at each eps in ``epsilons``.

        Parameters
        ----------
        epsilons : ndarray
            Finite real numbers.

        Returns
        -------
        values, errors : ndarray
            delta(eps) and its absolute error (a bound if :attr:`certified`, else an estimate), each of
            ``epsilons``' shape.

        Raises
        ------
        AccuracyError
            The engine cannot answer to a known accuracy (a :class:`afa.BudgetExceededError` when the
            query's budget runs out).
        """

    @abc.abstractmethod
    def epsilon_bracket(self, delta: float) -> tuple[float, float, float]:
        """(estimate, lower, upper) of the smallest eps >= 0 with delta(eps) <= ``delta``.

        Parameters
        ----------
        delta : float
            A number in (0, 1).

        Returns
        -------
        estimate, lower, upper : float
            The estimate and its bounds, lower <= estimate <= upper; +inf where delta(eps) stays above
            ``delta`` (e.g. ``delta`` below :attr:`inf_mass`).

        Raises
        ------
        AccuracyError
            The engine cannot resolve ``delta`` (a :class:`afa.BudgetExceededError` when the query's budget
            runs out).
        """

    def chernoff_delta(self, epsilons: np.ndarray, target: float | None = None) -> np.ndarray:
        """Upper bounds on delta at ``epsilons`` far cheaper than :meth:`delta`, loose, for a direction that only
        has to be shown below another; +inf where the engine has none (by default everywhere).

        Parameters
        ----------
        epsilons : ndarray
            Finite real numbers.
        target : float or None
            If given, a bound at most ``target`` may be returned as soon as one is found.

        Returns
        -------
        ndarray
            The bounds, of ``epsilons``' shape.
        """
        return np.full(np.shape(epsilons), math.inf)

    def upper_delta(self, epsilons: np.ndarray, target: float | None = None) -> np.ndarray:
        """An upper bound on delta at ``epsilons`` (certified or estimated, as the engine's), as cheaply as
        the engine allows; by default, given a ``target``, :meth:`chernoff_delta` where it is below the target,
        else the value plus its error.

        Parameters
        ----------
        epsilons : ndarray
            Finite real numbers.
        target : float or None
            If given, the caller only asks whether the bound is at most ``target``: an engine may then
            return a looser bound that is cheaper to compute (e.g. with mass far below ``target`` counted
            whole instead of resolved), still an upper bound on delta.

        Returns
        -------
        ndarray
            The bounds, of ``epsilons``' shape.

        Raises
        ------
        AccuracyError
            As :meth:`delta`.
        """
        if target is not None:  # a cheap bound first (:meth:`chernoff_delta`; none by default)
            bounds = self.chernoff_delta(np.asarray(epsilons, dtype=float), target)
            if np.all(bounds <= target):
                return bounds
        values, errors = self.delta(epsilons)
        return values + errors


def _pointwise_bounds(bound: Callable[[float, float | None], float] | None, epsilons: np.ndarray,
                      target: float | None) -> np.ndarray:
    """``bound(eps, target)`` at each of ``epsilons``, of their shape; +inf everywhere without a ``bound``."""
    epsilons = np.asarray(epsilons, dtype=float)
    if bound is None:
        return np.full(epsilons.shape, math.inf)
    return np.array([bound(float(epsilon), target) for epsilon in epsilons.ravel()]).reshape(epsilons.shape)


def loss_epsilon_scale(loss: ComposedLoss, smallest: float = 1.0) -> float:
    """A scale for bracketing eps(delta): the composed loss's |mean| plus ten standard deviations, at least
    ``smallest``.

    Parameters
    ----------
    loss : afa.engines.composition.ComposedLoss
        The composed privacy loss of one direction.
    smallest : float, optional
        The least scale returned (default 1).

    Returns
    -------
    float
        max(smallest, |mean| + 10 sqrt(max(variance, 0))).

    Examples
    --------
    >>> import afa
    >>> from afa.engines.composition import ComposedLoss
    >>> from afa.engines.base import loss_epsilon_scale
    >>> remove, add = afa.Gaussian(sigma=10.0).privacy_losses()
    >>> round(loss_epsilon_scale(ComposedLoss({remove: 100})), 6)  # loss N(1/2, 1)
    10.5
    """
    mean, variance = loss.cumulants
    return max(smallest, abs(mean) + 10 * math.sqrt(max(variance, 0.0)))


def smallest_epsilon(delta_of: Callable[[float], float], target: float, scale: float,
                     near: float | None = None, rtol: float = 4 * np.finfo(float).eps) -> float:
    """The smallest eps >= 0 with delta_of(eps) <= target for a non-increasing delta_of, to ~4 ulps.

    Parameters
    ----------
    delta_of : callable
        A non-increasing function of eps >= 0 returning delta (a float).
    target : float
        The delta to reach, > 0.
    scale : float
        The first upper end of the bracket, > 0 (e.g. :func:`loss_epsilon_scale`).
    near : float, optional
        A guess of the root: the bracket then grows outwards from it.
    rtol : float, optional
        The relative tolerance of the root (default 4 ulps; at least that).

    Returns
    -------
    float
        The root; 0.0 if delta_of(0) <= target; +inf if delta_of stays above the target up to the largest
        double.

    Raises
    ------
    BudgetExceededError
        The query's time budget ran out while the bracket grew.

    Notes
    -----
    Brent's method on log delta (no absolute delta tolerance) in a bracket grown by doubling from
    ``scale``, or outwards from ``near`` (a guess of the root) when given.  The time budget is checked
    while the bracket grows.

    Examples
    --------
    >>> import math
    >>> from afa.engines.base import smallest_epsilon
    >>> round(smallest_epsilon(lambda eps: math.exp(-eps), 0.5, 1.0), 10)  # log 2
    0.6931471806
    """
    if delta_of(0.0) <= target:
        return 0.0
    log_target = math.log(target)

    def gap(eps: float) -> float:
        return math.log(max(delta_of(eps), 1e-320)) - log_target

    low, high = 0.0, scale
    if near is not None:
        step = 1e-9 * max(1.0, near)
        while step < scale:
            low, high = max(0.0, near - step), near + step
            if gap(low) > 0 >= gap(high):
                break
            step *= 16
        else:
            low, high = 0.0, scale
    while gap(high) > 0:
        budget.check("bracketing eps(delta)")
        low, high = high, 2 * high
        if not math.isfinite(high):
            high = np.finfo(float).max
            if gap(high) > 0:
                return math.inf
    return optimize.brentq(gap, low, high, xtol=1e-300, rtol=max(rtol, 4 * np.finfo(float).eps), maxiter=400)


def _closed_form_rtol(log_value):
    """The relative error bound of delta = e^log_value from the composed Gaussian's closed form: EXACT_RTOL plus
    the rounding of exponentiating its logarithm (float or array)."""
    return EXACT_RTOL + UNIT_ROUNDOFF * (34 + 4 * abs(log_value))


def gaussian_delta_with_error(epsilons: np.ndarray, mu: float) -> tuple[np.ndarray, np.ndarray]:
    """delta(eps) of the composed Gaussian loss N(mu^2/2, mu^2) and a bound on its error.

    Parameters
    ----------
    epsilons : ndarray
        Finite real numbers, any shape.
    mu : float
        The composed Gaussians' parameter sqrt(sum_i k_i mu_i^2) > 0.

    Returns
    -------
    value, error : ndarray
        The closed form (Sommer, Meiser & Mohammadi 2019, Thm 5; :func:`afa.numerics.exact.gaussian_log_delta`) and
        ``value`` times its relative error EXACT_RTOL plus the rounding of exponentiating its logarithm;
        ``epsilons``' shape.
    """
    log_value = np.asarray(exact.gaussian_log_delta(np.asarray(epsilons, dtype=float), mu))
    value = np.exp(log_value)
    finite = np.isfinite(log_value)
    # below the normal range exp rounds by up to half the smallest subnormal (a positive truth that underflows
    # to 0 included)
    below_normal = np.where(value < np.finfo(float).tiny, 5e-324, 0.0)
    return value, np.where(finite, value * _closed_form_rtol(np.where(finite, log_value, 0.0)) + below_normal, 0.0)


_TINY = float(np.finfo(float).tiny)
#: The tangent bracket of :func:`gaussian_epsilon_bracket` serves delta at least this (normal numbers near delta).
TANGENT_SMALLEST_DELTA = 1e-305
#: ... and slopes whose relative rounding bound (:func:`_slope_slack`) is at most this.
TANGENT_LARGEST_SLACK = 1e-3
#: The closed form's search stops for the tangent bracket at a point whose log delta is this close to the target's.
TANGENT_RESOLVED = 1e-9


def gaussian_epsilon_bracket(delta: float, mu: float) -> tuple[float, float, float]:
    """(estimate, lower, upper) of eps(delta) for the composed Gaussian loss N(mu^2/2, mu^2).

    Parameters
    ----------
    delta : float
        A number in (0, 1).
    mu : float
        The composed Gaussians' parameter > 0.

    Returns
    -------
    tuple of float
        The estimate, the root of the closed form found by :func:`afa.numerics.exact.gaussian_epsilon_search`,
        and bounds verified on the closed form with its relative error EXACT_RTOL: delta is <= ``delta`` at
        ``upper`` and > ``delta`` at ``lower`` (or ``lower`` is 0).

    Notes
    -----
    delta(eps) = E[(1 - e^(eps - L))_+] is log-concave in eps for a log-concave density of the loss L (the
    integrand is log-concave in (eps, L) jointly and integrating out L keeps that, Prekopa 1973, Thm 6), so
    log delta lies below each of its tangents.  The search's last point x (log delta(x) within 1e-9 of log delta)
    then bounds log delta(y) <= log(delta(x) (1 + EXACT_RTOL)) - s (y - x), with the slope s = -d log delta / d eps
    at x taken smaller (larger for y < x) than computed by a bound on its rounding: ``upper`` is where that bound
    meets ``delta``.  Below x, (log delta)'' = -s - s^2 + phi(a) / (mu delta) >= -(s + s^2) (the derivative of
    s = e^eps Phi(b) / delta, b = a - mu, a = mu/2 - eps/mu) and s is at most its value at x (concavity), so
    log delta(y) >= log(delta(x) (1 - EXACT_RTOL)) + s (x - y) - (s + s^2) (x - y)^2 / 2; above x, s' <= s + s^2
    bounds s by the solution S of S' = S + S^2 (S = s e^d / (1 - s (e^d - 1)) at distance d) and
    log delta(y) >= log(delta(x) (1 - EXACT_RTOL)) - S (y - x): ``lower`` is where the bound on its side of x
    exceeds ``delta``, again with no further evaluation of the closed form.
    For ``delta`` below TANGENT_SMALLEST_DELTA, a slope rounded by more than TANGENT_LARGEST_SLACK (mu above
    about 3e5), or when the search ended by bisection, both bounds come from
    :func:`afa.numerics.atoms.verified_epsilon_bounds` instead.
    """
    search = exact.gaussian_epsilon_search(delta, mu, resolved=TANGENT_RESOLVED)
    bracket = _tangent_bracket(delta, mu, search)
    if bracket is not None:
        return bracket
    estimate = search.estimate

    def evaluate(eps: float) -> tuple[float, float, float]:
        log_value = float(exact.gaussian_log_delta(eps, mu))
        value = math.exp(log_value)
        # -d delta / d eps = e^eps Phi(-mu/2 - eps/mu) <= Phi(mu/2 - eps/mu) <= 1 (its log's two huge terms can
        # round to a positive sum when mu is near 1e150)
        slope = math.exp(min(eps + float(log_ndtr(-mu / 2 - eps / mu)), 0.0))
        # below the normal range exp rounds by up to half the smallest subnormal (as gaussian_delta_with_error)
        error = value * _closed_form_rtol(log_value) + (5e-324 if value < _TINY else 0.0) if value > 0 else 0.0
        return value, error, slope

    lower, upper = verified_epsilon_bounds(evaluate, delta, estimate, 0.0, math.inf)
    return estimate, min(lower, estimate), max(upper, estimate)


def _tangent_bracket(delta: float, mu: float, search: exact.GaussianSearchPoint) -> tuple[float, float, float] | None:
    """:func:`gaussian_epsilon_bracket`'s bounds from the search's last point alone; None where they do not apply
    (the caller then steps to verified bounds)."""
    x, log_value, log_slope = search.point, search.log_delta, search.log_slope
    if not (delta >= TANGENT_SMALLEST_DELTA and x > 0 and math.isfinite(log_value) and abs(log_slope) < 700):
        return None
    slack = _slope_slack(x, mu, log_value, log_slope)
    if not slack <= TANGENT_LARGEST_SLACK:
        return None
    rounding = 8 * UNIT_ROUNDOFF  # exp, the products and the comparison, with room to spare
    slope = math.exp(log_slope)
    value, rtol, log_delta = math.exp(log_value), _closed_form_rtol(log_value), math.log(delta)
    high = value * (1 + rtol)  # >= delta(x)
    gap = math.log(high) - log_delta  # the tangent's log excess at x (its rounding is covered below)
    distance = gap / slope
    upper = math.inf
    for _ in range(8):
        y = x + distance + rounding * (abs(x) + abs(distance))
        step = y - x  # exact (Sterbenz) when y is within a factor 2 of x
        rate = slope * (1 - slack) if step >= 0 else slope * (1 + slack)
        if high * math.exp(-rate * step) * (1 + rounding) <= delta:
            upper = y
            break
        distance += max(abs(distance), rounding * abs(x))
    if not math.isfinite(upper):
        return None
    # lower: for y < x, log delta(y) >= log delta(x) + s (x - y) - (s + s^2) (x - y)^2 / 2, since
    # (log delta)'' = -s - s^2 + phi(a) / (mu delta) >= -(s + s^2) and s grows with eps (log delta is concave);
    # for y > x, log delta(y) >= log delta(x) - S (y - x), S = s e^d / (1 - s (e^d - 1)) >= s on [x, y] (s' <= s + s^2)
    low = value * (1 - rtol)  # <= delta(x)
    least, most = slope * (1 - slack), slope * (1 + slack)
    excess = math.log(low) - log_delta
    lower = -1.0
    if excess > 2 * rounding * abs(log_delta):  # x is a lower bound: try further right
        distance = (excess - 4 * rounding) / most  # the check's rounding left as margin
        for _ in range(8):
            y = x + distance * (1 - rounding)
            step = y - x
            grown = math.expm1(step)
            steepest = most * (1 + grown) / (1 - most * grown) if most * grown < 0.5 else math.inf
            if step > 0 and low * math.exp(-steepest * step) * (1 - rounding) > delta:
                lower = y
                break
            distance *= 0.5
        if lower < 0 and low * (1 - rounding) > delta:
            lower = x
    else:
        distance = (max(-excess, 0.0) + 4 * rounding) / least
        curvature = most * (1 + most)
        for _ in range(8):
            y = x - distance - rounding * (abs(x) + abs(distance))
            if y <= 0:
                lower = 0.0
                break
            step = x - y  # exact (Sterbenz) when y is within a factor 2 of x
            if low * math.exp(least * step - 0.5 * curvature * step * step) * (1 - rounding) > delta:
                lower = y
                break
            distance += max(abs(distance), rounding * abs(x))
    if lower < 0:
        return None
    return min(max(search.estimate, lower), upper), lower, upper


def _slope_slack(eps: float, mu: float, log_value: float, log_slope: float) -> float:
    """A bound on the relative error of s = -d log delta / d eps = e^eps Phi(b) / delta(eps), b = -mu/2 - eps/mu,
    as :func:`afa.numerics.exact.gaussian_epsilon_search` computes it: log delta's (the closed form's EXACT_RTOL,
    four times over) and, sixty-four times over, the ulps of the logs it adds up (eps, log delta, log s) and of
    log Phi(b), whose argument's rounding moves it by about b^2 ulps."""
    b = 0.5 * mu + eps / mu
    return 4 * EXACT_RTOL + 64 * UNIT_ROUNDOFF * (b * b + abs(eps) + abs(log_value) + abs(log_slope) + 1.0)


class ExactEngine(Engine):
    """delta(eps) = m + sum_j w_j delta_Gauss(eps - l_j; mu) for Gaussians and finite-output mechanisms,
    with error bounds.

    The finite-output part is composed exactly (:class:`afa.engines.discrete.DiscreteComposition`: atoms
    with position and mass error bounds, negligible atoms dropped into a counted mass).  Without
    Gaussians (mu = 0) delta is the atoms' hockey stick with its error bound
    (:func:`afa.numerics.atoms.hockey_stick_with_error`) and eps(delta) a verified bracket
    (:meth:`afa.engines.discrete.DiscreteComposition.epsilon_bounds`); a composition too large to enumerate
    in full is composed as far as each query needs, and a query that needs more is refused
    (:class:`afa.numerics.atoms.CompositionTooLargeError`, an AccuracyError).  With Gaussians the composed
    Gaussian profile (Sommer, Meiser & Mohammadi 2019, Thm 5) is mixed over the atoms, and the
    bounds are the same mixture over the atoms moved to the ends of their position intervals and
    masses at the ends of theirs, widened by the closed form's relative error EXACT_RTOL; eps(delta)
    is the estimate's root with bounds verified against them (:func:`afa.numerics.atoms.verified_epsilon_bounds`).

    Parameters
    ----------
    mu : float
        The composed Gaussians' parameter, sqrt(sum_i k_i mu_i^2) >= 0 (0: no Gaussians).
    discrete : afa.engines.composition.ComposedLoss
        The composed loss of the finite-output terms of the direction (no terms: the pure Gaussian).

    Attributes
    ----------
    mu : float
        As given.
    inf_mass : float
        The discrete part's mass at +infinity.
    composition : afa.engines.discrete.DiscreteComposition
        The exact composition of the finite-output terms.
    atoms : afa.numerics.atoms.LossAtoms or None
        The fully composed atoms if the composition was composed in full on construction (always when
        mu > 0), else None (then composed as far as each query needs).

    Raises
    ------
    CompositionTooLargeError
        With mu > 0, a discrete composition that cannot be composed in full, or one with more than
        MAX_MIXTURE_ATOMS atoms (each evaluation costs about 0.5 us per atom).

    Examples
    --------
    >>> import afa, numpy as np
    >>> from afa.engines.composition import ComposedLoss
    >>> from afa.engines.base import ExactEngine
    >>> rr, _ = afa.RandomizedResponse(p=0.6).privacy_losses()
    >>> engine = ExactEngine(1.0, ComposedLoss({rr: 20}))  # 100 uses of Gaussian(10) and 20 of RR(0.6)
    >>> engine.delta(np.array([1.0]))[0].round(5)
    array([0.53393])
    >>> [round(float(x), 6) for x in engine.epsilon_bracket(0.1)]
    [3.973154, 3.973154, 3.973154]
    """

    method = "exact"
    certified = False

    def __init__(self, mu: float, discrete: ComposedLoss):
        self.mu = mu
        self.inf_mass = discrete.inf_mass
        self.composition = DiscreteComposition([(loss.atoms, count) for loss, count in discrete.terms.items()],
                                               discrete.inf_mass)
        if mu > 0 and self.composition.full is None:
            self.composition.compose()  # raises CompositionTooLargeError, with the sizes
        self.atoms: LossAtoms | None = self.composition.full if mu > 0 else None  # composed in full when mu > 0
        if mu > 0 and self._full_atoms.size > MAX_MIXTURE_ATOMS:
            raise CompositionTooLargeError(
                f"the exact Gaussian mixture over {self._full_atoms.size} atoms (limit {MAX_MIXTURE_ATOMS}) costs the "
                "closed form at every atom near each eps tried; use method='contour'")

    @property
    def _full_atoms(self) -> LossAtoms:
        """The fully composed atoms, which the Gaussian mixture (mu > 0) needs."""
        if self.atoms is None:
            raise CompositionTooLargeError("the exact discrete composition was not composed in full")
        return self.atoms

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        epsilons = np.asarray(epsilons, dtype=float)
        if self.mu == 0:
            return self.composition.delta(epsilons)
        if self._pure:
            return gaussian_delta_with_error(epsilons, self.mu)
        value, lower, upper = self._mixture_bounds(epsilons)
        return value, np.maximum(upper - value, value - lower)

    def upper_delta(self, epsilons: np.ndarray, target: float | None = None) -> np.ndarray:
        """Value plus error bound of delta at ``epsilons``; without Gaussians and with a ``target``, from the atoms
        of mass above ``target`` e^-PRUNE only (the lighter ones counted whole in the error): what shows that a
        direction stays below a target, without the composition that resolving delta exactly would need."""
        epsilons = np.asarray(epsilons, dtype=float)
        if self.mu == 0 and target is not None:
            return self.composition.upper_delta(epsilons, target)
        values, errors = self.delta(epsilons)
        return values + errors

    def _mixture_bounds(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(value, lower, upper) of m + sum_j w_j delta_Gauss(eps - l_j) (mu > 0)."""
        atoms, mu = self._full_atoms, self.mu
        losses, log_masses = atoms.losses, atoms.log_masses
        alpha, beta = atoms.log_mass_error
        shift = atoms.loss_errors * 1.000001 + 2 * UNIT_ROUNDOFF * np.abs(losses)
        mass_error = alpha + beta * np.abs(log_masses)
        rtol = EXACT_RTOL + UNIT_ROUNDOFF * (2 * math.log2(atoms.size + 1) + 32)
        inf_error = 8 * UNIT_ROUNDOFF * self.inf_mass
        with np.errstate(over="ignore"):
            value = self.inf_mass + np.exp(exact.mixture_log_delta(epsilons, losses, log_masses, mu))
            log_upper = exact.mixture_log_delta(epsilons, losses + shift, log_masses + mass_error, mu)
            log_lower = exact.mixture_log_delta(epsilons, losses - shift, log_masses - mass_error, mu)
            # (a log of -inf is a zero mixture: no rounding to add, and no 0 * inf)
            widen = rtol + 2 * UNIT_ROUNDOFF * np.abs(np.where(np.isfinite(log_upper), log_upper, 0.0))
            narrow = rtol + 2 * UNIT_ROUNDOFF * np.abs(np.where(np.isfinite(log_lower), log_lower, 0.0))
            upper = self.inf_mass + inf_error + np.exp(log_upper) * (1 + widen)
            lower = self.inf_mass - inf_error + np.exp(log_lower) * (1 - narrow)
        if atoms.log_dropped > -math.inf:  # atoms dropped as negligible: each adds at most its mass
            upper = upper + math.exp(atoms.log_dropped)
        return value, np.minimum(lower, value), np.maximum(upper, value)

    def _mixture_slope(self, epsilon: float) -> float:
        """-d delta / d eps = sum_j w_j e^y Phi(-mu/2 - y/mu), y = eps - l_j (mu > 0)."""
        gap = epsilon - self._full_atoms.losses
        return float(np.exp(logsumexp(self._full_atoms.log_masses + gap + log_ndtr(-self.mu / 2 - gap / self.mu))))

    def epsilon_bracket(self, delta: float) -> tuple[float, float, float]:
        """(estimate, lower, upper) of eps(delta), the bounds verified against delta -/+ its error bound.

        Without Gaussians (mu = 0), the discrete composition's verified bracket; else (inf, inf, inf) for
        ``delta`` below the mass at +infinity, (inf, 0, inf) where the estimate never reaches ``delta``.

        Raises
        ------
        CompositionTooLargeError
            The query needs more of the discrete composition than is allowed (an AccuracyError).
        """
        if self.mu == 0:
            return self.composition.epsilon_bounds(delta)
        if delta < self.inf_mass * (1 - 1e-12):
            return math.inf, math.inf, math.inf
        if self._pure:
            return gaussian_epsilon_bracket(delta, self.mu)
        atoms = self._full_atoms
        estimate = smallest_epsilon(lambda eps: self.inf_mass + float(np.exp(exact.mixture_log_delta(
            np.array([eps]), atoms.losses, atoms.log_masses, self.mu))[0]), delta, self.epsilon_scale)
        if math.isinf(estimate):
            return math.inf, 0.0, math.inf

        def evaluate(eps: float) -> tuple[float, float, float]:
            value, lower, upper = (float(x[0]) for x in self._mixture_bounds(np.array([eps])))
            return value, max(upper - value, value - lower), self._mixture_slope(eps)

        lower, upper = verified_epsilon_bounds(evaluate, delta, estimate, 0.0, math.inf)
        return estimate, min(lower, estimate), max(upper, estimate)

    @property
    def _pure(self) -> bool:
        """Whether the direction is the composed Gaussian alone (no discrete part): its closed form applies."""
        atoms = self._full_atoms
        return atoms.size == 1 and atoms.losses[0] == 0 and self.inf_mass == 0

    @property
    def epsilon_scale(self) -> float:
        """A scale for bracketing eps(delta): max(1, mu^2 / 2 + 10 mu + the discrete loss's largest |end|)."""
        reach = max(abs(self.composition.top), abs(self.composition.bottom))
        return max(1.0, self.mu ** 2 / 2 + 10 * self.mu + reach)


class CertainRevealEngine(Engine):
    """A direction whose composed loss is +infinity with probability 1: delta(eps) = 1 at every eps, so
    eps(delta) = +inf for every delta < 1.  Exact, hence certified; it serves every method.

    Such a direction arises from one mechanism whose whole mass is where the other distribution has none
    (e.g. ``DiscreteMechanism((0, 1), (1, 0))``): its finite part is empty, which the other engines, built
    on the finite part's distribution, cannot represent.

    Examples
    --------
    >>> import numpy as np
    >>> from afa.engines.base import CertainRevealEngine
    >>> engine = CertainRevealEngine()
    >>> engine.delta(np.array([0.0, 5.0]))
    (array([1., 1.]), array([0., 0.]))
    >>> engine.epsilon_bracket(1e-5)
    (inf, inf, inf)
    """

    method = "exact"
    certified = True
    inf_mass = 1.0

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        epsilons = np.asarray(epsilons, dtype=float)
        return np.ones(epsilons.shape), np.zeros(epsilons.shape)

    def epsilon_bracket(self, delta: float) -> tuple[float, float, float]:
        return math.inf, math.inf, math.inf


class ClosedFormEngine(Engine):
    """delta(eps) of one direction from a closed-form function of eps returning (values, errors).

    Used for one use of :class:`afa.DataDependentGaussian`
    (:func:`afa.numerics.exact.data_dependent_gaussian_delta`, Zhu, Dong & Wang 2022, App. A Example 15), for
    compositions of data-dependent Gaussians sharing sigma1/sigma2 with Gaussians (one noncentral chi-square
    integral, :class:`afa.engines.quadratic.QuadraticComposition`), for a few uses of Gaussian noise pairs (the
    recursion over the uses, :class:`afa.engines.step_recursion.StepRecursion`), and for one use of any other
    mechanism with a continuous loss, from its loss tails
    (:meth:`afa.mechanisms.loss_tails.LossTails.hockey_stick_with_error`).
    eps(delta) is the root of the values with bounds verified against values -/+ errors
    (:func:`afa.numerics.atoms.verified_epsilon_bounds`), so a delta far below the errors is still answered where eps
    is determined (next to a bounded loss's top, where delta's error is its top's rounding); a bracket wider
    than ``epsilon_rtol`` (relative) is refused, so that 'auto' moves on.

    Parameters
    ----------
    delta_and_error : callable
        Maps an array of eps to (values, errors) of delta, each of its shape.
    loss : afa.engines.composition.ComposedLoss
        The direction's composed loss: its mass at +infinity and the scale of the eps search
        (:func:`loss_epsilon_scale`).
    epsilon_scale : float, optional
        The first upper end of the eps searches instead (where evaluating delta far beyond the answer costs more).
    chernoff : callable, optional
        (eps, target) -> an upper bound on delta(eps) far cheaper than ``delta_and_error`` (e.g.
        :meth:`afa.engines.contour.ContourInversion.chernoff_bound`), for :meth:`chernoff_delta`.
    with_slope : callable, optional
        Maps an array of eps to (values, errors, slopes), the slopes -d delta / d eps (e.g.
        :meth:`afa.mechanisms.loss_tails.LossTails.hockey_stick_error_and_slope`): eps(delta) is then found by
        Newton's method (:func:`newton_epsilon`) and bracketed with those slopes, instead of Brent's method
        and slopes by differences.
    epsilon_rtol : float, default CLOSED_FORM_EPSILON_RTOL
        The widest eps bracket returned (relative to max(1, |eps|)); a wider one is refused.
    epsilon_guess : callable, optional
        delta -> the eps where Newton's method starts (with ``with_slope``; default 0), e.g.
        :func:`gaussian_epsilon_guess`: a recursion fits its stages up to the eps asked, and one started at 0
        fits them twice (a second time up to Newton's next iterate).

    Examples
    --------
    >>> import afa, numpy as np
    >>> from afa.engines.composition import ComposedLoss
    >>> from afa.engines.base import ClosedFormEngine
    >>> laplace = afa.Laplace(scale=1.0)
    >>> tails, loss = laplace.loss_tails("add_remove")[0], laplace.privacy_losses()[0]
    >>> engine = ClosedFormEngine(tails.hockey_stick_with_error, ComposedLoss({loss: 1}))
    >>> engine.delta(np.array([0.5]))[0].round(6)
    array([0.221199])
    >>> [round(float(x), 6) for x in engine.epsilon_bracket(0.1)]
    [0.789279, 0.789279, 0.789279]
    """

    method = "exact"
    certified = False

    def __init__(self, delta_and_error: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], loss: ComposedLoss,
                 epsilon_scale: float | None = None,
                 chernoff: Callable[[float, float | None], float] | None = None,
                 with_slope: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None,
                 epsilon_rtol: float = CLOSED_FORM_EPSILON_RTOL,
                 epsilon_guess: Callable[[float], float] | None = None):
        self.delta_and_error = delta_and_error
        self.epsilon_rtol = float(epsilon_rtol)
        self._chernoff = chernoff
        self._with_slope = with_slope
        self._epsilon_guess = epsilon_guess
        self.inf_mass = loss.inf_mass
        self.epsilon_scale = loss_epsilon_scale(loss) if epsilon_scale is None else float(epsilon_scale)
        #: delta -> (estimate, lower, upper) of the latest KEPT_ANSWERS eps(delta) queries answered
        self._answers: collections.OrderedDict[float, tuple[float, float, float]] = collections.OrderedDict()

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, errors) of the closed form at ``epsilons``, as float arrays."""
        values, errors = self.delta_and_error(epsilons)
        return np.asarray(values, dtype=float), np.asarray(errors, dtype=float)

    def chernoff_delta(self, epsilons: np.ndarray, target: float | None = None) -> np.ndarray:
        """The ``chernoff`` bounds at ``epsilons`` (+inf without one)."""
        return _pointwise_bounds(self._chernoff, epsilons, target)

    def epsilon_bracket(self, delta: float) -> tuple[float, float, float]:
        """(estimate, lower, upper) of eps(delta), the bounds verified against delta -/+ its error.

        Where the values never reach ``delta``, (inf, 0, inf), or (inf, inf, inf) if values - errors never
        reach it either.  The latest KEPT_ANSWERS answers are kept (a repeated query is not solved again).

        Raises
        ------
        AccuracyError
            The bracket is wider than ``epsilon_rtol`` * max(1, |estimate|): ``delta`` is below what the closed
            form's error resolves.
        """
        return _kept_or_solved(self._answers, delta, self._solve)

    def _solve(self, delta: float) -> tuple[float, float, float]:
        """:meth:`epsilon_bracket` without its kept answers."""
        def value(eps: float) -> float:
            return float(self.delta(np.array([eps]))[0][0])

        with_slope = self._with_slope
        if with_slope is not None and self.inf_mass < delta:
            def evaluate_many(points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
                values, errors, slopes = with_slope(points)
                return (np.asarray(values, dtype=float), np.asarray(errors, dtype=float),
                        np.asarray(slopes, dtype=float))

            def evaluate(eps: float) -> tuple[float, float, float]:
                values, errors, slopes = evaluate_many(np.array([eps]))
                return float(values[0]), float(errors[0]), float(slopes[0])

            start = 0.0 if self._epsilon_guess is None else self._epsilon_guess(delta)
            estimate, at_estimate = newton_epsilon(evaluate, delta, start, self.epsilon_scale)
            lower, upper = verified_epsilon_bounds(evaluate, delta, estimate, 0.0, math.inf,
                                                   evaluate_many=evaluate_many, at_root=at_estimate)
            return self._checked(estimate, min(lower, estimate), max(upper, estimate), delta)

        estimate = smallest_epsilon(value, delta, self.epsilon_scale)
        if math.isinf(estimate):
            lower = smallest_epsilon(lambda eps: float(np.subtract(*self.delta(np.array([eps])))[0]), delta,
                             self.epsilon_scale)
            return estimate, (0.0 if math.isfinite(lower) else lower), estimate

        def evaluate_by_differences(eps: float) -> tuple[float, float, float]:
            values, errors = self.delta(np.array([eps - step(eps), eps, eps + step(eps)]))
            slope = max((values[0] - values[2]) / (2 * step(eps)), 0.0)
            return float(values[1]), float(errors[1]), slope

        def step(eps: float) -> float:
            return 1e-7 * max(1.0, abs(eps))

        def value_and_error(eps: float) -> tuple[float, float]:
            values, errors = self.delta(np.array([eps]))
            return float(values[0]), float(errors[0])

        lower, upper = verified_epsilon_bounds(evaluate_by_differences, delta, estimate, 0.0, math.inf, tighten=True,
                                               value_and_error=value_and_error)
        return self._checked(estimate, min(lower, estimate), max(upper, estimate), delta)

    def _checked(self, estimate: float, lower: float, upper: float, delta: float) -> tuple[float, float, float]:
        """(estimate, lower, upper), refused (AccuracyError) when wider than ``epsilon_rtol``."""
        if not upper - lower <= self.epsilon_rtol * max(1.0, abs(estimate)):
            raise AccuracyError(
                f"delta={delta:.3g} is below what method='exact' resolves for this mechanism: its closed form's "
                f"error leaves eps in [{lower:.17g}, {upper:.17g}]. Use method='contour' (relative accuracy) or "
                "the certified brackets of method='pld' or 'certified'.")
        return estimate, lower, upper


class CertifiedEngine(Engine):
    """Certified bracket of one subsampled Gaussian/Laplace mechanism composed k times (:mod:`afa.engines.certified`).

    Zhu, Dong & Wang 2022, Algorithm 2, Lemma 40, Thm 44: delta's value is the bracket's midpoint (an
    estimate), its error the half-width; lower and upper are certified bounds.  The mass allowed beyond
    the output reach and the FFT window follows the delta asked about (TAIL_FRACTION of it, at most
    afa.engines.certified's default), and for k > 1 the powers are also formed tilted at the composition's
    Chernoff order for that delta (or saddle point at the eps asked about), whose rounding is relative to
    delta there: without both, bounds below about k * 1e-14 (FFT rounding) or the truncated mass say nothing.

    Parameters
    ----------
    loss : afa.engines.composition.ComposedLoss
        The direction's composed loss: one term, a subsampled Gaussian or Laplace mechanism (a noise
        pair), with an integral count.

    Attributes
    ----------
    pair : afa.mechanisms.noise_pair.NoiseMixturePair
        The term's noise pair.
    count : int
        Its number of uses k.
    epsilon_scale : float
        The scale of the eps searches (:func:`loss_epsilon_scale`).

    Raises
    ------
    UnsupportedCompositionError
        Any other composition.

    Examples
    --------
    >>> import afa
    >>> from afa.engines.composition import ComposedLoss
    >>> from afa.engines.base import CertifiedEngine
    >>> remove, add = afa.Gaussian(sigma=10.0).privacy_losses()
    >>> CertifiedEngine(ComposedLoss({remove: 100}))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    afa.results.UnsupportedCompositionError: method='certified' needs a composition of one subsampled Gaussian...
    """

    method = "certified"
    certified = True  # bounds proved, not estimated (never refused for a wide bracket)
    inf_mass = 0.0
    #: Truncated mass relative to the delta of interest, the smallest allowed, and brackets kept.
    TAIL_FRACTION, SMALLEST_TAIL, CACHED = 1e-7, 1e-300, 2
    #: A delta bracket wider than this (relative to its upper end) is refined once, tilted at its eps.
    REFINE_WIDTH = 1e-3

    def __init__(self, loss: ComposedLoss):
        pair: NoiseMixturePair | None = None
        count = 0.0
        if len(loss.terms) == 1:
            (term, count), = loss.terms.items()
            pair = term.noise_pair
        if pair is None or count != int(count):
            raise UnsupportedCompositionError(
                "method='certified' needs a composition of one subsampled Gaussian or Laplace mechanism (any count)")
        self.pair: NoiseMixturePair = pair
        self.count: int = int(count)
        self.epsilon_scale: float = loss_epsilon_scale(loss)
        # Beyond an upper bound on the composed finite loss delta is the mass at +infinity (none here).
        self._loss_max: float = _raised_loss_max(loss.loss_max)
        self._brackets: collections.OrderedDict = collections.OrderedDict()

    def bracket_for(self, tail_tolerance: float) -> CertifiedBracket:
        """The certified bracket with ``tail_tolerance`` (cached, the CACHED most recent).

        Parameters
        ----------
        tail_tolerance : float
            The mass allowed beyond the output reach and the FFT window.

        Returns
        -------
        afa.engines.certified.CertifiedBracket
            Of :attr:`pair` composed :attr:`count` times.
        """
        if tail_tolerance not in self._brackets:
            _remember(self._brackets, tail_tolerance,
                      CertifiedBracket(self.pair, self.count, tail_tolerance=tail_tolerance), self.CACHED)
        self._brackets.move_to_end(tail_tolerance)
        return self._brackets[tail_tolerance]

    @property
    def bracket(self) -> CertifiedBracket:
        """The bracket at afa.engines.certified's default tail tolerance."""
        return self.bracket_for(CertifiedBracket.default_tail_tolerance)

    def _tail_for(self, delta: float) -> float:
        return min(CertifiedBracket.default_tail_tolerance, max(delta * self.TAIL_FRACTION, self.SMALLEST_TAIL))

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(midpoints, half-widths) of the certified delta brackets at ``epsilons``.

        Bounds at the default tolerance; where the bracket is wider than REFINE_WIDTH of its upper end,
        once more with the tolerance scaled to the smallest bound there and the powers tilted at the saddle
        point of the largest such eps (both brackets are certified: the better end of each is kept).
        """
        epsilons = np.asarray(epsilons, dtype=float)
        lower, upper = self.bracket.delta(epsilons)
        wide = np.flatnonzero(upper - lower > self.REFINE_WIDTH * upper)
        if wide.size:
            smallest = float(np.min(lower[wide])) or float(np.min(upper[wide]))
            bracket = self.bracket_for(self._tail_for(smallest))
            tilt = bracket.tilt_for(epsilon=float(np.max(epsilons[wide])))
            refined_lower, refined_upper = bracket.delta(epsilons[wide], tilt)
            lower[wide] = np.maximum(lower[wide], refined_lower)
            upper[wide] = np.minimum(upper[wide], refined_upper)
        lower = np.minimum(lower, upper)
        return (lower + upper) / 2, (upper - lower) / 2

    def upper_delta(self, epsilons: np.ndarray, target: float | None = None) -> np.ndarray:
        """A certified upper bound on delta: 0 where every eps is at or beyond the largest finite composed loss
        (Poisson subsampling's add direction), else from the bracket of the finest tolerance built so far (the
        default one if none), without refinement.  Enough to see that a direction stays below a target."""
        epsilons = np.asarray(epsilons, dtype=float)
        if np.all(epsilons >= self._loss_max):
            return np.zeros(epsilons.shape)
        tail = min(self._brackets, default=CertifiedBracket.default_tail_tolerance)
        bracket = self.bracket_for(tail)
        return bracket.upper(epsilons, bracket.tilt_for(epsilon=float(np.max(epsilons))))

    def epsilon_bracket(self, delta: float) -> tuple[float, float, float]:
        """(midpoint, lower, upper) of eps(delta): the crossings of the certified lower and upper bounds, with
        the tolerance scaled to delta and the powers tilted at the Chernoff order for delta, each checked:
        upper(eps_upper) <= delta < lower(eps) for every eps < eps_lower.

        The midpoint is +inf when the upper bound is.

        Raises
        ------
        AccuracyError
            No finite upper bound was reached (delta is below what the truncation and rounding resolve);
            the error's ``bracket`` holds the certified lower bound.
        """
        bracket = self.bracket_for(self._tail_for(delta))
        tilt = bracket.tilt_for(delta=delta)

        def side(bound):
            return lambda eps: float(bound(np.array([eps]), tilt)[0])

        upper = checked_crossing(side(bracket.upper), delta, self.epsilon_scale, above=False)
        lower = checked_crossing(side(bracket.lower), delta, self.epsilon_scale, above=True)
        return bracket_answer(self.method, delta, 0.0, lower, upper)


def bracket_answer(method: str, delta: float, inf_mass: float, lower: float, upper: float
                   ) -> tuple[float, float, float]:
    """(midpoint, lower, upper) of a certified bracket of eps(delta), the lower end capped at the upper (+inf
    midpoint when the upper end is +inf).

    Raises
    ------
    AccuracyError
        The upper end is +inf although delta exceeds the exact mass at +infinity (``inf_mass``): the engine
        did not reach a finite bound, which is not an answer; the error's ``bracket`` holds the lower end.
    """
    lower = min(lower, upper)
    if math.isinf(upper) and delta > inf_mass:
        raise AccuracyError(
            f"method={method!r} found no finite upper bound on eps(delta={delta:.3g}) although the mass at "
            f"+infinity is {inf_mass:.3g} < delta (certified lower bound {lower:.17g}); delta is below what its "
            "truncation and rounding resolve here: try method='contour', or a larger delta",
            bracket=Result(lower, lower, math.inf, math.inf, method, certified=True))
    return (lower + upper) / 2 if math.isfinite(upper) else upper, lower, upper


def checked_crossing(bound: Callable[[float], float], target: float, scale: float, above: bool,
                     near: float | None = None, rtol: float = 4 * np.finfo(float).eps) -> float:
    """From a non-increasing certified bound on delta, a certified bound on eps(target).

    ``above=False`` (an upper bound on delta): the smallest eps found with bound(eps) <= target, moved up
    until that holds (then eps(target) <= it).  ``above=True`` (a lower bound on delta): an eps with
    bound(eps) > target, moved down until that holds, or 0 (then eps(target) >= it).  ``near``, a guess of
    the crossing, starts the search there, and ``rtol`` is its relative tolerance (:func:`smallest_epsilon`;
    the first move is twice that).
    """
    epsilon = smallest_epsilon(bound, target, scale, near=near, rtol=rtol)
    if not math.isfinite(epsilon):
        return epsilon
    step = 2 * max(rtol, 2 * np.finfo(float).eps) * max(1.0, epsilon)
    for _ in range(200):
        if above:
            if epsilon <= 0.0:
                return 0.0
            if bound(epsilon) > target:
                return epsilon
            epsilon = max(epsilon - step, 0.0)
        else:
            if bound(epsilon) <= target:
                return epsilon
            epsilon += step
        step *= 2
    return 0.0 if above else math.inf


class PLDEngine(Engine):
    """Certified bracket of one direction from discretized PLDs (:mod:`afa.engines.pld`, Doroshenko et al. 2022,
    Google DP team 2025).

    Every term's loss tails give a connect-the-dots pessimistic PLD (an upper bound on delta, Doroshenko et al.
    2022, Sec. 4) and a greedy-hull optimistic one (a lower bound, Sec. 5); counts are FFT powers and distinct
    terms FFT convolutions. Plain Gaussian terms are merged first into one Gaussian with mu = sqrt(sum_i k_i
    mu_i^2): composed Gaussians are exactly a Gaussian pair (Sommer, Meiser & Mohammadi 2019, Thm 5), so 10^4
    distinct Gaussians cost one PLD (mu is rounded up for the pessimistic PLD and down for the optimistic one).
    The tail truncation follows the delta asked about: mass PLDOptions.tail_fraction times below it (Google DP
    team 2025, Sec. 5.2 with a threshold scaled to the query, not a fixed 1e-15), and every power and
    convolution shares one tilt, the composition's Chernoff order for that delta (or its saddle point at the eps
    asked about: :func:`afa.engines.pld.composition_tilt`), so the FFT rounding is relative to delta where it is asked
    about and tiny deltas keep a finite, tight bracket. When the composed finite loss is bounded above by B
    (Poisson subsampling's add direction), no term's grid goes below -B: lower losses never reach eps >= 0.
    delta's value is the midpoint (an estimate) and its error the half-width; lower and upper are certified.
    Grids and FFTs reserve their memory from the query's budget (:mod:`afa.budget`) and the loops over terms
    check its deadline.

    Parameters
    ----------
    terms : list of (afa.mechanisms.loss_tails.LossTails, int)
        Each distinct term's loss tails of the direction and its count.
    interval : float
        The grid step of the loss, in (0, 350] (:data:`afa.limits.INTERVAL_RANGE`).
    loss : afa.engines.composition.ComposedLoss
        The direction's composed loss: its mass at +infinity, the upper end of its finite loss and the
        scale of the eps searches.
    powers : dict, optional
        Given, each finite term's uses are composed exactly before they go on the grid
        (:meth:`afa.mechanisms.loss_tails.LossTails.exact_power`: one grid rounding per term instead of one per use),
        and the dict caches those powers (it may be shared by engines of the same terms); by default every use
        goes on the grid.  The exact power's grid spans the whole composed law, where a power of the per-use
        PLD keeps only a window around the queried delta's tilt, so this suits compositions of finite terms
        only.

    Attributes
    ----------
    interval : float
        The grid step.
    terms : list of (afa.mechanisms.loss_tails.LossTails, int)
        The terms other than plain Gaussians (which are merged into one).
    epsilon_scale : float
        The scale of the eps searches (:func:`loss_epsilon_scale`).

    Raises
    ------
    ValueError
        An ``interval`` that is not a real number in (0, 350].

    Examples
    --------
    >>> import afa, numpy as np
    >>> from afa.engines.composition import ComposedLoss
    >>> from afa.engines.base import PLDEngine
    >>> gaussian = afa.Gaussian(sigma=10.0)
    >>> tails, loss = gaussian.loss_tails("add_remove")[0], gaussian.privacy_losses()[0]
    >>> engine = PLDEngine([(tails, 100)], 1e-4, ComposedLoss({loss: 100}))
    >>> estimate, lower, upper = engine.epsilon_bracket(1e-5)
    >>> bool(lower <= 4.3771780957 <= upper), round(upper - lower, 6)
    (True, 0.0)
    """

    method = "pld"
    certified = True  # bounds proved, not estimated (never refused for a wide bracket)
    inf_mass = 0.0  # the PLDs carry their own
    #: The tolerance of a delta query's first build (that of eps(1e-5): one build serves both), and the largest
    #: error budget / delta it accepts.  The truncated tail mass relative to the delta of interest and the
    #: smallest one are PLDOptions.tail_fraction and .smallest_tail (the active :class:`afa.PLDOptions`).
    FIRST_TAIL, DELTA_TAIL = 1e-12, 1e-4
    #: FFT rounding (an absolute error of delta) a term's power may keep before the tilted power is formed,
    #: relative to the truncated tail mass: ROUNDING_SLACK * tail_fraction / 16 = 6e-6 of the delta asked
    #: about moves eps by about that / |d log delta / d eps|, well under the default grid's discretization
    #: width, and spares compositions of up to about a thousand steps the tilted power and its wider window.
    ROUNDING_SLACK = 1000.0
    #: Composed PLDs (and per-term builds) kept for later queries, the most recent first.
    CACHED = 4
    #: Seconds a composition of PLDs runs before its progress bar appears (on a terminal only).
    BAR_DELAY = 2.0
    #: Grid points a merged Gaussian's PLD may take before it is split into equal uses (2^c of them).
    GAUSSIAN_POINTS = 2 ** 22

    def __init__(self, terms: list[tuple[LossTails, int]], interval: float, loss: ComposedLoss,
                 powers: dict | None = None):
        largest = INTERVAL_RANGE[1]
        if isinstance(interval, bool) or not isinstance(interval, numbers.Real) or not 0 < interval <= largest:
            raise ValueError(f"value_discretization_interval must be in (0, {largest:g}], got {interval!r}")
        self.interval: float = float(interval)
        merged = _merge_gaussians(terms, self.interval, self.GAUSSIAN_POINTS)
        self.terms: list[tuple[LossTails, int]] = merged[0]
        self._gaussian: tuple | None = merged[1]
        self._powers: collections.OrderedDict = collections.OrderedDict()
        # (tails, count) -> (cutoff, exact power or None): serves any query whose cutoff is not lower; may be
        # shared by the engines of one accountant (a symmetric mechanism's two directions are one loss).
        self._power_cache: dict | None = powers
        self.epsilon_scale: float = loss_epsilon_scale(loss)
        # Beyond an upper bound on the composed finite loss, delta is the mass at +infinity: that bound,
        # raised by its rounding (a sum of count * -log(1 - q)-type terms), and the mass raised by its own.
        self._loss_max: float = _raised_loss_max(loss.loss_max)
        self._floor: float | None = (-max(self._loss_max, 0.0) - self.interval if math.isfinite(self._loss_max)
                                     else None)
        self._inf_mass: float = loss.inf_mass * (1 + 16 * np.finfo(float).eps)
        self._bases: collections.OrderedDict = collections.OrderedDict()
        self._built: collections.OrderedDict = collections.OrderedDict()

    def _exact_powers(self, tail_mass: float) -> list[tuple[LossTails, LossTails] | None]:
        """Each term's uses composed exactly (:meth:`afa.mechanisms.loss_tails.LossTails.exact_power`: finite losses
        whose power fits), or None (every term's, without the ``powers`` cache); atoms dropped below a mass far under
        each term's share of ``tail_mass`` (cached per ``tail_mass``)."""
        cache = self._power_cache
        if cache is None:
            return [None] * len(self.terms)
        if tail_mass not in self._powers:
            uses = sum(count for _, count in self.terms) + (self._gaussian[2] if self._gaussian else 0)
            powers = []
            for tails, count in self.terms:
                cutoff = math.log(tail_mass / (4 * uses)) - math.log(count + 1) - 10
                kept = cache.get((tails, count))
                if kept is None or kept[0] > cutoff:
                    budget.check("composing the finite-output terms exactly")
                    kept = cache[tails, count] = (cutoff, tails.exact_power(count, cutoff))
                powers.append(kept[1])
            _remember(self._powers, tail_mass, powers, self.CACHED)
        self._powers.move_to_end(tail_mass)
        return self._powers[tail_mass]

    def _terms_for(self, build: Callable, tail_mass: float) -> list[tuple[LossTails, int]]:
        """The terms for ``build`` truncated to ``tail_mass`` in all: the merged Gaussian with mu rounded up
        (pessimistic builder) or down, and the exactly composed terms as one use of the measure above
        (pessimistic) or below their loss."""
        side = 0 if build is connect_the_dots else 1
        terms = [(power[side], 1) if power is not None else (tails, count)
                 for (tails, count), power in zip(self.terms, self._exact_powers(tail_mass))]
        if self._gaussian is None:
            return terms
        upper, lower, uses = self._gaussian
        return [(GaussianTails(upper if side == 0 else lower), uses)] + terms

    def bases(self, build: Callable, tail_mass: float) -> list[tuple[DiscretePLD, int]]:
        """Each term's PLD from ``build`` with its count (cached), grids truncated to tail_mass / (4 uses), then
        each end's run of at most that mass cut (:meth:`afa.engines.pld.DiscretePLD.truncated`, moved the safe way), so
        that a term's light tails (an exactly composed term keeps atoms far lighter than that) cost no grid points.

        Parameters
        ----------
        build : callable
            A builder of :mod:`afa.engines.pld`: ``connect_the_dots`` (pessimistic) or ``greedy_hull_optimistic``.
        tail_mass : float
            The mass truncated in all.

        Returns
        -------
        list of (afa.engines.pld.DiscretePLD, int)
            Each term's PLD (the merged Gaussian's first, if any) and its count.
        """
        key = (build, tail_mass)
        if key not in self._bases:
            terms = self._terms_for(build, tail_mass)
            uses = sum(count for _, count in terms)
            built = []
            for tails, count in terms:
                budget.check("building the PLDs of the terms")
                share = tail_mass / (4 * uses)
                built.append((build(tails, self.interval, share, floor=self._floor).truncated(share), count))
            _remember(self._bases, key, built, self.CACHED)
        self._bases.move_to_end(key)
        return self._bases[key]

    def composed(self, build: Callable, tail_mass: float, tilt: float | None = None) -> DiscretePLD:
        """The composition of every term's PLD from ``build`` (a builder of :mod:`afa.engines.pld`), truncated to
        ``tail_mass`` in all, every power and convolution at ``tilt`` (None: each power picks its own;
        cached per builder, tolerance and tilt).

        Returns
        -------
        afa.engines.pld.DiscretePLD
            The composed PLD.
        """
        key = (build, tail_mass, tilt)
        if key not in self._built:
            rounding = self.ROUNDING_SLACK * tail_mass / 4
            composed = None
            bases = self.bases(build, tail_mass)
            # a bar on a terminal once a build has taken BAR_DELAY seconds (afa.progress)
            with progress(total=len(bases), description="composing PLDs", delay=self.BAR_DELAY) as bar:
                for base, count in bases:
                    budget.check("composing the PLDs of the terms")
                    single = base.self_compose(count, tail_mass / 4, rounding, tilt=tilt)
                    composed = (single if composed is None
                                else composed.compose(single, tail_mass / 4, rounding, tilt=tilt))
                    bar.update()
            _remember(self._built, key, composed, self.CACHED)
        self._built.move_to_end(key)
        return self._built[key]

    def bounds(self, tail_mass: float, tilt: float | None = None) -> tuple[DiscretePLD, DiscretePLD]:
        """(pessimistic, optimistic) composed PLDs truncated to ``tail_mass``, composed at ``tilt``.

        Returns
        -------
        pessimistic, optimistic : afa.engines.pld.DiscretePLD
            Their deltas are an upper and a lower bound on the direction's delta.
        """
        return self.composed(connect_the_dots, tail_mass, tilt), self.composed(greedy_hull_optimistic, tail_mass, tilt)

    def tilt_for(self, tail_mass: float, *, delta: float | None = None, epsilon: float | None = None) -> float:
        """The composition's tilt for a query at ``delta`` or at ``epsilon`` (:func:`afa.engines.pld.composition_tilt`
        of the pessimistic bases).

        Returns
        -------
        float
            The Chernoff order for ``delta``, or the saddle point at ``epsilon``.
        """
        return composition_tilt(self.bases(connect_the_dots, tail_mass), delta=delta, epsilon=epsilon)

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bounds from PLDs truncated at FIRST_TAIL, or, where a delta is below their error budget there
        (the tolerance plus both PLDs' slack at its eps) / DELTA_TAIL (truncation or rounding would then
        matter), once more at PLDOptions.tail_fraction times the smallest lower bound among those (the smallest
        upper bound if that is 0; at least PLDOptions.smallest_tail), composed at the saddle point of the
        largest such eps; up to PLDOptions.delta_rounds rounds.  Each bound is certified, so the best of each side
        is kept.

        Returns
        -------
        values, errors : ndarray
            The midpoints and half-widths of the certified brackets, of ``epsilons``' shape.
        """
        epsilons = np.asarray(epsilons, dtype=float)
        pessimistic, optimistic = self.bounds(self.FIRST_TAIL)
        upper, lower = pessimistic.delta(epsilons), optimistic.delta(epsilons)
        error_budget = self.FIRST_TAIL + pessimistic.slack(epsilons) + optimistic.slack(epsilons)
        for _ in range(settings.current().pld.delta_rounds):
            unresolved = np.flatnonzero(upper < error_budget / self.DELTA_TAIL)
            if unresolved.size == 0:
                break
            # The scale of the smallest delta: its lower bound, else the smaller of its upper bound and the
            # Chernoff bound of the composed first-build bases (which sees far below the first build's slack).
            largest = float(np.max(epsilons[unresolved]))
            chernoff = math.exp(chernoff_log_mass(self.bases(connect_the_dots, self.FIRST_TAIL), largest))
            smallest = float(np.min(lower[unresolved])) or min(float(np.min(upper[unresolved])), chernoff)
            tail_mass = min(pld_tail_mass(smallest), self.FIRST_TAIL)
            tilt = self.tilt_for(tail_mass, epsilon=largest)
            pessimistic, optimistic = self.bounds(tail_mass, tilt)
            chosen = epsilons[unresolved]
            upper[unresolved] = np.minimum(upper[unresolved], pessimistic.delta(chosen))
            lower[unresolved] = np.maximum(lower[unresolved], optimistic.delta(chosen))
            refined = tail_mass + pessimistic.slack(chosen) + optimistic.slack(chosen)
            if not np.any(refined < error_budget[unresolved] / 2):  # no progress: another round would not help
                break
            error_budget[unresolved] = np.minimum(error_budget[unresolved], refined)
        lower = np.minimum(lower, upper)
        return (lower + upper) / 2, (upper - lower) / 2

    def upper_delta(self, epsilons: np.ndarray, target: float | None = None) -> np.ndarray:
        """A certified upper bound on delta: exactly the mass at +infinity where every eps is at or beyond the
        largest finite composed loss (Poisson subsampling's add direction for eps >= -count log(1 - q): no
        PLD is built), else the Chernoff bound of the composed pessimistic bases (no convolution: the exact
        composition of the stored measures, whose delta bounds the true one up to their relative errors, has
        finite mass above eps at most min_t e^{K(t) - t eps} and mass at +infinity at most sum_i k_i a_i), or
        the finest pessimistic PLD built so far where that is lower.  Enough to see that a direction stays
        below a target."""
        epsilons = np.asarray(epsilons, dtype=float)
        if np.all(epsilons >= self._loss_max):
            return np.full(np.shape(epsilons), self._inf_mass)
        bases = self.bases(connect_the_dots, self.FIRST_TAIL)
        inf_mass = math.fsum(count * base.inf_mass for base, count in bases)
        growth = math.exp(sum(count * math.log1p(base.relative_error) for base, count in bases))
        chernoff = np.array([math.exp(min(chernoff_log_mass(bases, float(eps)), 0.0)) for eps in epsilons.ravel()])
        bound = np.minimum(1.0, (inf_mass + chernoff.reshape(epsilons.shape)) / (2 - growth) * (1 + 1e-12))
        built = [(tail, tilt) for build, tail, tilt in self._built if build is connect_the_dots]
        if built:
            tail, tilt = min(built, key=lambda key: key[0])
            bound = np.minimum(bound, self.composed(connect_the_dots, tail, tilt).delta(epsilons))
        return bound

    def epsilon_bracket(self, delta: float) -> tuple[float, float, float]:
        """(midpoint, lower, upper) of eps(delta) from the optimistic and pessimistic PLDs, composed at the
        Chernoff order of the composition for delta.

        The midpoint is +inf when the upper bound is.

        Raises
        ------
        AccuracyError
            No finite upper bound was reached although ``delta`` exceeds the mass at +infinity; the error's
            ``bracket`` holds the certified lower bound.
        """
        tail_mass = pld_tail_mass(delta)
        tilt = self.tilt_for(tail_mass, delta=delta)
        pessimistic, optimistic = self.bounds(tail_mass, tilt)
        return bracket_answer(self.method, delta, self._inf_mass, optimistic.epsilon(delta),
                              pessimistic.epsilon(delta))


def pld_tail_mass(delta: float) -> float:
    """The tail mass the PLD truncates for a query about ``delta`` (the active :class:`afa.PLDOptions`)."""
    options = settings.current().pld
    return max(delta * options.tail_fraction, options.smallest_tail)


def _raised_loss_max(loss_max: float) -> float:
    """An upper bound on the composed finite loss raised by its rounding (a sum of count * -log(1 - q)-type
    terms): beyond it delta is the mass at +infinity."""
    return loss_max + 16 * np.finfo(float).eps * abs(loss_max) if math.isfinite(loss_max) else loss_max


def _merge_gaussians(terms: list[tuple[LossTails, int]], interval: float,
                     most_points: int) -> tuple[list[tuple[LossTails, int]], tuple | None]:
    """(the terms other than plain Gaussians, (mu' rounded up, mu' rounded down, c) or None): the plain Gaussians
    as c uses of one Gaussian with parameter mu' = mu / sqrt(c).

    k_i uses of Gaussians with mu_i compose to the Gaussian pair with mu^2 = sum_i k_i mu_i^2 (Sommer,
    Meiser & Mohammadi 2019, Thm 5; Dong, Roth & Su 2022), and so do c uses with mu^2 / c each: an exact
    reduction.  c = 1 (no power, no FFT) unless the PLD of one Gaussian, whose grid holds 0 and reaches about
    mu^2 / 2 + 40 mu, would need more than ``most_points`` points at ``interval``; then the smallest power of two
    that fits.  The float sum (of (mu_i / max mu)^2), square roots and scalings are relatively accurate to
    (n + 12) u for n terms, so mu' (1 +- (n + 12) u) bracket it.
    """
    gaussians = [(tails, count) for tails, count in terms if type(tails) is GaussianTails]
    others = [(tails, count) for tails, count in terms if type(tails) is not GaussianTails]
    if not gaussians:
        return others, None
    largest = max(tails.mu for tails, _ in gaussians)  # scaled: mu_i^2 underflows for mu_i < 1e-154
    mu = largest * math.sqrt(math.fsum(count * (tails.mu / largest) ** 2 for tails, count in gaussians))
    uses = 1
    while (mu ** 2 / (2 * uses) + 40 * mu / math.sqrt(uses)) / interval > most_points and uses < 2 ** 40:
        uses *= 2
    mu /= math.sqrt(uses)
    margin = (len(gaussians) + 12) * np.finfo(float).eps
    return others, (mu * (1 + margin), mu * (1 - margin), uses)


def _kept_or_solved(answers: collections.OrderedDict, delta: float,
                    solve: Callable[[float], tuple[float, float, float]]) -> tuple[float, float, float]:
    """The kept answer for ``delta`` if there is one, else ``solve(delta)``, kept (the latest KEPT_ANSWERS)."""
    if delta in answers:
        answers.move_to_end(delta)
        return answers[delta]
    answer = solve(delta)
    _remember(answers, delta, answer, KEPT_ANSWERS)
    return answer


def _remember(cache: collections.OrderedDict, key, value, size: int) -> None:
    """Store ``value`` under ``key``, forgetting the least recently used entries beyond ``size``."""
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > size:
        cache.popitem(last=False)


class _InversionEngine(Engine):
    """Shared plumbing of the engines that invert a composed CF/MGF numerically.

    Parameters
    ----------
    loss : afa.engines.composition.ComposedLoss
        The direction's composed loss.
    **options
        Passed to the inversion (e.g. the contour's ``numeric_nodes``).

    Raises
    ------
    UnsupportedCompositionError
        The inversion cannot serve the composition (e.g. no continuous part).
    """

    inversion_class: ClassVar[Callable]  # builds the inversion from the composed loss

    def __init__(self, loss: ComposedLoss, **options):
        self.loss = loss
        self.inversion = self.inversion_class(loss, **options)
        self.inf_mass = loss.inf_mass
        #: delta -> (epsilon, lower, upper) of the latest KEPT_ANSWERS eps(delta) queries answered
        self._answers: collections.OrderedDict[float, tuple[float, float, float]] = collections.OrderedDict()

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.inversion.delta(epsilons)

    def _check_query(self, delta: float) -> None:
        """Refuse (AccuracyError) an eps(delta) query the engine cannot resolve, before solving it."""

    def _estimate(self, delta: float) -> tuple[float, float | None, float | None]:
        """(eps, delta's error there, -d delta / d eps there) of the estimate's root; None where unknown."""
        return smallest_epsilon(self._value, delta, self.epsilon_scale), None, None

    def _value(self, epsilon: float) -> float:
        return float(self.delta(np.array([epsilon]))[0][0])

    def _shifted(self, sign: float) -> Callable[[float], float]:
        """delta(eps) + sign * its error, as a function of eps."""
        def delta_of(epsilon: float) -> float:
            values, errors = self.delta(np.array([epsilon]))
            return float(values[0] + sign * errors[0])
        return delta_of

    def epsilon_bracket(self, delta: float) -> tuple[float, float, float]:
        """(epsilon, lower, upper): the root of delta(eps) = delta and, as bounds, the roots of delta -/+ its
        error (from the slope at the estimate where that is verified, else by their own searches).

        (inf, inf, inf) when ``delta`` is at most the mass at +infinity; (inf, lower, inf) when the estimate
        never reaches ``delta``.

        An answer is kept (the latest KEPT_ANSWERS of them): the engine serves one fixed composition, so
        asking again for the same ``delta`` returns it without solving again.

        Raises
        ------
        AccuracyError
            ``delta`` below RESOLUTION_FACTOR times the engine's absolute error (the message names the
            methods to use instead), or the inversion refused.
        """
        return _kept_or_solved(self._answers, delta, self._solve)

    def _solve(self, delta: float) -> tuple[float, float, float]:
        """:meth:`epsilon_bracket` without its kept answers."""
        self._check_query(delta)
        if delta <= self.inf_mass:
            return math.inf, math.inf, math.inf
        epsilon, error, slope = self._estimate(delta)
        if math.isinf(epsilon):  # the estimate never reaches delta; a lower bound on delta still may
            return epsilon, smallest_epsilon(self._shifted(-1.0), delta, self.epsilon_scale), epsilon
        if error is None:
            error = float(self.delta(np.array([epsilon]))[1][0])
        _check_resolution(self, delta, error)
        bracket = _bounds_from_slope(self._value, self._shifted, delta, epsilon, error, slope)
        if bracket is None:
            bracket = (smallest_epsilon(self._shifted(-1.0), delta, self.epsilon_scale, near=epsilon),
                       smallest_epsilon(self._shifted(+1.0), delta, self.epsilon_scale, near=epsilon))
        lower, upper = bracket
        return epsilon, min(lower, epsilon), max(upper, epsilon)

    @property
    def epsilon_scale(self) -> float:
        """The scale of the eps searches (:func:`loss_epsilon_scale` of the composed loss)."""
        return loss_epsilon_scale(self.loss)

    def epsilon_guess(self, delta: float) -> float:
        """A first guess of eps(delta): the Gaussian loss with the composition's variance (Sommer, Meiser & Mohammadi
        2019, Thm 5)."""
        variance = self.inversion.scale ** 2
        return exact.gaussian_epsilon(delta, math.sqrt(variance)) if variance > 0 else 0.0


class QuadratureEngine(_InversionEngine):
    """Real-line Levy inversion (Zhu, Dong & Wang 2022, Algorithm 1, Lemma 18-19) of one direction.

    Parameters
    ----------
    loss : afa.engines.composition.ComposedLoss
        The direction's composed loss; it needs a continuous part and a positive variance.

    Raises
    ------
    UnsupportedCompositionError
        A composition without a continuous part (its CF does not decay) or with zero variance.

    Examples
    --------
    See :class:`Engine`.
    """

    method = "quadrature"
    certified = False
    inversion_class = LevyInversion

    @staticmethod
    def may_resolve(delta: float) -> bool:
        """False where ``delta`` is below what any quadrature resolves: RESOLUTION_FACTOR times the rounding
        of a sum of terms of size up to 1 (its absolute error is never smaller).  A check before building."""
        return bool(delta >= RESOLUTION_FACTOR * UNIT_ROUNDOFF)

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """delta(eps) at ``epsilons`` and the quadrature's absolute error estimate (one for all of them)."""
        values, error = self.inversion.delta(epsilons)
        return values, np.full(values.shape, error)

    def _check_query(self, delta: float) -> None:
        """Refuse early a delta below the resolution (the error is absolute, and never below the rounding
        of a sum of terms of size up to 1: UNIT_ROUNDOFF, checked before building any grid)."""
        _check_resolution(self, delta, UNIT_ROUNDOFF, floor=True)
        _check_resolution(self, delta, float(self.delta(np.array([0.0]))[1][0]))


class ContourEngine(_InversionEngine):
    """Saddle-point contour inversion (:mod:`afa.engines.contour`): delta with relative accuracy.

    Parameters
    ----------
    loss : afa.engines.composition.ComposedLoss
        The direction's composed loss; it needs a continuous part.
    numeric_nodes : int, optional
        The node budget: caps one contour sum's nodes when the composition has numeric MGF terms (subsampled
        mechanisms); default the active :class:`afa.ContourOptions`' ``numeric_nodes``.

    Raises
    ------
    UnsupportedCompositionError
        A composition the contour cannot serve (e.g. no continuous part).

    Examples
    --------
    >>> import afa, numpy as np
    >>> from afa.engines.composition import ComposedLoss
    >>> from afa.engines.base import ContourEngine
    >>> remove, add = afa.Gaussian(sigma=10.0).privacy_losses()
    >>> engine = ContourEngine(ComposedLoss({remove: 100}))
    >>> engine.delta(np.array([1.0]))[0].round(6)
    array([0.126937])
    >>> [round(float(x), 6) for x in engine.epsilon_bracket(1e-5)]
    [4.377178, 4.377178, 4.377178]
    """

    method = "contour"
    certified = False
    inversion_class = staticmethod(contour_inversion)

    def widened(self, numeric_nodes: int) -> ContourEngine:
        """This engine with the node budget ``numeric_nodes``, sharing the node values its inversion has
        evaluated (:meth:`afa.engines.contour.ContourInversion.widened`) but none of its answers.

        Parameters
        ----------
        numeric_nodes : int
            The new budget (see the class's ``numeric_nodes``).

        Returns
        -------
        ContourEngine
        """
        engine = copy.copy(self)
        engine.inversion = self.inversion.widened(numeric_nodes)
        engine._answers = collections.OrderedDict()
        return engine

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """delta(eps) and its error, each checked on a second contour line
        (:meth:`afa.engines.contour.ContourInversion.verify`: refused with AccuracyError if the two lines disagree
        beyond their stated errors).

        Raises
        ------
        AccuracyError
            The two lines disagree, or a contour sum cannot be formed to its accuracy
            (:class:`afa.engines.contour.NodeBudgetError` when it needs more nodes than its budget).
        """
        return self.inversion.delta(epsilons, verify=True)

    def chernoff_delta(self, epsilons: np.ndarray, target: float | None = None) -> np.ndarray:
        """Upper bounds on delta at ``epsilons`` from the MGF on the real axis alone, without a contour sum
        (:meth:`afa.engines.contour.ContourInversion.chernoff_bound`; +inf where the inversion has none): loose,
        but cheap, for a direction that only has to be shown below another.

        Parameters
        ----------
        epsilons : ndarray
            Finite real numbers.
        target : float or None
            If given, a bound at most ``target`` is returned as soon as one is found (the saddle search
            stops early); otherwise the bound at the saddle point.

        Returns
        -------
        ndarray
            The bounds, of ``epsilons``' shape.
        """
        return _pointwise_bounds(getattr(self.inversion, "chernoff_bound", None), epsilons, target)

    def delta_and_slope(self, epsilon: float) -> tuple[float, float, float]:
        """(delta, absolute error, -d delta / d eps) from one contour sum (unchecked: Newton's iterates; the
        bounds of eps(delta) come from checked values, :meth:`_InversionEngine.epsilon_bracket`)."""
        return self.inversion.delta_and_slope(epsilon)

    def _estimate(self, delta: float) -> tuple[float, float | None, float | None]:
        """Newton's method on the contour's delta and slope from :meth:`epsilon_guess`."""
        spread = math.sqrt(max(self.loss.cumulants[1], 0.0)) or None
        epsilon, (_, error, slope) = newton_epsilon(self.delta_and_slope, delta, self.epsilon_guess(delta),
                                                    self.epsilon_scale, spread)
        return epsilon, error, slope

    def epsilon_guess(self, delta: float) -> float:
        """A first guess of eps(delta) (:func:`gaussian_epsilon_guess`): a lattice loss (discrete mechanisms) can
        have its mean far from half its variance; starting where delta is near 1 would cost the contour its widest
        sums (the saddle c -> 0)."""
        return gaussian_epsilon_guess(self.loss, delta)


def gaussian_epsilon_guess(loss: ComposedLoss, delta: float) -> float:
    """A first guess of eps(delta): that of a Gaussian loss N(m, v) with the composition's mean and variance, i.e.
    the Gaussian mechanism's eps (Sommer, Meiser & Mohammadi 2019, Thm 5, loss N(v/2, v)) shifted by m - v/2 (0 at
    least)."""
    mean, variance = loss.cumulants
    if not variance > 0:
        return max(mean, 0.0)
    return max(exact.gaussian_epsilon(delta, math.sqrt(variance)) + mean - variance / 2, 0.0)


def newton_epsilon(delta_and_slope, target: float, start: float, scale: float,
                   spread: float | None = None) -> tuple[float, Any]:
    """The smallest eps >= 0 with delta(eps) <= ``target`` (to a few ulps), and delta_and_slope there.

    Newton's method on log delta, kept in a bracket: ``delta_and_slope(eps)``
    returns (delta, error, -delta'(eps)) of a non-increasing delta with
    delta(eps) -> its mass at infinity < ``target`` (the caller answers inf
    otherwise), so a finite root exists.  A step that leaves the bracket
    [low, high] known so far (delta(low) > target >= delta(high)) is replaced by
    bisection, and so is a step no smaller than half the one two steps before
    once a bracket exists (delta of a lattice-valued loss with little continuous
    noise is a staircase: its local slope says little of the next step); while
    no upper end is known, a step is at most a doubling of eps (or + ``scale``),
    since a slope measured where delta is near 1 can be rounding noise; while no
    lower end is known, a step down is at most 3 ``spread`` (the loss's standard
    deviation, if given: below the root by more, delta nears 1, where a contour
    sum is at its costliest), and one below 0 checks eps = 0 first.  It stops at an eps
    whose delta is at most the target once the step is below 4 ulps of eps, or at any eps whose delta is
    within a quarter of its stated error of the target (closer, the computed delta cannot tell where its
    root lies: the bounds around the root are a few errors / slope wide either way);
    above the target (a steep delta, a step below resolution) it moves up by
    4 ulps (doubling on repeats), so the bracket closes on its upper end.

    Parameters
    ----------
    delta_and_slope : callable
        Maps eps to (delta, error, -delta'(eps)).
    target : float
        The delta to reach, > 0.
    start : float
        The first eps tried (a negative one starts at 0).
    scale : float
        The largest step up (beyond a doubling) while no upper end is known.
    spread : float, optional
        The loss's standard deviation: the largest step down while no lower end is known.

    Returns
    -------
    epsilon : float
        The root found (to a few ulps, or within a quarter of delta's error over its slope).
    result : tuple
        ``delta_and_slope(epsilon)``.

    Raises
    ------
    AccuracyError
        No convergence in MAX_NEWTON_EPSILON steps (the message gives the bracket reached).
    BudgetExceededError
        The query's time budget ran out.
    """
    log_target = math.log(target)
    ulps = 4 * np.finfo(float).eps
    low, high, epsilon = 0.0, math.inf, max(start, 0.0)
    zero_checked, nudges, steps, high_result = False, 0, [], None
    for _ in range(MAX_NEWTON_EPSILON):
        budget.check(f"Newton's method for eps(delta = {target:.3g})")
        result = delta_and_slope(epsilon)
        value, error, slope = result
        gap = math.log(value) - log_target if value > 0 else -math.inf
        if epsilon == 0.0 and gap <= 0:
            return 0.0, result
        if abs(value - target) <= error / 4:  # the target within the value's error: no step resolves more
            return epsilon, result
        if gap > 0:
            low = epsilon
        else:
            high, high_result = epsilon, result
        step = gap * value / slope if slope > 0 and math.isfinite(gap) else math.nan
        if gap <= 0 and (gap == 0 or abs(step) <= ulps * max(1.0, epsilon)):
            return epsilon, result
        if gap > 0 and abs(step) <= ulps * max(1.0, epsilon):
            # delta above the target by less than a step resolves (or a slope too large): up by 4 ulps,
            # doubling on each repeat
            step, nudges = ulps * max(1.0, epsilon) * 2.0 ** nudges, nudges + 1
        else:
            nudges = 0
        proposal = epsilon + step
        steps.append(abs(step))
        stalled = math.isfinite(high) and len(steps) >= 3 and not steps[-1] <= 0.5 * steps[-3]
        lower_known = low > 0 or zero_checked
        if not lower_known and spread is not None:
            proposal = max(proposal, epsilon - 3 * spread)
        if proposal <= 0 and not lower_known:
            proposal, zero_checked = 0.0, True
        elif not low < proposal < high or (stalled and lower_known):
            proposal = 0.5 * (low + high) if math.isfinite(high) else max(2 * low, low + scale)
            steps.clear()
        elif not math.isfinite(high):
            proposal = min(proposal, max(2 * low, low + scale))
        if math.isfinite(high) and high - low <= ulps * max(1.0, high):
            return high, high_result
        epsilon = proposal
    raise AccuracyError(f"Newton's method for eps(delta = {target:.3g}) did not converge "
                        f"in {MAX_NEWTON_EPSILON} steps (bracket [{low:.17g}, {high:.17g}])")


def _bounds_from_slope(value, shifted, delta: float, epsilon: float, error: float, slope: float | None = None):
    """Valid (lower, upper) from the local slope of delta (given, or by differences), checked; None if a check fails.

    With s = -delta'(eps), eps -/+ 2 error / s bracket the roots of delta -/+ error = target
    when delta is locally linear; the bracket is used only if delta - error at the lower end
    is still above the target and delta + error at the upper end below it (which makes both
    valid bounds, since delta -/+ error are non-increasing).  Four evaluations instead of two
    root solves.
    """
    if slope is None:
        step = 1e-7 * max(1.0, epsilon)
        slope = (value(max(epsilon - step, 0.0)) - value(epsilon + step)) / (epsilon + step - max(epsilon - step, 0.0))
    if not slope > 0:
        return None
    width = 2 * error / slope + 4 * np.finfo(float).eps * max(1.0, epsilon)
    lower, upper = max(epsilon - width, 0.0), epsilon + width
    if lower > 0 and not shifted(-1.0)(lower) > delta:
        return None
    if not shifted(+1.0)(upper) <= delta:
        return None
    return lower, upper


def _check_resolution(engine, delta: float, error: float, floor: bool = False) -> None:
    """Refuse a target delta that the engine's absolute error estimate cannot resolve (a certified
    bracket's bounds stay valid however wide, so it is never refused); ``floor``: ``error`` is the least
    the engine's error can be, checked before any work."""
    if not engine.certified and error * RESOLUTION_FACTOR > delta:
        size, best = ("at least", " at best") if floor else ("about", "")
        raise AccuracyError(
            f"delta={delta:.3g} is below what method={engine.method!r} resolves for this composition "
            f"(absolute error {size} {error:.1e}; reliable for delta >= {RESOLUTION_FACTOR * error:.1e}{best}). "
            "For smaller delta use method='contour' (relative accuracy; closed-form mechanisms and "
            "noise-mixture pairs), method='exact' (Gaussian and finite-output "
            "mechanisms only), or the certified brackets of method='pld' or 'certified' (which also "
            "cover subsampled compositions whose CF decays too slowly for the quadrature).")
