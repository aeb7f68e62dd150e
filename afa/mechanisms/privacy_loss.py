"""One direction of a dominating pair: the privacy-loss distribution and its log-CF.

For a dominating pair (P, Q) (Zhu, Dong & Wang 2022, Def. 7) the
privacy loss is L = log(p/q)(o) with o ~ P (Def. 4).  A :class:`PrivacyLoss`
holds

* ``log_phi`` -- the symbolic log characteristic function of the *finite*
  part of L (a sub-probability measure, so ``log_phi(0) = log(1 - inf_mass)``),
  in the real symbol :data:`t` (Def. 12, App. D.2 Prop. 38);
* ``inf_mass`` -- the probability that L = +infinity (q = 0 where p > 0);
* ``atoms`` -- the discrete part of the finite loss, kept exactly, so that the
  numerical inversion can treat atoms analytically;
* a compiled, vectorised evaluator of the log-CF, and the first two cumulants
  of the normalised finite part (they fix the inversion's scale).
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable

import numpy as np

from .._accurate import complex_log1p, expm1_minus_identity, log_characteristic, weighted_cumulants
from .._lazy import cfunctions, mpmath, sympy
from ..numerics.atoms import LossAtoms


@functools.cache
def variable() -> sympy.Symbol:
    """The real variable t of every characteristic function (:data:`afa.t`, also ``afa.mechanisms.privacy_loss.t``).

    Made on first use, which imports SymPy.
    """
    return sympy.Symbol("t", real=True)


class Template:
    """A family of log-CFs: an expression in :data:`t` and parameter symbols.

    Every member of a family (e.g. all Gaussian mechanisms) shares one compiled
    function, evaluated for all members and all nodes in one vectorised call.

    Parameters
    ----------
    expression : sympy.Expr, optional
        The log-CF in :data:`t` and the parameters.
    parameters : tuple of sympy.Symbol, optional
        The family's parameters, in the order of each member's values.
    builder : callable, optional
        Instead of the two: a function returning (expression, parameters), called when either is first read
        (so that a family can be named, and its members built, without importing SymPy).

    Notes
    -----
    Templates compare by identity: each family is one object.
    """

    def __init__(self, expression: sympy.Expr | None = None, parameters: tuple[sympy.Symbol, ...] = (), *,
                 builder: Callable[[], tuple[sympy.Expr, tuple[sympy.Symbol, ...]]] | None = None):
        if (expression is None) == (builder is None):
            raise TypeError("give a Template either its expression and parameters or a builder")
        self._parts = None if builder is not None else (expression, tuple(parameters))
        self._builder = builder
        self._lock = threading.Lock()

    def _built(self) -> tuple[sympy.Expr, tuple[sympy.Symbol, ...]]:
        if self._parts is None:
            with self._lock:
                if self._parts is None:
                    assert self._builder is not None
                    expression, parameters = self._builder()
                    self._parts = (expression, tuple(parameters))
        return self._parts

    @property
    def expression(self) -> sympy.Expr:
        """The log-CF in :data:`t` and :attr:`parameters` (built on first read)."""
        return self._built()[0]

    @property
    def parameters(self) -> tuple[sympy.Symbol, ...]:
        """The parameter symbols (built on first read)."""
        return self._built()[1]

    def __getstate__(self):
        return {"_parts": self._built(), "_builder": None}

    def __setstate__(self, state):
        self._parts, self._builder, self._lock = state["_parts"], None, threading.Lock()

    @functools.cached_property
    def linear(self) -> bool:
        """Whether the log-CF is linear in the parameters (then sum_i k_i f(p_i) = f(sum_i k_i p_i))."""
        at_zero = self.expression.subs({symbol: 0 for symbol in self.parameters})
        return sympy.simplify(at_zero) == 0 and all(
            not (sympy.diff(self.expression, symbol).free_symbols & set(self.parameters)) for symbol in self.parameters)

    def instantiate(self, values: tuple[float, ...]) -> sympy.Expr:
        """The member's own log-CF, with the parameters substituted."""
        return self.expression.subs({symbol: sympy.Float(value, 17) for symbol, value in zip(self.parameters, values)})

    def cumulants(self, values: tuple[float, ...]) -> tuple[float, float]:
        """Mean and variance of a member's normalised loss, -i K'(0) and -K''(0).

        The derivatives are taken symbolically once per family and evaluated with
        60 significant digits, since their terms cancel for small parameters, plus
        twice the decimal exponent of the largest parameter: the variance is a
        difference of terms as large as its square (Laplace's a^2 - 2a + ... - m^2).
        """
        mean, variance = _cumulant_functions(self.expression, self.parameters)
        largest = max((abs(float(value)) for value in values), default=0.0)
        with mpmath.workdps(60 + 2 * max(0, int(math.log10(largest))) if largest > 1 else 60):
            arguments = [mpmath.mpf(value) for value in values]
            return float(mpmath.re(mean(*arguments))), float(mpmath.re(variance(*arguments)))

    def evaluate(self, nodes: np.ndarray, values: np.ndarray) -> np.ndarray:
        """log phi at real or complex ``nodes`` (1-d) for members with parameter rows ``values``.

        The result has shape (nodes, members); complex nodes t - ic give the
        moment-generating function, log M(c + it) = log phi(t - ic).
        """
        function = _compile(self.expression, self.parameters)
        columns = [np.asarray(column, dtype=float)[None, :] for column in np.atleast_2d(values).T]
        result = function(np.asarray(nodes)[:, None].astype(complex), *columns)
        return np.broadcast_to(np.asarray(result, dtype=complex), (np.size(nodes), np.atleast_2d(values).shape[0]))


def _expm1x_value(z):
    """Numeric e^z - 1 - z for lambdify: mpmath numbers stay mpmath, the rest goes to numpy."""
    if isinstance(z, (mpmath.mpf, mpmath.mpc)):
        return mpmath.expm1(z) - z
    return expm1_minus_identity(z)


def expm1x_function() -> type[sympy.Function]:
    """The SymPy function expm1x(x) = e^x - 1 - x (also ``afa.mechanisms.privacy_loss.expm1x``), defined on first use.

    Kept symbolic so that templates avoid cancelling first-order terms: it differentiates, evaluates
    (``evalf``), rewrites to exp and lambdifies (numpy or mpmath) like a built-in function.  One class for
    the process, also when threads ask first at once (expressions compare and pickle by it).
    """
    with _DEFINING:
        return _define_expm1x()


_DEFINING = threading.Lock()


@functools.cache
def _define_expm1x() -> type[sympy.Function]:
    class expm1x(sympy.Function):
        """e^x - 1 - x, kept symbolic so that templates avoid cancelling first-order terms."""

        _imp_ = staticmethod(_expm1x_value)

        @classmethod
        def eval(cls, x):
            if x.is_zero:
                return sympy.S.Zero

        def fdiff(self, argindex=1):
            return cfunctions.expm1(self.args[0])

        def _eval_rewrite_as_exp(self, x, **kwargs):
            return sympy.exp(x) - 1 - x

        def _eval_evalf(self, prec):
            # Extra working precision covers the cancellation for small arguments.
            x = self.args[0]
            return (sympy.exp(x) - 1 - x).evalf(prec + 128).evalf(prec)

    expm1x.__qualname__ = "expm1x"  # pickled by reference as afa.mechanisms.privacy_loss.expm1x (module __getattr__)
    return expm1x


def __getattr__(name: str):
    """``t`` and ``expm1x``: SymPy objects, made (and SymPy imported) on first access."""
    if name == "t":
        return variable()
    if name == "expm1x":
        return expm1x_function()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.lru_cache(maxsize=256)
def _compile(expression: sympy.Expr, parameters: tuple[sympy.Symbol, ...]):
    # sympy's codegen log1p prints as ``log1p``: route it to the accurate complex version.
    return sympy.lambdify((variable(), *parameters), expression,
                          modules=[{"log1p": complex_log1p}, "numpy"])


@functools.lru_cache(maxsize=256)
def _cumulant_functions(expression: sympy.Expr, parameters: tuple[sympy.Symbol, ...]):
    """-i K'(0) and -K''(0) of K = ``expression`` as mpmath functions of the parameters."""
    t = variable()
    first = sympy.diff(expression, t)
    second = sympy.diff(first, t)
    return (sympy.lambdify(parameters, (-sympy.I * first).subs(t, 0), modules="mpmath"),
            sympy.lambdify(parameters, (-second).subs(t, 0), modules="mpmath"))


class PrivacyLoss:
    """The privacy-loss distribution of one direction of a dominating pair.

    Build one with :meth:`discrete` (no continuous part), :meth:`symbolic`
    (closed-form log-CF) or :meth:`numeric` (log-CF computed by quadrature).
    Instances are immutable; mechanisms cache them.
    """

    def __init__(self, *, atoms: LossAtoms, inf_mass: float, continuous: bool,
                 log_phi: sympy.Expr | None, batch: tuple,
                 cumulants: tuple[float, float] | Callable[[], tuple[float, float]],
                 evaluator: Callable[[np.ndarray], np.ndarray] | None = None, continues: bool | None = None,
                 noise_pair=None, cost: Callable[[np.ndarray], np.ndarray] | None = None,
                 laplace_shift: float | None = None, loss_bound: float | None = None,
                 family: tuple | None = None, rtol: float | None = None, gaussian_mu: float | None = None):
        self._atoms = atoms
        self._inf_mass = float(inf_mass)
        self._continuous = bool(continuous)
        self._log_phi = log_phi
        #: (template, values) of a closed-form log-CF, instantiated when :attr:`log_phi` is first read.
        self._template_member: tuple[Template, tuple[float, ...]] | None = None
        #: The name of a numeric log-CF's symbol ``name(t)``, made when :attr:`log_phi` is first read.
        self._symbol_name: str | None = None
        self._cumulants = cumulants
        self._evaluator = evaluator
        self.batch = batch
        #: Whether the log-CF takes complex arguments (closed forms do), and its relative error there.
        self.continues_to_complex: bool = batch[0] != NUMERIC if continues is None else bool(continues)
        self.log_phi_rtol: float = NUMERIC_RTOL if batch[0] == NUMERIC and self.continues_to_complex else 0.0
        if rtol is not None:
            self.log_phi_rtol = float(rtol)
        #: (family, member) for a numeric loss that can be evaluated together with the other members of its
        #: family: ``family.batch(members)`` gives an evaluator of all their log-CFs at once (see
        #: :meth:`batched`); None otherwise.
        self.family = family
        #: The :class:`afa.mechanisms.noise_pair.NoiseMixturePair` a numeric loss comes from, if any.
        self.noise_pair = noise_pair
        #: For numeric log-CFs: the work (terms summed) of one evaluation at each real or complex t; see
        #: :meth:`numeric`.
        self.evaluation_cost = cost
        #: a when the loss is Laplace-type: atoms at +-a and a density between, so that its MGF is
        #: e^{as} R(s) + e^{-as} R'(s) with R, R' rational (the lattice contour's groups); else None.
        self.laplace_shift = laplace_shift
        #: mu when the loss is the Gaussian mechanism's, N(mu^2 / 2, mu^2) (its compositions have a closed form);
        #: else None.
        self.gaussian_mu = gaussian_mu
        #: A declared upper bound on the finite loss of a continuous loss (None: from the noise pair, if any).
        self._loss_bound = loss_bound

    # -- constructors -----------------------------------------------------
    @classmethod
    def discrete(cls, losses, log_masses, inf_mass: float = 0.0, *,
                 template: tuple[Template, tuple[float, ...]] | None = None) -> PrivacyLoss:
        """A loss taking finitely many finite values (Zhu, Dong & Wang 2022, Def. 36), plus +infinity.

        Its log-CF is computed from the atoms, or from ``template`` (a family and
        the member's parameters) where a closed form is more accurate.
        """
        atoms = LossAtoms.from_atoms(losses, log_masses)
        loss = cls(atoms=atoms, inf_mass=inf_mass, continuous=False, log_phi=None,
                   batch=(ATOMS, atoms) if template is None else template,
                   cumulants=lambda: (weighted_cumulants(atoms.losses, atoms.log_masses) if atoms.size
                                      else (0.0, 0.0)))  # all mass at +infinity: no finite part to describe
        loss._template_member = template
        return loss

    @classmethod
    def symbolic(cls, template: Template, values: tuple[float, ...], *, atoms: LossAtoms | None = None,
                 inf_mass: float = 0.0, laplace_shift: float | None = None,
                 cumulants: tuple[float, float] | None = None, gaussian_mu: float | None = None) -> PrivacyLoss:
        """A loss with a continuous part and a closed-form log-CF, a member of ``template``'s family.

        The template is the normalised CF of the finite part; with ``inf_mass`` > 0
        the loss's log-CF is log(1 - inf_mass) plus the template (and ``atoms``
        must carry their share of the finite mass).  ``laplace_shift`` declares a Laplace-type loss
        (:attr:`laplace_shift`), ``gaussian_mu`` the Gaussian mechanism's loss (:attr:`gaussian_mu`).
        ``cumulants``, if given, are the normalised loss's mean and variance (else the template's derivatives
        give them when first read).
        """
        loss = cls(atoms=atoms if atoms is not None else _no_atoms(), inf_mass=inf_mass, continuous=True,
                   log_phi=None, batch=(template, tuple(map(float, values))),
                   cumulants=cumulants if cumulants is not None else (lambda: template.cumulants(values)),
                   laplace_shift=laplace_shift, gaussian_mu=gaussian_mu)
        loss._template_member = (template, tuple(values))
        return loss

    @classmethod
    def numeric(cls, name: str, evaluator: Callable[[np.ndarray], np.ndarray],
                cumulants: tuple[float, float] | Callable[[], tuple[float, float]], *, inf_mass: float = 0.0,
                continues: bool = False, noise_pair=None,
                cost: Callable[[np.ndarray], np.ndarray] | None = None,
                loss_bound: float | None = None, family: tuple | None = None,
                rtol: float | None = None) -> PrivacyLoss:
        """A continuous loss whose log-CF is computed numerically; shown as ``name(t)``.

        ``cumulants``: (mean, variance) of the loss, or a function computing them when first needed.

        ``continues``: the evaluator also takes complex t - ic (the MGF, for the contour
        method), with a relative error of about NUMERIC_RTOL of M(c) at every node.
        ``noise_pair``: the :class:`afa.mechanisms.noise_pair.NoiseMixturePair` the loss comes from, if any
        (the certified discretization needs it).
        ``cost``: the number of terms the evaluator sums at each real or complex t (it grows with |Re t| for
        output quadratures); the real-line quadrature and the contour's sums budget their totals.
        ``loss_bound``: an upper bound on the loss (:attr:`loss_max`), where no ``noise_pair`` gives one.
        ``family``: (family, member) declaring that the loss's log-CF at t is that of ``member`` in
        ``family.batch(members)``, whose ``log_phi(t)`` gives every member's at once (shape t.shape + (members,)),
        ``evaluation_cost(t)`` their summed cost and ``cumulants()`` their (mean, variance) rows (:meth:`batched`).
        ``rtol``: the relative error of the MGF, if not NUMERIC_RTOL (a batch's: its members' summed).
        """
        loss = cls(atoms=_no_atoms(), inf_mass=inf_mass, continuous=True, log_phi=None,
                   batch=(NUMERIC, None), cumulants=cumulants, evaluator=evaluator, continues=continues,
                   noise_pair=noise_pair, cost=cost, loss_bound=loss_bound, family=family, rtol=rtol)
        loss._symbol_name = name
        return loss

    @classmethod
    def batched(cls, terms: tuple[tuple[PrivacyLoss, int], ...]) -> PrivacyLoss:
        """The loss sum_m k_m L_m of numeric losses L_m declaring one family, evaluated as one batch.

        Its log-CF is sum_m k_m log phi_m, from one call of the family's batch evaluator; its relative MGF
        error is sum_m k_m (error of L_m) and its cumulants (the batch's ``cumulants()``, one (mean, variance)
        row per member, when first needed) and loss bound are the members' summed (the cumulants and bounds
        of a sum of independent losses).  Built once per distinct ``terms`` (cached).

        Parameters
        ----------
        terms : tuple of (PrivacyLoss, int)
            The members and their counts; every member's :attr:`family` has the same family.

        Returns
        -------
        PrivacyLoss
            A numeric loss (no atoms, no mass at +infinity).
        """
        return _batched_loss(tuple(terms))

    # -- properties -------------------------------------------------------
    @property
    def atoms(self) -> LossAtoms:
        """The discrete part of the finite loss (possibly empty)."""
        return self._atoms

    @property
    def inf_mass(self) -> float:
        """Pr[L = +infinity]."""
        return self._inf_mass

    @property
    def log_finite_mass(self) -> float:
        """log Pr[L < infinity] = log(1 - inf_mass) (-inf when all mass is at infinity)."""
        return math.log1p(-self._inf_mass) if self._inf_mass < 1 else -math.inf

    @property
    def continuous(self) -> bool:
        """Whether the finite loss has a continuous (non-atomic) part."""
        return self._continuous

    @property
    def loss_max(self) -> float:
        """An upper bound on the finite loss (+inf when none is known): the largest atom of a
        finite loss, the noise pair's bound
        (:attr:`afa.mechanisms.noise_pair.NoiseMixturePair.loss_upper_bound`), or the bound given to
        :meth:`numeric`."""
        if not self._continuous:
            return float(self._atoms.losses[-1]) if self._atoms.size else -math.inf
        if self._loss_bound is not None:
            return self._loss_bound
        if self.noise_pair is not None:
            return self.noise_pair.loss_upper_bound
        return math.inf

    @property
    def is_numeric(self) -> bool:
        """Whether the log-CF is a numeric evaluator (:meth:`numeric`) rather than a symbolic expression."""
        return self.batch[0] == NUMERIC

    @property
    def log_phi(self) -> sympy.Expr:
        """Symbolic log-CF of the finite part, in :data:`afa.t` (built on first access)."""
        if self._log_phi is None and self._template_member is not None:
            template, values = self._template_member
            self._log_phi = _with_finite_mass(template.instantiate(values), self._inf_mass)
        if self._log_phi is None and self._symbol_name is not None:
            self._log_phi = sympy.Function(self._symbol_name)(variable())
        if self._log_phi is None and self._atoms.size == 0:
            self._log_phi = sympy.S.NegativeInfinity  # all mass at +infinity
        if self._log_phi is None:
            log_mass = self._atoms.log_mass
            weights = np.exp(self._atoms.log_masses - log_mass)
            t = variable()
            self._log_phi = sympy.Float(log_mass, 17) + cfunctions.log1p(sympy.Add(*[
                sympy.Float(w, 17) * cfunctions.expm1(sympy.I * sympy.Float(loss, 17) * t)
                for loss, w in zip(self._atoms.losses, weights)]))
        return self._log_phi

    def log_phi_numeric(self, nodes: np.ndarray) -> np.ndarray:
        """The log-CF at real ``nodes`` (vectorised, complex)."""
        return batched_log_phi(np.asarray(nodes, dtype=float).ravel(), [self]).reshape(np.shape(nodes))

    @property
    def magnitude(self) -> float:
        """An upper bound on the finite loss's |mean| and variance: the noise pair's
        (:attr:`afa.mechanisms.noise_pair.NoiseMixturePair.magnitude_bound`, no quadrature) when the loss comes
        from one, max(a, min(a^2, 6)) for a Laplace-type loss (it lies in [-a, a], and its variance is at most its
        second moment about a, 4 int_0^a u^2 e^-u / 2 du + 4 a^2 e^-a / 2 <= 4 + 8 e^-2), else the larger of them
        (:attr:`cumulants`)."""
        if self.noise_pair is not None:
            return self.noise_pair.magnitude_bound
        if self.laplace_shift is not None:
            a = self.laplace_shift
            return max(a, min(a * a, 6.0))
        mean, variance = self.cumulants
        return max(abs(mean), variance)

    @functools.cached_property
    def cumulants(self) -> tuple[float, float]:
        """(mean, variance) of the finite loss, normalised to a probability."""
        value = self._cumulants() if callable(self._cumulants) else self._cumulants
        return float(value[0]), float(value[1])


@functools.lru_cache(maxsize=16)
def _batched_loss(terms: tuple[tuple[PrivacyLoss, int], ...]) -> PrivacyLoss:
    declared = [loss.family for loss, _ in terms if loss.family is not None and not loss.atoms.size
                and not loss.inf_mass]
    if len(declared) < len(terms) or any(entry[0] != declared[0][0] for entry in declared):
        raise ValueError("PrivacyLoss.batched needs atomless numeric losses of one family")
    family = declared[0][0]
    evaluator = family.batch(tuple(entry[1] for entry in declared))
    counts = np.array([float(count) for _, count in terms])

    def cumulants() -> tuple[float, float]:
        mean, variance = counts @ np.asarray(evaluator.cumulants(), dtype=float)
        return float(mean), float(variance)

    bounds = [count * loss.loss_max for loss, count in terms]
    name = f"log_phi_batch_of_{len(terms)}_{type(family).__name__}_{id(evaluator):x}"
    return PrivacyLoss.numeric(name, lambda nodes: evaluator.log_phi(np.asarray(nodes)) @ counts, cumulants,
                               continues=all(loss.continues_to_complex for loss, _ in terms),
                               cost=evaluator.evaluation_cost,
                               loss_bound=math.inf if math.inf in bounds else math.fsum(bounds),
                               rtol=math.fsum(count * loss.log_phi_rtol for loss, count in terms))


def _with_finite_mass(normalised_log_phi: sympy.Expr, inf_mass: float) -> sympy.Expr:
    """log(1 - inf_mass) + a normalised log-CF: the log-CF of the finite part."""
    if not inf_mass:
        return normalised_log_phi
    return sympy.Float(math.log1p(-inf_mass), 17) + normalised_log_phi


@functools.cache
def _no_atoms() -> LossAtoms:
    """The empty set of atoms (one shared instance; its arrays are read-only)."""
    empty = np.empty(0)
    empty.flags.writeable = False
    return LossAtoms(empty, empty, empty)


#: Batch keys of losses evaluated from their atoms, and of numeric log-CFs.
ATOMS, NUMERIC = "atoms", "numeric"
#: Error of a numeric MGF at a node, relative to M at the node's real part: the rounding of a Gauss-Legendre
#: sum whose terms' moduli add up to at most a few times M(c) (checked against 30-digit mpmath integrals in the
#: tests, which find up to 1.4e-15 on the real output line far up a near-atom line).
NUMERIC_RTOL = 2e-15


def batched_log_phi(nodes: np.ndarray, losses: list[PrivacyLoss]) -> np.ndarray:
    """log phi of every loss at 1-d ``nodes``: shape (nodes, losses), one call per family."""
    out = np.empty((nodes.size, len(losses)), dtype=complex)
    families: dict = {}
    for index, loss in enumerate(losses):
        key = loss.batch[0] if loss.batch[0] is not NUMERIC else (NUMERIC, index)
        families.setdefault(key, []).append(index)
    for key, members in families.items():
        if key == ATOMS:
            # Finite losses: the atoms carry all the finite mass, exactly 1 - inf_mass.
            out[:, members] = atoms_log_phi(nodes, [losses[i].atoms for i in members],
                                            [losses[i].log_finite_mass for i in members])
        elif isinstance(key, Template):
            out[:, members] = key.evaluate(nodes, np.array([losses[i].batch[1] for i in members]))
            out[:, members] += [losses[i].log_finite_mass for i in members]  # templates are normalised
        else:
            out[:, members[0]] = losses[members[0]]._evaluator(nodes)
    return out


def log_phi_and_continuous_part(loss: PrivacyLoss, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log phi, log |phi - phi_atoms|) of one loss with atoms at ``nodes`` (real t, or complex t = -i s for the
    MGF): its CF and the modulus of its continuous part, which bounds how far phi is from its non-decaying atoms."""
    log_phi = batched_log_phi(nodes, [loss])[:, 0]
    log_atoms = loss.atoms.log_phi(nodes)
    top = np.maximum(log_phi.real, log_atoms.real)
    with np.errstate(divide="ignore"):
        return log_phi, top + np.log(np.abs(np.exp(log_phi - top) - np.exp(log_atoms - top)))


def atoms_log_phi(nodes: np.ndarray, plds: list[LossAtoms], log_masses: list[float] | None = None) -> np.ndarray:
    """log-CF of several finite measures at 1-d ``nodes``: shape (nodes, measures); -inf for empty ones.

    ``log_masses`` are the measures' exact log total masses, where known.
    """
    out = np.full((nodes.size, len(plds)), -np.inf, dtype=complex)
    present = [i for i, pld in enumerate(plds) if pld.size]
    if present:
        totals = [plds[i].normalized[0] if log_masses is None else log_masses[i] for i in present]
        out[:, present] = log_characteristic(nodes, [plds[i].losses for i in present],
                                             [plds[i].normalized[1] for i in present], totals)
    return out
