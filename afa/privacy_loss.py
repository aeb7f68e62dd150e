"""One direction of a dominating pair: the privacy-loss distribution and its log-CF.

For a dominating pair (P, Q) (papers/002_658ea0213f8272c6.txt Def. 7) the
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
from typing import Callable

import numpy as np
import sympy

from .discrete import DiscretePLD

#: The real variable of every characteristic function.
t = sympy.Symbol("t", real=True)


@functools.lru_cache(maxsize=1024)
def compile_log_phi(expression: sympy.Expr) -> Callable[[np.ndarray], np.ndarray]:
    """Compile a symbolic log-CF in :data:`t` to a vectorised complex function (cached)."""
    function = sympy.lambdify(t, expression, modules="numpy")

    def evaluate(nodes: np.ndarray) -> np.ndarray:
        nodes = np.asarray(nodes, dtype=float)
        return np.broadcast_to(np.asarray(function(nodes.astype(complex)), dtype=complex), nodes.shape)

    return evaluate


@functools.lru_cache(maxsize=1024)
def symbolic_cumulants(expression: sympy.Expr) -> tuple[float, float]:
    """Mean and variance of the normalised loss: -i K'(0) and -K''(0) for K = log phi."""
    first = sympy.diff(expression, t)
    second = sympy.diff(first, t)
    mean = complex(sympy.N((-sympy.I * first).subs(t, 0), 20))
    variance = complex(sympy.N((-second).subs(t, 0), 20))
    return mean.real, variance.real


class PrivacyLoss:
    """The privacy-loss distribution of one direction of a dominating pair.

    Build one with :meth:`discrete` (no continuous part), :meth:`symbolic`
    (closed-form log-CF) or :meth:`numeric` (log-CF computed by quadrature).
    Instances are immutable; mechanisms cache them.
    """

    def __init__(self, *, atoms: DiscretePLD, inf_mass: float, continuous: bool,
                 log_phi: sympy.Expr | None, evaluator: Callable[[np.ndarray], np.ndarray],
                 cumulants: tuple[float, float] | Callable[[], tuple[float, float]]):
        self._atoms = atoms
        self._inf_mass = float(inf_mass)
        self._continuous = bool(continuous)
        self._log_phi = log_phi
        self._evaluator = evaluator
        self._cumulants = cumulants

    # -- constructors -----------------------------------------------------
    @classmethod
    def discrete(cls, losses, log_masses, inf_mass: float = 0.0) -> "PrivacyLoss":
        """A loss taking finitely many finite values (papers/002 Def. 36), plus +infinity."""
        atoms = DiscretePLD.from_atoms(losses, log_masses)
        return cls(atoms=atoms, inf_mass=inf_mass, continuous=False, log_phi=None,
                   evaluator=atoms.log_phi, cumulants=lambda: _atom_cumulants(atoms))

    @classmethod
    def symbolic(cls, log_phi: sympy.Expr, *, atoms: DiscretePLD | None = None,
                 inf_mass: float = 0.0) -> "PrivacyLoss":
        """A loss with a continuous part and a closed-form log-CF ``log_phi``."""
        return cls(atoms=atoms if atoms is not None else _no_atoms(), inf_mass=inf_mass, continuous=True,
                   log_phi=log_phi, evaluator=compile_log_phi(log_phi),
                   cumulants=lambda: symbolic_cumulants(log_phi))

    @classmethod
    def numeric(cls, name: str, evaluator: Callable[[np.ndarray], np.ndarray],
                cumulants: tuple[float, float], *, inf_mass: float = 0.0) -> "PrivacyLoss":
        """A continuous loss whose log-CF is computed numerically; shown as ``name(t)``."""
        return cls(atoms=_no_atoms(), inf_mass=inf_mass, continuous=True,
                   log_phi=sympy.Function(name)(t), evaluator=evaluator, cumulants=cumulants)

    # -- properties -------------------------------------------------------
    @property
    def atoms(self) -> DiscretePLD:
        """The discrete part of the finite loss (possibly empty)."""
        return self._atoms

    @property
    def inf_mass(self) -> float:
        """Pr[L = +infinity]."""
        return self._inf_mass

    @property
    def continuous(self) -> bool:
        """Whether the finite loss has a continuous (non-atomic) part."""
        return self._continuous

    @property
    def log_phi(self) -> sympy.Expr:
        """Symbolic log-CF of the finite part, in :data:`afa.t`."""
        if self._log_phi is None:
            masses = np.exp(self._atoms.log_masses)
            self._log_phi = sympy.log(sympy.Add(*[
                sympy.Float(w, 17) * sympy.exp(sympy.I * sympy.Float(loss, 17) * t)
                for loss, w in zip(self._atoms.losses, masses)]))
        return self._log_phi

    def log_phi_numeric(self, nodes: np.ndarray) -> np.ndarray:
        """The log-CF at real ``nodes`` (vectorised, complex)."""
        return self._evaluator(nodes)

    @functools.cached_property
    def cumulants(self) -> tuple[float, float]:
        """(mean, variance) of the finite loss, normalised to a probability."""
        value = self._cumulants() if callable(self._cumulants) else self._cumulants
        return float(value[0]), float(value[1])


def _no_atoms() -> DiscretePLD:
    return DiscretePLD(np.empty(0), np.empty(0))


def _atom_cumulants(atoms: DiscretePLD) -> tuple[float, float]:
    weights = np.exp(atoms.log_masses - atoms.log_mass)
    mean = float(np.dot(weights, atoms.losses))
    return mean, float(np.dot(weights, (atoms.losses - mean) ** 2))
