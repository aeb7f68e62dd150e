"""Closed-form privacy losses of the pair shapes that have one.

:mod:`afa.mechanisms.pairs` derives every representation an engine reads from a dominating pair; for the
shapes below it takes these closed forms instead of numerical quadrature over the output:

* one shifted Gaussian against the unshifted one: the symbolic log-CF of Zhu, Dong & Wang 2022, Lemma 35;
* one shifted Laplace against the unshifted one: Lemma 34, with its two atoms at +-a;
* two Gaussians of different scales: the quadratic loss of App. A Example 15;
* randomized response: Lemma 33 (for a mechanism whose own parameter keeps xi = log(p / (1 - p))
  relatively accurate near p = 1/2, which log-probabilities cannot);
* P = Q: the loss 0 with probability 1.

Each log-CF is a :class:`afa.mechanisms.privacy_loss.Template` built with SymPy on first use and cached, so
one family compiles once whatever the number of mechanisms using it; the Gaussian family is built only when
its expression is first read (the closed form of composed Gaussians needs no SymPy).
"""

from __future__ import annotations

import functools
import math

from .._lazy import cfunctions, sympy
from .privacy_loss import PrivacyLoss, Template, expm1x_function, variable

__all__ = ["gaussian_losses", "laplace_losses", "quadratic_coefficients", "quadratic_gaussian_losses",
           "randomized_response_losses"]


@functools.cache
def _gaussian_template() -> Template:
    """log phi = -h (t^2 - i t) with h = mu^2 / 2 (Zhu, Dong & Wang 2022, Lemma 35), built on first read."""
    def build():
        t = variable()
        h = sympy.Symbol("h", positive=True)
        return -h * (t ** 2 - sympy.I * t), (h,)
    return Template(builder=build)


@functools.cache
def _laplace_template() -> Template:
    """log phi for Zhu, Dong & Wang 2022, Lemma 34 with a = sensitivity / scale.

    Over a common denominator, phi = [e^{iat}(1 + it) + it e^{-a-iat}] / (1 + 2it), so
    phi - 1 = [(1 + it) g(iat) + it g(-a(1 + it))] / (1 + 2it) with g(z) = e^z - 1 - z
    (the first-order terms cancel exactly).  Stored as log1p(phi - 1): relative
    accuracy near t = 0 for any a, whatever the count.
    """
    a = sympy.Symbol("a", positive=True)
    i_t = sympy.I * variable()
    expm1x = expm1x_function()
    excess = ((1 + i_t) * expm1x(a * i_t) + i_t * expm1x(-a * (1 + i_t))) / (1 + 2 * i_t)
    return Template(cfunctions.log1p(excess), (a,))


@functools.cache
def _quadratic_template() -> Template:
    """log phi of the quadratic loss L = alpha + beta Z + gamma Z^2, Z ~ N(0, 1) (Zhu, Dong & Wang 2022, App. A
    Example 15).

    E[e^{u Z + v Z^2}] = (1 - 2v)^{-1/2} e^{u^2 / (2 (1 - 2v))} with u = i beta t, v = i gamma t gives
    log phi(t) = i alpha t - log1p(-2 i gamma t) / 2 - beta2 t^2 / (2 (1 - 2 i gamma t)), beta2 = beta^2.
    For real t, 1 - 2 i gamma t has real part 1, so the principal logarithm is the right branch; on
    the contour s = c + i t of the MGF (t -> -i s) it has real part 1 - 2 gamma c, positive inside
    the strip c < 1/(2 gamma) (gamma > 0), and past the strip's edge the principal log1p of a real
    number below -1 has imaginary part +-pi, so log M is not real there (the contour method's and
    :func:`afa.views.rdp.renyi_divergence`'s strip test).
    """
    t = variable()
    alpha = sympy.Symbol("alpha", real=True)
    beta2 = sympy.Symbol("beta2", nonnegative=True)
    gamma = sympy.Symbol("gamma", real=True)
    denominator = 1 - 2 * sympy.I * gamma * t
    return Template(sympy.I * alpha * t - cfunctions.log1p(-2 * sympy.I * gamma * t) / 2
                    - beta2 * t ** 2 / (2 * denominator), (alpha, beta2, gamma))


@functools.cache
def _randomized_response_template() -> Template:
    """log phi for Zhu, Dong & Wang 2022, Lemma 33: phi = cos(xi t) + i (2p - 1) sin(xi t), xi = log(p / (1 - p)).

    Stored as log1p(-2 sin^2(xi t / 2) + i (2p - 1) sin(xi t)): no cancellation
    between the two atoms' nearly equal weights when p is close to 1/2.
    """
    t = variable()
    xi, bias = sympy.Symbol("xi", positive=True), sympy.Symbol("b", positive=True)
    return Template(cfunctions.log1p(-2 * sympy.sin(xi * t / 2) ** 2 + sympy.I * bias * sympy.sin(xi * t)),
                    (xi, bias))


def gaussian_losses(mu: float) -> tuple[PrivacyLoss, PrivacyLoss]:
    """Both directions of the pair (N(mu, 1), N(0, 1)): one symbolic loss N(mu^2 / 2, mu^2), twice.

    Parameters
    ----------
    mu : float
        |shift| / scale, > 0.

    Returns
    -------
    tuple of afa.mechanisms.privacy_loss.PrivacyLoss

    Examples
    --------
    >>> from afa.mechanisms.closed_forms import gaussian_losses
    >>> first, second = gaussian_losses(1.0)
    >>> first is second, first.cumulants
    (True, (0.5, 1.0))
    """
    h = mu ** 2 / 2
    loss = PrivacyLoss.symbolic(_gaussian_template(), (h,), cumulants=(h, 2 * h), gaussian_mu=float(mu))  # N(h, 2h)
    return loss, loss


def laplace_losses(a: float, inf_mass: float = 0.0) -> tuple[PrivacyLoss, PrivacyLoss]:
    """Both directions of the pair (Lap(a, 1), Lap(0, 1)), mixed with mass ``inf_mass`` at +infinity.

    Parameters
    ----------
    a : float
        |shift| / scale, > 0: the loss lies in [-a, a] with atoms at both ends (Zhu, Dong & Wang 2022, Lemma 34).
    inf_mass : float, default 0.0
        Mass at +infinity, in [0, 1) (e.g. propose-test-release's delta).

    Returns
    -------
    tuple of afa.mechanisms.privacy_loss.PrivacyLoss
        One symbolic loss, twice.
    """
    log_rest = math.log1p(-inf_mass)
    atoms = PrivacyLoss.discrete([a, -a], [log_rest - math.log(2), log_rest - a - math.log(2)]).atoms
    loss = PrivacyLoss.symbolic(_laplace_template(), (a,), atoms=atoms, inf_mass=inf_mass, laplace_shift=a)
    return loss, loss


def quadratic_coefficients(own: float, other: float, shift: float, sign: float) -> tuple[float, float, float]:
    """(alpha, beta, gamma) of the loss log(f_own / f_other)(X) = alpha + beta Z + gamma Z^2, X = own Z.

    Parameters
    ----------
    own, other : float
        Standard deviations of the density the output is drawn from and of the other one, > 0.
    shift : float
        Distance between the two means, >= 0.
    sign : {1.0, -1.0}
        -1 when the other density's mean is ``shift`` above the own one's, +1 when below.

    Returns
    -------
    tuple of float
        alpha = log(other / own) + m^2 / 2, beta = sign (own / other) m, gamma = (own^2 - other^2) / (2 other^2)
        with m = shift / other (Zhu, Dong & Wang 2022, App. A Example 15); inf where they overflow.
    """
    ratio, scaled = other / own, shift / other  # (float overflow gives inf, checked by the caller)
    log_ratio = math.log(ratio) if 1e-300 < ratio < 1e300 else math.log(other) - math.log(own)
    alpha = log_ratio + scaled * scaled / 2
    beta = (own / other) * scaled * sign
    gamma = (own - other) / other * ((own + other) / other) / 2  # own - other is exact near own = other
    return float(alpha), float(beta), float(gamma)


def quadratic_gaussian_losses(sigma_p: float, sigma_q: float, shift: float) -> tuple[PrivacyLoss, PrivacyLoss]:
    """Both directions of the pair (N(0, sigma_p^2), N(shift, sigma_q^2)) (Zhu, Dong & Wang 2022, App. A Example 15).

    Parameters
    ----------
    sigma_p, sigma_q : float
        The two standard deviations, > 0.
    shift : float
        Distance between the means, >= 0.

    Returns
    -------
    tuple of afa.mechanisms.privacy_loss.PrivacyLoss
        L = log(p/q)(X), X ~ P, and L' = log(q/p)(Y), Y ~ Q, each symbolic (one object twice when they
        coincide); P = Q gives the loss 0 with probability 1.
    """
    if sigma_p == sigma_q and shift == 0:
        return identical_losses()
    family = _quadratic_template()
    first, second = ((alpha, beta * beta, gamma) for alpha, beta, gamma in
                     (quadratic_coefficients(sigma_p, sigma_q, shift, -1.0),
                      quadratic_coefficients(sigma_q, sigma_p, shift, 1.0)))
    forward = PrivacyLoss.symbolic(family, first)
    return (forward, forward) if first == second else (forward, PrivacyLoss.symbolic(family, second))


def identical_losses() -> tuple[PrivacyLoss, PrivacyLoss]:
    """Both directions of a pair with P = Q: the loss 0 with probability 1 (one object twice)."""
    loss = PrivacyLoss.discrete([0.0], [0.0])
    return loss, loss


def randomized_response_losses(p: float) -> tuple[PrivacyLoss, PrivacyLoss]:
    """Both directions of randomized response with truth probability p: the atoms +-xi, xi = log(p / (1 - p)),
    with the symbolic log-CF of Zhu, Dong & Wang 2022, Lemma 33 (one object twice).

    Parameters
    ----------
    p : float
        In (1/2, 1); xi = log1p((2p - 1) / (1 - p)) is relatively accurate near 1/2 because 2p - 1 is exact.

    Returns
    -------
    tuple of afa.mechanisms.privacy_loss.PrivacyLoss
    """
    bias = 2 * p - 1  # exact in floating point for p in [1/2, 1]
    xi = math.log1p(bias / (1 - p))
    loss = PrivacyLoss.discrete([xi, -xi], [math.log(p), math.log1p(-p)],
                                template=(_randomized_response_template(), (xi, bias)))
    return loss, loss
