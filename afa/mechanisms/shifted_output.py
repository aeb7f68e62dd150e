"""The MGF of a Gaussian noise-mixture pair at large |Im s|, integrated along a shifted output line.

:class:`afa.mechanisms.noise_pair.PairMGF` integrates M(s) = int mu (A/mu)^{1+s} (B/mu)^{-s} do over the real
output o.  Far up a contour, s = c + iu with |u| large, the phase u L(o) turns about |u| times the loss's total
variation across the output range, and the real-line rule grows with it: a Poisson-subsampled Gaussian with
sigma = 1 and q = 0.001 needs 425 280 output nodes at c = 12.94, u = 16 384 (the double quadrature of Zhu,
Dong & Wang 2022, App. E, is on the real line, for real s).

With Gaussian noise the integrand continues analytically off the real line.  The noise density mu(o) and
every component ratio e^{kappa(o, c_i)}, kappa(o, c) = c (2 o - c) / (2 scale^2), are entire; the logarithms
of the mixtures A/mu = sum_i a_i e^{kappa(o, c_i)} (and B/mu) are analytic wherever the mixtures' real parts
are positive, and on the strip 0 <= Im(o) sign(y) <= |y| with |c_i y| <= (pi / 2) scale^2 every component
has a phase c_i Im(o) / scale^2 of at most pi / 2, so they are.  The integrand decays like a Gaussian as
|Re o| grows inside the strip, so by Cauchy's theorem M(s) is also the integral along o + iy.  There the
factor e^{iuL} has modulus e^{-u Im L(o + iy)}, and Im L is about y L'(o): with the sign of y chosen so that
u Im L >= 0, the integrand dies wherever the loss varies, and what is left -- the loss's pile-up at its flat
end -- turns a bounded number of times whatever u is.  The rule keeps a few hundred nodes at every |u|.

The price is the noise density's growth off the axis, |mu(o + iy)| = mu(o) e^{y^2 / (2 scale^2)}: |y| is also
capped at scale sqrt(2 INFLATION), and a rule is used only where its sum of |terms| (the scale of its rounding)
is at most MAGNITUDE_FACTOR times the real-line rule's, the integral of |integrand| over the real line, M(c).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .. import budget
from .._accurate import complex_log1p
from .output_rules import composite_rule, panel_edges

if TYPE_CHECKING:
    from .noise_pair import NoiseMixturePair

#: log of the largest factor by which the shifted line may raise the noise density, e^{y^2 / (2 scale^2)}.
INFLATION = 0.5
#: A shifted rule serves where its sum of |terms| is at most this factor times the real line's (M(c)).
MAGNITUDE_FACTOR = 2.0
#: Terms below e^-DROP of the largest at every frequency of a rule's octave are left out of the window.
DROP = 45.0
#: Largest change of the complex log-integrand across one Gauss-Legendre panel (as PairMGF.PHASE).
PHASE = 12.0
#: Widest panel, in noise scales.
PANEL = 2.0
#: Grid points per noise scale on which the window and the panels are laid out, and how often the grid may
#: be refined where the log-integrand changes by more than PHASE / 2 between neighbours.
GRID_PER_SCALE, REFINEMENTS = 8, 4
#: Complex exponentials formed at once by :func:`log_sums` (the time budget is checked in between).
CHUNK = 1 << 20


@dataclass(frozen=True)
class ShiftedRule:
    """A Gauss-Legendre rule along o + i ``height`` for frequencies |u| in an octave (F / 2, F].

    ``log_terms`` are log(w_j mu (A/mu)^{1+c} (B/mu)^{-c}) at the rule's nodes (complex), ``loss`` the
    continued loss L = log(A/mu) - log(B/mu) there (complex), so that M(c + iu) = sum_j e^{log_terms_j + iu
    loss_j}; ``log_magnitude`` bounds log sum_j |e^{log_terms_j + iu loss_j}| over the octave (the scale of the
    sums' rounding).
    """

    height: float
    log_terms: np.ndarray
    loss: np.ndarray
    log_magnitude: float

    @property
    def size(self) -> int:
        """Output nodes summed per frequency."""
        return int(self.loss.size)


def height(pair: NoiseMixturePair) -> float | None:
    """The shift y of the output line for frequencies u > 0: the largest |y| the strip and INFLATION allow,
    with the sign that makes u Im L >= 0 (that of the loss's slope); None unless the noise is Gaussian and the
    pair's loss rises or falls across its output range.  (M(c - iu) is the conjugate of M(c + iu).)"""
    if pair.noise != "gaussian":
        return None
    largest = float(np.max(np.abs(pair.shifts)))
    if not largest > 0:
        return None
    span = 60.0 * pair.scale + 2 * largest
    rise = float(pair.privacy_loss(np.array([span]))[0] - pair.privacy_loss(np.array([-span]))[0])
    if not (math.isfinite(rise) and rise != 0):
        return None
    size = min(0.5 * math.pi * pair.scale ** 2 / largest * (1 - 1e-9), pair.scale * math.sqrt(2 * INFLATION))
    return math.copysign(size, rise)


def continued_log_integrand(pair: NoiseMixturePair, z: np.ndarray, c: float) -> tuple[np.ndarray, np.ndarray]:
    """(log mu + (1 + c) log(A/mu) - c log(B/mu), L) at complex outputs ``z`` inside the strip of
    :func:`height` (principal logarithms, analytic there)."""
    scale2 = pair.scale ** 2
    log_mu = -z * z / (2 * scale2) - math.log(pair.scale * math.sqrt(2 * math.pi))
    sides = []
    for shifts, log_weights in ((pair.a_shifts, pair.a_log_weights), (pair.b_shifts, pair.b_log_weights)):
        terms = [w + shift * (2 * z - shift) / (2 * scale2) for shift, w in zip(shifts, log_weights) if w > -math.inf]
        if len(terms) == 1:
            sides.append(terms[0])
            continue
        # Inside the strip each component's phase is at most pi / 2 in modulus, and so is the sum's: top plus the
        # principal log(1 + z), z = sum / e^top - 1, is the sum's principal logarithm.
        if len(terms) == 2:  # (subsampling's mixtures) the same sum without stacking
            first = terms[0].real >= terms[1].real
            top = np.where(first, terms[0], terms[1])
            sides.append(top + complex_log1p(np.exp(np.where(first, terms[1], terms[0]) - top)))
            continue
        stacked = np.array(terms)
        first = np.argmax(stacked.real, axis=0)
        top = np.take_along_axis(stacked, first[None], axis=0)[0]
        rest = np.exp(stacked - top)
        np.put_along_axis(rest, first[None], 0.0, axis=0)
        sides.append(top + complex_log1p(np.sum(rest, axis=0)))
    loss = sides[0] - sides[1]
    return log_mu + (1 + c) * sides[0] - c * sides[1], loss


@dataclass(frozen=True)
class CoarseLine:
    """The log-integrand and the loss along o + i ``height`` at real part c, on the coarse grid from which every
    octave's :func:`rule` picks its window (they depend on c alone, not on the octave)."""

    height: float
    grid: np.ndarray
    log_f: np.ndarray
    loss: np.ndarray


def coarse_line(pair: NoiseMixturePair, c: float) -> CoarseLine | None:
    """The :class:`CoarseLine` of real part ``c``: GRID_PER_SCALE points per noise scale out to (2 + 2 |c|) times
    the largest shift plus 60 scales either way; None without a :func:`height`."""
    y = height(pair)
    if y is None:
        return None
    reach = (2 + 2 * abs(c)) * float(np.max(np.abs(pair.shifts))) + 60 * pair.scale
    grid = np.linspace(-reach, reach, int(2 * GRID_PER_SCALE * reach / pair.scale) + 2)
    log_f, loss = continued_log_integrand(pair, grid + 1j * y, c)
    return CoarseLine(y, grid, log_f, loss)


def rule(pair: NoiseMixturePair, c: float, frequency: float, nodes: np.ndarray,
         weights: np.ndarray, coarse: CoarseLine | None = None) -> ShiftedRule | None:
    """The :class:`ShiftedRule` at real part ``c`` for u in (``frequency`` / 2, ``frequency``], with
    Gauss-Legendre ``nodes`` and ``weights`` on each panel; None where the shifted line does not serve (no
    :func:`height`, an integrand that does not decay within the grid, or one that changes too fast between
    the grid's points even after REFINEMENTS halvings of its spacing).  ``coarse``, when given, is
    :func:`coarse_line` of the same pair and ``c`` (formed once for all octaves).

    The window holds every point whose term can come within e^-DROP of the largest at some u of the octave;
    panels are at most PANEL noise scales wide and the log-integrand changes by at most PHASE across each."""
    if not frequency > 0:
        raise ValueError(f"frequency must be positive (the MGF at c - iu is the conjugate), got {frequency!r}")
    if coarse is None:
        coarse = coarse_line(pair, c)
        if coarse is None:
            return None
    y, grid, log_f, loss = coarse.height, coarse.grid, coarse.log_f, coarse.loss
    top_u = float(frequency)
    low_u = 0.5 * top_u
    # A term's log-magnitude is linear in u, so over the octave it is at most its larger end; the largest term
    # at any u of the octave is at least every term's smaller end.  Kept: every point that can come within
    # e^-DROP of the largest term at some u.
    ends = np.stack([(log_f + 1j * low_u * loss).real, (log_f + 1j * top_u * loss).real])
    alive = np.max(ends, axis=0) > np.max(np.min(ends, axis=0)) - DROP
    kept = np.flatnonzero(alive)
    if kept[0] == 0 or kept[-1] == grid.size - 1 or not np.all(np.isfinite(log_f[alive])):
        return None
    low, high = float(grid[kept[0] - 1]), float(grid[kept[-1] + 1])
    # Between neighbours the log-integrand changes by at most |d log f| + |u| |d L| at every u of the octave.
    points = int(GRID_PER_SCALE * (high - low) / pair.scale) + 2
    for _ in range(REFINEMENTS + 1):
        budget.reserve(80.0 * points, "the grid of a shifted output line")
        fine = np.linspace(low, high, points)
        log_f, loss = continued_log_integrand(pair, fine + 1j * y, c)
        steps = np.abs(np.diff(log_f)) + top_u * np.abs(np.diff(loss))
        if np.max(steps) <= PHASE / 2:
            break
        points = 2 * points
    else:
        return None
    variation = np.concatenate(([0.0], np.cumsum(steps)))
    edges = panel_edges(low, high, PANEL * pair.scale, None, fine, variation, int(math.ceil(variation[-1] / PHASE)))
    o, log_weights = composite_rule(edges, nodes, weights)
    log_f, loss = continued_log_integrand(pair, o + 1j * y, c)
    log_terms = log_f + log_weights
    # Each |term| is monotone in u: the octave's largest sum of |terms| is at most the sum of each term's
    # larger end.
    exponents = np.maximum((log_terms + 1j * low_u * loss).real, (log_terms + 1j * top_u * loss).real)
    peak = float(np.max(exponents))
    return ShiftedRule(y, log_terms, loss, peak + math.log(float(np.sum(np.exp(exponents - peak)))))


def log_sums(shifted: ShiftedRule, frequencies: np.ndarray,
             lattice: tuple[float, float, np.ndarray] | None = None) -> np.ndarray:
    """log M(c + iu) = log sum_j e^{log_terms_j + iu loss_j} at each u > 0 of ``frequencies`` (one octave).

    Frequencies on a ``lattice`` (u_0, d, m) with u = u_0 + m d (a contour's chunk) are summed by a factored
    product: with m = a r + b, e^{iu L} = e^{i (u_0 + a r d) L} e^{i b d L}, so about 2 sqrt(span) rows of
    exponentials and one matrix product replace one row per frequency.  Each row a is formed relative to its
    largest term; along the row the terms only shrink (u Im L >= 0), so a sum's rounding is a few ulps of its
    row's sum of |terms|, at most :attr:`ShiftedRule.log_magnitude`.  Other frequencies are summed directly,
    each relative to its largest term.
    """
    frequencies = np.asarray(frequencies, dtype=float)
    with np.errstate(divide="ignore"):  # a sum that underflows entirely: log 0 = -inf
        if lattice is None:
            return _direct(shifted, frequencies)
        first, step, multiples = lattice
        span = int(multiples.max()) + 1
        width = math.isqrt(span)
        rows = -(-span // width)
        budget.check("evaluating a subsampled mechanism's MGF on a shifted output line")
        bases = first + step * width * np.arange(rows)
        left = shifted.log_terms[None, :] + 1j * bases[:, None] * shifted.loss[None, :]
        tops = np.max(left.real, axis=1)
        left = np.exp(left - tops[:, None])
        right = np.exp(1j * (step * np.arange(width))[:, None] * shifted.loss[None, :])
        products = (left @ right.T).ravel()[multiples]
        return np.repeat(tops, width)[multiples] + np.log(products)


def _direct(shifted: ShiftedRule, frequencies: np.ndarray) -> np.ndarray:
    """:func:`log_sums` one frequency at a time (a bounded number of exponentials at once)."""
    out = np.empty(frequencies.size, dtype=complex)
    rows = max(1, CHUNK // max(shifted.size, 1))
    for start in range(0, frequencies.size, rows):
        budget.check("evaluating a subsampled mechanism's MGF on a shifted output line")
        exponents = shifted.log_terms[None, :] + 1j * frequencies[start:start + rows, None] * shifted.loss[None, :]
        top = np.max(exponents.real, axis=1)
        out[start:start + rows] = top + np.log(np.sum(np.exp(exponents - top[:, None]), axis=1))
    return out
