"""The engines that turn a composed privacy loss into delta(eps) and eps(delta), and the planner that picks them.

* :mod:`afa.engines.base` -- the engine contract (:class:`~afa.engines.base.Engine`) and the engines the
  accountant runs (exact, closed form, contour, quadrature, certified, PLD);
* :mod:`afa.engines.planner` -- which engines answer a composition, in what order (``method="auto"``);
* :mod:`afa.engines.composition` -- a direction's composed loss (terms and counts), the engines' input;
* the numerical methods behind them: :mod:`~afa.engines.contour` (saddle-point contour) and
  :mod:`~afa.engines.pile_split` (its pile/tail split of many uses of a small-q subsampled Gaussian),
  :mod:`~afa.engines.quadrature` (real-line Levy inversion), :mod:`~afa.engines.discrete` and
  :mod:`~afa.engines.two_factor` (exact composition of finite-output mechanisms),
  :mod:`~afa.engines.quadratic` (data-dependent Gaussians), :mod:`~afa.engines.step_recursion` (a few uses of
  Gaussian noise pairs; many uses of one by doubling), :mod:`~afa.engines.laplace_top` (Laplace uses near their
  top), :mod:`~afa.engines.pld` and :mod:`~afa.engines.mixed_pld` (the discretized PLD),
  :mod:`~afa.engines.certified` (Zhu, Dong & Wang 2022, Algorithm 2).

The engines read mechanisms only through their dominating pairs, privacy losses and loss tails
(:mod:`afa.mechanisms`).
"""

from .._lazy import lazy_submodules

_MODULES = ("base", "certified", "composition", "contour", "discrete", "laplace_top", "mixed_pld", "pile_split",
            "planner", "pld", "quadratic", "quadrature", "step_recursion", "two_factor")
__getattr__, __dir__ = lazy_submodules(__name__, _MODULES)
