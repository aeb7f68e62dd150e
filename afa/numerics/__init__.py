"""Numerics below the mechanisms: finite privacy-loss distributions and closed forms.

* :mod:`afa.numerics.atoms` -- :class:`~afa.numerics.atoms.LossAtoms`, a finite privacy-loss distribution
  with error bounds on every atom; its exact composition, hockey-stick divergence and verified eps(delta).
* :mod:`afa.numerics.exact` -- closed-form privacy profiles (composed Gaussians, randomized response,
  Gaussians mixed over finite losses) with relative accuracy in log space.

Nothing here imports the mechanisms, the engines or the accountant.
"""

from .._lazy import lazy_submodules

__getattr__, __dir__ = lazy_submodules(__name__, ("atoms", "exact"))
