"""afa as the privacy accountant of Opacus (DP-SGD in PyTorch): its accountant contract and its calibration.

This module owns the Opacus adapter:

- :class:`AfaAccountant` keeps the contract of Opacus's accountants (``opacus.accountants.IAccountant``,
  Opacus 1.4 to 1.6: ``step``, ``get_epsilon``, ``__len__``, ``mechanism``, ``history``,
  ``get_optimizer_hook_fn``, ``state_dict``, ``load_state_dict``) and answers ``get_epsilon`` with afa's
  epsilon(delta) of the recorded steps (:meth:`afa.Accountant.epsilon`, the upper end of its bounds);
- :func:`get_noise_multiplier` has the signature of ``opacus.accountants.utils.get_noise_multiplier`` and
  returns afa's certified calibration (:func:`afa.calibrate_sigma`);
- :func:`register_with_opacus` makes the name "afa" known to Opacus (``PrivacyEngine(accountant="afa")``,
  ``make_private_with_epsilon``) where its accountant registry exists.

Neither opacus nor torch is imported to define or use :class:`AfaAccountant`: Opacus's ``PrivacyEngine``
calls its accountant's methods without checking its type, so ``privacy_engine.accountant =
AfaAccountant()`` is enough.  Only :func:`register_with_opacus` imports opacus.

Each recorded step is one Gaussian mechanism of sensitivity 1 (the clipping norm) and standard deviation
``noise_multiplier``, Poisson-subsampled at ``sample_rate``, under the add/remove relation -- the model of
DP-SGD (Abadi et al. 2016, Sec. 3.1) that Opacus's own accountants use.  ``sample_rate`` 1 is the plain
Gaussian mechanism, 0 a step that never touches the record (it adds nothing).  ``noise_multiplier`` 0 is a
step whose clipped gradient sum is released without noise: with probability ``sample_rate`` the record's
presence is revealed outright, so its dominating pair is P = (1 - q, q), Q = (1, 0) over {not revealed,
revealed} (the limit of the subsampled Gaussian's pair as sigma -> 0; Zhu, Dong & Wang 2022, Thm 11(1)),
and after k such steps epsilon(delta) = +inf for every delta < 1 - (1 - q)^k.  The same pair, which
dominates every mechanism on a rate-q Poisson subsample, stands in for a noise multiplier too small for
afa's subsampled Gaussian (1 / sigma above ``afa.limits.MAX_NOISE_SHIFT``), where it is sound
and nearly tight.
"""

from __future__ import annotations

import math
import numbers
from collections import OrderedDict
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

from ..accountant import Accountant
from ..budget import Budget
from ..calibration import calibrate_sigma
from ..limits import MAX_MU, MAX_NOISE_SHIFT
from ..mechanisms.catalog import DiscreteMechanism, Gaussian, Mechanism
from ..options import METHODS

__all__ = ["AfaAccountant", "get_noise_multiplier", "register_with_opacus", "MECHANISM", "OPACUS_MECHANISMS"]

#: The name :meth:`AfaAccountant.mechanism` returns, stored in its state_dict and registered with Opacus.
MECHANISM = "afa"
#: Opacus's own accountants, whose state_dicts hold the same history (noise_multiplier, sample_rate,
#: num_steps) and so load into an :class:`AfaAccountant`: a checkpoint can be re-accounted with afa.
OPACUS_MECHANISMS = ("rdp", "prv", "gdp")

HistoryEntry = tuple[float, float, int]


class AfaAccountant:
    """Opacus's accountant contract, answered by afa: a ledger of DP-SGD steps and their epsilon(delta).

    Use it as a ``PrivacyEngine``'s accountant: ``privacy_engine.accountant = AfaAccountant()`` before
    ``make_private``, whose optimizer hook then records every step.  Neither opacus nor torch is needed to
    import or use it.

    Parameters
    ----------
    method : {"auto", "exact", "quadrature", "contour", "certified", "pld"}, default "auto"
        The afa engine that answers :meth:`get_epsilon` (:meth:`afa.Accountant.epsilon`).
    budget : afa.Budget, optional
        Time and memory limits of each :meth:`get_epsilon` query (default ``afa.Budget()``, 30 s).

    Attributes
    ----------
    history : list of (float, float, int)
        The ledger, as Opacus keeps it: (noise_multiplier, sample_rate, num_steps) in the order the steps
        were taken, consecutive steps with the same (noise_multiplier, sample_rate) counted in one entry.
        Assigning a list validates every entry first (a bad one raises ValueError and leaves the ledger
        as it was), as Opacus's ``get_noise_multiplier`` and ``load_state_dict`` do.
    method : str
        The afa engine of :meth:`get_epsilon`.
    budget : afa.Budget
        The limits of each query.

    Raises
    ------
    ValueError
        An unknown ``method``.
    TypeError
        A ``budget`` that is not an :class:`afa.Budget`.

    Notes
    -----
    Each step is Gaussian(noise_multiplier) Poisson-subsampled at sample_rate under add/remove (module
    docstring; noise_multiplier 0 gives epsilon = +inf at every delta of use).  The ledger is compressed as
    Opacus's RDP and PRV accountants compress theirs, so a million steps with one (noise_multiplier,
    sample_rate) are one entry, and afa composes a mechanism used k times at the cost of one use: a query
    costs the same after 10 or 10**6 steps.

    ``len(accountant)`` is the number of steps taken, as ``IAccountant.__len__`` documents it (Opacus's own
    accountants return the number of history entries; ``PrivacyEngine`` only tests it against 0).

    Examples
    --------
    >>> from afa.interop.opacus import AfaAccountant
    >>> accountant = AfaAccountant()
    >>> for _ in range(1000):
    ...     accountant.step(noise_multiplier=1.0, sample_rate=0.01)
    >>> accountant.history, len(accountant)
    ([(1.0, 0.01, 1000)], 1000)
    >>> round(accountant.get_epsilon(delta=1e-5), 4)
    1.8282
    """

    def __init__(self, *, method: str = "auto", budget: Budget | None = None):
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
        if budget is not None and not isinstance(budget, Budget):
            raise TypeError(f"budget must be an afa.Budget, got {type(budget).__name__}")
        self.method = method
        self.budget = Budget() if budget is None else budget
        self._history: list[HistoryEntry] = []
        # The afa accountant of the last history queried (its engines are reused while the history is unchanged).
        self._composed: tuple[tuple[HistoryEntry, ...], Accountant | None] | None = None

    # -- the ledger --------------------------------------------------------
    @property
    def history(self) -> list[HistoryEntry]:
        """The ledger: (noise_multiplier, sample_rate, num_steps) entries in the order taken."""
        return self._history

    @history.setter
    def history(self, entries: Sequence) -> None:
        self._history = _validated_history(entries)

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """Record one optimisation step: Gaussian(noise_multiplier) on a Poisson subsample at sample_rate.

        Parameters
        ----------
        noise_multiplier : float
            The noise's standard deviation over the clipping norm, a finite number >= 0.
        sample_rate : float
            The probability that each record is in the step's batch, in [0, 1].

        Raises
        ------
        ValueError
            A parameter out of range (NaN, infinite, negative, a rate above 1); nothing is recorded.
        TypeError
            A parameter that is not a real number; nothing is recorded.

        Examples
        --------
        >>> from afa.interop.opacus import AfaAccountant
        >>> accountant = AfaAccountant()
        >>> for _ in range(3):
        ...     accountant.step(noise_multiplier=1.0, sample_rate=0.01)
        >>> accountant.step(noise_multiplier=1.2, sample_rate=0.01)
        >>> accountant.history, len(accountant)
        ([(1.0, 0.01, 3), (1.2, 0.01, 1)], 4)
        """
        sigma = _noise_multiplier("noise_multiplier", noise_multiplier)
        rate = _sample_rate("sample_rate", sample_rate)
        if self._history and self._history[-1][:2] == (sigma, rate):
            self._history[-1] = (sigma, rate, self._history[-1][2] + 1)
        else:
            self._history.append((sigma, rate, 1))

    def __len__(self) -> int:
        """The number of steps taken (the sum of the history's counts)."""
        return sum(entry[2] for entry in self._history)

    @classmethod
    def mechanism(cls) -> str:
        """The accounting mechanism's name (kept in the state_dict; Opacus's registry key).

        Returns
        -------
        str
            "afa".

        Examples
        --------
        >>> from afa.interop.opacus import AfaAccountant
        >>> AfaAccountant.mechanism()
        'afa'
        """
        return MECHANISM

    def get_optimizer_hook_fn(self, sample_rate: float) -> Callable[[Any], None]:
        """A hook for Opacus's ``DPOptimizer.attach_step_hook`` that records each step it takes.

        Parameters
        ----------
        sample_rate : float
            The sampling rate of one batch, in [0, 1] (``PrivacyEngine.make_private`` passes
            1 / len(data_loader)).

        Returns
        -------
        callable
            ``hook(optimizer)``: records one step with the optimizer's ``noise_multiplier`` and
            ``sample_rate`` times its ``accumulated_iterations`` (batches accumulated into the step), as
            Opacus's accountants do.

        Raises
        ------
        ValueError, TypeError
            ``sample_rate`` out of range or not a number (and from the hook, a step that :meth:`step` refuses).

        Examples
        --------
        >>> from types import SimpleNamespace
        >>> from afa.interop.opacus import AfaAccountant
        >>> accountant = AfaAccountant()
        >>> hook = accountant.get_optimizer_hook_fn(sample_rate=0.01)
        >>> hook(SimpleNamespace(noise_multiplier=1.1, accumulated_iterations=2))  # two batches in one step
        >>> accountant.history
        [(1.1, 0.02, 1)]
        """
        rate = _sample_rate("sample_rate", sample_rate)

        def hook(optimizer: Any) -> None:
            self.step(noise_multiplier=optimizer.noise_multiplier,
                      sample_rate=rate * optimizer.accumulated_iterations)

        return hook

    # -- checkpoints -------------------------------------------------------
    def state_dict(self, destination: MutableMapping | None = None) -> MutableMapping:
        """The accountant's state: ``history`` (a copy) and ``mechanism`` ("afa"), as Opacus's accountants keep it.

        Parameters
        ----------
        destination : mutable mapping, optional
            Where to put the two keys (default: a new ``OrderedDict``).

        Returns
        -------
        mutable mapping
            ``destination``; its values are plain lists, tuples, floats, ints and a string, so it survives
            ``pickle``, ``copy.deepcopy`` and ``torch.save`` / ``torch.load`` (also with ``weights_only=True``).

        Examples
        --------
        >>> from afa.interop.opacus import AfaAccountant
        >>> accountant = AfaAccountant()
        >>> accountant.step(noise_multiplier=1.0, sample_rate=0.01)
        >>> dict(accountant.state_dict())
        {'history': [(1.0, 0.01, 1)], 'mechanism': 'afa'}
        """
        if destination is None:
            destination = OrderedDict()
        destination["history"] = list(self._history)
        destination["mechanism"] = self.mechanism()
        return destination

    def load_state_dict(self, state_dict: Mapping) -> None:
        """Replace the ledger by a saved one (:meth:`state_dict`, or that of an Opacus RDP, PRV or GDP accountant).

        Parameters
        ----------
        state_dict : mapping
            With ``history`` (a list of (noise_multiplier, sample_rate, num_steps)) and ``mechanism``
            ("afa", or one of ``OPACUS_MECHANISMS``, whose histories mean the same steps).

        Raises
        ------
        ValueError
            An empty or None state_dict, a missing key, another mechanism, or a history entry out of range
            (named by its index); the ledger is then left as it was.
        TypeError
            A state_dict that is not a mapping, or a history entry that is not three numbers.

        Examples
        --------
        >>> from afa.interop.opacus import AfaAccountant
        >>> restored = AfaAccountant()
        >>> restored.load_state_dict({"history": [(1.0, 0.01, 500)], "mechanism": "rdp"})  # an Opacus RDP ledger
        >>> len(restored)
        500
        """
        if state_dict is None or len(state_dict) == 0:
            raise ValueError("state_dict is None or empty: there is no accountant state to load")
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"state_dict must be a mapping with 'history' and 'mechanism', "
                            f"got {type(state_dict).__name__}")
        for key in ("history", "mechanism"):
            if key not in state_dict:
                raise ValueError(f"state_dict has no key {key!r}: it cannot be loaded into an AfaAccountant")
        allowed = (MECHANISM, *OPACUS_MECHANISMS)
        if state_dict["mechanism"] not in allowed:
            raise ValueError(f"a state_dict of mechanism {state_dict['mechanism']!r} cannot be loaded into an "
                             f"AfaAccountant (allowed: {', '.join(allowed)})")
        self._history = _validated_history(state_dict["history"])

    def __getstate__(self) -> dict:
        """The settings and the ledger (the afa accountant of the last query is rebuilt on demand)."""
        return {"method": self.method, "budget": self.budget, "history": list(self._history)}

    def __setstate__(self, state: dict) -> None:
        AfaAccountant.__init__(self, method=state["method"], budget=state["budget"])
        self.history = state["history"]

    # -- queries -----------------------------------------------------------
    def accountant(self) -> Accountant | None:
        """The :class:`afa.Accountant` composing the recorded steps (add/remove), or None if none count.

        Returns
        -------
        afa.Accountant or None
            Per history entry (sigma, q, k): Gaussian(sigma) Poisson-subsampled at q (the plain Gaussian at
            q = 1; for sigma = 0, or sigma below afa's subsampled range, the revealing pair of the module
            docstring) composed k times; entries with q = 0 add nothing.  None when nothing was composed
            (no steps, or only steps with q = 0): epsilon is then 0.  The same object is returned while the
            history is unchanged, so its engines are reused; query it for bounds, methods or validation.

        Raises
        ------
        ValueError, TypeError
            A history entry out of range (the history may have been mutated in place).

        Examples
        --------
        >>> import afa
        >>> from afa.interop.opacus import AfaAccountant
        >>> ledger = AfaAccountant()
        >>> ledger.step(noise_multiplier=1.0, sample_rate=0.01)
        >>> ledger.accountant().mechanisms == {afa.Gaussian(1.0).poisson_subsampled(0.01): 1}
        True
        """
        entries = tuple(_validated_history(self._history))
        if self._composed is None or self._composed[0] != entries:
            composed: Accountant | None = None
            for sigma, rate, count in entries:
                mechanism = _step_mechanism(sigma, rate)
                if mechanism is not None:
                    if composed is None:
                        composed = Accountant("add_remove", budget=self.budget)
                    composed.compose(mechanism, count)
            self._composed = (entries, composed)
        return self._composed[1]

    def get_epsilon(self, delta: float, *, method: str | None = None, **kwargs: Any) -> float:
        """The epsilon(delta) of the steps taken so far: afa's :meth:`afa.Accountant.epsilon`.

        Parameters
        ----------
        delta : float
            Target delta, in (0, 1).
        method : str, optional
            The afa engine for this query (default: the accountant's ``method``).
        **kwargs
            Options of Opacus's accountants (``eps_error``, ``delta_error``, ``alphas``, ``poisson``, ...),
            which ``PrivacyEngine`` and Opacus's ``get_noise_multiplier`` may pass on: accepted and not
            used (afa's answer carries its own error bound, and the steps are Poisson-subsampled).

        Returns
        -------
        float
            The upper end of afa's bounds on the tight epsilon(delta) (never below what they allow for the
            truth); 0.0 when no step counts; +inf when delta is below the mass at infinity (noise_multiplier
            0 steps).

        Raises
        ------
        ValueError
            ``delta`` outside (0, 1), or a history entry out of range.
        afa.AccuracyError
            afa could not answer within its accuracy or the budget (a :class:`afa.BudgetExceededError`).

        Examples
        --------
        >>> import afa
        >>> from afa.interop.opacus import AfaAccountant
        >>> ledger = AfaAccountant()
        >>> for _ in range(100):
        ...     ledger.step(noise_multiplier=1.0, sample_rate=0.01)
        >>> direct = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01), times=100)
        >>> ledger.get_epsilon(1e-5) == direct.epsilon(1e-5)
        True
        """
        if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not 0 < float(delta) < 1:
            raise ValueError(f"delta must be a number in (0, 1), got {delta!r}")
        composed = self.accountant()
        if composed is None:
            return 0.0
        # Noiseless steps reveal the record with probability 1 - prod (1 - q)^k: the remove direction's mass at
        # +inf, a lower bound on delta(eps) at every eps.  Below it epsilon is +inf, answered here without the
        # engines' search (afa's engines also fail on a composition whose remove direction has all its mass at
        # +inf, a noiseless full-batch step, beside a continuous mechanism).
        log_hidden = sum(count * math.log1p(-rate) if rate < 1 else -math.inf
                         for sigma, rate, count in self._history
                         if rate > 0 and _step_mechanism(sigma, rate) == _revealing(rate))
        if float(delta) < -math.expm1(log_hidden):
            return math.inf
        return float(composed.epsilon(float(delta), method=self.method if method is None else method))

    def __repr__(self) -> str:
        return f"AfaAccountant(steps={len(self)}, history entries={len(self._history)}, method={self.method!r})"


def get_noise_multiplier(*, target_epsilon: float, target_delta: float, sample_rate: float,
                         epochs: float | None = None, steps: int | None = None, accountant: str = MECHANISM,
                         epsilon_tolerance: float = 0.01, **kwargs: Any) -> float:
    """The noise multiplier for a DP-SGD run to meet (target_epsilon, target_delta): afa's certified calibration.

    The signature of Opacus's ``opacus.accountants.utils.get_noise_multiplier``; the answer is
    :func:`afa.calibrate_sigma`'s: its epsilon(target_delta) after ``steps`` steps is certified to be at
    most ``target_epsilon`` (the closed form at ``sample_rate`` 1, the discretized PLD's pessimistic bound
    below), never an estimate that may overshoot.

    Parameters
    ----------
    target_epsilon : float
        The privacy budget's epsilon, > 0.
    target_delta : float
        The privacy budget's delta, in (0, 1).
    sample_rate : float
        The Poisson sampling rate of each step (batch size over dataset size), in (0, 1].
    epochs : float, optional
        The number of epochs; steps = int(epochs / sample_rate), as Opacus counts them.  Give exactly one of
        ``epochs`` and ``steps``.
    steps : int, optional
        The number of steps, an integer >= 1.
    accountant : str, default "afa"
        Must be "afa" (Opacus's names "rdp", "prv", "gdp" belong to its own function).
    epsilon_tolerance : float, default 0.01
        How far below ``target_epsilon`` the answer's epsilon may fall, > 0.  afa searches sigma to the
        relative tolerance ``epsilon_tolerance / target_epsilon`` (at most 0.5; epsilon scales about like
        1 / sigma): a sigma that much smaller is shown, by a certified lower bound, to miss the target.
    **kwargs
        ``budget`` (an :class:`afa.Budget` for the whole search, default 120 s) and ``method`` (the afa
        method that certifies the answer) are passed to :func:`afa.calibrate_sigma`; Opacus's accountant
        options (``eps_error``, ``alphas``, ...) are accepted and not used.

    Returns
    -------
    float
        The noise multiplier sigma.

    Raises
    ------
    ValueError
        Both or neither of ``epochs`` and ``steps``; a parameter out of range; an ``accountant`` other than
        "afa"; or a target every sigma meets (a rate so small that 1 - (1 - q)^steps <= target_delta).
    afa.BudgetExceededError, afa.AccuracyError
        From :func:`afa.calibrate_sigma`.

    Examples
    --------
    >>> import afa
    >>> from afa.interop.opacus import get_noise_multiplier
    >>> sigma = get_noise_multiplier(target_epsilon=1.0, target_delta=1e-5, sample_rate=1.0, steps=10)
    >>> round(sigma, 2), round(afa.gaussian_sigma(1.0, 1e-5, steps=10), 2)  # the answer and the smallest sigma
    (11.83, 11.8)
    """
    if accountant != MECHANISM:
        raise ValueError(f"accountant must be {MECHANISM!r} here (got {accountant!r}); Opacus's "
                         "opacus.accountants.utils.get_noise_multiplier serves its own accountants")
    if (steps is None) == (epochs is None):
        raise ValueError("give exactly one of epochs and steps")
    rate = _sample_rate("sample_rate", sample_rate)
    if rate == 0:
        raise ValueError("sample_rate must be in (0, 1] to calibrate noise, got 0.0 (no step would use the data)")
    epsilon = _real("target_epsilon", target_epsilon)
    if not 0 < epsilon < math.inf:
        raise ValueError(f"target_epsilon must be a finite number > 0, got {epsilon}")
    tolerance = _real("epsilon_tolerance", epsilon_tolerance)
    if not 0 < tolerance < math.inf:
        raise ValueError(f"epsilon_tolerance must be a finite number > 0, got {tolerance}")
    if steps is None:
        count = _real("epochs", epochs)
        if not 0 < count < math.inf:
            raise ValueError(f"epochs must be a finite number > 0, got {count}")
        steps = int(count / rate)  # Opacus's count: int(epochs / sample_rate)
        if steps < 1:
            raise ValueError(f"epochs={count:g} at sample_rate={rate:g} is less than one step")
    count = _count("steps", steps)
    options = {name: kwargs[name] for name in ("budget", "method") if name in kwargs}
    rtol = min(max(tolerance / epsilon, 1e-10), 0.5)
    calibration = calibrate_sigma(epsilon, target_delta, count, None if rate == 1 else rate, rtol=rtol, **options)
    return float(calibration.value)


def register_with_opacus(force: bool = False) -> None:
    """Make "afa" an accountant name of Opacus: ``PrivacyEngine(accountant="afa")``, ``make_private_with_epsilon``.

    Registers :class:`AfaAccountant` in Opacus's accountant registry (``opacus.accountants.register_accountant``,
    Opacus 1.6 and later) and as a virtual subclass of ``opacus.accountants.IAccountant`` (so
    ``isinstance(AfaAccountant(), IAccountant)`` holds).  Calling it again is harmless.  With Opacus
    versions without the registry, assign ``privacy_engine.accountant = AfaAccountant()`` instead.

    Parameters
    ----------
    force : bool, default False
        Replace another accountant registered under "afa".

    Raises
    ------
    ImportError
        opacus is not installed, or has no accountant registry (Opacus before 1.6).
    ValueError
        Another accountant is registered as "afa" and ``force`` is False.

    Notes
    -----
    ``make_private_with_epsilon`` then calls Opacus's own ``get_noise_multiplier`` with this accountant
    (a bisection on its epsilon, each an afa upper bound); :func:`get_noise_multiplier` here is the
    certified calibration to pass as ``noise_multiplier`` to ``make_private`` instead.

    Examples
    --------
    >>> from afa.interop.opacus import register_with_opacus
    >>> register_with_opacus()  # doctest: +SKIP
    >>> # then: opacus.PrivacyEngine(accountant="afa")
    """
    try:
        from opacus import accountants
    except ImportError as error:
        raise ImportError("register_with_opacus needs opacus (pip install 'afa[opacus]')") from error
    accountants.IAccountant.register(AfaAccountant)
    register = getattr(accountants, "register_accountant", None)
    if register is None:
        raise ImportError("this opacus has no accountant registry (opacus.accountants.register_accountant, "
                          "Opacus 1.6 and later): assign privacy_engine.accountant = AfaAccountant() instead")
    try:
        register(MECHANISM, AfaAccountant, force=force)
    except ValueError:
        if type(accountants.create_accountant(MECHANISM)) is not AfaAccountant:
            raise


# -- checks and the step's mechanism ------------------------------------------
def _real(name: str, value: Any) -> float:
    """``value`` as a float (real numbers, and 0-d arrays or tensors through ``item()``), or a TypeError naming it."""
    if not isinstance(value, numbers.Real) and callable(getattr(value, "item", None)):
        try:
            value = value.item()
        except (TypeError, ValueError):  # not a one-element array
            pass
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    return float(value)


def _noise_multiplier(name: str, value: Any) -> float:
    sigma = _real(name, value)
    if not 0 <= sigma < math.inf:
        raise ValueError(f"{name} must be a finite number >= 0 (0: no noise), got {sigma}")
    return sigma


def _sample_rate(name: str, value: Any) -> float:
    rate = _real(name, value)
    if not 0 <= rate <= 1:
        raise ValueError(f"{name} must be in [0, 1], got {rate}")
    return rate


def _count(name: str, value: Any) -> int:
    number = _real(name, value)
    if not (number.is_integer() and number >= 1):
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value) if isinstance(value, numbers.Integral) else int(number)


def _validated_history(entries: Any) -> list[HistoryEntry]:
    """A new list of (noise_multiplier, sample_rate, num_steps) tuples, every entry checked first."""
    if isinstance(entries, (str, bytes, Mapping)) or not isinstance(entries, Sequence):
        raise TypeError(f"history must be a list of (noise_multiplier, sample_rate, num_steps), "
                        f"got {type(entries).__name__}")
    result = []
    for index, entry in enumerate(entries):
        if isinstance(entry, (str, bytes)) or not isinstance(entry, Sequence) or len(entry) != 3:
            raise TypeError(f"history[{index}] must be (noise_multiplier, sample_rate, num_steps), got {entry!r}")
        result.append((_noise_multiplier(f"history[{index}] noise_multiplier", entry[0]),
                       _sample_rate(f"history[{index}] sample_rate", entry[1]),
                       _count(f"history[{index}] num_steps", entry[2])))
    return result


def _step_mechanism(sigma: float, rate: float) -> Mechanism | None:
    """One step's mechanism: Gaussian(sigma) Poisson-subsampled at rate (module docstring); None if it adds nothing."""
    if rate == 0:
        return None
    if rate == 1:
        if sigma > 0 and 1 / sigma <= MAX_MU:
            return Gaussian(sigma)
    elif sigma > 0 and 1 / sigma <= MAX_NOISE_SHIFT:
        return Gaussian(sigma).poisson_subsampled(rate)
    return _revealing(rate)


def _revealing(rate: float) -> Mechanism:
    """No noise (or too little for afa's Gaussian): the record's presence is revealed with probability rate."""
    return DiscreteMechanism((1 - rate, rate), (1.0, 0.0))

