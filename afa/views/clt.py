"""Central-limit views of a composition: privacy-loss classes, Gaussian approximation and its bounds.

Sommer, Meiser & Mohammadi 2019, (Sommer, Meiser, Mohammadi):

* the privacy-loss class (mu, sigma^2, omega(inf)) of a direction (Def. 10): mean and
  variance of the *inner* (finite, renormalised) loss and the mass at +infinity.  Under
  composition the means and variances add and 1 - omega(inf) multiplies (Thm 4); here they
  come from :attr:`afa.engines.composition.ComposedLoss.cumulants`, which differentiates each term's
  symbolic log-CF at t = 0 (finite and numeric terms: their atoms / quadrature);
* the Gaussian approximation delta_CLT(eps) of a class (Lemma 12, Thm 4): exact for
  compositions of Gaussian mechanisms (Thm 5), an *estimate* otherwise;
* the Berry-Esseen / Nagaev interval around it (Lemma 13, Thm 6): a two-sided *bound* on
  the tight delta, from the third absolute moments of the terms;
* the Markov-ADP bound (Thm 3): an *upper bound* from Chernoff tail bounds of the composed
  moment-generating function;
* a Gaussian-DP parameter mu (Dong, Roth & Su 2022, Thm 3.5), an *estimate*.

Each direction of the composed dominating pair is treated separately and the larger value
taken (Sommer, Meiser & Mohammadi 2019, Thm 6, last step; Zhu, Dong & Wang 2022, Lemma 37).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from .. import _validation as check
from ..accountant import Accountant
from ..engines.composition import ComposedLoss
from ..mechanisms.catalog import NEIGHBORING_RELATIONS, Mechanism
from ..mechanisms.noise_pair import NoiseMixturePair
from ..mechanisms.privacy_loss import PrivacyLoss
from ..numerics.exact import gaussian_delta
from ..results import AccuracyError
from .rdp import log_mgf

__all__ = ["GDP_ESTIMATES", "LossClass", "berry_esseen_bounds", "clt_delta", "gdp_mu", "markov_delta",
           "privacy_loss_class", "third_absolute_moments"]

#: Berry-Esseen constants of Sommer, Meiser & Mohammadi 2019, Lemma 13 / Thm 6 as printed: (uniform c_u,
#: non-uniform Nagaev c_t) for identically distributed terms, and the larger ones quoted there for non-identical terms.
BERRY_ESSEEN_IID = (0.4748, 25.80)
BERRY_ESSEEN_NON_IID = (0.5600, 31.935)
#: GDP estimates: sqrt(variance), sqrt(2 mean), and 2 mean / sqrt(variance) (Dong-Roth-Su's 2K/s).
GDP_ESTIMATES = ("variance", "mean", "ratio")

#: Relative agreement of two panel refinements that ends a third-moment quadrature.
_RTOL = 1e-10
_MAX_PANELS = 1 << 16
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(20)
#: Noise scales either side of a noise pair's centres covered by its output quadrature.
_NOISE_REACH = 60.0
#: The characteristic-function integral stops at t = _CF_REACH / sd: the dropped tail lies in
#: [-(12/pi) 2 / (3 t^3), 0] = [-1e-10 sd^3, 0], and sd^3 <= E|Y|^3 (|psi| <= 1, Lyapunov).
_CF_REACH = (8 / (math.pi * 1e-10)) ** (1 / 3)


@dataclass(frozen=True)
class LossClass:
    """The privacy-loss class (mean, variance, inf_mass) of one direction (Sommer, Meiser & Mohammadi 2019, Def. 10).

    Attributes
    ----------
    mean : float
        Mean mu of the inner (finite, renormalised) loss.
    variance : float
        Its variance sigma^2.
    inf_mass : float
        The mass omega(inf) at +infinity.

    Examples
    --------
    >>> import afa.views.clt
    >>> accountant = afa.Accountant().compose(afa.Gaussian(1.0), 4)
    >>> afa.views.clt.privacy_loss_class(accountant)["remove"]
    LossClass(mean=2.0, variance=4.0, inf_mass=0.0)
    """

    mean: float
    variance: float
    inf_mass: float

    def delta(self, epsilons) -> np.ndarray:
        """delta(eps) of the Gaussian privacy loss of this class (Sommer, Meiser & Mohammadi 2019, Lemma 12).

        Parameters
        ----------
        epsilons : array_like
            Real, finite values of eps (any shape).

        Returns
        -------
        numpy.ndarray
            omega + (1 - omega) H for the loss N(m, v), of the shape of ``epsilons``.

        Raises
        ------
        ValueError
            The class has zero variance (no Gaussian approximation).

        Notes
        -----
        Shifting eps by m - v/2 turns N(m, v) into the Gaussian mechanism's N(v/2, v), so the accurate
        closed form of :func:`afa.numerics.exact.gaussian_delta` applies (Sommer, Meiser & Mohammadi 2019, Thm 5).

        Examples
        --------
        >>> import afa.views.clt
        >>> afa.views.clt.LossClass(mean=2.0, variance=4.0, inf_mass=0.0).delta([1.0]).round(6).tolist()
        [0.509862]
        """
        epsilons = check.real_array("epsilons", epsilons)
        if self.variance <= 0:
            raise ValueError("the privacy loss has zero variance: its class has no Gaussian approximation")
        shifted = epsilons - self.mean + self.variance / 2
        finite = np.asarray(gaussian_delta(shifted.ravel(), math.sqrt(self.variance))).reshape(epsilons.shape)
        return self.inf_mass + (1 - self.inf_mass) * finite


def privacy_loss_class(accountant: Accountant) -> dict[str, LossClass]:
    """The class (mu, sigma^2, omega(inf)) of each direction of the composition.

    See Sommer, Meiser & Mohammadi 2019, Def. 10, Thm 4.

    Parameters
    ----------
    accountant : afa.Accountant
        A non-empty composition.

    Returns
    -------
    dict
        ``{direction: LossClass}`` for each of ``accountant.directions``.

    Raises
    ------
    ValueError
        The accountant is empty.
    TypeError
        ``accountant`` is not an :class:`afa.Accountant`.

    Notes
    -----
    Under composition the means and variances add and 1 - omega(inf) multiplies (Thm 4).

    Examples
    --------
    Four uses of Gaussian(2): each loss has mean mu^2 / 2 and variance mu^2 with mu = 1 / 2.

    >>> import afa
    >>> afa.views.clt.privacy_loss_class(afa.Accountant().compose(afa.Gaussian(2.0), 4))["remove"]
    LossClass(mean=0.5, variance=1.0, inf_mass=0.0)
    """
    return {name: _class(composed) for name, composed in _directions(accountant).items()}


def clt_delta(accountant: Accountant, epsilons) -> np.ndarray:
    """delta_CLT(eps): the Gaussian approximation of each direction's class, the larger one.

    See Sommer, Meiser & Mohammadi 2019, Thm 4.

    Exact for compositions of Gaussian mechanisms (Thm 5); an estimate, in neither
    direction, for anything else (:func:`berry_esseen_bounds` brackets the truth).

    Parameters
    ----------
    accountant : afa.Accountant
        A non-empty composition.
    epsilons : array_like
        Real, finite values of eps (any shape).

    Returns
    -------
    numpy.ndarray
        delta_CLT at each eps, of the shape of ``epsilons``.

    Examples
    --------
    >>> import afa.views.clt
    >>> accountant = afa.Accountant().compose(afa.Gaussian(1.0), 4)
    >>> afa.views.clt.clt_delta(accountant, [1.0]).round(6).tolist(), round(accountant.delta(1.0), 6)
    ([0.509862], 0.509862)
    """
    return np.max([loss_class.delta(epsilons) for loss_class in privacy_loss_class(accountant).values()], axis=0)


def berry_esseen_bounds(accountant: Accountant, epsilons) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) bounds on delta(eps) from the CLT with Berry-Esseen / Nagaev errors.

    See Sommer, Meiser & Mohammadi 2019, Thm 6.

    Per direction, ``|delta - Delta| <= beta`` with Delta the class's Gaussian delta and

        beta = (1 - omega) min(c_u, c_t / (1 + z^3) [z >= 0]) sum_i k_i gamma_i / V^{3/2},
        z = (eps - M) / sqrt(V),

    M, V the composed mean and variance and gamma_i = E|L_i - E L_i|^3 of each term (Thm 6
    prints z = (eps - n mu)/(sqrt(n) sigma^2) and Lemma 13 Pr[S > n sigma z]; the standardised
    threshold (eps - n mu)/(sqrt(n) sigma) is what Nagaev's bound is stated for).  The iid
    constants apply when a direction has a single distinct term, the non-iid ones
    otherwise.

    Parameters
    ----------
    accountant : afa.Accountant
        A non-empty composition.
    epsilons : array_like
        Real, finite values of eps (any shape).

    Returns
    -------
    tuple of numpy.ndarray
        (lower, upper): max over directions of Delta -+ beta, clipped to [0, 1].

    Raises
    ------
    afa.AccuracyError
        A third absolute moment that cannot be computed (:func:`third_absolute_moments`).

    Examples
    --------
    >>> import afa.views.clt
    >>> accountant = afa.Accountant().compose(afa.Laplace(1.0), 10)
    >>> lower, upper = afa.views.clt.berry_esseen_bounds(accountant, [3.0])
    >>> round(float(lower[0]), 4), round(accountant.delta(3.0), 4), round(float(upper[0]), 4)
    (0.2615, 0.4737, 0.6555)
    """
    epsilons = check.real_array("epsilons", epsilons)
    lower, upper = [], []
    for composed in _directions(accountant).values():
        loss_class = _class(composed)
        center = loss_class.delta(epsilons)
        uniform, nagaev = BERRY_ESSEEN_IID if len(composed.terms) == 1 else BERRY_ESSEEN_NON_IID
        third = math.fsum(count * _third_absolute_moment(loss) for loss, count in composed.terms.items())
        ratio = third / loss_class.variance ** 1.5
        z = (epsilons - loss_class.mean) / math.sqrt(loss_class.variance)
        with np.errstate(over="ignore"):
            tail = np.where(z >= 0, nagaev / (1 + np.maximum(z, 0.0) ** 3), np.inf)
        half_width = (1 - loss_class.inf_mass) * np.minimum(uniform, tail) * ratio
        lower.append(center - half_width)
        upper.append(center + half_width)
    return np.clip(np.max(lower, axis=0), 0.0, 1.0), np.clip(np.max(upper, axis=0), 0.0, 1.0)


def markov_delta(accountant: Accountant, epsilons) -> np.ndarray:
    """The Markov-ADP upper bound on delta(eps) (Sommer, Meiser & Mohammadi 2019, Thm 3), the larger direction.

    With the Chernoff bound T(y) = min_lambda exp(K(lambda) - lambda y) >= Pr[y <= L < inf],
    K the composed log-MGF of the finite part (sum_i k_i log M_i, :func:`afa.views.rdp.log_mgf`), and
    delta(eps) = omega + int_eps^inf e^{eps - y} Pr[y <= L < inf] dy (integration by parts of
    Lemma 9's formula), every grid eps = y_0 < ... < y_k gives

        delta(eps) <= omega + sum_{j<k} T(y_j) (e^{eps - y_j} - e^{eps - y_{j+1}}) + T(y_k) e^{eps - y_k},

    Thm 3's sum rearranged (T is non-increasing).  Any lambda and any grid give a valid
    bound; fine grids of both (400 lambdas, 1500 y's per eps) make it close to
    int T(y) e^{eps - y} dy.

    Parameters
    ----------
    accountant : afa.Accountant
        A non-empty composition.
    epsilons : array_like
        Real, finite values of eps (any shape).

    Returns
    -------
    numpy.ndarray
        The bound at each eps, capped at 1, of the shape of ``epsilons``.

    Raises
    ------
    NotImplementedError
        It needs the MGF: a composition with a log-CF known on the real line only.

    Examples
    --------
    >>> import afa.views.clt
    >>> accountant = afa.Accountant().compose(afa.Laplace(1.0), 10)
    >>> afa.views.clt.markov_delta(accountant, [6.0]).round(4).tolist(), round(accountant.delta(6.0), 4)
    ([0.4075], 0.1096)
    """
    epsilons = check.real_array("epsilons", epsilons)
    bounds = [_markov_direction(composed, epsilons.ravel()) for composed in _directions(accountant).values()]
    return np.minimum(np.max(bounds, axis=0), 1.0).reshape(epsilons.shape)


def gdp_mu(accountant: Accountant, estimate: str = "variance") -> float:
    """A Gaussian-DP parameter mu for the composition: an **estimate**, not a bound.

    For a loss N(mu^2/2, mu^2) (the Gaussian mechanism) mu = sqrt(variance) = sqrt(2 mean)
    = 2 mean / sqrt(variance); for other compositions these are what the CLT of Dong, Roth
    and Su (2022, Thm 3.5: mu = 2K/s) and Sommer, Meiser & Mohammadi 2019, Thm 4 converge to, and G_mu may lie
    above or below the true trade-off function.

    Parameters
    ----------
    accountant : afa.Accountant
        A non-empty composition.
    estimate : {"variance", "mean", "ratio"}, default "variance"
        The formula (GDP_ESTIMATES): sqrt(variance), sqrt(2 mean) or 2 mean / sqrt(variance).

    Returns
    -------
    float
        The larger direction's value.

    Examples
    --------
    >>> import afa.views.clt
    >>> afa.views.clt.gdp_mu(afa.Accountant().compose(afa.Gaussian(1.0), 4))
    2.0
    """
    check.choice("estimate", estimate, GDP_ESTIMATES)
    values = []
    for loss_class in privacy_loss_class(accountant).values():
        mean, variance = loss_class.mean, loss_class.variance
        values.append({"variance": math.sqrt(variance), "mean": math.sqrt(max(2 * mean, 0.0)),
                       "ratio": 2 * mean / math.sqrt(variance) if variance > 0 else math.inf}[estimate])
    return max(values)


def third_absolute_moments(mechanism: Mechanism, neighboring: str = "add_remove") -> tuple[float, float]:
    """E|L - E L|^3 of the normalised finite loss of each direction of the mechanism.

    Finite losses sum over their atoms; subsampled Gaussian / Laplace losses integrate over
    the output of their noise pair; closed forms (Gaussian, Laplace, data-dependent Gaussian)
    and other numeric log-CFs use the characteristic function of Y = L - E L:

        E|Y|^3 = (12/pi) int_0^inf (Re psi(t) - 1 + E[Y^2] t^2 / 2) / t^4 dt,

    (from int_0^inf (cos u - 1 + u^2/2) u^-4 du = pi/12), cut at t = T: the tail
    int_T^inf (Re psi - 1) / t^4 dt is <= 0, so leaving it out gives an upper bound, too high by
    at most 8 / (pi T^3) <= 1e-10 E|Y|^3 (which keeps the Berry-Esseen bound valid).  Both
    integrals use composite Gauss-Legendre panels, doubled until two refinements agree to 1e-10.

    Parameters
    ----------
    mechanism : afa.Mechanism
        The mechanism (one use).
    neighboring : {"add_remove", "substitution", "replace_special"}, default "add_remove"
        The neighbouring relation.

    Returns
    -------
    tuple of float
        E|L - E L|^3 of the first and of the second direction of :meth:`afa.Mechanism.privacy_losses`
        (0 for a loss of zero variance).

    Raises
    ------
    afa.AccuracyError
        A log-CF known on the real line only that stops short of T.

    Examples
    --------
    >>> import afa.views.clt
    >>> [round(m, 6) for m in afa.views.clt.third_absolute_moments(afa.Gaussian(1.0))]  # 2 sqrt(2 / pi)
    [1.595769, 1.595769]
    """
    if not isinstance(mechanism, Mechanism):
        raise TypeError(f"mechanism must be an afa mechanism, got {type(mechanism).__name__}")
    check.choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
    first, second = mechanism.privacy_losses(neighboring)
    return _third_absolute_moment(first), _third_absolute_moment(second)


# -- helpers ------------------------------------------------------------------------------------------

def _directions(accountant: Accountant) -> dict[str, ComposedLoss]:
    if not isinstance(accountant, Accountant):
        raise TypeError(f"accountant must be an afa.Accountant, got {type(accountant).__name__}")
    if not accountant.mechanisms:
        raise ValueError("the accountant is empty: compose at least one mechanism first")
    return accountant.composed_losses


def _class(composed: ComposedLoss) -> LossClass:
    mean, variance = composed.cumulants
    return LossClass(mean, variance, composed.inf_mass + 0.0)  # (no -0.0)


@functools.lru_cache(maxsize=1024)
def _third_absolute_moment(loss: PrivacyLoss) -> float:
    mean, variance = loss.cumulants
    if variance <= 0:
        return 0.0
    if not loss.continuous:
        atoms = loss.atoms
        weights = np.exp(atoms.log_masses - logsumexp(atoms.log_masses))
        return float(np.dot(weights, np.abs(atoms.losses - mean) ** 3))
    if loss.noise_pair is not None:
        return _noise_pair_moment(loss.noise_pair, mean)
    return _characteristic_moment(loss, mean, variance)


def _noise_pair_moment(pair: NoiseMixturePair, mean: float) -> float:
    """int A(o) |L(o) - mean|^3 do over the output, with panel edges at the noise centres (Laplace kinks)."""
    centres = pair.shifts
    low, high = centres.min() - _NOISE_REACH * pair.scale, centres.max() + _NOISE_REACH * pair.scale

    def integrand(o: np.ndarray) -> np.ndarray:
        log_a, log_b = pair.log_ratios(o)
        return np.exp(pair.log_mu(o) + log_a) * np.abs(log_a - log_b - mean) ** 3

    return _panel_integral(integrand, low, high, centres, start=int(math.ceil((high - low) / pair.scale)))


def _characteristic_moment(loss: PrivacyLoss, mean: float, variance: float) -> float:
    """An upper bound on E|Y|^3 from psi(t) = phi(t) e^{-i mean t} / (1 - inf_mass), within 1e-10 relative.

    (12/pi) [int_0^T (Re psi - 1 + v t^2/2) / t^4 dt + v / (2T)]: the docstring of third_absolute_moments.
    """
    reach = _CF_REACH / math.sqrt(variance)

    def integrand(t: np.ndarray) -> np.ndarray:
        log_psi = loss.log_phi_numeric(t) - loss.log_finite_mass - 1j * mean * t
        real, phase = log_psi.real, log_psi.imag
        excess = np.expm1(real) * np.cos(phase) - 2 * np.sin(phase / 2) ** 2 + variance * t * t / 2
        return excess / t ** 4

    try:
        body = _panel_integral(integrand, 0.0, reach, np.empty(0), start=64)
    except AccuracyError as error:
        raise AccuracyError(f"the third absolute moment of this privacy loss needs its characteristic function "
                            f"up to t = {reach:.3g}, which is not available: {error}") from error
    return 12 / math.pi * (body + variance / (2 * reach))


def _panel_integral(integrand: Callable[[np.ndarray], np.ndarray], low: float, high: float,
                    breaks: np.ndarray, start: int) -> float:
    """int_low^high by composite GL_20 on ``start`` panels (plus ``breaks``), doubled until converged."""
    previous, panels = None, max(start, 1)
    while panels <= _MAX_PANELS:
        inner = breaks[(breaks > low) & (breaks < high)]
        edges = np.unique(np.concatenate((np.linspace(low, high, panels + 1), inner)))
        half = np.diff(edges)[:, None] / 2
        nodes = (edges[:-1, None] + half * (_GL_NODES + 1)).ravel()
        value = float(np.dot((half * _GL_WEIGHTS).ravel(), integrand(nodes)))
        if previous is not None and abs(value - previous) <= _RTOL * abs(value):
            return value
        previous, panels = value, 2 * panels
    raise AccuracyError("the third absolute moment's quadrature did not converge; please report the mechanism")


def _markov_direction(composed: ComposedLoss, epsilons: np.ndarray) -> np.ndarray:
    """omega + the Chernoff upper sum of :func:`markov_delta` for one direction, at each eps."""
    mean, variance = composed.cumulants
    scale = math.sqrt(variance) if variance > 0 else 1.0
    lambdas = np.geomspace(1e-3 / scale, 1e3 / scale, 400)
    log_mgfs = np.array([_composed_log_mgf(composed, float(lam)) for lam in lambdas])
    keep = np.isfinite(log_mgfs)
    lambdas, log_mgfs = lambdas[keep], log_mgfs[keep]
    cap = composed.log_finite_mass  # Pr[y <= L < inf] <= 1 - omega
    bounds = np.empty(epsilons.size)
    for index, eps in enumerate(epsilons):
        reach = max(60.0, mean + 40 * scale - eps)
        ys = eps + np.concatenate(([0.0], np.geomspace(1e-4 * scale, reach, 1500)))
        log_tails = np.minimum(np.min(log_mgfs[None, :] - np.outer(ys, lambdas), axis=1, initial=math.inf), cap)
        weights = np.append(np.log(-np.expm1(ys[:-1] - ys[1:])), 0.0)  # last cell: e^{eps - y_k} alone
        bounds[index] = composed.inf_mass + math.exp(float(logsumexp(log_tails + eps - ys + weights)))
    return bounds


def _composed_log_mgf(composed: ComposedLoss, s: float) -> float:
    """sum_i k_i log M_i(s) of the finite parts; +inf where a term's MGF is not available at s."""
    try:
        return sum(count * log_mgf(loss, s) for loss, count in composed.terms.items())
    except AccuracyError:
        return math.inf
