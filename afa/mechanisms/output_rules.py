"""Composite Gauss-Legendre rules over a range of outputs: the panel edges and nodes the numeric MGFs share.

A noise pair's MGF is an integral over the output (:class:`afa.mechanisms.noise_pair.PairMGF`,
:class:`afa.mechanisms.noise_pair.PairMGFBatch`, and on a shifted line :mod:`afa.mechanisms.shifted_output`).
Each lays the same kind of rule: panels at most a fixed width apart, at the density's kinks, and cut where the
integrand's phase (or, on a shifted line, its complex logarithm) has changed by a set amount, with one
Gauss-Legendre rule per panel.
"""

from __future__ import annotations

import math

import numpy as np


def panel_edges(low: float, high: float, width: float, kinks: np.ndarray | None = None,
                grid: np.ndarray | None = None, variation: np.ndarray | None = None, pieces: int = 1) -> np.ndarray:
    """Sorted panel edges on [``low``, ``high``]: at most ``width`` apart, at the ``kinks`` given (those inside),
    and, for ``pieces`` > 1, at the points of ``grid`` that cut the cumulative ``variation`` along it into
    ``pieces`` equal parts."""
    parts = [np.linspace(low, high, int(math.ceil((high - low) / width)) + 1)]
    if kinks is not None:
        parts.append(np.asarray(kinks, dtype=float))
    if pieces > 1:
        if grid is None or variation is None:
            raise ValueError("panel_edges needs the grid and the variation along it to cut more than one piece")
        parts.append(np.interp(np.linspace(0, variation[-1], pieces + 1)[1:-1], variation, grid))
    return np.unique(np.concatenate(parts))


def composite_rule(edges: np.ndarray, nodes: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(points, log-weights) of the Gauss-Legendre ``nodes`` and ``weights`` on [-1, 1] mapped to every panel
    between consecutive ``edges`` (along the last axis: a 2-D array of edges gives one rule per row; a panel of
    width 0 gets log-weights -inf)."""
    edges = np.asarray(edges, dtype=float)
    half = np.diff(edges, axis=-1)[..., None] / 2
    shape = edges.shape[:-1] + (-1,)
    with np.errstate(divide="ignore"):
        return ((edges[..., :-1, None] + half * (nodes + 1)).reshape(shape),
                np.log(half * weights).reshape(shape))
