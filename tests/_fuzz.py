"""Seeded random heterogeneous compositions and the soundness checks run on them.

Shared by ``tests/test_fuzz.py`` (a small sample in the default run, a larger one under
``-m slow``) and ``benchmarks/fuzz.py`` (counts per check over >= 10^4 compositions).

Ground truth (no afa code involved):

* every mechanism whose privacy loss lives on a lattice -- randomized response, k-ary
  randomized response, discrete Laplace, discrete Gaussian -- is written down here from its
  definition as a pair of PMFs (P, Q) over outputs grouped by loss value; ``count`` uses are
  the ``count``-fold convolution of those PMFs (direct convolution of non-negative masses,
  so every composed mass has a relative error of a few ulps per convolution);
* Gaussians compose into one Gaussian pair N(mu, 1) vs N(0, 1) with
  mu^2 = sum_i k_i (sensitivity_i / sigma_i)^2 (Dong, Roth & Su 2022, Cor. 3.3; Sommer, Meiser
  & Mohammadi 2019, Thm 5);
* the hockey-stick divergence of (finite x Gaussian) is the mixture
  H_{e^eps}(P x N(mu, 1) || Q x N(0, 1)) = sum_o P(o) H_{e^{eps - l(o)}}(N(mu, 1) || N(0, 1)) + P[l = +inf],
  evaluated with mpmath at 30 digits.

Elsewhere (Laplace, subsampled Gaussians, compositions too large to enumerate) the checks are
across engines: afa's answer must overlap the PLD backend's certified bracket.
"""

from __future__ import annotations

import dataclasses
import math
import time

import mpmath
import numpy as np
import scipy.special

import afa

#: Most composed atoms the reference enumerates (product over distinct finite mechanisms).
MAX_REFERENCE_ATOMS = 40_000
#: Relative slack of a delta-space comparison against the reference (its own rounding).
REFERENCE_RTOL = 1e-9


@dataclasses.dataclass(frozen=True)
class Spec:
    """One mechanism of a fuzzed composition, as plain data."""

    kind: str
    params: tuple

    def build(self) -> afa.Mechanism:
        kind, params = self.kind, self.params
        if kind == "gaussian":
            return afa.Gaussian(sigma=params[0])
        if kind == "laplace":
            return afa.Laplace(params[0])
        if kind == "rr":
            return afa.RandomizedResponse(params[0])
        if kind == "krr":
            return afa.KaryRandomizedResponse(k=params[0], p=params[1])
        if kind == "dlap":
            return afa.DiscreteLaplace(a=params[0], sensitivity=params[1])
        if kind == "dgauss":
            return afa.DiscreteGaussian(sigma=params[0], sensitivity=params[1])
        if kind == "subsampled":
            return afa.Gaussian(sigma=params[0]).poisson_subsampled(params[1])
        raise ValueError(kind)

    def __repr__(self) -> str:
        names = {"gaussian": "Gaussian", "laplace": "Laplace", "rr": "RandomizedResponse",
                 "krr": "KaryRandomizedResponse", "dlap": "DiscreteLaplace", "dgauss": "DiscreteGaussian",
                 "subsampled": "Gaussian(...).poisson_subsampled"}
        return f"{names[self.kind]}{self.params!r}"


@dataclasses.dataclass(frozen=True)
class Composition:
    seed: int
    neighboring: str
    terms: tuple  # ((Spec, count), ...)
    deltas: tuple

    def accountant(self, budget: afa.Budget | None = None) -> afa.Accountant:
        acc = afa.Accountant(neighboring=self.neighboring, budget=budget)
        for spec, count in self.terms:
            acc.compose(spec.build(), times=count)
        return acc

    def __repr__(self) -> str:
        terms = ", ".join(f"{spec!r} x{count}" for spec, count in self.terms)
        return f"Composition(seed={self.seed}, {self.neighboring}, [{terms}], deltas={self.deltas})"


def _log_uniform(rng, low: float, high: float) -> float:
    return float(math.exp(rng.uniform(math.log(low), math.log(high))))


def random_spec(rng, kinds) -> Spec:
    kind = kinds[rng.integers(len(kinds))]
    if kind == "gaussian":
        return Spec(kind, (_log_uniform(rng, 0.5, 30.0),))
    if kind == "laplace":
        return Spec(kind, (_log_uniform(rng, 0.5, 30.0),))
    if kind == "rr":
        return Spec(kind, (float(rng.uniform(0.5, 0.95)),))
    if kind == "krr":
        k = int(rng.integers(3, 10))
        return Spec(kind, (k, float(rng.uniform(1.0 / k, 0.9))))
    if kind == "dlap":
        return Spec(kind, (_log_uniform(rng, 0.05, 2.0), int(rng.integers(1, 3))))
    if kind == "dgauss":
        return Spec(kind, (_log_uniform(rng, 0.7, 20.0), int(rng.integers(1, 3))))
    if kind == "subsampled":
        return Spec(kind, (_log_uniform(rng, 0.6, 5.0), _log_uniform(rng, 1e-3, 0.3)))
    raise ValueError(kind)


ALL_KINDS = ("gaussian", "laplace", "rr", "krr", "dlap", "dgauss", "subsampled")


def random_composition(seed: int, kinds=ALL_KINDS, max_count: int = 10_000, max_distinct: int = 5,
                       n_deltas: int = 2) -> Composition:
    """A composition of 1..max_distinct distinct mechanisms, counts log-uniform in [1, max_count],
    a random relation, and deltas log-uniform in [1e-30, 1e-3]."""
    rng = np.random.default_rng(seed)
    distinct = int(rng.integers(1, max_distinct + 1))
    terms = tuple((random_spec(rng, kinds), int(round(_log_uniform(rng, 1, max_count + 0.49)))) for _ in range(distinct))
    neighboring = ("add_remove", "substitution")[int(rng.integers(2))]
    deltas = tuple(sorted(_log_uniform(rng, 1e-30, 1e-3) for _ in range(n_deltas)))
    return Composition(seed, neighboring, terms, deltas)


# ---------------------------------------------------------------------------
# Ground truth
# ---------------------------------------------------------------------------

def _finite_law(spec: Spec, neighboring: str, count: int):
    """(losses, P masses, Q masses) of ``count`` uses of a finite-output mechanism, from its definition, or None.

    The loss of one use is log(P/Q)(o); outputs are grouped by loss value.  Lattice-valued
    losses (spacing * integer) compose by direct convolution of the masses; a two-valued loss
    off any common lattice composes binomially.  No mechanism here has mass at +-infinity.
    """
    kind, params = spec.kind, spec.params
    if kind == "rr":
        p = params[0]
        xi = math.log(p) - math.log1p(-p)
        return _lattice_law(xi, np.array([1, -1]), np.array([p, 1 - p]), np.array([1 - p, p]), count)
    if kind == "krr":
        k, p = params
        other = (1 - p) / (k - 1)
        if neighboring == "substitution":  # outputs: x, x', the k - 2 others
            xi = math.log(p) - math.log(other)
            return _lattice_law(xi, np.array([1, -1, 0]), np.array([p, other, (k - 2) * other]),
                                np.array([other, p, (k - 2) * other]), count)
        # replace-special: R(x) against R(bottom) uniform; two loss values on no common lattice
        return _binomial_law((p, 1 - p), (1 / k, (k - 1) / k), count)
    if kind == "dlap":
        a, s = params
        inner = np.arange(1, s)
        # cells x <= 0, 0 < x < s (each), x >= s; P is Q shifted by s; loss a(|x| - |x - s|)
        Q = np.concatenate(([1 / (1 + math.exp(-a))], math.tanh(a / 2) * np.exp(-a * inner),
                            [math.exp(-a * s) / (1 + math.exp(-a))]))
        indices = np.concatenate(([-s], 2 * inner - s, [s]))
        return _lattice_law(a, indices, Q[::-1], Q, count)
    if kind == "dgauss":
        sigma, s = params
        reach = int(math.ceil(45 * sigma)) + s + 2
        xs = np.arange(-reach, reach + s + 1)
        log_q = -xs.astype(float) ** 2 / (2 * sigma ** 2)
        log_p = -(xs - s).astype(float) ** 2 / (2 * sigma ** 2)
        log_norm = np.logaddexp.reduce(log_q)
        # loss (x^2 - (x - s)^2) / (2 sigma^2) = s / (2 sigma^2) * (2 x - s)
        return _lattice_law(s / (2 * sigma ** 2), 2 * xs - s, np.exp(log_p - log_norm), np.exp(log_q - log_norm),
                            count)
    return None


def _lattice_law(spacing: float, indices: np.ndarray, p: np.ndarray, q: np.ndarray, count: int):
    low, high = int(indices.min()), int(indices.max())
    if (high - low) * count + 1 > MAX_REFERENCE_ATOMS:
        return None
    P, Q = np.zeros(high - low + 1), np.zeros(high - low + 1)
    np.add.at(P, indices - low, p)
    np.add.at(Q, indices - low, q)
    P, Q = _power(P, count), _power(Q, count)
    keep = (P > 0) | (Q > 0)
    return spacing * (low * count + np.arange(P.size))[keep], P[keep], Q[keep]


def _binomial_law(p, q, count: int):
    j = np.arange(count + 1)
    log_choose = np.array([math.lgamma(count + 1) - math.lgamma(i + 1) - math.lgamma(count - i + 1) for i in j])
    losses = j * (math.log(p[0]) - math.log(q[0])) + (count - j) * (math.log(p[1]) - math.log(q[1]))
    P = np.exp(log_choose + j * math.log(p[0]) + (count - j) * math.log(p[1]))
    Q = np.exp(log_choose + j * math.log(q[0]) + (count - j) * math.log(q[1]))
    return losses, P, Q


def _power(masses: np.ndarray, count: int) -> np.ndarray:
    """count-fold self-convolution of non-negative masses on a lattice (binary powering)."""
    result, base = np.ones(1), masses
    while count:
        if count & 1:
            result = np.convolve(result, base)
        count >>= 1
        if count:
            base = np.convolve(base, base)
    return result


class Reference:
    """delta(eps) of a composition of Gaussians and finite-output mechanisms (``available``), from their definitions."""

    def __init__(self, composition: Composition):
        self.available = False
        mu2, laws, size = 0.0, [], 1
        for spec, count in composition.terms:
            if spec.kind == "gaussian":
                mu2 += count / spec.params[0] ** 2
                continue
            law = _finite_law(spec, composition.neighboring, count)
            if law is None:
                return
            size *= law[0].size
            if size > MAX_REFERENCE_ATOMS:
                return
            laws.append(law)
        self.mu = math.sqrt(mu2)
        losses, P, Q = np.zeros(1), np.ones(1), np.ones(1)
        for values, Pk, Qk in laws:
            losses = (losses[:, None] + values[None, :]).ravel()
            P, Q = np.outer(P, Pk).ravel(), np.outer(Q, Qk).ravel()
        # direction 0: L = log(P/Q) under P; direction 1: L' = log(Q/P) under Q
        self.directions = [(losses, P), (-losses, Q)]
        self.available = True

    def delta(self, epsilon: float) -> float:
        """The larger of the two directions' hockey-stick divergences, at 30 digits."""
        mpmath.mp.dps = 30
        best = mpmath.mpf(0)
        eps = mpmath.mpf(epsilon)
        for losses, masses in self.directions:
            total = mpmath.mpf(0)
            if self.mu == 0:
                keep = (losses > epsilon) & (masses > 0)
                for loss, mass in zip(losses[keep], masses[keep]):
                    total += mpmath.mpf(mass) * -mpmath.expm1(eps - mpmath.mpf(loss))
            else:
                mu = mpmath.mpf(self.mu)
                keep = masses > 0
                losses, masses = losses[keep], masses[keep]
                # Each atom adds at most mass * Phi(mu/2 - x/mu), x = eps - loss (the Gaussian's delta is below
                # its first term).  Largest bounds first; stop once the bounds left sum to < 1e-15 of the total.
                bounds = masses * scipy.special.ndtr(self.mu / 2 - (epsilon - losses) / self.mu)
                order = np.argsort(-bounds)
                left = np.cumsum(bounds[order][::-1])[::-1]
                for position, index in enumerate(order):
                    if total > 0 and left[position] < 1e-15 * float(total):
                        break
                    x = eps - mpmath.mpf(losses[index])
                    total += mpmath.mpf(masses[index]) * (mpmath.ncdf(-x / mu + mu / 2)
                                                          - mpmath.exp(x) * mpmath.ncdf(-x / mu - mu / 2))
            best = max(best, total)
        return float(best)


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------

@dataclasses.dataclass
class Outcome:
    """What one composition's checks found: a list of (check name, passed, detail)."""

    composition: Composition
    checks: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def record(self, name: str, passed: bool, detail: str = "") -> None:
        self.checks.append((name, bool(passed), detail))

    @property
    def failures(self) -> list:
        return [(name, detail) for name, passed, detail in self.checks if not passed]


def _slack(value: float) -> float:
    return value * (1 + REFERENCE_RTOL)


def check_composition(composition: Composition, *, budget_seconds: float = 30.0, cross_engines: bool = True,
                      extend: bool = True, slack_seconds: float = 5.0) -> Outcome:
    """Run every soundness check on ``composition`` and return what passed and failed.

    ``cross_engines`` compares with the PLD's certified bracket where no reference exists;
    ``extend`` adds one more mechanism and checks that eps does not decrease.
    """
    outcome = Outcome(composition)
    start = time.monotonic()
    acc = composition.accountant(afa.Budget(seconds=budget_seconds))
    reference = Reference(composition)
    answers = []
    for delta in composition.deltas:
        began = time.monotonic()
        try:
            result = acc.epsilon_result(delta)
        except afa.AccuracyError as error:
            outcome.record("auto answers", False, f"eps({delta:.3g}): {type(error).__name__}: {str(error)[:300]}")
            bracket = getattr(error, "bracket", None)
            outcome.record("a refusal carries a certified bracket", bracket is not None, f"eps({delta:.3g})")
            if bracket is not None and reference.available:
                at_lower = reference.delta(bracket.lower)
                outcome.record("lower bound <= truth", at_lower >= delta / (1 + REFERENCE_RTOL),
                               f"eps({delta:.3g}): refusal's lower {bracket.lower!r} has true delta {at_lower:.17g}")
            continue
        finally:
            took = time.monotonic() - began
            outcome.record("time within budget", took <= budget_seconds + slack_seconds, f"eps({delta:.3g}) {took:.1f} s")
        outcome.record("auto answers", True)
        finite = not math.isinf(result.upper)
        answers.append((delta, result))
        if reference.available:
            outcome.record("no inf where the truth is finite", finite,
                           f"eps({delta:.3g}) = {result!r}")
            if finite:
                at_upper = reference.delta(result.upper)
                outcome.record("upper bound >= truth", at_upper <= _slack(delta),
                               f"eps({delta:.3g}): upper {result.upper!r} has true delta {at_upper:.17g} ({result.method})")
                if result.lower > 0:
                    at_lower = reference.delta(result.lower)
                    outcome.record("lower bound <= truth", at_lower >= delta / (1 + REFERENCE_RTOL),
                                   f"eps({delta:.3g}): lower {result.lower!r} has true delta {at_lower:.17g} ({result.method})")
                # delta(eps) at the answer: its bounds contain the truth
                epsilon = result.value if math.isfinite(result.value) else result.lower
                try:
                    d = acc.delta_result(epsilon)
                except afa.AccuracyError as error:
                    outcome.record("auto answers", False, f"delta({epsilon!r}): {error}")
                else:
                    truth = reference.delta(epsilon)
                    outcome.record("delta bounds contain truth",
                                   d.lower <= _slack(truth) and truth <= _slack(d.upper),
                                   f"delta({epsilon!r}) = {d!r}, truth {truth:.17g}")
        else:
            outcome.record("finite answer", finite, f"eps({delta:.3g}) = {result!r}")
    # consistency across deltas: eps is non-increasing in delta
    for (d1, r1), (d2, r2) in zip(answers, answers[1:]):
        outcome.record("monotone in delta", r1.upper >= r2.lower * (1 - 1e-12),
                       f"eps({d1:.3g}) upper {r1.upper!r} < eps({d2:.3g}) lower {r2.lower!r}")
    if cross_engines and answers and not reference.available:
        for delta, result in answers:
            try:
                pld = acc.epsilon_result(delta, method="pld")
            except afa.AccuracyError:
                continue
            outcome.record("overlaps the PLD's certified bracket",
                           result.upper >= pld.lower * (1 - 1e-12) and result.lower <= pld.upper * (1 + 1e-12),
                           f"eps({delta:.3g}): auto {result!r} vs pld [{pld.lower!r}, {pld.upper!r}]")
            outcome.record("upper bound >= certified lower bound", result.upper >= pld.lower * (1 - 1e-12),
                           f"eps({delta:.3g}): upper {result.upper!r} < pld lower {pld.lower!r}")
    if extend and answers:
        delta, result = answers[0]
        rng = np.random.default_rng(composition.seed + 10 ** 9)
        extra = random_spec(rng, [spec.kind for spec, _ in composition.terms])
        bigger = dataclasses.replace(composition, terms=composition.terms + ((extra, 1),))
        try:
            grown = bigger.accountant(afa.Budget(seconds=budget_seconds)).epsilon_result(delta)
        except afa.AccuracyError as error:
            outcome.record("auto answers", False, f"with {extra!r} added, eps({delta:.3g}): {error}")
        else:
            outcome.record("adding a mechanism never lowers eps", grown.upper >= result.lower * (1 - 1e-12),
                           f"eps({delta:.3g}) {result!r}; with {extra!r} added {grown!r}")
    outcome.seconds = time.monotonic() - start
    return outcome
