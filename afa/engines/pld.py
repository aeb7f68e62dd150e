"""Discretized privacy-loss distributions (PLDs) on a uniform loss grid, composed by FFT.

A :class:`DiscretePLD` is a measure on the loss grid ``interval * (offset + arange(n))`` plus a
mass at +infinity: a discretized PLD (Google DP team 2025, Sec. 2).  Builders turn
one direction of a dominating pair, seen through its loss tails (:class:`afa.mechanisms.loss_tails.LossTails`),
into one:

* :func:`privacy_buckets` -- round the loss up (pessimistic) or down (optimistic) to the grid
  (Google DP team 2025, Sec. 2.1; Doroshenko et al. 2022, Secs. 4.1 and 5.2);
* :func:`connect_the_dots` -- the best pessimistic PLD on the grid: its hockey-stick curve joins
  the true curve's values at the grid points by straight lines in e^eps (Doroshenko et al. 2022, Sec. 4,
  Lemma 4.1; Google DP team 2025, Sec. 2.2);
* :func:`greedy_hull_optimistic` -- tangent-line candidates and their lower convex hull
  (Doroshenko et al. 2022, Sec. 5.1, Algorithm 2, with the tangents at both ends of each grid segment).

Composition is convolution (Google DP team 2025 Obs. 3): :meth:`DiscretePLD.compose` by FFT,
:meth:`DiscretePLD.self_compose` by one FFT power on a window chosen by Chernoff bounds
(Google DP team 2025, Sec. 5.2), or, for a few uses whose FFT rounding would matter, by direct convolutions.
:meth:`DiscretePLD.delta_of_composition` evaluates the divergence of a composition of two PLDs
without convolving them (Google DP team 2025, Sec. 5.1).

Soundness.  Write delta_S(eps) = inf_mass + sum_i p_i (1 - e^{eps - x_i})_+ for the stored measure
S.  Each DiscretePLD stands for an exact positive measure T that dominates the true pair
(pessimistic: delta(eps) <= delta_T(eps)) or is dominated by it (optimistic: delta_T(eps) <= delta(eps)),
and its stored measure is

    S = (1 + theta) T + E  (+ positive mass if pessimistic, - some of T's mass if optimistic),

with |theta_i| <= rho (``relative_error``) pointwise and a signed error E on the grid (none at +inf)
whose l1 norm sum_i |E_i| and tilted norm sum_i |E_i| e^{lam (x_i - a)} are both at most ``error``
(lam = ``tilt``, a = ``decay_start``).  As 0 <= (1 - e^{eps - x})_+ <= 1 and e^{lam x} >= e^{lam eps} for
x > eps, sum_{x_i > eps} |E_i| <= eta(eps) = error e^{-lam max(eps - a, 0)}, hence

    pessimistic:  delta(eps) <= (delta_S(eps) + eta(eps)) / (1 - rho),
    optimistic:   delta(eps) >= (delta_S(eps) - eta(eps)) / (1 + rho)       for every real eps.

:meth:`DiscretePLD.delta` and :meth:`DiscretePLD.epsilon` report these bounds, with the rounding of
the evaluation added, so pessimistic answers are certified upper bounds and optimistic ones certified
lower bounds; as delta is non-increasing, a bound at one eps also bounds delta above it (pessimistic)
or below it (optimistic), which makes the reported curves monotone.  The form survives composition:
the convolution of the two exact measures dominates (is dominated by) the composed pair -- the composition's
delta at eps is the second measure's mass at +infinity plus the sum over its finite atoms y of the first
measure's delta at eps - y (weighted by their masses), so an order of the curves at every real eps carries
over, on any grids -- relative errors multiply, and with S = A + E, S_X * S_Y = A_X * A_Y + E_X * S_Y
+ A_X * E_Y, where both norms are submultiplicative under convolution (e^{lam (x + y)} = e^{lam x} e^{lam y};
S's tilted norm is its moment-generating function), so the composed error stays bounded in both norms and
keeps decaying at rate lam (:func:`_propagated_error`; a k-fold power has (|S| + 2 |E|)^k - |S|^k).
The builders round every tail in the safe direction and enforce monotone tails by raising them
(pessimistic: a stochastic increase) or lowering them (optimistic: a stochastic decrease), which
needs no slack.  Truncated mass goes up (pessimistic: to the lowest kept point, or to +inf above
the top) or down (optimistic: to the highest kept point, or dropped below the bottom).  FFT
rounding is bounded componentwise, |fl(DFT x) - DFT x| <= c log2(M) u ||x||_1 (Higham, *Accuracy
and Stability of Numerical Algorithms*, 2nd ed., Sec. 24.1), pushed through the power and the
inverse transform by Parseval's identity, and added to E.  The FFT is circular: mass of a power
outside its window lands in the zero padding (dropped: harmless when optimistic; when pessimistic it
is bounded by Chernoff and moved to the bottom point or +inf) or wraps into the window (extra
positive mass: harmless when pessimistic; when optimistic its Chernoff bound is added to E).

Tiny delta.  FFT rounding is absolute (about count * 1e-14 of the total mass), so it hides deltas below
that.  When the plain FFT's rounding exceeds a quarter of ``rounding_tolerance``, ``self_compose`` and
``compose`` also transform the exponentially tilted masses p_i e^{lam x_i} / M(lam) -- the discrete form
of shifting the Fourier contour into the strip of the moment-generating function. If that computation
has l1 error E~ (rounding, plus, when optimistic, the tilted mass wrapped into the window), multiplying
it back by M(lam) e^{-lam x} leaves an error of tilted norm at most E~ M(lam): relative accuracy where
the tilted measure sits, around the eps whose saddle point is lam.  The stored measure is the plain
result below a switch point x_s and the untilted tilted one from x_s up, x_s where the plain error's
tilted norm (at most E e^{lam x_s}) meets the tilted one (:func:`_switch_point`): each norm is at most
twice its better part, so the tilted computation can only tighten the bounds.  A composition of distinct
PLDs shares one lam, ideally the saddle point of the whole composition at the eps of interest (the PLD
engine picks it per query).  The slack is read at the grid point at or below eps, which only enlarges it
and makes it constant between grid points.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import operator
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.fft import irfft, rfft

from .. import _validation as check
from .. import budget
from .. import options as settings
from .._accurate import SMALLEST_SUBNORMAL as SUBNORMAL
from .._accurate import UNIT_ROUNDOFF as U
from .._accurate import direct_convolve, log_sum_exp, suffix_recurrence
from .._fft import composed_inf_mass, fft_gamma, fft_size, power_rounding
from .._lazy import optimize
from ..limits import INTERVAL_RANGE, LOSS_LIMIT
from ..mechanisms.loss_tails import LossTails
from ..results import UnsupportedCompositionError

__all__ = [
    "DEFAULT_TAIL_MASS",
    "DiscretePLD",
    "PLDTooLargeError",
    "chernoff_log_mass",
    "composition_tilt",
    "connect_the_dots",
    "greedy_hull_optimistic",
    "privacy_buckets",
]

#: Default mass allowed beyond each truncation (builders: per PLD; compositions: in total).
DEFAULT_TAIL_MASS = 1e-15
#: Powers of smaller counts are formed by repeated squaring instead: k - 1 complex products in effect, each
#: relatively accurate to sqrt(5) u, so at most (k - 1) sqrt(5) u |z|^k (< 8 pi k u, inside the bound above)
#: plus a few subnormal spacings per product where they underflow (|z| <= 1: no overflow).  No cos and sin.
SQUARING_LIMIT = 1024
#: Chernoff orders tried, relative to the Gaussian-approximation optimum (Google DP team 2025, Sec. 5.2), in steps of 2.
#: They reach far below it: a loss piled up near one value (subsampling with a small q k) has a tiny spread
#: and a heavy upper tail, and its optimal orders lie hundreds of times below the Gaussian one (at
#: delta = 1e-14, sigma = 0.8, q = 0.001, k = 2, a floor at 1/64 would aim the tilt far beyond eps(delta)
#: and leave the certified eps bracket [1.19, 7.68] instead of [2.16208659, 2.16208855]).
CHERNOFF_FACTORS = np.geomspace(1 / 4096, 64, 19)
#: Loss tails are evaluated at most this many points at a time (with a time-budget check in between).
TAILS_CHUNK = 2 ** 18
#: Probes per round of the vectorised search for the ends of a builder's grid.
FIRST_TRUE_PROBES = 64
#: Relative slack of a builder's output: the rounding of the mass differences of its tails.
BUILDER_RELATIVE_ERROR = 4 * U


class PLDTooLargeError(UnsupportedCompositionError):
    """A discretized PLD would need more grid points than PLDOptions.max_grid_points."""


@dataclass(frozen=True, eq=False)
class DiscretePLD:
    """Masses ``probs[i]`` at losses ``interval * (offset + i)`` and ``inf_mass`` at +infinity.

    ``pessimistic`` says which way the PLD errs (upper or lower bounds on delta).  The stored
    measure S stands for an exact one T (module docstring, "Soundness"): S = (1 + theta) T + E, plus
    positive mass (pessimistic) or minus some (optimistic), with |theta| <= ``relative_error`` and a
    signed error E on the grid whose l1 norm is at most ``error`` and whose tilted norm
    sum_i |E_i| e^{tilt (x_i - decay_start)} is at most ``error`` too, so the slack
    eta(eps) = error e^{-tilt max(eps - decay_start, 0)} bounds sum_{x_i > eps} |E_i|.
    Built by :func:`privacy_buckets`, :func:`connect_the_dots`, :func:`greedy_hull_optimistic`, or
    directly from a grid PMF.
    """

    interval: float
    offset: int
    probs: np.ndarray
    inf_mass: float
    pessimistic: bool
    relative_error: float = 0.0
    error: float = 0.0
    tilt: float = 0.0
    decay_start: float = 0.0

    def __post_init__(self):
        assign = functools.partial(object.__setattr__, self)
        assign("interval", check.positive("interval", self.interval))
        if isinstance(self.offset, bool) or not isinstance(self.offset, numbers.Integral):
            raise TypeError(f"offset must be an integer, got {self.offset!r}")
        assign("offset", int(self.offset))
        probs = np.array(check.real_array("probs", self.probs), dtype=float)
        if probs.ndim != 1 or probs.size == 0 or np.any(probs < 0):
            raise ValueError("probs must be a non-empty 1-d array of non-negative masses")
        probs.flags.writeable = False
        assign("probs", probs)
        assign("inf_mass", check.in_interval("inf_mass", self.inf_mass, 0.0, 1.0))
        if not isinstance(self.pessimistic, (bool, np.bool_)):
            raise TypeError(f"pessimistic must be True or False, got {self.pessimistic!r}")
        assign("pessimistic", bool(self.pessimistic))
        for name in ("relative_error", "error", "tilt"):
            assign(name, check.non_negative(name, getattr(self, name)))
        if self.relative_error >= 0.5:
            raise ValueError(f"relative_error must be below 0.5, got {self.relative_error!r}")
        if not math.isfinite(self.tilt):
            raise ValueError(f"tilt must be finite, got {self.tilt!r}")
        if isinstance(self.decay_start, bool) or not isinstance(self.decay_start, numbers.Real) or \
                not math.isfinite(self.decay_start):
            raise ValueError(f"decay_start must be a finite real number, got {self.decay_start!r}")
        assign("decay_start", float(self.decay_start))

    @functools.cached_property
    def losses(self) -> np.ndarray:
        """The grid losses x_i = interval * (offset + i) (strictly increasing; read-only, formed once)."""
        losses = self.interval * (self.offset + np.arange(self.probs.size))
        losses.flags.writeable = False
        return losses

    @property
    def total_mass(self) -> float:
        """Finite mass plus inf_mass (1 for an exact PLD)."""
        return float(self.probs.sum()) + self.inf_mass

    @property
    def max_error(self) -> float:
        """The largest absolute slack eta(eps) over all eps: ``error``."""
        return self.error

    def log_tilted_error(self, tilt: float) -> float:
        """log of a bound on sum_i |E_i| e^{tilt x_i} for the stored error E (any tilt >= 0; -inf if E = 0).

        At the PLD's own tilt it is log(error) + tilt * decay_start; below it e^{t x} <= e^{t a} max(1,
        e^{tilt (x - a)}) (a = decay_start) gives twice that at a; above it (or with no tilt of its own) the
        grid's top x_top bounds e^{(t - tilt) x}.
        """
        if self.error == 0.0:
            return -math.inf
        top = float(self.interval * (self.offset + self.probs.size - 1))
        options = [tilt * top]  # l1 norm times the largest weight on the grid
        if self.tilt > 0:
            if tilt == self.tilt:
                options.append(tilt * self.decay_start)
            elif tilt < self.tilt:
                options.append(tilt * self.decay_start + math.log(2.0))
            else:
                options.append(self.tilt * self.decay_start + (tilt - self.tilt) * top)
        exponent = min(options)
        return math.log(self.error) + exponent + 16 * U * (4 + abs(exponent) + tilt * abs(top))

    # ----- divergence ---------------------------------------------------------------------

    def delta(self, epsilons: ArrayLike) -> np.ndarray:
        """Certified delta(eps), vectorised (Google DP team 2025 Obs. 2): an upper bound if pessimistic, else a lower
        one.

        delta_S(eps) = inf_mass + sum_{x_i > eps} p_i (1 - e^{eps - x_i}) is evaluated from suffix
        sums of positive terms only (see ``_suffix_sums``), then the slacks are applied.  As delta is
        non-increasing, a pessimistic bound is lowered to the best bound at a grid point at or below
        eps, and an optimistic one raised to the best bound at a grid point at or above eps (or
        beyond the grid), so a larger slack at small eps cannot make it collapse.
        """
        epsilons = check.real_array("epsilons", epsilons)
        bound = self._certified(epsilons)
        envelope, beyond = self._grid_envelope
        losses = self.losses
        if self.pessimistic:
            j = np.searchsorted(losses, epsilons, side="right") - 1  # last grid point <= eps
            return np.where(j >= 0, np.minimum(bound, envelope[np.maximum(j, 0)]), bound)
        j = np.searchsorted(losses, epsilons, side="left")  # first grid point >= eps
        return np.maximum(np.where(j < losses.size, np.maximum(bound, envelope[np.minimum(j, losses.size - 1)]), bound),
                          beyond)

    def epsilon(self, delta: float) -> float:
        """The smallest eps >= 0 with ``self.delta(eps) <= delta``; math.inf if there is none.

        There is none when delta is below the mass at +infinity (plus slack).  The first grid point
        x_j whose (monotone) certified bound is <= delta is found on the grid; on [x_{j-1}, x_j]
        delta_S(eps) = A - B e^eps and the slack is constant (``slack`` reads it at the grid point
        at or below eps), so the crossing is solved in closed form (Google DP team 2025 Obs. 2).  Above the
        grid delta_S is inf_mass and only a decaying slack (``tilt`` > 0) can still move the bound.
        """
        delta = check.in_interval("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
        envelope, beyond = self._grid_envelope
        losses, n = self.losses, self.probs.size
        relative = (3 * n + 10) * U
        j = int(np.searchsorted(-envelope, -delta, side="left"))  # the envelope is non-increasing
        if j < n:
            slack = float(self.slack(losses[j - 1])) if j > 0 else self.max_error
            if self.pessimistic:  # the inverse of _certify's bound, rounding taken as relative
                target = (delta * (1 - self.relative_error) / (1 + 4 * U) - slack) / (1 + relative)
            else:
                target = (delta * (1 + self.relative_error) / (1 - 4 * U) + slack) / (1 - relative)
            c, d = self._suffix_sums
            at_grid = self.inf_mass + d[j]  # delta_S(x_j); delta_S(eps) = at_grid + (1 - e^{eps - x_j}) c_j below x_j
            lowest = float(losses[j - 1]) if j > 0 else -math.inf
            if c[j] == 0.0 or at_grid > target:  # no crossing inside the segment with the segment's slack
                epsilon = float(losses[j])
            else:
                ratio = (at_grid - target) / c[j]
                epsilon = lowest if ratio <= -1.0 else max(lowest, float(losses[j] + math.log1p(ratio)))
            cap = float(losses[j])
        elif self.pessimistic:
            epsilon, cap = self._beyond_grid_epsilon(delta), math.inf
        else:
            return math.inf
        if epsilon == math.inf:
            return math.inf
        epsilon, step = max(epsilon, 0.0), 0.0
        for _ in range(256):  # the closed form may land a few roundings short
            if self.delta(epsilon) <= delta:
                return float(epsilon)
            if epsilon >= cap:
                break
            step = max(2 * step, np.spacing(epsilon) + np.spacing(1.0))
            epsilon = min(epsilon + step, max(cap, 0.0))
        return math.inf

    def _beyond_grid_epsilon(self, delta: float) -> float:
        """A first guess of the pessimistic crossing above the grid: there delta_S = inf_mass and the
        slack is error e^{-tilt (eps - decay_start)}; math.inf if it never gets <= delta."""
        relative = (3 * self.probs.size + 10) * U
        room = delta * (1 - self.relative_error) / (1 + 4 * U) - (1 + relative) * self.inf_mass
        top = float(self.losses[-1])
        if room <= 0:
            return math.inf
        if self.error <= room / 2:
            return top + self.interval
        if self.tilt == 0:
            return math.inf
        distance = math.log(2 * self.error / room) / self.tilt
        return max(top, self.decay_start + distance) + self.interval

    def delta_of_composition(self, other: DiscretePLD, epsilons: ArrayLike) -> np.ndarray:
        """Certified delta(eps) of ``self`` composed with ``other`` without convolving them.

        Google DP team 2025, Sec. 5.1, eq. (2): delta_{X+Y}(eps) = sum_v p_X(v) delta_Y(eps - v) + inf_X |Y|,
        each delta_Y read from ``other``'s suffix sums: O(len(self)) per eps.  The slack is that of the
        composition of the two stored measures (:func:`_propagated_error`) at the smaller positive tilt.
        """
        self._check_partner(other)
        epsilons = check.real_array("epsilons", epsilons)
        losses, flat = self.losses, epsilons.ravel()
        value, rounding = np.empty(flat.shape), np.empty(flat.shape)
        for k, epsilon in enumerate(flat):
            budget.check("the divergence of a composition of two PLDs")
            shifted = epsilon - losses  # each rounded by at most u (|eps| + 2 |v|), counted below
            inner, inner_rounding = other._raw_delta(shifted, U * (abs(epsilon) + 2 * np.abs(losses)))
            value[k] = self.probs @ inner + self.inf_mass * other.total_mass
            rounding[k] = self.probs @ inner_rounding + (self.probs.size + 4) * U * value[k]
        tilt = _common_tilt(self, other)
        rho, error, log_tilted, inf_error = _propagated_error(self, other, tilt)
        slack = np.full(flat.shape, error + inf_error)
        if tilt > 0 and log_tilted > -math.inf:
            with np.errstate(over="ignore"):
                decayed = np.exp(log_tilted - tilt * flat) * (1 + 4 * U * (2 + tilt * np.abs(flat)))
            slack = np.minimum(slack, decayed + inf_error)
        result = _certify(value, rounding, rho, slack, self.pessimistic)
        return result.reshape(epsilons.shape)

    def _certified(self, epsilons, at_grid: bool = False) -> np.ndarray:
        """The certified bound at ``epsilons`` (``at_grid``: they are :attr:`losses`, which saves the searches)."""
        epsilons = np.asarray(epsilons, dtype=float)
        above = np.minimum(np.arange(1, epsilons.size + 1), epsilons.size - 1) if at_grid else None
        value, rounding = self._raw_delta(epsilons, above=above)
        return _certify(value, rounding, self.relative_error, self.slack(epsilons, at_grid), self.pessimistic)

    def slack(self, epsilons: ArrayLike, at_grid: bool = False) -> np.ndarray:
        """The absolute slack eta(eps) = error e^{-tilt max(g - decay_start, 0)} (class docstring), read at g =
        the lattice point at or below eps (eps itself for grid points, ``at_grid``).

        It bounds sum_{x_i > eps} |E_i| by the l1 norm of E and, from decay_start up, by its tilted norm times
        e^{-tilt g}; it is non-increasing, so reading it at g <= eps only enlarges it, and makes it constant
        between grid points (``epsilon`` solves the crossing in closed form there).
        """
        epsilons = np.asarray(epsilons, dtype=float)
        if at_grid:
            floor = epsilons
        else:
            h = self.interval
            steps = np.round(epsilons / h)
            floor = steps * h
            floor = np.where(floor > epsilons, (steps - 1) * h, floor)
            floor = np.minimum(floor, epsilons)  # g <= eps even when eps is infinite or huge
        if self.error == 0.0 or self.tilt == 0.0:
            return np.full(floor.shape, self.error)
        with np.errstate(invalid="ignore"):
            distance = np.where(floor > self.decay_start, floor - self.decay_start, 0.0)
        decay = np.exp(-self.tilt * distance)
        decay *= 1 + 4 * U * (2 + self.tilt * (np.abs(np.where(np.isfinite(floor), floor, 0.0))
                                                + abs(self.decay_start)))
        decay = np.where(np.isinf(floor) & (floor > 0), 0.0, np.minimum(decay, 1.0))
        return self.error * decay

    @functools.cached_property
    def _grid_envelope(self) -> tuple[np.ndarray, float]:
        """(certified bounds at the grid points made monotone, optimistic bound valid for every eps).

        delta is non-increasing, so a bound at x_i holds beyond it (pessimistic: prefix minimum) or
        before it (optimistic: suffix maximum).  An optimistic PLD also bounds lim delta = the true
        mass at +infinity >= (inf_mass - error) / (1 + rho), hence delta(eps) everywhere.
        """
        bounds = self._certified(self.losses, at_grid=True)
        if self.pessimistic:
            return np.minimum.accumulate(bounds), 0.0
        relative = (3 * self.probs.size + 10) * U
        beyond = max(0.0, (self.inf_mass * (1 - relative) - float(self.slack(math.inf))) / (1 + self.relative_error))
        return np.maximum(np.maximum.accumulate(bounds[::-1])[::-1], beyond), beyond

    @functools.cached_property
    def _suffix_sums(self) -> tuple[np.ndarray, np.ndarray]:
        """(C, D): C_j = sum_{i>=j} p_i e^{-(x_i - x_j)}, D_j = sum_{i>=j} p_i (1 - e^{-(x_i - x_j)}).

        For x_{j-1} <= eps < x_j, delta_S(eps) = inf_mass + D_j + (1 - e^{eps - x_j}) C_j: positive
        terms only.  C_j = p_j + e^{-h} C_{j+1} and D_j = D_{j+1} + (1 - e^{-h}) C_{j+1}.
        """
        c = suffix_recurrence(self.probs, math.exp(-self.interval))
        d = np.zeros_like(c)
        d[:-1] = -math.expm1(-self.interval) * np.cumsum(c[:0:-1])[::-1]
        return c, d

    def _raw_delta(self, epsilons: np.ndarray, shift_error: ArrayLike = 0.0,
                   above: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(delta_S(eps), bound on its rounding); ``shift_error`` bounds rounding already in eps, ``above`` gives
        the index of the first grid point above each eps, capped at the last (else it is searched)."""
        c, d = self._suffix_sums
        losses = self.losses
        last = self.probs.size - 1
        j = np.minimum(np.searchsorted(losses, epsilons, side="right"), last) if above is None else above
        inside = epsilons < losses[last]
        factor = np.where(inside, -np.expm1(np.minimum(epsilons - losses[j], 0.0)), 0.0)
        finite = np.where(inside, d[j] + factor * c[j], 0.0)
        value = self.inf_mass + finite
        argument_error = shift_error + U * (np.abs(epsilons) + 2 * np.abs(losses[j]) + 4)
        rounding = (3 * self.probs.size + 10) * U * value + np.where(inside, c[j] * argument_error, 0.0)
        return value, rounding

    # ----- composition --------------------------------------------------------------------

    def compose(self, other: DiscretePLD, tail_mass_truncation: float = DEFAULT_TAIL_MASS,
                rounding_tolerance: float | None = None, tilt: float | None = None) -> DiscretePLD:
        """The PLD of the composition: FFT convolution, then tails of mass <= tail_mass_truncation truncated.

        Google DP team 2025, Sec. 2 Obs. 3 and Sec. 5.2.  Both PLDs need the same interval and the same tag;
        the infinity masses combine exactly, 1 - (1 - a)(1 - b) for probability measures.  When the FFT's
        rounding (absolute, about 1e-16 log2(size) of the mass) exceeds ``rounding_tolerance`` / 4 (default:
        ``tail_mass_truncation``) and ``tilt`` (default: the smaller positive tilt of the two PLDs, where their
        errors convert at a factor of at most 2, see :meth:`log_tilted_error`) is positive, the
        tilted measures p_i e^{tilt x_i} / M(tilt) are convolved too and give the values from the switch point
        up (module docstring, "Tiny delta"), so the composition's slack decays like e^{-tilt eps}.
        """
        self._check_partner(other)
        tail_mass_truncation = _tail_tolerance(tail_mass_truncation)
        rounding_tolerance = tail_mass_truncation if rounding_tolerance is None else \
            check.in_interval("rounding_tolerance", rounding_tolerance, 0.0, 1.0, low_open=True, high_open=True)
        tilt = _common_tilt(self, other) if tilt is None else _tilt_argument(tilt)
        length = self.probs.size + other.probs.size - 1
        _check_size(length, "the composition")
        size = fft_size(length)
        budget.reserve(_fft_bytes(size), "the FFT of a composition of two PLDs")
        values, plain_error = _fft_convolution(self.probs, other.probs, size, length)
        rho, error, log_tilted, inf_error = _propagated_error(self, other, tilt)
        offset = self.offset + other.offset
        losses = self.interval * (offset + np.arange(length))
        fresh, fresh_log_tilted, relative = plain_error, _log_or_minus_inf(plain_error) + tilt * float(losses[-1]), 0.0
        if tilt > 0 and plain_error > rounding_tolerance / 4:
            budget.check("the tilted convolution of two PLDs")
            (left, left_log_mgf, left_theta), (right, right_log_mgf, right_theta) = (
                _tilted_weights(pld, tilt) for pld in (self, other))
            tilted, tilted_error = _fft_convolution(left, right, size, length)
            tilted_error += 4 * (self.probs.size + other.probs.size) * SUBNORMAL  # underflowed weights
            normalizer = left_log_mgf + right_log_mgf
            start, fresh, fresh_log_tilted = _switch_point(losses, plain_error, math.log(tilted_error) + normalizer
                                                           if tilted_error > 0 else -math.inf, tilt)
            if start < length:
                values[start:] = tilted[start:] * np.exp(normalizer - tilt * losses[start:])
                relative = (1 + left_theta) * (1 + right_theta) * (
                    1 + 4 * U * (4 + abs(normalizer) + tilt * float(np.max(np.abs(losses))))) - 1
        left_finite, right_finite = float(self.probs.sum()), float(other.probs.sum())
        inf_mass = self.inf_mass * (right_finite + other.inf_mass) + left_finite * other.inf_mass
        inf_mass = inf_mass * (1 + 4 * U) + inf_error if self.pessimistic else max(inf_mass * (1 - 4 * U) - inf_error,
                                                                                   0.0)
        composed = DiscretePLD(self.interval, offset, values, min(1.0, inf_mass), self.pessimistic,
                               relative_error=(1 + rho) * (1 + relative) * (1 + 4 * U) - 1)
        composed = _with_error(composed, error + fresh, float(np.logaddexp(log_tilted, fresh_log_tilted)), tilt)
        return composed.truncated(tail_mass_truncation)

    def self_compose(self, count: int, tail_mass_truncation: float = DEFAULT_TAIL_MASS,
                     rounding_tolerance: float | None = None, tilt: float | None = None) -> DiscretePLD:
        """The PLD of ``count`` compositions with itself: one FFT power, no loop over count (or, for a few
        uses whose FFT rounding would exceed ``rounding_tolerance`` / 4, direct convolutions by binary
        powering, within PLDOptions.direct_power_limit multiply-adds: relatively accurate at every grid point).
        Where the FFT's rounding (absolute: about count * 1e-14 of the total mass) would exceed the tolerance,
        each output mass of the direct path is a sum of positive products, relatively accurate to gamma_n per
        convolution however small it is; exponential tilting cannot help a loss whose tail decays like
        exp(-c log^2 l) (a few steps of a small sampling rate; its MGF exists only through the grid's end).

        Google DP team 2025, Sec. 5.2: the input's negligible tails are truncated first, then the output
        window [lo, hi] is chosen by Chernoff bounds from the input's moment-generating function
        (in log space, so tolerances like 1e-30 work) such that the mass outside is at most
        ``tail_mass_truncation``; the FFT holds the whole window.  Mass beyond hi goes to +inf when
        pessimistic and is dropped when optimistic; whatever the circular FFT wraps into the window
        is counted.  Pass a tolerance scaled to the smallest delta you will ask about.  When the FFT
        rounding would exceed a quarter of ``rounding_tolerance`` (default: ``tail_mass_truncation``; an
        absolute error of delta), the tilted power is formed too (module docstring): its error decays like
        e^{-lam eps}, which makes the PLD accurate to about that tolerance where delta is small and
        never less accurate than the plain power elsewhere.  ``tilt`` sets lam (0: no tilted power); by
        default it is the Chernoff order of the point where the plain power's rounding would start to matter.
        A composition of distinct PLDs should share one tilt, the saddle point of the whole composition at the
        eps of interest (:meth:`compose`).
        """
        count = check.positive_integer("count", count)
        tail_mass_truncation = _tail_tolerance(tail_mass_truncation)
        rounding_tolerance = tail_mass_truncation if rounding_tolerance is None else \
            check.in_interval("rounding_tolerance", rounding_tolerance, 0.0, 1.0, low_open=True, high_open=True)
        tilt = None if tilt is None else _tilt_argument(tilt)
        if count == 1:
            return self
        per_copy = tail_mass_truncation / count
        base = self.truncated(per_copy) if per_copy > 0 else self
        return _self_power(base, count, tail_mass_truncation, rounding_tolerance, tilt)

    def truncated(self, tail_mass: float) -> DiscretePLD:
        """Cut each end's longest run of mass <= tail_mass / 2, keeping the bound's direction (a pessimistic
        upper run only as far as the stored error's bound beyond it is also <= tail_mass / 2).

        Pessimistic: the lower run joins the lowest kept point, the upper run goes to +inf
        (Google DP team 2025, Sec. 2.1); optimistic: the lower run is dropped, the upper run joins the highest
        kept point.  Each move is a stochastic increase (decrease), so the exact measure the PLD stands
        for can be moved alike; the stored error E moves with the masses, which can only lower its norms,
        except that the part moved to +inf is added there as a bound (the mass at +inf carries no E) and the
        part moved up to the lowest kept point can raise the tilted norm (``decay_start`` is recomputed).
        """
        tail_mass = check.in_interval("tail_mass", tail_mass, 0.0, 1.0, low_open=True, high_open=True)
        n = self.probs.size
        lower_sums, upper_sums = np.cumsum(self.probs), np.cumsum(self.probs[::-1])
        cut_low = min(int(np.searchsorted(lower_sums, tail_mass / 2, side="right")), n - 1)
        cut_high = min(int(np.searchsorted(upper_sums, tail_mass / 2, side="right")), n - 1 - cut_low)
        moved_error = 0.0
        while self.pessimistic and cut_high:
            # The stored error beyond the cut goes to +inf too: cut only where that bound is small as well.
            moved_error = float(self.slack(self.losses[n - cut_high - 1], at_grid=True)[()])
            if moved_error <= tail_mass / 2:
                break
            cut_high, moved_error = cut_high // 2, 0.0
        if cut_low == cut_high == 0:
            return self
        kept = self.probs[cut_low:n - cut_high].copy()
        lower = lower_sums[cut_low - 1] if cut_low else 0.0
        upper = upper_sums[cut_high - 1] if cut_high else 0.0
        inf_mass = self.inf_mass
        if self.pessimistic:
            kept[0] += lower * (1 + n * U)
            inf_mass = min(1.0, inf_mass + upper * (1 + n * U) + moved_error)
        else:
            kept[-1] += upper * (1 - n * U)
        truncated = dataclasses.replace(self, offset=self.offset + cut_low, probs=kept, inf_mass=inf_mass)
        if not (self.pessimistic and cut_low and self.error > 0 and self.tilt > 0):
            return truncated
        bottom = float(truncated.losses[0])
        log_tilted = np.logaddexp(self.log_tilted_error(self.tilt), math.log(self.error) + self.tilt * bottom)
        return _with_error(truncated, self.error, float(log_tilted), self.tilt)

    def _check_partner(self, other) -> None:
        if not isinstance(other, DiscretePLD):
            raise TypeError(f"other must be a DiscretePLD, got {type(other).__name__}")
        if other.interval != self.interval:
            raise ValueError(f"other has interval {other.interval!r}, this PLD {self.interval!r}; "
                             "build both PLDs with the same value_discretization_interval")
        if other.pessimistic != self.pessimistic:
            raise ValueError("cannot compose a pessimistic PLD with an optimistic one (other)")


def composition_tilt(terms, *, delta: float | None = None, epsilon: float | None = None) -> float:
    """The tilt lam >= 0 at which to compose ``terms`` (pairs (DiscretePLD, count)) for accuracy at tiny delta.

    With K(t) = sum_i k_i log sum_j p_ij e^{t x_ij} the composed log moment-generating function of the
    stored measures: for ``delta`` the Chernoff order argmin_{t > 0} (K(t) - log delta) / t, whose point
    bounds eps(delta) from above (Google DP team 2025, Sec. 5.2); for ``epsilon`` the saddle point argmin_{t >= 0}
    K(t) - t epsilon (0 when epsilon is at or below the mean).  There the tilted composition sits around
    the eps asked about, so its rounding is relative to delta there (module docstring, "Tiny delta").
    Give exactly one of ``delta`` and ``epsilon``.
    """
    return _chernoff_search(terms, delta, epsilon)[0]


def chernoff_log_mass(terms, epsilon: float) -> float:
    """log of the Chernoff bound min_{t >= 0} e^{K(t) - t epsilon} on the exactly composed stored finite mass at or
    above ``epsilon`` (K as in :func:`composition_tilt`), raised by the rounding of K: an upper bound on the finite
    part of delta_S(epsilon) of the composition (as (1 - e^{eps - x})_+ <= [x > eps]) without composing anything."""
    tilt, value = _chernoff_search(terms, None, epsilon)
    if value == -math.inf:
        return value
    magnitude = abs(tilt * epsilon) + sum(check.positive_integer("count", count) * _LogMGF(
        pld_.probs, pld_.interval, pld_.offset).magnitude(tilt) for pld_, count in terms if np.any(pld_.probs > 0))
    return value + 16 * U * (8 + magnitude)


def _chernoff_search(terms, delta: float | None, epsilon: float | None) -> tuple[float, float]:
    """(best t, objective there) for :func:`composition_tilt` and :func:`chernoff_log_mass`: a geometric grid of
    orders around the composition's Gaussian scale 1 / spread, refined twice around the best."""
    if (delta is None) == (epsilon is None):
        raise ValueError("give exactly one of delta and epsilon")
    if delta is not None:
        target = math.log(check.in_interval("delta", delta, 0.0, 1.0, low_open=True, high_open=True))
    else:
        target = check.real_number("epsilon", epsilon)
    mgfs, counts, variance = [], [], 0.0
    for pld_, count in terms:
        if not isinstance(pld_, DiscretePLD):
            raise TypeError(f"terms must hold DiscretePLDs, got {type(pld_).__name__}")
        count = check.positive_integer("count", count)
        if np.any(pld_.probs > 0):
            mgf = _LogMGF(pld_.probs, pld_.interval, pld_.offset)
            mgfs.append(mgf)
            counts.append(count)
            variance += count * mgf.spread ** 2
    if not mgfs:
        return 0.0, -math.inf

    def objective(ts: np.ndarray) -> np.ndarray:
        log_mgf = sum(count * mgf(ts) for mgf, count in zip(mgfs, counts))
        return (log_mgf - target) / ts if delta is not None else log_mgf - target * ts

    spread = math.sqrt(variance) if variance > 0 else min(mgf.interval for mgf in mgfs)
    at_zero = float(objective(np.array([0.0]))[0]) if epsilon is not None else math.inf
    ts = np.geomspace(1e-4, 1e4, 97) / spread
    for _ in range(3):
        values = objective(ts)
        best = int(np.nanargmin(values))
        if epsilon is not None and not values[best] < at_zero:
            return 0.0, at_zero
        low, high = ts[max(best - 1, 0)], ts[min(best + 1, ts.size - 1)]
        ts = np.geomspace(low, high, 33)
    values = objective(ts)
    best = int(np.nanargmin(values))
    return float(ts[best]), float(values[best])


# ----- builders ---------------------------------------------------------------------------

def privacy_buckets(tails: LossTails, interval: float, pessimistic: bool = True,
                    tail_mass: float = DEFAULT_TAIL_MASS, *, tails_rtol: float | None = None,
                    floor: float | None = None) -> DiscretePLD:
    """Privacy buckets (Google DP team 2025, Sec. 2.1; Doroshenko et al. 2022, Secs. 4.1 and 5.2).

    Pessimistic: the mass of L in (x_{i-1}, x_i] goes to x_i, L <= x_0 to x_0 and L > x_top to +inf.
    Optimistic: the mass of L in [x_i, x_{i+1}) goes to x_i, L >= x_top to x_top and L < x_0 is
    dropped.  The grid ends where the tails beyond carry at most tail_mass / 2 (or at the ends of
    ``tails.loss_range``).  ``tails_rtol`` is the relative accuracy assumed of the tails.  ``floor``: the
    grid starts no lower (the mass below goes to its first point, or is dropped): a composition whose
    finite loss is at most B never needs a term's losses below -B for eps >= 0.
    """
    interval, tail_mass, accuracy = _builder_arguments(tails, interval, tail_mass, tails_rtol)
    if not isinstance(pessimistic, (bool, np.bool_)):
        raise TypeError(f"pessimistic must be True or False, got {pessimistic!r}")
    first, losses = _loss_grid(tails, interval, tail_mass, _floor_argument(floor))
    inf_mass = tails.inf_mass
    if pessimistic:
        log_tails = _grid_log_tails(tails, interval, first, losses.size)[0]
        upper = _exp_bounds(log_tails, accuracy)[1]  # >= P[x_i < L < inf]
        tail_values = np.concatenate(([1.0], (upper + inf_mass) * (1 + 2 * U)))
    else:
        below = np.nextafter(losses, -np.inf)  # P[L >= x_i] = P[L > x_i^-]
        lower = _exp_bounds(_chunked_log_tails(tails, below)[0], accuracy)[0]
        tail_values = np.concatenate(((lower + inf_mass) * (1 - 2 * U), [inf_mass]))
    return _from_tail_values(tail_values, first, interval, bool(pessimistic))


def connect_the_dots(tails: LossTails, interval: float, tail_mass: float = DEFAULT_TAIL_MASS, *,
                     tails_rtol: float | None = None, floor: float | None = None) -> DiscretePLD:
    """The pessimistic connect-the-dots PLD (Doroshenko et al. 2022, Sec. 4, Algorithm 1; Google DP team 2025, Sec.
    2.2).

    Its hockey-stick curve h(alpha) = delta(log alpha) is the piecewise-linear interpolation of the
    true curve at alpha = 0 (value 1) and alpha_i = e^{x_i}, constant beyond the top point, whose
    delta becomes the mass at +infinity.  As a PLD, the mass at or above x_i is
    delta_i + (delta_{i-1} - delta_i) / (1 - e^{x_{i-1} - x_i}).  (Google DP team 2025 prints the point masses
    with the opposite overall sign; Doroshenko et al. 2022, Algorithm 1 has it right.)  The true delta_i are
    rounded up by their error bounds first, and the grid ends as in :func:`privacy_buckets`; the
    curve is exact at the grid points, so atoms, the ends of the loss range and the mass at
    +infinity need no special case.  ``floor`` as in :func:`privacy_buckets`.
    """
    interval, tail_mass, accuracy = _builder_arguments(tails, interval, tail_mass, tails_rtol)
    first, losses = _loss_grid(tails, interval, tail_mass, _floor_argument(floor))
    log_p, log_q = _grid_log_tails(tails, interval, first, losses.size)
    upper = (tails.inf_mass + _excess_bounds(log_p, log_q, losses, accuracy)[1]) * (1 + 2 * U)
    curve = np.concatenate(([1.0], np.maximum.accumulate(upper[::-1])[::-1]))
    return _from_tail_values(_curve_tail_values(curve, interval) * (1 + 8 * U), first, interval, True)


def greedy_hull_optimistic(tails: LossTails, interval: float, tail_mass: float = DEFAULT_TAIL_MASS, *,
                           tails_rtol: float | None = None, floor: float | None = None) -> DiscretePLD:
    """Optimistic PLD from tangent lines and a lower convex hull (Doroshenko et al. 2022, Sec. 5.1, Algorithm 2).

    Work with the curve h(alpha) = delta(log alpha) - a of the finite part (a = mass at +inf, kept
    at +inf), grid alpha_{-1} = 0 < alpha_0 < ... < alpha_{n-1}, alpha_i = e^{x_i}.  A
    piecewise-linear curve f with kinks at the grid lies below h -- so its PLD is optimistic -- if
    on each segment [alpha_s, alpha_{s+1}] it lies below max(t_s, t_{s+1}), the tangents of h at
    the two ends (slopes -Q[L > x_s] and -Q[L >= x_{s+1}], subgradients of h), which lie below h by
    convexity.
    The chord of h exceeds that maximum by at most E_s = D ab / (a + b) (D = alpha_{s+1} - alpha_s,
    a = sigma - |h'(alpha_{s+1})|, b = |h'(alpha_s)| - sigma, sigma = |chord slope|), at the
    tangents' intersection; so each grid value is h(alpha_i) lowered by the larger E of its two
    segments (or, where that would go below 0, read off t_{s+1}), 0 at the top point.  The PLD's
    curve is the lower convex hull of these candidates (Doroshenko et al. 2022, Algorithm 2's ConvexHull step).

    For an atomless loss (``tails.atomless``) Q[L >= x] = Q[L > x], so the left derivatives come from the
    same tails as the values (one evaluation fewer).

    Departures from Algorithm 2, which draws one tangent per segment (at the end nearer alpha = 1):
    (i) both ends' tangents are used, which lowers smooth curves half as much (E = c D^2 / 4 against
    c D^2 / 2 for curvature c) and does not collapse to 0 where h bends within one segment near
    alpha = 1 (coarse grids, small sampling rates); (ii) the mass at +infinity is kept (Algorithm 2
    sets f(+inf) = 0, Doroshenko et al. 2022, Sec. 5.2).  Validity needs only the segment condition, not
    Q-validity, because only the delta-functional of a positive measure matters here (module
    docstring); every quantity is rounded in the safe direction.  ``floor`` as in :func:`privacy_buckets`.
    Where the grid must reach losses above LOSS_LIMIT (e^x overflows), the optimistic privacy buckets
    (:func:`privacy_buckets`, rounding the loss down) are returned instead.
    """
    interval, tail_mass, accuracy = _builder_arguments(tails, interval, tail_mass, tails_rtol)
    first, losses = _loss_grid(tails, interval, tail_mass, _floor_argument(floor))
    if losses[-1] > LOSS_LIMIT:  # e^x would overflow: round the loss down to the grid instead
        return privacy_buckets(tails, interval, False, tail_mass, tails_rtol=accuracy[0], floor=floor)
    log_p, log_q = _grid_log_tails(tails, interval, first, losses.size)
    curve = np.concatenate(([1.0 - tails.inf_mass], _excess_bounds(log_p, log_q, losses, accuracy)[0]))
    # Tangent slopes: right derivative -Q[L > x] at a segment's left end (alpha = 0: -Q[L > -inf]),
    # left derivative -Q[L >= x] at its right end; the steeper the left end's, the shallower the right's, the safer.
    # Each segment is measured in units of its width in alpha (v = (alpha - alpha_s) / width in [0, 1]), so only
    # slope * width enters, formed from logs: at tiny delta Q underflows (Q[L > x] ~ e^-850 at delta ~ 1e-200)
    # while Q * width ~ delta does not; with Q flushed to 0 the tangents were flat and the chord above h.
    q_finite = float(np.asarray(tails.log_tails(-math.inf)[1]))  # log Q[L > -inf]: the slope at alpha = 0
    log_width = losses + np.concatenate(([0.0], np.full(losses.size - 1, math.log(-math.expm1(-interval)))))
    log_q_at_or_above = log_q if tails.atomless else _chunked_log_tails(tails, np.nextafter(losses, -np.inf))[1]
    steep = _scaled_exp_bounds(np.concatenate(([min(q_finite, 0.0)], log_q[:-1])), log_width, accuracy)[1]
    shallow = _scaled_exp_bounds(log_q_at_or_above, log_width, accuracy)[0]
    # A third tangent inside each segment, at x_{s-1} + interval / 2 (alpha_0 / 2 in the first): it halves the
    # lowering.  Its offset in the segment is (e^{h/2} - 1) / (e^h - 1) = 1 / (e^{h/2} + 1) of the width (1/2 in
    # the first).
    middles = np.concatenate(([losses[0] - math.log(2.0)], losses[1:] - interval / 2))
    mid_offset = np.concatenate(([0.5], np.full(losses.size - 1, 1 / (math.exp(interval / 2) + 1))))
    mid_log_p, mid_log_q = _chunked_log_tails(tails, middles)
    mid_slope_low, mid_slope_high = _scaled_exp_bounds(mid_log_q, log_width, accuracy)
    middle = (mid_offset, _excess_bounds(mid_log_p, mid_log_q, middles, accuracy)[0],
              (mid_slope_low + mid_slope_high) / 2, (mid_slope_high - mid_slope_low) / 2 * (1 + 4 * U))
    width = np.ones(losses.size)
    left, right = _segment_limits(curve[:-1], curve[1:], width, steep, shallow, *middle)
    candidates = np.concatenate((np.minimum(right[:-1], left[1:]), [0.0]))
    values = _lower_hull_at_grid(left[0], candidates, losses)
    values = np.minimum.accumulate(np.minimum(values, candidates))
    finite_tails = _curve_tail_values(np.concatenate(([left[0]], values)), interval) * (1 - 8 * U)
    return _from_tail_values(finite_tails + tails.inf_mass * (1 - U), first, interval, False)


def _segment_limits(start: np.ndarray, end: np.ndarray, width: np.ndarray, steep: np.ndarray,
                    shallow: np.ndarray, mid_offset: np.ndarray, mid_value: np.ndarray, mid_slope: np.ndarray,
                    mid_slope_error: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Largest values at both ends of each segment keeping the chord below the tangents' envelope.

    (The builder passes width 1 and slopes times widths: the same lines in units of the segment's width.)
    In u = alpha - alpha_s in [0, width], three lines lie below the convex h: the tangents at the ends,
    start - steep u and end + shallow (width - u), and one at u = mid_offset, mid_value - mid_slope (u -
    mid_offset), lowered by mid_slope_error width for its slope's uncertainty.  The chord minus their
    maximum (a convex polygon) peaks at one of the lines' pairwise intersections; the ends are lowered by
    (an upper bound on) that peak E, or, if that would make one negative, set on the end tangent.  With
    the end tangents alone E = width a b / (a + b) (a = sigma - shallow, b = steep - sigma, sigma the chord's
    slope), about c width^2 / 4 for curvature c; the middle tangent brings it to about c width^2 / 8.
    ``start``, ``end``, ``mid_value`` are lower bounds on h, ``steep`` an upper and ``shallow`` a lower bound
    on the end slopes' magnitudes.
    """
    lines = (lambda u: start - steep * u, lambda u: end + shallow * (width - u),
             lambda u: mid_value - mid_slope_error * width - mid_slope * (u - mid_offset))
    mid_at_zero = mid_value - mid_slope_error * width + mid_slope * mid_offset  # the middle line at u = 0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        crossings = ((start - end - shallow * width) / (steep - shallow),
                     (start - mid_at_zero) / (steep - mid_slope),
                     (end + shallow * width - mid_at_zero) / (shallow - mid_slope))
        excess = np.zeros(start.shape)
        for u in crossings:
            u = np.clip(np.nan_to_num(u, nan=0.0, posinf=0.0, neginf=0.0), 0.0, width)
            chord = start + (end - start) * (u / width)
            envelope = np.maximum(np.maximum(lines[0](u), lines[1](u)), lines[2](u))
            excess = np.maximum(excess, np.nan_to_num(chord - envelope, nan=0.0))
    scale = np.abs(start) + np.abs(end) + (steep + shallow + mid_slope) * width + np.abs(mid_value)
    excess = (excess + 16 * U * scale) * (1 + 8 * U)
    symmetric = np.minimum(start, end) >= excess
    left = np.where(symmetric, start - excess, end + shallow * width * (1 - 4 * U)) * (1 - 2 * U)
    right = np.where(symmetric, end - excess, end) * (1 - 2 * U)
    return np.maximum(left, 0.0), np.maximum(right, 0.0)


# ----- builder helpers --------------------------------------------------------------------

def _builder_arguments(tails, interval, tail_mass, tails_rtol) -> tuple[float, float, tuple[float, float]]:
    """Validated (interval, tail_mass, (rtol, ulps)): the tails' accuracy as declared by the tails
    (:attr:`afa.mechanisms.loss_tails.LossTails.log_rtol`, ``log_ulps``) unless ``tails_rtol`` overrides its rtol."""
    if not isinstance(tails, LossTails):
        raise TypeError(f"tails must be a LossTails, got {type(tails).__name__}")
    if tails_rtol is None:
        tails_rtol = tails.log_rtol
    interval = check.in_interval("interval", interval, 0.0, INTERVAL_RANGE[1], low_open=True)
    tail_mass = check.in_interval("tail_mass", tail_mass, 0.0, 1.0, low_open=True, high_open=True)
    tails_rtol = check.in_interval("tails_rtol", tails_rtol, 0.0, 1e-3)
    check.in_interval("tails.inf_mass", tails.inf_mass, 0.0, 1.0)
    return interval, tail_mass, (tails_rtol, float(tails.log_ulps))


def _floor_argument(floor) -> float | None:
    if floor is None:
        return None
    floor = check.real_number("floor", floor)
    if not floor < 0:
        raise ValueError(f"floor must be a negative loss, got {floor!r}")
    return floor


def _loss_grid(tails: LossTails, interval: float, tail_mass: float,
               floor: float | None = None) -> tuple[int, np.ndarray]:
    """(first index, grid losses) covering the loss range, or where the tails beyond hold <= tail_mass / 2.

    The grid holds a point above 0 and, unless the loss lies above one grid step, 0 itself and a point below
    it.  (Doroshenko et al. 2022, Assumption 5.2 puts 0 in every grid so that an optimistic PLD is the PLD of a
    pair of distributions; here a PLD stands for a positive measure whose hockey-stick curve lies above or
    below the true one at every real eps, an order that composition keeps on any grid (module docstring), so
    a loss far above 0 -- an exactly composed term -- is gridded only where it lies.)
    It starts no lower than ``floor`` (if given, <= -interval) and -LOSS_LIMIT; the mass below its first
    point is placed there (pessimistic) or at most there (optimistic), valid for any grid.  At the top it
    goes on as far as the tails need.  Raises PLDTooLargeError, before any large allocation, when more
    than PLDOptions.max_grid_points points would be needed.
    """
    low, high = tails.loss_range
    most = _max_grid_points() + 1  # searches stop here: a grid reaching it is refused anyway
    high_limit = math.inf
    low_limit = -LOSS_LIMIT if floor is None else max(-LOSS_LIMIT, min(float(floor), -interval))
    log_half = math.log(tail_mass / 2)

    def tail(indices: np.ndarray) -> np.ndarray:
        return tails.log_tails(indices * interval)[0]

    def index_limit(loss: float) -> int:
        return most if loss / interval >= most else max(1, math.ceil(loss / interval))

    if math.isfinite(high):
        top = max(1, math.ceil(min(high, high_limit) / interval)) if high / interval < most else most
    else:
        top = _first_true(lambda i: tail(i) <= log_half, 1, index_limit(high_limit))
    if math.isfinite(low) and low >= low_limit:
        bottom = math.floor(low / interval) if -low / interval < most else -most
    else:
        stop = index_limit(-low_limit)
        bottom = -_first_true(lambda j: tails.log_lower_mass(-j * interval) <= log_half, 1, stop)
        if math.isfinite(low):
            bottom = max(bottom, math.floor(low / interval))
    bottom, top = (bottom if math.isfinite(low) and low > interval else min(bottom, -1)), max(top, 1)
    _check_size(top - bottom + 1, "the PLD of one mechanism")
    budget.reserve(16 * 8 * (top - bottom + 1), "the loss grid of one mechanism's PLD")
    return bottom, interval * np.arange(bottom, top + 1)


def _grid_log_tails(tails: LossTails, interval: float, first: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``tails.grid_log_tails`` (kept for the other builder), or for grids above TAILS_CHUNK points the tails
    chunk by chunk with a budget check between chunks (not kept)."""
    if count <= TAILS_CHUNK:
        return tails.grid_log_tails(interval, first, count)
    return _chunked_log_tails(tails, interval * np.arange(first, first + count))


def _chunked_log_tails(tails: LossTails, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``tails.log_tails(points)``, TAILS_CHUNK points at a time, checking the query's time budget in between."""
    if points.size <= TAILS_CHUNK:
        return tails.log_tails(points)
    parts = []
    for start in range(0, points.size, TAILS_CHUNK):
        budget.check("evaluating the loss tails on a PLD's grid")
        parts.append(tails.log_tails(points[start:start + TAILS_CHUNK]))
    first, second = zip(*parts, strict=True)
    return np.concatenate(first), np.concatenate(second)


def _first_true(predicate, start: int, stop: int) -> int:
    """Smallest i in [start, stop] with predicate(i) (monotone False .. True), or stop.

    ``predicate`` takes an array of indices (one vectorised call per round): doubling probes
    first, then rounds of FIRST_TRUE_PROBES evenly spaced probes inside the bracket.
    """
    doubling = np.unique(np.minimum(start - 1 + 2 ** np.arange(int(math.log2(max(stop - start + 1, 1))) + 2), stop))
    hits = np.flatnonzero(predicate(doubling))
    if hits.size == 0:
        return stop
    good = int(doubling[hits[0]])
    bad = int(doubling[hits[0] - 1]) if hits[0] > 0 else start - 1
    while good - bad > 1:
        probes = np.unique(np.linspace(bad + 1, good - 1, min(FIRST_TRUE_PROBES, good - bad - 1)).astype(np.int64))
        hits = np.flatnonzero(predicate(probes))
        if hits.size:
            good = int(probes[hits[0]])
            bad = int(probes[hits[0] - 1]) if hits[0] > 0 else bad
        else:
            bad = int(probes[-1])
    return good


def _exp_bounds(log_values: ArrayLike, accuracy: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) bounds on e^y for y accurate to rtol + ulps u (|y| + 4), ``accuracy`` = (rtol, ulps)."""
    rtol, ulps = accuracy
    log_values = np.asarray(log_values, dtype=float)
    values = np.exp(log_values)
    with np.errstate(invalid="ignore"):
        spread = np.where(values > 0, rtol + ulps * U * (np.abs(log_values) + 4), 0.0)
    return values * (1 - spread), values * (1 + spread)


def _scaled_exp_bounds(log_values: np.ndarray, log_scale: np.ndarray,
                       accuracy: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) bounds on e^{y + s} for y accurate as ``accuracy`` says and an exactly meant scale s (given
    rounded): e^y's bounds as in :func:`_exp_bounds`, formed as one exponential so that neither factor underflows
    or overflows alone, plus the rounding of y + s and of exp."""
    rtol, ulps = accuracy
    log_values = np.asarray(log_values, dtype=float)
    with np.errstate(invalid="ignore"):
        finite = log_values > -np.inf
        spread = np.where(finite, rtol + ulps * U * (np.abs(log_values) + 4), 0.0)
        exponent = np.where(finite, log_values + log_scale, -np.inf)
        rounding = 8 * U * (4 + np.abs(np.where(finite, log_values, 0.0)) + np.abs(log_scale))
        values = np.exp(exponent)
    return values * (1 - spread) * (1 - rounding), values * (1 + spread) * (1 + rounding)


def _excess_bounds(log_p: np.ndarray, log_q: np.ndarray, at: np.ndarray,
                   accuracy: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on P[L > x] - e^at Q[L > x] = P[L > x] (1 - e^g), g = at + log Q - log P <= 0 (at <= x).

    Formed without cancelling e^at Q against P (as LossTails.hockey_stick); with at = x it is the
    finite part of the hockey-stick divergence delta(x).
    """
    rtol, ulps = accuracy
    p_low, p_high = _exp_bounds(log_p, accuracy)
    with np.errstate(invalid="ignore"):
        gap = np.where(log_p > -np.inf, np.minimum(at + log_q - log_p, 0.0), -np.inf)
        magnitudes = np.abs(at) + np.abs(log_q) + np.abs(log_p) + 4
        gap_error = np.where(log_q > -np.inf, 2 * rtol + 2 * ulps * U * magnitudes, 0.0)
    factor = -np.expm1(gap)
    factor_error = np.exp(np.minimum(gap + gap_error, 0.0)) * np.expm1(gap_error) + 2 * U * factor
    lower = p_low * np.maximum(factor - factor_error, 0.0) * (1 - 2 * U)
    upper = p_high * np.minimum(factor + factor_error, 1.0) * (1 + 2 * U)
    return lower, upper


def _curve_tail_values(curve: np.ndarray, interval: float) -> np.ndarray:
    """Tails of the PLD whose hockey-stick curve interpolates ``curve`` (Doroshenko et al. 2022, Algorithm 1).

    ``curve`` = [h(0), h(alpha_0), ..., h(alpha_{n-1})], non-increasing.  Returns t_0 .. t_n with t_i
    the mass at or above x_i (t_n the mass at +infinity): t_0 = h(0),
    t_i = h_i + (h_{i-1} - h_i) / (1 - e^{-interval}), t_n = h_{n-1}; positive terms only.
    """
    values = curve[1:]
    tails = np.empty(values.size + 1)
    tails[0] = curve[0]
    tails[1:-1] = values[1:] + (values[:-1] - values[1:]) / -math.expm1(-interval)
    tails[-1] = values[-1]
    return tails


def _lower_hull_at_grid(origin: float, candidates: np.ndarray, losses: np.ndarray) -> np.ndarray:
    """The lower convex hull, in alpha = e^x, of (0, origin) and (e^{losses[i]}, candidates[i]), read at the grid.

    Doroshenko et al. 2022, Algorithm 2, ConvexHull step.  The hull's slopes are the isotonic (non-decreasing)
    regression
    of the segments' slopes weighted by their widths (pool adjacent violators: a pool's mean is the chord's
    slope), so its vertices are where the pools start; the hull is read off the candidates at those vertices.
    Equal alphas (a grid finer than the rounding of e^x) take Andrew's monotone chain instead.  Rounding
    only costs tightness: the caller clips the result to the candidates.  The hull does not change when alpha
    is scaled, so alpha is measured in units of e^{x_ref}, x_ref as high as the first point allows (<= 690 above
    it): the slopes, down to about Q[L > x] e^{x_ref} (Q ~ 1e-326 where delta ~ 1e-300 at eps 60), stay normal.
    """
    reference = min(float(losses[-1]), float(losses[0]) + 690.0)
    alphas = np.concatenate(([0.0], np.exp(losses - reference)))
    values = np.concatenate(([origin], candidates))
    widths = np.diff(alphas)
    if np.all(widths > 0):
        vertices = optimize.isotonic_regression(np.diff(values) / widths, weights=widths).blocks
    else:
        vertices = _monotone_chain(alphas, values)
    return np.interp(alphas[1:], alphas[vertices], values[vertices])


def _monotone_chain(alphas: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Indices of the lower convex hull's vertices of points sorted by alpha (Andrew's monotone chain)."""
    alphas, values = alphas.tolist(), values.tolist()
    hull: list[int] = []
    for i, (alpha, value) in enumerate(zip(alphas, values)):
        while len(hull) >= 2:
            j, k = hull[-2], hull[-1]
            if (values[k] - values[j]) * (alpha - alphas[j]) < (value - values[j]) * (alphas[k] - alphas[j]):
                break
            hull.pop()
        hull.append(i)
    return np.array(hull)


def _from_tail_values(tail_values: np.ndarray, first: int, interval: float, pessimistic: bool) -> DiscretePLD:
    """The PLD whose mass at or above x_i is tail_values[i] (mass at +inf: the last entry).

    Tails are made non-increasing by raising them (pessimistic) or lowering them (optimistic).
    """
    if pessimistic:
        tail_values = np.maximum.accumulate(tail_values[::-1])[::-1]
    else:
        tail_values = np.minimum.accumulate(np.maximum(tail_values, 0.0))
    probs = tail_values[:-1] - tail_values[1:]
    return DiscretePLD(interval, first, probs, float(min(tail_values[-1], 1.0)), pessimistic,
                       relative_error=BUILDER_RELATIVE_ERROR)


# ----- composition helpers ----------------------------------------------------------------

def _self_power(base: DiscretePLD, count: int, tolerance: float, rounding_tolerance: float,
                tilt: float | None = None) -> DiscretePLD:
    """``base`` composed ``count`` times (``DiscretePLD.self_compose`` after truncating the input)."""
    h, finite, inf_mass = base.interval, float(base.probs.sum()), base.inf_mass
    rho = math.expm1(count * math.log1p(base.relative_error))
    # The stored error E of the base: (A + E)^k - A^k has norm <= (|A| + |E|)^k - |A|^k <= (|S| + 2|E|)^k - |S|^k.
    error = _power_error(math.log(finite) if finite > 0 else -math.inf,
                         math.log(base.error) if base.error > 0 else -math.inf, count)
    moved = base.error if base.pessimistic else -base.error  # the finite mass of A lies within |S| +- |E|
    composed_inf = composed_inf_mass(max(finite + moved, 0.0), inf_mass, count, base.pessimistic)
    support = np.flatnonzero(base.probs > 0)
    if support.size == 0:
        return DiscretePLD(h, count * base.offset, np.zeros(1), composed_inf, base.pessimistic, rho, error)
    masses, positions = base.probs[support], base.offset + support
    weights = base.probs[support[0]:support[-1] + 1]
    if _power_rounding(count, count * weights.size) > rounding_tolerance / 4 and \
            _direct_power_cost(weights.size, count) <= settings.current().pld.direct_power_limit:
        budget.reserve(4 * 8 * count * weights.size, "the direct convolutions of a PLD's power")
        values, relative, underflow = _power_by_convolution(weights, count)
        powered = DiscretePLD(h, count * int(positions[0]), values, min(1.0, composed_inf), base.pessimistic,
                              relative_error=(1 + rho) * (1 + relative) - 1)
        decay = tilt if tilt else base.tilt
        if decay > 0 and base.error > 0:  # the base's error keeps its tilted norm through the power
            top = float(powered.losses[-1])
            log_tilted = np.logaddexp(_power_error(_log_mgf_of(base, decay), base.log_tilted_error(decay), count,
                                                   log=True), _log_or_minus_inf(underflow) + decay * top)
            return _with_error(powered, error + underflow, float(log_tilted), decay)
        return dataclasses.replace(powered, error=error + underflow)
    mgf = _LogMGF(weights, h, int(positions[0]))
    window = functools.partial(_WindowPlan, mgf, count, tolerance, rounding_tolerance, h, int(positions[0]),
                               int(positions[-1]))
    # A given tilt is used only where the plain power's rounding, as computed, exceeds rounding_tolerance / 4.
    plan = window(0.0 if tilt is not None else None)
    while True:
        length = plan.top - plan.bottom + 1
        _check_size(length, f"the {count}-fold composition")
        size = plan.size
        budget.reserve(_fft_bytes(size), f"the FFT of the {count}-fold power of a PLD")
        power = functools.partial(_power_on_window, masses, positions, h, count=count, bottom=plan.bottom,
                                  length=length, size=size)
        normalizer = count * mgf(0.0)[0]  # the plain power is of p / sum(p)
        values, plain_error, rounding = power(0.0, mgf(0.0)[0])
        values *= math.exp(normalizer)
        plain_error = math.exp(normalizer) * (plain_error + (0.0 if base.pessimistic else plan.outside_mass))
        if plan.tilt > 0 or not tilt or plain_error <= rounding_tolerance / 4:
            break
        budget.check(f"the tilted {count}-fold power of a PLD")
        plan = window(tilt)
    losses = h * np.arange(plan.bottom, plan.top + 1)
    log_tilted = -math.inf
    if plan.tilt > 0 and base.error > 0:
        log_tilted = _power_error(mgf(plan.tilt)[0], base.log_tilted_error(plan.tilt), count, log=True)
    fresh, fresh_log_tilted = plain_error, _log_or_minus_inf(plain_error) + plan.tilt * float(losses[-1])
    if plan.tilt > 0:  # from the switch point up, the untilted tilted power (module docstring)
        budget.check("the tilted power of a PLD")
        tilted, tilted_l1, tilted_rounding = power(plan.tilt, mgf(plan.tilt)[0])
        if not base.pessimistic:
            tilted_l1 += plan.tilted_outside_mass
        normalizer = count * mgf(plan.tilt)[0]
        start, fresh, fresh_log_tilted = _switch_point(losses, plain_error, math.log(tilted_l1) + normalizer
                                                       if tilted_l1 > 0 else -math.inf, plan.tilt)
        if start < length:
            values[start:] = tilted[start:] * np.exp(normalizer - plan.tilt * losses[start:])
            untilting = 4 * U * (4 + abs(normalizer) + plan.tilt * float(np.max(np.abs(losses))))
            rounding = max(rounding, tilted_rounding + untilting)
    if base.pessimistic:
        values[0] += plan.lower_mass
        composed_inf += plan.upper_mass
    relative = (1 + rho) * (1 + rounding + 2 * U * (abs(count * mgf(0.0)[0]) + 4)) - 1
    return _with_error(DiscretePLD(h, plan.bottom, values, min(1.0, composed_inf), base.pessimistic,
                                   relative_error=relative),
                       error + fresh, float(np.logaddexp(log_tilted, fresh_log_tilted)), plan.tilt)


def _power_error(log_mass: float, log_error: float, count: int, log: bool = False) -> float:
    """(|S| + 2|E|)^k - |S|^k from logs of a norm of S and of E (its log if ``log``; -inf / 0 when E = 0)."""
    if log_error == -math.inf:
        return -math.inf if log else 0.0
    if log_mass == -math.inf:
        value = count * (log_error + math.log(2.0))
    else:
        ratio = 2 * math.exp(log_error - log_mass) if log_error - log_mass < 700 else math.inf
        value = count * log_mass + math.log(math.expm1(count * math.log1p(ratio))) if math.isfinite(ratio) else \
            count * (log_error + math.log(2.0) + math.log1p(math.exp(log_mass - log_error) / 2))
    value += 16 * U * (4 + count * (abs(log_mass) if math.isfinite(log_mass) else 0.0) + count * abs(log_error))
    return value if log else math.exp(min(value, 709.0))


def _log_or_minus_inf(value: float) -> float:
    return math.log(value) if value > 0 else -math.inf


def _switch_point(losses: np.ndarray, plain_error: float, log_tilted_error: float,
                  tilt: float) -> tuple[int, float, float]:
    """(start, l1 bound, log tilted bound) of values taken from the plain computation below index ``start`` and
    from the untilted tilted one from it up.

    The plain values' error has l1 norm <= ``plain_error``; the untilted tilted values' error has tilted norm
    sum |F_i| e^{tilt x_i} <= e^{log_tilted_error}.  Below x_start the plain error's tilted norm is at most
    plain_error e^{tilt x_start}; from x_start up the tilted error's l1 norm is at most e^{log_tilted_error -
    tilt x_start}.  The switch is where the two balance, so each norm is at most twice its better part.
    """
    if log_tilted_error == -math.inf:
        return 0, 0.0, -math.inf
    if plain_error > 0:
        switch = (log_tilted_error - math.log(plain_error)) / tilt
    else:
        switch = math.inf
    start = int(np.searchsorted(losses, switch, side="left"))
    if start >= losses.size:
        return start, plain_error, math.log(plain_error) + tilt * float(losses[-1])
    at = float(losses[start])
    l1 = math.exp(min(log_tilted_error - tilt * at, 709.0)) * (1 + 4 * U * (4 + tilt * abs(at)))
    log_tilted = log_tilted_error
    if start > 0:
        l1 += plain_error
        log_tilted = float(np.logaddexp(log_tilted, math.log(plain_error) + tilt * float(losses[start - 1])))
    return start, l1, log_tilted + 16 * U * (4 + abs(log_tilted))


def _with_error(pld: DiscretePLD, error: float, log_tilted: float, tilt: float) -> DiscretePLD:
    """``pld`` with the error E given by its l1 bound and the log of its tilted-norm bound at ``tilt``: the slack
    error e^{-tilt max(eps - decay_start, 0)} with decay_start where the two bounds meet (rounded up)."""
    if error == 0.0:
        return dataclasses.replace(pld, error=0.0, tilt=0.0, decay_start=0.0)
    if tilt == 0.0 or log_tilted == -math.inf:
        return dataclasses.replace(pld, error=error, tilt=0.0, decay_start=0.0)
    decay_start = (float(log_tilted) - math.log(error)) / tilt
    return dataclasses.replace(pld, error=error, tilt=tilt, decay_start=decay_start + 8 * U * (1 + abs(decay_start)))


def _fft_bytes(size: int) -> int:
    """Memory of the arrays one FFT convolution of length ``size`` holds at once (a few real and complex copies)."""
    return 48 * size


class _LogMGF:
    """t -> K(t) = log sum_i p_i e^{t x_i} of a positive measure on a uniform grid, x_i = interval (first + i).

    Many orders t at once, blockwise: with i = a W + b (W = BLOCK) and m_a the largest log-mass of block a,
    sum_i p_i e^{t x_i} = sum_a e^{m_a + t x_{aW}} S_a(t),  S_a(t) = sum_b (p_{aW+b} e^{-m_a}) e^{t interval b},
    so the inner sums of every block and order are one matrix product (the ratios p e^{-m_a} <= 1 are formed
    once), and only the outer sums need logarithms.  e^{t interval b} stays within e^{+-BLOCK_REACH} for
    |t| interval W <= BLOCK_REACH; larger orders take the direct log-sum-exp over the points.  A term
    underflowing in S_a is below 1e-300 of the block's largest, which is at least e^{-BLOCK_REACH}.
    """

    BLOCK, BLOCK_REACH = 64, 300.0

    def __init__(self, masses: np.ndarray, interval: float, first: int):
        support = np.flatnonzero(masses > 0)
        self.interval, self.first = interval, first
        self.log_masses, self.losses = np.log(masses[support]), interval * (first + support)
        self.spread = _spread(self.log_masses, self.losses)
        padded = np.zeros(-(-masses.size // self.BLOCK) * self.BLOCK)
        padded[:masses.size] = masses
        blocks = padded.reshape(-1, self.BLOCK)
        largest = blocks.max(axis=1)
        self._ratios = blocks / np.where(largest > 0, largest, 1.0)[:, None]
        with np.errstate(divide="ignore"):
            self._block_log_masses = np.log(largest)
        self._block_losses = interval * (first + self.BLOCK * np.arange(largest.size))
        self._known: dict[float, float] = {}  # the window plan asks for the same orders many times

    def __call__(self, ts: ArrayLike) -> np.ndarray:
        ts = np.atleast_1d(np.asarray(ts, dtype=float))
        missing = np.array(sorted({float(t) for t in ts} - self._known.keys()))
        if missing.size:
            values = np.empty(missing.size)
            blocked = np.abs(missing) * self.interval * self.BLOCK <= self.BLOCK_REACH
            orders = missing[blocked]
            with np.errstate(divide="ignore"):  # (an empty block: log 0)
                inner = np.log(self._ratios @ np.exp(np.outer(self.interval * np.arange(self.BLOCK), orders)))
            exponents = self._block_log_masses[:, None] + self._block_losses[:, None] * orders + inner
            values[blocked] = log_sum_exp(exponents)
            values[~blocked] = log_sum_exp(self.log_masses[:, None] + self.losses[:, None] * missing[~blocked])
            self._known.update(zip(missing.tolist(), values.tolist()))
        return np.array([self._known[float(t)] for t in ts])

    def magnitude(self, t: float) -> float:
        """Bound on |K(t)| plus the magnitudes rounded inside it (K(t)'s rounding is a few u times this; the
        inner sums of BLOCK terms add BLOCK u)."""
        return (abs(self(t)[0]) + abs(t) * float(np.max(np.abs(self.losses)))
                + float(np.max(np.abs(self.log_masses))) + math.log(self.losses.size) + 4 + self.BLOCK)


def _spread(log_masses: np.ndarray, losses: np.ndarray) -> float:
    """The standard deviation of the losses under the normalized masses (numpy sums, not BLAS dot products)."""
    weights = np.exp(log_masses - log_sum_exp(log_masses))
    mean = float(np.sum(weights * losses))
    return math.sqrt(max(float(np.sum(weights * (losses - mean) ** 2)), 0.0))


class _WindowPlan:
    """Output window [bottom, top] (grid indices) of a count-fold power, FFT size, and the tilt (Google DP team 2025,
    Sec. 5.2).

    Chernoff: the mass of the k-fold power at or above a is at most exp(k K(t) - t a) for t > 0, and
    at or below a at most exp(k K(t) - t a) for t < 0; eq. (3) gives the point for a tolerance, best
    over orders around each measure's own Gaussian optimum (CHERNOFF_FACTORS).  The plain window
    holds all but tolerance / 2 on each side.  If the FFT rounding (about 4 k c log2(M) u) exceeds
    ``rounding_tolerance`` / 4, the tilt lam is the Chernoff order of the point beyond which the plain mass
    is below tolerance / (4 * rounding) -- where the untilted rounding, about rounding e^{k K(lam) - lam x},
    reaches tolerance / 4 -- unless ``tilt`` gives it (0: none); the window then also holds the tilted
    measure p_i e^{lam x_i} / M(lam) (its own spread and orders: its tails can be far heavier than the plain
    ones) to within rounding / 8.

    ``lower_mass``, ``upper_mass`` bound the plain mass strictly outside the window (it goes to the
    bottom point or to +inf when pessimistic).  ``outside_mass`` and ``tilted_outside_mass`` bound the
    mass of the normalized plain and tilted measures that the circular FFT of length ``size`` wraps
    *into* the window -- at positions <= top - size or >= bottom + size; mass in between lands in the
    padding and is dropped, which an optimistic PLD may do and a pessimistic one covers by
    ``lower_mass`` and ``upper_mass``.
    """

    def __init__(self, mgf: _LogMGF, count: int, tolerance: float, rounding_tolerance: float, interval: float,
                 first: int, last: int, tilt: float | None = None):
        x_low, x_high = count * first * interval, count * last * interval
        log_half = math.log(tolerance / 2)
        orders = self._orders(mgf, count, log_half, interval)
        low = _chernoff_point(mgf, count, log_half, -orders, x_low)[0]
        high = _chernoff_point(mgf, count, log_half, orders, x_high)[0]
        rounding = _power_rounding(count, max(1, int((high - low) / interval) + 1))
        self.tilt, self.cut = 0.0, math.inf
        tilted = tilted_orders = None
        if tilt is not None and tilt > 0:
            self.tilt = tilt
        elif tilt is None and rounding > rounding_tolerance / 4:
            log_cut = math.log(tolerance / (4 * rounding))
            cut, chosen = _chernoff_point(mgf, count, log_cut, self._orders(mgf, count, log_cut, interval), x_high)
            if cut < high:
                self.tilt, self.cut = chosen, cut
        if self.tilt > 0:
            tilted = _ShiftedLogMGF(mgf, self.tilt)
            log_rounding = math.log(rounding / 8)
            tilted_orders = self._orders(tilted, count, log_rounding, interval)
            low = min(low, _chernoff_point(tilted, count, log_rounding, -tilted_orders, x_low)[0])
            high = max(high, _chernoff_point(tilted, count, log_rounding, tilted_orders, x_high)[0])
        self.bottom = max(math.floor(low / interval), count * first)
        self.top = min(math.ceil(high / interval), count * last)
        self.size = fft_size(self.top - self.bottom + 1)

        def mass_beyond(measure, measure_orders, lowest: int | None, highest: int | None) -> float:
            """Bound on the mass at positions <= lowest plus that at positions >= highest (None: none there)."""
            total = 0.0
            if lowest is not None and lowest >= count * first:
                total += math.exp(_chernoff_log_mass(measure, count, (lowest + 0.5) * interval, -measure_orders))
            if highest is not None and highest <= count * last:
                total += math.exp(_chernoff_log_mass(measure, count, (highest - 0.5) * interval, measure_orders))
            return total

        self.lower_mass = mass_beyond(mgf, orders, self.bottom - 1, None)
        self.upper_mass = mass_beyond(mgf, orders, None, self.top + 1)
        wrap = (self.top - self.size, self.bottom + self.size)
        self.outside_mass = mass_beyond(mgf, orders, *wrap) * math.exp(-count * mgf(0.0)[0])
        self.tilted_outside_mass = mass_beyond(tilted, tilted_orders, *wrap) if tilted is not None else 0.0

    @staticmethod
    def _orders(mgf, count: int, log_tolerance: float, interval: float) -> np.ndarray:
        """Chernoff orders t > 0 around sqrt(2 log(1/tol) / k) / sigma, the Gaussian optimum of this measure."""
        spread = max(mgf.spread, interval)
        return math.sqrt(2 * max(1.0, -log_tolerance) / count) / spread * CHERNOFF_FACTORS


class _ShiftedLogMGF:
    """K(lam + t) - K(lam): the log-MGF of the tilted, normalized measure p_i e^{lam x_i} / M(lam)."""

    def __init__(self, mgf: _LogMGF, tilt: float):
        self.mgf, self.tilt, self.at_tilt = mgf, tilt, mgf(tilt)[0]
        self.spread = _spread(mgf.log_masses + tilt * mgf.losses, mgf.losses)

    def __call__(self, ts: ArrayLike) -> np.ndarray:
        return self.mgf(self.tilt + np.atleast_1d(ts)) - self.at_tilt

    def magnitude(self, t: float) -> float:
        return self.mgf.magnitude(self.tilt + t) + abs(self.at_tilt)


def _chernoff_point(mgf, count: int, log_tolerance: float, orders: np.ndarray, cap: float) -> tuple[float, float]:
    """(a, t): beyond a the count-fold power has mass <= e^log_tolerance, Google DP team 2025, Sec. 5.2 eq. (3).

    a = (k K(t) - log tol) / t, smallest over orders t > 0 (upper side) or largest over t < 0
    (lower side), never beyond cap = k * (extreme loss).
    """
    points = (count * mgf(orders) - log_tolerance) / orders
    best = int(np.argmin(points) if orders[0] > 0 else np.argmax(points))
    point = min(points[best], cap) if orders[0] > 0 else max(points[best], cap)
    return float(point), float(orders[best])


def _chernoff_log_mass(mgf, count: int, point: float, orders: np.ndarray) -> float:
    """log of a bound on the count-fold power's mass at or above point (orders > 0) or at or below it (< 0).

    min over t of k K(t) - t a (t = 0 gives the total mass), raised by a bound on its rounding.
    """
    orders = np.append(orders, 0.0)
    exponents = count * mgf(orders) - orders * point
    best = int(np.argmin(exponents))
    rounding = 8 * U * (count * mgf.magnitude(orders[best]) + abs(orders[best] * point) + 4)
    return float(exponents[best] + rounding)


def _power_on_window(masses: np.ndarray, positions: np.ndarray, interval: float, tilt: float, log_normalizer: float,
                     *, count: int, bottom: int, length: int, size: int) -> tuple[np.ndarray, float, float]:
    """The count-fold power of w_i = p_i e^{tilt x_i - log_normalizer} on grid indices [bottom, bottom + length).

    One FFT of length ``size`` (circular: mass outside the window wraps into it).  Returns the values,
    a bound on their l1 rounding error -- forward error eta = gamma ||w||_1 per frequency (Higham
    Sec. 24.1), through the power as k eta (|z| + eta)^{k-1} plus the power's own rounding, then
    l1 <= ||spectral error||_2 (Parseval) plus the inverse transform's rounding -- and the relative
    error (1 + theta)^k - 1 that the rounding theta of the weights themselves causes.
    """
    exponents = tilt * interval * positions - log_normalizer
    weights = masses * np.exp(exponents)
    theta = U * (float(np.max(np.abs(exponents))) + 4)
    first = int(positions[0])
    spectrum, eta = _spectrum(weights, size, positions - first)
    modulus = np.abs(spectrum)
    with np.errstate(divide="ignore"):
        log_modulus = np.log(modulus)
    if count < SQUARING_LIMIT:
        power = _power_by_squaring(spectrum, count)
        power_modulus = np.abs(power)
    else:
        power_modulus = np.exp(count * log_modulus)
        phase = float(count) * np.angle(spectrum)
        power = power_modulus * (np.cos(phase) + 1j * np.sin(phase))
    finite_log = np.where(modulus > 0, log_modulus, 0.0)
    bound = (count * eta * np.exp((count - 1) * np.log(modulus + eta))
             + power_rounding(count, finite_log, power_modulus)
             + 4 * count * SUBNORMAL)
    values, error = _inverse(power, bound, size, (bottom - count * first) % size, length)
    return values, error, math.expm1(count * math.log1p(theta))


def _binary_power(x, count: int, multiply):
    """x multiplied ``count`` times with itself under ``multiply``, by binary powering (count - 1 products
    at most, about 2 log2(count))."""
    result, square = None, x
    while True:
        if count & 1:
            result = square if result is None else multiply(result, square)
        count >>= 1
        if not count:
            return result
        square = multiply(square, square)


def _direct_power_cost(length: int, count: int) -> int:
    """Multiply-adds of :func:`_power_by_convolution` for weights of ``length`` points."""
    products = []

    def convolved_length(a: int, b: int) -> int:
        products.append(a * b)
        return a + b - 1

    _binary_power(length, count, convolved_length)
    return sum(products)


def _power_by_convolution(weights: np.ndarray, count: int) -> tuple[np.ndarray, float, float]:
    """(weights convolved ``count`` times with itself by direct sums, relative error bound, l1 underflow bound).

    Binary powering with numpy's direct convolution.  An output point of a convolution of positive vectors
    is a sum of at most m positive products (m the shorter length), so in any order its rounding is at most
    gamma_m = m u / (1 - m u) of its value (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
    Sec. 3.1), and the factors' own relative errors carry through as factors; products below the normal
    range lose at most a subnormal spacing each, which the l1 bound collects (every later convolution
    multiplies it by at most the other factor's mass).
    """
    def convolve(a, b):
        (x, x_error), (y, y_error) = a, b
        shorter = min(x.size, y.size)
        rounding = shorter * U / (1 - shorter * U)
        return direct_convolve(x, y, "convolving a discretized PLD"), (1 + x_error) * (1 + y_error) * (1 + rounding) - 1

    values, relative = _binary_power((weights, 0.0), count, convolve)
    underflow = _direct_power_cost(weights.size, count) * SUBNORMAL * max(1.0, float(np.sum(weights))) ** count
    return values, relative, underflow


def _power_by_squaring(z: np.ndarray, count: int) -> np.ndarray:
    """z^count elementwise by binary powering (see SQUARING_LIMIT for its rounding)."""
    return _binary_power(z, count, operator.mul)


def _spectrum(weights: np.ndarray, size: int, positions: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """(rfft of weights placed at positions mod size, componentwise bound on its rounding)."""
    folds = 1
    if positions is not None:
        folds = -(-int(positions[-1] + 1) // size)
        weights = np.bincount(positions % size, weights=weights, minlength=size)
    spectrum = rfft(weights, n=size)
    return spectrum, (fft_gamma(size) + folds * U) * float(np.sum(weights))


def _inverse(spectrum: np.ndarray, bound: np.ndarray, size: int, start: int, length: int) -> tuple[np.ndarray, float]:
    """(irfft values at bins start, start+1, ... (mod size), clipped at 0; l1 bound on their error)."""
    values = np.maximum(np.roll(irfft(spectrum, n=size), -start)[:length], 0.0)  # (length <= size)

    def full_norm(moduli: np.ndarray) -> float:
        """The 2-norm over all size frequencies: the half spectrum's terms count twice, but the zero (and
        for even size the Nyquist) frequency once.  (numpy's pairwise sum, not a BLAS dot product, whose
        threads are slow on a busy machine.)"""
        squares = moduli ** 2
        once = squares[0] + (squares[-1] if size % 2 == 0 else 0.0)
        return math.sqrt(max(2 * float(np.sum(squares)) - once, 0.0))

    bound_norm = full_norm(bound)
    return values, bound_norm + fft_gamma(size) * (full_norm(np.abs(spectrum)) + bound_norm)


def _power_rounding(count: int, points: int) -> float:
    """The plan's estimate of a count-fold FFT power's absolute rounding on a window of ``points`` points."""
    return 4 * count * fft_gamma(fft_size(points))


def _max_grid_points() -> int:
    """The most points a PLD's grid (or a composition's window) may have (the active :class:`afa.PLDOptions`)."""
    return settings.current().pld.max_grid_points

def _check_size(points: int, what: str) -> None:
    """Refuse (PLDTooLargeError) more than PLDOptions.max_grid_points points (``points`` may be a capped count)."""
    if points > _max_grid_points():
        raise PLDTooLargeError(
            f"{what} needs more than {_max_grid_points():.3g} grid points (the limit); use a coarser "
            "value_discretization_interval, a larger tail_mass, or the analytic engine (method='contour')")


def _tail_tolerance(value) -> float:
    return check.in_interval("tail_mass_truncation", value, 0.0, 1.0, low_open=True, high_open=True)


def _common_tilt(first: DiscretePLD, second: DiscretePLD) -> float:
    """The smaller positive tilt of two PLDs (0 if neither has one): converting an error's tilted norm down to a
    smaller tilt costs at most a factor 2, up to a larger one a factor e^{(difference) x_top}."""
    tilts = [pld_.tilt for pld_ in (first, second) if pld_.tilt > 0]
    return min(tilts, default=0.0)


def _tilt_argument(tilt) -> float:
    tilt = check.non_negative("tilt", tilt)
    if not math.isfinite(tilt):
        raise ValueError(f"tilt must be finite, got {tilt!r}")
    return tilt


def _fft_convolution(first: np.ndarray, second: np.ndarray, size: int, length: int) -> tuple[np.ndarray, float]:
    """(the linear convolution of two non-negative vectors by one FFT of ``size`` >= ``length``, l1 bound on its
    rounding): componentwise forward errors (Higham Sec. 24.1) through the product, then ``_inverse``."""
    left, left_eta = _spectrum(first, size)
    right, right_eta = _spectrum(second, size)
    product = left * right
    bound = (np.abs(left) * right_eta + np.abs(right) * left_eta + left_eta * right_eta
             + 4 * U * np.abs(product))
    return _inverse(product, bound, size, 0, length)


def _tilted_weights(pld: DiscretePLD, tilt: float) -> tuple[np.ndarray, float, float]:
    """(p_i e^{tilt x_i - m}, m, relative rounding of the weights) with m = log sum_i p_i e^{tilt x_i} (rounded up:
    any normalizer serves, untilting multiplies by e^{m} again).  Weights below the normal range underflow
    (an absolute error of a subnormal spacing each, which the callers add)."""
    log_mgf = _log_mgf_of(pld, tilt)
    exponents = tilt * pld.losses - log_mgf
    big = exponents > 700.0  # p e^{y} <= 1, but e^{y} alone may overflow where p is tiny
    with np.errstate(divide="ignore", over="ignore"):
        weights = np.where(big, np.exp(np.where(big, np.log(pld.probs) + exponents, 0.0)),
                           pld.probs * np.exp(np.where(big, 0.0, exponents)))
    positive_big = big & (pld.probs > 0)
    magnitude = float(np.max(np.abs(exponents))) + (float(np.max(np.abs(np.log(pld.probs[positive_big]))))
                                                   if np.any(positive_big) else 0.0)
    return np.where(pld.probs > 0, weights, 0.0), log_mgf, 4 * U * (4 + magnitude)


def _propagated_error(first: DiscretePLD, second: DiscretePLD, tilt: float) -> tuple[float, float, float, float]:
    """(rho, l1 bound, log tilted bound at ``tilt``, bound on the mass at +inf's error) of the composition of
    two stored measures before its own rounding (module docstring, "Soundness").

    With S = A + E (A = (1 + theta) T plus or minus positive mass), S_X * S_Y = A_X * A_Y + E_X * S_Y + A_X * E_Y,
    and the l1 and tilted norms are submultiplicative under convolution (e^{t (x + y)} = e^{t x} e^{t y}):
    |E_X * S_Y| <= |E_X| |S_Y| and |A_X * E_Y| <= (|S_X| + |E_X|) |E_Y| in either norm (S's tilted norm is its
    moment-generating function).  The mass at +inf, a_X |S_Y| + |S_X| a_Y, is off by at most
    a_X |E_Y| + |E_X| a_Y in total (l1).
    """
    rho = (1 + first.relative_error) * (1 + second.relative_error) - 1
    first_mass, second_mass = float(first.probs.sum()), float(second.probs.sum())
    error = first.error * second_mass + (first_mass + first.error) * second.error
    inf_error = first.inf_mass * second.error + first.error * second.inf_mass
    log_tilted = -math.inf
    if tilt > 0 and (first.error > 0 or second.error > 0):
        first_mgf, second_mgf = _log_mgf_of(first, tilt), _log_mgf_of(second, tilt)
        first_error, second_error = first.log_tilted_error(tilt), second.log_tilted_error(tilt)
        log_tilted = np.logaddexp(first_error + second_mgf,
                                  np.logaddexp(first_mgf, first_error) + second_error)
        magnitudes = sum(abs(v) for v in (first_mgf, second_mgf, first_error, second_error) if math.isfinite(v))
        log_tilted = float(log_tilted) + 16 * U * (8 + magnitudes)
    return rho, error * (1 + 8 * U), log_tilted, inf_error * (1 + 8 * U)


def _log_mgf_of(pld: DiscretePLD, tilt: float) -> float:
    """log sum_i p_i e^{tilt x_i} of the stored finite masses (-inf if there are none), raised by its rounding."""
    support = np.flatnonzero(pld.probs > 0)
    if support.size == 0:
        return -math.inf
    exponents = np.log(pld.probs[support]) + tilt * pld.losses[support]
    value = float(log_sum_exp(exponents))
    return value + 8 * U * (4 + float(np.max(np.abs(exponents))) + math.log(support.size))


def _certify(value: np.ndarray, rounding: np.ndarray, rho: float, slack, pessimistic: bool) -> np.ndarray:
    """The certified bound from a computed delta_S, its rounding bound, the relative error rho and the slack.

    delta_S >= (1 - rho) delta_T - slack (pessimistic) and delta_S <= (1 + rho) delta_T + slack (optimistic),
    for the exact measure T the PLD stands for (module docstring).
    """
    if pessimistic:
        return np.minimum(1.0, (value + rounding + slack) / (1 - rho) * (1 + 4 * U))
    return np.maximum(0.0, (value - rounding - slack) / (1 + rho) * (1 - 4 * U))
