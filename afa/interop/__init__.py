"""Bridges between afa and other differential-privacy libraries.

This subpackage owns the conversions between afa's compositions (:class:`afa.Accountant`, :class:`afa.Mechanism`)
and other libraries' descriptions of a private computation.  Each bridge lives in a module named after the library
it talks to and imports that library only inside its functions, so ``import afa.interop`` works without any of them.

* :mod:`afa.interop.dp_accounting` -- Google's ``dp_accounting``: :func:`from_dp_event`, :func:`to_dp_event`,
  :func:`to_neighboring_relation` and ``AfaPrivacyAccountant``, a ``dp_accounting.PrivacyAccountant`` answered by afa.
* :mod:`afa.interop.opacus` -- Opacus: ``AfaAccountant`` (Opacus's accountant contract, without importing opacus
  or torch) and ``get_noise_multiplier`` (Opacus's signature, afa's certified calibration).
"""

from __future__ import annotations

from .._lazy import lazy_submodules
from .dp_accounting import UnsupportedDpEventError, from_dp_event, to_dp_event, to_neighboring_relation

__all__ = ["AfaPrivacyAccountant", "UnsupportedDpEventError", "from_dp_event", "to_dp_event",
           "to_neighboring_relation"]
_submodule, _names = lazy_submodules(__name__, ("dp_accounting", "opacus"))


def __getattr__(name: str):
    if name == "AfaPrivacyAccountant":  # a dp_accounting subclass: built (and dp_accounting imported) on first use
        from . import dp_accounting
        return dp_accounting.AfaPrivacyAccountant
    return _submodule(name)  # the bridges' modules; anything else is an AttributeError


def __dir__() -> list[str]:
    return sorted(set(_names()) | {"AfaPrivacyAccountant"})
