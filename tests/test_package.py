"""The package's surface: submodules reachable as attributes, imported on first use."""

import subprocess
import sys

import pytest

import afa


def test_submodules_are_attributes_imported_on_first_use():
    probe = ("import sys, afa; before = 'afa.clt' in sys.modules; afa.clt.clt_delta; afa.tradeoff.tradeoff_curve; "
             "print(before, 'afa.clt' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
    assert "tradeoff" in dir(afa) and callable(afa.clt.privacy_loss_class)


def test_an_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        afa.nothing  # noqa: B018
