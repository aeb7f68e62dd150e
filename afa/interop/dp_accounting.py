"""afa and Google's ``dp_accounting``: DpEvent trees to afa compositions and back, and a PrivacyAccountant.

This module owns the mapping between ``dp_accounting``'s ``DpEvent`` classes and afa's mechanisms
(docs/interop.md has the table), the reverse mapping (:func:`to_dp_event`), and ``AfaPrivacyAccountant``:
a ``dp_accounting.PrivacyAccountant`` whose numbers are afa's.  ``dp_accounting`` is an optional
dependency: it is imported inside the functions that need it, never when this module is imported.

Units.  A ``GaussianDpEvent``'s noise multiplier is sigma / C for records of norm at most C, so
adding or removing a record moves the released sum by at most C and replacing one by up to 2C
(dp_accounting's PLD accountant uses the same doubling for REPLACE_ONE).  An afa mechanism's
``sensitivity`` is the shift of its dominating pair under the accountant's relation, so events read
under ``"substitution"`` (REPLACE_ONE) become mechanisms of sensitivity 2 (``LaplaceDpEvent`` and
``DiscreteLaplaceDpEvent`` likewise).  Two exceptions follow the pairs afa uses: the Poisson-subsampled
Gaussian under substitution is the mixture pair with shifts -C and +C (Google DP team 2025, Sec. 4.2),
built from a base of sensitivity C; a fixed-size subset (``SampledWithoutReplacementDpEvent``) is
analysed from the base's replacement pair (Zhu, Dong & Wang 2022, Thm 11(2)), so its base has
sensitivity 2C.  ``DiscreteGaussianDpEvent.sensitivity`` is the sensitivity of f itself and is taken as
given.

Relations.  ``NeighboringRelation.ADD_OR_REMOVE_ONE`` is afa's ``"add_remove"``, ``REPLACE_ONE`` its
``"substitution"`` and ``REPLACE_SPECIAL`` (a record replaced by a special one, Google DP team 2025, Sec. 3.6)
its ``"replace_special"``: additive noise (the special record contributes 0, so the pair is add/remove's),
(epsilon, delta)-DP, non-private, k-ary randomized response (the replace-special pair of Sec. 3.6),
permute-and-flip, the exponential mechanism, single-epoch tree aggregation and truncated Poisson sampling;
Poisson subsampling and the mixture of Gaussians under it are refused.

Truncated Poisson sampling (``TruncatedSubsampledGaussianDpEvent``) is :class:`afa.TruncatedPoissonGaussian`
under all three relations, with the pairs dp_accounting's PLD accountant builds (Google DP team 2025,
Sec. 4.3); they are dominating but not tight, so afa's results for it carry ``tight=False``.

Selection.  ``PermuteAndFlipDpEvent(epsilon)`` is :class:`afa.PermuteAndFlip` (the Laplace pair, as
dp_accounting's PLD accountant reads it) and ``ExponentialMechanismDpEvent(epsilon)`` is
:class:`afa.ExponentialMechanism` (the bounded-range pair of Dong, Durfee & Rogers 2020, below the pure
epsilon-DP pair dp_accounting's PLD accountant uses), under every relation; both pairs dominate without being
tight.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..accountant import Accountant
from ..mechanisms.catalog import (
    ApproxDP,
    DiscreteGaussian,
    DiscreteLaplace,
    ExponentialMechanism,
    Gaussian,
    KaryRandomizedResponse,
    Laplace,
    Mechanism,
    MixtureOfGaussians,
    PermuteAndFlip,
    RandomizedResponse,
)
from ..mechanisms.subsampling import Subsampled, TruncatedPoissonGaussian
from ..options import METHODS

#: The public names; ``AfaPrivacyAccountant`` (a dp_accounting subclass) is built on first access.
__all__ = ["UnsupportedDpEventError", "from_dp_event", "to_dp_event", "to_neighboring_relation"]

#: The relations a DpEvent may be read under (afa's three, dp_accounting's NeighboringRelation members).
RELATIONS = ("add_remove", "substitution", "replace_special")
#: The largest epsilon of an ExponentialMechanism; a larger one is read as the pure epsilon-DP pair.
MAX_EXPONENTIAL_EPSILON = 100.0
#: dp_accounting's NeighboringRelation member names and the relation each is read as.
ENUM_NAMES = {"ADD_OR_REMOVE_ONE": "add_remove", "REPLACE_ONE": "substitution", "REPLACE_SPECIAL": "replace_special"}
#: The largest count afa composes (its counts are exact floats up to there).
MAX_COUNT = 2 ** 53
#: One use of a mechanism whose output reveals the record: delta(eps) = 1 at every eps.
NON_PRIVATE = ApproxDP(epsilon=0.0, delta=1.0)

#: Why each event type afa refuses has no dominating pair here (type name -> reason).
REFUSED = {
    "UnsupportedDpEvent": "it marks an operation without a privacy analysis",
    "ZCDpEvent": "a zCDP (Renyi) bound is not a dominating pair: it does not determine the privacy profile, "
                 "only an upper bound on it",
    "RepeatAndSelectDpEvent": "its analysis (Papernot & Steinke 2022) is a Renyi-DP bound, not a dominating pair",
    "SampledWithReplacementDpEvent": "afa has no dominating pair for sampling with replacement",
}


class UnsupportedDpEventError(ValueError):
    """A DpEvent (or an afa mechanism) with no counterpart on the other side.

    Parameters
    ----------
    message : str
        What was refused and why; it names the event's type and its path in the tree.
    event : object, optional
        The refused ``DpEvent`` or afa mechanism.
    path : str, default ""
        Where it sits in the tree, e.g. ``"ComposedDpEvent.events[2] -> SelfComposedDpEvent.event -> ZCDpEvent"``.

    Examples
    --------
    >>> from afa.interop import UnsupportedDpEventError
    >>> issubclass(UnsupportedDpEventError, ValueError)
    True
    """

    def __init__(self, message: str, *, event: object = None, path: str = ""):
        super().__init__(message)
        self.event = event
        self.path = path


def _dp_event_module():
    try:
        from dp_accounting import dp_event
    except ImportError:
        raise ImportError("this needs the optional dependency dp_accounting: pip install 'afa[interop]' "
                          "(or pip install dp-accounting)") from None
    return dp_event


def _relation(neighboring: Any) -> str:
    """The relation named by an afa string or a dp_accounting NeighboringRelation member."""
    name = getattr(neighboring, "name", None)
    if not isinstance(neighboring, str) and name in ENUM_NAMES:
        return ENUM_NAMES[name]
    if isinstance(neighboring, str) and neighboring in RELATIONS:
        return neighboring
    raise ValueError(f"neighboring must be one of {', '.join(map(repr, RELATIONS))} or a "
                     f"dp_accounting.NeighboringRelation, got {neighboring!r}")


def _number(value: Any, name: str, where: str, *, positive: bool = False, low: float = 0.0,
            high: float = math.inf) -> float:
    """``value`` as a float in [low, high] (or (low, high] when ``positive``); the error names the parameter."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: {name} must be a real number, got {value!r}")
    number = float(value)
    if math.isnan(number) or number < low or number > high or (positive and number <= low):
        bound = f"({low:g}, {high:g}]" if positive else f"[{low:g}, {high:g}]"
        raise ValueError(f"{where}: {name} must be in {bound}, got {value!r}")
    return number


def _integer(value: Any, name: str, where: str, low: int = 0) -> int:
    """``value`` as an int >= low (an integral float is accepted); the error names the parameter."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: {name} must be an integer, got {value!r}")
    if isinstance(value, numbers.Integral):
        integer = int(value)
    elif math.isfinite(float(value)) and float(value).is_integer():
        integer = int(float(value))
    else:
        raise TypeError(f"{where}: {name} must be an integer, got {value!r}")
    if integer < low:
        raise ValueError(f"{where}: {name} must be an integer >= {low}, got {value!r}")
    return integer


# ---------------------------------------------------------------------------
# DpEvent -> afa
# ---------------------------------------------------------------------------

@dataclass
class _Use:
    count: int
    path: str


class _Reader:
    """Walks a DpEvent tree under one relation, collecting {mechanism: count} (a multiset, in order of appearance)."""

    def __init__(self, relation: str):
        self.relation = relation
        self.events = _dp_event_module()
        self.uses: dict[Mechanism, _Use] = {}

    def _is(self, event: Any, name: str) -> bool:
        cls = getattr(self.events, name, None)  # the classes a dp_accounting version lacks never match
        return cls is not None and isinstance(event, cls)

    def refuse(self, event: Any, path: str, reason: str) -> UnsupportedDpEventError:
        return UnsupportedDpEventError(f"{type(event).__name__} at {path} is not supported: {reason}",
                                       event=event, path=path)

    def add(self, mechanism: Mechanism | None, count: int, path: str, event: Any) -> None:
        if mechanism is None:
            return
        try:
            mechanism.privacy_losses(self.relation)  # fails here, with the path, when afa cannot serve it
        except (ValueError, TypeError) as error:
            raise self.refuse(event, path, str(error)) from None
        use = self.uses.setdefault(mechanism, _Use(0, path))
        use.count += count

    def walk(self, event: Any, count: int, prefix: str = "") -> None:
        """Add ``count`` uses of ``event`` (``prefix``: the path of its parent, ending in ' -> ')."""
        name = type(event).__name__
        path = prefix + name
        if not isinstance(event, self.events.DpEvent):
            raise TypeError(f"{path}: expected a dp_accounting DpEvent, got {event!r}")
        if self._is(event, "SelfComposedDpEvent"):
            times = _integer(event.count, "count", path)
            self.walk(event.event, count * times, f"{path}.event -> ")
        elif self._is(event, "ComposedDpEvent"):
            for index, child in enumerate(event.events):
                self.walk(child, count, f"{path}.events[{index}] -> ")
        elif self._is(event, "PoissonSampledDpEvent"):
            self.poisson(event, count, path)
        elif self._is(event, "SampledWithoutReplacementDpEvent"):
            self.subset(event, count, path)
        elif self._is(event, "TruncatedSubsampledGaussianDpEvent"):
            self.add(self.truncated(event, path), count, path, event)
        else:
            self.add(self.leaf(event, path, self.relation, doubled=self.relation == "substitution"), count, path, event)

    def poisson(self, event: Any, count: int, path: str) -> None:
        rate = _number(event.sampling_probability, "sampling_probability", path, high=1.0)
        if self.relation == "replace_special":
            raise self.refuse(event, path, "afa has no dominating pair for Poisson subsampling under REPLACE_SPECIAL "
                                           "(use ADD_OR_REMOVE_ONE or REPLACE_ONE)")
        if rate == 1:  # the whole dataset: the sub-event itself
            self.walk(event.event, count, f"{path}.event -> ")
            return
        base = self.base(event.event, f"{path}.event -> ", "add_remove")
        if rate == 0 or base is None:
            return
        self.add(self.sampled(base, rate, "poisson", event, path), count, path, event)

    def subset(self, event: Any, count: int, path: str) -> None:
        size = _integer(event.source_dataset_size, "source_dataset_size", path, low=1)
        sample = _integer(event.sample_size, "sample_size", path)
        if sample > size:
            raise ValueError(f"{path}: sample_size must be <= source_dataset_size ({size}), got {sample}")
        if self.relation != "add_remove":
            raise self.refuse(event, path, "afa analyses a fixed-size subset from the base's replacement pair with "
                                           "an add_remove accountant (Zhu, Dong & Wang 2022, Thm 11(2)); read the "
                                           "event with neighboring='add_remove'")
        base = self.base(event.event, f"{path}.event -> ", "substitution")
        if sample == 0 or base is None:
            return
        self.add(self.sampled(base, sample / size, "subset", event, path), count, path, event)

    def truncated(self, event: Any, path: str) -> Mechanism | None:
        """Truncated Poisson sampling of a Gaussian (Google DP team 2025, Sec. 4.3): the event's noise multiplier
        is sigma / C for records of norm C, and its pair shifts by C (by -C and +C under REPLACE_ONE), as
        dp_accounting's PLD accountant builds it; a batch size above the dataset size never truncates."""
        size = _integer(event.dataset_size, "dataset_size", path)
        rate = _number(event.sampling_probability, "sampling_probability", path, high=1.0)
        batch = _integer(event.truncated_batch_size, "truncated_batch_size", path)
        multiplier = _number(event.noise_multiplier, "noise_multiplier", path, high=1e300)
        if rate == 0 or batch == 0 or size == 0:
            return None  # no record is ever used (dp_accounting's PLD accountant skips these too)
        if multiplier == 0:
            return NON_PRIVATE
        try:
            return TruncatedPoissonGaussian(sigma=multiplier, sampling_rate=rate, batch_size=min(batch, size),
                                            dataset_size=size)
        except (ValueError, TypeError) as error:
            raise self.refuse(event, path, str(error)) from None

    def sampled(self, base: Mechanism, rate: float, scheme: str, event: Any, path: str) -> Mechanism:
        if base == NON_PRIVATE:
            # The base's pair has disjoint supports: the sampled pair ((1 - q) Q + q P, Q) puts mass q at
            # +infinity and none elsewhere off 0 (Zhu, Dong & Wang 2022, Thm 11), i.e. ApproxDP(0, q).
            return ApproxDP(epsilon=0.0, delta=rate)
        try:
            return base.poisson_subsampled(rate) if scheme == "poisson" else base.subset_subsampled(rate)
        except (ValueError, TypeError) as error:
            raise self.refuse(event, path, str(error)) from None

    def base(self, event: Any, prefix: str, convention: str) -> Mechanism | None:
        """The one mechanism a sampled sub-event stands for (None: no privacy cost).

        A composition of Gaussians on the same sample is one Gaussian with noise multiplier
        (sum_i k_i / s_i^2)^(-1/2) (McMahan et al. 2018, Sec. 3: stacked and rescaled, the queries are one
        vector query with unit noise), as dp_accounting's RDP accountant reads it; any other composition
        under sampling is refused.
        """
        path = prefix + type(event).__name__
        gaussians = self.gaussian_tree(event)
        if gaussians is not None and not self._is(event, "GaussianDpEvent"):
            inverse_squares = 0.0
            for multiplier, times in gaussians:
                if multiplier == 0:
                    return NON_PRIVATE
                inverse_squares += times / (multiplier * multiplier)
            if inverse_squares == 0:
                return None
            event = self.events.GaussianDpEvent(noise_multiplier=inverse_squares ** -0.5)
        elif self._is(event, "SelfComposedDpEvent") or self._is(event, "ComposedDpEvent") \
                or self._is(event, "PoissonSampledDpEvent") or self._is(event, "SampledWithoutReplacementDpEvent"):
            raise self.refuse(event, path, "a sampled sub-event must be one mechanism (or a composition of "
                                           "Gaussians, which is one Gaussian): afa subsamples a single dominating pair")
        relation = "substitution" if convention == "substitution" else self.relation
        return self.leaf(event, path, relation, doubled=convention == "substitution")

    def gaussian_tree(self, event: Any, times: int = 1) -> list[tuple[float, int]] | None:
        """[(noise multiplier, count)] of a tree of compositions of GaussianDpEvents, else None."""
        if self._is(event, "GaussianDpEvent"):
            return [(_number(event.noise_multiplier, "noise_multiplier", type(event).__name__), times)]
        if self._is(event, "SelfComposedDpEvent"):
            return self.gaussian_tree(event.event, times * _integer(event.count, "count", type(event).__name__))
        if self._is(event, "ComposedDpEvent"):
            parts = [self.gaussian_tree(child, times) for child in event.events]
            if any(part is None for part in parts):
                return None
            return [item for part in parts if part is not None for item in part]
        return None

    def leaf(self, event: Any, path: str, relation: str, doubled: bool) -> Mechanism | None:
        """The afa mechanism of one non-structural event (None: no privacy cost).

        ``doubled``: the event's norm bound C is read as a shift of 2C (a replacement).
        """
        factor = 2.0 if doubled else 1.0
        name = type(event).__name__
        if self._is(event, "NoOpDpEvent"):
            return None
        if self._is(event, "NonPrivateDpEvent"):
            return NON_PRIVATE
        if self._is(event, "GaussianDpEvent"):
            multiplier = _number(event.noise_multiplier, "noise_multiplier", path, high=1e300)
            return NON_PRIVATE if multiplier == 0 else Gaussian(sigma=multiplier, sensitivity=factor)
        if self._is(event, "LaplaceDpEvent"):
            multiplier = _number(event.noise_multiplier, "noise_multiplier", path, high=1e300)
            return NON_PRIVATE if multiplier == 0 else Laplace(scale=multiplier, sensitivity=factor)
        if self._is(event, "DiscreteLaplaceDpEvent"):
            decay = _number(event.noise_parameter, "noise_parameter", path, high=1e300)
            shift = _integer(event.sensitivity, "sensitivity", path)
            if shift == 0:
                return None
            return NON_PRIVATE if decay == 0 else DiscreteLaplace(a=decay, sensitivity=shift * int(factor))
        if self._is(event, "DiscreteGaussianDpEvent"):
            return self.discrete_gaussian(event, path)
        if self._is(event, "RandomizedResponseDpEvent"):
            return self.randomized_response(event, path, relation)
        if self._is(event, "MixtureOfGaussiansDpEvent"):
            return self.mixture(event, path, relation)
        if self._is(event, "EpsilonDeltaDpEvent"):
            epsilon = _number(event.epsilon, "epsilon", path)
            delta = _number(event.delta, "delta", path, high=1.0)
            return NON_PRIVATE if delta == 1 or math.isinf(epsilon) else ApproxDP(epsilon=epsilon, delta=delta)
        if self._is(event, "ExponentialMechanismDpEvent") or self._is(event, "PermuteAndFlipDpEvent"):
            epsilon = _number(event.epsilon, "epsilon", path)
            if epsilon == 0:
                return None  # the output does not depend on the data
            if math.isinf(epsilon):
                return NON_PRIVATE
            if self._is(event, "PermuteAndFlipDpEvent"):
                return PermuteAndFlip(epsilon=epsilon)
            if epsilon > MAX_EXPONENTIAL_EPSILON:
                # The (epsilon, 0)-DP pair dominates every epsilon-DP mechanism (Google DP team 2025, Sec. 3.7).
                return ApproxDP(epsilon=epsilon, delta=0.0)
            return ExponentialMechanism(epsilon=epsilon)
        if self._is(event, "SingleEpochTreeAggregationDpEvent"):
            return self.tree(event, path, relation)
        if name in REFUSED and isinstance(event, getattr(self.events, name, ())):
            raise self.refuse(event, path, REFUSED[name])
        raise self.refuse(event, path, "afa knows no dominating pair for this event type")

    def discrete_gaussian(self, event: Any, path: str) -> Mechanism | None:
        sigma = _number(event.sigma, "sigma", path, high=1e300)
        shift = _number(event.sensitivity, "sensitivity", path, high=1e300)
        if event.dimension != 1:
            # Canonne, Kamath & Steinke 2020, Sec. 4: the multivariate discrete Gaussian is not dominated by
            # the one-dimensional pair; dp_accounting accounts for it through a zCDP bound only.
            raise self.refuse(event, path, f"dimension={event.dimension!r}: afa has the dominating pair of the "
                                           "univariate discrete Gaussian only (dimension=1); a multivariate one "
                                           "has only a zCDP bound (Canonne, Kamath & Steinke 2020)")
        if shift == 0:
            return None
        if sigma == 0:
            return NON_PRIVATE
        if not shift.is_integer():
            raise ValueError(f"{path}: sensitivity must be an integer for the univariate discrete Gaussian, "
                             f"got {event.sensitivity!r}")
        return DiscreteGaussian(sigma=sigma, sensitivity=int(shift))

    def randomized_response(self, event: Any, path: str, relation: str) -> Mechanism | None:
        noise = _number(event.noise_parameter, "noise_parameter", path, high=1.0)
        buckets = _integer(event.num_buckets, "num_buckets", path, low=1)
        if relation == "add_remove":
            raise self.refuse(event, path, "randomized response is defined under REPLACE_ONE and REPLACE_SPECIAL "
                                           "(as in dp_accounting's accountants), not ADD_OR_REMOVE_ONE")
        if buckets == 1:
            return None
        p = randomized_response_p(noise, buckets)
        if relation == "substitution" and buckets == 2:
            return RandomizedResponse(p=p)
        return KaryRandomizedResponse(k=buckets, p=p)

    def mixture(self, event: Any, path: str, relation: str) -> Mechanism | None:
        if relation == "substitution":
            raise self.refuse(event, path, "the mixture's random sensitivity is defined for adding or removing a "
                                           "record (dp_accounting's PLD accountant refuses REPLACE_ONE too)")
        sigma = _number(event.standard_deviation, "standard_deviation", path, high=1e300)
        shifts = [_number(value, f"sensitivities[{index}]", path, high=1e300)
                  for index, value in enumerate(event.sensitivities)]
        weights = list(event.sampling_probs)
        if all(shift == 0 for shift in shifts):
            return None
        if sigma == 0:
            return NON_PRIVATE
        try:
            return MixtureOfGaussians(sensitivities=tuple(shifts), probabilities=tuple(weights), sigma=sigma)
        except (ValueError, TypeError) as error:
            raise type(error)(f"{path}: {error}") from None

    def tree(self, event: Any, path: str, relation: str) -> Mechanism | None:
        if relation != "replace_special":
            raise self.refuse(event, path, "tree aggregation is analysed under REPLACE_SPECIAL (Kairouz et al. 2021, "
                                           "App. D), as in dp_accounting's RDP accountant")
        multiplier = _number(event.noise_multiplier, "noise_multiplier", path, high=1e300)
        counts = event.step_counts
        counts = [counts] if isinstance(counts, numbers.Real) else list(counts)
        if not counts:
            raise ValueError(f"{path}: step_counts must be a non-negative integer or a non-empty list of them")
        steps = max(_integer(value, "step_counts", path) for value in counts)
        # A record sits in one leaf of one tree; the released nodes on its path to the root number
        # ceil(log2(steps + 1)) = steps.bit_length(), each with noise sigma = multiplier * C: a Gaussian
        # mechanism of L2 sensitivity C sqrt(depth) (Kairouz et al. 2021, App. D).
        depth = steps.bit_length()
        if depth == 0:
            return None
        return NON_PRIVATE if multiplier == 0 else Gaussian(sigma=multiplier, sensitivity=math.sqrt(depth))


def randomized_response_p(noise_parameter: float, num_buckets: int) -> float:
    """afa's probability of reporting the true value for dp_accounting's randomized response.

    dp_accounting's ``RandomizedResponseDpEvent(noise_parameter=r, num_buckets=k)`` keeps the input with
    probability 1 - r and otherwise outputs a uniform bucket, so the true value comes out with
    probability p = (1 - r) + r / k and each other value with r / k = (1 - p) / (k - 1): afa's
    ``KaryRandomizedResponse(k, p)`` (``RandomizedResponse(p)`` for k = 2).

    Parameters
    ----------
    noise_parameter : float
        r, in [0, 1].
    num_buckets : int
        k, at least 1.

    Returns
    -------
    float
        p, in [1/k, 1].

    Examples
    --------
    >>> from afa.interop.dp_accounting import randomized_response_p
    >>> randomized_response_p(0.5, 2), randomized_response_p(1.0, 4)
    (0.75, 0.25)
    """
    return min(1.0, (1.0 - noise_parameter) + noise_parameter / num_buckets)


def _read(event: Any, relation: str, count: int) -> _Reader:
    reader = _Reader(relation)
    reader.walk(event, count)
    return reader


def from_dp_event(event: Any, neighboring: Any = "add_remove", *, budget=None, options=None,
                  value_discretization_interval: float | None = None) -> Accountant:
    """The afa accountant of a ``dp_accounting`` DpEvent tree.

    Parameters
    ----------
    event : dp_accounting.DpEvent
        The tree: ``ComposedDpEvent`` and ``SelfComposedDpEvent`` nodes over the events of the mapping
        (docs/interop.md).  Identical sub-events anywhere in the tree add up to one count.
    neighboring : {"add_remove", "substitution", "replace_special"} or dp_accounting.NeighboringRelation
        The relation the event is read under: ADD_OR_REMOVE_ONE is "add_remove", REPLACE_ONE is
        "substitution", REPLACE_SPECIAL "replace_special" (see the module docstring for what it accepts).
    budget, options, value_discretization_interval
        Passed to :class:`afa.Accountant`.

    Returns
    -------
    afa.Accountant
        A new accountant with every mechanism of the tree composed its count; empty when the tree has no
        privacy cost (e.g. only ``NoOpDpEvent``).  ``NonPrivateDpEvent`` (and a noise multiplier of 0) is
        ``ApproxDP(epsilon=0, delta=1)``: delta = 1 at every epsilon, epsilon = inf at every delta < 1.

    Raises
    ------
    UnsupportedDpEventError
        An event with no afa counterpart under ``neighboring`` (e.g. ``ZCDpEvent``); the message names
        its type, its path in the tree and why.
    ValueError, TypeError
        An invalid parameter (a negative count or noise multiplier, ...) or ``neighboring``, named in the
        message with its path.
    ImportError
        dp_accounting is not installed.

    Examples
    --------
    >>> import dp_accounting
    >>> from afa.interop import from_dp_event
    >>> event = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(noise_multiplier=10.0), 100)
    >>> accountant = from_dp_event(event)
    >>> accountant.mechanisms
    {Gaussian(sigma=10.0, sensitivity=1.0): 100}
    >>> round(accountant.epsilon(1e-5), 4)
    4.3772
    """
    relation = _relation(neighboring)
    reader = _read(event, relation, 1)
    accountant = Accountant(reader.relation, value_discretization_interval, budget, options)
    _compose(accountant, reader)
    return accountant


def _compose(accountant: Accountant, reader: _Reader) -> None:
    for mechanism, use in reader.uses.items():
        if use.count == 0:
            continue
        if use.count > MAX_COUNT:
            raise ValueError(f"{use.path}: count is out of range: {use.count} uses of {mechanism!r} in all, "
                             f"above 2**53")
        try:
            accountant.compose(mechanism, use.count)
        except ValueError as error:
            raise ValueError(f"{use.path}: {error}") from None


# ---------------------------------------------------------------------------
# afa -> DpEvent
# ---------------------------------------------------------------------------

def to_dp_event(source: Accountant | Mechanism, neighboring: str = "add_remove"):
    """The ``dp_accounting`` DpEvent of an afa composition (or of one mechanism).

    Parameters
    ----------
    source : afa.Accountant or afa.Mechanism
        An accountant (its relation is used) or one mechanism.
    neighboring : {"add_remove", "substitution", "replace_special"}, default "add_remove"
        The relation ``source`` is analysed under, when it is a mechanism (ignored for an accountant).

    Returns
    -------
    dp_accounting.DpEvent
        One event per distinct mechanism, in a ``SelfComposedDpEvent`` when its count exceeds 1, all in a
        ``ComposedDpEvent`` when there are several (``NoOpDpEvent`` for an empty accountant).  Read it under
        :func:`to_neighboring_relation`'s relation: :func:`from_dp_event` under that relation gives an
        accountant with the same answers.

    Raises
    ------
    UnsupportedDpEventError
        A mechanism without a DpEvent equivalent (named in the message), e.g. ``ProposeTestRelease``,
        ``DataDependentGaussian``, ``DiscreteMechanism``, ``RandomizedResponse`` under "add_remove", or an
        event class this dp_accounting version lacks (``EpsilonDeltaDpEvent``, ``DiscreteGaussianDpEvent``).
    ImportError
        dp_accounting is not installed.

    Examples
    --------
    >>> import afa
    >>> from afa.interop import to_dp_event
    >>> to_dp_event(afa.Accountant().compose(afa.Gaussian(sigma=2.0), times=10))
    SelfComposedDpEvent(event=GaussianDpEvent(noise_multiplier=2.0), count=10)
    """
    events = _dp_event_module()
    if isinstance(source, Accountant):
        relation, uses = source.neighboring, source.mechanisms
    elif isinstance(source, Mechanism):
        relation, uses = _relation(neighboring), {source: 1}
    else:
        raise TypeError(f"source must be an afa.Accountant or an afa.Mechanism, got {type(source).__name__}")
    parts = []
    for mechanism, count in uses.items():
        event = _event(events, mechanism, relation)
        parts.append(event if count == 1 else events.SelfComposedDpEvent(event=event, count=count))
    if not parts:
        return events.NoOpDpEvent()
    return parts[0] if len(parts) == 1 else events.ComposedDpEvent(events=parts)


def _refuse_mechanism(mechanism: Mechanism, reason: str) -> UnsupportedDpEventError:
    return UnsupportedDpEventError(f"{mechanism!r} has no dp_accounting DpEvent: {reason}", event=mechanism,
                                   path=type(mechanism).__name__)


def _event(events: Any, mechanism: Mechanism, relation: str) -> Any:
    """The DpEvent of one use of ``mechanism`` under ``relation`` (the inverse of _Reader.leaf)."""
    factor = 2.0 if relation == "substitution" else 1.0
    if mechanism == NON_PRIVATE or (isinstance(mechanism, ApproxDP) and mechanism.delta == 1):
        return events.NonPrivateDpEvent()
    if isinstance(mechanism, Gaussian):
        return events.GaussianDpEvent(noise_multiplier=factor * mechanism.sigma / mechanism.sensitivity)
    if isinstance(mechanism, Laplace):
        return events.LaplaceDpEvent(noise_multiplier=factor * mechanism.scale / mechanism.sensitivity)
    if isinstance(mechanism, DiscreteLaplace):
        if relation == "substitution" and mechanism.sensitivity % 2:
            raise _refuse_mechanism(mechanism, "under REPLACE_ONE the event's sensitivity C moves the output by 2C, "
                                               "so an odd sensitivity has no equivalent")
        return events.DiscreteLaplaceDpEvent(noise_parameter=mechanism.a,
                                             sensitivity=mechanism.sensitivity // int(factor))
    if isinstance(mechanism, DiscreteGaussian):
        if mechanism.truncation is not None:
            raise _refuse_mechanism(mechanism, "DiscreteGaussianDpEvent has no truncation field (dp_accounting "
                                               "picks its own truncation bound)")
        if not hasattr(events, "DiscreteGaussianDpEvent"):
            raise _refuse_mechanism(mechanism, "this dp_accounting version has no DiscreteGaussianDpEvent")
        return events.DiscreteGaussianDpEvent(sigma=mechanism.sigma, sensitivity=float(mechanism.sensitivity),
                                              dimension=1)
    if isinstance(mechanism, RandomizedResponse):
        if relation != "substitution":
            raise _refuse_mechanism(mechanism, "its pair ((p, 1-p), (1-p, p)) is RandomizedResponseDpEvent's under "
                                               "REPLACE_ONE only; compose it in a substitution accountant, or use "
                                               "KaryRandomizedResponse(k=2, p) for REPLACE_SPECIAL")
        return events.RandomizedResponseDpEvent(noise_parameter=2.0 * (1.0 - mechanism.p), num_buckets=2)
    if isinstance(mechanism, KaryRandomizedResponse):
        k = mechanism.k
        return events.RandomizedResponseDpEvent(noise_parameter=min(1.0, (1.0 - mechanism.p) * k / (k - 1)),
                                                num_buckets=k)
    if isinstance(mechanism, ApproxDP):
        if not hasattr(events, "EpsilonDeltaDpEvent"):
            raise _refuse_mechanism(mechanism, "this dp_accounting version has no EpsilonDeltaDpEvent")
        return events.EpsilonDeltaDpEvent(epsilon=mechanism.epsilon, delta=mechanism.delta)
    if isinstance(mechanism, PermuteAndFlip):
        if not hasattr(events, "PermuteAndFlipDpEvent"):
            raise _refuse_mechanism(mechanism, "this dp_accounting version has no PermuteAndFlipDpEvent")
        return events.PermuteAndFlipDpEvent(epsilon=mechanism.epsilon)
    if isinstance(mechanism, ExponentialMechanism):
        if not hasattr(events, "ExponentialMechanismDpEvent"):
            raise _refuse_mechanism(mechanism, "this dp_accounting version has no ExponentialMechanismDpEvent")
        return events.ExponentialMechanismDpEvent(epsilon=mechanism.epsilon)
    if isinstance(mechanism, MixtureOfGaussians):
        if relation == "substitution":
            raise _refuse_mechanism(mechanism, "MixtureOfGaussiansDpEvent is read under add/remove only")
        return events.MixtureOfGaussiansDpEvent(standard_deviation=mechanism.sigma,
                                                sensitivities=list(mechanism.sensitivities),
                                                sampling_probs=list(mechanism.probabilities))
    if isinstance(mechanism, Subsampled):
        return _sampled_event(events, mechanism, relation)
    if isinstance(mechanism, TruncatedPoissonGaussian):
        if not hasattr(events, "TruncatedSubsampledGaussianDpEvent"):
            raise _refuse_mechanism(mechanism, "this dp_accounting version has no TruncatedSubsampledGaussianDpEvent")
        return events.TruncatedSubsampledGaussianDpEvent(
            dataset_size=mechanism.dataset_size, sampling_probability=mechanism.sampling_rate,
            truncated_batch_size=mechanism.batch_size, noise_multiplier=mechanism.sigma / mechanism.sensitivity)
    raise _refuse_mechanism(mechanism, "dp_accounting has no event for this mechanism")


def _sampled_event(events: Any, mechanism: Subsampled, relation: str) -> Any:
    base, rate = mechanism.base, mechanism.sampling_rate
    if isinstance(base, (RandomizedResponse, KaryRandomizedResponse)) and mechanism.scheme == "poisson":
        raise _refuse_mechanism(mechanism, "a Poisson-subsampled randomized response has no DpEvent reading "
                                           "(RandomizedResponseDpEvent is not defined under ADD_OR_REMOVE_ONE)")
    if mechanism.scheme == "poisson":
        if rate == 1:  # afa's q = 1 is the base under the accountant's relation
            return _event(events, base, relation)
        # Under substitution afa's pair is the mixture with shifts -C and +C of a base of sensitivity C.
        return events.PoissonSampledDpEvent(sampling_probability=rate, event=_event(events, base, "add_remove"))
    fraction = Fraction(rate).limit_denominator(10 ** 12)
    if fraction.numerator / fraction.denominator != rate:
        fraction = Fraction(rate)
    return events.SampledWithoutReplacementDpEvent(source_dataset_size=fraction.denominator,
                                                   sample_size=fraction.numerator,
                                                   event=_event(events, base, "substitution"))


def to_neighboring_relation(source: Accountant):
    """The ``dp_accounting.NeighboringRelation`` under which :func:`to_dp_event`'s event means ``source``.

    Parameters
    ----------
    source : afa.Accountant
        The composition.

    Returns
    -------
    dp_accounting.NeighboringRelation
        REPLACE_ONE for a "substitution" accountant, REPLACE_SPECIAL for "replace_special"; for "add_remove",
        REPLACE_SPECIAL when it holds k-ary randomized response (its afa "add_remove" pair is the replace-special
        pair), else ADD_OR_REMOVE_ONE.

    Raises
    ------
    UnsupportedDpEventError
        An "add_remove" accountant holding both k-ary randomized response and a subsampled mechanism: no one
        dp_accounting relation reads both.

    Examples
    --------
    >>> import afa
    >>> from afa.interop import to_neighboring_relation
    >>> to_neighboring_relation(afa.Accountant("substitution").compose(afa.Gaussian(1.0)))
    <NeighboringRelation.REPLACE_ONE: 2>
    """
    from dp_accounting import NeighboringRelation
    if not isinstance(source, Accountant):
        raise TypeError(f"source must be an afa.Accountant, got {type(source).__name__}")
    if source.neighboring == "substitution":
        return NeighboringRelation.REPLACE_ONE
    if source.neighboring == "replace_special":
        return NeighboringRelation.REPLACE_SPECIAL
    mechanisms = list(source.mechanisms)
    special = [m for m in mechanisms if isinstance(m, KaryRandomizedResponse)]
    if not special:
        return NeighboringRelation.ADD_OR_REMOVE_ONE
    sampled = [m for m in mechanisms if isinstance(m, (Subsampled, TruncatedPoissonGaussian))]
    if sampled:
        raise UnsupportedDpEventError(f"{special[0]!r} is read under REPLACE_SPECIAL and {sampled[0]!r} under "
                                      "ADD_OR_REMOVE_ONE: no one dp_accounting relation reads both",
                                      event=sampled[0], path=type(sampled[0]).__name__)
    return NeighboringRelation.REPLACE_SPECIAL


# ---------------------------------------------------------------------------
# dp_accounting.PrivacyAccountant
# ---------------------------------------------------------------------------

@functools.cache
def _accountant_class() -> type:
    import dp_accounting

    class AfaPrivacyAccountant(dp_accounting.PrivacyAccountant):
        """A ``dp_accounting.PrivacyAccountant`` answered by afa (tight epsilon and delta with sound bounds).

        Parameters
        ----------
        neighboring_relation : dp_accounting.NeighboringRelation, default ADD_OR_REMOVE_ONE
            The relation events are read under (:func:`afa.interop.from_dp_event`).
        method : {"auto", "exact", "quadrature", "contour", "certified", "pld"}, default "auto"
            afa's engine for every query.
        budget, options, value_discretization_interval
            Passed to the :class:`afa.Accountant` that holds the composition.

        Notes
        -----
        ``get_epsilon`` and ``get_delta`` are afa's :meth:`afa.Accountant.epsilon` and
        :meth:`afa.Accountant.delta`: the upper ends of afa's bounds.  With nothing composed both are 0.
        ``supports(event)`` is False for every event :func:`afa.interop.from_dp_event` would refuse or reject.
        """

        def __init__(self, neighboring_relation=dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, *,
                     method: str = "auto", budget=None, options=None,
                     value_discretization_interval: float | None = None):
            if not isinstance(neighboring_relation, dp_accounting.NeighboringRelation):
                raise TypeError("neighboring_relation must be a dp_accounting.NeighboringRelation, "
                                f"got {neighboring_relation!r}")
            if method not in METHODS:
                raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
            super().__init__(neighboring_relation)
            self._relation = _relation(neighboring_relation)
            self._method = method
            self._accountant = Accountant(self._relation, value_discretization_interval, budget, options)

        @property
        def accountant(self) -> Accountant:
            """The afa accountant holding the composition so far (live: it is the one queried)."""
            return self._accountant

        def supports(self, event) -> bool:
            """Whether ``event`` can be composed: False for every event :func:`afa.interop.from_dp_event` refuses."""
            try:
                _read(event, self._relation, 0)
            except (ValueError, TypeError):
                return False
            return True

        def _maybe_compose(self, event, count, do_compose):
            count = _integer(count, "count", "compose", low=0)
            try:
                reader = _read(event, self._relation, count)
            except UnsupportedDpEventError as error:
                return self.CompositionErrorDetails(invalid_event=error.event, error_message=str(error))
            if do_compose:
                _compose(self._accountant, reader)
            return None

        def get_epsilon(self, target_delta: float) -> float:
            """afa's epsilon at ``target_delta`` of everything composed so far (:meth:`afa.Accountant.epsilon`)."""
            if not self._accountant.mechanisms:
                return 0.0
            return float(self._accountant.epsilon(target_delta, self._method))

        def get_delta(self, target_epsilon: float) -> float:
            """afa's delta at ``target_epsilon`` of everything composed so far (:meth:`afa.Accountant.delta`)."""
            if not self._accountant.mechanisms:
                return 0.0
            return float(self._accountant.delta(target_epsilon, self._method))

    AfaPrivacyAccountant.__module__ = __name__
    return AfaPrivacyAccountant


def __getattr__(name: str) -> Callable[..., Any]:
    if name == "AfaPrivacyAccountant":
        return _accountant_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
