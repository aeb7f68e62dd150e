"""Dominating pairs made of shifted copies of one symmetric noise density.

Subsampling a Gaussian or Laplace mechanism (Zhu, Dong & Wang 2022
Thm 11; Google DP team 2025, Sec. 4) gives pairs (A, B) whose sides
are mixtures A = sum_i a_i mu(o - c_i), B = sum_j b_j mu(o - d_j) of one noise
density mu (N(0, sigma^2) or Laplace(0, b)).  The privacy loss of the pair is
L = log(A/B)(o) with o ~ A; the swapped pair (B, A) gives the other direction.

Everything here is in log space relative to mu(o):

    log A(o) = log mu(o) + logsumexp_i(log a_i + kappa(o, c_i)),
    kappa(o, c) = log mu(o - c) - log mu(o),

and kappa is formed without the cancelling o^2 (Gaussian) or |o| (Laplace), so
that the loss log A - log B keeps its absolute accuracy far into the tails.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import budget
from .._accurate import weighted_cumulants
from .._lazy import special
from ..results import AccuracyError
from . import shifted_output
from .output_rules import composite_rule, panel_edges

NOISES = ("gaussian", "laplace")


@dataclass(frozen=True)
class NoiseMixturePair:
    """The pair (A, B) with A = sum_i e^{a_log_weights[i]} mu(o - a_shifts[i]) and B likewise.

    ``noise`` is "gaussian" (mu = N(0, scale^2)) or "laplace" (mu = Laplace(0, scale));
    the weights of each side sum to one.
    """

    noise: str
    scale: float
    a_shifts: tuple[float, ...]
    a_log_weights: tuple[float, ...]
    b_shifts: tuple[float, ...]
    b_log_weights: tuple[float, ...]

    def __post_init__(self):
        if self.noise not in NOISES:
            raise ValueError(f"noise must be one of {NOISES}, got {self.noise!r}")
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"scale must be a positive finite number, got {self.scale}")
        for side in ("a", "b"):
            shifts, log_weights = getattr(self, f"{side}_shifts"), getattr(self, f"{side}_log_weights")
            if len(shifts) != len(log_weights) or not shifts:
                raise ValueError(f"{side}_shifts and {side}_log_weights must be non-empty and of equal length")
            if not abs(_log_total(log_weights)) <= 1e-12:  # (NaN weights fail too)
                raise ValueError(f"the weights of side {side.upper()} must sum to one")

    def without_empty_components(self) -> NoiseMixturePair:
        """The same pair without components of weight 0 (log-weight -inf)."""
        sides = []
        for shifts, log_weights in ((self.a_shifts, self.a_log_weights), (self.b_shifts, self.b_log_weights)):
            kept = [(c, w) for c, w in zip(shifts, log_weights, strict=True) if w > -math.inf]
            sides += [tuple(c for c, _ in kept), tuple(w for _, w in kept)]
        return NoiseMixturePair(self.noise, self.scale, *sides)

    def swapped(self) -> NoiseMixturePair:
        """(B, A): the other direction's pair."""
        return NoiseMixturePair(self.noise, self.scale, self.b_shifts, self.b_log_weights,
                                self.a_shifts, self.a_log_weights)

    @functools.cached_property
    def shifts(self) -> np.ndarray:
        """Every component centre of both sides (the Laplace density's kinks), sorted; read-only."""
        centres = np.unique(np.concatenate([self.a_shifts, self.b_shifts]))
        centres.flags.writeable = False
        return centres

    @property
    def loss_slope(self) -> float:
        """A bound on |d/do log(A/B)(o)|."""
        spread = float(np.ptp(self.shifts))
        return spread / self.scale ** 2 if self.noise == "gaussian" else 2.0 / self.scale

    @property
    def magnitude_bound(self) -> float:
        """An upper bound on |E_A[L]| and on Var_A(L), without quadrature.

        With c the centre of the shifts, h half their spread, lambda = :attr:`loss_slope` and N the noise:
        |L(o)| <= |L(c)| + lambda |o - c| and, under A, |o - c| <= h + |N|, so with R = |L(c)| + lambda h,
        E|L| <= R + lambda E|N| and E[L^2] <= 2 R^2 + 2 lambda^2 E[N^2] (E|N| = scale sqrt(2 / pi) and
        E[N^2] = scale^2 for Gaussian noise, scale and 2 scale^2 for Laplace noise).
        """
        shifts = self.shifts
        centre, half = (float(shifts[0]) + float(shifts[-1])) / 2, float(np.ptp(shifts)) / 2
        reach = abs(float(self.privacy_loss(np.array([centre]))[0])) + self.loss_slope * half
        first, second = (math.sqrt(2 / math.pi), 1.0) if self.noise == "gaussian" else (1.0, 2.0)
        spread = self.loss_slope * self.scale
        return max(reach + spread * first, 2 * reach ** 2 + 2 * spread ** 2 * second)

    @property
    def loss_upper_bound(self) -> float:
        """A bound on sup_o log(A/B)(o): max_i log(a_i / b_j(i)) when every A component is also a B
        component (then A <= max_i (a_i / b_j(i)) B pointwise), else +inf.

        Poisson subsampling's add direction, B = (1 - q) mu + q mu(. - Delta) against A = mu, gives
        -log(1 - q): its loss never exceeds that.
        """
        b_weights = dict(zip(self.b_shifts, self.b_log_weights))
        ratios = [w - b_weights[c] for c, w in zip(self.a_shifts, self.a_log_weights) if w > -np.inf and c in b_weights]
        if len(ratios) < sum(w > -np.inf for w in self.a_log_weights):
            return math.inf
        return float(max(ratios))

    def log_mu(self, o: np.ndarray) -> np.ndarray:
        """log mu(o)."""
        o = np.asarray(o, dtype=float)
        if self.noise == "gaussian":
            return -0.5 * (o / self.scale) ** 2 - math.log(self.scale * math.sqrt(2 * math.pi))
        return -np.abs(o) / self.scale - math.log(2 * self.scale)

    def kappa(self, o: np.ndarray, shift: float) -> np.ndarray:
        """log mu(o - shift) - log mu(o), without cancellation."""
        o = np.asarray(o, dtype=float)
        if self.noise == "gaussian":
            return shift * (2 * o - shift) / (2 * self.scale ** 2)
        # |o| - |o - c| = sign(c) clip(2o - c, -|c|, |c|)
        return math.copysign(1.0, shift) * np.clip(2 * o - shift, -abs(shift), abs(shift)) / self.scale

    def log_ratios(self, o: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log A/mu, log B/mu) at the outputs ``o``."""
        o = np.asarray(o, dtype=float)
        sides = []
        for shifts, log_weights in ((self.a_shifts, self.a_log_weights), (self.b_shifts, self.b_log_weights)):
            # (an unshifted component's ratio is its weight alone: kappa(o, 0) = 0)
            terms = [w + self.kappa(o, c) if c != 0 else np.full(o.shape, w)
                     for c, w in zip(shifts, log_weights) if w > -np.inf]
            side = terms[0]
            for term in terms[1:]:
                side = np.logaddexp(side, term)
            sides.append(side)
        return sides[0], sides[1]

    def privacy_loss(self, o: np.ndarray) -> np.ndarray:
        """L(o) = log(A/B)(o)."""
        log_a, log_b = self.log_ratios(o)
        return log_a - log_b

    def loss_and_slope(self, o: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(L(o), L'(o)) for Gaussian noise.

        L' is the difference of the two sides' posterior means of the components' log-density slopes,
        sum_i pi^A_i(o) c_i / scale^2 - sum_j pi^B_j(o) c_j / scale^2, with pi^A_i(o) proportional to
        a_i mu(o - c_i) (Zhu, Dong & Wang 2022, App. E).

        Raises
        ------
        ValueError
            For Laplace noise (its L' is piecewise constant and zero beyond the outermost shifts).
        """
        if self.noise != "gaussian":
            raise ValueError(f"loss_and_slope needs Gaussian noise, got {self.noise!r}")
        o = np.asarray(o, dtype=float)
        sides = []
        for shifts, log_weights in ((self.a_shifts, self.a_log_weights), (self.b_shifts, self.b_log_weights)):
            kept = [(c, w) for c, w in zip(shifts, log_weights) if w > -np.inf]
            exponents = np.array([w + self.kappa(o, c) for c, w in kept])
            log_total = np.logaddexp.reduce(exponents, axis=0)
            centres = np.array([c for c, _ in kept]).reshape((-1,) + (1,) * o.ndim)
            mean_shift = np.sum(np.exp(exponents - log_total) * centres, axis=0)
            sides.append((log_total, mean_shift))
        (log_a, mean_a), (log_b, mean_b) = sides
        return log_a - log_b, (mean_a - mean_b) / self.scale ** 2


@dataclass(frozen=True)
class OutputTaper:
    """A smooth cut of the output line at ``cut``: the weight Phi(-(o - cut) / width) keeps the outputs
    below it (``keep="below"``), Phi((o - cut) / width) those above (``keep="above"``); the two add up to one.

    Weighting a pair's MGF integrand by it splits the law of its loss into two sub-probability measures
    whose sum is the law (:mod:`afa.engines.pile_split`); a Gaussian-smooth weight keeps both parts' MGFs
    entire and their output integrands smooth.
    """

    cut: float
    width: float
    keep: str

    #: Panels are at most PANEL widths wide on the side of the cut where the weight falls, out to REACH widths
    #: past it on the other (where it is 1 to within e^-REACH^2/2).
    PANEL, REACH = 2.0, 12.0

    def __post_init__(self):
        if self.keep not in ("below", "above"):
            raise ValueError(f"keep must be 'below' or 'above', got {self.keep!r}")
        if not (math.isfinite(self.cut) and math.isfinite(self.width) and self.width > 0):
            raise ValueError(f"cut must be finite and width positive and finite, got {self.cut}, {self.width}")

    def log_weight(self, o: np.ndarray) -> np.ndarray:
        """log of the weight at the outputs ``o`` (accurate far into its Gaussian tail)."""
        z = (np.asarray(o, dtype=float) - self.cut) / self.width
        return special.log_ndtr(-z if self.keep == "below" else z)

    def edges(self, low: float, high: float) -> np.ndarray:
        """Panel edges PANEL widths apart over the part of [``low``, ``high``] where the weight is not 1."""
        start, stop = ((self.cut - self.REACH * self.width, high) if self.keep == "below"
                       else (low, self.cut + self.REACH * self.width))
        start, stop = max(start, low), min(stop, high)
        if not stop > start:
            return np.empty(0)
        return np.linspace(start, stop, int(math.ceil((stop - start) / (self.PANEL * self.width))) + 1)


class PairMGF:
    """log M(s) = log int A(o)^{1+s} B(o)^{-s} do for complex s, by composite Gauss-Legendre over o.

    M(s) = E_A[e^{sL}] is the moment-generating function of the pair's loss
    (Zhu, Dong & Wang 2022, App. E "double quadrature", continued to complex s); the other
    direction's is M(-1 - s).  For a batch of s the output range is where the real
    log-integrand log mu + (1 + c) log(A/mu) - c log(B/mu), c = Re s, is within
    e^-45 of its peak (the peak moves out as |c| grows), and the panels are
    narrow enough for GL_20 to resolve both the noise and the phase Im(s) L(o).
    The sum is formed relative to its largest term's magnitude (shared by all nodes of one real part); the result's
    relative error is a few ulps times sum|terms| / |sum terms| (cancellation
    only where |M(c + iu)| << M(c), which the inversions weigh accordingly).

    With a ``taper`` (:class:`OutputTaper`) the integrand carries its weight: the MGF of the part of the loss's
    law it keeps, a sub-probability measure.  Its panels then also resolve the weight, and the shifted output
    lines are not used (the weight is not bounded off the real output line).
    """

    #: Nodes per panel of the default Gauss-Legendre rule over the output.
    ORDER = 20
    #: Terms below e^-DROP of the peak are left out.
    DROP = 45.0
    #: Nodes evaluated together (they share one set of panels).
    BLOCK = 256
    #: Output nodes of a rule whose losses are formed between checks of the time budget.
    RULE_CHUNK = 1 << 20
    #: Real parts whose output windows (and losses' variation along them) are kept.
    CACHED_LINES = 4
    #: Real parts whose output rules are kept (a contour sum's line and its check line).
    RULE_LINES = 2
    #: Largest change of the phase Im(s) L(o) across one panel, in radians (GL_20 integrates e^{ix} over 12
    #: radians to rounding: the Taylor terms 6^n / n! are below 1e-16 by n = 40).
    PHASE = 12.0
    #: Widest output range, in noise scales, the quadrature will cover.
    MAX_REACH = 20_000
    #: |Im s| from which a shifted output line is considered (:meth:`_shifted`), and the fewest nodes one has.
    SHIFT_FROM, SHIFT_MIN_NODES = 8.0, 200
    #: Rule sizes kept (:meth:`_rule_size`; a few lines times the octaves of |Im s| up to 2^20).
    KEPT_SIZES = 256

    def __init__(self, pair: NoiseMixturePair, order: int | None = None, taper: OutputTaper | None = None):
        self.pair = pair
        self.taper = taper
        self.nodes, self.weights = gauss_legendre(self.ORDER if order is None else order)
        #: Re s -> frequency -> :meth:`_rule` of the latest RULE_LINES lines
        self._rules: dict[float, dict] = {}
        #: Re s -> :meth:`_window` of the latest CACHED_LINES lines (rules and cost estimates share them)
        self._windows: dict[float, list | None] = {}
        #: Re s -> octave -> the shifted-line rule (:meth:`_shifted`) of the latest RULE_LINES lines
        self._shifted_rules: dict[float, dict[float, shifted_output.ShiftedRule | None]] = {}
        #: Re s -> {"line": the coarse line its octaves' shifted rules are laid out on} (the same latest lines)
        self._coarse_lines: dict[float, dict[str, shifted_output.CoarseLine | None]] = {}
        #: (window's ends, frequency) -> :meth:`_rule_size`, at most KEPT_SIZES of them
        self._sizes: dict[tuple[float, float, float], int] = {}

    def _loss_and_log_integrand(self, o: np.ndarray, c: float) -> tuple[np.ndarray, np.ndarray]:
        """L(o) and the real log-integrand log mu + log(A/mu) + c L = log(A^{1+c} B^{-c}) at the outputs ``o``."""
        log_a, log_b = self.pair.log_ratios(o)
        loss = log_a - log_b
        log_integrand = self.pair.log_mu(o) + log_a + c * loss
        if self.taper is not None:
            log_integrand += self.taper.log_weight(o)
        return loss, log_integrand

    def output_range(self, c: float) -> tuple[float, float] | None:
        """[low, high] outside which the integrand at real part ``c`` is below e^-DROP of its peak.

        None when |c| is so large that the range would exceed MAX_REACH noise scales
        (the MGF is then reported as not computed: NaN).
        """
        scale, shifts = self.pair.scale, self.pair.shifts
        reach = (2 + 2 * abs(c)) * float(np.max(np.abs(shifts))) + 60 * scale
        if not reach <= self.MAX_REACH * scale:
            return None
        grid = np.linspace(-reach, reach, int(4 * reach / scale) + 2)
        values = self._loss_and_log_integrand(grid, c)[1]
        keep = np.flatnonzero(values > np.max(values) - self.DROP)
        if keep[0] == 0 or keep[-1] == grid.size - 1:
            raise AccuracyError(f"the MGF integrand of {self.pair} at Re s = {c:.6g} does not decay within "
                                f"|o| <= {reach:.3g}; please report it")
        return float(grid[keep[0] - 1]), float(grid[keep[-1] + 1])

    def _window(self, c: float) -> list | None:
        """[low, high, grid, variation]: :meth:`output_range` at ``c`` (None beyond MAX_REACH), a grid of
        scale/8 on it and (filled in by :meth:`_panels` when a phase limit first needs it) the cumulative change
        of the loss along the grid; the latest CACHED_LINES lines are kept."""
        if c not in self._windows:
            while len(self._windows) >= self.CACHED_LINES:
                del self._windows[next(iter(self._windows))]
            window = self.output_range(c)
            self._windows[c] = None if window is None else [
                *window, np.linspace(*window, int(math.ceil(8 * (window[1] - window[0]) / self.pair.scale)) + 1),
                None]
        return self._windows[c]

    def _panels(self, window: list, frequency: float) -> tuple[np.ndarray, np.ndarray]:
        """GL nodes and log-weights on the ``window`` of :meth:`_window`, on the panels of :meth:`_edges`."""
        return composite_rule(self._edges(window, frequency), self.nodes, self.weights)

    def _rule_size(self, window: list, frequency: float) -> int:
        """The number of nodes of :meth:`_panels` (without laying them out), kept per window and frequency (the
        contour's work accounting asks for it at every chunk of nodes)."""
        key = (window[0], window[1], frequency)
        if key not in self._sizes:
            if len(self._sizes) >= self.KEPT_SIZES:
                self._sizes.clear()
            self._sizes[key] = (self._edges(window, frequency).size - 1) * self.nodes.size
        return self._sizes[key]

    def _edges(self, window: list, frequency: float) -> np.ndarray:
        """Panel edges on the ``window`` of :meth:`_window`: at the kinks, at most 2 noise scales apart, and with
        the phase frequency * L changing by at most PHASE radians across each panel.

        The phase limit follows the loss's own variation (from L on the window's grid of scale/8), not its
        worst-case slope: a subsampled loss with small q is nearly flat where most mass lies.
        """
        low, high, grid, variation = window
        kinks = (np.array([c for c in self.pair.shifts if low < c < high]) if self.pair.noise == "laplace"
                 else None)
        if self.taper is not None:
            cuts = self.taper.edges(low, high)
            kinks = cuts if kinks is None else np.concatenate((kinks, cuts))
        pieces = 1
        if frequency * self.pair.loss_slope * (high - low) > self.PHASE:  # else one panel's phase suffices
            if variation is None:
                variation = np.concatenate(([0.0], np.cumsum(np.abs(np.diff(self.pair.privacy_loss(grid))))))
                window[3] = variation
            pieces = int(math.ceil(frequency * variation[-1] / self.PHASE))
        return panel_edges(low, high, 2 * self.pair.scale, kinks, grid, variation, pieces)

    def log_mgf(self, s: np.ndarray) -> np.ndarray:
        """log M(s) at complex ``s`` (any shape); NaN where Re s is beyond what MAX_REACH covers.

        Nodes are grouped by real part (a vertical contour has one).  Nodes of an octave of |Im s| served by
        a shifted output line (:meth:`_shifted`) are summed there; of the rest, a group on a lattice of
        imaginary parts wide enough for the non-uniform FFT is summed at once (one rule, for its largest
        |Im s|), others in blocks of similar |Im s|, each with the rule its largest needs.
        """
        s = np.asarray(s, dtype=complex)
        flat = s.ravel()
        out = np.full(flat.shape, np.nan, dtype=complex)
        real_parts, group_of = distinct_values(flat.real)
        for group, c in enumerate(real_parts):
            members = self._shifted_sums(float(c), flat, np.flatnonzero(group_of == group), out)
            if members.size == 0:
                continue
            if summed_at_once(flat[members].imag):
                out[members] = self._log_sum(float(c), flat[members].imag)
                continue
            members = members[np.argsort(np.abs(flat[members].imag))]
            for start in range(0, members.size, self.BLOCK):
                budget.check("evaluating a subsampled mechanism's MGF")  # far nodes need long output rules
                block = members[start:start + self.BLOCK]
                out[block] = self._log_sum(float(c), flat[block].imag)
        return out.reshape(s.shape)

    def _shifted_sums(self, c: float, flat: np.ndarray, members: np.ndarray, out: np.ndarray) -> np.ndarray:
        """out[m] = log M(flat[m]) for the ``members`` (all of real part ``c``) whose octave of |Im s| has a
        shifted-line rule (:meth:`_shifted`; M(c - iu) is the conjugate of M(c + iu)); returns the others."""
        if self.pair.noise != "gaussian" or self.taper is not None:
            return members
        heights = np.abs(flat[members].imag)
        octaves = _powers_of_two(heights)
        left = np.ones(members.size, dtype=bool)
        for octave in np.unique(octaves).tolist():
            shifted = self._shifted(c, octave)
            if shifted is None:
                continue
            picked = np.flatnonzero(octaves == octave)
            order = picked[np.argsort(heights[picked], kind="stable")]
            lattice = _lattice(heights[order]) if order.size >= GRIDDED_SPAN // 16 else None
            values = shifted_output.log_sums(shifted, heights[order], lattice)
            below = flat[members[order]].imag < 0
            values[below] = np.conj(values[below])
            out[members[order]] = values
            left[picked] = False
        return members[left]

    def _shifted(self, c: float, octave: float) -> shifted_output.ShiftedRule | None:
        """The shifted-line rule (:mod:`afa.mechanisms.shifted_output`) for real part ``c`` and |Im s| in
        (``octave`` / 2, ``octave``], where it is the better rule: at most half the real-line rule's nodes there,
        and a sum of |terms| (the scale of its rounding) at most shifted_output.MAGNITUDE_FACTOR times the real
        line's, M(c); else None.  The rules of the latest RULE_LINES real parts are kept."""
        if self.pair.noise != "gaussian" or octave < self.SHIFT_FROM or self.taper is not None:
            return None
        rules = _line_entry(self._shifted_rules, c, self.RULE_LINES)
        if octave not in rules:
            chosen = None
            window = self._window(c)
            real_nodes = 0 if window is None else self._rule_size(window, octave)
            if real_nodes >= 2 * self.SHIFT_MIN_NODES:
                coarse = _line_entry(self._coarse_lines, c, self.RULE_LINES)
                if "line" not in coarse:
                    coarse["line"] = shifted_output.coarse_line(self.pair, c)
                line = coarse["line"]
                candidate = (None if line is None else
                             shifted_output.rule(self.pair, c, octave, self.nodes, self.weights, line))
                if candidate is not None and 2 * candidate.size <= real_nodes:
                    _, scaled, top = self._rule(c, 1.0)
                    real = top + math.log(float(np.sum(scaled)))
                    if candidate.log_magnitude <= real + math.log(shifted_output.MAGNITUDE_FACTOR):
                        chosen = candidate
            rules[octave] = chosen
        return rules[octave]

    def _log_sum(self, c: float, frequencies: np.ndarray) -> complex | np.ndarray:
        """log sum_j w_j A_j e^{(c + iu) L_j} at u = ``frequencies`` (NaN beyond MAX_REACH)."""
        rule = self._rule(c, _power_of_two(float(np.max(np.abs(frequencies)))))
        if rule is None:
            return np.nan
        loss, scaled, top = rule
        return top + np.log(fourier_sums(frequencies, loss, scaled))

    def _rule(self, c: float, frequency: float):
        """(L_j, weights relative to the largest, log of the largest) of the output rule for real part ``c``
        and |Im s| up to ``frequency`` (rounded up to a power of two, so that the blocks and halvings of one
        contour sum share rules); the rules of the latest RULE_LINES real parts are kept."""
        rules = _line_entry(self._rules, c, self.RULE_LINES)
        if frequency not in rules:
            window = self._window(c)
            if window is None:
                rules[frequency] = None
            else:
                o, log_w = self._panels(window, frequency)
                components = max(len(self.pair.a_shifts), len(self.pair.b_shifts))
                budget.reserve(16.0 * o.size * components, "the output rule of a subsampled mechanism's MGF")
                loss, magnitude = np.empty(o.size), np.empty(o.size)
                for start in range(0, o.size, self.RULE_CHUNK):  # far rules are long: the budget is checked
                    budget.check("building the output rule of a subsampled mechanism's MGF")
                    piece = slice(start, start + self.RULE_CHUNK)
                    loss[piece], magnitude[piece] = self._loss_and_log_integrand(o[piece], c)
                magnitude += log_w
                top = float(np.max(magnitude))
                rules[frequency] = (loss, np.exp(magnitude - top), top)
        return rules[frequency]

    def evaluation_cost(self, c: float, frequencies: np.ndarray) -> np.ndarray:
        """Output nodes summed by one evaluation of log M(c + iu) at each |u| in ``frequencies`` (as the
        shifted-line rule of :meth:`_shifted` or else :meth:`_rule` would lay them out; 0 where Re s is beyond
        MAX_REACH)."""
        window = self._window(c)
        if window is None:
            return np.zeros(np.shape(frequencies))

        def count(frequency: float) -> float:
            shifted = self._shifted(c, frequency)
            return shifted.size if shifted is not None else self._rule_size(window, frequency)

        return _per_power(frequencies, count)

    def mgf_cost(self, s: np.ndarray) -> np.ndarray:
        """Output nodes summed by one evaluation of log M at each complex ``s`` (:meth:`evaluation_cost` on each
        real part's line)."""
        return costs_by_line(self.evaluation_cost, s)

    def cumulants(self) -> tuple[float, float]:
        """Mean and variance of L under A."""
        window = self._window(0.0)
        if window is None:
            raise AccuracyError("the noise pair's output range exceeds the quadrature's reach")
        o, log_w = self._panels(window, 0.0)
        loss, log_density = self._loss_and_log_integrand(o, 0.0)
        return weighted_cumulants(loss, log_w + log_density)


@functools.lru_cache(maxsize=8)
def gauss_legendre(order: int) -> tuple[np.ndarray, np.ndarray]:
    """The Gauss-Legendre nodes and weights of ``order`` on [-1, 1] (computed once per order; read-only)."""
    nodes, weights = np.polynomial.legendre.leggauss(order)
    nodes.flags.writeable = weights.flags.writeable = False
    return nodes, weights


def _log_total(log_weights: tuple[float, ...]) -> float:
    """log sum_i e^{log_weights[i]} of a few log-weights, in Python floats (NaN if one is NaN)."""
    if len(log_weights) == 1:
        return float(log_weights[0])
    top = max(log_weights)
    if not math.isfinite(top):
        return top if math.isnan(top) or top > 0 else -math.inf
    return top + math.log(math.fsum(math.exp(w - top) for w in log_weights))


def _line_entry(cache: dict[float, dict], c: float, lines: int) -> dict:
    """The entry of real part ``c`` in a cache of the latest ``lines`` lines (made, and the oldest dropped, when
    new; moved to the newest end when asked again)."""
    entry = cache.pop(c, None)
    if entry is None:
        entry = {}
        while len(cache) >= lines:
            del cache[next(iter(cache))]
    cache[c] = entry
    return entry


def _power_of_two(frequency: float) -> float:
    """The frequency rounded up to a power of two (rules are shared between frequencies up to it); frexp's
    exponent is exact, so a power of two maps to itself and anything above it to the next."""
    mantissa, exponent = math.frexp(max(frequency, 1e-300))
    return math.ldexp(1.0, exponent - (mantissa == 0.5))


def _powers_of_two(frequencies: np.ndarray) -> np.ndarray:
    """:func:`_power_of_two` of each of ``frequencies`` (>= 0), in array operations."""
    mantissas, exponents = np.frexp(np.maximum(frequencies, 1e-300))
    return np.ldexp(1.0, exponents - (mantissas == 0.5))


def _per_power(frequencies: np.ndarray, count: Callable[[float], float]) -> np.ndarray:
    """``count(f)`` at each |frequency| rounded up to a power of two f (rules are shared up to it), computed
    once per power."""
    powers = _powers_of_two(np.abs(np.asarray(frequencies, dtype=float)))
    unique, index = np.unique(powers, return_inverse=True)
    return np.array([count(frequency) for frequency in unique.tolist()], dtype=float)[index].reshape(powers.shape)


def distinct_values(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, index of each value among them), as ``np.unique(values, return_inverse=True)``
    for a 1-d array; one comparison when all are equal (the nodes of one vertical contour line)."""
    if values.size and values[0] == values.min() == values.max():
        return values[:1].copy(), np.zeros(values.shape, dtype=np.intp)
    return np.unique(values, return_inverse=True)


def costs_by_line(cost: Callable[[float, np.ndarray], np.ndarray], s: np.ndarray) -> np.ndarray:
    """``cost(c, |Im s|)`` for the nodes ``s`` on each vertical line Re s = c: the per-node cost of an MGF at
    complex nodes from its cost along one line (shape of ``s``)."""
    flat = np.asarray(s, dtype=complex).ravel()
    out = np.zeros(flat.shape)
    real_parts, line_of = distinct_values(flat.real)
    for line, c in enumerate(real_parts):
        on = line_of == line
        out[on] = cost(float(c), np.abs(flat.imag[on]))
    return out.reshape(np.shape(s))


def summed_at_once(frequencies: np.ndarray) -> bool:
    """Whether the MGF evaluators sum these imaginary parts (of one real part) at once, as a lattice of at
    least GRIDDED_SPAN points by the non-uniform FFT (one output rule for all of them, cost about its nodes times
    2 GRID_SPREAD); otherwise they are summed in blocks, each output node once per frequency."""
    frequencies = np.asarray(frequencies, dtype=float)
    if frequencies.size < GRIDDED_SPAN:
        return False
    lattice = _lattice(frequencies)
    return lattice is not None and lattice[2].max() + 1 >= GRIDDED_SPAN


def fourier_sums(frequencies: np.ndarray, values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """sum_j weights_j e^{i f_n values_j} for every frequency f_n: the one-row case of
    :func:`batched_fourier_sums`.

    When the frequencies lie on a lattice f_n = f_0 + m_n d with integers 0 <= m_n < span (a
    trapezoid's nodes, or the part of them not cached yet) and span is at most LATTICE_SPAN_FACTOR
    times their number, every lattice point is summed at once: from GRIDDED_SPAN points on by a
    non-uniform FFT (:func:`_batched_gridded_sums`, cost about the number of values), below it by factoring
    the exponentials, e^{i (f_0 + (a r + b) d) x} = e^{i (f_0 + a r d) x} e^{i b d x} with r about
    sqrt(span): 2 sqrt(span) rows of complex exponentials and one matrix product instead of one row
    per frequency.  Both keep the phases' rounding that of the direct product (a few ulps of f x).
    Other frequencies are summed directly, a bounded number of exponentials at a time, with the time
    budget checked in between.
    """
    return batched_fourier_sums(frequencies, np.asarray(values)[None, :], np.asarray(weights)[None, :])[:, 0]


#: Lattices spanning at least this many frequencies are summed by the non-uniform FFT (below it the
#: factored product is as fast).
GRIDDED_SPAN = 256
#: Gaussian gridding: kernel half-width in grid points, and grid size over the span of frequencies.
GRID_SPREAD, GRID_OVERSAMPLING = 14, 4


#: A lattice of frequencies is summed by the factored product when its span is at most this many times
#: the frequencies asked for (a lattice point costs a product row, about 1/20 of an exponential row).
LATTICE_SPAN_FACTOR = 8


def _lattice(frequencies: np.ndarray) -> tuple[float, float, np.ndarray] | None:
    """(f_0, d, m) with frequencies = f_0 + m d to 8 ulps, m non-negative integers, f_0 the smallest
    frequency and d the smallest gap refined over the whole span; None if they are not on such a
    lattice or it is too sparse (LATTICE_SPAN_FACTOR)."""
    first, last = float(np.min(frequencies)), float(np.max(frequencies))
    gaps = np.diff(np.unique(frequencies))
    if gaps.size == 0 or not gaps[0] > 0:
        return None
    step = float(np.min(gaps))
    multiples = np.rint((frequencies - first) / step)
    if multiples.max() + 1 > LATTICE_SPAN_FACTOR * frequencies.size:
        return None
    step = (last - first) / multiples.max()
    if np.max(np.abs(first + step * multiples - frequencies)) > 8 * np.finfo(float).eps * max(abs(first), abs(last)):
        return None
    return first, step, multiples.astype(np.intp)


@dataclass(frozen=True)
class PairFamily:
    """Noise-mixture pairs whose MGFs are evaluated together: one noise, and the same number of components
    on each side.

    Measured in noise scales, x = o / scale, such pairs differ only in their shifts c / scale and their
    weights (all Poisson-subsampled Gaussians of one direction: sigma and q), so :class:`PairMGFBatch` lays
    one output rule for all of them and evaluates every member's MGF in one array operation.
    """

    noise: str
    a_components: int
    b_components: int

    @classmethod
    def of(cls, pair: NoiseMixturePair) -> PairFamily:
        """The family of ``pair``."""
        return cls(pair.noise, len(pair.a_shifts), len(pair.b_shifts))

    def batch(self, members: tuple[NoiseMixturePair, ...]) -> BucketedPairMGF:
        """The batched MGF of ``members`` (pairs of this family)."""
        return BucketedPairMGF(members)


class BucketedPairMGF:
    """The MGFs of pairs of one :class:`PairFamily`, in :class:`PairMGFBatch` buckets of similar loss variation.

    A shared rule's panels follow the member whose loss varies most (the phase limit), so members are sorted
    by the total variation of their loss over the output range at Re s = 0 and cut into buckets whose
    variations are within a factor RATIO: each member's sum then uses at most about RATIO times its own nodes.
    """

    RATIO = 1.25

    def __init__(self, members: tuple[NoiseMixturePair, ...]):
        members = tuple(members)
        variation = PairMGFBatch(members).loss_variations()
        order = np.argsort(variation, kind="stable")
        starts = [0]
        for position in range(1, order.size):
            if variation[order[position]] > self.RATIO * variation[order[starts[-1]]]:
                starts.append(position)
        self.size = len(members)
        self.buckets = [(indices, PairMGFBatch(tuple(members[k] for k in indices)))
                        for indices in np.split(order, starts[1:])]

    def cumulants(self) -> np.ndarray:
        """Every member's (mean, variance) of its loss: shape (members, 2) (:meth:`PairMGFBatch.cumulants`)."""
        out = np.empty((self.size, 2))
        for indices, batch in self.buckets:
            out[indices] = batch.cumulants()
        return out

    def log_phi(self, t: np.ndarray) -> np.ndarray:
        """Every member's log-CF at ``t`` (:meth:`PairMGFBatch.log_phi`): shape t.shape + (members,)."""
        t = np.asarray(t)
        out = np.empty(t.shape + (self.size,), dtype=complex)
        for indices, batch in self.buckets:
            out[..., indices] = batch.log_phi(t)
        return out

    def evaluation_cost(self, t: np.ndarray) -> np.ndarray:
        """Output nodes summed, over all members, by one evaluation of :meth:`log_phi` at each real or complex
        ``t``."""
        return sum((batch.evaluation_cost(t) for _, batch in self.buckets), np.zeros(np.shape(t)))


class PairMGFBatch:
    """log M_m(s) of several noise-mixture pairs of one :class:`PairFamily`, on one output rule.

    Each member's MGF is the integral of :class:`PairMGF`, written in the output measured in noise scales,
    x = o / scale: M(s) = int mu_1(x) (A/mu)(x)^{1+s} (B/mu)(x)^{-s} dx with mu_1 the unit noise density.
    For a batch of s of one real part c the members share one composite Gauss-Legendre rule in x that
    meets every member's requirements of :class:`PairMGF` at once: it covers the union of their windows
    (where a member's real log-integrand is within e^-DROP of its own peak), its panels are at most 2 noise
    scales wide with edges at every member's kinks (Laplace), and the phase Im(s) L_m changes by at most PHASE
    radians across each panel for every member (the panels follow the largest of the members' loss variations).
    So each member's sum is a Gauss-Legendre rule at least as fine and as wide as its own, and carries the
    relative error of :class:`PairMGF` (a few ulps times the sum's cancellation, relative to M_m(c)).  The
    members' sums over the shared nodes are formed as arrays of shape (members, output nodes).
    """

    ORDER = PairMGF.ORDER
    DROP = PairMGF.DROP
    BLOCK = PairMGF.BLOCK
    PHASE = PairMGF.PHASE
    MAX_REACH = PairMGF.MAX_REACH
    #: Most complex exponentials formed at once (members x output nodes x frequencies), to bound memory.
    CHUNK = 1 << 21
    #: Real parts whose output rules are kept (a contour sum, its check and nearby eps alternate few lines).
    CACHED_LINES = 2

    def __init__(self, members: tuple[NoiseMixturePair, ...]):
        members = tuple(members)
        if not members:
            raise ValueError("a PairMGFBatch needs at least one member")
        family = PairFamily.of(members[0])
        if any(PairFamily.of(pair) != family for pair in members):
            raise ValueError(f"the members of a PairMGFBatch must share one PairFamily, the first's {family}")
        self.members, self.noise = members, family.noise
        scales = np.array([pair.scale for pair in members])
        self.a_shifts = np.array([pair.a_shifts for pair in members]) / scales[:, None]
        self.b_shifts = np.array([pair.b_shifts for pair in members]) / scales[:, None]
        self.a_log_weights = np.array([pair.a_log_weights for pair in members], dtype=float)
        self.b_log_weights = np.array([pair.b_log_weights for pair in members], dtype=float)
        every = np.concatenate((self.a_shifts, self.b_shifts), axis=1)
        self.largest_shift = np.max(np.abs(every), axis=1)
        #: A bound on |dL/dx| of each member (PairMGF's loss_slope, in noise scales).
        self.loss_slopes = np.ptp(every, axis=1) if self.noise == "gaussian" else np.full(len(members), 2.0)
        self.nodes, self.weights = gauss_legendre(self.ORDER)
        self._rules: dict[float, dict] = {}

    def _log_ratios(self, x: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log A/mu, log B/mu) of the members ``rows`` at the outputs ``x`` (noise scales): (rows, x) each."""
        sides = []
        for shifts, log_weights in ((self.a_shifts, self.a_log_weights), (self.b_shifts, self.b_log_weights)):
            c = shifts[rows][:, :, None]
            if self.noise == "gaussian":
                kappa = c * (2 * x - c) / 2
            else:
                kappa = np.sign(c) * np.clip(2 * x - c, -np.abs(c), np.abs(c))
            terms = log_weights[rows][:, :, None] + kappa
            if terms.shape[1] == 2 and np.all(np.isfinite(log_weights)):
                sides.append(_logaddexp(terms[:, 0], terms[:, 1]))
            else:
                sides.append(np.logaddexp.reduce(terms, axis=1) if terms.shape[1] > 1 else terms[:, 0])
        return sides[0], sides[1]

    def _log_mu(self, x: np.ndarray) -> np.ndarray:
        if self.noise == "gaussian":
            return -0.5 * x * x - 0.5 * math.log(2 * math.pi)
        return -np.abs(x) - math.log(2.0)

    def _loss_and_log_integrand(self, x: np.ndarray, c: float, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        log_a, log_b = self._log_ratios(x, rows)
        loss = log_a - log_b
        return loss, self._log_mu(x) + log_a + c * loss

    def loss_variations(self) -> np.ndarray:
        """Each member's total variation of its loss over the shared output range at Re s = 0 (on a grid of
        1/8 noise scale): what sets its panels at large |Im s|."""
        rows = self._within_reach(0.0)
        low, high = self.output_range(0.0, rows)
        grid = np.linspace(low, high, int(math.ceil(8 * (high - low))) + 1)
        variation = np.full(len(self.members), np.inf)
        variation[rows] = np.sum(np.abs(np.diff(self._loss_and_log_integrand(grid, 0.0, rows)[0], axis=1)), axis=1)
        return variation

    def _within_reach(self, c: float) -> np.ndarray:
        """The members whose output range at real part ``c`` is within MAX_REACH noise scales (as PairMGF)."""
        return np.flatnonzero((2 + 2 * abs(c)) * self.largest_shift + 60 <= self.MAX_REACH)

    def output_range(self, c: float, rows: np.ndarray) -> tuple[float, float]:
        """[low, high] (noise scales) outside which every member's integrand at real part ``c`` is below e^-DROP
        of its own peak, on one grid of half a noise scale reaching the farthest member's (2 + 2|c|) shifts
        + 60 scales."""
        reach = float(np.max((2 + 2 * abs(c)) * self.largest_shift[rows])) + 60
        grid = np.linspace(-reach, reach, int(4 * reach) + 2)
        values = self._loss_and_log_integrand(grid, c, rows)[1]
        keep = values > np.max(values, axis=1, keepdims=True) - self.DROP
        first = np.argmax(keep, axis=1)
        last = grid.size - 1 - np.argmax(keep[:, ::-1], axis=1)
        if np.any(first == 0) or np.any(last == grid.size - 1):
            raise AccuracyError(f"the MGF integrand of a {self.noise} noise-mixture pair at Re s = {c:.6g} does "
                                f"not decay within {reach:.3g} noise scales; please report it")
        return float(grid[np.min(first) - 1]), float(grid[np.max(last) + 1])

    def _panels(self, window: list, frequency: float, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """GL nodes and log-weights on the ``window`` of :meth:`_window` meeting every member's panel limits
        (:meth:`PairMGF._panels`): the phase limit follows, in each cell of a grid of 1/8 scale, the largest
        change of the members' losses, so that no member's phase changes by more than PHASE across a panel."""
        low, high, grid, variation = window
        kinks = None
        if self.noise == "laplace":
            kinks = np.concatenate((self.a_shifts[rows].ravel(), self.b_shifts[rows].ravel()))
            kinks = kinks[(kinks > low) & (kinks < high)]
        pieces = 1
        if frequency * float(np.max(self.loss_slopes[rows])) * (high - low) > self.PHASE:
            if variation is None:
                loss = self._loss_and_log_integrand(grid, 0.0, rows)[0]
                variation = np.concatenate(([0.0], np.cumsum(np.max(np.abs(np.diff(loss, axis=1)), axis=0))))
                window[3] = variation
            pieces = int(math.ceil(frequency * variation[-1] / self.PHASE))
        return composite_rule(panel_edges(low, high, 2.0, kinks, grid, variation, pieces), self.nodes, self.weights)

    def _window(self, c: float, rows: np.ndarray) -> list:
        """[low, high, grid, variation]: :meth:`output_range` at ``c``, a grid of 1/8 scale on it and (filled in
        by :meth:`_panels` when a phase limit first needs it) the cumulative largest change of the members'
        losses along the grid; kept with the line's rules."""
        low, high = self.output_range(c, rows)
        return [low, high, np.linspace(low, high, int(math.ceil(8 * (high - low))) + 1), None]

    def _rule(self, c: float, frequency: float):
        """(members evaluated, L, weights relative to each member's largest, log of the largest) of the shared
        rule for real part ``c`` and |Im s| up to ``frequency`` (a power of two); None if no member is within
        reach.  The rules of the latest CACHED_LINES real parts are kept."""
        rules = self._line(c)
        if frequency not in rules:
            rows = self._within_reach(c)
            if rows.size == 0:
                rules[frequency] = None
            else:
                x, log_w = self._panels(self._line_window(c, rows), frequency, rows)
                budget.reserve(16.0 * rows.size * x.size * max(self.a_shifts.shape[1], self.b_shifts.shape[1]),
                               "the output rule of a batch of subsampled mechanisms")
                loss, magnitude = self._loss_and_log_integrand(x, c, rows)
                magnitude += log_w
                top = np.max(magnitude, axis=1)
                rules[frequency] = (rows, loss, np.exp(magnitude - top[:, None]), top)
        return rules[frequency]

    def _line(self, c: float) -> dict:
        """The rules (and window, :meth:`_line_window`) kept for real part ``c``, made the most recent of the
        CACHED_LINES lines kept."""
        return _line_entry(self._rules, c, self.CACHED_LINES)

    def _line_window(self, c: float, rows: np.ndarray) -> list:
        """The :meth:`_window` of line ``c`` for the members ``rows`` within reach, kept with its rules."""
        rules = self._line(c)
        if "window" not in rules:
            rules["window"] = self._window(c, rows)
        return rules["window"]

    def log_mgf(self, s: np.ndarray) -> np.ndarray:
        """log M_m(s) of every member at complex ``s`` (any shape): shape s.shape + (members,); NaN for a member
        whose range at Re s is beyond MAX_REACH.  Nodes are grouped as in :meth:`PairMGF.log_mgf`."""
        s = np.asarray(s, dtype=complex)
        flat = s.ravel()
        out = np.full((flat.size, len(self.members)), np.nan, dtype=complex)
        real_parts, group_of = distinct_values(flat.real)
        for group, c in enumerate(real_parts):
            members = np.flatnonzero(group_of == group)
            if summed_at_once(flat[members].imag):
                budget.check("evaluating subsampled mechanisms' MGFs")
                self._log_sum(float(c), flat[members].imag, out, members)
                continue
            members = members[np.argsort(np.abs(flat[members].imag))]
            for start in range(0, members.size, self.BLOCK):
                budget.check("evaluating subsampled mechanisms' MGFs")
                block = members[start:start + self.BLOCK]
                self._log_sum(float(c), flat[block].imag, out, block)
        return out.reshape(s.shape + (len(self.members),))

    def _log_sum(self, c: float, frequencies: np.ndarray, out: np.ndarray, where: np.ndarray) -> None:
        """out[where, m] = log sum_j w_mj A_mj e^{(c + iu) L_mj} at u = ``frequencies`` for the members in reach."""
        rule = self._rule(c, _power_of_two(float(np.max(np.abs(frequencies)))))
        if rule is None:
            return
        rows, loss, scaled, top = rule
        out[np.ix_(where, rows)] = top + np.log(batched_fourier_sums(frequencies, loss, scaled, self.CHUNK))

    def cumulants(self) -> np.ndarray:
        """Every member's mean and variance of L under A (as :meth:`PairMGF.cumulants`, on the shared rule at
        Re s = 0): shape (members, 2)."""
        rows = self._within_reach(0.0)
        if rows.size < len(self.members):
            raise AccuracyError("a noise pair's output range exceeds the quadrature's reach")
        x, log_w = self._panels(self._window(0.0, rows), 0.0, rows)
        loss, log_density = self._loss_and_log_integrand(x, 0.0, rows)
        log_density += log_w
        weights = np.exp(log_density - np.max(log_density, axis=1, keepdims=True))
        weights /= np.sum(weights, axis=1, keepdims=True)
        mean = np.sum(weights * loss, axis=1)
        return np.stack((mean, np.sum(weights * (loss - mean[:, None]) ** 2, axis=1)), axis=1)

    def log_phi(self, t: np.ndarray) -> np.ndarray:
        """Every member's log-CF log M_m(it) at real or complex ``t``: shape t.shape + (members,) (the
        :class:`afa.mechanisms.privacy_loss.PrivacyLoss` batch interface; t = -is gives the MGF at s)."""
        return self.log_mgf(1j * np.asarray(t))

    def evaluation_cost(self, t: np.ndarray) -> np.ndarray:
        """Output nodes summed, over all members, by one evaluation of :meth:`log_phi` at each real or complex
        ``t`` (at s = it, on each real part's line)."""
        return costs_by_line(self._cost, 1j * np.asarray(t))

    def _cost(self, c: float, frequencies: np.ndarray) -> np.ndarray:
        """Output nodes summed, over all members, by one evaluation at each |u| in ``frequencies``."""
        rows = self._within_reach(c)
        if rows.size == 0:
            return np.zeros(np.shape(frequencies))
        window = self._line_window(c, rows)
        return _per_power(frequencies, lambda frequency: self._panels(window, frequency, rows)[0].size * rows.size)


def _batched_gridded_sums(first: float, step: float, span: int, values: np.ndarray,
                          weights: np.ndarray) -> np.ndarray:
    """sum_j w_mj e^{i (first + k step) x_mj} for k = 0, ..., span - 1 and every row m of ``values`` /
    ``weights``, by a type-1 non-uniform FFT: shape (rows, span).  The rows' grids are spread by one bincount
    and transformed by one FFT along the last axis.

    Gaussian gridding (Greengard & Lee, SIAM Review 46 (2004)): with theta_j = step x_j the sums are
    F_k = sum_j c_j e^{i k theta_j}, c_j = w_j e^{i first x_j}.  Spreading c_j with the 2 pi-periodic
    Gaussian g(theta) = sum_p e^{-(theta - 2 pi p)^2 / (4 tau)} onto a grid of size
    M >= GRID_OVERSAMPLING (2 span) and one FFT give the Fourier coefficients of the spread sum, g_k F_k
    with g_k = sqrt(tau / pi) e^{-k^2 tau}; dividing by g_k leaves F_k.  tau balances the kernel's
    truncation at GRID_SPREAD points, e^{-pi GRID_SPREAD sqrt(1 - 2 span / M)} ~ 1e-17, against aliasing
    of the band |k| < span; the division amplifies rounding by at most e^{span^2 tau} < 2.3.  The band is
    not centred on the frequencies asked for: the common phase factor would then be e^{i f_mid x_j}, whose
    rounding (an ulp of f_mid x_j) would reach the low frequencies, which carry most of a contour integral;
    as it is, frequency f's phases carry about an ulp of f x_j, as in the direct product.  theta_j is not
    reduced modulo 2 pi either (an ulp of 2 pi in every phase, times k): the grid index is, exactly.
    Rounding: a few ulps of sum |w| (the FFT's) plus that of the phases (checked against 30-digit sums
    in tests/test_subsampling.py).
    """
    band = 2 * span
    size = 1 << max(6, math.ceil(math.log2(GRID_OVERSAMPLING * band)))
    tau = math.pi * GRID_SPREAD / (size * math.sqrt(size * (size - band)))
    spacing = 2 * math.pi / size
    rows = values.shape[0]
    theta = step * values
    nearest = np.floor(theta / spacing)
    offsets = np.arange(1 - GRID_SPREAD, GRID_SPREAD + 1)
    kernel = (theta - spacing * nearest)[:, :, None] - spacing * offsets
    kernel *= kernel
    kernel *= -1 / (4 * tau)
    np.exp(kernel, out=kernel)
    phases = first * values
    # Each point spreads onto cells nearest - GRID_SPREAD + 1 .. nearest + GRID_SPREAD of a row padded by
    # GRID_SPREAD - 1 cells before and GRID_SPREAD + 1 after, whose ends then wrap onto the periodic grid.
    before, padded = GRID_SPREAD - 1, size + 2 * GRID_SPREAD
    cells = ((np.mod(nearest.astype(np.intp), size) + padded * np.arange(rows)[:, None])[:, :, None]
             + (offsets + before)).ravel()
    grid = np.empty((rows, size), dtype=complex)
    for part, trig in ((grid.real, np.cos), (grid.imag, np.sin)):
        spread = np.bincount(cells, ((weights * trig(phases))[:, :, None] * kernel).ravel(), rows * padded)
        spread = spread.reshape(rows, padded)
        part[...] = spread[:, before:before + size]
        part[:, size - before:] += spread[:, :before]
        part[:, :padded - before - size] += spread[:, before + size:]
    k = np.arange(span)
    return math.sqrt(math.pi / tau) * np.exp(k * k * tau) * np.fft.ifft(grid, axis=1)[:, :span]


def _logaddexp(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(e^a + e^b) = max + log1p(e^-|a - b|) for finite arrays (numpy's logaddexp, in fewer passes)."""
    gap = np.abs(a - b)
    np.negative(gap, out=gap)
    np.exp(gap, out=gap)
    np.log1p(gap, out=gap)
    return gap + np.maximum(a, b)


def _unit_phases(phases: np.ndarray) -> np.ndarray:
    """e^{i phases} for real ``phases``: cos + i sin, the same numbers as numpy's complex exp, formed faster."""
    out = np.empty(phases.shape, dtype=complex)
    np.cos(phases, out=out.real)
    np.sin(phases, out=out.imag)
    return out


def batched_fourier_sums(frequencies: np.ndarray, values: np.ndarray, weights: np.ndarray,
                         chunk: int = 1 << 21) -> np.ndarray:
    """out[n, m] = sum_j weights[m, j] e^{i f_n values[m, j]} for every frequency f_n and row m.

    Three paths, vectorised over the rows (see :func:`fourier_sums` for when each is taken): direct
    products, the factored lattice product and the non-uniform FFT (:func:`_batched_gridded_sums`).  At most
    about ``chunk`` complex exponentials are formed at once, with the time budget checked in between.
    """
    frequencies = np.asarray(frequencies, dtype=float)
    rows, width_j = values.shape
    out = np.empty((frequencies.size, rows), dtype=complex)
    lattice = _lattice(frequencies) if frequencies.size >= 64 else None
    if lattice is None:
        zero = frequencies == 0
        out[zero] = np.sum(weights, axis=1)  # e^0 = 1
        moving = np.flatnonzero(~zero)
        per_chunk = max(1, chunk // max(values.size, 1))
        for start in range(0, moving.size, per_chunk):
            budget.check("evaluating subsampled mechanisms' MGFs")
            block = moving[start:start + per_chunk]
            out[block] = np.einsum("nmj,mj->nm", _unit_phases(frequencies[block, None, None] * values), weights)
        return out
    first, step, multiples = lattice
    span = int(multiples.max()) + 1
    if span >= GRIDDED_SPAN:
        per_row = max(1, chunk // max(2 * GRID_SPREAD * width_j, 1))
        for start in range(0, rows, per_row):
            budget.check("evaluating subsampled mechanisms' MGFs")
            sums = _batched_gridded_sums(first, step, span, values[start:start + per_row],
                                         weights[start:start + per_row])
            out[:, start:start + per_row] = sums[:, multiples].T
        return out
    width = math.isqrt(span)
    height = -(-span // width)
    left_f = first + step * width * np.arange(height)
    right_f = step * np.arange(width)
    per_row = max(1, chunk // max((height + width) * width_j, 1))
    for start in range(0, rows, per_row):
        budget.check("evaluating subsampled mechanisms' MGFs")
        v, w = values[start:start + per_row, None, :], weights[start:start + per_row, None, :]
        left = _unit_phases(left_f[None, :, None] * v) * w
        right = _unit_phases(right_f[None, :, None] * v)
        products = np.matmul(left, right.transpose(0, 2, 1))
        out[:, start:start + per_row] = products.reshape(products.shape[0], -1)[:, multiples].T
    return out
