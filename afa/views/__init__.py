"""Views of a composition beyond delta(eps) and eps(delta), built on the accountant.

* :mod:`afa.views.tradeoff` -- the f-DP trade-off curve and its conversion to and from the privacy profile;
* :mod:`afa.views.rdp` -- Renyi divergences of dominating pairs and an RDP accountant;
* :mod:`afa.views.clt` -- the central-limit (Gaussian-DP) approximation and its Berry-Esseen bounds;
* :mod:`afa.views.plot` -- figures of the above (needs matplotlib, the ``plot`` extra).

``afa.tradeoff``, ``afa.rdp``, ``afa.clt`` and ``afa.plot`` are short names for these modules.
"""

from .._lazy import lazy_submodules

__getattr__, __dir__ = lazy_submodules(__name__, ("clt", "plot", "rdp", "tradeoff"))
