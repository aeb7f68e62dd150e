"""The composed privacy loss of one direction: a multiset of losses with counts.

Composition of mechanisms multiplies dominating pairs (Zhu, Dong & Wang 2022
Thm 10), so characteristic functions multiply (Prop. 13) and log-CFs add:
log phi = sum_i k_i log phi_i.  The finite parts compose as sub-probability
measures and the masses at +infinity as 1 - prod_i (1 - m_i)^{k_i}
(App. D.2, Prop. 38).  Everything here costs O(number of distinct losses),
whatever the counts; numeric terms of one declared family (e.g. subsampled
Gaussians that differ in sigma and q) are evaluated as one batch
(:attr:`ComposedLoss.evaluation_terms`).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .._lazy import sympy
from ..mechanisms.privacy_loss import PrivacyLoss, Template, atoms_log_phi, batched_log_phi
from ..numerics.atoms import LossAtoms, estimated_atoms


class ComposedLoss:
    """sum_i k_i L_i for independent privacy losses L_i (one direction)."""

    def __init__(self, terms: dict[PrivacyLoss, int]):
        self.terms = dict(terms)

    @functools.cached_property
    def log_finite_mass(self) -> float:
        """log Pr[composed loss < infinity] = sum_i k_i log(1 - m_i)."""
        return math.fsum(count * loss.log_finite_mass for loss, count in self.terms.items())

    @property
    def inf_mass(self) -> float:
        """Pr[composed loss = +infinity] = 1 - prod_i (1 - m_i)^{k_i}."""
        return -math.expm1(self.log_finite_mass)

    @property
    def continuous(self) -> bool:
        """Whether any term has a continuous part (then so has the composition)."""
        return any(loss.continuous for loss in self.terms)

    @functools.cached_property
    def loss_max(self) -> float:
        """An upper bound on the composed finite loss: sum_i k_i (bound of term i), +inf if one is unbounded."""
        bounds = [count * loss.loss_max for loss, count in self.terms.items()]
        return math.inf if math.inf in bounds else math.fsum(bounds)

    @functools.cached_property
    def cumulants(self) -> tuple[float, float]:
        """(mean, variance) of the normalised finite composed loss: cumulants add."""
        mean = sum(count * loss.cumulants[0] for loss, count in self.evaluation_terms.items())
        variance = sum(count * loss.cumulants[1] for loss, count in self.evaluation_terms.items())
        return mean, variance

    @functools.cached_property
    def log_phi(self) -> sympy.Expr:
        """The composed symbolic log-CF: sum_i k_i log phi_i(t)."""
        return sympy.Add(*[sympy.Integer(count) * loss.log_phi for loss, count in self.terms.items()])

    @functools.cached_property
    def _counts(self) -> np.ndarray:
        return np.array([float(count) for count in self.terms.values()])

    @functools.cached_property
    def evaluation_terms(self) -> dict[PrivacyLoss, int]:
        """The terms as they are evaluated: numeric terms declaring a common family (:attr:`PrivacyLoss.family`,
        e.g. the subsampled Gaussians of one direction) merged into one loss (:meth:`PrivacyLoss.batched`) of
        count 1, whose log-CF sum_m k_m log phi_m comes from one vectorised call and whose error is the
        members' k_m-weighted sum; the other terms as they are.  The same composition, term for term."""
        groups: dict = {}
        terms: dict[PrivacyLoss, int] = {}
        for loss, count in self.terms.items():
            if loss.family is not None and loss.atoms.size == 0 and loss.inf_mass == 0:
                groups.setdefault(loss.family[0], []).append((loss, count))
            else:
                terms[loss] = count
        for members in groups.values():
            if len(members) == 1:
                terms[members[0][0]] = members[0][1]
            else:
                terms[PrivacyLoss.batched(tuple(members))] = 1
        return terms

    @functools.cached_property
    def _evaluation_plan(self) -> tuple[list[PrivacyLoss], np.ndarray]:
        """Terms and counts to evaluate: members of a family linear in its parameters merge into one.

        (All Gaussians become a single Gaussian with h = sum_i k_i h_i, so 10 000
        distinct Gaussians cost what one does.)
        """
        merged: dict[Template, tuple[list, list]] = {}
        losses, counts = [], []
        for loss, count in self.evaluation_terms.items():
            family, values = loss.batch
            if isinstance(family, Template) and family.linear and loss.atoms.size == 0 and loss.inf_mass == 0:
                weights, rows = merged.setdefault(family, ([], []))
                weights.append(float(count))
                rows.append(values)
            else:
                losses.append(loss)
                counts.append(float(count))
        for family, (weights, rows) in merged.items():
            losses.append(PrivacyLoss.symbolic(family, tuple(np.array(weights) @ np.array(rows, dtype=float))))
            counts.append(1.0)
        return losses, np.array(counts)

    def log_phi_numeric(self, nodes: np.ndarray) -> np.ndarray:
        """sum_i k_i log phi_i at 1-d ``nodes``; exact for integer k_i whatever the branch.

        Every family of terms (all Gaussians, all Laplaces, all finite ones, ...)
        is evaluated in one vectorised call.  Complex nodes t - ic (closed forms
        only) give the moment-generating function log M(c + it).
        """
        nodes = np.asarray(nodes)
        losses, counts = self._evaluation_plan
        return batched_log_phi(nodes if np.iscomplexobj(nodes) else nodes.astype(float), losses) @ counts

    def evaluation_cost(self, nodes: np.ndarray) -> np.ndarray:
        """Terms summed by the numeric log-CFs (output quadratures) to evaluate each real node (0 for closed forms)."""
        total = np.zeros(np.shape(nodes))
        for loss in self.evaluation_terms:
            if loss.evaluation_cost is not None:
                total += loss.evaluation_cost(nodes)
        return total

    @property
    def analytic(self) -> bool:
        """Whether every term's log-CF continues to complex arguments (closed forms, subsampled MGFs)."""
        return all(loss.continues_to_complex for loss in self.terms)

    @property
    def log_phi_rtol(self) -> float:
        """Relative error of the composed MGF from numeric terms: sum_i k_i (error of term i)."""
        return float(sum(count * loss.log_phi_rtol for loss, count in self.terms.items()))

    # -- the atomic part ----------------------------------------------------
    @functools.cached_property
    def log_atomic_mass(self) -> float:
        """log of the mass of the composition's atoms (-inf if any term has none).

        A sum of independent losses has an atom only where every summand does:
        the atomic part of the composition is the convolution of the atomic parts.
        """
        total = 0.0
        for loss, count in self.terms.items():
            if loss.atoms.size == 0:
                return -math.inf
            total += count * loss.atoms.log_mass
        return total

    def atomic_log_phi_numeric(self, nodes: np.ndarray) -> np.ndarray:
        """log-CF of the atomic part at 1-d ``nodes``: sum_i k_i log phi_{atoms_i}."""
        return atoms_log_phi(np.asarray(nodes, dtype=float), [loss.atoms for loss in self.terms]) @ self._counts

    @functools.cached_property
    def estimated_atom_count(self) -> float:
        """A rough count of the composed atoms (:func:`afa.numerics.atoms.estimated_atoms`), before composing any."""
        return estimated_atoms([(loss.atoms, count) for loss, count in self.terms.items() if loss.atoms.size])

    @functools.cached_property
    def atoms(self) -> LossAtoms:
        """The composed atomic part, by exact convolution (may raise CompositionTooLargeError)."""
        result = None
        for loss, count in self.terms.items():
            power = loss.atoms.power(count)
            result = power if result is None else result.convolve(power)
        return result if result is not None else LossAtoms(np.empty(0), np.empty(0))
