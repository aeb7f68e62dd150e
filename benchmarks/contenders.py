"""One question, asked of every library: a composition is described once, as a list of :class:`Term`, and
built into afa's Accountant or into a peer library's objects through that library's public API.

Peers (each optional; a missing one is reported as such): dp_accounting (Google; its PLDAccountant, and its
``privacy_loss_distribution`` builders for the mechanisms the accountant has no event for), prv_accountant
(Microsoft; PRVAccountant) and autodp (its analytic Gaussian, its RDP composition, and its
characteristic-function accountant "AFA", ``ComposeAFA``).  Neighbouring relation: add/remove for Gaussian,
Laplace, discrete Gaussian and subsampled Gaussian terms (each library's default); substitution for (k-ary)
randomized response, the relation dp_accounting's randomized-response PLD uses.

Every function here returns epsilon(delta) -- a float, or (lower, estimate, upper) for prv_accountant, or afa's
Result -- and raises :class:`NotSupported` when the library has no way to express the composition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from timing import clear_afa_caches

import afa

try:
    import dp_accounting
    from dp_accounting.pld import privacy_loss_distribution as dp_pld
except Exception:  # optional peer: absent, or failing to import here
    dp_accounting = dp_pld = None
try:
    import prv_accountant
    from prv_accountant import privacy_random_variables as prv_variables
except Exception:  # optional peer: absent, or failing to import here
    prv_accountant = prv_variables = None
try:
    from autodp import mechanism_zoo as autodp_mechanisms
    from autodp import transformer_zoo as autodp_transformers
except Exception:  # optional peer: absent, or failing to import here
    autodp_mechanisms = autodp_transformers = None

#: Distribution name of each peer (for versions and 'not installed').
PEER_PACKAGES = ("dp-accounting", "prv-accountant", "autodp")
INSTALLED = {"dp-accounting": dp_accounting is not None, "prv-accountant": prv_accountant is not None,
             "autodp": autodp_mechanisms is not None}


class NotSupported(Exception):
    """The library cannot express this composition (no such mechanism, or not under this relation)."""


@dataclass(frozen=True)
class Term:
    """``count`` uses of one mechanism.  kind: 'gaussian' (sigma), 'laplace' (scale), 'rr' (p: probability
    of the true bit), 'krr' (buckets, p: probability of the true value), 'dgauss' (sigma of the discrete
    Gaussian), 'subsampled_gaussian' (sigma, q: Poisson sampling rate), 'mog' (afa's MixtureOfGaussians with
    sensitivities (0, 1) of probabilities (1 - q, q) and noise sigma: the Poisson-subsampled Gaussian's pair,
    which is what the peers are given), 'ddg' (DataDependentGaussian: sigma of P, scale = sigma of Q).
    Sensitivity 1 throughout."""

    kind: str
    count: int
    sigma: float = math.nan
    q: float = math.nan
    scale: float = math.nan
    p: float = math.nan
    buckets: int = 2


def subsampled_terms(triples) -> list[Term]:
    """[(sigma, q, steps), ...] (the DP-SGD scripts' rows) as Terms."""
    return [Term("subsampled_gaussian", int(steps), sigma=float(sigma), q=float(q)) for sigma, q, steps in triples]


def neighboring(terms) -> str:
    return "substitution" if any(term.kind in ("rr", "krr") for term in terms) else "add_remove"


def kinds(terms) -> set[str]:
    return {term.kind for term in terms}


def rr_noise_parameter(term: Term) -> float:
    """dp_accounting's randomized-response noise parameter r (a uniformly random bucket with probability r) for
    afa's p (the true value with probability p = 1 - r + r / buckets)."""
    return (1 - term.p) * term.buckets / (term.buckets - 1)


# --------------------------------------------------------------------------- afa

def afa_mechanism(term: Term) -> afa.Mechanism:
    if term.kind == "gaussian":
        return afa.Gaussian(term.sigma)
    if term.kind == "laplace":
        return afa.Laplace(term.scale)
    if term.kind == "rr":
        return afa.RandomizedResponse(term.p)
    if term.kind == "krr":
        return afa.KaryRandomizedResponse(term.buckets, term.p)
    if term.kind == "dgauss":
        return afa.DiscreteGaussian(term.sigma)
    if term.kind == "subsampled_gaussian":
        return afa.Gaussian(term.sigma).poisson_subsampled(term.q)
    if term.kind == "mog":
        return afa.MixtureOfGaussians((0.0, 1.0), (1 - term.q, term.q), sigma=term.sigma)
    if term.kind == "ddg":
        return afa.DataDependentGaussian(term.sigma, term.scale, 1.0)
    raise NotSupported(term.kind)


def as_peers_see(terms) -> list[Term]:
    """The terms as the peers are given them: a 'mog' term as the Poisson-subsampled Gaussian of the same pair."""
    return [Term("subsampled_gaussian", term.count, sigma=term.sigma, q=term.q) if term.kind == "mog" else term
            for term in terms]


def afa_epsilon(terms, delta: float, method: str = "auto", options=None) -> afa.Result:
    """epsilon_result(delta, method) on a fresh accountant (with ``options``, an afa.Options, if given), afa's
    per-mechanism caches cleared (cold)."""
    clear_afa_caches()
    accountant = afa.Accountant(neighboring(terms), options=options)
    for term in terms:
        accountant.compose(afa_mechanism(term), times=term.count)
    return accountant.epsilon_result(delta, method=method)


# --------------------------------------------------------------------------- dp_accounting

def _require(module, package: str) -> None:
    if module is None:
        raise NotSupported(f"{package} is not installed")


def dp_event(terms):
    """The DpEvent of a composition of Gaussian, Laplace and Poisson-subsampled Gaussian terms."""
    _require(dp_accounting, "dp-accounting")
    events = []
    for term in as_peers_see(terms):
        if term.kind == "gaussian":
            event = dp_accounting.GaussianDpEvent(term.sigma)
        elif term.kind == "laplace":
            event = dp_accounting.LaplaceDpEvent(term.scale)
        elif term.kind == "subsampled_gaussian":
            event = dp_accounting.PoissonSampledDpEvent(term.q, dp_accounting.GaussianDpEvent(term.sigma))
        else:
            raise NotSupported(f"dp_accounting's accountants have no event for {term.kind}")
        events.append(dp_accounting.SelfComposedDpEvent(event, term.count))
    return events[0] if len(events) == 1 else dp_accounting.ComposedDpEvent(events)


def dp_pld_epsilon(terms, delta: float) -> float:
    """dp_accounting's PLDAccountant with its defaults (pessimistic PLD, value_discretization_interval 1e-4);
    (k-ary) randomized response and the discrete Gaussian, which it has no event for, through the
    ``privacy_loss_distribution`` builders with the same defaults, self-composed."""
    _require(dp_accounting, "dp-accounting")
    if kinds(terms) & {"rr", "krr", "dgauss"}:
        if len(terms) != 1:
            raise NotSupported("one randomized-response / discrete-Gaussian term at a time")
        term, = terms
        if term.kind == "dgauss":
            pld = dp_pld.from_discrete_gaussian_mechanism(term.sigma)
        else:
            pld = dp_pld.from_randomized_response(rr_noise_parameter(term), term.buckets)
        return pld.self_compose(term.count).get_epsilon_for_delta(delta)
    accountant = dp_accounting.pld.PLDAccountant()
    accountant.compose(dp_event(terms))
    return accountant.get_epsilon(delta)


def dp_rdp_epsilon(terms, delta: float) -> float:
    """dp_accounting's RdpAccountant (an upper bound)."""
    accountant = dp_accounting.rdp.RdpAccountant()
    accountant.compose(dp_event(terms))
    return accountant.get_epsilon(delta)


def dp_gaussian_pld_epsilon(triples, delta: float, interval: float, pessimistic: bool, use_connect_dots: bool,
                            log_mass_truncation_bound: float | None = None,
                            tail_mass_truncation: float | None = None) -> float:
    """eps from dp_accounting's PLDs of Poisson-subsampled Gaussians [(sigma, q, steps), ...] built with
    ``from_gaussian_mechanism`` at an explicit grid ``interval`` and estimate type, self-composed and composed;
    the truncation arguments are passed only when given (else dp_accounting's defaults)."""
    _require(dp_pld, "dp-accounting")
    build = {} if log_mass_truncation_bound is None else {"log_mass_truncation_bound": log_mass_truncation_bound}
    compose = {} if tail_mass_truncation is None else {"tail_mass_truncation": tail_mass_truncation}
    total = None
    for sigma, q, steps in triples:
        pld = dp_pld.from_gaussian_mechanism(sigma, sampling_prob=q, value_discretization_interval=interval,
                                             pessimistic_estimate=pessimistic, use_connect_dots=use_connect_dots,
                                             **build)
        pld = pld.self_compose(steps, **compose)
        total = pld if total is None else total.compose(pld, **compose)
    return total.get_epsilon_for_delta(delta)


# --------------------------------------------------------------------------- prv_accountant

def prv_variable(term: Term):
    if term.kind == "gaussian":
        return prv_variables.GaussianMechanism(noise_multiplier=term.sigma)
    if term.kind == "laplace":  # its parameter is the loss bound Delta / b
        return prv_variables.LaplaceMechanism(mu=1.0 / term.scale)
    if term.kind == "rr":  # pure eps-DP's worst-case pair is binary randomized response
        return prv_variables.PureDPMechanism(eps=math.log(term.p / (1 - term.p)))
    if term.kind == "subsampled_gaussian":
        return prv_variables.PoissonSubsampledGaussianMechanism(sampling_probability=term.q,
                                                                noise_multiplier=term.sigma)
    raise NotSupported(f"prv_accountant has no privacy random variable for {term.kind}")


def prv_epsilon(terms, delta: float) -> tuple[float, float, float]:
    """(lower, estimate, upper) from PRVAccountant with eps_error = 0.01 and delta_error = delta / 1000 (what its
    deprecated Accountant wrapper uses)."""
    _require(prv_accountant, "prv-accountant")
    terms = as_peers_see(terms)
    prvs = [prv_variable(term) for term in terms]
    steps = [term.count for term in terms]
    accountant = prv_accountant.PRVAccountant(prvs=prvs, eps_error=0.01, delta_error=delta / 1000,
                                              max_self_compositions=steps)
    return accountant.compute_epsilon(delta=delta, num_self_compositions=steps)


# --------------------------------------------------------------------------- autodp

def autodp_gaussian_epsilon(terms, delta: float) -> float:
    """autodp's analytic composed Gaussian (ComposeGaussian of ExactGaussianMechanism): Gaussians only."""
    _require(autodp_mechanisms, "autodp")
    if kinds(terms) != {"gaussian"}:
        raise NotSupported("autodp's ComposeGaussian takes Gaussian mechanisms only")
    mechanisms = [autodp_mechanisms.ExactGaussianMechanism(sigma=term.sigma) for term in terms]
    composed = autodp_transformers.ComposeGaussian()(mechanisms, [term.count for term in terms])
    return composed.get_approxDP(delta)


def autodp_rdp_epsilon(terms, delta: float) -> float:
    """autodp's RDP composition (its default accountant; an upper bound), Poisson subsampling with its
    improved amplification bound."""
    _require(autodp_mechanisms, "autodp")
    mechanisms = []
    terms = as_peers_see(terms)
    for term in terms:
        if term.kind == "gaussian":
            mechanisms.append(autodp_mechanisms.GaussianMechanism(term.sigma))
        elif term.kind == "laplace":
            mechanisms.append(autodp_mechanisms.LaplaceMechanism(b=term.scale))
        elif term.kind == "rr":
            mechanisms.append(autodp_mechanisms.RandresponseMechanism(p=term.p))
        elif term.kind == "subsampled_gaussian":
            sample = autodp_transformers.AmplificationBySampling(PoissonSampling=True)
            mechanisms.append(sample(autodp_mechanisms.GaussianMechanism(term.sigma), term.q,
                                     improved_bound_flag=True))
        else:
            raise NotSupported(f"autodp has no RDP mechanism for {term.kind} here")
    composed = autodp_transformers.Composition()(mechanisms, [term.count for term in terms])
    return composed.get_approxDP(delta)


def autodp_afa_epsilon(terms, delta: float) -> float:
    """autodp's characteristic-function accountant (ComposeAFA of mechanisms with phi_off=False, as autodp's
    README shows); Poisson-subsampled Gaussians through AmplificationBySampling_pld, the larger of the
    remove-only and add-only compositions."""
    _require(autodp_mechanisms, "autodp")
    compose = autodp_transformers.ComposeAFA()
    if kinds(terms) == {"subsampled_gaussian"}:
        sides = []
        for relation in ("remove_only", "add_only"):
            sample = autodp_transformers.AmplificationBySampling_pld(PoissonSampling=True, neighboring=relation)
            mechanisms = [sample(autodp_mechanisms.GaussianMechanism(term.sigma, phi_off=False, RDP_off=True,
                                                                     approxDP_off=True), term.q)
                          for term in terms]
            sides.append(compose(mechanisms, [term.count for term in terms]).get_approxDP(delta))
        return max(sides)
    mechanisms = []
    for term in terms:
        if term.kind == "gaussian":
            mechanisms.append(autodp_mechanisms.GaussianMechanism(term.sigma, phi_off=False))
        elif term.kind == "laplace":
            mechanisms.append(autodp_mechanisms.LaplaceMechanism(b=term.scale, phi_off=False))
        elif term.kind == "rr":
            mechanisms.append(autodp_mechanisms.RandresponseMechanism(p=term.p, phi_off=False))
        else:
            raise NotSupported(f"autodp has no characteristic function for {term.kind}")
    return compose(mechanisms, [term.count for term in terms]).get_approxDP(delta)
