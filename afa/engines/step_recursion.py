"""delta(eps) of a few uses of Gaussian noise pairs, by recursion over the uses, and of many uses of one pair, by
doubling (:class:`DoublingRecursion`): relative accuracy at any delta.

One direction of a composition of k uses of Gaussian noise pairs (A_i, B_i)
(:class:`afa.mechanisms.noise_pair.NoiseMixturePair`: Poisson-subsampled Gaussians, mixtures of Gaussians) and of
Gaussian mechanisms has the loss L = G + l_1(o_1) + ... + l_k(o_k), all independent, with o_i ~ A_i,
l_i = log(A_i / B_i) and G ~ N(mu^2 / 2, mu^2) the composed Gaussian mechanisms (mu = 0 when there are none).
Its hockey stick delta(eps) = E[(1 - e^{eps - L})_+] (Zhu, Dong & Wang 2022, Def. 7 and Thm 10) obeys, on
conditioning on the last use,

    delta_j(x) = E_{o ~ A_j}[delta_{j-1}(x - l_j(o))],

from delta_0 = the Gaussian closed form (Sommer, Meiser & Mohammadi 2019, Thm 5), or, without Gaussians, from
delta_1 = the first pair's hockey stick from its loss tails.  Every integrand is positive, so each level's
quadrature is accurate relative to delta_j however small it is, and the relative errors of the levels add:
nothing cancels.  That is what the contour cannot offer a few uses of a subsampled Gaussian with small q at a
tiny delta: there each use's tilted loss law is bimodal (the pile near log(1 - q) and the tilted Gaussian tail)
and the saddle line's sums cancel by 1e5 to 1e9.

Representation.  log delta_j is a piecewise Chebyshev interpolant (FIT_ORDER points per piece, pieces halved until
their last three coefficients are below FIT_TOL, or below 8 times the relative error the loss tails state for
delta_1) on [low_j, high_j].  Each level's first pieces are the previous stage's, scaled to its range, less the cut
between the narrowest pair (a level is smoother than the one it averages); they are halved as any other.  Below
the sum of the uses' lowest losses (when it is finite) delta_j(x) = 1 - e^x exactly (every loss exceeds x, and
E[e^{-L}] = 1); ``low_j`` reaches down to what the next level asks for (the smallest eps asked minus the largest
losses of the later uses' rules), ``high_j`` up to what it asks for (twice the largest eps asked plus REACH_STEP,
minus the later uses' smallest losses; a later, larger eps extends every stage) or to the loss's upper end.
Pieces where log delta_j falls below FLOOR are taken as 0.  Above the composition's largest loss (the sum of the
uses' upper ends) delta is 0 exactly, without any fitting.

Quadrature.  Level j at x is a composite Gauss-Legendre rule of ORDER points per panel over o, on panels at most
WIDTH noise scales wide over the outputs within SPAN scales of A_j's outermost shifts, with more edges where
x - l_j(o) meets a piece edge of delta_{j-1} (outputs interpolated in a table of l_j): each panel then sees one
polynomial of a smooth function of o, wherever the previous level's steep parts (the pile's edge near
j log(1 - q)) fall.  The panels without such an edge are the same for every x: their nodes, densities and losses
are computed once per use.  Terms below e^-DROP of a sum's largest are left out.

Slope.  -delta_k'(x) = E_{o ~ A_k}[-delta_{k-1}'(x - l_k(o))], on the last level's nodes, from the derivative of
the last stage's fit (-delta_{k-1}' = delta_{k-1} times -(log delta_{k-1})'); it steers eps(delta)'s Newton steps
and the first steps of the bound searches, whose bounds are then checked against delta and its error.

Error.  Each stage's fit is compared, at two points per piece, with the stage computed by a finer rule
(CHECK_ORDER points, panels CHECK_WIDTH scales wide): the differences cover the fit and the quadrature together.
For a final delta, a stage's difference counts relatively (times delta) at points where delta_j is above
delta e^-RELATIVE_SPAN and absolutely below (the later levels average delta_j with weights summing to at most 1);
the last level is computed by both rules at each eps and their difference added, and so are the parts taken as 0
and the mass beyond SPAN scales (below e^-245).  These are estimates, not proofs (``certified`` is False).  A stage
whose difference exceeds RTOL where delta_j > e^-RELATIVE_SPAN, or needing more than MAX_PIECES pieces, is
refused (AccuracyError).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import budget
from ..mechanisms.loss_tails import NoisePairTails
from ..mechanisms.noise_pair import NoiseMixturePair, gauss_legendre
from ..mechanisms.output_rules import composite_rule, panel_edges
from ..numerics.exact import gaussian_log_delta
from ..results import AccuracyError, UnsupportedCompositionError

__all__ = ["DoublingRecursion", "StepRecursion"]

#: The most uses of noise pairs a recursion takes (each is one level of fitting, some 10-30 ms: 200 uses take
#: about 7 s, where the contour answers in well under a second unless its sums cancel beyond its nodes' accuracy).
MAX_USES = 200
#: Chebyshev points per piece, and the largest of a piece's last three coefficients accepted (absolute, in log delta).
FIT_ORDER, FIT_TOL = 20, 1e-11
#: A level needing more pieces than this is refused; pieces are not halved below MIN_PIECE (relative to the range).
MAX_PIECES, MIN_PIECE = 400, 1e-6
#: Gauss-Legendre points per panel and the widest panel (noise scales); the check's finer rule.
ORDER, WIDTH = 10, 1.0
CHECK_ORDER, CHECK_WIDTH = 14, 2.0 / 3.0
#: Points of the table of the loss along the rule's span (for the outputs of panel edges), and the terms left
#: out of a level's sum (below e^-DROP of its largest; their total is below 1e-16 of it).
IMAGE_POINTS, DROP = 4096, 45.0
#: The rule covers the outputs within SPAN noise scales of the outermost shifts (beyond: mass below e^-245).
SPAN = 22.0
#: A stage's check points with delta_j below delta e^-RELATIVE_SPAN count their errors absolutely.
RELATIVE_SPAN = 35.0
#: A bound on the mass of A beyond SPAN noise scales from the outermost shifts: 2 Phi(-SPAN).
OUTSIDE_SPAN = 2 * 0.5 * math.erfc(SPAN / math.sqrt(2))
#: log delta below which a level is taken as 0; a piece reaching below it is halved while its top exceeds
#: FLOOR + FLOOR_BAND.
FLOOR, FLOOR_BAND = -250.0, 20.0
#: Answers kept for repeated eps (a root search's verification asks the same eps several times).
KEPT_ANSWERS = 64
#: The stages are fitted for eps up to twice the largest asked plus REACH_STEP (extended beyond).
REACH_STEP = 0.01
#: A level whose fit differs from a finer rule by more than RTOL (relative, where delta_j > e^-RELATIVE_SPAN) is
#: refused.
RTOL = 1e-6
#: The most uses of one pair :class:`DoublingRecursion` takes (about two stages per doubling of the count), and the
#: largest count times the loss's bounded end (the stages' ranges grow with it, and their pieces: q = 0.001,
#: sigma = 2: 1000 uses take some 2.5 s per direction, 3000 uses 6.5 s and ten times the estimated error).
MAX_DOUBLING_USES, MAX_REACH = 1_000_000, 1.05
#: The largest reach 'auto' gives the doubling as a last resort, after a certified bracket wider than
#: AutoOptions.retry_rtol (q = 0.001, sigma = 2: 3000 uses take some 12 s for both directions, 10 000 uses 18 s,
#: to a stated 2e-8 .. 8e-8 where the PLD's bracket is 3e-4 to 0.7 wide at delta 1e-15 .. 1e-30).
FAR_REACH = 12.0
#: The most uses 'auto' gives the doubling beyond its fast reach (more stages: sigma = 2.9, q = 1.4e-4, 43 827 uses
#: ran out of a 30 s budget; 17 314 uses of q = 2.4e-4 took 20 s).
FAR_USES = 20_000
#: A doubling stage differing from its finer rule by more than STAGE_RTOL is refused; smaller differences are
#: passed on with the stage's weight in each sum (a loss's far end, where delta falls steeply, can differ by 1e-3
#: and not matter to the eps asked), and an eps(delta) bracket wider than 1e-6 is refused.
STAGE_RTOL = 1e-2
#: Most nodes :func:`_sum_of_two` forms at once (it takes its x in groups of rows within this).
SUM_NODES = 2_000_000
#: Fit tolerance of the doubling recursion's first stage (the loss tails of one use).
FIRST_TOL = 1e-13
#: Halvings of a piece tried in one call when fitting the first stage (the loss tails of one use, or the Gaussians'
#: closed form), whose calls cost far more than their points: the same pieces in a third of the calls.
FIRST_LOOKAHEAD = 3
#: Equal-width panels per row of a stage's integral over the split (besides the pieces' edges), and for its check.
SUM_ORDER, PANELS, CHECK_PANELS = 10, 16, 40


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 - e^x) for x < 0, without cancellation."""
    with np.errstate(divide="ignore"):
        return np.where(x > -math.log(2), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


@functools.cache
def _chebyshev_points() -> tuple[np.ndarray, np.ndarray]:
    """The FIT_ORDER Chebyshev points of the first kind on [-1, 1] and the matrix taking values there to the
    coefficients of their interpolating Chebyshev series (the discrete cosine transform: c_j = (2 / n)
    sum_k f(x_k) T_j(x_k), c_0 halved); read-only."""
    angles = np.pi * (np.arange(FIT_ORDER) + 0.5) / FIT_ORDER
    transform = 2.0 / FIT_ORDER * np.cos(np.outer(np.arange(FIT_ORDER), angles))
    transform[0] /= 2
    points = np.cos(angles)
    points.flags.writeable = transform.flags.writeable = False
    return points, transform


def _series(tables: tuple[np.ndarray, ...], index: np.ndarray, t: np.ndarray) -> list[np.ndarray]:
    """sum_j c_j T_j(t) with c_j = table[j, index] for each table (one contiguous row per order, a column per
    piece), by Clenshaw's recurrence on all points at once, each step gathering its coefficients of the points'
    pieces (a row of the table stays in cache however many the points)."""
    twice = 2 * t
    outputs = []
    for table in tables:
        first, second, scratch = table[-1][index], np.zeros(t.shape), np.empty(t.shape)
        for j in range(len(table) - 2, 0, -1):  # first <- 2 t first - second + c_j
            np.multiply(twice, first, out=scratch)
            scratch -= second
            scratch += table[j][index]
            first, second, scratch = scratch, first, second
        np.multiply(t, first, out=scratch)
        scratch -= second
        scratch += table[0][index]
        outputs.append(scratch)
    return outputs


def _halves(left: float, right: float) -> list[tuple[float, float]]:
    """The two halves of [left, right]."""
    middle = (left + right) / 2
    return [(left, middle), (middle, right)]


class _Piecewise:
    """A piecewise Chebyshev interpolant of f on [low, high], pieces halved until their tails are below ``tolerance``
    (FIT_TOL by default) or 8 times the noise of f's values (``function`` returns (values, bounds on their errors),
    both of log delta)."""

    def __init__(self, function, low: float, high: float, tolerance: float = FIT_TOL,
                 seed: np.ndarray | None = None, lookahead: int = 1):
        self.tolerance = tolerance
        #: A bound on the function where it is taken as -inf (pieces below FLOOR + FLOOR_BAND; the function
        #: decreases, so a piece's largest value is at its left end, evaluated with its Chebyshev points).
        self.dropped = 0.0
        self.low, self.high = low, high
        #: The inner piece edges of the latest range fitted ([low, high], or an extension's), relative to it (in
        #: (0, 1)): a seed for fitting a similar function (:meth:`_pieces`).
        self.breaks = np.empty(0)
        #: Halvings of each piece tried in the same call of the function (1: the piece alone); more when calls
        #: cost more than points.
        self.lookahead = lookahead
        pieces = self._pieces(function, low, high, seed)
        self.edges = np.array([piece[0] for piece in pieces] + [pieces[-1][1]])
        #: Coefficients per piece; a piece taken as -inf has a NaN row.
        self.coefficients = np.array([piece[2] for piece in pieces])
        self._tabulate()

    def extend(self, function, high: float, seed: np.ndarray | None = None) -> np.ndarray:
        """Fit ``function`` on [self.high, high] too (``seed`` as for :meth:`_pieces`); returns the new pieces'
        check points."""
        pieces = self._pieces(function, self.high, high, seed)
        first = len(self.coefficients)
        self.edges = np.concatenate([self.edges[:-1], [piece[0] for piece in pieces], [pieces[-1][1]]])
        self.coefficients = np.concatenate([self.coefficients, [piece[2] for piece in pieces]])
        self._tabulate()
        self.high = high
        return self.check_points(first)

    def _pieces(self, function, low: float, high: float, seed: np.ndarray | None = None
                ) -> list[tuple[float, float, np.ndarray]]:
        """(left, right, coefficients) of the pieces fitted on [low, high], sorted; sets :attr:`breaks`.

        The first pieces tried are [low, high] cut at ``seed`` (relative positions in (0, 1): another fit's
        :attr:`breaks`, of a similar function), else [low, high] whole; each is accepted or halved as always, so a
        seed saves the halvings (each a call of ``function``) without changing what a piece must meet."""
        points, transform = _chebyshev_points()
        smallest = MIN_PIECE * (high - self.low)
        pieces: list[tuple[float, float, np.ndarray]] = []
        cuts = [low, high] if seed is None else [low, *(low + (high - low) * np.asarray(seed)), high]
        pending = [(float(a), float(b)) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]
        while pending:
            budget.check("fitting a level of the step recursion")
            if len(pieces) + len(pending) > MAX_PIECES:
                raise AccuracyError(f"the step recursion needs more than {MAX_PIECES} pieces for one level")
            # every pending piece at once (one call of the level's quadrature), with its left end, and its halves
            # down to ``lookahead`` - 1 halvings (decided as if each had been tried after its parent)
            candidates, level = [], pending
            for depth in range(self.lookahead):
                candidates += level
                if depth + 1 < self.lookahead:
                    level = [half for left, right in level for half in _halves(left, right)]
            a = np.array([p[0] for p in candidates])[:, None]
            b = np.array([p[1] for p in candidates])[:, None]
            x = np.concatenate([(a + b) / 2 + (b - a) / 2 * points, a], axis=1)
            values, noises = (array.reshape(len(candidates), FIT_ORDER + 1) for array in function(x.ravel()))
            with np.errstate(invalid="ignore"):  # (rows below FLOOR are not fitted)
                fits = values[:, :FIT_ORDER] @ transform.T
            rows = {piece: number for number, piece in enumerate(candidates)}
            level, kept = pending, []
            for depth in range(self.lookahead):
                halved = []
                for left, right in level:
                    number = rows[(left, right)]
                    row, top = values[number, :FIT_ORDER], values[number, FIT_ORDER]
                    tolerance = max(self.tolerance, 8 * float(np.max(noises[number])))
                    tiny = right - left <= smallest
                    if not np.all(row > FLOOR):  # the level falls below FLOOR in this piece
                        if top <= FLOOR + FLOOR_BAND or tiny:
                            pieces.append((left, right, np.full(FIT_ORDER, np.nan)))
                            self.dropped = max(self.dropped, math.exp(min(top, 0.0)))
                            continue
                    else:
                        coefficients = fits[number]
                        # (within FLOOR_BAND of FLOOR the level inherits the previous one's cut: any fit will do,
                        # its error there counts absolutely, below e^(FLOOR + 2 FLOOR_BAND) times its log
                        # difference)
                        if np.max(np.abs(coefficients[-3:])) <= tolerance or tiny or top <= FLOOR + 2 * FLOOR_BAND:
                            pieces.append((left, right, coefficients))
                            continue
                    halved += _halves(left, right)
                if depth + 1 < self.lookahead:
                    level = halved
                else:
                    kept = halved
            pending = kept
        pieces.sort(key=lambda piece: piece[0])
        self.breaks = np.array([(piece[0] - low) / (high - low) for piece in pieces[1:]])
        return pieces

    def _tabulate(self) -> None:
        """The coefficients by order (one contiguous row per order, a column per piece), and those of the
        derivative in x: d/dt sum_j c_j T_j(t) = sum_j c'_j T_j(t) with c'_{j-1} = c'_{j+1} + 2 j c_j, times
        dt/dx = 2 / (right - left)."""
        self._by_order = np.ascontiguousarray(self.coefficients.T)
        # (for values alone: a piece taken as 0 is the constant -inf)
        self._value_by_order = np.where(np.isnan(self._by_order), 0.0, self._by_order)
        self._value_by_order[0, np.isnan(self._by_order[0])] = -np.inf
        self._inner_edges = self.edges[1:-1]
        self._centres, self._scales = (self.edges[:-1] + self.edges[1:]) / 2, 2 / np.diff(self.edges)
        derivative = np.zeros_like(self._by_order)
        for j in range(FIT_ORDER - 1, 0, -1):
            derivative[j - 1] = (derivative[j + 1] if j + 1 < FIT_ORDER else 0.0) + 2 * j * self._by_order[j]
        derivative[0] /= 2
        self._derivative_by_order = derivative * (2 / np.diff(self.edges))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The fit at ``x`` (-inf in pieces taken as 0)."""
        index, t = self._locate(x)
        return _series((self._value_by_order,), index, t)[0]

    def derivative(self, x: np.ndarray) -> np.ndarray:
        """The fit's derivative at ``x`` (NaN in pieces taken as 0)."""
        index, t = self._locate(x)
        return _series((self._derivative_by_order,), index, t)[0]

    def _locate(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The piece of each x and its position there, in [-1, 1]."""
        index = np.searchsorted(self._inner_edges, x, side="right")
        return index, (x - self._centres[index]) * self._scales[index]

    def value_and_derivative(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The fit and its derivative at ``x`` (both NaN in pieces taken as 0)."""
        index, t = self._locate(x)
        values, derivatives = _series((self._by_order, self._derivative_by_order), index, t)
        return values, derivatives

    def derivative_error(self, x: np.ndarray) -> np.ndarray:
        """An estimate of the error of :meth:`derivative` at ``x``: the derivative of the series' neglected tail,
        taken as FIT_ORDER^2 times its last three coefficients' largest (|T_j'| <= j^2 on [-1, 1]), times
        dt/dx (NaN in pieces taken as 0)."""
        index, _ = self._locate(x)
        tail = np.max(np.abs(self.coefficients[:, -3:]), axis=1)
        return (FIT_ORDER ** 2 * tail * 2 / np.diff(self.edges))[index]

    def check_points(self, first: int = 0) -> np.ndarray:
        """Two points inside each piece from number ``first`` on, between its Chebyshev points."""
        left, right = self.edges[first:-1], self.edges[first + 1:]
        return np.concatenate([left + 0.31 * (right - left), left + 0.77 * (right - left)])


def _coarsened(breaks: np.ndarray) -> np.ndarray:
    """``breaks`` (sorted, in (0, 1)) without the one between the narrowest adjacent pair of pieces: a level is
    smoother than the one it averages, so its narrowest pieces are the first it can do without."""
    if breaks.size == 0:
        return breaks
    edges = np.concatenate([[0.0], breaks, [1.0]])
    return np.delete(breaks, int(np.argmin(edges[2:] - edges[:-2])))


def _row_log_sums(terms: np.ndarray) -> np.ndarray:
    """log sum_j e^terms[i, j] for each row i (-inf for a row of -inf)."""
    top = np.max(terms, axis=1, keepdims=True)
    finite = np.isfinite(top)
    safe = np.where(finite, top, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(finite[:, 0], safe[:, 0] + np.log(np.sum(np.exp(terms - safe), axis=1)), -np.inf)


class _Use:
    """One use of a Gaussian noise pair: its output rule's panels and its loss."""

    def __init__(self, pair: NoiseMixturePair):
        self.pair = pair
        self.tails = NoisePairTails(pair)
        shifts = pair.shifts
        self.span = (float(shifts.min()) - SPAN * pair.scale, float(shifts.max()) + SPAN * pair.scale)
        # the loss along a fine grid of the span, for placing panel edges at its level sets (np.interp)
        grid = np.linspace(*self.span, IMAGE_POINTS)
        losses = pair.privacy_loss(grid)
        order = np.argsort(losses, kind="stable")
        self._image_table = (losses[order], grid[order])
        self.rule_losses = (float(losses.min()), float(losses.max()))
        self.lowest, self.highest = self.tails.loss_range
        #: (order, width) -> the base panels' edges, and per node log density times weight and the loss
        self._base_rules: dict[tuple[int, float], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def log_hockey_stick(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log delta_1(x), its relative error) of this one use, from its loss tails."""
        values, errors = self.tails.hockey_stick_with_error(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(values), np.where(values > 0, errors / values, 0.0)

    def level(self, previous, previous_edges: np.ndarray, x: np.ndarray, order: int, width: float) -> np.ndarray:
        """log E_A[exp(previous(x - l(o)))] at each x, by the composite rule with edges also where x - l(o) meets
        ``previous_edges`` (outputs interpolated from a table of l; an edge need not be exact, only near).

        Terms that cannot come within e^-DROP of the row's largest are not evaluated: previous <= 0, so a node
        whose weight times density is below e^-DROP of the largest term among the densest nodes is dropped.
        """
        return _row_log_sums(self._terms(previous, previous_edges, x, order, width)[0])

    def level_and_slope(self, stage: _Stage, x: np.ndarray, order: int, width: float
                        ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`level` of ``stage`` at each x, and log -delta_j'(x) = log E_A[-delta_{j-1}'(x - l(o))] from the
        stage's slope (:meth:`_Stage.log_slope`) on the nodes the level keeps."""
        values, slopes, _ = self.level_slope_and_error(stage, x, order, width)
        return values, slopes

    def level_slope_and_error(self, stage: _Stage, x: np.ndarray, order: int, width: float
                              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`level_and_slope`, and the relative error estimate the level inherits from ``stage``: the mean of
        its delta's (:meth:`_Stage.relative_errors`) weighted by the level's terms."""
        terms, density, arguments = self._terms(stage, stage.fit.edges, x, order, width)
        kept = np.isfinite(terms)
        values = _row_log_sums(terms)
        slope_terms = np.full(terms.shape, -np.inf)
        slope_terms[kept] = density[kept] + stage.log_slope(arguments[kept])
        inherited = np.zeros(terms.shape)
        inherited[kept] = stage.relative_errors(arguments[kept])[0]
        with np.errstate(invalid="ignore", over="ignore"):
            error = np.sum(np.nan_to_num(np.exp(terms - values[:, None]) * inherited), axis=1)
        return values, _row_log_sums(slope_terms), error

    def _base_rule(self, order: int, width: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rule's base panel edges (at most ``width`` noise scales apart over the span), and at its nodes (one
        row of ``order`` per panel) the log density of A times the weight and the loss l(o); computed once."""
        key = (order, width)
        if key not in self._base_rules:
            edges = panel_edges(*self.span, width * self.pair.scale)
            o, log_w = composite_rule(edges, *gauss_legendre(order))
            log_a, log_b = self.pair.log_ratios(o)
            density, loss = log_w + self.pair.log_mu(o) + log_a, log_a - log_b
            for array in (edges, density, loss):
                array.flags.writeable = False
            self._base_rules[key] = (edges, density.reshape(-1, order), loss.reshape(-1, order))
        return self._base_rules[key]

    def _terms(self, previous, previous_edges: np.ndarray, x: np.ndarray, order: int, width: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The log terms of :meth:`level` (-inf where left out), the log densities times weights, and the
        arguments x - l(o), one row per x.

        Each row's rule is the base rule (:meth:`_base_rule`) with the panels holding an image cut there: the
        base panels without an image keep their nodes (computed once), those with one are left out (density
        -inf) and replaced by their parts, two per image (the part ending at it, from the panel's left edge or
        the previous image in the same panel, and the part from it to the panel's right edge when no other
        image follows in that panel, else a part of width 0), formed for each row."""
        base, base_density, base_loss = self._base_rule(order, width)
        panels = base.size - 1
        losses, outputs = self._image_table
        targets = x[:, None] - previous_edges[None, :]
        inside = (targets > losses[0]) & (targets < losses[-1])
        columns = np.any(inside, axis=0)
        # (an image outside the span, or at its ends, cuts nothing)
        images = np.sort(np.where(inside, np.interp(targets, losses, outputs), np.inf)[:, columns], axis=1)
        panel = np.searchsorted(base, images, side="right") - 1
        cuts = (panel >= 0) & (panel < panels) & (images > base[0])
        panel = np.clip(panel, 0, panels - 1)
        split = np.zeros((x.size, panels), dtype=bool)
        split[np.nonzero(cuts)[0], panel[cuts]] = True
        after = np.zeros(cuts.shape, dtype=bool)  # the image follows another in its panel
        after[:, 1:] = cuts[:, 1:] & cuts[:, :-1] & (panel[:, 1:] == panel[:, :-1])
        before = np.zeros(cuts.shape, dtype=bool)  # another image follows in its panel
        before[:, :-1] = after[:, 1:]
        previous_image = np.concatenate([images[:, :1], images[:, :-1]], axis=1)
        cut_at = np.where(cuts, images, base[0])
        starts = np.concatenate([np.where(after, previous_image, base[panel]), cut_at], axis=1)
        stops = np.concatenate([cut_at, np.where(before, images, base[panel + 1])], axis=1)
        starts = np.where(np.concatenate([cuts, cuts], axis=1), starts, base[0])
        stops = np.where(np.concatenate([cuts, cuts], axis=1), stops, base[0])
        nodes, weights = gauss_legendre(order)
        half = ((stops - starts) / 2)[:, :, None]
        o = ((starts + stops) / 2)[:, :, None] + half * nodes
        with np.errstate(divide="ignore"):
            log_w = np.log(half * weights)
        log_a, log_b = self.pair.log_ratios(o)
        parts = o.shape[1]
        by_panel = np.empty((x.size, panels + parts, order))
        by_panel[:, :panels] = base_density
        by_panel[:, :panels][split] = -np.inf
        by_panel[:, panels:] = log_w + self.pair.log_mu(o) + log_a
        density = by_panel.reshape(x.size, -1)
        by_panel = np.empty(by_panel.shape)
        np.subtract(x[:, None, None], base_loss, out=by_panel[:, :panels])
        np.subtract(x[:, None, None], log_a - log_b, out=by_panel[:, panels:])
        arguments = by_panel.reshape(x.size, -1)
        terms = np.full(density.shape, -np.inf)
        # first the nodes within DROP of each row's densest, then the others that can still matter
        dense = density >= np.max(density, axis=1, keepdims=True) - DROP
        terms[dense] = density[dense] + previous(arguments[dense])
        wanted = ~dense & (density >= np.max(terms, axis=1, keepdims=True) - DROP)
        terms[wanted] = density[wanted] + previous(arguments[wanted])
        return terms, density, arguments


def _use_reach(use: _Use) -> float:
    """The nearer of a use's loss ends, in absolute value (log(1/(1 - q)) for a subsampled Gaussian; inf when the
    loss is unbounded on both sides)."""
    return min(abs(use.lowest), abs(use.highest))


def _noise_ratio(pair: NoiseMixturePair) -> float:
    """The pair's noise scale over the spread of its component shifts (inf if they coincide)."""
    spread = float(pair.shifts.max() - pair.shifts.min())
    return pair.scale / spread if spread > 0 else math.inf


class _Stage:
    """log delta_j as a function of x: the fit on [low, fit.high), log(1 - e^x) up to ``exact_below``, -inf beyond
    the fit (never asked below ``low`` unless ``low`` = ``exact_below``)."""

    def __init__(self, fit: _Piecewise, low: float, exact_below: float):
        self.fit, self.low, self.exact_below = fit, low, exact_below
        #: The fit's piece edges, the end of its range (delta_j is taken as 0 beyond) and a bound on the parts taken
        #: as 0 within it.
        self.edges, self.high, self.dropped = fit.edges, fit.high, fit.dropped
        #: Relative error estimates of delta_j and of G_j per piece (:class:`DoublingRecursion` sets them).
        self.piece_errors = (np.zeros(len(fit.coefficients)), np.zeros(len(fit.coefficients)))

    def relative_errors(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The estimates of :attr:`piece_errors` at ``x`` (0 where delta_j is exact, 1 - e^x, or beyond the fit)."""
        x = np.asarray(x, dtype=float)
        index = np.clip(np.searchsorted(self.edges, x, side="right") - 1, 0, len(self.edges) - 2)
        fitted = (x > self.exact_below) & (x < self.high)
        delta_errors, g_errors = self.piece_errors
        return np.where(fitted, delta_errors[index], 0.0), np.where(fitted, g_errors[index], 0.0)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        out = np.full(x.shape, -np.inf)
        exact = x <= self.exact_below
        out[exact] = _log1mexp(np.minimum(x[exact], -np.finfo(float).tiny))
        inside = ~exact & (x < self.fit.high)
        out[inside] = self.fit(np.maximum(x[inside], self.low))
        return out

    def log_slope(self, x: np.ndarray) -> np.ndarray:
        """log -delta_j'(x): x itself up to ``exact_below`` (delta_j = 1 - e^x), log delta_j + log -(log
        delta_j)' from the fit (-inf where the fit does not fall), -inf beyond it.  A guide for the root
        search (its bounds are checked against delta_j's values), and the factor G_j(x) = -delta_j'(x) =
        e^x Q[S_j > x] of :func:`_sum_of_two` (where the fit's derivative error is counted)."""
        return self.log_parts(x)[1]

    def log_parts(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log delta_j(x), log -delta_j'(x)) (see :meth:`log_slope`)."""
        x = np.asarray(x, dtype=float)
        values, slopes = np.full(x.shape, -np.inf), np.full(x.shape, -np.inf)
        exact = x <= self.exact_below
        values[exact] = _log1mexp(np.minimum(x[exact], -np.finfo(float).tiny))
        slopes[exact] = x[exact]
        inside = ~exact & (x < self.fit.high)
        fitted, derivative = self.fit.value_and_derivative(np.maximum(x[inside], self.low))
        with np.errstate(divide="ignore", invalid="ignore"):
            steep = np.log(-derivative)
        values[inside] = np.where(np.isnan(fitted), -np.inf, fitted)
        slopes[inside] = np.nan_to_num(fitted + steep, nan=-np.inf)
        return values, slopes


class _Recursion:
    """What the recursions share: the answers kept, the stages fitted for the range of eps asked, the queries.

    A subclass sets ``loss_top`` (delta is 0 from there on) and defines ``_build(smallest, largest)`` (fit the
    stages for final eps in that range) and ``_final(asked)``.
    """

    loss_top: float
    #: The widest eps bracket (relative) the engine built on the recursion returns: its errors are estimates
    #: summed over the stages, where the closed forms' are rounding.
    epsilon_rtol = 1e-6

    def __init__(self) -> None:
        self._built_for: tuple[float, float] | None = None  # the final eps the stages serve
        #: eps -> (delta, error, slope) of the latest KEPT_ANSWERS eps asked since the stages were last fitted
        #: or extended
        self._answers: dict[float, tuple[float, float, float]] = {}

    def _build(self, smallest: float, largest: float) -> None:
        raise NotImplementedError

    def _final(self, asked: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(log delta, log -delta', log delta by the finer rule, the error passed on from the stages and the mass
        left out) at the eps ``asked``."""
        raise NotImplementedError

    def delta(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(delta(eps), an estimate of its error) at each eps.

        Parameters
        ----------
        epsilons : numpy.ndarray
            The eps asked.

        Returns
        -------
        values, errors : numpy.ndarray
            delta(eps) and an estimate of its error, of the shape of ``epsilons``.

        Raises
        ------
        AccuracyError
            A stage differs from its finer rule by more than RTOL (STAGE_RTOL when doubling).
        """
        values, errors, _ = self.delta_and_slope(epsilons)
        return values, errors

    def delta_and_slope(self, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(delta(eps), an estimate of its error, -delta'(eps)) at each eps; the slope guides root searches
        (their bounds are checked against the values and errors).

        Parameters
        ----------
        epsilons : numpy.ndarray
            The eps asked.

        Returns
        -------
        values, errors, slopes : numpy.ndarray
            Each of the shape of ``epsilons``.

        Raises
        ------
        AccuracyError
            A stage differs from its finer rule by more than RTOL (STAGE_RTOL when doubling).
        """
        epsilons = np.asarray(epsilons, dtype=float)
        flat = epsilons.ravel()
        values, errors, slopes = np.zeros(flat.shape), np.zeros(flat.shape), np.zeros(flat.shape)

        def shaped() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            return values.reshape(epsilons.shape), errors.reshape(epsilons.shape), slopes.reshape(epsilons.shape)

        below = flat < self.loss_top  # at or above it, delta is 0 exactly
        if not np.any(below):
            return shaped()
        known = np.array([float(epsilon) in self._answers for epsilon in flat]) & below
        for index in np.flatnonzero(known):
            values[index], errors[index], slopes[index] = self._answers[float(flat[index])]
        below &= ~known
        if not np.any(below):
            return shaped()
        asked = flat[below]
        smallest, largest = min(float(np.min(asked)), 0.0), float(np.max(asked))
        built = self._built_for
        if built is None or smallest < built[0] or largest > built[1]:
            # room for the root search's next steps: eps up to twice the largest asked (at least REACH_STEP more)
            low = smallest if built is None else min(smallest, built[0])
            high = max(largest, 0.0) if built is None else max(largest, built[1])
            self._build(low, min(2 * high + REACH_STEP, self.loss_top))
            self._answers.clear()
        log_values, log_slopes, log_checks, inherited = self._final(asked)
        values[below], checks, slopes[below] = np.exp(log_values), np.exp(log_checks), np.exp(log_slopes)
        errors[below] = np.abs(values[below] - checks) + inherited
        for index in np.flatnonzero(below):
            self._answers[float(flat[index])] = (float(values[index]), float(errors[index]), float(slopes[index]))
        while len(self._answers) > KEPT_ANSWERS:
            del self._answers[next(iter(self._answers))]
        return shaped()


class StepRecursion(_Recursion):
    """delta(eps) of one direction of a few uses of Gaussian noise pairs and Gaussians (see the module docstring).

    Parameters
    ----------
    pairs : sequence of afa.mechanisms.noise_pair.NoiseMixturePair
        One entry per use (repeat a pair for its count), each with Gaussian noise; at most MAX_USES.
    mu : float
        The composed Gaussian mechanisms' parameter (0 for none).

    Raises
    ------
    UnsupportedCompositionError
        No pair, more than MAX_USES, or a pair with Laplace noise.

    Examples
    --------
    >>> import math
    >>> import numpy as np
    >>> from afa.mechanisms.noise_pair import NoiseMixturePair
    >>> from afa.numerics.exact import gaussian_delta
    >>> q = 0.01  # Poisson-subsampled Gaussian, sigma = 1, remove direction
    >>> pair = NoiseMixturePair("gaussian", 1.0, (0.0, 1.0), (math.log1p(-q), math.log(q)), (0.0,), (0.0,))
    >>> values, errors = StepRecursion([pair] * 3).delta(np.array([0.1]))
    >>> bool(errors[0] < 1e-8 * values[0])
    True
    """

    def __init__(self, pairs, mu: float = 0.0):
        pairs = list(pairs)
        if not (1 if mu > 0 else 2) <= len(pairs) <= MAX_USES:
            raise UnsupportedCompositionError(f"the step recursion takes 2 to {MAX_USES} uses of noise pairs (1 with "
                                              f"Gaussians), got {len(pairs)}")
        if any(pair.noise != "gaussian" for pair in pairs):
            raise UnsupportedCompositionError("the step recursion needs Gaussian noise pairs")
        if not (math.isfinite(mu) and mu >= 0):
            raise ValueError(f"mu must be a finite number >= 0, got {mu}")
        super().__init__()
        self.mu = float(mu)
        distinct: dict[NoiseMixturePair, _Use] = {}
        for pair in pairs:
            if pair not in distinct:
                distinct[pair] = _Use(pair)
        self.uses = [distinct[pair] for pair in pairs]
        #: The number of uses of noise pairs.
        self.count = len(self.uses)
        #: How far the composed loss can pile up: the sum over the uses of the nearer bounded end of each one's
        #: loss (count * log(1/(1 - q)) for a subsampled Gaussian; inf with a Gaussian or an unbounded loss).
        self.reach = math.inf if self.mu > 0 else math.fsum(_use_reach(use) for use in self.uses)
        #: The largest noise scale over the spread of its pair's shifts among the uses (sigma / sensitivity for a
        #: subsampled Gaussian): the wider the noise, the less a pile-up of the same reach shows.
        self.noise_ratio = max(_noise_ratio(use.pair) for use in self.uses)
        self._stages: list[_Stage] = []
        self._raws: list = []  # the functions the stages are fitted to
        self._finer: list = []  # the same by the finer rule
        self._rest: list[_Use] = []
        self._checks: list[tuple[np.ndarray, np.ndarray]] = []
        self._dropped = 0.0
        #: sup L: delta is 0 from there on
        self.loss_top = math.inf if self.mu > 0 else math.fsum(use.highest for use in self.uses)

    def _start(self):
        """(log delta of stage 0, lowest loss of stage 0, the uses after it): the Gaussians' closed form, or the
        first pair's hockey stick from its loss tails."""
        if self.mu > 0:
            def gaussians(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                values = np.asarray(gaussian_log_delta(x, self.mu), dtype=float)
                return values, np.zeros(values.shape)
            return gaussians, -math.inf, self.uses
        return self.uses[0].log_hockey_stick, self.uses[0].lowest, self.uses[1:]

    def _build(self, smallest: float, largest: float) -> None:
        """Fit stages 0 .. m-1 (all but the last) for final eps in [``smallest``, ``largest``]; stages fitted
        before for the same ``smallest`` are extended."""
        fresh = self._built_for is None or smallest < self._built_for[0]
        if fresh:
            raw, exact_below, self._rest = self._start()
            # each stage is fitted to ``raws[j]`` and checked against ``finer[j]`` (the same by a finer rule)
            self._stages, self._checks, self._raws, self._finer, self._dropped = [], [], [raw], [raw], 0.0
        rest = self._rest
        # raw is 0 beyond ``top``: the loss's upper end, or what the previous stage and the rule reach
        top = math.inf if self.mu > 0 else self.uses[0].highest
        exact_below = -math.inf if self.mu > 0 else self.uses[0].lowest
        error = 0.0
        for index, use in enumerate(rest):
            raw = self._raws[index]
            # stage ``index`` is asked at eps minus the losses of uses index.. of ``rest`` (within their rules)
            low = max(smallest - math.fsum(later.rule_losses[1] for later in rest[index:]), exact_below)
            reach = largest - math.fsum(later.rule_losses[0] for later in rest[index:])
            high = max(min(reach, top), low + 1e-3 * (1.0 + abs(low)))
            # (the levels are alike: each fit starts from the previous stage's pieces, scaled to its range)
            seed = _coarsened(self._stages[index - 1].fit.breaks) if index > 0 else None
            if fresh:
                fit = _Piecewise(raw, low, high, seed=seed, lookahead=1 if index else FIRST_LOOKAHEAD)
                self._stages.append(_Stage(fit, low, exact_below))
                self._checks.append(self._check(fit, self._finer[index], fit.check_points()))
                self._raws.append(self._level_of(use, self._stages[-1], ORDER, WIDTH))
                self._finer.append(self._level_of(use, self._stages[-1], CHECK_ORDER, CHECK_WIDTH))
                self._dropped += OUTSIDE_SPAN  # the mass the rule leaves out
            else:
                fit = self._stages[index].fit
                high = max(high, fit.high)
                if high > fit.high:
                    truth, difference = self._check(fit, self._finer[index], fit.extend(raw, high, seed))
                    old_truth, old_difference = self._checks[index]
                    self._checks[index] = (np.concatenate([old_truth, truth]),
                                           np.concatenate([old_difference, difference]))
            truth, difference = self._checks[index]
            error = max(error, float(np.max(difference[truth > -RELATIVE_SPAN], initial=0.0)))
            exact_below += use.lowest
            top = min(top + use.highest, high + use.rule_losses[1])
        if error > RTOL:  # (the errors stated are formed per query, :meth:`_stage_errors`; this is a fit gone wrong)
            self._built_for = None
            raise AccuracyError(f"a level of the step recursion agrees with a finer rule only to {error:.2g} "
                                f"(relative, where delta_j > e^-{RELATIVE_SPAN:g}), more than {RTOL:g}")
        self._built_for = (smallest, largest)

    @staticmethod
    def _level_of(use: _Use, stage: _Stage, order: int, width: float):
        def level(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            values = use.level(stage, stage.fit.edges, x, order, width)
            return values, np.zeros(values.shape)
        return level

    @staticmethod
    def _check(fit: _Piecewise, raw, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log delta, |log difference|) of ``raw`` (the stage by the finer rule) and ``fit`` at ``points``, where raw
        is above FLOOR and the fit is not taken as 0 (those pieces count in the fit's ``dropped``)."""
        fitted, truth = fit(points), raw(points)[0]
        seen = (truth > FLOOR) & np.isfinite(fitted)
        return truth[seen], np.abs(fitted[seen] - truth[seen])

    def _stage_errors(self, log_values: np.ndarray) -> np.ndarray:
        """Bounds on the error the stages' fits pass on to each final delta = e^log_values: a stage's difference
        at a check point counts relatively (times delta) where its delta_j is above delta e^-RELATIVE_SPAN, else
        absolutely (the later uses average delta_j with weights summing to at most 1)."""
        errors = np.zeros(log_values.shape)
        floor = log_values[:, None] - RELATIVE_SPAN
        for truth, difference in self._checks:
            large = truth[None, :] >= floor
            relative = np.max(np.where(large, difference[None, :], 0.0), axis=1, initial=0.0)
            absolute = np.max(np.where(large, 0.0, (np.exp(truth) * np.expm1(difference))[None, :]), axis=1,
                              initial=0.0)
            errors += relative * np.exp(log_values) + absolute
        return errors

    def _final(self, asked: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The last level at the eps ``asked`` by both rules, its slope, and the stages' errors passed on
        (:meth:`_stage_errors`) with the mass left out."""
        last, stage = self._rest[-1], self._stages[-1]
        log_values, log_slopes = last.level_and_slope(stage, asked, ORDER, WIDTH)
        dropped = self._dropped + math.fsum(stage.fit.dropped for stage in self._stages)
        return (log_values, log_slopes, last.level(stage, stage.fit.edges, asked, CHECK_ORDER, CHECK_WIDTH),
                self._stage_errors(log_values) + dropped)


def _sum_of_two(first: _Stage, second: _Stage, x: np.ndarray, order: int, panels: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """(log delta, relative error estimate) of the sum of two stages' independent losses S_a + S_b at each x
    (x >= first.low + second.low).

    delta_{a+b}(x) = int G_a(x - y) P[S_b > y] dy with G_a = -delta_a' and P[S_b > y] = delta_b(y) - delta_b'(y)
    (both positive).  Below ``second.low``, P[S_b > y] = 1, and above x - ``first.low``, G_a(x - y) = e^{x - y}:
    their integrals are delta_a(x - second.low) and e^{first.low} delta_b(x - first.low).  The rest, on
    [second.low, x - first.low] within both fits, by the composite rule of ``order`` points on ``panels`` equal
    panels, split further at both fits' piece edges.  The error passed on from the stages is the mean of theirs
    (G's of the first, the survival function's -- at most G's -- of the second) weighted by the terms.
    """
    rows = max(1, SUM_NODES // ((panels + second.edges.size + first.edges.size) * order))
    if x.size > rows:  # a bounded number of nodes at once
        parts = [_sum_of_two(first, second, x[begin:begin + rows], order, panels) for begin in range(0, x.size, rows)]
        return np.concatenate([part[0] for part in parts]), np.concatenate([part[1] for part in parts])
    head, tail = first(x - second.low), first.low + second(x - first.low)
    start = np.maximum(second.low, x - first.high)[:, None]
    stop = np.maximum(np.minimum(x - first.low, second.high)[:, None], start)
    edges = np.concatenate([start + (stop - start) * np.linspace(0.0, 1.0, panels + 1),
                            np.clip(second.edges[None, :], start, stop),
                            np.clip(x[:, None] - first.edges[None, :], start, stop)], axis=1)
    y, log_w = composite_rule(np.sort(edges, axis=1), *gauss_legendre(order))
    kept = np.isfinite(log_w)
    z = (x[:, None] - y)[kept]
    log_delta, log_g = second.log_parts(y[kept])
    terms = np.full(y.shape, -np.inf)
    terms[kept] = log_w[kept] + first.log_slope(z) + np.logaddexp(log_delta, log_g)
    inherited = np.zeros(y.shape)
    inherited[kept] = first.relative_errors(z)[1] + second.relative_errors(y[kept])[1]
    middle = _row_log_sums(terms)
    total = np.logaddexp(np.logaddexp(head, tail), middle)
    with np.errstate(invalid="ignore", over="ignore"):
        weights = np.exp(terms - total[:, None])
        error = (np.sum(np.nan_to_num(weights * inherited), axis=1)
                 + np.nan_to_num(np.exp(head - total)) * first.relative_errors(x - second.low)[0]
                 + np.nan_to_num(np.exp(tail - total)) * second.relative_errors(x - first.low)[0])
    return total, error


class DoublingRecursion(_Recursion):
    """delta(eps) of one direction of many uses of one Gaussian noise pair, by doubling the number of uses.

    For independent losses S_a and S_b, with G_a(x) = -delta_a'(x) = e^x Q[S_a > x] and the survival function
    P[S_b > y] = delta_b(y) - delta_b'(y),

        delta_{a+b}(x) = int G_a(x - y) P[S_b > y] dy

    (the payoff's Laplace transform 1 / (s (s + 1)) is the product of those of G and of the survival function,
    1 / (s + 1) and 1 / s; :func:`_sum_of_two`).  Both factors are positive, so, as in :class:`StepRecursion`,
    nothing cancels and the result is accurate relative to delta however small.  Stages of 1, 2, 4, ... uses,
    then the partial sums of the count's binary digits, are fitted as in :class:`StepRecursion` (log delta
    piecewise Chebyshev; G from the fit's derivative), each from two earlier stages -- or, to add one use, by
    :class:`StepRecursion`'s level over that use's output; the last sum is formed at each eps asked.  A count
    of k costs about 2 log2(k) stages instead of k levels.

    Error.  Every stage carries relative error estimates per piece, of delta and of G.  At a stage's check points
    (two per piece) they are the difference between its fit and the stage computed by a finer rule with the two
    stages' roles swapped (G from the other fit's derivative), plus the earlier stages' estimates passed on --
    the mean of theirs weighted by the terms of the sum (or level), so that an error where a factor is
    negligible costs nothing -- and, for G, the error of the fit's derivative estimated from its last
    coefficients.  The final delta is formed by both rules, their difference added to the estimates it inherits.
    Estimates, as for :class:`StepRecursion`.

    Parameters
    ----------
    pair : afa.mechanisms.noise_pair.NoiseMixturePair
        A pair with Gaussian noise whose loss is monotone in the output (subsampled Gaussians).
    count : int
        The number of uses, 4 to MAX_DOUBLING_USES.
    max_reach : float
        The largest count times the loss's bounded end taken (default MAX_REACH; the time grows with it: FAR_REACH
        is 'auto''s last resort), positive.

    Raises
    ------
    UnsupportedCompositionError
        A count out of range, a pair with Laplace noise, a loss unbounded on both sides, or a count times the
        loss's bounded end above ``max_reach``.
    ValueError
        ``max_reach`` not positive.

    Examples
    --------
    >>> import math
    >>> import numpy as np
    >>> from afa.mechanisms.noise_pair import NoiseMixturePair
    >>> q = 0.001  # Poisson-subsampled Gaussian, sigma = 2, remove direction
    >>> pair = NoiseMixturePair("gaussian", 2.0, (0.0, 1.0), (math.log1p(-q), math.log(q)), (0.0,), (0.0,))
    >>> values, errors = DoublingRecursion(pair, 1000).delta(np.array([0.1]))
    >>> bool(errors[0] < 1e-6 * values[0])
    True
    """

    def __init__(self, pair: NoiseMixturePair, count: int, max_reach: float = MAX_REACH):
        if not max_reach > 0:
            raise ValueError(f"max_reach must be positive, got {max_reach!r}")
        if count != int(count) or not 4 <= count <= MAX_DOUBLING_USES:
            raise UnsupportedCompositionError(f"the doubling recursion takes 4 to {MAX_DOUBLING_USES} uses, got "
                                              f"{count}")
        if pair.noise != "gaussian":
            raise UnsupportedCompositionError("the doubling recursion needs a Gaussian noise pair")
        use = _Use(pair)
        if math.isinf(use.lowest) and math.isinf(use.highest):
            # the stages would span count times the rule's losses on both sides (the contour serves these)
            raise UnsupportedCompositionError("the doubling recursion needs a loss bounded on one side (a "
                                              "subsampled Gaussian)")
        reach = count * _use_reach(use)
        if reach > max_reach:
            raise UnsupportedCompositionError(f"the doubling recursion takes counts whose bounded loss ends sum to at "
                                              f"most {max_reach:g} (count * |log(1 - q)| for a subsampled "
                                              f"Gaussian), got {reach:.3g}")
        super().__init__()
        self.use = use
        self.count = int(count)
        #: count times the nearer bounded end of the use's loss (as :attr:`StepRecursion.reach`).
        self.reach = reach
        #: As :attr:`StepRecursion.noise_ratio`.
        self.noise_ratio = _noise_ratio(pair)
        self.loss_top = math.inf if math.isinf(self.use.highest) else self.count * self.use.highest
        # each stage's size -> the sizes it sums (the first's G, the second's survival function; a second of 1:
        # the level over one use's output); the last sum is formed at each eps asked
        digits = [1 << bit for bit in range(self.count.bit_length()) if self.count >> bit & 1][::-1]
        self._parts: dict[int, tuple[int, int]] = {}
        size = 1
        while size < digits[0]:
            self._parts[2 * size] = (size, 1 if size == 1 else size)
            size *= 2
        total = digits[0]
        for digit in digits[1:]:
            self._parts[total + digit] = (total, digit)
            total += digit
        self._stages: dict[int, _Stage] = {}
        self._dropped = 0.0

    def _limits(self, size: int, smallest: float, largest: float) -> tuple[float, float]:
        """The range stage ``size`` is asked on for final eps in [smallest, largest]: the final eps minus what the
        other uses' rules reach, within the stage's own loss range."""
        use, rest = self.use, self.count - size
        low = max(size * use.lowest, smallest - rest * use.rule_losses[1])
        high = min(size * use.highest, largest - rest * use.rule_losses[0])
        return low, max(high, low + 1e-3 * (1.0 + abs(low)))

    def _stage_function(self, size: int, check: bool):
        """Stage ``size`` as a function of x returning (log delta, relative error passed on); ``check``: the finer
        rule, with a sum's roles swapped."""
        a, b = self._parts[size]
        if b == 1:
            order, width = (CHECK_ORDER, CHECK_WIDTH) if check else (ORDER, WIDTH)
            return lambda x: self.use.level_slope_and_error(self._stages[a], x, order, width)[::2]
        first, second = (self._stages[b], self._stages[a]) if check else (self._stages[a], self._stages[b])
        order, panels = (CHECK_ORDER, CHECK_PANELS) if check else (SUM_ORDER, PANELS)
        return lambda x: _sum_of_two(first, second, x, order, panels)

    def _build(self, smallest: float, largest: float) -> None:
        self._stages, self._dropped, span = {}, 0.0, 0.0
        first = self.use.log_hockey_stick
        worst = 0.0
        for size in [1, *sorted(self._parts)[:-1]]:
            low, high = self._limits(size, smallest, largest)
            raw, finer = (first, first) if size == 1 else (self._stage_function(size, False),
                                                           self._stage_function(size, True))

            def fitted(x: np.ndarray, raw=raw) -> tuple[np.ndarray, np.ndarray]:
                return raw(x)[0], np.zeros(x.shape)
            # (the first stage's error passes on to the count's every use: it is fitted more closely)
            fit = _Piecewise(fitted, low, high) if size > 1 else _Piecewise(first, low, high, FIRST_TOL,
                                                                             lookahead=FIRST_LOOKAHEAD)
            stage = _Stage(fit, low, size * self.use.lowest)
            points = fit.check_points()
            pieces = np.concatenate([np.arange(len(fit.coefficients))] * 2)
            values, derivatives = fit.value_and_derivative(points)
            checked, passed_on = finer(points)
            with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                own = np.expm1(np.abs(values - checked))
                error = own + passed_on
                g_error = error + fit.derivative_error(points) / np.abs(derivatives)
            # pieces taken as 0 (NaN) or not resolved: their values count in ``dropped`` or are refused below
            error, g_error = np.nan_to_num(error, nan=0.0), np.nan_to_num(g_error, nan=0.0, posinf=1.0)
            delta_errors, g_errors = np.zeros(len(fit.coefficients)), np.zeros(len(fit.coefficients))
            np.maximum.at(delta_errors, pieces, error)
            np.maximum.at(g_errors, pieces, g_error)
            stage.piece_errors = (delta_errors, np.minimum(g_errors, 1.0))
            self._stages[size] = stage
            # mass taken as 0: a fit's pieces below FLOOR, a level's rule's outside
            self._dropped += fit.dropped + (OUTSIDE_SPAN if self._parts.get(size, (0, 0))[1] == 1 else 0.0)
            span = max(span, high - low)
            seen = np.isfinite(values) & (checked > -RELATIVE_SPAN)
            worst = max(worst, float(np.max(own[seen], initial=0.0)))
        # (an absolute error of a stage's delta or G passes on weighted by integrals over at most the widest range)
        self._dropped *= 1.0 + span
        if not worst <= STAGE_RTOL:
            self._built_for = None
            raise AccuracyError(f"a stage of the doubling recursion agrees with a finer rule only to {worst:.2g} "
                                f"(relative, where delta > e^-{RELATIVE_SPAN:g}), more than {STAGE_RTOL:g}")
        self._built_for = (smallest, largest)

    def _final(self, asked: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The last sum at the eps ``asked`` by both rules; the slope: a level's from the stage's derivative, a
        sum's from a central difference of log delta (a guide for the root search); the estimate the sum inherits
        from the stages (relative, times delta) and the mass dropped."""
        a, b = self._parts[self.count]
        if b == 1:
            log_values, log_slopes, passed_on = self.use.level_slope_and_error(self._stages[a], asked, ORDER, WIDTH)
        else:
            main = self._stage_function(self.count, False)
            log_values, passed_on = main(asked)
            step = 1e-5 * (1.0 + np.abs(asked))
            low = self._stages[a].low + self._stages[b].low
            ahead, behind = main(asked + step)[0], main(np.maximum(asked - step, low))[0]
            with np.errstate(invalid="ignore", divide="ignore"):
                log_slopes = np.nan_to_num(log_values + np.log(np.maximum((behind - ahead) / (2 * step), 0.0)),
                                           nan=-np.inf)
        return (log_values, log_slopes, self._stage_function(self.count, True)(asked)[0],
                passed_on * np.exp(log_values) + self._dropped)
