"""Deferred imports: the heavy third-party modules afa's light modules use, imported on first use.

``import afa`` loads none of afa's modules (the package resolves its names on first access), and the
modules that define and validate mechanisms -- :mod:`afa.mechanisms.catalog`, :mod:`afa.mechanisms.subsampling`,
the losses, tails and closed forms they build on -- import only numpy and afa itself when they load, so that
constructing a mechanism and building the ``afa`` command's parser stay fast.  Those modules take
SymPy, mpmath and :mod:`scipy.special` from here: each is a stand-in that imports the module on its
first attribute read.  The engines, loaded with :mod:`afa.accountant`, import scipy directly, but for
SymPy (needed only where a symbolic log-CF is read) and :mod:`scipy.optimize` (its root finders, needed
only by some searches), which they take from here too.

Type checkers see the real modules (the stand-ins exist only at run time).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

__all__ = ["DeferredModule", "cfunctions", "lazy_submodules", "mpmath", "optimize", "special", "sympy"]


class DeferredModule:
    """A stand-in for the module ``name``: reading an attribute imports the module and returns its attribute.

    Each attribute read is kept on the stand-in, so that later reads cost what a module's do.  Dunder
    names are not forwarded (introspection of the stand-in does not import the module).

    Parameters
    ----------
    name : str
        The module's absolute dotted name, e.g. ``"scipy.special"``.

    Examples
    --------
    >>> from afa._lazy import DeferredModule
    >>> DeferredModule("math").sqrt(4.0)
    2.0
    """

    def __init__(self, name: str) -> None:
        self._deferred_name = name

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__") and attribute.endswith("__"):
            raise AttributeError(attribute)
        value = getattr(importlib.import_module(self._deferred_name), attribute)
        setattr(self, attribute, value)
        return value

    def __repr__(self) -> str:
        return f"<deferred module {self._deferred_name!r}>"


def lazy_submodules(package: str, names: tuple[str, ...]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(``__getattr__``, ``__dir__``) for a package whose submodules ``names`` are attributes imported on first
    read (PEP 562): ``afa.views.clt`` works after ``import afa`` alone.

    Examples
    --------
    >>> from afa._lazy import lazy_submodules
    >>> getattr_, dir_ = lazy_submodules("json", ("decoder",))
    >>> getattr_("decoder").__name__, "decoder" in dir_()
    ('json.decoder', True)
    """

    def __getattr__(name: str) -> Any:
        if name in names:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(importlib.import_module(package))) | set(names))

    return __getattr__, __dir__


if TYPE_CHECKING:
    import mpmath
    import sympy
    from scipy import optimize, special
    from sympy.codegen import cfunctions
else:
    mpmath = DeferredModule("mpmath")
    sympy = DeferredModule("sympy")
    special = DeferredModule("scipy.special")
    #: scipy.optimize (its root finders; the module loads its linear-programming solvers too, about 1 s).
    optimize = DeferredModule("scipy.optimize")
    #: SymPy's codegen functions (log1p, expm1 that print as the accurate numpy functions).
    cfunctions = DeferredModule("sympy.codegen.cfunctions")
