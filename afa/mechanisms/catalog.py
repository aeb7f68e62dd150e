"""Mechanisms: parameters, dominating pairs and the privacy losses they induce.

Every mechanism is a small immutable, validated, hashable object that declares a
dominating pair (:meth:`Mechanism.dominating_pair`, a kind of :mod:`afa.mechanisms.pairs`) for
each neighbouring relation (Zhu, Dong & Wang 2022, Def. 7).  The accountant reads
:meth:`Mechanism.privacy_losses`: the two directions of that pair (Lemma 37) -- the
loss L = log(p/q)(o), o ~ P, and the loss L' = log(q/p)(o), o ~ Q.  Under
add/remove these are the *remove* and *add* directions; under substitution,
the pair and its swap.  The final delta is the larger of the two.  They come from the pair
(:func:`afa.mechanisms.pairs.privacy_losses`, which gives the pair shapes with closed forms theirs); a
mechanism whose parameters determine its losses more accurately than its pair's log-probabilities can
(randomized response, ApproxDP, the discrete Gaussian) or that declares no pair (propose-test-release) gives
them directly.

Sensitivity enters in one place per family: additive-noise mechanisms shift
their noise by ``sensitivity`` (given for the relation the accountant uses),
and finite-output mechanisms list the probabilities of their outputs.

:meth:`Mechanism.loss_tails` gives the same two directions as tails of the loss
(:mod:`afa.mechanisms.loss_tails`), what the discretized-PLD backend builds from: finite-output
mechanisms from the atoms of their privacy losses, the others from their noise.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import _validation as check
from .._lazy import special
from ..limits import MAX_MU
from ..results import UnsupportedCompositionError
from . import closed_forms, pairs
from .loss_tails import LaplaceTails, LossTails
from .noise_pair import NoiseMixturePair
from .pairs import FinitePair, QuadraticGaussianPair
from .privacy_loss import PrivacyLoss

#: The neighbouring relations: adding or removing a record, substituting one, and replacing one by a special
#: record bottom (Google DP team 2025, Sec. 3.6).  A mechanism serves those in its :attr:`Mechanism.relations`.
NEIGHBORING_RELATIONS = ("add_remove", "substitution", "replace_special")
#: The relations a mechanism serves unless it declares otherwise (:attr:`Mechanism.relations`).
CLASSICAL_RELATIONS = ("add_remove", "substitution")
#: Most outputs a discrete mechanism's noise may enumerate (its sensitivity and reach are bounded by it).
MAX_OUTPUTS = 2_000_000
#: Keys of a mechanism's table (:meth:`Mechanism.to_dict`) besides ``type`` and the constructor's arguments.
SAMPLING_KEYS = ("sampling_rate", "sampling")


#: The default ``tail_mass`` of :class:`DiscreteGaussian`: the noise mass sent to +infinity (pessimistic
#: truncation); the accountant widens every bound by the composed truncated mass (:attr:`Mechanism.truncated_mass`).
DISCRETE_GAUSSIAN_TAIL = 1e-60


def _discrete_gaussian_reach(tail_mass: float) -> float:
    """r with |x| <= r sigma holding all but ``tail_mass`` of the discrete Gaussian's mass (its enumerated
    support, see DiscreteGaussian._noise): the Gaussian tail bound 4 e^{-r^2 / 2}."""
    return math.sqrt(-2 * math.log(tail_mass / 4))


def _at_most(name: str, value: float, limit: float, what: str | Callable[[], str]) -> None:
    """Raise a ValueError naming ``name`` when the derived quantity ``value`` exceeds ``limit``; ``what`` describes
    the quantity (or makes its description, only then)."""
    if not value <= limit:
        what = what() if callable(what) else what
        raise ValueError(f"{name} is out of range: {what} must be <= {limit:.4g}, got {value:.4g}")


class Mechanism:
    """Base class of afa's mechanisms: an immutable, validated, hashable object declaring a dominating pair.

    Subclasses are frozen dataclasses that implement :meth:`dominating_pair` or, where a closed form
    exists, give their two privacy losses directly (by overriding the private ``_losses``).

    Notes
    -----
    A subclass that sets ``type_name`` (snake case, unique) is registered under it: :meth:`to_dict`
    writes that name and :meth:`from_dict` finds the class by it, so mechanisms defined outside afa
    serialise like afa's own once their module is imported.  A ``type_name`` that is not lower-case
    snake case, or that another class already registered, raises TypeError at class creation.

    Examples
    --------
    >>> import afa
    >>> mechanism = afa.Gaussian(sigma=2.0)
    >>> mechanism.to_dict()
    {'type': 'gaussian', 'sigma': 2.0, 'sensitivity': 1.0}
    >>> afa.Mechanism.from_dict(mechanism.to_dict()) == mechanism
    True
    """

    #: The name of this mechanism type in spec files and :meth:`to_dict` (empty: not serialisable).
    type_name: ClassVar[str] = ""
    _types: ClassVar[dict[str, type[Mechanism]]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("type_name", "")
        if not name:
            return
        if not isinstance(name, str) or _type_key(name) != name:
            raise TypeError(f"type_name must be a lower-case snake_case string, got {name!r}")
        known = Mechanism._types.get(name)
        if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
            raise TypeError(f"type_name {name!r} is already registered by {known.__module__}.{known.__qualname__}")
        Mechanism._types[name] = cls

    @staticmethod
    def types() -> dict[str, type[Mechanism]]:
        """Every registered mechanism type.

        Returns
        -------
        dict
            ``{type_name: class}`` for every subclass that sets ``type_name`` (a copy).

        Examples
        --------
        >>> import afa
        >>> afa.Mechanism.types()["laplace"] is afa.Laplace
        True
        """
        return dict(Mechanism._types)

    def to_dict(self) -> dict:
        """This mechanism as a spec-file table, ready for JSON or TOML.

        Returns
        -------
        dict
            ``{"type": type_name, parameter: value, ...}`` with one entry per constructor argument
            (sequences as lists of floats); :meth:`from_dict` inverts it exactly.

        Raises
        ------
        TypeError
            The class sets no ``type_name``.

        Examples
        --------
        >>> import afa
        >>> afa.Laplace(scale=2.0).to_dict()
        {'type': 'laplace', 'scale': 2.0, 'sensitivity': 1.0}
        """
        if not self.type_name:
            raise TypeError(f"{type(self).__name__} sets no type_name, so it cannot be written as a table")
        table: dict = {"type": self.type_name}
        for field in dataclasses.fields(self):  # type: ignore[arg-type]  # every mechanism is a dataclass
            if field.init:
                table[field.name] = _plain(getattr(self, field.name))
        return table

    @staticmethod
    def from_dict(table: Mapping) -> Mechanism:
        """The mechanism a spec-file table describes: the inverse of :meth:`to_dict`.

        Parameters
        ----------
        table : mapping
            ``type`` (a registered ``type_name``; any case, hyphens or underscores) and the class's
            constructor arguments, plus optionally ``sampling_rate`` and ``sampling`` ("poisson", the
            default, or "subset") for the mechanism run on a random subsample.

        Returns
        -------
        Mechanism
            An instance of the registered class, or an :class:`afa.Subsampled` of it when
            ``sampling_rate`` is given.

        Raises
        ------
        ValueError
            A missing, unknown or out-of-range key, named in the message.
        TypeError
            ``table`` is not a mapping, or a value of the wrong type.

        Examples
        --------
        >>> import afa
        >>> afa.Mechanism.from_dict({"type": "Randomized-Response", "p": 0.75})
        RandomizedResponse(p=0.75)
        >>> afa.Mechanism.from_dict({"type": "gaussian", "sigma": 2.0, "sampling_rate": 0.1})
        Subsampled(base=Gaussian(sigma=2.0, sensitivity=1.0), sampling_rate=0.1, scheme='poisson')
        """
        if not isinstance(table, Mapping):
            raise TypeError(f"a mechanism table must be a mapping (table/object), got {table!r}")
        names = ", ".join(Mechanism._types)
        if "type" not in table:
            raise ValueError(f"missing key 'type' (one of {names})")
        name = table["type"]
        if not isinstance(name, str) or _type_key(name) not in Mechanism._types:
            raise ValueError(f"unknown mechanism type {name!r} (expected one of {names})")
        cls = Mechanism._types[_type_key(name)]
        parameters = [(field.name, field.default is dataclasses.MISSING
                       and field.default_factory is dataclasses.MISSING)
                      for field in dataclasses.fields(cls) if field.init]  # type: ignore[arg-type]
        # A class whose own parameter is named like a sampling key (TruncatedPoissonGaussian's sampling_rate)
        # takes it as that parameter, not as a request to subsample.
        names_of = [parameter for parameter, _ in parameters]
        sampling_keys = [key for key in SAMPLING_KEYS if key not in names_of]
        allowed = names_of + sampling_keys
        for key in table:
            if key != "type" and key not in allowed:
                raise ValueError(f"unknown key {key!r} for mechanism {name!r} (allowed: {', '.join(allowed)})")
        for parameter, required in parameters:
            if required and parameter not in table:
                raise ValueError(f"mechanism {name!r} needs key {parameter!r}")
        mechanism = cls(**{key: value for key, value in table.items() if key != "type" and key not in sampling_keys})
        rate = table.get("sampling_rate") if "sampling_rate" in sampling_keys else None
        scheme = table.get("sampling") if "sampling" in sampling_keys else None
        if rate is None:
            if scheme is not None:
                raise ValueError("sampling needs a sampling_rate")
            return mechanism
        if scheme is None or scheme == "poisson":
            return mechanism.poisson_subsampled(rate)
        if scheme == "subset":
            return mechanism.subset_subsampled(rate)
        raise ValueError(f"sampling must be 'poisson' or 'subset', got {scheme!r}")

    def privacy_losses(self, neighboring: str = "add_remove") -> tuple[PrivacyLoss, PrivacyLoss]:
        """The two directions (L under P, L' under Q) of the dominating pair for ``neighboring``.

        Parameters
        ----------
        neighboring : {"add_remove", "substitution", "replace_special"}, default "add_remove"
            The neighbouring relation, one of :attr:`relations`.

        Returns
        -------
        tuple of afa.mechanisms.privacy_loss.PrivacyLoss
            (L = log(p/q)(o), o ~ P; L' = log(q/p)(o), o ~ Q) (Zhu, Dong & Wang 2022, Lemma 37): under
            add/remove and replace-special the *remove* and *add* directions.  A symmetric mechanism returns the
            same object twice.  Computed once per relation and cached.

        Raises
        ------
        ValueError
            An unknown ``neighboring``, or a relation the mechanism is not analysed under (not in
            :attr:`relations`; the message names the mechanism and the relation).
        NotImplementedError
            The mechanism neither declares a dominating pair nor gives its losses.

        Examples
        --------
        >>> import afa
        >>> first, second = afa.Gaussian(1.0).privacy_losses()
        >>> first is second
        True
        """
        self._require_relation(neighboring)
        return self._cached_losses(neighboring)

    @functools.cache
    def _cached_losses(self, neighboring: str) -> tuple[PrivacyLoss, PrivacyLoss]:
        return self._losses(neighboring)

    def gaussian_mu(self, neighboring: str = "add_remove") -> float | None:
        """mu when both directions of one use are the Gaussian mechanism's loss N(mu^2 / 2, mu^2), else None.

        The accountant composes such uses by adding mu^2 and answers them by the composed Gaussian's closed
        form (Sommer, Meiser & Mohammadi 2019, Thm 5), without forming their losses.  By default read off
        :meth:`privacy_losses`; a mechanism that knows its mu overrides this.

        Parameters
        ----------
        neighboring : {"add_remove", "substitution", "replace_special"}, default "add_remove"
            The neighbouring relation, one of :attr:`relations`.

        Returns
        -------
        float or None

        Raises
        ------
        ValueError
            As :meth:`privacy_losses`.

        Examples
        --------
        >>> import afa
        >>> afa.Gaussian(sigma=4.0, sensitivity=2.0).gaussian_mu()
        0.5
        >>> afa.Laplace(1.0).gaussian_mu() is None
        True
        """
        first, second = self.privacy_losses(neighboring)
        mu = first.gaussian_mu
        return mu if mu is not None and second.gaussian_mu == mu else None

    def dominating_pair(self, neighboring: str) -> pairs.AnyPair:
        """A dominating pair (P, Q) of one use under ``neighboring`` (Zhu, Dong & Wang 2022, Def. 7).

        The extension point: a mechanism defined outside afa implements this (returning an
        :class:`afa.mechanisms.pairs.FinitePair`, an :class:`afa.mechanisms.noise_pair.NoiseMixturePair`, an
        :class:`afa.mechanisms.pairs.QuadraticGaussianPair` or an :class:`afa.mechanisms.pairs.PairMixture` of
        noise-mixture pairs) and every engine that serves that kind of pair
        answers for it.

        Parameters
        ----------
        neighboring : {"add_remove", "substitution", "replace_special"}
            The neighbouring relation, one of :attr:`relations` (the accountant checks it before asking).

        Returns
        -------
        afa.mechanisms.pairs.FinitePair, afa.mechanisms.noise_pair.NoiseMixturePair,
        afa.mechanisms.pairs.QuadraticGaussianPair or afa.mechanisms.pairs.PairMixture
            Under add/remove, P is the output with the individual's record and Q without (the *remove*
            direction is L = log(P/Q) under P); under replace-special, P with the record x and Q with the
            special record bottom in its place (x -> bottom is the *remove* direction, Google DP team 2025,
            Sec. 3.6).

        Raises
        ------
        NotImplementedError
            Always, on the base class: a subclass that gives its privacy losses directly (e.g.
            :class:`afa.ProposeTestRelease`) need not implement it.

        Examples
        --------
        >>> import afa
        >>> import numpy as np
        >>> pair = afa.RandomizedResponse(0.75).dominating_pair("add_remove")
        >>> np.exp(pair.log_p).round(4).tolist(), np.exp(pair.log_q).round(4).tolist()
        ([0.75, 0.25], [0.25, 0.75])
        """
        raise NotImplementedError(f"{type(self).__name__} does not declare a dominating pair")

    @property
    def relations(self) -> tuple[str, ...]:
        """The neighbouring relations this mechanism declares a dominating pair for.

        :meth:`privacy_losses`, :meth:`loss_tails` and :meth:`afa.Accountant.compose` refuse any other with a
        ValueError naming the mechanism and the relation.  ("add_remove", "substitution") unless a class
        declares otherwise; a mechanism defined outside afa adds "replace_special" by overriding this.

        Examples
        --------
        >>> import afa
        >>> afa.Gaussian(1.0).relations
        ('add_remove', 'substitution', 'replace_special')
        >>> afa.RandomizedResponse(0.75).relations
        ('add_remove', 'substitution')
        """
        return self._relations

    #: What :attr:`relations` returns for a class that does not override it.
    _relations: ClassVar[tuple[str, ...]] = CLASSICAL_RELATIONS

    def _require_relation(self, neighboring: str) -> None:
        """Raise ValueError for an unknown relation or one this mechanism declares no pair for."""
        check.choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
        if neighboring not in self.relations:
            raise ValueError(f"{type(self).__name__} declares no dominating pair under neighboring={neighboring!r}: "
                             f"it is analysed under {', '.join(map(repr, self.relations))}")

    @property
    def declares_pair(self) -> bool:
        """Whether this mechanism's class implements :meth:`dominating_pair` (or gives its losses directly).

        :meth:`afa.Accountant.compose` accepts only mechanisms for which this is True.

        Examples
        --------
        >>> import afa
        >>> afa.Gaussian(1.0).declares_pair
        True
        """
        cls = type(self)
        return cls.dominating_pair is not Mechanism.dominating_pair or cls._losses is not Mechanism._losses

    def _losses(self, neighboring: str) -> tuple[PrivacyLoss, PrivacyLoss]:
        """The two directions of :meth:`dominating_pair`; mechanisms with closed forms override it."""
        return pairs.privacy_losses(self.dominating_pair(neighboring))

    @property
    def tight(self) -> bool:
        """Whether the dominating pair is tight: some pair of neighbouring datasets attains its privacy profile.

        Then a lower bound on the pair's delta(eps) or eps(delta) is one on the mechanism's.  A mechanism whose
        pair only dominates (an upper bound, e.g. truncated Poisson sampling, Google DP team 2025, Sec. 4.3)
        returns False, and every :class:`afa.Result` of a composition holding it has ``tight=False``: its
        ``upper`` still bounds the truth, its ``lower`` bounds the pair's profile only.  True by default.

        Examples
        --------
        >>> import afa
        >>> afa.Gaussian(1.0).tight, afa.ProposeTestRelease(epsilon=1.0, delta=1e-6).tight
        (True, False)
        """
        return True

    @property
    def truncated_mass(self) -> float:
        """An upper bound on the mass one use moves to +infinity by truncation; 0 when nothing is truncated.

        Truncation is a pessimistic change: delta is over-estimated by at most the composed sum of these.

        Examples
        --------
        >>> import afa
        >>> afa.Gaussian(1.0).truncated_mass
        0.0
        """
        return 0.0

    def loss_tails(self, neighboring: str = "add_remove") -> tuple[LossTails, LossTails]:
        """The two directions of :meth:`privacy_losses` (same order) as tails of their losses, for the PLD backend.

        Parameters
        ----------
        neighboring : {"add_remove", "substitution", "replace_special"}, default "add_remove"
            The neighbouring relation, one of :attr:`relations`.

        Returns
        -------
        tuple of afa.mechanisms.loss_tails.LossTails
            Finite-output mechanisms give the atoms of their privacy losses, the others tails derived
            from their noise (closed forms where the class has them).  Computed once per relation and cached.

        Raises
        ------
        ValueError
            An unknown ``neighboring``, or one not in :attr:`relations`.
        UnsupportedCompositionError
            A continuous privacy loss with neither a dominating pair nor closed-form tails
            (``method='pld'`` cannot hold it).

        Examples
        --------
        >>> import afa
        >>> remove, add = afa.Gaussian(1.0).loss_tails()
        >>> remove is add, remove.hockey_stick([1.0]).round(6).tolist()  # delta(1) of one use
        (True, [0.126937])
        """
        self._require_relation(neighboring)
        return self._cached_tails(neighboring)

    @functools.cache
    def _cached_tails(self, neighboring: str) -> tuple[LossTails, LossTails]:
        return self._tails(neighboring)

    def _tails(self, neighboring: str) -> tuple[LossTails, LossTails]:
        """From the atoms of :meth:`privacy_losses` (a finite loss), else from :meth:`dominating_pair`;
        mechanisms with closed-form tails override it."""
        first, second = self.privacy_losses(neighboring)
        if first.continuous or second.continuous:
            try:
                pair = self.dominating_pair(neighboring)
            except NotImplementedError:
                raise UnsupportedCompositionError(f"{type(self).__name__} has a continuous privacy loss but no "
                                                  "loss tails (method='pld' cannot hold it)") from None
            return pairs.loss_tails(pair)
        return pairs.atom_tails(first, second)

    def poisson_subsampled(self, sampling_rate: float | None = None, *, q: float | None = None) -> Mechanism:
        """This mechanism on a Poisson subsample with rate ``sampling_rate`` (Zhu, Dong & Wang 2022, Thm 11(1)).

        Parameters
        ----------
        sampling_rate : float
            The probability that each record is in the subsample, in [0, 1].
        q : float, optional
            Deprecated name of ``sampling_rate`` (warns; it goes in the next version).

        Returns
        -------
        afa.Subsampled
            ``Subsampled(self, sampling_rate, "poisson")``; see :mod:`afa.mechanisms.subsampling` for its
            dominating pair.

        Raises
        ------
        ValueError
            ``q`` out of range, or a base too sharp to subsample (:class:`afa.Subsampled`).
        TypeError
            This mechanism is itself subsampled.

        Examples
        --------
        >>> import afa
        >>> accountant = afa.Accountant().compose(afa.RandomizedResponse(0.75).poisson_subsampled(0.1))
        >>> round(accountant.delta(0.0), 6)
        0.05
        """
        from .subsampling import Subsampled
        return Subsampled(self, _sampling_rate(sampling_rate, q), "poisson")

    def subset_subsampled(self, sampling_rate: float | None = None, *, q: float | None = None) -> Mechanism:
        """This mechanism on a random fixed-size subset of m out of n records (Zhu, Dong & Wang 2022, Thm 11(2)).

        Parameters
        ----------
        sampling_rate : float
            The subset size m over the dataset size n, in [0, 1].
        q : float, optional
            Deprecated name of ``sampling_rate`` (warns; it goes in the next version).

        Returns
        -------
        afa.Subsampled
            ``Subsampled(self, sampling_rate, "subset")``, analysed under ``neighboring="add_remove"`` only, from the
            base's replacement pair (:mod:`afa.mechanisms.subsampling`).

        Raises
        ------
        ValueError
            ``q`` out of range, or a base too sharp to subsample (:class:`afa.Subsampled`).
        TypeError
            This mechanism is itself subsampled.

        Examples
        --------
        >>> import afa
        >>> mechanism = afa.RandomizedResponse(0.75).subset_subsampled(0.1)
        >>> mechanism.relations
        ('add_remove',)
        >>> round(afa.Accountant().compose(mechanism).delta(0.0), 6)
        0.05
        """
        from .subsampling import Subsampled
        return Subsampled(self, _sampling_rate(sampling_rate, q), "subset")

    @property
    def symmetric(self) -> bool:
        """Whether both directions have the same privacy-loss distribution (under add/remove).

        Examples
        --------
        >>> import afa
        >>> afa.Gaussian(1.0).symmetric, afa.KaryRandomizedResponse(k=3, p=0.5).symmetric
        (True, False)
        """
        first, second = self.privacy_losses("add_remove")
        return first is second


def _sampling_rate(sampling_rate, q):
    """The sampling rate given as ``sampling_rate`` or by its deprecated name ``q`` (one of them)."""
    sampling_rate = check.renamed("sampling_rate", sampling_rate, "q", q, depth=2)
    if sampling_rate is None:
        raise TypeError("sampling_rate is required: the probability that each record is in the subsample")
    return sampling_rate


def _type_key(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def _plain(value):
    """A field's value as JSON-ready data: numpy scalars as Python numbers, sequences as lists."""
    if isinstance(value, (tuple, list, np.ndarray)):
        return [_plain(item) for item in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mechanism):
        return value.to_dict()
    return value


# ---------------------------------------------------------------------------
# Continuous additive noise
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Gaussian(Mechanism):
    """The Gaussian mechanism: f(D) + N(0, sigma^2) for f of the given sensitivity.

    Parameters
    ----------
    sigma : float
        Standard deviation of the noise, > 0 (finite).
    sensitivity : float, default 1.0
        Sensitivity of f under the relation the accountant uses, > 0 (finite).  The ratio
        ``sensitivity / sigma`` must be <= :data:`afa.limits.MAX_MU` = 1e150 (the loss's variance is its square).

    Raises
    ------
    ValueError
        A parameter out of range.
    TypeError
        A parameter that is not a real number.

    Notes
    -----
    Dominating pair (P, Q) = (N(sensitivity, sigma^2), N(0, sigma^2)) under both relations.  The privacy
    loss is N(mu^2/2, mu^2) with mu = sensitivity / sigma, in both directions;
    log phi(t) = -mu^2 (t^2 - i t) / 2 (Zhu, Dong & Wang 2022, Table 2, Lemma 35).
    Under ``neighboring="replace_special"`` (Google DP team 2025, Sec. 3.6) the record x is replaced by the
    special record bottom, which contributes f = 0 to the released function (as dp_accounting reads it): the
    dataset with bottom in x's place gives the same output as the dataset without x, so the pair is the
    add/remove one, and ``sensitivity`` is the add/remove sensitivity.

    Examples
    --------
    >>> import afa
    >>> afa.Gaussian(sigma=2.0).mu
    0.5
    >>> round(afa.Accountant().compose(afa.Gaussian(1.0)).delta(1.0), 6)
    0.126937
    """

    type_name: ClassVar[str] = "gaussian"
    _relations: ClassVar[tuple[str, ...]] = NEIGHBORING_RELATIONS

    sigma: float
    sensitivity: float = 1.0

    def __post_init__(self):
        check.assign(self, sigma=check.positive("sigma", self.sigma),
             sensitivity=check.positive("sensitivity", self.sensitivity))
        _at_most("sigma", self.sensitivity / self.sigma, MAX_MU, lambda:
                 f"sensitivity / sigma (sigma={self.sigma:g}, sensitivity={self.sensitivity:g}; the loss's "
                 "variance is its square)")

    @property
    def mu(self) -> float:
        """sensitivity / sigma: the Gaussian-DP parameter of one use.

        Examples
        --------
        >>> import afa
        >>> afa.Gaussian(sigma=4.0, sensitivity=2.0).mu
        0.5
        """
        return self.sensitivity / self.sigma

    def dominating_pair(self, neighboring: str) -> NoiseMixturePair:
        """(N(sensitivity, sigma^2), N(0, sigma^2)) under every relation.

        Parameters
        ----------
        neighboring : {"add_remove", "substitution", "replace_special"}
            The neighbouring relation (one of :attr:`relations`; not checked here).  The pair is the same under
            all three (replace_special's is add_remove's, class Notes).

        Returns
        -------
        afa.mechanisms.noise_pair.NoiseMixturePair
            One Gaussian component of scale ``sigma`` shifted by ``sensitivity``, against the unshifted one.

        Examples
        --------
        >>> import afa
        >>> pair = afa.Gaussian(2.0).dominating_pair("add_remove")
        >>> pair.noise, pair.scale, pair.a_shifts, pair.b_shifts
        ('gaussian', 2.0, (1.0,), (0.0,))
        """
        return NoiseMixturePair("gaussian", self.sigma, (self.sensitivity,), (0.0,), (0.0,), (0.0,))

    def _losses(self, neighboring: str) -> tuple[PrivacyLoss, PrivacyLoss]:
        """The closed form of :meth:`dominating_pair`'s losses (:func:`afa.mechanisms.closed_forms.gaussian_losses`
        of mu, without building the pair)."""
        return closed_forms.gaussian_losses(self.mu)

    def gaussian_mu(self, neighboring: str = "add_remove") -> float | None:
        """:attr:`mu` under every relation (the losses :meth:`privacy_losses` gives carry the same mu); see
        :meth:`afa.Mechanism.gaussian_mu`.

        Parameters
        ----------
        neighboring : {"add_remove", "substitution", "replace_special"}, default "add_remove"
            The neighbouring relation (checked: an unknown one raises ValueError).

        Returns
        -------
        float

        Examples
        --------
        >>> import afa
        >>> afa.Gaussian(2.0).gaussian_mu("substitution")
        0.5
        """
        self._require_relation(neighboring)
        return self.mu

    def truncated_poisson_subsampled(self, sampling_rate: float, batch_size: int, dataset_size: int) -> Mechanism:
        """This mechanism on a truncated Poisson sample (Google DP team 2025, Sec. 4.3; Ganesh 2025).

        Each of the ``dataset_size`` records is sampled with probability ``sampling_rate``; a sample larger
        than ``batch_size`` is cut down to a uniformly random subset of ``batch_size`` records.

        Parameters
        ----------
        sampling_rate : float
            Each record's inclusion probability, in (0, 1].
        batch_size : int
            The largest batch B, an integer >= 1.
        dataset_size : int
            The number n of records, an integer >= ``batch_size``.

        Returns
        -------
        afa.TruncatedPoissonGaussian
            Its dominating pair is not tight (:attr:`afa.Mechanism.tight`).

        Raises
        ------
        ValueError, TypeError
            A parameter out of range or not an integer (named in the message).

        Examples
        --------
        >>> import afa
        >>> afa.Gaussian(1.1).truncated_poisson_subsampled(0.01, batch_size=120, dataset_size=10_000)
        TruncatedPoissonGaussian(sigma=1.1, sampling_rate=0.01, batch_size=120, dataset_size=10000, sensitivity=1.0)
        """
        from .subsampling import TruncatedPoissonGaussian
        return TruncatedPoissonGaussian(self.sigma, sampling_rate, batch_size, dataset_size, self.sensitivity)


@dataclass(frozen=True)
class Laplace(Mechanism):
    """The Laplace mechanism: f(D) + Lap(0, scale) for f of the given sensitivity.

    Parameters
    ----------
    scale : float
        Scale b of the Laplace noise (density ``e^{-|x|/b} / (2b)``), > 0 (finite).
    sensitivity : float, default 1.0
        Sensitivity of f under the relation the accountant uses, > 0 (finite).  The ratio
        ``sensitivity / scale`` (the largest loss) must be <= 1e300.

    Raises
    ------
    ValueError
        A parameter out of range.
    TypeError
        A parameter that is not a real number.

    Notes
    -----
    Dominating pair (P, Q) = (Lap(sensitivity, scale), Lap(0, scale)) under both relations
    (Zhu, Dong & Wang 2022, Table 2, Lemma 34).

    With a = sensitivity / scale the loss has atoms +a (mass 1/2) and -a
    (mass e^{-a}/2) and density e^{l/2 - a/2}/4 on (-a, a), so
    phi(t) = e^{iat}/2 + e^{-a-iat}/2 + (e^{iat} - e^{-a-iat}) / (2 (1 + 2it)),
    the same in both directions (:func:`afa.mechanisms.closed_forms.laplace_losses`).  (This is Lemma 34's first
    line with lambda = scale / sensitivity; the last line of its proof has a sign slip.)

    Under ``neighboring="replace_special"`` (Google DP team 2025, Sec. 3.6) the record x is replaced by the
    special record bottom, which contributes f = 0 to the released function (as dp_accounting reads it): the
    dataset with bottom in x's place gives the same output as the dataset without x, so the pair is the
    add/remove one, and ``sensitivity`` is the add/remove sensitivity.

    Examples
    --------
    >>> import afa
    >>> afa.Laplace(scale=2.0).epsilon0
    0.5
    >>> round(afa.Accountant().compose(afa.Laplace(1.0)).delta(0.5), 6)
    0.221199
    """

    type_name: ClassVar[str] = "laplace"
    _relations: ClassVar[tuple[str, ...]] = NEIGHBORING_RELATIONS

    scale: float
    sensitivity: float = 1.0

    def __post_init__(self):
        check.assign(self, scale=check.positive("scale", self.scale),
             sensitivity=check.positive("sensitivity", self.sensitivity))
        _at_most("scale", self.sensitivity / self.scale, check.MAX_LOSS, lambda:
                 f"sensitivity / scale (scale={self.scale:g}, sensitivity={self.sensitivity:g}; the largest loss)")

    @property
    def epsilon0(self) -> float:
        """sensitivity / scale: the pure-DP epsilon of one use.

        Examples
        --------
        >>> import afa
        >>> afa.Laplace(scale=0.5).epsilon0
        2.0
        """
        return self.sensitivity / self.scale

    def dominating_pair(self, neighboring: str) -> NoiseMixturePair:
        """(Lap(sensitivity, scale), Lap(0, scale)) under every relation.

        Parameters
        ----------
        neighboring : {"add_remove", "substitution", "replace_special"}
            The neighbouring relation (one of :attr:`relations`; not checked here).  The pair is the same under
            all three (replace_special's is add_remove's, class Notes).

        Returns
        -------
        afa.mechanisms.noise_pair.NoiseMixturePair
            One Laplace component of scale ``scale`` shifted by ``sensitivity``, against the unshifted one.

        Examples
        --------
        >>> import afa
        >>> pair = afa.Laplace(scale=2.0, sensitivity=0.5).dominating_pair("substitution")
        >>> pair.noise, pair.scale, pair.a_shifts, pair.b_shifts
        ('laplace', 2.0, (0.5,), (0.0,))
        """
        return NoiseMixturePair("laplace", self.scale, (self.sensitivity,), (0.0,), (0.0,), (0.0,))



@dataclass(frozen=True)
class DataDependentGaussian(Mechanism):
    """Gaussian noise whose variance depends on the data (Zhu, Dong & Wang 2022, App. A Example 15).

    Parameters
    ----------
    sigma1 : float
        Standard deviation of P's noise, > 0 (finite).
    sigma2 : float
        Standard deviation of Q's noise, > 0 (finite).
    sensitivity : float, default 0.0
        Distance between the two means, >= 0 (finite).  The three together must leave the loss's
        coefficients (:meth:`coefficients`) finite in both directions.

    Raises
    ------
    ValueError
        A parameter out of range, or parameters so far apart in scale that the coefficients overflow.
    TypeError
        A parameter that is not a real number.

    Notes
    -----
    Smooth-sensitivity style release (Nissim et al. 2007): the dominating pair is
    P = N(0, sigma1^2), Q = N(sensitivity, sigma2^2) (:class:`afa.mechanisms.pairs.QuadraticGaussianPair`), whose
    two privacy losses have closed forms; subsampling is not implemented for it (a subsampled version is
    refused with a ValueError).  Under add_remove the
    directions are remove (L = log(p/q)(X), X ~ P) and add (L' = log(q/p)(Y),
    Y ~ Q); "substitution" uses the same pair and its swap.  The two directions
    differ unless sigma1 == sigma2 (then it is an ordinary Gaussian shift).

    With X = s1 Z, Z ~ N(0, 1), and m = sensitivity, the remove loss is quadratic,
    L = alpha + beta Z + gamma Z^2 with

        alpha = log(s2/s1) + m^2 / (2 s2^2),  beta = -s1 m / s2^2,  gamma = (s1^2 - s2^2) / (2 s2^2);

    the add loss (Y = m + s2 Z) is the same with (s1, 0) and (s2, m) swapped:
    alpha' = log(s1/s2) + m^2 / (2 s1^2), beta' = s2 m / s1^2, gamma' = (s2^2 - s1^2) / (2 s1^2).
    Both have log phi(t) = i alpha t - log(1 - 2 i gamma t) / 2 - beta^2 t^2 / (2 (1 - 2 i gamma t))
    (:func:`afa.mechanisms.closed_forms.quadratic_gaussian_losses`).  A direction with gamma > 0 is unbounded
    above and heavy-tailed: its MGF M(s) = E[e^{sL}] exists only in the strip s < 1/(2 gamma), and
    its CF decays only like ``|t|^{-1/2}`` (the density of L has a 1/sqrt singularity at its minimum
    alpha - beta^2/(4 gamma)); a direction with gamma < 0 is bounded above by
    alpha - beta^2/(4 gamma), so its delta(eps) is 0 beyond that.

    Renyi DP: D_alpha(P||Q) = log M(alpha - 1) / (alpha - 1) is +infinity when
    alpha sigma2^2 + (1 - alpha) sigma1^2 <= 0 -- the remove direction's strip edge, reached only
    when sigma1 > sigma2 (sigma1^2 = 2, sigma2^2 = 1: every alpha >= 2, as in Example 15); the add
    direction D_alpha(Q||P) is infinite when alpha sigma1^2 + (1 - alpha) sigma2^2 <= 0 (only when
    sigma2 > sigma1).  The privacy profile stays finite and tight
    (:func:`afa.numerics.exact.data_dependent_gaussian_delta` for one use; uses sharing sigma1/sigma2, with any
    sensitivities and beside Gaussian mechanisms, compose to one noncentral chi-square integral,
    :mod:`afa.engines.quadratic`).

    Examples
    --------
    >>> import afa
    >>> mechanism = afa.DataDependentGaussian(sigma1=1.0, sigma2=1.5, sensitivity=1.0)
    >>> mechanism.symmetric
    False
    >>> round(afa.Accountant().compose(mechanism).delta(1.0), 6)
    0.200413
    """

    type_name: ClassVar[str] = "data_dependent_gaussian"

    sigma1: float
    sigma2: float
    sensitivity: float = 0.0

    def __post_init__(self):
        check.assign(self, sigma1=check.positive("sigma1", self.sigma1), sigma2=check.positive("sigma2", self.sigma2),
             sensitivity=check.non_negative("sensitivity", self.sensitivity))
        for direction in ("remove", "add"):
            if not all(math.isfinite(value) for value in self.coefficients(direction)):
                raise ValueError(f"sigma1={self.sigma1}, sigma2={self.sigma2} and sensitivity={self.sensitivity} "
                                 "are too far apart in scale: the privacy loss's coefficients overflow")

    def coefficients(self, direction: str = "remove") -> tuple[float, float, float]:
        """(alpha, beta, gamma) of the loss alpha + beta Z + gamma Z^2, Z ~ N(0, 1), of ``direction``.

        Parameters
        ----------
        direction : {"remove", "add"}
            The remove direction (L under P) or the add direction (L' under Q); formulas in the class docstring.

        Returns
        -------
        tuple of float
            (alpha, beta, gamma).

        Examples
        --------
        >>> import afa
        >>> [round(c, 4) for c in afa.DataDependentGaussian(1.0, 2.0, 1.0).coefficients("remove")]
        [0.8181, -0.25, -0.375]
        """
        check.choice("direction", direction, ("remove", "add"))
        if direction == "remove":
            return closed_forms.quadratic_coefficients(self.sigma1, self.sigma2, self.sensitivity, -1.0)
        return closed_forms.quadratic_coefficients(self.sigma2, self.sigma1, self.sensitivity, 1.0)

    def dominating_pair(self, neighboring: str) -> QuadraticGaussianPair:
        """(N(0, sigma1^2), N(sensitivity, sigma2^2)) under both relations (class Notes).

        Parameters
        ----------
        neighboring : {"add_remove", "substitution"}
            The neighbouring relation (one of :attr:`relations`; not checked here).

        Returns
        -------
        afa.mechanisms.pairs.QuadraticGaussianPair

        Examples
        --------
        >>> import afa
        >>> afa.DataDependentGaussian(1.0, 2.0, 0.5).dominating_pair("substitution")
        QuadraticGaussianPair(sigma_p=1.0, sigma_q=2.0, shift=0.5)
        """
        return QuadraticGaussianPair(self.sigma1, self.sigma2, self.sensitivity)


@dataclass(frozen=True)
class MixtureOfGaussians(Mechanism):
    """Gaussian noise with a random sensitivity (Google DP team 2025, Sec. 3.3).

    Parameters
    ----------
    sensitivities : sequence of float
        The possible sensitivities c_i sigma, each >= 0 (finite), at least one; ``max(sensitivities) / sigma``
        must be <= :data:`afa.limits.MAX_MU` = 1e150.
    probabilities : sequence of float
        Their probabilities p_i, in [0, 1], summing to 1 (to 1e-9), one per sensitivity.  Some
        sensitivity > 0 must have probability > 0.
    sigma : float
        Standard deviation of the Gaussian noise, > 0 (finite).

    Raises
    ------
    ValueError
        A parameter out of range, or the two sequences of different lengths.
    TypeError
        A parameter that is not real.

    Notes
    -----
    The sensitivity is ``sensitivities[i]`` with probability ``probabilities[i]``; the dominating pair
    (:meth:`dominating_pair`, Google DP team 2025, Sec. 3.3) is P = sum_i p_i N(Delta_i, sigma^2) against
    Q = N(0, sigma^2), Delta_i = ``sensitivities[i]``, the same under both relations.  The pair is
    asymmetric, so its two directions differ: L = log(P/Q)(o), o ~ P (the *remove* direction under
    add/remove) and L' = log(Q/P)(o), o ~ Q (the *add* direction, the swapped pair's).  It is a noise-mixture
    pair, so the engines derive what they need from it as for a Poisson-subsampled Gaussian: the
    moment-generating function M(s) = E_P[e^{sL}] = int P^{1+s} Q^{-s} do by quadrature over the output, for
    complex s too (:class:`afa.mechanisms.noise_pair.PairMGF`; so the contour method gives relative accuracy at any
    delta, and :func:`afa.views.rdp.renyi_divergence` applies), and the loss tails for the discretized PLD.  A
    single component of positive probability is a Gaussian mechanism (its closed form answers).  Poisson or
    subset subsampling of a mixture of several components is not implemented (a ValueError when its losses
    are asked for).

    Examples
    --------
    >>> import afa
    >>> mechanism = afa.MixtureOfGaussians(sensitivities=(0.0, 1.0), probabilities=(0.5, 0.5), sigma=1.0)
    >>> round(afa.Accountant().compose(mechanism).delta(0.5), 6)
    0.079945
    """

    type_name: ClassVar[str] = "mixture_of_gaussians"

    sensitivities: tuple
    probabilities: tuple
    sigma: float

    def __post_init__(self):
        sigma = check.positive("sigma", self.sigma)
        sensitivities = check.real_array("sensitivities", self.sensitivities)
        if sensitivities.ndim != 1 or sensitivities.size == 0 or np.any(sensitivities < 0):
            raise ValueError(f"sensitivities must be a non-empty sequence of numbers >= 0, got {self.sensitivities!r}")
        probabilities = check.probability_vector("probabilities", self.probabilities)
        if probabilities.size != sensitivities.size:
            raise ValueError("sensitivities and probabilities must have the same length, "
                             f"got {sensitivities.size} and {probabilities.size}")
        if not np.any((sensitivities > 0) & (probabilities > 0)):
            raise ValueError("sensitivities must have a positive value with positive probability")
        _at_most("sigma", float(np.max(sensitivities)) / sigma, MAX_MU, f"max(sensitivities) / sigma (sigma={sigma:g})")
        check.assign(self, sigma=sigma, sensitivities=tuple(map(float, sensitivities)),
             probabilities=tuple(map(float, probabilities)))

    def dominating_pair(self, neighboring: str) -> NoiseMixturePair:
        """(sum_i p_i N(Delta_i, sigma^2), N(0, sigma^2)) under both relations (Google DP team 2025, Sec. 3.3).

        Parameters
        ----------
        neighboring : {"add_remove", "substitution"}
            The neighbouring relation (the pair is the same under both).

        Returns
        -------
        afa.mechanisms.noise_pair.NoiseMixturePair
            Gaussian noise of scale ``sigma``: side A the components of positive probability, shifted by
            their sensitivities, with their probabilities normalised to sum to one (they are given to 1e-9);
            side B the unshifted noise.  Its swap is the other direction's pair.

        Examples
        --------
        >>> import afa
        >>> pair = afa.MixtureOfGaussians((0.0, 1.0), (0.5, 0.5), sigma=2.0).dominating_pair("add_remove")
        >>> pair.scale, pair.a_shifts, pair.b_shifts
        (2.0, (0.0, 1.0), (0.0,))
        """
        shifts = np.asarray(self.sensitivities)
        log_p = _log(self.probabilities)
        keep = log_p > -np.inf
        log_p = log_p[keep] - special.logsumexp(log_p[keep])
        return NoiseMixturePair("gaussian", self.sigma, tuple(shifts[keep].tolist()), tuple(log_p.tolist()),
                                (0.0,), (0.0,))


# ---------------------------------------------------------------------------
# Finite-output mechanisms
# ---------------------------------------------------------------------------

def _log(values) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(values, dtype=float))


@dataclass(frozen=True)
class RandomizedResponse(Mechanism):
    """Binary randomized response: report the true bit with probability p (Zhu, Dong & Wang 2022, Lemma 33).

    Parameters
    ----------
    p : float
        Probability of reporting the true bit, in [1/2, 1] (p = 1/2 is perfectly private, p = 1 not private).

    Raises
    ------
    ValueError
        ``p`` out of range.

    Notes
    -----
    Dominating pair P = (p, 1-p), Q = (1-p, p), the same under both relations.  The loss is
    +-xi, xi = log(p / (1 - p)), with masses p and 1 - p in both directions, and
    phi(t) = cos(xi t) + i (2p - 1) sin(xi t).

    Examples
    --------
    >>> import afa
    >>> round(afa.Accountant().compose(afa.RandomizedResponse(0.75)).delta(0.0), 6)
    0.5
    >>> round(afa.Accountant().compose(afa.RandomizedResponse(0.75), 3).epsilon(1e-3), 4)
    3.2935
    """

    type_name: ClassVar[str] = "randomized_response"

    p: float

    def __post_init__(self):
        check.assign(self, p=check.in_interval("p", self.p, 0.5, 1.0))

    def dominating_pair(self, neighboring: str) -> FinitePair:
        """(P, Q) = ((p, 1-p), (1-p, p)) over the two outputs (the same under both relations).

        Parameters
        ----------
        neighboring : {"add_remove", "substitution"}
            The neighbouring relation, one of :attr:`relations` (not checked here: :meth:`privacy_losses` and
            the accountant refuse "replace_special" for this mechanism).  The pair is the same under both.

        Returns
        -------
        afa.mechanisms.pairs.FinitePair
            Log-PMFs over the outputs (true bit, flipped bit).

        Examples
        --------
        >>> import afa
        >>> import numpy as np
        >>> pair = afa.RandomizedResponse(0.9).dominating_pair("substitution")
        >>> np.exp(pair.log_p).round(4).tolist(), np.exp(pair.log_q).round(4).tolist()
        ([0.9, 0.1], [0.1, 0.9])
        """
        return FinitePair(_log([self.p, 1 - self.p]), _log([1 - self.p, self.p]))

    def _losses(self, neighboring):
        if self.p == 1:
            return pairs.privacy_losses(self.dominating_pair(neighboring))
        return closed_forms.randomized_response_losses(self.p)  # xi relatively accurate near p = 1/2


@dataclass(frozen=True)
class KaryRandomizedResponse(Mechanism):
    """k-ary randomized response: output the true value with probability p, each other value with (1-p)/(k-1).

    Parameters
    ----------
    k : int
        Number of possible values, an integer in [2, 2**53].
    p : float
        Probability of outputting the true value, in [1/k, 1].

    Raises
    ------
    ValueError
        A parameter out of range.
    TypeError
        ``k`` is not an integer.

    Notes
    -----
    (Google DP team 2025, Sec. 3.6 writes the same mechanism with
    randomisation probability r = k (1 - p) / (k - 1).)  With k = 2 under substitution this is
    :class:`RandomizedResponse`.  The dominating pair:

    * substitution: the pair (R(x), R(x')) over the outputs {x, x', other};
    * replace_special: the pair (R(x), R(bottom)) of Sec. 3.6, R(bottom) uniform; its two directions differ:
      x -> bottom ("remove", the first) and bottom -> x ("add");
    * add_remove: the same replace-special pair (what afa used before it had the replace_special relation;
      kept so that existing compositions keep their numbers).

    Examples
    --------
    >>> import afa
    >>> round(afa.Accountant().compose(afa.KaryRandomizedResponse(k=4, p=0.7)).delta(0.5), 6)
    0.28782
    """

    type_name: ClassVar[str] = "kary_randomized_response"
    _relations: ClassVar[tuple[str, ...]] = NEIGHBORING_RELATIONS

    k: int
    p: float

    def __post_init__(self):
        k = check.positive_integer("k", self.k, minimum=2, maximum=check.MAX_COUNT)
        check.assign(self, k=k, p=check.in_interval("p", self.p, 1.0 / k, 1.0))

    def dominating_pair(self, neighboring: str) -> FinitePair:
        """(P, Q) over the outputs that matter (true value, one other value, the rest).

        Parameters
        ----------
        neighboring : {"add_remove", "substitution", "replace_special"}
            The neighbouring relation (one of :attr:`relations`; not checked here): "substitution" gives the
            substitution pair, the other two the replace-special pair (class Notes).

        Returns
        -------
        afa.mechanisms.pairs.FinitePair
            Under substitution P = (p, o, (k-2) o) and Q = (o, p, (k-2) o) with o = (1-p)/(k-1); under
            replace_special (and add_remove) P = (p, 1-p) and Q = (1/k, (k-1)/k) (the true value, any other).

        Examples
        --------
        >>> import afa
        >>> import numpy as np
        >>> pair = afa.KaryRandomizedResponse(k=4, p=0.7).dominating_pair("substitution")
        >>> np.exp(pair.log_p).round(4).tolist()
        [0.7, 0.1, 0.2]
        """
        k, p = self.k, self.p
        other = (1 - p) / (k - 1)
        if neighboring == "substitution":
            return FinitePair(_log([p, other, (k - 2) * other]), _log([other, p, (k - 2) * other]))
        return FinitePair(_log([p, 1 - p]), _log([1 / k, (k - 1) / k]))


@dataclass(frozen=True)
class ApproxDP(Mechanism):
    """The dominating pair of every (epsilon, delta)-DP mechanism (Google DP team 2025, Sec. 3.7, Theorem 1).

    Parameters
    ----------
    epsilon : float
        The mechanism's epsilon, in [0, 1e300].
    delta : float
        The mechanism's delta, in [0, 1].

    Raises
    ------
    ValueError
        A parameter out of range.

    Notes
    -----
    P = (delta, (1-delta) e^eps/(1+e^eps), (1-delta)/(1+e^eps), 0) and Q its
    reversal: loss +infinity with mass delta, +eps and -eps on the rest, the same in both directions
    and under every relation (epsilon and delta are the mechanism's for the relation the accountant uses).
    Its subsampled versions are those of this pair (Zhu, Dong & Wang 2022, Thm 11): e.g. Poisson sampling with
    rate q gives (log(1 + q (e^eps - 1)), q delta) under add/remove (Balle, Barthe & Gaboardi 2018, Thm 8).
    The mass at +infinity makes every Renyi divergence of order > 1 infinite.

    Examples
    --------
    >>> import afa
    >>> round(afa.Accountant().compose(afa.ApproxDP(epsilon=1.0, delta=1e-6), 2).delta(2.0), 8)
    2e-06
    """

    type_name: ClassVar[str] = "approx_dp"
    _relations: ClassVar[tuple[str, ...]] = NEIGHBORING_RELATIONS

    epsilon: float
    delta: float

    def __post_init__(self):
        check.assign(self, epsilon=check.in_interval("epsilon", self.epsilon, 0.0, check.MAX_LOSS),
             delta=check.in_interval("delta", self.delta, 0.0, 1.0))

    def _log_masses(self) -> tuple[float, float, float]:
        """log((1 - delta) e^eps / (1 + e^eps)), log((1 - delta) / (1 + e^eps)) and log(delta)."""
        eps = self.epsilon
        log_rest = math.log1p(-self.delta) if self.delta < 1 else -math.inf
        log_delta = math.log(self.delta) if self.delta > 0 else -math.inf
        return log_rest + eps - np.logaddexp(0.0, eps), log_rest - np.logaddexp(0.0, eps), log_delta

    def dominating_pair(self, neighboring: str) -> FinitePair:
        """P = (delta, (1-delta) e^eps/(1+e^eps), (1-delta)/(1+e^eps), 0) and Q its reversal, under every relation.

        Parameters
        ----------
        neighboring : {"add_remove", "substitution", "replace_special"}
            The neighbouring relation (one of :attr:`relations`; not checked here).

        Returns
        -------
        afa.mechanisms.pairs.FinitePair

        Examples
        --------
        >>> import afa
        >>> import numpy as np
        >>> pair = afa.ApproxDP(epsilon=np.log(3.0), delta=0.2).dominating_pair("add_remove")
        >>> np.exp(pair.log_p).round(6).tolist()
        [0.2, 0.6, 0.2, 0.0]
        """
        high, low, log_delta = self._log_masses()
        return FinitePair(np.array([log_delta, high, low, -np.inf]), np.array([-np.inf, low, high, log_delta]))

    def _losses(self, neighboring):
        high, low, _ = self._log_masses()
        # The finite losses are +-eps exactly (differences of the pair's log-probabilities are not), and delta
        # (exactly) sits at +infinity; symmetric.
        loss = PrivacyLoss.discrete([self.epsilon, -self.epsilon], [high, low], inf_mass=self.delta)
        return loss, loss


@dataclass(frozen=True)
class ProposeTestRelease(Mechanism):
    """Propose-test-release via distance to instability (Zhu, Dong & Wang 2022, App. A, Examples 14 and 16).

    dist_q(D) + Lap(1/epsilon) is compared with log(1/delta)/epsilon; above it
    q(D) is released without noise.

    Parameters
    ----------
    epsilon : float
        The test's Laplace noise has scale 1/epsilon; in (0, 1e300].
    delta : float
        The test's threshold is log(1/delta)/epsilon; in [0, 1).

    Raises
    ------
    ValueError
        A parameter out of range.

    Notes
    -----
    The privacy profile is the larger of a
    Laplace(scale 1/epsilon, sensitivity 1) profile and delta (Example 16); the
    dominating pair used here is their mixture: loss +infinity with mass
    ``delta``, otherwise the Laplace loss with a = epsilon.  Its profile,
    delta + (1 - delta) delta_Lap(eps), lies above both modes (so it is a valid
    dominating pair, Zhu, Dong & Wang 2022, Def. 7) and exceeds their maximum by at most
    delta * (1 - delta_Lap).  The mass at +infinity makes every Renyi divergence
    of order > 1 infinite, so RDP says nothing about this mechanism.

    The mechanism gives this loss directly (the same in both directions and under both relations) and
    does not implement :meth:`dominating_pair` (so a subsampled version is refused with a ValueError).

    Examples
    --------
    >>> import afa
    >>> round(afa.Accountant().compose(afa.ProposeTestRelease(epsilon=1.0, delta=1e-6)).delta(1.0), 8)
    1e-06
    """

    type_name: ClassVar[str] = "propose_test_release"

    epsilon: float
    delta: float

    @property
    def tight(self) -> bool:
        """False: the mixture pair's profile exceeds the larger of its two modes' (see Notes)."""
        return False

    def __post_init__(self):
        check.assign(self, epsilon=check.in_interval("epsilon", self.epsilon, 0.0, check.MAX_LOSS, low_open=True),
             delta=check.in_interval("delta", self.delta, 0.0, 1.0, high_open=True))

    def _losses(self, neighboring):
        return closed_forms.laplace_losses(self.epsilon, self.delta)

    def _tails(self, neighboring):
        tails = LaplaceTails(self.epsilon, self.delta)
        return tails, tails


#: The widest step of the grid of losses in [-epsilon, epsilon] on which ExponentialMechanism's pair is built; the grid
#: has at least 100 intervals.
EXPONENTIAL_MECHANISM_STEP = 0.02


@dataclass(frozen=True)
class PermuteAndFlip(Mechanism):
    """The permute-and-flip mechanism for selection (McKenna & Sheldon 2020), dominated by the Laplace pair.

    Candidates r with utilities u_r of sensitivity Delta are visited in a uniformly random order, and r is
    output with probability exp(epsilon (u_r - max_s u_s) / (2 Delta)) when visited; the mechanism is epsilon-DP.

    Parameters
    ----------
    epsilon : float
        The mechanism's epsilon under the relation the accountant uses, in (0, 1e300].

    Raises
    ------
    ValueError
        ``epsilon`` out of range.
    TypeError
        ``epsilon`` is not a real number.

    Notes
    -----
    Dominating pair: the Laplace mechanism's with scale 1/epsilon on a sensitivity-1 query,
    (Lap(1, 1/epsilon), Lap(0, 1/epsilon)), the same under every relation.  dp_accounting's development
    source (``PermuteAndFlipDpEvent``, 2025) states that the privacy-loss distribution of permute-and-flip is
    that of this Laplace mechanism and accounts for it so; afa relies only on domination, which its tests check
    against the exact output distributions of small instances.  The pair is attained at eps = 0 by two
    candidates (then the output is a threshold of the Laplace mechanism's), but afa does not show an instance
    attaining its whole profile, so :attr:`tight` is False.  It lies below the pure epsilon-DP pair
    (:class:`ApproxDP` with delta = 0): delta(0) = 1 - e^{-epsilon/2} against tanh(epsilon/2).

    Examples
    --------
    >>> import afa
    >>> round(afa.Accountant().compose(afa.PermuteAndFlip(epsilon=1.0)).delta(0.0), 6)  # 1 - e^{-1/2}
    0.393469
    >>> afa.Mechanism.from_dict(afa.PermuteAndFlip(0.5).to_dict())
    PermuteAndFlip(epsilon=0.5)
    """

    type_name: ClassVar[str] = "permute_and_flip"
    _relations: ClassVar[tuple[str, ...]] = NEIGHBORING_RELATIONS

    epsilon: float

    def __post_init__(self):
        check.assign(self, epsilon=check.in_interval("epsilon", self.epsilon, 0.0, check.MAX_LOSS, low_open=True))

    @property
    def tight(self) -> bool:
        """False: the Laplace pair dominates permute-and-flip, and is not shown attained (class Notes)."""
        return False

    def dominating_pair(self, neighboring: str) -> NoiseMixturePair:
        """(Lap(epsilon, 1), Lap(0, 1)): the Laplace pair with sensitivity / scale = epsilon, under every relation.

        Parameters
        ----------
        neighboring : {"add_remove", "substitution", "replace_special"}
            The neighbouring relation (one of :attr:`relations`; not checked here).  The pair is the same under
            all three.

        Returns
        -------
        afa.mechanisms.noise_pair.NoiseMixturePair
            One Laplace component of scale 1 shifted by ``epsilon``, against the unshifted one.

        Examples
        --------
        >>> import afa
        >>> pair = afa.PermuteAndFlip(epsilon=0.5).dominating_pair("replace_special")
        >>> pair.noise, pair.scale, pair.a_shifts, pair.b_shifts
        ('laplace', 1.0, (0.5,), (0.0,))
        """
        return NoiseMixturePair("laplace", 1.0, (self.epsilon,), (0.0,), (0.0,), (0.0,))



@dataclass(frozen=True)
class ExponentialMechanism(Mechanism):
    """The exponential mechanism for selection, analysed as epsilon-bounded-range (Dong, Durfee & Rogers 2020).

    Candidate r is output with probability proportional to exp(epsilon u_r / (2 Delta)) for utilities of
    sensitivity Delta (or exp(epsilon u_r / Delta) for utilities that move in one direction together): an
    epsilon-DP mechanism that is also epsilon-bounded-range, its privacy loss lying in an interval
    [t, t + epsilon] for every pair of neighbours (Durfee & Rogers 2019; Dong, Durfee & Rogers 2020).

    Parameters
    ----------
    epsilon : float
        The mechanism's epsilon under the relation the accountant uses, in (0, 100] (its pair has about
        100 max(1, epsilon) atoms).

    Raises
    ------
    ValueError
        ``epsilon`` out of range.
    TypeError
        ``epsilon`` is not a real number.

    Notes
    -----
    Every epsilon-bounded-range pair is dominated by a binary pair whose loss is t + epsilon or t, some
    t in [-epsilon, 0] (Dong, Durfee & Rogers 2020, Sec. 3): delta(eps') = E_P[(1 - e^{eps'} Y)_+] with
    Y = e^{-L} in [e^{-t-epsilon}, e^{-t}] and E_P[Y] = 1 is convex in Y, so it is largest when Y sits on the two
    ends.  The largest of these binary profiles over t (at e^t = e^{(eps' - epsilon)/2}) is

        H(eps') = (1 - e^{(eps' - epsilon)/2})^2 / (1 - e^{-epsilon})   for |eps'| <= epsilon,

    1 - e^{eps'} below and 0 above: the profile of the symmetric pair with densities proportional to e^{o/2} and
    e^{-o/2} on o in [-epsilon, epsilon] (its loss is o).  afa's pair is that profile's pessimistic
    connect-the-dots pair (Doroshenko et al. 2022, Sec. 4; Google DP team 2025, Sec. 2.2) on the grid of
    n + 1 equally spaced losses in [-epsilon, epsilon], n = max(100, ceil(2 epsilon / ``EXPONENTIAL_MECHANISM_STEP``))
    (:attr:`intervals`): its profile is H's
    chords in e^{eps'}, so at or above H (H is convex in e^{eps'}) and equal to it at the grid points.  Since a
    dominating pair dominates in both directions, the pair serves every relation and adaptive composition
    (Zhu, Dong & Wang 2022, Thm 10) -- an upper bound, not the optimal composition of Dong, Durfee & Rogers
    2020, so :attr:`tight` is False.  It lies below the pure epsilon-DP pair (:class:`ApproxDP` with delta = 0):
    delta(0) = tanh(epsilon / 4) (at a grid point) against tanh(epsilon / 2).

    Examples
    --------
    >>> import afa, math
    >>> round(afa.Accountant().compose(afa.ExponentialMechanism(epsilon=1.0)).delta(0.0), 6)
    0.244919
    >>> round(math.tanh(0.25), 6)
    0.244919
    """

    type_name: ClassVar[str] = "exponential_mechanism"
    _relations: ClassVar[tuple[str, ...]] = NEIGHBORING_RELATIONS

    epsilon: float

    def __post_init__(self):
        check.assign(self, epsilon=check.in_interval("epsilon", self.epsilon, 0.0, 100.0, low_open=True))

    @property
    def intervals(self) -> int:
        """n, the number of intervals of the pair's grid of losses (class Notes).

        Examples
        --------
        >>> import afa
        >>> afa.ExponentialMechanism(1.0).intervals, afa.ExponentialMechanism(4.0).intervals
        (100, 400)
        """
        return max(100, math.ceil(2 * self.epsilon / EXPONENTIAL_MECHANISM_STEP - 1e-9))

    @property
    def tight(self) -> bool:
        """False: the bounded-range pair is an upper bound for the exponential mechanism (class Notes)."""
        return False

    def dominating_pair(self, neighboring: str) -> FinitePair:
        """The connect-the-dots pair of the bounded-range profile H (class Notes), the same under every relation.

        Parameters
        ----------
        neighboring : {"add_remove", "substitution", "replace_special"}
            The neighbouring relation (one of :attr:`relations`; not checked here).  The pair is the same under
            all three.

        Returns
        -------
        afa.mechanisms.pairs.FinitePair
            Outputs l_i = epsilon (2 i / n - 1), i = 0..n (n = :attr:`intervals`), where the loss
            is l_i: Q_i = s_{i+1} - s_i, the jumps of the slopes s of H's chords in z = e^{eps'} (s_0 = -1 and
            s_{n+1} = 0), and P_i = e^{l_i} Q_i.

        Examples
        --------
        >>> import afa
        >>> import numpy as np
        >>> pair = afa.ExponentialMechanism(epsilon=1.0).dominating_pair("add_remove")
        >>> round(float(np.exp(pair.log_p).sum()), 12), round(float(np.exp(pair.log_q).sum()), 12)
        (1.0, 1.0)
        """
        eps, n = self.epsilon, self.intervals
        losses = eps * (2.0 * np.arange(n + 1) / n - 1.0)
        # y_i = e^{(l_i - eps)/2}; with z = e^l = y^2 e^eps the chord of H between two grid points has slope
        # (H_i - H_{i-1}) / (z_i - z_{i-1}) = -((1 - y_i) + (1 - y_{i-1})) / ((e^eps - 1) (y_i + y_{i-1})).
        half = (losses - eps) / 2
        y, one_minus_y = np.exp(half), -np.expm1(half)
        inner = -(one_minus_y[1:] + one_minus_y[:-1]) / (math.expm1(eps) * (y[1:] + y[:-1]))
        # Below the first point H is 1 - z (slope -1), above the last it is 0 (slope 0).
        slopes = np.concatenate(([-1.0], inner, [0.0]))
        q = np.diff(slopes)
        log_q = np.log(q)
        return FinitePair(losses + log_q, log_q)


@dataclass(frozen=True)
class DiscreteLaplace(Mechanism):
    """f(D) + DLap(a): integer noise with P[x] proportional to e^{-a|x|} (Google DP team 2025, Sec. 3.4).

    Parameters
    ----------
    a : float
        Decay rate of the noise, > 0 (finite).
    sensitivity : int, default 1
        Integer sensitivity of f, in [1, ``MAX_OUTPUTS`` - 1] = [1, 1 999 999]; the largest loss
        ``a * sensitivity`` must be <= 1e300.

    Raises
    ------
    ValueError
        A parameter out of range.
    TypeError
        ``sensitivity`` is not an integer, or ``a`` not a real number.

    Notes
    -----
    The dominating pair is the noise DLap(a) against its shift by ``sensitivity`` (the same under both
    relations), grouped into the cells of outputs on which the loss is constant: the outputs
    x <= 0, 0 < x < sensitivity and x >= sensitivity carry the
    losses a*sensitivity, a*(sensitivity - 2x) and -a*sensitivity, so the
    privacy loss is finite and exact.

    Under ``neighboring="replace_special"`` (Google DP team 2025, Sec. 3.6) the record x is replaced by the
    special record bottom, which contributes f = 0 to the released function (as dp_accounting reads it): the
    dataset with bottom in x's place gives the same output as the dataset without x, so the pair is the
    add/remove one, and ``sensitivity`` is the add/remove sensitivity.

    Examples
    --------
    >>> import afa
    >>> round(afa.Accountant().compose(afa.DiscreteLaplace(a=1.0)).delta(0.5), 6)
    0.287649
    """

    type_name: ClassVar[str] = "discrete_laplace"
    _relations: ClassVar[tuple[str, ...]] = NEIGHBORING_RELATIONS

    a: float
    sensitivity: int = 1

    def __post_init__(self):
        check.assign(self, a=check.positive("a", self.a),
             sensitivity=check.positive_integer("sensitivity", self.sensitivity, maximum=MAX_OUTPUTS - 1))
        _at_most("a", self.a * self.sensitivity, check.MAX_LOSS,
                 f"the largest loss a * sensitivity (sensitivity={self.sensitivity})")

    def dominating_pair(self, neighboring: str) -> FinitePair:
        """(P, Q) on the cells {x <= 0}, 1..shift-1, {x >= shift}, on each of which the loss is constant.

        Parameters
        ----------
        neighboring : {"add_remove", "substitution", "replace_special"}
            The neighbouring relation (one of :attr:`relations`; not checked here).  The pair is the same under
            all three (replace_special's is add_remove's, class Notes).

        Returns
        -------
        afa.mechanisms.pairs.FinitePair
            P is DLap(a) on those cells and Q its mirror image (DLap(a) shifted by ``sensitivity``);
            the same under every relation.

        Examples
        --------
        >>> import afa
        >>> import numpy as np
        >>> np.exp(afa.DiscreteLaplace(a=1.0, sensitivity=2).dominating_pair("add_remove").log_p).round(4).tolist()
        [0.7311, 0.17, 0.0989]
        """
        a, shift = self.a, self.sensitivity
        log_norm = math.log(-math.expm1(-a)) - math.log1p(math.exp(-a))  # log tanh(a/2), no underflow
        inner = np.arange(1, shift)
        log_p = np.concatenate(([-np.logaddexp(0, -a)], log_norm - a * inner, [-a * shift - np.logaddexp(0, -a)]))
        return FinitePair(log_p, log_p[::-1])  # Q is P's mirror image


@dataclass(frozen=True)
class DiscreteGaussian(Mechanism):
    """f(D) + N_Z(0, sigma^2): integer noise with P[x] proportional to e^{-x^2/(2 sigma^2)}.

    The discrete Gaussian mechanism (Google DP team 2025, Sec. 3.5).

    Parameters
    ----------
    sigma : float
        Scale of the discrete Gaussian, > 0 (finite).  Its enumerated outputs (about 33.4 sigma +
        sensitivity + 3) must number at most ``MAX_OUTPUTS`` = 2 000 000 (so sigma <= about 6e4 for
        sensitivity 1; use :class:`Gaussian` for wider noise), and the largest loss
        sensitivity (sensitivity + 2 tau) / (2 sigma^2), tau = ceil(16.7 sigma), must be <= 1e300.
    sensitivity : int, default 1
        Integer sensitivity of f, in [1, ``MAX_OUTPUTS`` - 3].
    truncation : int, optional
        tau of the truncated discrete Gaussian N_Z^tau(0, sigma^2), supported on {-tau, ..., tau} with mass
        proportional to e^{-x^2/(2 sigma^2)} there (Google DP team 2025, Sec. 3.5): an integer >= 1 with
        2 tau + sensitivity + 1 <= ``MAX_OUTPUTS``.  None (the default) is the untruncated discrete Gaussian.
    tail_mass : float, default ``DISCRETE_GAUSSIAN_TAIL`` = 1e-60
        For the untruncated noise: the most mass beyond +-tau that is sent to +infinity, in [1e-300, 1e-6]
        (smaller keeps more outputs; the accountant's bounds include the mass sent, :attr:`truncated_mass`).

    Raises
    ------
    ValueError
        A parameter out of range.
    TypeError
        ``sensitivity`` or ``truncation`` is not an integer, or ``sigma`` not a real number.

    Notes
    -----
    Dominating pair (N_Z(sensitivity, sigma^2), N_Z(0, sigma^2)) under both relations, with each
    side's far tails moved to an output of their own (:meth:`dominating_pair`).

    With ``truncation`` = tau the pair is (N_Z^tau(sensitivity, sigma^2), N_Z^tau(0, sigma^2)) on the outputs
    {-tau, ..., tau + sensitivity}, exact and tight (Google DP team 2025, Sec. 3.5): at an output y where both
    sides have mass the loss is sensitivity (2y - sensitivity) / (2 sigma^2), and on the ``sensitivity``
    outputs at either end, where only one side has mass, it is +infinity (in each direction the mass
    Pr[N_Z^tau(0) > tau - sensitivity]).  Nothing is dropped (:attr:`truncated_mass` is 0).

    The noise is not truncated: the normaliser is summed until its terms
    underflow, and only outputs with P-mass below ``tail_mass``
    in total (``|x|`` beyond about 16.7 sigma) are dropped, their mass sent to
    +infinity -- a pessimistic change that raises delta by at most that mass
    per use (Google DP team 2025, Sec. 3.5, Proposition 1); the accountant's bounds
    include it (:attr:`truncated_mass`).

    Under ``neighboring="replace_special"`` (Google DP team 2025, Sec. 3.6) the record x is replaced by the
    special record bottom, which contributes f = 0 to the released function (as dp_accounting reads it): the
    dataset with bottom in x's place gives the same output as the dataset without x, so the pair is the
    add/remove one, and ``sensitivity`` is the add/remove sensitivity.

    Examples
    --------
    >>> import afa
    >>> round(afa.Accountant().compose(afa.DiscreteGaussian(sigma=2.0)).delta(1.0), 6)
    0.007249
    >>> truncated = afa.DiscreteGaussian(sigma=2.0, truncation=4)
    >>> round(afa.Accountant().compose(truncated).delta(1.0), 6)  # nearly all of it the mass at +infinity
    0.027631
    """

    type_name: ClassVar[str] = "discrete_gaussian"
    _relations: ClassVar[tuple[str, ...]] = NEIGHBORING_RELATIONS

    sigma: float
    sensitivity: int = 1
    truncation: int | None = None
    tail_mass: float = DISCRETE_GAUSSIAN_TAIL

    def __post_init__(self):
        check.assign(self, sigma=check.positive("sigma", self.sigma),
             sensitivity=check.positive_integer("sensitivity", self.sensitivity, maximum=MAX_OUTPUTS - 3),
             tail_mass=check.in_interval("tail_mass", self.tail_mass, 1e-300, 1e-6))
        if self.truncation is not None:
            tau = check.positive_integer("truncation", self.truncation,
                                         maximum=(MAX_OUTPUTS - 1 - self.sensitivity) // 2)
            check.assign(self, truncation=tau)
            largest_loss = self.sensitivity / self.sigma * ((self.sensitivity + 2 * tau) / self.sigma) / 2
            _at_most("sigma", largest_loss, check.MAX_LOSS,
                     f"the largest finite loss sensitivity (sensitivity + 2 tau) / (2 sigma^2) (sigma={self.sigma:g}, "
                     f"sensitivity={self.sensitivity}, truncation={tau})")
            return
        # Outputs -tau..tau + sensitivity and two for the dropped tails are enumerated (Google DP team 2025, Sec. 3.5).
        reach = _discrete_gaussian_reach(self.tail_mass)
        _at_most("sigma", self.sigma, (MAX_OUTPUTS - 3 - self.sensitivity) // 2 / reach,
                 f"sigma (with sensitivity={self.sensitivity}: its {2 * reach:.4g} sigma + sensitivity + 3 "
                 f"outputs are enumerated, at most {MAX_OUTPUTS}; use Gaussian for wider noise)")
        tau = math.ceil(self.sigma * reach)
        largest_loss = self.sensitivity / self.sigma * ((self.sensitivity + 2 * tau) / self.sigma) / 2
        _at_most("sigma", largest_loss, check.MAX_LOSS,
                 f"the largest loss sensitivity (sensitivity + 2 tau) / (2 sigma^2) (sigma={self.sigma:g}, "
                 f"sensitivity={self.sensitivity}, tau={tau})")

    def to_dict(self) -> dict:
        """As :meth:`afa.Mechanism.to_dict`, without ``truncation`` when it is None (TOML has no null) and without
        ``tail_mass`` at its default.

        Returns
        -------
        dict
            ``{"type": "discrete_gaussian", "sigma": ..., "sensitivity": ..., "truncation": ...}``, the last key
            only for truncated noise (and ``tail_mass`` where it is not the default); :meth:`afa.Mechanism.from_dict`
            inverts it.

        Examples
        --------
        >>> import afa
        >>> afa.DiscreteGaussian(sigma=2.0, truncation=8).to_dict()
        {'type': 'discrete_gaussian', 'sigma': 2.0, 'sensitivity': 1, 'truncation': 8}
        """
        table = super().to_dict()
        if table.get("truncation") is None:
            del table["truncation"]
        if table.get("tail_mass") == DISCRETE_GAUSSIAN_TAIL:
            del table["tail_mass"]
        return table

    @property
    def truncated_mass(self) -> float:
        """Either side's noise mass beyond +-tau (both tails; at most ``tail_mass``); 0 when the noise
        itself is truncated (``truncation``), whose pair is exact.

        Examples
        --------
        >>> import afa
        >>> afa.DiscreteGaussian(sigma=2.0).truncated_mass < afa.DiscreteGaussian(sigma=2.0).tail_mass
        True
        """
        if self.truncation is not None:
            return 0.0
        tau, log_weight, log_norm = self._noise()
        return float(np.exp(math.log(2) + special.logsumexp(log_weight[tau + 1:]) - log_norm)) * (1 + 1e-12)

    def _noise(self) -> tuple[int, np.ndarray, float]:
        """(tau, log e^{-y^2/(2 sigma^2)} for y = 0, 1, ..., log of the normaliser).

        Outputs |x| <= tau are kept, beyond which the Gaussian tail bound leaves less than the
        allowed mass; the weights reach past tau + sensitivity, and the normaliser sums the series
        until its terms underflow.
        """
        sigma = self.sigma
        tau = int(math.ceil(sigma * _discrete_gaussian_reach(self.tail_mass)))
        reach = max(int(math.ceil(40 * sigma)), tau + self.sensitivity) + 1
        log_weight = -np.arange(0, reach + 1, dtype=float) ** 2 / (2 * sigma ** 2)
        return tau, log_weight, float(np.logaddexp(log_weight[0], math.log(2) + special.logsumexp(log_weight[1:])))

    def dominating_pair(self, neighboring: str) -> FinitePair:
        """(P, Q), P = N_Z(sensitivity, sigma^2) and Q = N_Z(0, sigma^2), on [-tau, tau + sensitivity] plus two outputs.

        The two extra outputs hold each side's dropped tails where the other has none (a pessimistic change:
        the tails' contribution to every hockey-stick divergence, subsampled or not, can only grow).

        Parameters
        ----------
        neighboring : {"add_remove", "substitution", "replace_special"}
            The neighbouring relation (one of :attr:`relations`; not checked here).  The pair is the same under
            all three (replace_special's is add_remove's, class Notes).

        Returns
        -------
        afa.mechanisms.pairs.FinitePair
            The same under every relation.  With ``truncation`` = tau: P = N_Z^tau(sensitivity, sigma^2) and
            Q = N_Z^tau(0, sigma^2) on the outputs -tau..tau + sensitivity, no extra outputs.

        Examples
        --------
        >>> import afa
        >>> import numpy as np
        >>> pair = afa.DiscreteGaussian(sigma=1.0, truncation=1).dominating_pair("add_remove")
        >>> np.exp(pair.log_p).round(4).tolist(), np.exp(pair.log_q).round(4).tolist()
        ([0.0, 0.2741, 0.4519, 0.2741], [0.2741, 0.4519, 0.2741, 0.0])
        """
        if self.truncation is not None:
            tau, shift = self.truncation, self.sensitivity
            x = np.arange(-tau, tau + shift + 1, dtype=float)
            log_norm = float(special.logsumexp(-np.arange(-tau, tau + 1, dtype=float) ** 2 / (2 * self.sigma ** 2)))
            log_q = np.where(np.abs(x) <= tau, -x ** 2 / (2 * self.sigma ** 2) - log_norm, -np.inf)
            log_p = np.where(np.abs(x - shift) <= tau, -(x - shift) ** 2 / (2 * self.sigma ** 2) - log_norm, -np.inf)
            return FinitePair(log_p, log_q)
        tau, log_weight, log_norm = self._noise()
        shift = self.sensitivity
        x = np.arange(-tau, tau + shift + 1, dtype=float)
        # Either side's mass outside the support: its tails beyond tau and beyond tau + shift.
        log_dropped = np.logaddexp(special.logsumexp(log_weight[tau + 1:]),
                                   special.logsumexp(log_weight[tau + shift + 1:])) - log_norm
        log_q = np.concatenate((-x ** 2 / (2 * self.sigma ** 2) - log_norm, [-np.inf, log_dropped]))
        log_p = np.concatenate((-(x - shift) ** 2 / (2 * self.sigma ** 2) - log_norm, [log_dropped, -np.inf]))
        return FinitePair(log_p, log_q)

    def _losses(self, neighboring):
        if self.truncation is not None:
            return pairs.privacy_losses(self.dominating_pair(neighboring))
        # Formed from the parameters: the losses s (s - 2x) / (2 sigma^2) keep a few ulps where differences of the
        # pair's log-probabilities lose digits, and the enumerated noise is symmetric, so one direction serves.
        sigma, shift = self.sigma, self.sensitivity
        tau, log_weight, log_norm = self._noise()
        x = np.arange(-tau, tau + 1, dtype=float)
        log_p = -x ** 2 / (2 * sigma ** 2) - log_norm
        losses = shift * (shift - 2 * x) / (2 * sigma ** 2)  # log p(x) - log q(x), q untruncated
        dropped = self.truncated_mass
        # The noise is symmetric, so L' under Q has the law of L under P (x -> shift - x).
        loss = PrivacyLoss.discrete(losses, log_p, inf_mass=dropped)
        return loss, loss


@dataclass(frozen=True)
class DiscreteMechanism(Mechanism):
    """Any finite dominating pair, given by its two PMFs over the same outputs (Zhu, Dong & Wang 2022, Def. 36).

    Parameters
    ----------
    p_pmf : sequence of float
        P's probabilities, in [0, 1], summing to 1 (to 1e-9); stored as a tuple of floats.
    q_pmf : sequence of float
        Q's probabilities over the same outputs, of the same length and with the same constraints.

    Raises
    ------
    ValueError
        A PMF that is empty, not 1-d, outside [0, 1] or not summing to 1, or PMFs of different lengths.
    TypeError
        A PMF with entries that are not real numbers.

    Notes
    -----
    The dominating pair is (P, Q) as given, under every relation (the caller vouches that it dominates
    under the relation the accountant uses).  Outputs with q = 0 < p send their
    P-mass to +infinity (and vice versa).

    Examples
    --------
    >>> import afa
    >>> mechanism = afa.DiscreteMechanism(p_pmf=[0.5, 0.5], q_pmf=[0.25, 0.75])
    >>> mechanism
    DiscreteMechanism(p_pmf=(0.5, 0.5), q_pmf=(0.25, 0.75))
    >>> round(afa.Accountant().compose(mechanism).delta(0.0), 6)
    0.25
    """

    type_name: ClassVar[str] = "discrete_mechanism"
    _relations: ClassVar[tuple[str, ...]] = NEIGHBORING_RELATIONS

    p_pmf: tuple
    q_pmf: tuple

    def __post_init__(self):
        p = check.probability_vector("p_pmf", self.p_pmf)
        q = check.probability_vector("q_pmf", self.q_pmf)
        if p.shape != q.shape:
            raise ValueError(f"p_pmf and q_pmf must have the same length, got {p.size} and {q.size}")
        check.assign(self, p_pmf=tuple(map(float, p)), q_pmf=tuple(map(float, q)))

    def dominating_pair(self, neighboring: str) -> FinitePair:
        """(P, Q) as given, under every relation.

        Parameters
        ----------
        neighboring : {"add_remove", "substitution", "replace_special"}
            The neighbouring relation (one of :attr:`relations`; not checked here).  The pair is the same under
            all three: the caller vouches that it dominates under the relation the accountant uses.

        Returns
        -------
        afa.mechanisms.pairs.FinitePair
            The log-PMFs of ``p_pmf`` and ``q_pmf`` (-inf where a probability is 0).

        Examples
        --------
        >>> import afa
        >>> import numpy as np
        >>> pair = afa.DiscreteMechanism(p_pmf=[0.5, 0.5], q_pmf=[0.25, 0.75]).dominating_pair("add_remove")
        >>> np.exp(pair.log_p).round(4).tolist(), np.exp(pair.log_q).round(4).tolist()
        ([0.5, 0.5], [0.25, 0.75])
        """
        return FinitePair(_log(self.p_pmf), _log(self.q_pmf))
