"""Every public name documents itself: numpy-style sections and an example whose output is checked.

For each name in ``afa.__all__`` and in the ``__all__`` of the submodules the API reference lists (and the
public methods their classes define), the docstring has an ``Examples`` section, a ``Parameters`` section
when the callable takes arguments and a ``Returns`` (or ``Yields``) section when it returns something.  The
examples themselves run as doctests in the default test run (``--doctest-modules``), which checks their
printed output.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

import afa

#: The submodules of the API reference's "Submodules" page that declare their public names in __all__.
SUBMODULES = ("afa.views.tradeoff", "afa.views.plot", "afa.views.clt", "afa.views.rdp", "afa.numerics.exact", "afa.options", "afa.limits", "afa.sweep",
              "afa.interop.dp_accounting", "afa.interop.opacus")


def _public_callables():
    spaces = [("", afa)] + [(f"{name}.", importlib.import_module(name)) for name in SUBMODULES]
    for prefix, module in spaces:
        for name in module.__all__:
            obj = getattr(module, name)
            if name == "t" or not callable(obj):  # a sympy Symbol (documented by hand); constants
                continue
            yield prefix + name, obj
            if isinstance(obj, type):
                for attribute, member in vars(obj).items():
                    if not attribute.startswith("_") and (inspect.isfunction(member)
                                                          or isinstance(member, (classmethod, staticmethod))):
                        yield f"{prefix}{name}.{attribute}", getattr(obj, attribute)


def _missing_sections(obj) -> list[str]:
    doc = inspect.getdoc(obj) or ""
    missing = [] if "Examples" in doc else ["Examples"]
    if callable(obj) and not isinstance(obj, type):
        signature = inspect.signature(obj)
        if [p for p in signature.parameters if p not in ("self", "cls")] and "Parameters" not in doc:
            missing.append("Parameters")
        returns = signature.return_annotation
        if returns not in (None, "None", inspect.Signature.empty) and "Returns" not in doc and "Yields" not in doc:
            missing.append("Returns")
    return missing


@pytest.mark.parametrize("name,obj", list(_public_callables()), ids=lambda value: value if isinstance(value, str) else "")
def test_public_docstring_sections(name, obj):
    assert not _missing_sections(obj), f"{name}'s docstring lacks {_missing_sections(obj)}"
