"""The accountant: a multiset of mechanisms and the queries on their composition.

State is {mechanism: count} under one neighbouring relation
(Zhu, Dong & Wang 2022, Algorithm 1).  Each of the two directions
of the composed dominating pair has log-CF sum_i k_i log phi_i (Prop. 13);
delta(eps) is the larger of the two directions' hockey-stick divergences
(Lemma 37), and epsilon(delta) the larger of their inverses.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast

import numpy as np
from numpy.typing import ArrayLike

from . import _validation as check
from . import budget as budgets
from . import options as settings
from .budget import Budget
from .engines.base import ExactEngine, gaussian_delta_with_error, gaussian_epsilon_bracket
from .engines.composition import ComposedLoss
from .engines.planner import Answer, Planner, closed_form_mu, label
from .limits import INTERVAL_RANGE
from .mechanisms.catalog import NEIGHBORING_RELATIONS, Mechanism
from .numerics.atoms import CompositionTooLargeError
from .options import Options
from .results import AccuracyError, Attempt, Result, UnsupportedCompositionError, Validation, ValidationError

if TYPE_CHECKING:
    import sympy

    from .engines.base import QuadratureEngine

DIRECTION_NAMES = {"add_remove": ("remove", "add"), "substitution": ("forward", "reverse"),
                   "replace_special": ("remove", "add")}
#: The grid step of a refusal's fallback lower bound, relative to the default step (Accountant._single_group_bracket).
COARSE_FACTOR = 64.0
#: Top-level keys of a spec (:meth:`Accountant.to_dict`).
SPEC_KEYS = ("neighboring", "mechanisms", "value_discretization_interval", "budget", "options")
# The default settings, built once (both are frozen): a fresh accountant need not validate them again.
_DEFAULT_BUDGET, _DEFAULT_OPTIONS = Budget(), Options()


class Accountant:
    r"""Compose mechanisms and query the tight (epsilon, delta) of the composition.

    Parameters
    ----------
    neighboring : {"add_remove", "substitution", "replace_special"}
        The neighbouring relation of the datasets: adding or removing a record, substituting one, or replacing
        one by a special record bottom (Google DP team 2025, Sec. 3.6).  Each mechanism composed must serve it
        (:attr:`afa.Mechanism.relations`).
    value_discretization_interval : float, optional
        Grid step of the privacy loss for ``method="pld"``, in [1e-12, 350] (default: chosen per composition).
    budget : Budget, optional
        Time and memory limits of each query (default ``Budget()``: 30 s).  A query that exceeds
        them raises :class:`afa.BudgetExceededError` naming what was tried.
    options : Options, optional
        The engines' settings (enumeration limits, node budgets, tail masses, grid size) and the policy
        of ``method="auto"`` (default ``Options()``; see :mod:`afa.options`).

    Attributes
    ----------
    neighboring : str
        The neighbouring relation.
    budget : Budget
        Time and memory limits of each query.
    options : Options
        The engines' settings and the policy of ``method="auto"`` (active while a query runs).
    value_discretization_interval : float or None
        Grid step of the loss for ``method="pld"`` (None: chosen per composition).

    Raises
    ------
    ValueError
        An unknown ``neighboring``, or a ``value_discretization_interval`` outside [1e-12, 350].
    TypeError
        A ``budget`` that is not an :class:`afa.Budget`, an ``options`` that is not an :class:`afa.Options`,
        or a ``value_discretization_interval`` that is not a real number.

    Notes
    -----
    State is {mechanism: count} under one neighbouring relation (Zhu, Dong & Wang 2022, Algorithm 1).
    A mechanism :math:`j` used :math:`k_j` times contributes :math:`k_j` independent copies of its privacy
    loss :math:`L_j`, so the composed loss :math:`L` of each direction has the log characteristic function

    .. math::

        \log \varphi_L(t) = \sum_j k_j \log \varphi_{L_j}(t),

    and the tight delta is the larger of the two directions' hockey-stick divergences, a loss of
    :math:`+\infty` counting 1 (Zhu, Dong & Wang 2022, Thm 10 and Lemma 37):

    .. math::

        \delta(\varepsilon) = \max\Big(\mathbb{E}\big[(1 - e^{\varepsilon - L})_+\big],\;
            \mathbb{E}\big[(1 - e^{\varepsilon - L'})_+\big]\Big).

    The numbers a user reads -- :meth:`epsilon`, :meth:`delta`, :meth:`privacy_profile` -- are the
    upper ends of the answers' bounds: never below what those bounds allow for the truth.  The
    ``*_result`` methods return the best estimate in ``Result.value`` beside its bounds.

    Every query takes a ``method``, one of "auto" (the default), "exact", "quadrature", "contour",
    "certified" and "pld".  A named method answers or refuses; "auto" tries closed forms first where they
    apply, then the contour method and the fallbacks (:attr:`afa.AutoOptions.fallbacks`, by default "pld",
    "quadrature" and "certified"), each with a share of the budget, and moves on when one refuses
    (:class:`afa.AccuracyError`, :class:`afa.UnsupportedCompositionError`); :attr:`planner`
    (:class:`afa.engines.planner.Planner`) builds the engines and runs that policy.  The :class:`afa.Result` of a
    query lists every engine tried in ``attempts``.

    Examples
    --------
    >>> import afa
    >>> acc = afa.Accountant().compose(afa.Gaussian(sigma=10.0), times=100)
    >>> round(acc.epsilon(1e-5), 4)
    4.3772
    """

    def __init__(self, neighboring: str = "add_remove", value_discretization_interval: float | None = None,
                 budget: Budget | None = None, options: Options | None = None):
        self.neighboring = check.choice("neighboring", neighboring, NEIGHBORING_RELATIONS)
        if value_discretization_interval is not None:
            value_discretization_interval = check.in_interval("value_discretization_interval",
                                                              value_discretization_interval, *INTERVAL_RANGE)
        if budget is not None and not isinstance(budget, Budget):
            raise TypeError(f"budget must be an afa.Budget, got {type(budget).__name__}")
        if options is not None and not isinstance(options, Options):
            raise TypeError(f"options must be an afa.Options, got {type(options).__name__}")
        #: Time and memory limits of each query.
        self.budget = _DEFAULT_BUDGET if budget is None else budget
        #: The engines' settings and the policy of method='auto' (active while a query runs).
        self.options = _DEFAULT_OPTIONS if options is None else options
        #: Grid step of the loss for method='pld' (None: chosen per composition, see _pld_interval).
        self.value_discretization_interval = value_discretization_interval
        self._counts: dict[Mechanism, int] = {}
        # each mechanism's two directions, computed once (those of pure Gaussian pairs when first needed)
        self._losses: dict[Mechanism, tuple] = {}
        self._gaussian_mu: dict[Mechanism, float] = {}  # mu of the mechanisms whose pair is a pure Gaussian pair
        self._planner: Planner | None = None  # the engines of this state of the composition, built on first use
        self._loss_magnitude = 0.0  # sum over uses of each use's largest |loss|, |mean| or variance

    # -- composition -----------------------------------------------------
    def compose(self, mechanism: Mechanism, times: int = 1) -> Accountant:
        """Add ``times`` uses of ``mechanism``; returns the accountant so calls chain.

        Parameters
        ----------
        mechanism : Mechanism
            An :class:`afa.Mechanism` that declares its dominating pair (Gaussian, Laplace, ..., or a
            subclass implementing ``dominating_pair``) and is analysed under this accountant's
            :attr:`neighboring` relation.
        times : int, default 1
            How many uses to add: an integer in [1, 2**53] (counts are exact floats there; a float with an
            integral value is accepted), also in total per mechanism.

        Returns
        -------
        Accountant
            This accountant (not a copy), so that calls chain.

        Raises
        ------
        TypeError
            ``mechanism`` is not an :class:`afa.Mechanism` declaring its dominating pair, or ``times`` is not
            an integer.
        ValueError
            ``times`` out of range: below 1, above 2**53 in total for the mechanism, or bringing the sum over
            all uses of each one's largest ``|loss|``, ``|mean|`` or variance above 1e300 (``MAX_LOSS``), so that
            the engines' sums and exponents of losses cannot overflow; or the mechanism is not analysed under
            :attr:`neighboring`.  A ValueError naming ``times`` leaves the accountant unchanged.

        Notes
        -----
        Composing the same mechanism twice adds to its count.  The engines built for earlier queries are
        dropped: the next query builds them for the new composition.

        Examples
        --------
        >>> import afa
        >>> acc = afa.Accountant().compose(afa.Gaussian(sigma=10.0), times=60).compose(afa.Gaussian(sigma=10.0), 40)
        >>> acc.mechanisms
        {Gaussian(sigma=10.0, sensitivity=1.0): 100}
        """
        if not isinstance(mechanism, Mechanism) or not mechanism.declares_pair:
            raise TypeError(f"mechanism must be an afa.Mechanism declaring its dominating pair (Gaussian, Laplace, "
                            f"..., or a subclass implementing dominating_pair), got {type(mechanism).__name__}")
        times = check.positive_integer("times", times, maximum=check.MAX_COUNT)
        mu = mechanism.gaussian_mu(self.neighboring)  # fails early if unsupported
        losses: tuple | None = None
        if mu is not None:
            per_use = mu ** 2
        else:
            formed = mechanism.privacy_losses(self.neighboring)
            losses, per_use = formed, _loss_magnitude(formed)
        total = self._counts.get(mechanism, 0) + times
        if total > check.MAX_COUNT:
            raise ValueError(f"times is out of range: {mechanism!r} would be used {total} times in all, "
                             f"above 2**53")
        magnitude = self._loss_magnitude + times * per_use
        if not magnitude <= check.MAX_LOSS:
            raise ValueError(f"times is out of range: {times} uses of {mechanism!r} bring the composed privacy "
                             f"loss to about {magnitude:.3g} (the sum over uses of each one's largest |loss|, "
                             f"|mean| or variance), above the {check.MAX_LOSS:g} the accountant computes with")
        if losses is not None:
            self._losses[mechanism] = losses
        elif mu is not None:
            self._gaussian_mu[mechanism] = mu
        self._counts[mechanism] = total
        self._loss_magnitude = magnitude
        self._planner = None
        return self

    # -- serialisation ---------------------------------------------------
    def to_dict(self) -> dict:
        """The accountant as a spec (the format of ``afa --spec`` files), ready for JSON or TOML.

        Returns
        -------
        dict
            ``neighboring``, ``mechanisms`` (each :meth:`afa.Mechanism.to_dict` with its ``times``),
            ``value_discretization_interval`` when set, and ``budget`` (``seconds`` and ``memory_bytes``,
            None for no limit), and ``options`` where they differ from the defaults
            (:meth:`afa.Options.to_dict`).  :meth:`from_dict` rebuilds an accountant giving the same answers.

        Examples
        --------
        >>> import afa
        >>> acc = afa.Accountant().compose(afa.Gaussian(sigma=10.0), times=100)
        >>> spec = acc.to_dict()
        >>> spec["neighboring"], spec["mechanisms"]
        ('add_remove', [{'type': 'gaussian', 'sigma': 10.0, 'sensitivity': 1.0, 'times': 100}])
        >>> spec["budget"]
        {'seconds': 30.0, 'memory_bytes': 2147483648.0}
        """
        spec: dict = {"neighboring": self.neighboring,
                      "mechanisms": [{**mechanism.to_dict(), "times": count}
                                     for mechanism, count in self._counts.items()]}
        if self.value_discretization_interval is not None:
            spec["value_discretization_interval"] = self.value_discretization_interval
        spec["budget"] = {name: (None if math.isinf(value) else value)
                          for name, value in (("seconds", self.budget.seconds),
                                              ("memory_bytes", self.budget.memory_bytes))}
        if self.options != Options():
            spec["options"] = self.options.to_dict()
        return spec

    @classmethod
    def from_dict(cls, spec: Mapping) -> Accountant:
        """The accountant a spec describes: the inverse of :meth:`to_dict`.

        Parameters
        ----------
        spec : mapping
            ``mechanisms``: a non-empty list of mechanism tables (:meth:`afa.Mechanism.from_dict`), each
            with an optional ``times`` (default 1); optional ``neighboring`` (default "add_remove"; case,
            surrounding spaces and hyphens for underscores are accepted), ``value_discretization_interval``,
            ``budget`` (a table of :class:`afa.Budget`'s fields, ``seconds`` and ``memory_bytes``, None for no
            limit) and ``options`` (:meth:`afa.Options.from_dict`).  No other top-level key is allowed.

        Returns
        -------
        Accountant
            A new accountant with the spec's settings and every mechanism composed its ``times``.

        Raises
        ------
        ValueError, TypeError
            A missing, unknown or invalid key; the message names it (``mechanisms[2]: ...``).  An
            OverflowError from a mechanism table is re-raised with the same prefix.

        Examples
        --------
        >>> import afa
        >>> spec = {"mechanisms": [{"type": "gaussian", "sigma": 10.0, "times": 100}]}
        >>> acc = afa.Accountant.from_dict(spec)
        >>> round(acc.epsilon(1e-5), 4)
        4.3772
        >>> afa.Accountant.from_dict(acc.to_dict()).mechanisms == acc.mechanisms
        True
        """
        if not isinstance(spec, Mapping):
            raise TypeError(f"spec must be a mapping with a 'mechanisms' list, got {type(spec).__name__}")
        for key in spec:
            if key not in SPEC_KEYS:
                raise ValueError(f"unknown top-level key {key!r} (allowed: {', '.join(SPEC_KEYS)})")
        neighboring = spec.get("neighboring", "add_remove")
        if isinstance(neighboring, str):
            neighboring = neighboring.strip().lower().replace("-", "_")
        budget = spec.get("budget")
        if budget is not None:
            if not isinstance(budget, Mapping):
                raise TypeError(f"budget must be a table with seconds and/or memory_bytes, got {budget!r}")
            unknown = set(budget) - {"seconds", "memory_bytes"}
            if unknown:
                raise ValueError(f"unknown key {sorted(unknown)[0]!r} in budget (allowed: seconds, memory_bytes)")
            budget = Budget(**{name: (math.inf if value is None else value) for name, value in budget.items()})
        options = spec.get("options")
        if options is not None:
            options = Options.from_dict(options)
        accountant = cls(neighboring, spec.get("value_discretization_interval"), budget, options)
        tables = spec.get("mechanisms")
        if not isinstance(tables, (list, tuple)) or not tables:
            raise ValueError("spec needs a non-empty list 'mechanisms' ([[mechanisms]] tables in TOML)")
        for index, table in enumerate(tables):
            try:
                if not isinstance(table, Mapping):
                    raise TypeError(f"must be a table/object, got {table!r}")
                mechanism = Mechanism.from_dict({key: value for key, value in table.items() if key != "times"})
                accountant.compose(mechanism, table.get("times", 1))
            except (ValueError, TypeError, OverflowError) as error:
                kind = table.get("type") if isinstance(table, Mapping) else None
                where = f"mechanisms[{index}]" + (f" ({kind})" if isinstance(kind, str) else "")
                raise type(error)(f"{where}: {error}") from None
        return accountant

    def __getstate__(self) -> dict:
        """The composition and settings only: losses and engines are rebuilt on first use."""
        return {"neighboring": self.neighboring, "value_discretization_interval": self.value_discretization_interval,
                "budget": self.budget, "options": self.options, "counts": list(self._counts.items())}

    def __setstate__(self, state: dict) -> None:
        Accountant.__init__(self, state["neighboring"], state["value_discretization_interval"], state["budget"],
                            state["options"])
        for mechanism, count in state["counts"]:
            self.compose(mechanism, count)

    @property
    def mechanisms(self) -> dict[Mechanism, int]:
        """A copy of the state: each distinct mechanism with its count.

        Returns
        -------
        dict of Mechanism to int
            A new dict on every call: changing it leaves the accountant unchanged.

        Examples
        --------
        >>> import afa
        >>> afa.Accountant().compose(afa.Laplace(scale=2.0), times=3).mechanisms
        {Laplace(scale=2.0, sensitivity=1.0): 3}
        """
        return dict(self._counts)

    @property
    def directions(self) -> tuple[str, str]:
        """Names of the two directions: ('remove', 'add') or ('forward', 'reverse').

        Returns
        -------
        tuple of str
            ('remove', 'add') under "add_remove" and "replace_special" (there x -> bottom is "remove" and
            bottom -> x "add", Google DP team 2025, Sec. 3.6), ('forward', 'reverse') under "substitution": the keys of
            :attr:`log_phi`, :attr:`inf_mass` and :attr:`composed_losses` and the values of the ``direction``
            arguments.

        Examples
        --------
        >>> import afa
        >>> afa.Accountant("substitution").directions
        ('forward', 'reverse')
        """
        return DIRECTION_NAMES[self.neighboring]

    @property
    def composed_losses(self) -> dict[str, ComposedLoss]:
        """The composed privacy loss of each direction.

        Returns
        -------
        dict of str to afa.engines.composition.ComposedLoss
            Keyed by :attr:`directions`: each direction's terms and counts, symbolic log-CF, atoms, cumulants
            and mass at +infinity.  Built anew on every call.
        """
        return {name: self.planner.composed(index) for index, name in enumerate(self.directions)}

    @property
    def log_phi(self) -> dict[str, sympy.Expr]:
        """The composed symbolic log-CF of each direction, sum_i k_i log phi_i(t).

        Returns
        -------
        dict of str to sympy.Expr
            Keyed by :attr:`directions`; an expression in the symbol :data:`afa.t` (Zhu, Dong & Wang 2022,
            Prop. 13).

        Examples
        --------
        >>> import afa
        >>> log_phi = afa.Accountant().compose(afa.Gaussian(sigma=10.0), times=100).log_phi
        >>> sorted(log_phi), log_phi["remove"].free_symbols == {afa.t}
        (['add', 'remove'], True)
        """
        return {name: self.planner.composed(index).log_phi for index, name in enumerate(self.directions)}

    @property
    def inf_mass(self) -> dict[str, float]:
        """Pr[composed loss = +infinity] of each direction (Zhu, Dong & Wang 2022, Prop. 38).

        Returns
        -------
        dict of str to float
            Keyed by :attr:`directions`; delta(eps) of a direction is at least its mass at every eps.
        """
        return {name: self.planner.composed(index).inf_mass for index, name in enumerate(self.directions)}

    @property
    def tight(self) -> bool:
        """Whether every composed mechanism's dominating pair is tight (:attr:`afa.Mechanism.tight`).

        Returns
        -------
        bool
            True for an empty accountant.  When False, every :class:`afa.Result` it returns has
            ``tight=False``: ``upper`` bounds the true epsilon or delta, ``lower`` only the dominating pair's.

        Examples
        --------
        >>> import afa
        >>> afa.Accountant().compose(afa.Gaussian(1.0)).tight
        True
        """
        return all(mechanism.tight for mechanism in self._counts)

    def _mark(self, result: Result) -> Result:
        """``result`` with ``tight=False`` when some pair is not tight (its lower bound is then the pair's)."""
        return result if self.tight else dataclasses.replace(result, tight=False)

    def _mark_refusal(self, error: AccuracyError) -> None:
        """Mark a refusal's certified bracket as the dominating pair's only, when some pair is not tight."""
        if not self.tight and error.bracket is not None:
            error.bracket = dataclasses.replace(error.bracket, tight=False)
            error.args = (f"{error.args[0]} (bounds of the dominating pair: a mechanism's pair is not tight, so a "
                          "lower bound is not one on the true epsilon or delta)",) + tuple(error.args[1:])

    # -- engines ---------------------------------------------------------
    def _all_losses(self) -> dict[Mechanism, tuple]:
        """Every composed mechanism's two directions, those of pure Gaussian pairs (composed by their mu alone)
        formed now if not yet."""
        if len(self._losses) < len(self._counts):  # in the order of composition, as the counts
            self._losses = {mechanism: self._losses.get(mechanism) or mechanism.privacy_losses(self.neighboring)
                            for mechanism in self._counts}
        return self._losses

    @property
    def planner(self) -> Planner:
        """The engine planner of the composition as it stands (:class:`afa.engines.planner.Planner`).

        Returns
        -------
        afa.engines.planner.Planner
            Built on first use and kept until the composition, :attr:`options` or
            :attr:`value_discretization_interval` changes; it builds the engines (``planner.engines(method)``)
            and runs the policy of ``method="auto"``.

        Examples
        --------
        >>> import afa
        >>> acc = afa.Accountant().compose(afa.RandomizedResponse(0.75), times=10)
        >>> [engine.method for engine in acc.planner.engines("exact")]
        ['exact']
        """
        planner = self._planner
        if (planner is None or planner.options is not self.options
                or planner.value_discretization_interval != self.value_discretization_interval):
            planner = self._planner = Planner(self.neighboring, self._counts, self._all_losses(), self._gaussian_mu,
                                              self.options, self.value_discretization_interval)
        return planner

    # -- queries ---------------------------------------------------------
    def delta_result(self, epsilon: ArrayLike, method: str = "auto", direction: str | None = None) -> Result:
        """delta(epsilon) with its bounds and error (of one ``direction`` if given, else the maximum).

        Parameters
        ----------
        epsilon : float or array_like
            A finite real number (negative values allowed), or an array of them of any shape (one pass over
            the engine's nodes); the result's numbers then have its shape.
        method : {"auto", "exact", "quadrature", "contour", "certified", "pld"}, default "auto"
            The engine (see the class's Notes).
        direction : str, optional
            One of :attr:`directions`: that direction's hockey-stick divergence alone; by default the
            maximum of the two (Zhu, Dong & Wang 2022, Lemma 37).

        Returns
        -------
        Result
            ``value`` (best estimate), ``lower``, ``upper`` and ``error``: floats for a number, arrays of
            ``epsilon``'s shape for an array (an empty array gives empty arrays without computing).  The
            values are clipped to [(1 - e^eps)_+, 1]; the lower bound allows for the mass truncated
            mechanisms (DiscreteGaussian) send to +infinity.  ``method`` names the engine that answered,
            ``certified`` whether the bounds are proved, and ``attempts`` every engine tried.

        Raises
        ------
        ValueError
            An unknown ``method`` or ``direction``, a non-finite ``epsilon``, or an empty accountant.
        TypeError
            An ``epsilon`` that is not real numbers.
        UnsupportedCompositionError
            The named ``method`` cannot serve this composition (e.g. "exact" needs Gaussian and
            finite-output mechanisms only, or one use of a single mechanism).
        AccuracyError
            The named method, or under "auto" every method, refused (a :class:`afa.BudgetExceededError`
            when the budget ran out); the message lists what was tried.

        Examples
        --------
        >>> import afa
        >>> acc = afa.Accountant().compose(afa.Gaussian(sigma=10.0), times=100)
        >>> result = acc.delta_result(1.0)
        >>> round(result.value, 6), result.method, bool(result.lower <= result.value <= result.upper)
        (0.126937, 'exact', True)
        >>> acc.delta_result([0.5, 1.0, 2.0]).upper.round(6)
        array([0.238422, 0.126937, 0.020924])
        """
        scalar = np.ndim(epsilon) == 0 and not isinstance(epsilon, np.ndarray)
        if scalar:
            epsilons = np.array([check.real_number("epsilon", epsilon)])
        else:
            epsilons = check.real_array("epsilon", epsilon)
            if epsilons.size == 0:
                self.planner.resolve(method)
                return Result(epsilons, epsilons, epsilons, epsilons, method)
        try:
            value, lower, upper, error, run = self._profile(epsilons.ravel(), method, direction)
        except AccuracyError as refusal:
            self._mark_refusal(refusal)
            raise
        value, lower, upper, error = (float(column[0]) if scalar else column.reshape(epsilons.shape)
                                      for column in (value, lower, upper, error))
        return self._mark(Result(value, lower, upper, error, label(run.name), certified=run.certified,
                                 attempts=run.attempts))

    def delta(self, epsilon: ArrayLike, method: str = "auto") -> float | np.ndarray:
        """The tight delta(epsilon) of the composition: the upper end of :meth:`delta_result`'s bounds.

        Parameters
        ----------
        epsilon : float or array_like
            A finite real number, or an array of them of any shape.
        method : {"auto", "exact", "quadrature", "contour", "certified", "pld"}, default "auto"
            The engine (see the class's Notes).

        Returns
        -------
        float or ndarray
            ``delta_result(epsilon, method).upper``: never below what the bounds allow for the truth; an
            array of ``epsilon``'s shape for an array of epsilons.

        Raises
        ------
        ValueError, TypeError, UnsupportedCompositionError, AccuracyError
            As :meth:`delta_result`.

        Examples
        --------
        >>> import afa
        >>> acc = afa.Accountant().compose(afa.Gaussian(sigma=10.0), times=100)
        >>> round(acc.delta(1.0), 6)
        0.126937
        >>> acc.delta([0.5, 2.0]).round(6)
        array([0.238422, 0.020924])
        """
        return self.delta_result(epsilon, method).upper

    def privacy_profile(self, epsilons, method: str = "auto", direction: str | None = None, *,
                        estimate: bool = False) -> np.ndarray:
        """delta(eps) for every eps in ``epsilons`` (one pass over the quadrature nodes).

        Parameters
        ----------
        epsilons : array_like
            Finite real numbers, of any shape (a number gives a 0-d array).
        method : {"auto", "exact", "quadrature", "contour", "certified", "pld"}, default "auto"
            The engine (see the class's Notes).
        direction : str, optional
            One of :attr:`directions`: that direction's hockey-stick divergence alone, e.g.
            H_{e^eps}(P || Q) for 'remove'; by default the maximum of the two (Zhu, Dong & Wang 2022, Lemma 37).
        estimate : bool, default False
            Return the best estimates (``Result.value``) instead of the upper ends of the bounds, e.g. to
            locate a maximiser.

        Returns
        -------
        ndarray
            delta at each eps, of ``epsilons``' shape: the upper ends of the bounds, as :meth:`delta` reads
            them, or with ``estimate=True`` the best estimates.  An empty array is returned as is (the
            method and direction are still checked).

        Raises
        ------
        ValueError, TypeError, UnsupportedCompositionError, AccuracyError
            As :meth:`delta_result`.

        Examples
        --------
        >>> import afa
        >>> acc = afa.Accountant().compose(afa.Gaussian(sigma=10.0), times=100)
        >>> acc.privacy_profile([0.5, 1.0, 2.0]).round(6)
        array([0.238422, 0.126937, 0.020924])
        >>> acc.privacy_profile([1.0], direction="add", estimate=True).round(6)
        array([0.126937])
        """
        epsilons = check.real_array("epsilons", epsilons)
        if epsilons.size == 0:  # nothing to compute; the options are still checked
            self.planner.resolve(method)
            if direction is not None:
                check.choice("direction", direction, self.directions)
            return epsilons
        values = self._profile(epsilons.ravel(), method, direction)[0 if estimate else 2]
        return values.reshape(epsilons.shape)

    def _run(self, method: str, query, relative_width: Callable | None = None, delta: float | None = None,
             agrees: Callable | None = None) -> Answer:
        """:meth:`afa.engines.planner.Planner.run` under this accountant's budget and options.

        When 'auto' finds no answer to an eps(``delta``) query, the time AutoOptions.reserve kept back goes to
        a certified lower bound from one mechanism's uses alone (:meth:`_single_group_bracket`), attached to the
        refusal as its ``bracket`` when no engine left one.
        """
        with budgets.limits(self.budget), settings.using(self.options):
            if method != "auto" or delta is None or self.options.auto.reserve == 0:
                return self.planner.run(method, query, relative_width, delta, agrees)
            try:
                with budgets.limits(seconds=budgets.remaining() * (1 - self.options.auto.reserve)):
                    return self.planner.run(method, query, relative_width, delta, agrees)
            except AccuracyError as refusal:
                if refusal.bracket is None:
                    refusal.bracket = self._single_group_bracket(delta)
                    if refusal.bracket is not None:
                        refusal.args = (f"{refusal.args[0]}; certified: eps >= {refusal.bracket.lower!r} (the PLD "
                                        "of one mechanism's uses; the error's .bracket)",)
                raise

    def _single_group_bracket(self, delta: float) -> Result | None:
        """A certified lower bound on eps(delta) from the uses of one mechanism alone (composing more
        never lowers eps): the discretized PLD of each mechanism's uses on a grid COARSE_FACTOR times the
        default step (a looser bound, fast), the most loss-heavy first, within the time left; the largest
        lower bound found, as a bracket with upper +inf."""
        best = None
        groups = sorted(self._counts.items(), reverse=True,
                        key=lambda item: item[1] * _loss_magnitude(self._all_losses()[item[0]], bound=False))
        for mechanism, count in groups:
            if budgets.remaining() <= 0:
                break
            alone = Accountant(self.neighboring, None, Budget(seconds=budgets.remaining(),
                                                              memory_bytes=self.budget.memory_bytes),
                               self.options).compose(mechanism, count)
            try:
                planner = alone.planner
                interval = min(COARSE_FACTOR * planner.pld_interval(planner.composed(0)), INTERVAL_RANGE[1])
            except UnsupportedCompositionError:
                continue
            alone.value_discretization_interval = interval
            lower: float | None = None
            try:
                lower = alone.epsilon_result(delta, method="pld").lower
            except AccuracyError as error:
                lower = error.bracket.lower if error.bracket is not None else None
            except UnsupportedCompositionError:
                pass
            if lower is not None and lower > 0 and (best is None or lower > best):
                best = lower
        return None if best is None else Result(best, best, math.inf, math.inf, "pld", certified=True)

    def _profile(self, epsilons: np.ndarray, method: str, direction: str | None = None):
        if direction is None:
            chosen = slice(None)
        else:  # one direction: its engine, or the only one when both directions coincide
            index = self.directions.index(check.choice("direction", direction, self.directions))
            chosen = slice(index, index + 1) if index < len(self.planner.distinct_directions) else slice(0, 1)
        mu = closed_form_mu(self._counts, self._gaussian_mu, method)
        if mu is not None:  # Gaussians alone: their closed form, without engines or auto's bookkeeping
            began = time.monotonic()
            with budgets.limits(self.budget):  # the time budget still holds
                value, error = gaussian_delta_with_error(epsilons, mu)
                budgets.check("evaluating the composed Gaussian's closed form")
            run = Answer("exact", None, (Attempt("exact", "answered", "", time.monotonic() - began),),
                          ExactEngine.certified)
            values, errors = value[None, :], error[None, :]
        else:
            run = self._run(method, lambda engines: _directions_delta(engines[chosen], epsilons),
                            lambda answer: max(float(np.max(errors / np.maximum(values, 1e-300)))
                                               for values, errors in answer), agrees=_delta_bounds_meet)
            values = np.array([value for value, _ in run.answer])
            errors = np.array([error for _, error in run.answer])
        name = run.name
        if not (np.all(np.isfinite(values)) and np.all(errors >= 0)):
            raise AccuracyError(f"method={name!r} failed numerically for this composition (non-finite delta); "
                                "please report it with the composition")
        floor = -np.expm1(np.minimum(epsilons, 0.0)) + 0.0  # delta(eps) >= (1 - e^eps)_+ (and no -0.0)
        truncated = self.planner.truncated_mass  # the computed delta exceeds the true one by at most this
        value = np.clip(values.max(axis=0), floor, 1.0)
        lower = np.clip((values - errors).max(axis=0) - truncated, floor, 1.0)
        upper = np.clip((values + errors).max(axis=0), floor, 1.0)
        error = errors.max(axis=0) + truncated
        # A loss that can exceed eps gives a positive delta, which may lie below the double range: its upper
        # bound is then the smallest subnormal, not 0.
        if np.any(upper == 0):
            underflow = (upper == 0) & (epsilons < self.planner.loss_reach())
            upper, error = np.where(underflow, 5e-324, upper), np.where(underflow, np.maximum(error, 5e-324), error)
        return value, lower, upper, error, run

    def epsilon_result(self, delta: ArrayLike, method: str = "auto") -> Result:
        """The smallest epsilon >= 0 with delta(epsilon) <= delta, with bounds.

        Parameters
        ----------
        delta : float or array_like
            A number in (0, 1), or an array of them of any shape (every value is checked before any is
            answered; each is one query with its own time budget); the result's numbers then have its shape.
        method : {"auto", "exact", "quadrature", "contour", "certified", "pld"}, default "auto"
            The engine (see the class's Notes).

        Returns
        -------
        Result
            ``value`` (best estimate), ``lower``, ``upper`` and ``error`` (half the bracket's width, +inf
            when ``upper`` is): floats for a number, arrays of ``delta``'s shape for an array (an empty array
            gives empty arrays without computing).  epsilon is +inf when ``delta`` is below the mass at
            infinity.  The lower bound allows for the mass truncated mechanisms (DiscreteGaussian) send to
            +infinity.  For an array, ``method`` joins the engines that answered with "+", ``certified`` holds
            if every answer is certified, and ``attempts`` concatenates every query's.

        Raises
        ------
        ValueError
            A ``delta`` outside (0, 1) or not finite, an unknown ``method``, or an empty accountant.
        TypeError
            A ``delta`` that is not real numbers.
        UnsupportedCompositionError
            The named ``method`` cannot serve this composition.
        AccuracyError
            The named method, or under "auto" every method, refused (a :class:`afa.BudgetExceededError`
            when the budget ran out); the message lists what was tried, and the error's ``bracket`` holds
            the best certified bound found, if any (under "auto", when no engine found one, a lower bound
            from the PLD of one mechanism's uses alone, computed in the time ``AutoOptions.reserve`` keeps).

        Examples
        --------
        >>> import afa
        >>> acc = afa.Accountant().compose(afa.Gaussian(sigma=10.0), times=100)
        >>> result = acc.epsilon_result(1e-5)
        >>> round(result.value, 6), result.method, bool(result.lower <= result.value <= result.upper)
        (4.377178, 'exact', True)
        >>> acc.epsilon_result([1e-5, 1e-6]).upper.round(4)
        array([4.3772, 4.8866])
        """
        if type(delta) is float or (np.ndim(delta) == 0 and not isinstance(delta, np.ndarray)):
            return self._epsilon_result(check.in_interval("delta", delta, 0.0, 1.0, low_open=True, high_open=True),
                                        method)
        deltas = check.real_array("delta", delta)
        outside = deltas[~((deltas > 0) & (deltas < 1))]
        if outside.size:
            raise ValueError(f"delta must be in (0, 1), got {outside.flat[0]!r} among {deltas.size} values")
        if deltas.size == 0:
            self.planner.resolve(method)
            return Result(deltas, deltas, deltas, deltas, method)
        results = [self._epsilon_result(float(one), method) for one in deltas.ravel()]
        value, lower, upper, error = (np.array([getattr(result, name) for result in results]).reshape(deltas.shape)
                                      for name in ("value", "lower", "upper", "error"))
        methods = "+".join(dict.fromkeys(result.method for result in results))
        return Result(value, lower, upper, error, methods, certified=all(result.certified for result in results),
                      tight=self.tight, attempts=tuple(attempt for result in results for attempt in result.attempts))

    def _epsilon_result(self, delta: float, method: str) -> Result:
        try:
            return self._mark(self._unmarked_epsilon_result(delta, method))
        except AccuracyError as refusal:
            self._mark_refusal(refusal)
            raise

    def _unmarked_epsilon_result(self, delta: float, method: str) -> Result:
        mu = closed_form_mu(self._counts, self._gaussian_mu, method)
        if mu is not None:  # Gaussians alone: Newton on their closed form, its bracket verified on it
            began = time.monotonic()
            with budgets.limits(self.budget):  # the time budget still holds (the bracket's search checks it)
                value, lower, upper = gaussian_epsilon_bracket(delta, mu)
                budgets.check("solving the composed Gaussian's closed form for eps")
            attempts = (Attempt("exact", "answered", "", time.monotonic() - began),)
            return Result(value, lower, upper, (upper - lower) / 2, "exact", certified=ExactEngine.certified,
                          attempts=attempts)
        run = self._run(method, lambda engines: _solve_directions(engines, delta), _relative_width, delta,
                        _epsilon_bounds_meet)
        value, lower, upper = _epsilon_maximum(run.answer)
        widened = delta + self.planner.truncated_mass
        if widened != delta:  # truncation over-estimates delta by at most that mass: the lower eps solves delta + it
            target = min(widened, 0.5 * (1 + delta))
            solutions = self._run(run.name, lambda engines: _solve_directions(engines, target)).answer
            lower = min(lower, max(solution[1] for solution in solutions))
        error = (upper - lower) / 2 if math.isfinite(upper) else math.inf
        return Result(value, lower, upper, error, label(run.name), certified=run.certified, attempts=run.attempts)

    def epsilon(self, delta: ArrayLike, method: str = "auto") -> float | np.ndarray:
        """The tight epsilon(delta) of the composition: the upper end of :meth:`epsilon_result`'s bounds.

        Parameters
        ----------
        delta : float or array_like
            A number in (0, 1), or an array of them of any shape.
        method : {"auto", "exact", "quadrature", "contour", "certified", "pld"}, default "auto"
            The engine (see the class's Notes).

        Returns
        -------
        float or ndarray
            ``epsilon_result(delta, method).upper``: never below what the bounds allow for the truth; +inf
            if delta is below the mass at infinity; an array of ``delta``'s shape for an array of deltas.

        Raises
        ------
        ValueError, TypeError, UnsupportedCompositionError, AccuracyError
            As :meth:`epsilon_result`.

        Examples
        --------
        >>> import afa
        >>> acc = afa.Accountant().compose(afa.Gaussian(sigma=10.0), times=100)
        >>> round(acc.epsilon(1e-5), 4)
        4.3772
        >>> acc.epsilon([1e-5, 1e-6]).round(4)
        array([4.3772, 4.8866])
        """
        return self.epsilon_result(delta, method).upper

    def epsilon_bounds(self, delta: float, method: str = "auto") -> tuple[float, float]:
        """(lower, upper) on epsilon(delta).  Deprecated: read ``epsilon_result(delta).lower`` and ``.upper``.

        One name per question; this spelling goes in the next version.

        Parameters
        ----------
        delta : float
            A number in (0, 1) (no arrays).
        method : {"auto", "exact", "quadrature", "contour", "certified", "pld"}, default "auto"
            The engine (see the class's Notes).

        Returns
        -------
        tuple of float
            ``(epsilon_result(delta).lower, epsilon_result(delta).upper)``.

        Raises
        ------
        ValueError, TypeError, UnsupportedCompositionError, AccuracyError
            As :meth:`epsilon_result`.

        Warns
        -----
        DeprecationWarning
            On every call.

        Examples
        --------
        >>> import afa
        >>> import warnings
        >>> accountant = afa.Accountant().compose(afa.Gaussian(1.0))
        >>> result = accountant.epsilon_result(1e-5)  # the replacement: no warning
        >>> round(result.lower, 6), round(result.upper, 6)
        (4.377178, 4.377178)
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     bounds = accountant.epsilon_bounds(1e-5)
        >>> caught[0].category.__name__, bounds == (result.lower, result.upper)
        ('DeprecationWarning', True)
        """
        warnings.warn("Accountant.epsilon_bounds is deprecated: use epsilon_result(delta).lower and .upper",
                      DeprecationWarning, stacklevel=2)
        result = self.epsilon_result(check.in_interval("delta", delta, 0.0, 1.0, low_open=True, high_open=True),
                                     method)
        return float(result.lower), float(result.upper)

    def validate(self, *, delta: float | None = None, epsilon: float | None = None,
                 method: str = "auto") -> Validation:
        """Answer eps(delta) or delta(eps) with ``method`` and with the discretized PLD, and check them.

        Parameters
        ----------
        delta : float, optional
            Check epsilon(delta): a number in (0, 1).
        epsilon : float, optional
            Check delta(epsilon): a finite real number.  Give exactly one of ``delta`` and ``epsilon``.
        method : {"auto", "exact", "quadrature", "contour", "certified"}, default "auto"
            The engine to check; not "pld", the reference.

        Returns
        -------
        Validation
            ``estimate``, the :class:`afa.Result` of ``method``, and ``bracket``, the PLD's certified
            :class:`afa.Result`, with ``estimate.value`` inside ``[bracket.lower, bracket.upper]``.

        Raises
        ------
        ValidationError
            The estimate lies outside the PLD's certified bracket.
        ValueError
            Neither or both of ``delta`` and ``epsilon``, ``method="pld"``, a ``method`` that answered with
            the PLD itself (nothing independent to compare), or an argument out of range.
        UnsupportedCompositionError, AccuracyError
            As the queries (:meth:`epsilon_result`, :meth:`delta_result`) of either engine.

        Notes
        -----
        The two engines share nothing but the mechanisms' definitions (characteristic functions or
        closed forms against loss tails on a grid, Google DP team 2025), so agreement is strong evidence for
        both.

        Examples
        --------
        >>> import afa
        >>> acc = afa.Accountant().compose(afa.Gaussian(sigma=10.0), times=100)
        >>> check = acc.validate(delta=1e-5)
        >>> check.estimate.method, check.bracket.method, check.bracket.certified
        ('exact', 'pld', True)
        >>> round(check.estimate.value, 4), round(check.bracket.lower, 4), round(check.bracket.upper, 4)
        (4.3772, 4.3772, 4.3772)
        """
        if (delta is None) == (epsilon is None):
            raise ValueError("give exactly one of delta (to check epsilon(delta)) and epsilon "
                             "(to check delta(epsilon))")
        if method == "pld":
            raise ValueError("method='pld' is the reference here; validate another method")
        if delta is not None:
            delta = check.in_interval("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
        if epsilon is not None:
            epsilon = check.real_number("epsilon", epsilon)
        if delta is not None:
            estimate, bracket = self.epsilon_result(delta, method), self.epsilon_result(delta, "pld")
        elif epsilon is not None:
            estimate, bracket = self.delta_result(epsilon, method), self.delta_result(epsilon, "pld")
        if estimate.method == "pld":
            raise ValueError(f"method={method!r} answered with the PLD itself (no other engine serves this query); "
                             "nothing independent to compare")
        if not bracket.lower <= estimate.value <= bracket.upper:
            what = f"epsilon(delta={delta:g})" if delta is not None else f"delta(epsilon={epsilon:g})"
            raise ValidationError(f"{what}: method {estimate.method!r} gives {estimate.value:.17g}, outside the PLD's "
                                  f"certified bracket [{bracket.lower:.17g}, {bracket.upper:.17g}]; please report it")
        return Validation(estimate, bracket)

    def cdf(self, x, direction: str | None = None, with_error: bool = False):
        """Pr[L <= x] of the composed finite privacy loss of one direction (Levy inversion, Zhu, Dong & Wang
        2022, Lemma 18).

        Parameters
        ----------
        x : array_like
            Finite real numbers, of any shape.
        direction : str, optional
            One of :attr:`directions`; defaults to the first.
        with_error : bool, default False
            Also return the error.

        Returns
        -------
        values : ndarray
            Pr[L <= x] at each x, of ``x``'s shape.  The mass at +infinity is excluded, so the CDF tends to
            1 - inf_mass; values are clipped to [0, 1 - inf_mass].
        error : float
            Only with ``with_error=True``: the absolute error, an estimate (two Gauss-Legendre rules and a
            tail estimate); it is largest next to a jump of the loss density (e.g. at Laplace's atoms, about
            2e-6).

        Raises
        ------
        ValueError
            An unknown ``direction``, a non-finite ``x``, or an empty accountant.
        TypeError
            An ``x`` that is not real numbers.
        UnsupportedCompositionError
            The quadrature cannot serve this composition (no continuous part, or zero variance).

        Examples
        --------
        >>> import afa
        >>> acc = afa.Accountant().compose(afa.Gaussian(sigma=10.0), times=100)
        >>> acc.cdf([0.0, 0.5]).round(6)
        array([0.308538, 0.5     ])
        """
        direction = self.directions[0] if direction is None else check.choice("direction", direction, self.directions)
        xs = check.real_array("x", x)
        self.planner.resolve("quadrature")
        if xs.size == 0:  # nothing to invert (as privacy_profile([]))
            return (xs, 0.0) if with_error else xs
        index = self.directions.index(direction)
        with settings.using(self.options):
            engines = self.planner.engines("quadrature")
            engine = cast("QuadratureEngine", engines[min(index, len(engines) - 1)])
            values, error = engine.inversion.cdf(xs)
        values = np.clip(values, 0.0, 1.0 - self.inf_mass[direction])
        return (values, float(error)) if with_error else values

    def __repr__(self) -> str:
        items = ", ".join(f"{m!r} x{count}" for m, count in self._counts.items())
        return f"Accountant(neighboring={self.neighboring!r}, [{items}])"


def _relative_width(answer) -> float:
    """The widest (upper - lower) / value over the directions' (value, lower, upper); 0 where the bounds meet
    (also at +inf), +inf where only the upper bound is infinite."""
    widths = [0.0 if upper == lower else math.inf if math.isinf(upper) else (upper - lower) / max(value, 1e-300)
              for value, lower, upper in answer]
    return max(widths)


def _epsilon_maximum(answer) -> tuple[float, float, float]:
    """(eps, lower, upper) of the composition from its directions' (eps, lower, upper): each the maximum."""
    value, lower, upper = (max(column) for column in zip(*answer))
    return value, lower, upper


def _epsilon_bounds_meet(estimate, certified) -> bool:
    """Whether the eps(delta) bounds of an estimate and of a certified answer (:func:`_epsilon_maximum` of each)
    overlap: if not, the estimate contradicts the proof."""
    _, lower, upper = _epsilon_maximum(estimate)
    _, low, high = _epsilon_maximum(certified)
    return lower <= high and low <= upper


def _delta_bounds_meet(estimate, certified) -> bool:
    """Whether the delta bounds (value -/+ error, the maximum over the directions) of an estimate and of a
    certified answer overlap at every eps asked."""
    def bounds(answer) -> tuple[np.ndarray, np.ndarray]:
        values, errors = np.array([value for value, _ in answer]), np.array([error for _, error in answer])
        return (values - errors).max(axis=0), (values + errors).max(axis=0)

    (lower, upper), (low, high) = bounds(estimate), bounds(certified)
    return bool(np.all(lower <= high) and np.all(low <= upper))


def _loss_magnitude(losses: tuple, bound: bool = True) -> float:
    """The largest |loss value|, |mean| or variance of one use over both directions: for a continuous part, an
    upper bound (:attr:`afa.mechanisms.privacy_loss.PrivacyLoss.magnitude`, no quadrature) or, with ``bound``
    False, its cumulants."""
    largest = 0.0
    for loss in losses:
        if loss.atoms.size:
            largest = max(largest, abs(float(loss.atoms.losses[0])), abs(float(loss.atoms.losses[-1])))
        if loss.continuous and bound:
            largest = max(largest, loss.magnitude)
        elif loss.continuous:
            mean, variance = loss.cumulants
            largest = max(largest, abs(mean), variance)
    return largest


def _directions_delta(engines, epsilons: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(values, errors) of delta at ``epsilons`` for each direction, for their maximum.

    The first direction is evaluated; a further direction whose cheap bound B
    (:meth:`afa.engines.base.Engine.chernoff_delta`, e.g. the contour's Chernoff bound, no contour sum) is at
    most the first's value - error at every eps lies below the first's true delta, so it cannot set the
    maximum (the maximum's true error is then the first's): it is returned as (0, 0), without its own
    evaluation.
    """
    answers = [engines[0].delta(epsilons)]
    for engine in engines[1:]:
        values, errors = answers[0]
        room = values - errors
        if np.all(room > 0):
            bounds = engine.chernoff_delta(epsilons, float(np.min(room)))
            if np.all(bounds <= room):
                answers.append((np.zeros_like(values), np.zeros_like(errors)))
                continue
        answers.append(engine.delta(epsilons))
    return answers


def _solve_directions(engines, delta: float) -> list[tuple[float, float, float]]:
    """(eps, lower, upper) of each direction that can set the maximum.

    The first direction is solved; another whose delta plus its error is already <= delta at
    that eps has its own eps (and upper bound) below it, so it cannot raise the maximum and
    is not solved (one evaluation instead of a root search; the maximum's lower bound stays
    the first direction's, still valid).
    """
    solutions = [engines[0].epsilon_bracket(delta)]
    for engine in engines[1:]:
        epsilon = solutions[0][0]
        if math.isfinite(epsilon):
            try:
                below = engine.upper_delta(np.array([epsilon]), delta)[0] <= delta
            except CompositionTooLargeError:  # delta(eps) alone too costly: the eps(delta) search prunes by delta
                below = False
            if below:
                continue
        solutions.append(engine.epsilon_bracket(delta))
    return solutions
