"""Renyi DP: the Renyi divergence of a dominating pair, its symbolic form, and an RDP accountant.

For one direction with privacy loss L = log(p/q)(o), o ~ P, the moment-generating
function M(s) = E_P[e^{sL}] is the characteristic function continued to imaginary
argument, M(s) = phi(-is) (Zhu, Dong & Wang 2022, Sec. 3, App. B), and

    D_alpha(P||Q) = log E_Q[(p/q)^alpha] / (alpha - 1) = log M(alpha - 1) / (alpha - 1).

The other direction (L' under Q) gives D_alpha(Q||P); the mechanism's value is the
larger of the two.  It is +infinity where the MGF does not exist at s = alpha - 1
(outside its strip, e.g. :class:`afa.DataDependentGaussian`, Zhu, Dong & Wang 2022, App. A
Example 15), and for alpha > 1 whenever the loss has mass at +infinity
(:class:`afa.ApproxDP`, Example 14).  Subsampled Gaussian and Laplace mechanisms,
whose log-CF is numeric, take their MGF from the noise pair's quadrature at the
real point s = alpha - 1 (:class:`afa.mechanisms.noise_pair.PairMGF`).

RDP accounting (Zhu, Dong & Wang 2022, Sec. 2, Def. 6): Renyi divergences of a composition add
(per direction of the composed dominating pair, Thm 10), and (alpha, rho)-RDP converts
to (epsilon, delta)-DP by

* "standard" (Mironov 2017, Prop. 3):  eps = rho + log(1/delta) / (alpha - 1);
* "improved" (Balle et al. 2020, Thm 21; Canonne, Kamath & Steinke 2020, Prop. 12):
  eps = rho + log((alpha - 1)/alpha) - (log delta + log alpha) / (alpha - 1),

minimised over the orders.  Both are **upper bounds** on the tight epsilon(delta) of
:class:`afa.Accountant`, and not tight even for the Gaussian mechanism (Zhu, Dong & Wang 2022
Sec. 3, Fig. 1): RDP is kept here as the baseline to compare against.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import mpmath
import numpy as np
import sympy
from numpy.typing import ArrayLike
from scipy.special import logsumexp
from sympy.core.function import AppliedUndef

from .. import _validation as check
from ..accountant import Accountant
from ..mechanisms.catalog import NEIGHBORING_RELATIONS, Mechanism
from ..mechanisms.privacy_loss import PrivacyLoss, batched_log_phi, t
from ..results import AccuracyError

__all__ = ["CONVERSIONS", "DEFAULT_ORDERS", "RdpAccountant", "alpha", "composed_rdp", "delta_from_rdp",
           "epsilon_from_rdp", "log_mgf", "renyi_divergence", "renyi_divergence_expression"]

#: The order of the symbolic Renyi divergence (a positive real symbol).
alpha = sympy.Symbol("alpha", positive=True)
#: Orders an RDP accountant tracks by default (the best order is about 1 + sqrt(log(1/delta) / rho) for a
#: Gaussian-like curve rho alpha): dense near 1 for heavy composition (large rho), every integer to 64,
#: then sparse up to 1024 for light composition and tiny delta.
DEFAULT_ORDERS: tuple[float, ...] = (1.05, 1.1, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 3.5, 4.0, 4.5,
                                     *map(float, range(5, 65)), 80.0, 96.0, 128.0, 192.0, 256.0, 512.0, 1024.0)
#: RDP to (epsilon, delta) conversions (both upper bounds).
CONVERSIONS = ("improved", "standard")

#: log M(s) at a real s counts as real (the MGF exists there) when its imaginary part is below this.
#: Absolute, not relative: past a strip's edge the principal branch leaves an imaginary part of order
#: pi (e.g. -log1p(x)/2 with x < -1 gives -+ i pi/2) next to a real part that may be huge; inside it,
#: the closed forms produce imaginary parts of rounding size only.
_REAL_TOLERANCE = 1e-8
#: Offset and working precision used to step over a removable singularity of a closed form (0/0).
_OFFSET, _WORKING_DIGITS = mpmath.mpf("1e-20"), 60


# -- the Renyi divergence of one mechanism ------------------------------------------------------

def renyi_divergence(mechanism: Mechanism, alpha: float, neighboring: str = "add_remove") -> float:
    """D_alpha of the mechanism's dominating pair: the larger of D_alpha(P||Q) and D_alpha(Q||P).

    Parameters
    ----------
    mechanism : afa.Mechanism
        The mechanism (one use).
    alpha : float
        The order: any real number > 0 other than 1 (orders in (0, 1) included).
    neighboring : {"add_remove", "substitution", "replace_special"}, default "add_remove"
        The neighbouring relation.

    Returns
    -------
    float
        D_alpha = log M(alpha - 1) / (alpha - 1) of the larger direction (module docstring); ``math.inf``
        when a direction has mass at +infinity and alpha > 1, or when its moment-generating function
        does not exist at s = alpha - 1.

    Raises
    ------
    NotImplementedError
        A mechanism whose log-CF is known on the real line only (one that gives a numeric log-CF directly
        instead of declaring a dominating pair).
    ValueError
        ``alpha`` out of range or an unknown ``neighboring``.
    TypeError
        ``mechanism`` is not an afa mechanism.
    afa.AccuracyError
        A subsampled mechanism whose MGF at s = alpha - 1 is beyond the reach of the output quadrature.

    Examples
    --------
    >>> import afa
    >>> afa.renyi_divergence(afa.Gaussian(1.0), 2.0)  # mu^2 alpha / 2
    1.0
    >>> round(afa.renyi_divergence(afa.Laplace(1.0), 2.0), 6)
    0.619124
    >>> afa.renyi_divergence(afa.ApproxDP(1.0, 1e-6), 2.0)
    inf
    """
    if not isinstance(mechanism, Mechanism):
        raise TypeError(f"mechanism must be an afa mechanism, got {type(mechanism).__name__}")
    order = check.real_number("alpha", alpha)
    if not order > 0 or order == 1:
        raise ValueError(f"alpha must be in (0, 1) or (1, inf) (> 0 and != 1), got {order}")
    check.choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
    return float(max(_direction_divergences(mechanism, order, neighboring)))


def _direction_divergences(mechanism: Mechanism, order: float, neighboring: str) -> tuple[float, float]:
    """(D_alpha of the first direction, D_alpha of the second); the same twice for a symmetric mechanism."""
    first, second = mechanism.privacy_losses(neighboring)
    value = _divergence(first, order)
    return value, (value if second is first else _divergence(second, order))


def _divergence(loss: PrivacyLoss, order: float) -> float:
    """log M(alpha - 1) / (alpha - 1) of one direction; +inf where the MGF does not exist there,
    for alpha > 1 when the loss has mass at +infinity, and where its finite part has no mass."""
    if order > 1 and loss.inf_mass > 0:
        return math.inf
    with mpmath.workdps(_WORKING_DIGITS):
        s = mpmath.mpf(order) - 1  # exact: no cancellation in s + 1 for small alpha
        return float(_log_mgf(loss, s) / s)


def log_mgf(loss: PrivacyLoss, s: float) -> float:
    """log E[e^{sL}; L < inf]: the log-MGF of the loss's finite part at a real s.

    Parameters
    ----------
    loss : afa.mechanisms.privacy_loss.PrivacyLoss
        One direction of a mechanism's privacy loss (:meth:`afa.Mechanism.privacy_losses`).
    s : float
        A real, finite point.

    Returns
    -------
    float
        +inf outside the MGF's strip, -inf when the finite part has no mass.

    Raises
    ------
    NotImplementedError
        A log-CF known on the real line only.
    afa.AccuracyError
        A subsampled loss whose MGF at s is beyond the reach of the output quadrature.

    Notes
    -----
    Finite losses sum over their atoms; closed forms continue the symbolic log-CF to
    t = -is with 60 digits (Zhu, Dong & Wang 2022, App. B); subsampled Gaussian / Laplace losses take the
    noise pair's quadrature at the real point s.

    Examples
    --------
    >>> import afa
    >>> loss, _ = afa.Gaussian(1.0).privacy_losses()  # N(1/2, 1)
    >>> afa.views.rdp.log_mgf(loss, 1.0)
    1.0
    """
    with mpmath.workdps(_WORKING_DIGITS):
        return float(_log_mgf(loss, mpmath.mpf(check.real_number("s", s))))


def _log_mgf(loss: PrivacyLoss, s: mpmath.mpf) -> mpmath.mpf:
    if not loss.continuous:
        atoms = loss.atoms
        if atoms.size == 0:
            return mpmath.mpf("-inf")
        return mpmath.mpf(float(logsumexp(atoms.log_masses + float(s) * atoms.losses)))
    if loss.is_numeric:
        return mpmath.mpf(_numeric_log_mgf(loss, float(s)))
    log_m = _closed_form_log_mgf(loss, s)
    return mpmath.inf if log_m is None else log_m


def _numeric_log_mgf(loss: PrivacyLoss, s: float) -> float:
    """log M(s) of a numeric loss that continues to complex arguments (subsampled Gaussian / Laplace).

    Its evaluator takes t = -is to the noise pair's quadrature at the real point s (relative error
    about NUMERIC_RTOL of M(s)); these MGFs exist for every real s.
    """
    if not loss.continues_to_complex:
        raise NotImplementedError("renyi_divergence needs a closed-form, finite or subsampled-noise privacy loss; "
                                  "this mechanism's log-CF is computed numerically on the real line only, "
                                  "so its MGF is not available")
    value = complex(batched_log_phi(np.array([-1j * s]), [loss])[0, 0])
    if not (math.isfinite(value.real) and abs(value.imag) <= _REAL_TOLERANCE):
        raise AccuracyError(f"the moment-generating function at s = {s:.6g} is beyond the reach of the output "
                            "quadrature; use smaller orders alpha")
    return value.real


# -- the symbolic view ----------------------------------------------------------------------------

def renyi_divergence_expression(source: Mechanism | Accountant, neighboring: str = "add_remove") -> sympy.Expr:
    """D_alpha as a sympy expression in the positive symbol :data:`alpha`, from the symbolic log-CF.

    Parameters
    ----------
    source : afa.Mechanism or afa.Accountant
        A mechanism (under ``neighboring``) or an accountant (its own relation; the composed log-CF
        sum_i k_i log phi_i).
    neighboring : {"add_remove", "substitution", "replace_special"}, default "add_remove"
        The relation of a mechanism ``source``.

    Returns
    -------
    sympy.Expr
        Each direction's log phi(t) taken at t = -i(alpha - 1) and divided by alpha - 1 (Zhu, Dong &
        Wang 2022, App. B), then simplified; two different directions give ``Max`` of the two.  A
        direction with mass at +infinity gives ``Piecewise`` (its finite part below alpha = 1, +oo above).

    Raises
    ------
    ValueError
        Numeric log-CFs (subsampled Gaussian / Laplace, MixtureOfGaussians): use :func:`renyi_divergence`
        for their values.
    TypeError
        ``source`` is neither a mechanism nor an accountant.

    Notes
    -----
    Where a closed form has a strip (DataDependentGaussian) the expression is the divergence inside it
    only.  Parameters enter as 17-digit floats.

    Examples
    --------
    >>> import afa
    >>> afa.views.rdp.renyi_divergence_expression(afa.Gaussian(1.0))
    0.5*alpha
    >>> afa.views.rdp.renyi_divergence_expression(afa.Accountant().compose(afa.Gaussian(1.0), 3))
    1.5*alpha
    """
    if isinstance(source, Accountant):
        directions = [(source.log_phi[name], source.inf_mass[name]) for name in source.directions]
    elif isinstance(source, Mechanism):
        check.choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
        directions = [(loss.log_phi, loss.inf_mass) for loss in dict.fromkeys(source.privacy_losses(neighboring))]
    else:
        raise TypeError(f"source must be an afa mechanism or Accountant, got {type(source).__name__}")
    expressions = list(dict.fromkeys(_expression(log_phi, inf_mass) for log_phi, inf_mass in directions))
    return expressions[0] if len(expressions) == 1 else sympy.Max(*expressions)


@functools.lru_cache(maxsize=256)
def _expression(log_phi: sympy.Expr, inf_mass: float) -> sympy.Expr:
    """log phi(-i(alpha - 1)) / (alpha - 1), simplified (custom log1p / expm1 forms rewritten first)."""
    if log_phi.atoms(AppliedUndef):
        raise ValueError("the mechanism's log-CF is computed numerically (it has no closed form), so its Renyi "
                         "divergence has no symbolic expression; use renyi_divergence for its values")
    continued = log_phi.subs(t, -sympy.I * (alpha - 1)) / (alpha - 1)
    divergence = sympy.simplify(continued.rewrite(sympy.exp).rewrite(sympy.log))
    if inf_mass > 0:
        return sympy.Piecewise((divergence, alpha < 1), (sympy.oo, True))
    return divergence


# -- RDP accounting ---------------------------------------------------------------------------------

def composed_rdp(accountant: Accountant, orders: ArrayLike = DEFAULT_ORDERS) -> np.ndarray:
    """The RDP curve of the accountant's composition at ``orders`` (each > 1).

    Parameters
    ----------
    accountant : afa.Accountant
        The composition (under its own relation).
    orders : sequence of float, default DEFAULT_ORDERS
        A non-empty 1-d sequence of orders, each > 1.

    Returns
    -------
    numpy.ndarray
        rho(alpha) at each order; +inf where any term is (including an order whose MGF is beyond the
        output quadrature's reach).

    Notes
    -----
    Divergences add along each direction of the composed dominating pair (Zhu, Dong & Wang 2022, Thm 10);
    the curve is the larger direction's sum at each order (no larger than the usual
    sum over mechanisms of each mechanism's larger direction).

    Examples
    --------
    >>> import afa
    >>> afa.views.rdp.composed_rdp(afa.Accountant().compose(afa.Gaussian(1.0), 10), [2.0, 4.0]).tolist()
    [10.0, 20.0]
    """
    if not isinstance(accountant, Accountant):
        raise TypeError(f"accountant must be an afa.Accountant, got {type(accountant).__name__}")
    grid = _orders(orders)
    total = np.zeros((2, grid.size))
    for mechanism, count in accountant.mechanisms.items():
        total += count * _mechanism_rdp(mechanism, accountant.neighboring, tuple(grid))
    return total.max(axis=0)


@functools.lru_cache(maxsize=1024)
def _mechanism_rdp(mechanism: Mechanism, neighboring: str, orders: tuple[float, ...]) -> np.ndarray:
    """Both directions' D_alpha at every order, shape (2, orders): computed once per mechanism.

    An order whose MGF is beyond the output quadrature's reach (a subsampled mechanism with
    very little noise at a very large order) counts as +inf: that order then gives no bound.
    """
    curve = np.array([_divergences_or_infinite(mechanism, order, neighboring) for order in orders]).T
    curve.flags.writeable = False
    return curve


def _divergences_or_infinite(mechanism: Mechanism, order: float, neighboring: str) -> tuple[float, float]:
    try:
        return _direction_divergences(mechanism, order, neighboring)
    except AccuracyError:
        return math.inf, math.inf


def epsilon_from_rdp(orders: ArrayLike, rdp: ArrayLike, delta: float,
                     conversion: str = "improved") -> tuple[float, float]:
    """(epsilon, best order): an **upper bound** on epsilon(delta) from an RDP curve.

    Parameters
    ----------
    orders : sequence of float
        The orders, each > 1.
    rdp : sequence of float
        The RDP value rho >= 0 (possibly +inf) at each order.
    delta : float
        In (0, 1).
    conversion : {"improved", "standard"}, default "improved"
        The RDP to (epsilon, delta) conversion (module docstring).

    Returns
    -------
    tuple of float
        The minimum over the orders of the chosen conversion, clipped at 0 (+inf if every order's RDP
        is infinite), and the order attaining it.

    Examples
    --------
    >>> import afa
    >>> epsilon, order = afa.views.rdp.epsilon_from_rdp([2.0, 4.0, 8.0], [5.0, 10.0, 20.0], 1e-5)
    >>> round(epsilon, 4), order
    (13.0879, 4.0)
    """
    grid, curve = _curve(orders, rdp)
    delta = check.in_interval("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    check.choice("conversion", conversion, CONVERSIONS)
    if conversion == "standard":
        epsilons = curve - math.log(delta) / (grid - 1)
    else:
        epsilons = curve + np.log1p(-1 / grid) - (math.log(delta) + np.log(grid)) / (grid - 1)
    best = int(np.argmin(epsilons))
    return max(0.0, float(epsilons[best])), float(grid[best])


def delta_from_rdp(orders: ArrayLike, rdp: ArrayLike, epsilon: float,
                   conversion: str = "improved") -> tuple[float, float]:
    """(delta, best order): an **upper bound** on delta(epsilon) from an RDP curve (epsilon >= 0).

    Parameters
    ----------
    orders : sequence of float
        The orders, each > 1.
    rdp : sequence of float
        The RDP value rho >= 0 (possibly +inf) at each order.
    epsilon : float
        >= 0.
    conversion : {"improved", "standard"}, default "improved"
        The conversion.

    Returns
    -------
    tuple of float
        The smallest delta over the orders, capped at 1, and the order attaining it.

    Notes
    -----
    The conversions of :func:`epsilon_from_rdp` solved for delta, in log space:
    log delta = (alpha - 1)(rho - eps) ("standard") or
    (alpha - 1)(rho - eps + log(1 - 1/alpha)) - log alpha ("improved").

    Examples
    --------
    >>> import afa
    >>> delta, order = afa.views.rdp.delta_from_rdp([2.0, 4.0, 8.0], [5.0, 10.0, 20.0], 10.0)
    >>> round(delta, 6), order
    (0.001684, 2.0)
    """
    grid, curve = _curve(orders, rdp)
    epsilon = check.non_negative("epsilon", epsilon)
    check.choice("conversion", conversion, CONVERSIONS)
    if conversion == "standard":
        log_deltas = (grid - 1) * (curve - epsilon)
    else:
        log_deltas = (grid - 1) * (curve - epsilon + np.log1p(-1 / grid)) - np.log(grid)
    best = int(np.argmin(log_deltas))
    return float(min(1.0, math.exp(min(0.0, log_deltas[best])))), float(grid[best])


def _orders(orders) -> np.ndarray:
    orders = check.real_array("orders", orders)
    if orders.ndim != 1 or orders.size == 0 or np.any(orders <= 1):
        raise ValueError(f"orders must be a non-empty 1-d sequence of numbers > 1, got {orders!r}")
    return orders


def _curve(orders, rdp) -> tuple[np.ndarray, np.ndarray]:
    orders = _orders(orders)
    try:
        rdp = np.asarray(rdp, dtype=float)
    except (TypeError, ValueError) as error:
        raise TypeError(f"rdp must be real numbers, got {rdp!r}") from error
    if rdp.shape != orders.shape or np.any(np.isnan(rdp)) or np.any(rdp < 0):
        raise ValueError("rdp must hold one value >= 0 (possibly +inf) per order")
    return orders, rdp


class RdpAccountant:
    """The RDP (moments) accountant: Renyi divergences composed at fixed orders, converted to (epsilon, delta).

    Its answers are **upper bounds** on the tight values of :class:`afa.Accountant`
    (Zhu, Dong & Wang 2022, Sec. 3): use it as the baseline it is.

    Parameters
    ----------
    neighboring : {"add_remove", "substitution", "replace_special"}, default "add_remove"
        The neighbouring relation.
    orders : sequence of float, default DEFAULT_ORDERS
        The orders tracked, each > 1.

    Examples
    --------
    >>> import afa
    >>> from afa.views.rdp import RdpAccountant
    >>> round(RdpAccountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01), 1000).epsilon(1e-5), 4)
    2.1078
    >>> round(RdpAccountant().compose(afa.Gaussian(1.0), 10).epsilon(1e-5), 4)  # the tight value is 17.8566
    19.0536
    """

    def __init__(self, neighboring: str = "add_remove", orders: Sequence[float] = DEFAULT_ORDERS):
        self.orders = tuple(map(float, _orders(orders)))
        self._accountant = Accountant(neighboring)

    @classmethod
    def from_accountant(cls, accountant: Accountant, orders: Sequence[float] = DEFAULT_ORDERS) -> RdpAccountant:
        """An RDP accountant holding the same composition as ``accountant`` (and its relation).

        Parameters
        ----------
        accountant : afa.Accountant
            The composition to copy.
        orders : sequence of float, default DEFAULT_ORDERS
            The orders tracked, each > 1.

        Returns
        -------
        RdpAccountant

        Examples
        --------
        >>> import afa
        >>> accountant = afa.Accountant().compose(afa.Gaussian(1.0), 10)
        >>> afa.views.rdp.RdpAccountant.from_accountant(accountant, orders=[2.0, 3.0]).rdp.tolist()
        [10.0, 15.0]
        """
        if not isinstance(accountant, Accountant):
            raise TypeError(f"accountant must be an afa.Accountant, got {type(accountant).__name__}")
        rdp = cls(accountant.neighboring, orders)
        for mechanism, count in accountant.mechanisms.items():
            rdp.compose(mechanism, count)
        return rdp

    def compose(self, mechanism: Mechanism, times: int = 1) -> RdpAccountant:
        """Add ``times`` uses of ``mechanism``; returns the accountant so calls chain.

        Parameters
        ----------
        mechanism : afa.Mechanism
            The mechanism.
        times : int, default 1
            Number of uses, as for :meth:`afa.Accountant.compose`.

        Returns
        -------
        RdpAccountant
            This accountant.

        Examples
        --------
        >>> import afa
        >>> afa.views.rdp.RdpAccountant(orders=[2.0]).compose(afa.Gaussian(1.0), 3).rdp.tolist()  # 3 uses of alpha / 2
        [3.0]
        """
        self._accountant.compose(mechanism, times)
        return self

    @property
    def neighboring(self) -> str:
        """The neighbouring relation ("add_remove", "substitution" or "replace_special")."""
        return self._accountant.neighboring

    @property
    def rdp(self) -> np.ndarray:
        """The composed RDP curve at :attr:`orders` (:func:`composed_rdp`).

        Examples
        --------
        >>> import afa
        >>> afa.views.rdp.RdpAccountant(orders=[2.0, 4.0]).compose(afa.Gaussian(1.0), 10).rdp.tolist()
        [10.0, 20.0]
        """
        return composed_rdp(self._accountant, self.orders)

    def epsilon(self, delta: float, conversion: str = "improved") -> float:
        """An upper bound on epsilon(delta): the best order's conversion.

        Parameters
        ----------
        delta : float
            In (0, 1).
        conversion : {"improved", "standard"}, default "improved"
            The conversion (module docstring).

        Returns
        -------
        float
            See :func:`epsilon_from_rdp`.

        Examples
        --------
        Ten uses of Gaussian(1): RDP 5 alpha, and the standard conversion is min over the orders of
        5 alpha + log(1 / delta) / (alpha - 1) (Mironov 2017, Prop. 3).

        >>> import math, afa
        >>> accountant = afa.views.rdp.RdpAccountant(orders=[2.0, 4.0, 8.0]).compose(afa.Gaussian(1.0), 10)
        >>> bound = min(5 * a + math.log(1e5) / (a - 1) for a in (2.0, 4.0, 8.0))
        >>> math.isclose(accountant.epsilon(1e-5, conversion="standard"), bound, rel_tol=1e-12)
        True
        """
        return epsilon_from_rdp(self.orders, self.rdp, delta, conversion)[0]

    def delta(self, epsilon: float, conversion: str = "improved") -> float:
        """An upper bound on delta(epsilon): the best order's conversion.

        Parameters
        ----------
        epsilon : float
            >= 0.
        conversion : {"improved", "standard"}, default "improved"
            The conversion (module docstring).

        Returns
        -------
        float
            See :func:`delta_from_rdp`.

        Examples
        --------
        >>> import afa
        >>> round(afa.views.rdp.RdpAccountant().compose(afa.Gaussian(1.0), 10).delta(10.0), 6)
        0.110276
        """
        return delta_from_rdp(self.orders, self.rdp, epsilon, conversion)[0]

    def __repr__(self) -> str:
        items = ", ".join(f"{m!r} x{count}" for m, count in self._accountant.mechanisms.items())
        return f"RdpAccountant(neighboring={self.neighboring!r}, [{items}])"


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
