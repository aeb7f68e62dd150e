"""Per-direction engines behind the accountant, and the shared epsilon(delta) solver.

An engine answers delta(eps) for one direction of the composition with an
absolute error for each value.  Two exist so far:

* :class:`ExactEngine` -- closed forms: composed Gaussians (papers/004
  Thm 5) convolved with the exact composition of every finite-output
  mechanism (papers/002 Exp 2 uses this for RR x Gaussian); only rounding
  error remains.
* :class:`QuadratureEngine` -- the real-line Levy inversion of the composed
  CF (:mod:`afa.quadrature`); its error is the quadrature's estimate.
* :class:`ContourEngine` -- the saddle-point contour inversion of the MGF
  (:mod:`afa.contour`); its error is relative to delta.
* :class:`CertifiedEngine` -- papers/002 Algorithm 2 for one subsampled mechanism.
* :class:`PLDEngine` -- the discretized PLD backend (:mod:`afa.pld`): certified lower and
  upper bounds for every mechanism that has loss tails.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr, logsumexp

from . import budget, exact
from .certified import CertifiedBracket
from .composition import ComposedLoss
from .contour import contour_inversion
from .discrete import LOG_NEGLIGIBLE, DiscreteComposition, verified_epsilon_bounds
from .loss_tails import LossTails
from .pld import DiscretePLD, connect_the_dots, greedy_hull_optimistic
from .quadrature import LevyInversion
from .results import AccuracyError

#: Relative rounding error assumed for closed-form values.
EXACT_RTOL = 1e-13
#: Unit roundoff of float64.
UNIT_ROUNDOFF = np.finfo(float).eps / 2
#: epsilon(delta) needs delta to exceed the engine's absolute error by this factor.
RESOLUTION_FACTOR = 100.0
#: Engines whose bounds are certified (never refused for a wide bracket).
CERTIFIED_METHODS = ("certified", "pld")
#: Widest eps bracket (relative to max(1, eps)) ClosedFormEngine returns before refusing.
CLOSED_FORM_EPSILON_RTOL = 1e-8
#: Iterations of the eps(delta) Newton solver (bisection steps included).
MAX_NEWTON_EPSILON = 100


def loss_epsilon_scale(loss: ComposedLoss) -> float:
    """A scale for bracketing eps(delta): the composed loss's |mean| plus ten standard deviations, at least 1."""
    mean, variance = loss.cumulants
    return max(1.0, abs(mean) + 10 * math.sqrt(max(variance, 0.0)))


class ExactEngine:
    """delta(eps) = m + sum_j w_j delta_Gauss(eps - l_j; mu) for Gaussians and finite-output mechanisms,
    with error bounds.

    The finite-output part is composed exactly (:class:`afa.discrete.DiscreteComposition`: atoms
    with position and mass error bounds, negligible atoms dropped into a counted mass).  Without
    Gaussians (mu = 0) delta is the atoms' hockey stick with its error bound
    (:func:`afa.discrete.hockey_stick_with_error`) and eps(delta) a verified bracket
    (:meth:`afa.discrete.DiscreteComposition.epsilon_bounds`); a composition too large to enumerate
    in full is composed as far as each query needs, and a query that needs more is refused
    (:class:`afa.discrete.CompositionTooLargeError`, an AccuracyError).  With Gaussians the composed
    Gaussian profile (Sommer, Meiser & Mohammadi 2019, Thm 5) is mixed over the atoms, and the
    bounds are the same mixture over the atoms moved to the ends of their position intervals and
    masses at the ends of theirs, widened by the closed form's relative error EXACT_RTOL; eps(delta)
    is the estimate's root with bounds verified against them (:func:`afa.discrete.verified_epsilon_bounds`).
    """

    method = "exact"

    def __init__(self, mu: float, discrete: ComposedLoss):
        self.mu = mu
        self.inf_mass = discrete.inf_mass
        self.composition = DiscreteComposition([(loss.atoms, count) for loss, count in discrete.terms.items()],
                                               discrete.inf_mass)
        if mu > 0 and self.composition.full is None:
            self.composition.compose(-math.inf, LOG_NEGLIGIBLE)  # raises CompositionTooLargeError, with the sizes
        self.atoms = self.composition.full

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        epsilons = np.asarray(epsilons, dtype=float)
        if self.mu == 0:
            return self.composition.delta(epsilons)
        value, lower, upper = self._mixture_bounds(epsilons)
        return value, np.maximum(upper - value, value - lower)

    def _mixture_bounds(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(value, lower, upper) of m + sum_j w_j delta_Gauss(eps - l_j) (mu > 0)."""
        atoms, mu = self.atoms, self.mu
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
            upper = self.inf_mass + inf_error + np.exp(log_upper) * (1 + rtol + 2 * UNIT_ROUNDOFF * np.abs(log_upper))
            lower = self.inf_mass - inf_error + np.exp(log_lower) * (1 - rtol - 2 * UNIT_ROUNDOFF * np.abs(log_lower))
        if atoms.log_dropped > -math.inf:  # atoms dropped as negligible: each adds at most its mass
            upper = upper + math.exp(atoms.log_dropped)
        # A Gaussian profile is positive everywhere: below the smallest double, the bound is that double.
        upper = np.where(upper > 0, upper, 5e-324)
        return value, np.minimum(lower, value), np.maximum(upper, value)

    def _mixture_slope(self, epsilon: float) -> float:
        """-d delta / d eps = sum_j w_j e^y Phi(-mu/2 - y/mu), y = eps - l_j (mu > 0)."""
        gap = epsilon - self.atoms.losses
        return float(np.exp(logsumexp(self.atoms.log_masses + gap + log_ndtr(-self.mu / 2 - gap / self.mu))))

    def epsilon_bracket(self, delta: float) -> tuple[float, float, float]:
        """(estimate, lower, upper) of eps(delta), the bounds verified against delta -/+ its error bound."""
        if self.mu == 0:
            return self.composition.epsilon_bounds(delta)
        if delta < self.inf_mass * (1 - 1e-12):
            return math.inf, math.inf, math.inf
        pure = self.atoms.size == 1 and self.atoms.losses[0] == 0 and self.inf_mass == 0
        if pure:
            estimate = exact.gaussian_epsilon(delta, self.mu)
        else:
            atoms = self.atoms
            estimate = smallest_epsilon(lambda eps: self.inf_mass + float(np.exp(exact.mixture_log_delta(
                np.array([eps]), atoms.losses, atoms.log_masses, self.mu))[0]), delta, self.epsilon_scale)
        if math.isinf(estimate):
            return math.inf, 0.0, math.inf

        def evaluate(eps: float) -> tuple[float, float, float]:
            value, lower, upper = (float(x[0]) for x in self._mixture_bounds(np.array([eps])))
            return value, max(upper - value, value - lower), self._mixture_slope(eps)

        lower, upper = verified_epsilon_bounds(evaluate, delta, estimate, 0.0, math.inf)
        return estimate, min(lower, estimate), max(upper, estimate)

    def epsilon(self, delta: float) -> float:
        """The estimate of :meth:`epsilon_bracket`."""
        return self.epsilon_bracket(delta)[0]

    @property
    def epsilon_scale(self) -> float:
        reach = max(abs(self.composition.top), abs(self.composition.bottom))
        return max(1.0, self.mu ** 2 / 2 + 10 * self.mu + reach)


class ClosedFormEngine:
    """delta(eps) of one direction from a closed-form function of eps returning (values, errors).

    Used for one use of :class:`afa.DataDependentGaussian`
    (:func:`afa.exact.data_dependent_gaussian_delta`, Zhu, Dong & Wang 2022, App. A Example 15) and for
    one use of any other mechanism with a continuous loss, from its loss tails
    (:meth:`afa.loss_tails.LossTails.hockey_stick_with_error`).  eps(delta) is the root of the values
    with bounds verified against values -/+ errors (:func:`afa.discrete.verified_epsilon_bounds`), so a
    delta far below the errors is still answered where eps is determined (next to a bounded loss's top,
    where delta's error is its top's rounding); a bracket wider than CLOSED_FORM_EPSILON_RTOL (relative)
    is refused, so that 'auto' moves on.
    """

    method = "exact"

    def __init__(self, delta_and_error: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], loss: ComposedLoss):
        self.delta_and_error = delta_and_error
        self.inf_mass = loss.inf_mass
        self.epsilon_scale = loss_epsilon_scale(loss)

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values, errors = self.delta_and_error(epsilons)
        return np.asarray(values, dtype=float), np.asarray(errors, dtype=float)

    def epsilon(self, delta: float) -> float:
        """The estimate of :meth:`epsilon_bracket`."""
        return self.epsilon_bracket(delta)[0]

    def epsilon_bracket(self, delta: float) -> tuple[float, float, float]:
        """(estimate, lower, upper) of eps(delta), the bounds verified against delta -/+ its error."""
        def value(eps: float) -> float:
            return float(self.delta(np.array([eps]))[0][0])

        estimate = smallest_epsilon(value, delta, self.epsilon_scale)
        if math.isinf(estimate):
            lower = smallest_epsilon(lambda eps: float(np.subtract(*self.delta(np.array([eps])))[0]), delta,
                                     self.epsilon_scale)
            return estimate, (0.0 if math.isfinite(lower) else lower), estimate

        def evaluate(eps: float) -> tuple[float, float, float]:
            values, errors = self.delta(np.array([eps - step(eps), eps, eps + step(eps)]))
            slope = max((values[0] - values[2]) / (2 * step(eps)), 0.0)
            return float(values[1]), float(errors[1]), slope

        def step(eps: float) -> float:
            return 1e-7 * max(1.0, abs(eps))

        lower, upper = verified_epsilon_bounds(evaluate, delta, estimate, 0.0, math.inf)
        lower, upper = min(lower, estimate), max(upper, estimate)
        if not upper - lower <= CLOSED_FORM_EPSILON_RTOL * max(1.0, abs(estimate)):
            raise AccuracyError(
                f"delta={delta:.3g} is below what method='exact' resolves for this mechanism: its closed form's "
                f"error leaves eps in [{lower:.17g}, {upper:.17g}]. Use method='contour' (relative accuracy) or "
                "the certified brackets of method='pld' or 'certified'.")
        return estimate, lower, upper


class CertifiedEngine:
    """Certified bracket of one subsampled Gaussian/Laplace mechanism composed k times (:mod:`afa.certified`).

    papers/002 Algorithm 2, Lemma 40, Thm 44: delta's value is the bracket's midpoint (an
    estimate), its error the half-width; lower and upper are certified bounds.
    """

    method = "certified"
    inf_mass = 0.0

    def __init__(self, loss: ComposedLoss):
        pair = count = None
        if len(loss.terms) == 1:
            (term, count), = loss.terms.items()
            pair = term.noise_pair
        if pair is None or count != int(count):
            raise ValueError("method='certified' needs a composition of one subsampled Gaussian or Laplace "
                             "mechanism (any count)")
        self.bracket = CertifiedBracket(pair, int(count))
        self.epsilon_scale = loss_epsilon_scale(loss)

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lower, upper = self.bracket.delta(epsilons)
        return (lower + upper) / 2, (upper - lower) / 2

    def epsilon(self, delta: float) -> None:
        return None


class PLDEngine:
    """Certified bracket of one direction from discretized PLDs (:mod:`afa.pld`, papers/001, papers/003).

    Every term's loss tails give a connect-the-dots pessimistic PLD (an upper bound on delta,
    papers/001 Sec. 4) and a greedy-hull optimistic one (a lower bound, Sec. 5); counts are FFT
    powers and distinct terms FFT convolutions.  The tail truncation follows the delta asked
    about: mass TAIL_FRACTION times below it (papers/003 Sec. 5.2 with a threshold scaled to the
    query, not a fixed 1e-15), so tiny deltas keep a finite, tight bracket.  delta's value is the
    midpoint (an estimate) and its error the half-width; lower and upper are certified.
    """

    method = "pld"
    inf_mass = 0.0  # the PLDs carry their own; solve_epsilon uses epsilon_bracket
    #: Truncated tail mass relative to the delta of interest (eps queries), the tolerance of a delta query's
    #: first build (that of eps(1e-5): one build serves both), and the largest error budget / delta it accepts.
    TAIL_FRACTION, FIRST_TAIL, SMALLEST_TAIL, DELTA_TAIL = 1e-7, 1e-12, 1e-300, 1e-4
    #: FFT rounding (an absolute error of delta) a term's power may keep before the tilted power is formed,
    #: relative to the truncated tail mass: ROUNDING_SLACK * TAIL_FRACTION / 16 = 6e-6 of the delta asked
    #: about moves eps by about that / |d log delta / d eps|, well under the default grid's discretization
    #: width, and spares compositions of up to about a thousand steps the tilted power and its wider window.
    ROUNDING_SLACK = 1000.0

    def __init__(self, terms: list[tuple[LossTails, int]], interval: float, loss: ComposedLoss):
        self.terms, self.interval = terms, interval
        self.epsilon_scale = loss_epsilon_scale(loss)
        # Beyond an upper bound on the composed finite loss, delta is the mass at +infinity: that bound,
        # raised by its rounding (a sum of count * -log(1 - q)-type terms), and the mass raised by its own.
        self._loss_max = loss.loss_max + 16 * np.finfo(float).eps * abs(loss.loss_max) \
            if math.isfinite(loss.loss_max) else loss.loss_max
        self._inf_mass = loss.inf_mass * (1 + 16 * np.finfo(float).eps)
        self._built: dict[tuple[Callable, float], DiscretePLD] = {}

    def composed(self, build: Callable, tail_mass: float) -> DiscretePLD:
        """The composition of every term's PLD from ``build`` (a builder of :mod:`afa.pld`), truncated to
        ``tail_mass`` in all (cached per builder and tolerance)."""
        if (build, tail_mass) not in self._built:
            uses = sum(count for _, count in self.terms)
            composed = None
            for tails, count in self.terms:
                single = build(tails, self.interval, tail_mass / (4 * uses)).self_compose(
                    count, tail_mass / 4, self.ROUNDING_SLACK * tail_mass / 4)
                composed = single if composed is None else composed.compose(single, tail_mass / 4)
            self._built[build, tail_mass] = composed
        return self._built[build, tail_mass]

    def bounds(self, tail_mass: float) -> tuple[DiscretePLD, DiscretePLD]:
        """(pessimistic, optimistic) composed PLDs truncated to ``tail_mass``."""
        return self.composed(connect_the_dots, tail_mass), self.composed(greedy_hull_optimistic, tail_mass)

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bounds from PLDs truncated at FIRST_TAIL, or, when a delta is below their error budget there
        (FIRST_TAIL plus both PLDs' slack at its eps) / DELTA_TAIL (truncation or rounding would then matter),
        once more at TAIL_FRACTION times the smallest lower bound (the smallest upper bound if that is 0; at
        least SMALLEST_TAIL)."""
        pessimistic, optimistic = self.bounds(self.FIRST_TAIL)
        upper, lower = pessimistic.delta(epsilons), optimistic.delta(epsilons)
        budget = self.FIRST_TAIL + pessimistic.slack(epsilons) + optimistic.slack(epsilons)
        if np.any(upper < budget / self.DELTA_TAIL):
            smallest = float(np.min(lower)) or float(np.min(upper))  # a lower bound of 0 says nothing of the scale
            tail_mass = max(smallest * self.TAIL_FRACTION, self.SMALLEST_TAIL)
            pessimistic, optimistic = self.bounds(min(tail_mass, self.FIRST_TAIL))
            upper, lower = pessimistic.delta(epsilons), optimistic.delta(epsilons)
        return (lower + upper) / 2, (upper - lower) / 2

    def epsilon(self, delta: float) -> None:
        return None

    def cheap_upper(self, epsilons: np.ndarray) -> np.ndarray:
        """A certified upper bound on delta: exactly the mass at +infinity where every eps is at or beyond the
        largest finite composed loss (Poisson subsampling's add direction for eps >= -count log(1 - q): no
        PLD is built), else from the finest pessimistic PLD built so far (else the first tolerance's,
        pessimistic only).  Enough to see that a direction stays below a target."""
        if np.all(epsilons >= self._loss_max):
            return np.full(np.shape(epsilons), self._inf_mass)
        built = [tail for build, tail in self._built if build is connect_the_dots]
        return self.composed(connect_the_dots, min(built, default=self.FIRST_TAIL)).delta(epsilons)

    def epsilon_bracket(self, delta: float) -> tuple[float, float, float]:
        """(midpoint, lower, upper) of eps(delta) from the optimistic and pessimistic PLDs."""
        pessimistic, optimistic = self.bounds(max(delta * self.TAIL_FRACTION, self.SMALLEST_TAIL))
        upper, lower = pessimistic.epsilon(delta), optimistic.epsilon(delta)
        return (lower + upper) / 2 if math.isfinite(upper) else upper, lower, upper


class _InversionEngine:
    """Shared plumbing of the engines that invert a composed CF/MGF numerically."""

    method: str
    inversion_class: Callable  # builds the inversion from the composed loss

    def __init__(self, loss: ComposedLoss, **options):
        self.loss = loss
        self.inversion = self.inversion_class(loss, **options)
        self.inf_mass = loss.inf_mass

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.inversion.delta(epsilons)

    def epsilon(self, delta: float) -> None:
        return None

    @property
    def epsilon_scale(self) -> float:
        return loss_epsilon_scale(self.loss)

    def epsilon_guess(self, delta: float) -> float:
        """A first guess of eps(delta): the Gaussian loss with the composition's variance (papers/004 Thm 5)."""
        variance = self.inversion.scale ** 2
        return exact.gaussian_epsilon(delta, math.sqrt(variance)) if variance > 0 else 0.0


class QuadratureEngine(_InversionEngine):
    """Real-line Levy inversion (papers/002 Algorithm 1, Lemma 18-19) of one direction."""

    method = "quadrature"
    inversion_class = LevyInversion

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values, error = self.inversion.delta(epsilons)
        return values, np.full(values.shape, error)

    def epsilon(self, delta: float) -> None:
        """No closed form; refuses early a delta below the resolution (the error is absolute)."""
        _check_resolution(self, delta, float(self.delta(np.array([0.0]))[1][0]))
        return None


class ContourEngine(_InversionEngine):
    """Saddle-point contour inversion (:mod:`afa.contour`): delta with relative accuracy."""

    method = "contour"
    inversion_class = staticmethod(contour_inversion)

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """delta(eps) and its error, each checked on a second contour line (:meth:`afa.contour.ContourInversion.verify`:
        refused with AccuracyError if the two lines disagree beyond their stated errors)."""
        return self.inversion.delta(epsilons, verify=True)

    def delta_and_slope(self, epsilon: float) -> tuple[float, float, float]:
        """(delta, absolute error, -d delta / d eps) from one contour sum (unchecked: Newton's iterates; the
        bounds of eps(delta) come from checked values, :func:`solve_epsilon`)."""
        return self.inversion.delta_and_slope(epsilon)

    def epsilon_guess(self, delta: float) -> float:
        """A first guess of eps(delta): that of a Gaussian loss N(m, v) with the composition's mean and variance,
        i.e. the Gaussian mechanism's eps (papers/004 Thm 5, loss N(v/2, v)) shifted by m - v/2.  A lattice
        loss (discrete mechanisms) can have m far from v/2; starting where delta is near 1 would cost the
        contour its widest sums (the saddle c -> 0)."""
        mean, variance = self.loss.cumulants
        if not variance > 0:
            return max(mean, 0.0)
        return max(exact.gaussian_epsilon(delta, math.sqrt(variance)) + mean - variance / 2, 0.0)


def upper_delta(engine, epsilons: np.ndarray) -> np.ndarray:
    """An upper bound on delta at ``epsilons`` (certified or estimated, as the engine's), as cheaply as it allows."""
    cheap = getattr(engine, "cheap_upper", None)
    if cheap is not None:
        return cheap(epsilons)
    values, errors = engine.delta(epsilons)
    return values + errors


def newton_epsilon(delta_and_slope, target: float, start: float, scale: float,
                   spread: float | None = None) -> tuple[float, tuple]:
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
    whose delta is at most the target once the step is below 4 ulps of eps;
    above the target (a steep delta, a step below resolution) it moves up by
    4 ulps (doubling on repeats), so the bracket closes on its upper end.
    """
    log_target = math.log(target)
    ulps = 4 * np.finfo(float).eps
    low, high, epsilon = 0.0, math.inf, max(start, 0.0)
    zero_checked, nudges, steps, high_result = False, 0, [], None
    for _ in range(MAX_NEWTON_EPSILON):
        budget.check(f"Newton's method for eps(delta = {target:.3g})")
        result = delta_and_slope(epsilon)
        value, _, slope = result
        gap = math.log(value) - log_target if value > 0 else -math.inf
        if epsilon == 0.0 and gap <= 0:
            return 0.0, result
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


def smallest_epsilon(delta_of, target: float, scale: float, near: float | None = None) -> float:
    """The smallest eps >= 0 with delta_of(eps) <= target, for non-increasing delta_of.

    Brent's method on log delta (never an absolute delta tolerance); returns
    +inf when delta_of stays above ``target`` for every eps (mass at infinity).
    ``near`` is a guess of the root: the bracket then grows outwards from it.
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
        low, high = high, 2 * high
        if high > 1e7:
            return math.inf
    return brentq(gap, low, high, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=200)


def solve_epsilon(engine, delta: float) -> tuple[float, float, float]:
    """(epsilon, lower, upper) for one direction: the root of delta(eps) = delta and of delta -/+ error."""
    def value(eps):
        return float(engine.delta(np.array([eps]))[0][0])

    def shifted(sign):
        def delta_of(eps):
            values, errors = engine.delta(np.array([eps]))
            return float(values[0] + sign * errors[0])
        return delta_of

    if hasattr(engine, "epsilon_bracket"):
        return engine.epsilon_bracket(delta)
    closed = engine.epsilon(delta)
    if closed is None and delta <= engine.inf_mass:
        closed = math.inf
    newton = getattr(engine, "delta_and_slope", None)
    slope = None
    if closed is not None:
        epsilon = closed
    elif newton is not None:
        spread = math.sqrt(max(engine.loss.cumulants[1], 0.0)) or None
        epsilon, (_, error, slope) = newton_epsilon(newton, delta, engine.epsilon_guess(delta), engine.epsilon_scale,
                                                    spread)
    else:
        epsilon = smallest_epsilon(value, delta, engine.epsilon_scale)
    if math.isinf(epsilon):  # the estimate never reaches delta; a lower bound on delta still may
        lower = epsilon if closed is not None else smallest_epsilon(shifted(-1.0), delta, engine.epsilon_scale)
        return epsilon, lower, epsilon
    if slope is None:
        error = float(engine.delta(np.array([epsilon]))[1][0])
    _check_resolution(engine, delta, error)
    bracket = _bounds_from_slope(value, shifted, delta, epsilon, error, slope)
    if bracket is None:
        bracket = (smallest_epsilon(shifted(-1.0), delta, engine.epsilon_scale, near=epsilon),
                   smallest_epsilon(shifted(+1.0), delta, engine.epsilon_scale, near=epsilon))
    lower, upper = bracket
    return epsilon, min(lower, epsilon), max(upper, epsilon)


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


def _check_resolution(engine, delta: float, error: float) -> None:
    """Refuse a target delta that the engine's absolute error estimate cannot resolve (a certified
    bracket's bounds stay valid however wide, so it is never refused)."""
    if engine.method not in CERTIFIED_METHODS and error * RESOLUTION_FACTOR > delta:
        raise AccuracyError(
            f"delta={delta:.3g} is below what method={engine.method!r} resolves for this composition "
            f"(absolute error about {error:.1e}; reliable for delta >= {RESOLUTION_FACTOR * error:.1e}). "
            "For smaller delta use method='contour' (relative accuracy; closed-form and subsampled "
            "mechanisms, not MixtureOfGaussians), method='exact' (Gaussian and finite-output "
            "mechanisms only), or the certified brackets of method='pld' or 'certified' (which also "
            "cover subsampled compositions whose CF decays too slowly for the quadrature).")
