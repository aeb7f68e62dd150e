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


def test_one_name_for_the_sampling_rate_old_names_warn():
    """sampling_rate in Python, on the command line (--sampling-rate) and in spec files; q and
    sampling_probability still work for one version, with a DeprecationWarning."""
    mechanism = afa.Gaussian(1.0).poisson_subsampled(sampling_rate=0.01)
    assert mechanism.sampling_rate == 0.01 and mechanism.to_dict()["sampling_rate"] == 0.01
    with pytest.warns(DeprecationWarning, match="sampling_rate"):
        assert afa.Gaussian(1.0).poisson_subsampled(q=0.01) == mechanism
    with pytest.warns(DeprecationWarning, match="sampling_rate"):
        assert mechanism.q == 0.01
    with pytest.raises(TypeError, match="once"), pytest.warns(DeprecationWarning):
        afa.Gaussian(1.0).subset_subsampled(0.1, q=0.1)
    with pytest.raises(TypeError, match="sampling_rate"):
        afa.Gaussian(1.0).poisson_subsampled()
    with pytest.warns(DeprecationWarning, match="sampling_probability"):
        old = afa.calibrate_steps(1.0, 1e-5, 3.8, sampling_probability=0.01, method="pld", rtol=0.05)
    new = afa.calibrate_steps(1.0, 1e-5, 3.8, sampling_rate=0.01, method="pld", rtol=0.05)
    assert old.value == new.value
