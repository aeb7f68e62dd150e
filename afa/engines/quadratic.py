"""delta(eps) of compositions of data-dependent Gaussians (and Gaussians) as one noncentral chi-square integral.

One use of :class:`afa.DataDependentGaussian` has, in one direction, the quadratic loss
L = L* + gamma (Z - z*)^2 with Z ~ N(0, 1) (:class:`afa.numerics.exact.QuadraticLoss`; Zhu, Dong & Wang 2022,
App. A, Example 15).  Uses that share the curvature gamma (the same ratio of the two standard
deviations, any sensitivities) therefore compose to

    L = c + gamma W + G,   W ~ chi'^2_n(lambda),   G ~ N(mu^2 / 2, mu^2),

with n the number of uses, lambda = sum of z*^2 over the uses, c = sum of L* (formed in 40-digit
arithmetic), and G the composed Gaussian mechanisms (mu = 0 when there are none).  Then

    delta(eps) = E[(1 - e^{eps - L})_+] = int f_W(w) h(w) dw,

with h(w) = (1 - e^{-gamma (w - w0)})_+ and w0 = (eps - c) / gamma when mu = 0, and the Gaussian's
closed form h(w) = delta_mu(eps - c - gamma w) (Sommer, Meiser & Mohammadi 2019, Thm 5) otherwise: a positive
integrand, so a quadrature accurate relative to it is accurate relative to delta at any size.  The
integral runs over w >= max(w0, 0) when gamma > 0 and over [0, w0] when gamma < 0 and mu = 0 (the
loss is then bounded above by c).  f_W is the noncentral chi-square density (Johnson, Kotz &
Balakrishnan 1995, ch. 29), evaluated in log space through the exponentially scaled Bessel
function, so that it keeps its relative accuracy in both tails.

Quadrature.  The integral is split at the integrand's peak (found on a logarithmic grid, then on
linear grids zoomed around the best point), and each piece is summed by the double-exponential rule
(tanh-sinh on a finite piece, exp-sinh on an infinite one; Takahasi & Mori 1974), whose nodes
cluster double-exponentially at the ends, where the density's singularity (n = 1), the payoff's
zero and the peak lie.  Each node is expressed by its distances to both ends of its piece, so
neither is lost to cancellation.  The step is halved until two levels agree within RTOL (or within
the rounding bounds of both); their difference is the quadrature part of the error, to which the
rounding of the log-integrand is added (unit roundoff times the magnitudes it is formed from).  An
integral that does not settle within MAX_LEVEL halvings of FIRST_STEP is refused (AccuracyError).
The ends of the rule's range (|t| <= REACH) are not checked: there the terms fall double-
exponentially (the density decays like e^{-w/2}, and near a piece's end the integrand vanishes or
has the density's integrable singularity).  A nearby eps (the root search's next point) reuses
the latest split and starts one level above the step it settled at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._accurate import UNIT_ROUNDOFF as U
from .._accurate import log_sum_exp
from ..numerics.exact import gaussian_log_delta
from ..results import AccuracyError

__all__ = ["QuadraticComposition"]

#: Two levels of the double-exponential rule agreeing within RTOL (relative) end the halving.
RTOL = 1e-13
#: The first step in t, and the largest number of halvings.
FIRST_STEP, MAX_LEVEL = 0.5, 9
#: The rule's nodes span |t| <= REACH (exp-sinh: e^{+-pi/2 sinh REACH} times the scale).
REACH = 6.0
#: The peak search: points of the logarithmic grid, then ZOOMS linear grids of ZOOM_POINTS points around the best.
PEAK_POINTS, ZOOMS, ZOOM_POINTS = 400, 4, 33
#: An eps within NEARBY (relative, at least absolute) of the latest one reuses its split of the range.
NEARBY = 1e-6
#: Terms below e^-DROP of the largest are left out of the sums (their total is far below RTOL).
DROP = 60.0


def log_noncentral_chi2_pdf(w: np.ndarray, dof: float, noncentrality: float) -> tuple[np.ndarray, np.ndarray]:
    """(log f(w), a bound on its absolute error) of the noncentral chi-square density with ``dof`` degrees of
    freedom and noncentrality ``noncentrality`` (>= 0) at each w > 0.

    f(w) = 1/2 e^{-(w + lambda)/2} (w / lambda)^{n/4 - 1/2} I_{n/2 - 1}(sqrt(lambda w)); with
    x = sqrt(lambda w) the exponent is -(sqrt w - sqrt lambda)^2 / 2 plus log of the scaled Bessel function
    e^{-x} I_nu(x), formed without cancellation; lambda = 0 is the central density.  Below x = 1e-100 the
    Bessel function is its first term (x/2)^nu / Gamma(nu + 1).
    """
    from scipy.special import gammaln, ive

    w = np.asarray(w, dtype=float)
    nu = dof / 2 - 1
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if noncentrality == 0:
            value = nu * np.log(w) - w / 2 - (dof / 2) * math.log(2.0) - float(gammaln(dof / 2))
            size = np.abs(nu * np.log(w)) + w / 2 + abs(float(gammaln(dof / 2))) + dof
            return value, 8 * U * (size + 4)
        root_w = np.sqrt(w)
        x = root_w * math.sqrt(noncentrality)
        log_bessel = np.log(ive(nu, x))
        small = (x < 1e-100) | ~np.isfinite(log_bessel)
        if np.any(small):
            series = nu * np.log(x[small] / 2) - float(gammaln(nu + 1)) + x[small]
            log_bessel[small] = series
        value = (-math.log(2.0) - (root_w - math.sqrt(noncentrality)) ** 2 / 2
                 + (nu / 2) * (np.log(w) - math.log(noncentrality)) + log_bessel)
        size = (w + noncentrality) / 2 + x + abs(nu) * (np.abs(np.log(w)) + abs(math.log(noncentrality))) \
            + np.abs(log_bessel) + dof
    return value, 16 * U * (size + 4)


def _log_de_nodes(step: float, infinite: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(log distance from the left end / width or scale, log distance from the right end / width, log weight) of
    the double-exponential rule with ``step`` on [0, 1] (tanh-sinh) or [0, inf) scaled by 1 (exp-sinh): nodes
    t = k step, |t| <= REACH."""
    t = np.arange(-math.floor(REACH / step), math.floor(REACH / step) + 1) * step
    u = (math.pi / 2) * np.sinh(t)
    log_dudt = math.log(math.pi / 2) + np.log(np.cosh(t))
    if infinite:  # x = e^u
        return u, np.full(t.shape, math.inf), u + log_dudt + math.log(step)
    # x = 1 / (1 + e^{-2u}), 1 - x = 1 / (1 + e^{2u}), dx/du = 1 / (2 cosh^2 u)
    log_left = -np.logaddexp(0.0, -2 * u)
    log_right = -np.logaddexp(0.0, 2 * u)
    log_dxdu = log_left + log_right + math.log(2.0)
    return log_left, log_right, log_dxdu + log_dudt + math.log(step)


@dataclass(frozen=True)
class _Piece:
    """A piece [low, high] (high may be inf) of the integration range, with its scale (its width, or for an
    infinite piece the length over which the integrand falls)."""

    low: float
    high: float
    scale: float


class QuadraticComposition:
    """One direction of a composition of data-dependent Gaussians sharing one curvature, and Gaussians.

    Parameters
    ----------
    gamma : float
        The shared curvature of the quadratic losses (non-zero).
    offset : tuple of float
        c = the sum of the losses' extreme values L*, as (hi, lo) with hi + lo accurate to 40 digits.
    dof : int
        The number of quadratic uses n (>= 1).
    noncentrality : float
        lambda = the sum of z*^2 over the uses (>= 0).
    mu : float, default 0.0
        The composed Gaussian mechanisms' mu (>= 0).

    Examples
    --------
    One use against the closed form of :func:`afa.numerics.exact.data_dependent_gaussian_delta`:

    >>> import numpy as np
    >>> from afa import exact
    >>> from afa.engines.quadratic import QuadraticComposition
    >>> loss = exact.QuadraticLoss.of(1.0, 1.5, 1.0)
    >>> one = QuadraticComposition(loss.gamma, (loss.extreme, loss.extreme_lo), 1, loss.vertex ** 2)
    >>> value, error = one.delta(np.array([0.2]))
    >>> reference = exact.data_dependent_gaussian_delta(0.2, 1.0, 1.5, sensitivity=1.0)
    >>> bool(abs(value[0] - reference) <= 1e-12 * reference)
    True
    """

    def __init__(self, gamma: float, offset: tuple[float, float], dof: int, noncentrality: float,
                 mu: float = 0.0):
        if not (math.isfinite(gamma) and gamma != 0):
            raise ValueError(f"gamma must be finite and non-zero, got {gamma!r}")
        if not (int(dof) == dof and dof >= 1):
            raise ValueError(f"dof must be an integer >= 1, got {dof!r}")
        if not (math.isfinite(noncentrality) and noncentrality >= 0):
            raise ValueError(f"noncentrality must be finite and >= 0, got {noncentrality!r}")
        if not (math.isfinite(mu) and mu >= 0):
            raise ValueError(f"mu must be finite and >= 0, got {mu!r}")
        self.gamma, self.offset, self.dof, self.noncentrality, self.mu = gamma, offset, int(dof), noncentrality, mu
        #: (eps, low, high, pieces, steps) of the latest eps: a nearby eps on the same range reuses its split and
        #: starts its sums one level above the step they settled at.
        self._hint: tuple | None = None
        #: Mean and standard deviation of W (where the density's mass lies).
        self._w_mean = dof + noncentrality
        self._w_sd = math.sqrt(2 * (dof + 2 * noncentrality))

    @classmethod
    def of(cls, terms: list, mu: float = 0.0) -> QuadraticComposition:
        """The composition of ``terms``, (afa.numerics.exact.QuadraticLoss, count) pairs sharing one gamma, with
        Gaussian mechanisms of composed ``mu``: c = sum of count L* in 40-digit arithmetic, lambda = sum of count z*^2.

        Raises
        ------
        ValueError
            No terms, curvatures that differ, or a count that is not a positive integer.
        """
        import mpmath

        if not terms or len({loss.gamma for loss, _ in terms}) != 1:
            raise ValueError("terms must be a non-empty list of quadratic losses sharing one gamma")
        for _, count in terms:
            if not (int(count) == count and count >= 1):
                raise ValueError(f"each count must be an integer >= 1, got {count!r}")
        with mpmath.workdps(40):
            offset = mpmath.fsum(int(count) * (mpmath.mpf(loss.extreme) + loss.extreme_lo) for loss, count in terms)
            hi = float(offset)
            lo = float(offset - hi) if math.isfinite(hi) else 0.0
        noncentrality = math.fsum(int(count) * loss.vertex ** 2 for loss, count in terms)
        dof = sum(int(count) for _, count in terms)
        return cls(terms[0][0].gamma, (hi, lo), dof, noncentrality, mu)

    # -- the integrand --------------------------------------------------------------------------------
    def _log_integrand(self, eps: float, w: np.ndarray, kink_distance: np.ndarray | None) -> tuple[np.ndarray,
                                                                                                     np.ndarray]:
        """(log f_W(w) h(w), its absolute error bound) at each w > 0; ``kink_distance`` is |w - w0| formed
        from the piece's ends (mu = 0 only)."""
        log_f, error = log_noncentral_chi2_pdf(w, self.dof, self.noncentrality)
        with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
            if kink_distance is not None:
                log_h = np.log(-np.expm1(-abs(self.gamma) * kink_distance))
                error = error + 8 * U * (1 + np.abs(log_h) + abs(self.gamma) * kink_distance)
            else:
                shifted = (eps - self.offset[0]) - self.offset[1] - self.gamma * w
                log_h = np.asarray(gaussian_log_delta(shifted, self.mu), dtype=float)
                # Rounding of the shift, propagated by the slope of log delta_mu (at most |x|/mu^2 + 1 + mu),
                # plus the closed form's own relative error.
                slope = np.abs(shifted) / self.mu ** 2 + 1 + self.mu
                error = error + 8 * U * (abs(eps) + abs(self.offset[0]) + np.abs(self.gamma * w)) * slope \
                    + 1e-13 + 8 * U * np.abs(log_h)
        return log_f + log_h, error

    def _range(self, eps: float) -> tuple[float, float, float | None] | None:
        """(low, high, kink) of the integration range in w (kink: w0 where the payoff vanishes, for mu = 0), or
        None when delta = 0 there."""
        if self.mu > 0:
            return 0.0, math.inf, None
        w0 = ((eps - self.offset[0]) - self.offset[1]) / self.gamma
        if self.gamma > 0:
            return max(w0, 0.0), math.inf, w0
        if not w0 > 0:
            return None
        return 0.0, w0, w0

    def _log_at(self, eps: float, low: float, high: float, kink: float | None,
                distances: np.ndarray) -> np.ndarray:
        """log of the integrand at ``low + distances`` (-inf where it vanishes or cannot be formed)."""
        w = low + distances
        if kink is None:
            kink_distance = None
        elif kink == high:
            kink_distance = (high - low) - distances
        else:
            kink_distance = np.abs(w - kink)
        values = self._log_integrand(eps, w, kink_distance)[0]
        return np.where(np.isfinite(values), values, -np.inf)

    def _pieces(self, eps: float, low: float, high: float, kink: float | None) -> list[_Piece]:
        """The range split at the integrand's peak: the largest value per unit of log distance from ``low`` on a
        logarithmic grid, then the largest value per unit of w on linear grids zoomed around it."""
        width = high - low
        # An infinite range: past the density's bulk, and past where the payoff's shift reaches eps - c.
        reach = width if math.isfinite(width) else (self._w_mean + 40 * self._w_sd + abs(low) + 1.0
                                                     + abs((eps - self.offset[0]) / self.gamma))
        distances = reach * np.logspace(-30, 0 if math.isfinite(width) else 3, PEAK_POINTS)
        distances = distances[distances < width]
        values = self._log_at(eps, low, high, kink, distances) + np.log(distances)
        if not np.any(np.isfinite(values)):
            raise AccuracyError("the data-dependent Gaussian integral found no mass to integrate")
        index = int(np.argmax(values))
        inner = float(distances[index - 1]) if index > 0 else 0.0
        outer = float(distances[index + 1]) if index + 1 < distances.size else float(distances[index])
        peak = float(distances[index])
        for _ in range(ZOOMS):
            grid = np.linspace(inner, outer, ZOOM_POINTS)[1:-1]
            grid = grid[(grid > 0) & (grid < width)]
            if not grid.size:
                break
            zoomed = self._log_at(eps, low, high, kink, grid)
            best = int(np.argmax(zoomed))
            if not math.isfinite(zoomed[best]):
                break
            spacing = float(grid[1] - grid[0]) if grid.size > 1 else 0.0
            peak, inner, outer = float(grid[best]), max(float(grid[best]) - spacing, inner), \
                min(float(grid[best]) + spacing, outer)
        split = low + peak
        if math.isfinite(high):
            return [_Piece(low, split, peak), _Piece(split, high, high - split)]
        # The infinite piece's scale: how far beyond the peak the integrand falls by e.
        steps = max(outer - peak, peak * 1e-12, 1e-300) * 2.0 ** np.arange(0, 120)
        beyond = self._log_at(eps, low, high, kink, peak + steps)
        at_peak = float(self._log_at(eps, low, high, kink, np.array([peak]))[0])
        fallen = np.flatnonzero(beyond < at_peak - 1.0)
        fall = float(steps[fallen[0]]) if fallen.size else peak
        return [_Piece(low, split, peak), _Piece(split, high, max(fall, 1e-300))]

    def _piece_sum(self, eps: float, piece: _Piece, kink: float | None, step: float) -> tuple[float, float]:
        """(log of the rule's sum over ``piece`` with ``step``, the rounding bound relative to it)."""
        infinite = not math.isfinite(piece.high)
        log_left, log_right, log_weight = _log_de_nodes(step, infinite)
        scale = piece.scale
        left = scale * np.exp(log_left)
        right = piece.high - piece.low - left if infinite else scale * np.exp(log_right)
        with np.errstate(invalid="ignore"):
            w = np.where(left <= right, piece.low + left, piece.high - right)
        keep = (left > 0) & (right > 0) & np.isfinite(w) & (w > 0)
        if kink is None:
            kink_distance = None
        elif kink <= piece.low:
            kink_distance = (piece.low - kink) + left
        else:  # the kink lies at or above the piece's high end
            kink_distance = (kink - piece.high) + right
        if kink_distance is not None:
            keep &= kink_distance > 0
            kink_distance = kink_distance[keep]
        if not np.any(keep):
            return -math.inf, 0.0
        log_g, error = self._log_integrand(eps, w[keep], kink_distance)
        terms = log_g + log_weight[keep] + math.log(scale)
        finite = np.isfinite(terms)
        if not np.any(finite):
            return -math.inf, 0.0
        top = float(np.max(terms[finite]))
        kept = finite & (terms >= top - DROP)
        total = float(log_sum_exp(terms[kept]))
        # Rounding: each term's log error (plus the node's), relative to the sum; the terms left out.
        relative = math.expm1(float(np.max(error[kept])) + 16 * U * (abs(top) + 8)) + kept.sum() * U \
            + (terms.size - kept.sum()) * math.exp(-DROP)
        return total, relative

    def _log_delta(self, eps: float) -> tuple[float, float]:
        """(log delta(eps), a bound on the relative error) at one eps."""
        bounds = self._range(eps)
        if bounds is None:
            return -math.inf, 0.0
        low, high, kink = bounds
        if self.mu == 0 and self.gamma > 0 and kink is not None and kink < 0:
            # Every loss lies above eps: delta = 1 - e^eps.
            return (math.log(-math.expm1(eps)), 4 * U) if eps < 0 else (-math.inf, 0.0)
        hint = self._hint
        if hint is not None and abs(eps - hint[0]) <= NEARBY * max(1.0, abs(eps)) and hint[1:3] == (low, high):
            pieces, first_steps = hint[3], hint[4]  # a nearby eps: its split and the step its sums settled at
        else:
            pieces = self._pieces(eps, low, high, kink)
            first_steps = [FIRST_STEP] * len(pieces)
        totals, settled = [], []
        for piece, first_step in zip(pieces, first_steps):
            previous, step = None, first_step
            while step >= FIRST_STEP * 2.0 ** -MAX_LEVEL:
                value, rounding = self._piece_sum(eps, piece, kink, step)
                # Settled: two levels agree within RTOL, or within the rounding both carry.
                if previous is not None and (value == previous[0] == -math.inf or (
                        math.isfinite(value) and abs(math.expm1(value - previous[0])) <= max(
                            RTOL, rounding + previous[1]))):
                    change = abs(math.expm1(value - previous[0])) if math.isfinite(value) else 0.0
                    totals.append((value, change + rounding))
                    settled.append(min(2 * step, FIRST_STEP))
                    break
                previous, step = (value, rounding), step / 2
            else:
                raise AccuracyError(f"the data-dependent Gaussian integral at eps={eps:.17g} did not settle within "
                                    f"{MAX_LEVEL} halvings of its step")
        self._hint = (eps, low, high, pieces, settled)
        logs = np.array([total for total, _ in totals])
        if not np.any(np.isfinite(logs)):
            return -math.inf, 0.0
        value = float(log_sum_exp(logs))
        relative = sum(math.exp(total - value) * error for total, error in totals if math.isfinite(total))
        return value, relative + 4 * U

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(delta, a bound on its error) at each eps (any shape); delta is at most 1."""
        epsilons = np.asarray(epsilons, dtype=float)
        values, errors = np.empty(epsilons.shape), np.empty(epsilons.shape)
        for index, eps in np.ndenumerate(epsilons):
            if eps == -math.inf:
                values[index], errors[index] = 1.0, 0.0
                continue
            log_value, relative = self._log_delta(float(eps))
            value = min(math.exp(log_value), 1.0)
            values[index], errors[index] = value, value * relative * 2
        return values, errors
