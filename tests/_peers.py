"""Peer libraries' numbers used as references by several test files (no afa imports)."""

from __future__ import annotations

import logging

import pytest


def dp_accounting_epsilon_bracket(sigma: float, q: float, steps: int, deltas,
                                  interval: float = 1e-4) -> list[tuple[float, float]]:
    """(optimistic, pessimistic) eps at each of ``deltas`` from dp_accounting's PLDs of ``steps`` uses of a
    Poisson-subsampled Gaussian (rate ``q``, noise ``sigma``) on a loss grid of ``interval`` (dp_accounting's
    default 1e-4); the pessimistic side connects the dots.  Skips the test when dp_accounting is missing."""
    pld_module = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # dp_accounting warns about the optimistic estimate's algorithm
    try:
        sides = []
        for pessimistic in (False, True):
            pld = pld_module.from_gaussian_mechanism(sigma, pessimistic_estimate=pessimistic, sampling_prob=q,
                                                     value_discretization_interval=interval,
                                                     use_connect_dots=pessimistic).self_compose(steps)
            sides.append([pld.get_epsilon_for_delta(delta) for delta in deltas])
    finally:
        root.setLevel(level)
    return list(zip(*sides))
