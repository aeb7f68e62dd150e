"""Renyi divergence of a mechanism's dominating pair, by analytic continuation of its log-CF.

For one direction with privacy loss L = log(p/q)(o), o ~ P, the moment-generating
function M(s) = E_P[e^{sL}] is the characteristic function continued to imaginary
argument, M(s) = phi(-is) (papers/002_658ea0213f8272c6.txt Sec. 3, App. B), and

    D_alpha(P||Q) = log E_Q[(p/q)^alpha] / (alpha - 1) = log M(alpha - 1) / (alpha - 1).

The other direction (L' under Q) gives D_alpha(Q||P); the mechanism's value is the
larger of the two.  It is +infinity where the MGF does not exist at s = alpha - 1
(outside its strip, e.g. :class:`afa.DataDependentGaussian`, papers/002 App. A
Example 15), and for alpha > 1 whenever the loss has mass at +infinity
(:class:`afa.ApproxDP`, Example 14).  Full RDP accounting (composition, conversion
to (epsilon, delta)) is not here yet.
"""

from __future__ import annotations

import functools
import math

import mpmath
import sympy
from scipy.special import logsumexp

from . import _validation as check
from .mechanisms import NEIGHBORING_RELATIONS, Mechanism
from .privacy_loss import NUMERIC, PrivacyLoss, t

__all__ = ["renyi_divergence"]

#: log M(s) at a real s counts as real (the MGF exists there) when its imaginary part is below this.
#: Absolute, not relative: past a strip's edge the principal branch leaves an imaginary part of order
#: pi (e.g. -log1p(x)/2 with x < -1 gives -+ i pi/2) next to a real part that may be huge; inside it,
#: the closed forms produce imaginary parts of rounding size only.
_REAL_TOLERANCE = 1e-8
#: Offset and working precision used to step over a removable singularity of a closed form (0/0).
_OFFSET, _WORKING_DIGITS = mpmath.mpf("1e-20"), 60


def renyi_divergence(mechanism: Mechanism, alpha: float, neighboring: str = "add_remove") -> float:
    """D_alpha of the mechanism's dominating pair: the larger of D_alpha(P||Q) and D_alpha(Q||P).

    ``alpha`` may be any real number > 0 other than 1 (orders in (0, 1) included).
    Returns ``math.inf`` when a direction has mass at +infinity and alpha > 1, or when
    its moment-generating function does not exist at s = alpha - 1.
    """
    if not isinstance(mechanism, Mechanism):
        raise TypeError(f"mechanism must be an afa mechanism, got {type(mechanism).__name__}")
    alpha = check.real_number("alpha", alpha)
    if not alpha > 0 or alpha == 1:
        raise ValueError(f"alpha must be in (0, 1) or (1, inf) (> 0 and != 1), got {alpha}")
    check.choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
    first, second = mechanism.privacy_losses(neighboring)
    values = []
    for loss in (first,) if first is second else (first, second):
        if alpha > 1 and loss.inf_mass > 0:
            return math.inf
        value = _divergence(loss, alpha)
        if value is None:
            return math.inf
        values.append(value)
    return float(max(values))


def _divergence(loss: PrivacyLoss, alpha: float) -> float | None:
    """log M(alpha - 1) / (alpha - 1) of one direction, or None where the MGF does not exist there.

    log M = -inf (no finite mass where it counts) gives +inf, for alpha < 1 as well.
    """
    if loss.batch[0] == NUMERIC:
        raise NotImplementedError("renyi_divergence needs a closed-form or finite privacy loss; this mechanism's "
                                  "log-CF is computed numerically on the real line only (e.g. MixtureOfGaussians)")
    if not loss.continuous:
        # Finite loss: log sum_j w_j e^{s l_j} over the finite atoms (their masses sum to 1 - inf_mass).
        atoms = loss.atoms
        if atoms.size == 0:
            return math.inf
        return float(logsumexp(atoms.log_masses + (alpha - 1.0) * atoms.losses)) / (alpha - 1.0)
    with mpmath.workdps(_WORKING_DIGITS):
        s = mpmath.mpf(alpha) - 1  # exact: no cancellation in s + 1 for small alpha
        log_m = _closed_form_log_mgf(loss, s)
        return None if log_m is None else float(log_m / s)


def _closed_form_log_mgf(loss: PrivacyLoss, s) -> mpmath.mpf | None:
    """log M(s) from the symbolic log-CF at t = -is, with the working precision (an mpmath s).

    60 digits make its cancellations (near s = 0, or a 0/0 such as Laplace's at s = -1/2)
    cost nothing in double precision.  None where the MGF does not exist at s.
    """
    function = _mpmath_function(loss.log_phi)
    try:
        return _real_or_none(function(mpmath.mpc(0, -1) * s))
    except ZeroDivisionError:
        pass
    # A 0/0 of the closed form: average the two sides (an analytic function; error O(offset^2)).
    # If either side is not finite and real, s is on or past the edge of the MGF's strip.
    sides = []
    for node in (s - _OFFSET, s + _OFFSET):
        try:
            side = _real_or_none(function(mpmath.mpc(0, -1) * node))
        except ZeroDivisionError:
            return None
        if side is None:
            return None
        sides.append(side)
    return (sides[0] + sides[1]) / 2


@functools.lru_cache(maxsize=256)
def _mpmath_function(expression: sympy.Expr):
    return sympy.lambdify(t, expression, modules="mpmath")


def _real_or_none(value) -> mpmath.mpf | None:
    """The real log M, or None where the continued closed form is not finite and real (outside the strip)."""
    value = mpmath.mpc(value)
    if not (mpmath.isfinite(value.real) and mpmath.isfinite(value.imag)):
        return None
    if abs(value.imag) > _REAL_TOLERANCE:
        return None
    return value.real
