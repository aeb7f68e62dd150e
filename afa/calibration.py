"""Calibration: the smallest sigma, or the most steps, or the largest sampling rate meeting (epsilon, delta).

DP-SGD users fix the privacy target and ask for the noise.  Every answer here is
*monotone-safe*: the returned parameter's **upper** bound on epsilon(delta) is at
most the target (never a value that overshoots it, as an estimate-based search
can), and a parameter ``rtol`` less private is shown to miss it (by its *lower*
bound), so the answer is tight to ``rtol``.  The search brackets the parameter
geometrically and runs Brent's method on log delta(target_epsilon) - log delta, a
smooth monotone function of log sigma, with the fast analytic estimate; only the two
final checks use the certifying method (the PLD's pessimistic and optimistic bounds).

For composed Gaussian mechanisms without subsampling the closed form applies
(Sommer, Meiser & Mohammadi 2019, Thm 5 and the calibration after Cor. 5.1, the
"analytic Gaussian mechanism" of Balle & Wang 2018): delta depends on mu =
sqrt(steps) sensitivity / sigma only, so one root in mu gives sigma
(:func:`gaussian_sigma`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from . import _validation as check
from . import budget as budgets
from ._lazy import optimize
from .accountant import Accountant
from .budget import Budget, BudgetExceededError
from .limits import MAX_MU, MAX_NOISE_SHIFT
from .mechanisms.catalog import NEIGHBORING_RELATIONS, Gaussian, Mechanism
from .numerics import exact
from .options import AutoOptions, Options
from .progress import Progress
from .progress import progress as progress_bar
from .results import AccuracyError

#: PLD grid step for the search's estimates (the final checks use the accountant's default).
SEARCH_INTERVAL = 1e-3
#: The search's estimates leave out the step recursion and the doubling (seconds a query where the contour's sums
#: cancel, at 1000 steps of q = 0.001): there the PLD on SEARCH_INTERVAL's grid estimates in a fraction of that.
SEARCH_OPTIONS = Options(auto=AutoOptions(recursions=False))
#: Bracket growth factor and the most growth steps before giving up.
GROWTH, MAX_GROWTH = 2.0, 60
#: The first bracket of a subsampled sigma spans START_SPREAD^-1 .. START_SPREAD times the central-limit start.
START_SPREAD = 1.25
#: The search's gap ``|log delta(target) - log delta|`` is clipped here (delta(target) may be 0 or subnormal).
MAX_LOG_GAP = 1e4
#: Default time budget of one whole calibration (each of its queries also keeps its accountant's budget).
CALIBRATION_SECONDS = 120.0


@dataclass(frozen=True)
class Calibration:
    """A calibrated parameter and the evidence that it is safe and tight.

    Returned by :func:`calibrate_sigma`, :func:`calibrate_steps` and :func:`calibrate_sampling_rate`;
    ``float(calibration)`` is ``value``.

    Attributes
    ----------
    value : float
        The calibrated parameter; it meets the target: its upper epsilon(delta) is ``epsilon_upper`` <= target.
    epsilon_upper : float
        The upper bound on epsilon(delta) at ``value``.
    rejected : float
        A value within ``rtol`` of ``value`` (less private) whose *lower* epsilon was checked to
        exceed the target (+inf when no value was rejected: a sampling rate of 1 meets the target).
    rtol : float
        The relative tolerance of the search.
    method : str
        The accountant method whose bounds certify both ends.
    certified : bool
        Whether the upper bounds are certified (closed form up to rounding, or the PLD backend's
        pessimistic estimate) or estimated.

    Examples
    --------
    >>> import afa
    >>> calibration = afa.calibrate_sigma(1.0, 1e-5, steps=10)
    >>> round(float(calibration), 3), calibration.epsilon_upper <= 1.0, calibration.rejected < calibration.value
    (11.8, True, True)
    """

    value: float
    epsilon_upper: float
    rejected: float
    rtol: float
    method: str
    certified: bool

    def __float__(self) -> float:
        return float(self.value)


def gaussian_sigma(epsilon: float, delta: float, steps: int = 1, sensitivity: float = 1.0) -> float:
    """The smallest sigma with which ``steps`` Gaussian mechanisms satisfy (epsilon, delta)-DP (closed form).

    Parameters
    ----------
    epsilon : float
        Target epsilon, in [0, 1e300].
    delta : float
        Target delta, in (0, 1).
    steps : int, default 1
        Number of uses, an integer in [1, 2**53].
    sensitivity : float, default 1.0
        Sensitivity of each use, > 0.

    Returns
    -------
    float
        sigma = sensitivity sqrt(steps) / mu, to about 1e-12 relative.

    Raises
    ------
    ValueError
        A parameter out of range, or a target met by every Gaussian (even mu = sqrt(steps) sensitivity /
        sigma = 1e150, the largest supported).

    Notes
    -----
    Solves delta_Gauss(epsilon; mu) = delta for mu (Sommer, Meiser & Mohammadi 2019, Thm 5; delta increases
    with mu): the "analytic Gaussian mechanism" (Balle & Wang 2018).  Without subsampling, ``steps`` uses
    of sigma act like one use of sigma / sqrt(steps).

    Examples
    --------
    >>> import afa
    >>> round(afa.gaussian_sigma(1.0, 1e-5), 4)
    3.7306
    >>> round(afa.gaussian_sigma(1.0, 1e-5, steps=10), 4)
    11.7973
    """
    epsilon = check.in_interval("epsilon", epsilon, 0.0, check.MAX_LOSS)
    delta = check.in_interval("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    steps = check.positive_integer("steps", steps, maximum=check.MAX_COUNT)
    sensitivity = check.positive("sensitivity", sensitivity)
    log_delta = math.log(delta)

    def gap(log_mu: float) -> float:
        return _clip(float(exact.gaussian_log_delta(epsilon, math.exp(log_mu))) - log_delta)

    # The composition's loss variance mu^2 must stay <= MAX_MU^2 = MAX_LOSS (Accountant.compose's range).
    low, high = _bracket(gap, 0.0, True, (-math.inf, math.log(MAX_MU)),
                         lambda side, _: f"epsilon={epsilon:g} and delta={delta:g} are met by every Gaussian: even "
                                         f"sqrt(steps) sensitivity / sigma = {MAX_MU:g}, the largest supported, "
                                         "meets them")
    log_mu = optimize.brentq(gap, low, high, xtol=1e-14, rtol=1e-15)
    return sensitivity * math.sqrt(steps) / math.exp(log_mu)


def calibrate_sigma(target_epsilon: float, delta: float, steps: int, sampling_rate: float | None = None, *,
                    sensitivity: float = 1.0, neighboring: str = "add_remove", method: str | None = None,
                    rtol: float = 1e-3, budget: Budget | None = None,
                    sampling_probability: float | None = None, progress: bool | None = None) -> Calibration:
    """The smallest sigma (to ``rtol``) whose upper epsilon(delta) after ``steps`` uses is <= ``target_epsilon``.

    The mechanism is Gaussian(sigma, sensitivity), Poisson-subsampled with ``sampling_rate``
    if given (DP-SGD).

    Parameters
    ----------
    target_epsilon : float
        Target epsilon, in [0, 1e300].
    delta : float
        Target delta, in (0, 1).
    steps : int
        Number of uses, an integer in [1, 2**53].
    sampling_rate : float, optional
        Poisson sampling rate of each step, in (0, 1]; None (default) for no subsampling.
    sensitivity : float, default 1.0
        Sensitivity of each use, > 0.
    neighboring : {"add_remove", "substitution", "replace_special"}, default "add_remove"
        The neighbouring relation.
    method : str, optional
        The accountant method that certifies the answer.  Defaults to "exact" without subsampling
        (closed form) and "pld" with it (the pessimistic discretized PLD: a certified upper bound); any
        accountant method may be named, and the answer is then as safe as that method's upper bound.
    rtol : float, default 1e-3
        Relative tolerance of the answer, in [1e-10, 0.5].
    budget : afa.Budget, optional
        The whole search runs under it (default ``Budget(seconds=CALIBRATION_SECONDS)``, 120 s).
    sampling_probability : float, optional
        Deprecated name of ``sampling_rate`` (warns; it goes in the next version).
    progress : bool, optional
        Show the search's progress on stderr (:mod:`afa.progress`: tqdm if installed, else a line): by
        default (None) only when stderr is a terminal; True always, False never.

    Returns
    -------
    Calibration
        ``value`` is sigma.

    Raises
    ------
    ValueError
        A parameter out of range, or a target met by every sigma the mechanism supports (e.g. a
        sampling probability so small that 1 - (1 - q)^steps <= delta) or by none.
    afa.BudgetExceededError
        The search exceeded ``budget``.
    afa.AccuracyError
        ``method`` does not certify the target near the estimated crossing, or brackets delta too
        loosely to isolate it to ``rtol``.

    Notes
    -----
    Monotone-safe (module docstring): the search runs Brent's method on log delta(target_epsilon) - log delta
    with the fast analytic estimate, and only the two final checks use ``method``.

    Examples
    --------
    >>> import afa
    >>> calibration = afa.calibrate_sigma(1.0, 1e-5, steps=10)
    >>> round(calibration.value, 3), calibration.method, calibration.certified
    (11.8, 'exact', True)
    >>> rejected = afa.Accountant().compose(afa.Gaussian(calibration.rejected), 10)
    >>> calibration.epsilon_upper <= 1.0 < rejected.epsilon(1e-5)
    True
    """
    sampling_rate = check.renamed("sampling_rate", sampling_rate, "sampling_probability", sampling_probability)
    steps = check.positive_integer("steps", steps, maximum=check.MAX_COUNT)
    target_epsilon, delta, rtol, method, build, budget = _common(
        target_epsilon, delta, sampling_rate, sensitivity, neighboring, method, rtol, budget)

    def accountant(sigma: float, search: bool = False) -> Accountant:
        return build(sigma, steps, search)

    # The smallest sigma the mechanism takes (a subsampled Gaussian's shift is bounded, see afa.mechanisms.subsampling).
    subsampled = sampling_rate is not None and sampling_rate < 1
    if (sampling_rate is not None and subsampled
            and -math.expm1(steps * math.log1p(-sampling_rate)) <= delta):
        # delta(eps) <= 1 - (1 - q)^steps at every eps >= 0 whatever sigma (see calibrate_sampling_rate).
        raise ValueError(f"sampling_rate={sampling_rate:g} is so small that every sigma meets the "
                         f"target: in {steps} steps a record is used with probability "
                         f"{-math.expm1(steps * math.log1p(-sampling_rate)):.3g} <= delta={delta:g}")
    # (plain Gaussians: the composed loss variance steps (sensitivity / sigma)^2 <= MAX_MU^2, see compose)
    smallest = sensitivity / MAX_NOISE_SHIFT if subsampled else sensitivity * math.sqrt(steps) / MAX_MU
    start = gaussian_sigma(max(target_epsilon, 1e-3), delta, steps, sensitivity)
    width = 2 * math.log(GROWTH)
    if subsampled:
        central = _central_limit_sigma(max(target_epsilon, 1e-3), delta, steps, sampling_rate, sensitivity)
        if central is None:
            start *= sampling_rate  # privacy amplification: roughly q times less noise
        else:  # the first bracket is narrow: far below the crossing one query can cost seconds
            start, width = central, 2 * math.log(START_SPREAD)
    start = max(start, smallest * GROWTH ** 2)

    def out_of_range(side: str, sigma: float) -> str:
        if side == "low":
            return (f"target_epsilon={target_epsilon:g} is met even by sigma={sigma:g}, the smallest this "
                    f"{'subsampled ' if subsampled else ''}Gaussian supports: every sigma >= {sigma:g} meets it")
        return f"no sigma up to {sigma:g} meets target_epsilon={target_epsilon:g} at delta={delta:g}"

    return _calibrate(accountant, target_epsilon, delta, math.log(start), rtol, method, increasing=False,
                      domain=(math.log(smallest), math.inf), out_of_range=out_of_range, budget=budget,
                      progress=progress, what="sigma", width=width)


def _central_limit_sigma(epsilon: float, delta: float, steps: int, sampling_rate: float,
                         sensitivity: float) -> float | None:
    """The sigma at which the central limit theorem for Poisson-subsampled Gaussians meets (epsilon, delta): a
    starting point for the search, not a bound (None where it does not give a finite positive sigma).

    ``steps`` uses with sampling rate q and noise sigma are about mu-GDP with mu = q sqrt(steps (e^{(sensitivity /
    sigma)^2} - 1)) (Dong, Roth & Su 2022, Sec. 5, its CLT for subsampled compositions), and mu-GDP meets (epsilon,
    delta) at mu = 1 / gaussian_sigma(epsilon, delta).  It errs low for few steps (the composed loss is skewed):
    sigma = 0.43 where 0.64 is needed for 100 steps of q = 0.001 at (0.5, 1e-5), 1.39 against 1.41 for 1000 steps
    of q = 0.01 at (1, 1e-5).
    """
    mu = 1.0 / gaussian_sigma(epsilon, delta)
    ratio = (mu / sampling_rate) ** 2 / steps
    if not 0 < ratio < math.inf:
        return None
    sigma = sensitivity / math.sqrt(math.log1p(ratio))
    return sigma if 0 < sigma < math.inf else None


def calibrate_steps(target_epsilon: float, delta: float, sigma: float, sampling_rate: float | None = None, *,
                    sensitivity: float = 1.0, neighboring: str = "add_remove", method: str | None = None,
                    rtol: float = 1e-3, budget: Budget | None = None,
                    sampling_probability: float | None = None, progress: bool | None = None) -> Calibration:
    """The most steps (an integer, to ``rtol``) of Gaussian(sigma) whose upper epsilon(delta) is <= ``target_epsilon``.

    The mechanism is Gaussian(sigma, sensitivity), Poisson-subsampled with ``sampling_rate`` if
    given; see :func:`calibrate_sigma`.

    Parameters
    ----------
    target_epsilon : float
        Target epsilon, in [0, 1e300].
    delta : float
        Target delta, in (0, 1).
    sigma : float
        Noise standard deviation, > 0 (with ``sensitivity`` in the Gaussian's range, and within the
        subsampled Gaussian's range when subsampled).
    sampling_rate : float, optional
        Poisson sampling rate of each step, in (0, 1]; None (default) for no subsampling.
    sensitivity, neighboring, method, rtol, budget, sampling_probability, progress
        As for :func:`calibrate_sigma`.

    Returns
    -------
    Calibration
        ``value`` is the step count (an integral float); ``rejected`` is a step count at most about rtol
        more whose *lower* epsilon exceeds the target.

    Raises
    ------
    ValueError
        A parameter out of range, even one step exceeding the target, or the target met even after the
        most steps an accountant holds.
    afa.BudgetExceededError
        The search exceeded ``budget``.
    afa.AccuracyError
        ``method`` cannot certify or isolate the crossing (as for :func:`calibrate_sigma`).

    Examples
    --------
    >>> import afa
    >>> calibration = afa.calibrate_steps(1.0, 1e-5, sigma=10.0)
    >>> calibration.value, calibration.rejected
    (7.0, 8.0)
    """
    sampling_rate = check.renamed("sampling_rate", sampling_rate, "sampling_probability", sampling_probability)
    sigma = check.positive("sigma", sigma)
    target_epsilon, delta, rtol, method, build, budget = _common(
        target_epsilon, delta, sampling_rate, sensitivity, neighboring, method, rtol, budget)
    mu = Gaussian(sigma, sensitivity).mu  # sigma's range, checked before the search
    if sampling_rate is not None and sampling_rate < 1:
        Gaussian(sigma, sensitivity).poisson_subsampled(sampling_rate)
    # At most 2**53 uses, and (plain Gaussians) a composed loss variance steps mu^2 <= MAX_LOSS.
    top = min(math.log(check.MAX_COUNT), math.log(check.MAX_LOSS) - 2 * math.log(mu))
    # Plain Gaussians: steps uses of sigma act like one of sigma / sqrt(steps); subsampling at q about like q^2 fewer.
    one_step = gaussian_sigma(max(target_epsilon, 1e-3), delta, 1, sensitivity)
    start = 2 * (math.log(sigma) - math.log(one_step)) - 2 * math.log(sampling_rate or 1.0)

    def out_of_range(side: str, steps: float) -> str:
        if side == "high":
            return (f"target_epsilon={target_epsilon:g} is met even after {int(steps)} steps of Gaussian(sigma="
                    f"{sigma:g}), the most an accountant holds (at most 2**53 uses, a composed loss <= 1e300)")
        return f"even one step of Gaussian(sigma={sigma:g}) exceeds target_epsilon={target_epsilon:g}"

    def accountant(steps: float, search: bool = False) -> Accountant:
        return build(sigma, min(max(1, int(steps)), check.MAX_COUNT), search)

    result = _calibrate(accountant, target_epsilon, delta, min(max(start, 0.0), top), rtol, method, increasing=True,
                        domain=(0.0, top), out_of_range=out_of_range, budget=budget, progress=progress,
                        what="steps")
    if result.value < 1:
        raise ValueError(f"even one step of Gaussian(sigma={sigma:g}) exceeds target_epsilon={target_epsilon:g}")
    # The search ran on the integer counts (piecewise constant in x), so Brent's root is a jump: the safe and
    # rejected ends straddle it and are the counts that were checked.
    return dataclasses.replace(result, value=float(int(result.value)), rejected=float(int(result.rejected)))


def calibrate_sampling_rate(target_epsilon: float, delta: float, sigma: float, steps: int, *,
                            sensitivity: float = 1.0, neighboring: str = "add_remove", method: str = "pld",
                            rtol: float = 1e-3, budget: Budget | None = None,
                            progress: bool | None = None) -> Calibration:
    """The largest Poisson rate q <= 1 (to ``rtol``) at which ``steps`` uses of Gaussian(sigma) meet the target.

    That is, whose upper epsilon(delta) is <= ``target_epsilon``; see :func:`calibrate_sigma`.

    Parameters
    ----------
    target_epsilon : float
        Target epsilon, in [0, 1e300].
    delta : float
        Target delta, in (0, 1).
    sigma : float
        Noise standard deviation, > 0, within the subsampled Gaussian's range (sensitivity / sigma <= 1000).
    steps : int
        Number of uses, an integer in [1, 2**53].
    sensitivity, neighboring, rtol, budget, progress
        As for :func:`calibrate_sigma`.
    method : str, default "pld"
        The accountant method that certifies the answer.

    Returns
    -------
    Calibration
        ``value`` is q; q = 1 (with ``rejected`` = +inf) if even the full batch meets the target.

    Raises
    ------
    ValueError
        A parameter out of range, or no rate q in [floor, 1] isolating the target.
    afa.BudgetExceededError
        The search exceeded ``budget``.
    afa.AccuracyError
        ``method`` cannot certify or isolate the crossing (as for :func:`calibrate_sigma`).

    Notes
    -----
    The rate q with 1 - (1 - q)^steps = delta always meets the target (a rate-q Poisson subsample is
    dominated by ApproxDP(0, q)'s pair, Zhu, Dong & Wang 2022, Thm 10): the search's floor.

    Examples
    --------
    >>> import afa
    >>> calibration = afa.calibrate_sampling_rate(1.0, 1e-5, sigma=5.0, steps=1)
    >>> calibration.value, calibration.rejected
    (1.0, inf)
    """
    sigma = check.positive("sigma", sigma)
    steps = check.positive_integer("steps", steps, maximum=check.MAX_COUNT)
    target_epsilon, delta, rtol, method, build, budget = _common(target_epsilon, delta, 0.5, sensitivity,
                                                                 neighboring, method, rtol, budget)
    Gaussian(sigma, sensitivity).poisson_subsampled(0.5)  # sigma's range for a subsampled Gaussian, checked first

    def accountant(q: float, search: bool = False) -> Accountant:
        return build(sigma, steps, search, min(q, 1.0))

    with budgets.limits(budget):
        full = accountant(1.0).epsilon_result(delta, method=method)
    if full.upper <= target_epsilon:
        return Calibration(1.0, float(full.upper), math.inf, rtol, method, full.certified or full.method == "exact")
    # Whatever the noise, the two sides of a rate-q Poisson subsample's pair share a (1 - q) Q part, so its
    # hockey-stick divergence is <= q at every eps >= 0: it is dominated by ApproxDP(0, q)'s pair, and steps of
    # it by that pair composed, whose delta is 1 - (1 - q)^steps (Zhu, Dong & Wang 2022, Thm 10).  The rate
    # solving 1 - (1 - q)^steps = delta therefore meets the target: a floor for the search.
    floor = -math.expm1(math.log1p(-delta) / steps)
    # Amplification: rate q needs about q times the noise of the full batch.
    start = min(sigma / gaussian_sigma(max(target_epsilon, 1e-3), delta, steps, sensitivity), 0.5)
    start = max(start, floor * GROWTH ** 2)

    def out_of_range(side: str, q: float) -> str:
        return f"no sampling rate q in [{floor:.4g}, 1] isolates target_epsilon={target_epsilon:g} (at q={q:.4g})"

    return _calibrate(accountant, target_epsilon, delta, math.log(start), rtol, method, increasing=True,
                      domain=(math.log(floor), 0.0), out_of_range=out_of_range, budget=budget,
                      progress=progress, what="sampling rate")


def _common(target_epsilon, delta, sampling_rate, sensitivity, neighboring, method, rtol, budget):
    """Validated (target_epsilon, delta, rtol, method), a builder (sigma, steps, search[, q]) -> Accountant
    and the calibration's budget."""
    if budget is None:
        budget = Budget(seconds=CALIBRATION_SECONDS)
    elif not isinstance(budget, Budget):
        raise TypeError(f"budget must be an afa.Budget, got {type(budget).__name__}")
    target_epsilon = check.in_interval("target_epsilon", target_epsilon, 0.0, check.MAX_LOSS)
    delta = check.in_interval("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    sensitivity = check.positive("sensitivity", sensitivity)
    check.choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
    rtol = check.in_interval("rtol", rtol, 1e-10, 0.5)
    if sampling_rate is not None:
        sampling_rate = check.in_interval("sampling_rate", sampling_rate, 0.0, 1.0,
                                                 low_open=True)
    if method is None:
        method = "exact" if sampling_rate is None else "pld"

    def build(sigma: float, steps: int, search: bool = False, q: float | None = sampling_rate):
        mechanism: Mechanism = Gaussian(sigma, sensitivity)
        if q is not None:
            mechanism = mechanism.poisson_subsampled(q)
        if search:
            return Accountant(neighboring, value_discretization_interval=SEARCH_INTERVAL,
                              options=SEARCH_OPTIONS).compose(mechanism, steps)
        return Accountant(neighboring).compose(mechanism, steps)

    return target_epsilon, delta, rtol, method, build, budget


def _calibrate(accountant: Callable[..., Accountant], target_epsilon: float, delta: float, start: float,
               rtol: float, method: str, increasing: bool, domain: tuple[float, float],
               out_of_range: Callable[[str, float], str], budget: Budget, progress: bool | None = None,
               what: str = "parameter", width: float = 2 * math.log(GROWTH)) -> Calibration:
    """Search with the fast analytic estimate, then certify both ends with ``method``, over x = log(parameter).

    Brent's method on log delta(target_epsilon) - log delta (the 'auto' estimate) gives the crossing;
    the returned parameter is rtol / 4 beyond it on the safe side, moved on until ``method``'s
    *upper* delta at target_epsilon is <= delta (so its upper epsilon(delta) is <= target), and
    the rejected one rtol before it is checked to have ``method``'s *lower* delta above delta.
    ``increasing``: whether delta grows with the parameter (steps, q) or falls (sigma).  The search stays
    in ``domain`` (of x); ``out_of_range(side, parameter)`` words the error when the crossing lies beyond
    its "low" or "high" end.  Each (x, method, side) is evaluated once.  ``progress`` (as for
    :func:`calibrate_sigma`) counts the evaluations on a bar described by ``what``; ``width``: of the first
    bracket around ``start`` (:func:`_bracket`).
    """
    deadline = time.monotonic() + budget.seconds
    try:
        with budgets.limits(budget), progress_bar(description=f"calibrating {what}", enabled=progress) as bar:
            return _search(accountant, target_epsilon, delta, start, rtol, method, increasing, domain, out_of_range,
                           bar, width)
    except BudgetExceededError as error:
        if time.monotonic() < deadline:  # a query's own budget ran out: the accountant's message says so
            raise
        raise BudgetExceededError(f"the calibration ran out of its time budget ({budget.seconds:g} s) during: "
                                  f"{error}; raise it with budget=afa.Budget(seconds=...)") from None


def _search(accountant, target_epsilon, delta, start, rtol, method, increasing, domain, out_of_range,
            bar: Progress, width: float) -> Calibration:
    """The body of :func:`_calibrate`, run under its budget."""
    log_delta = math.log(delta)
    known: dict[tuple[float, str, str], float] = {}
    checking: dict[float, Accountant] = {}  # the certifying accountants, kept for the answer's epsilon

    def gap(x: float, use: str = "auto", side: str = "value") -> float:
        if (x, use, side) in known:
            return known[x, use, side]
        # The search may fall back to a coarse PLD (its midpoint is estimate enough); the checks use the
        # default grid.
        if use == "auto":
            evaluated = accountant(math.exp(x), True)
        else:
            if x not in checking:
                checking[x] = accountant(math.exp(x))
            evaluated = checking[x]
        result = evaluated.delta_result(target_epsilon, method=use)
        bar.update()
        certified[0] = certified[0] and (result.certified or result.method == "exact")
        value = getattr(result, side)
        known[x, use, side] = _clip(math.log(value) - log_delta if value > 0 else -math.inf)
        return known[x, use, side]
    certified = [True]  # whether every evaluation so far had certified (or exact) bounds

    low, high = _bracket(gap, start, increasing, domain, lambda side, x: out_of_range(side, math.exp(x)), width)
    root = optimize.brentq(gap, low, high, xtol=rtol / 8, rtol=1e-15)
    toward_safety = -rtol / 4 if increasing else rtol / 4
    safe = root + toward_safety
    certified[0] = True  # only the certifying evaluations count from here
    bar.describe(f"certifying with method={method!r}")
    for _ in range(MAX_GROWTH):
        if gap(safe, method, "upper") <= 0:
            break
        safe += toward_safety
    else:
        raise AccuracyError(f"method={method!r} does not certify the target near the estimated crossing")
    unsafe = safe - 4 * toward_safety
    if not gap(unsafe, method, "lower") > 0:
        raise AccuracyError(f"calibration did not isolate the target to rtol={rtol:g}: method={method!r} "
                            "brackets delta too loosely here (a coarse discretization, or a delta below the normal "
                            "range, known only to within a subnormal); use a larger rtol")
    value = math.exp(safe)
    epsilon_upper = float(checking[safe].epsilon_result(delta, method=method).upper)
    return Calibration(value, epsilon_upper, math.exp(unsafe), rtol, method, certified[0])


def _clip(log_gap: float) -> float:
    """The search's gap, finite for Brent's method (delta(target) may be 0, or above a subnormal delta)."""
    return min(max(log_gap, -MAX_LOG_GAP), MAX_LOG_GAP)


def _bracket(gap: Callable[[float], float], start: float, increasing: bool, domain: tuple[float, float],
             out_of_range: Callable[[str, float], str], width: float = 2 * math.log(GROWTH)) -> tuple[float, float]:
    """(low, high) around the root of a monotone ``gap`` (increasing or not), moved geometrically from ``start``
    within ``domain``; a ValueError worded by ``out_of_range(side, x)`` if the root lies beyond its end ``side``.

    The first bracket is ``width`` wide around ``start``; each move doubles the width up to 2 log(GROWTH)."""
    widest = max(width, 2 * math.log(GROWTH))
    low = min(max(start - width / 2, domain[0]), domain[1] - width)
    low, high = max(low, domain[0]), min(low + width, domain[1])
    for _ in range(MAX_GROWTH):
        g_low, g_high = gap(low), gap(high)
        if (g_low > 0) != (g_high > 0):
            return low, high
        if (g_low > 0) == increasing:  # both above the root's level on its rising side: go down
            if low <= domain[0]:
                raise ValueError(out_of_range("low", low))
            width = min(2 * width, widest)
            low, high = max(low - width, domain[0]), low
        else:
            if high >= domain[1]:
                raise ValueError(out_of_range("high", high))
            width = min(2 * width, widest)
            low, high = high, min(high + width, domain[1])
    side = "low" if (gap(low) > 0) == increasing else "high"
    raise ValueError(out_of_range(side, low if side == "low" else high))
