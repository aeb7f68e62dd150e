"""Queries take arrays: epsilon, delta and their *_result forms return arrays of the input's shape.

Reference: the exact formula for composed Gaussian mechanisms (Sommer, Meiser & Mohammadi 2019, Thm 5),
evaluated value by value.
"""

import warnings

import numpy as np
import pytest

import afa
from afa.numerics import exact

MU = 2.0  # 16 uses of Gaussian(sigma=2): mu = sqrt(16) / 2


@pytest.fixture
def gauss():
    return afa.Accountant().compose(afa.Gaussian(2.0), 16)


def test_epsilon_of_an_array_of_deltas(gauss):
    deltas = np.array([[1e-3, 1e-5], [1e-8, 1e-12]])
    result = gauss.epsilon_result(deltas)
    truth = np.vectorize(lambda d: exact.gaussian_epsilon(d, MU))(deltas)
    assert result.value.shape == result.lower.shape == result.upper.shape == (2, 2)
    assert np.all(result.lower <= truth * (1 + 1e-12)) and np.all(truth <= result.upper * (1 + 1e-12))
    assert np.allclose(gauss.epsilon(deltas), truth, rtol=1e-10)
    assert gauss.epsilon([1e-5])[0] == gauss.epsilon(1e-5)
    assert result.method == "exact" and len(result.attempts) == 4


def test_delta_of_an_array_of_epsilons(gauss):
    epsilons = np.linspace(0.0, 6.0, 7)
    result = gauss.delta_result(epsilons)
    truth = exact.gaussian_delta(epsilons, MU)
    assert result.upper.shape == (7,)
    assert np.all(result.lower <= truth) and np.all(truth <= result.upper)
    assert np.allclose(gauss.delta(list(epsilons)), truth, rtol=1e-10)


def test_empty_arrays_and_scalars_keep_their_types(gauss):
    assert gauss.epsilon([]).shape == (0,) and gauss.delta(np.empty((0, 3))).shape == (0, 3)
    assert isinstance(gauss.epsilon(1e-5), float) and isinstance(gauss.delta(1.0), float)
    assert isinstance(gauss.epsilon(np.float64(1e-5)), float)
    with pytest.raises(TypeError, match="single float"):
        float(gauss.delta_result([0.5, 1.0]))


def test_a_bad_value_anywhere_is_refused_before_any_is_answered(gauss):
    with pytest.raises(ValueError, match="delta must be in"):
        gauss.epsilon([1e-5, 0.0, 1e-6])
    with pytest.raises(TypeError, match="epsilon"):
        gauss.delta([0.5, None])


def test_epsilon_bounds_is_deprecated(gauss):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lower, upper = gauss.epsilon_bounds(1e-5)
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    result = gauss.epsilon_result(1e-5)
    assert (lower, upper) == (result.lower, result.upper)
