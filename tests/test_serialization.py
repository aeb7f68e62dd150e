"""Round trips of mechanisms and accountants: pickle and to_dict -> JSON -> from_dict.

A training run checkpoints its ledger and a Dask worker receives a pickled accountant, so both
forms must rebuild a composition that answers exactly as the original did.
"""

import json
import pickle
from dataclasses import dataclass
from typing import ClassVar

import pytest

import afa
import afa.cli

#: One instance of every mechanism type, with the relation it is composed under.
EXAMPLES = [
    (afa.Gaussian(sigma=2.0, sensitivity=1.5), "add_remove"),
    (afa.Laplace(scale=3.0), "substitution"),
    (afa.DataDependentGaussian(sigma1=2.0, sigma2=2.5), "add_remove"),
    (afa.MixtureOfGaussians(sensitivities=(0.0, 1.0), probabilities=(0.25, 0.75), sigma=2.0), "add_remove"),
    (afa.RandomizedResponse(p=0.7), "add_remove"),
    (afa.KaryRandomizedResponse(k=5, p=0.5), "substitution"),
    (afa.ApproxDP(epsilon=0.5, delta=1e-7), "add_remove"),
    (afa.ProposeTestRelease(epsilon=0.5, delta=1e-7), "add_remove"),
    (afa.DiscreteLaplace(a=0.8, sensitivity=2), "add_remove"),
    (afa.DiscreteGaussian(sigma=2.0), "add_remove"),
    (afa.DiscreteMechanism(p_pmf=(0.5, 0.3, 0.2), q_pmf=(0.2, 0.3, 0.5)), "add_remove"),
    (afa.Gaussian(sigma=1.0).poisson_subsampled(0.01), "add_remove"),
    (afa.Gaussian(sigma=1.0).truncated_poisson_subsampled(0.05, batch_size=8, dataset_size=100), "substitution"),
    (afa.Gaussian(sigma=1.0).poisson_subsampled(0.02), "substitution"),
    (afa.Laplace(scale=1.0).subset_subsampled(0.05), "add_remove"),
    (afa.RandomizedResponse(p=0.8).poisson_subsampled(0.1), "add_remove"),
    (afa.PermuteAndFlip(epsilon=0.5), "replace_special"),
    (afa.ExponentialMechanism(epsilon=0.5), "substitution"),
    (afa.KaryRandomizedResponse(k=3, p=0.6), "replace_special"),
]
IDS = [f"{type(m).__name__}-{relation}" for m, relation in EXAMPLES]


def test_every_registered_type_has_an_example():
    covered = {type(m.base if isinstance(m, afa.Subsampled) else m) for m, _ in EXAMPLES}
    builtin = {cls for cls in afa.Mechanism.types().values() if cls.__module__.startswith("afa.")}
    assert builtin <= covered


@pytest.mark.parametrize("mechanism, relation", EXAMPLES, ids=IDS)
def test_mechanism_round_trips(mechanism, relation):
    mechanism.privacy_losses(relation)  # cached losses must not get in the way of pickling
    assert pickle.loads(pickle.dumps(mechanism)) == mechanism
    table = json.loads(json.dumps(mechanism.to_dict()))  # strict JSON: plain numbers, strings and lists
    assert table["type"] == (mechanism.base if isinstance(mechanism, afa.Subsampled) else mechanism).type_name
    rebuilt = afa.Mechanism.from_dict(table)
    assert rebuilt == mechanism and type(rebuilt) is type(mechanism)


@pytest.mark.parametrize("mechanism, relation", EXAMPLES, ids=IDS)
def test_accountant_round_trips_with_identical_answers(mechanism, relation):
    accountant = afa.Accountant(relation).compose(mechanism, 3).compose(afa.Gaussian(sigma=4.0), 2)
    expected = (accountant.epsilon_result(1e-5), accountant.delta_result(1.0))
    copies = [pickle.loads(pickle.dumps(accountant)),
              afa.Accountant.from_dict(json.loads(json.dumps(accountant.to_dict())))]
    for copy in copies:
        assert copy.mechanisms == accountant.mechanisms and copy.neighboring == relation
        assert (copy.epsilon_result(1e-5), copy.delta_result(1.0)) == expected


def test_settings_round_trip():
    accountant = afa.Accountant("substitution", value_discretization_interval=1e-3,
                                budget=afa.Budget(seconds=float("inf"), memory_bytes=1e9))
    accountant.compose(afa.Gaussian(1.0), 5)
    spec = accountant.to_dict()
    assert spec["budget"] == {"seconds": None, "memory_bytes": 1e9}  # no limit is null, not a non-JSON inf
    for copy in (afa.Accountant.from_dict(json.loads(json.dumps(spec))), pickle.loads(pickle.dumps(accountant))):
        assert copy.budget == accountant.budget
        assert copy.value_discretization_interval == 1e-3 and copy.neighboring == "substitution"


def test_spec_is_the_cli_format(tmp_path, capsys):
    accountant = afa.Accountant().compose(afa.Gaussian(sigma=1.0).poisson_subsampled(0.01), 100)
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps(accountant.to_dict()))
    assert afa.cli.main(["epsilon", "--delta", "1e-5", "--spec", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["reported"] == accountant.epsilon(1e-5)


@pytest.mark.parametrize("spec, error, needles", [
    ([1, 2], TypeError, ["mapping"]),
    ({}, ValueError, ["mechanisms"]),
    ({"mechanisms": []}, ValueError, ["non-empty"]),
    ({"mechanisms": [{"type": "gaussian", "sigma": 1.0}], "sigma": 1}, ValueError, ["top-level key 'sigma'"]),
    ({"mechanisms": ["gaussian"]}, TypeError, ["mechanisms[0]", "table"]),
    ({"mechanisms": [{"sigma": 1.0}]}, ValueError, ["mechanisms[0]", "missing key 'type'"]),
    ({"mechanisms": [{"type": "gauss", "sigma": 1.0}]}, ValueError, ["unknown mechanism type 'gauss'"]),
    ({"mechanisms": [{"type": "gaussian"}]}, ValueError, ["needs key 'sigma'"]),
    ({"mechanisms": [{"type": "gaussian", "sigma": 1.0, "scale": 2}]}, ValueError, ["unknown key 'scale'"]),
    ({"mechanisms": [{"type": "gaussian", "sigma": -1.0}]}, ValueError, ["mechanisms[0] (gaussian)", "sigma"]),
    ({"mechanisms": [{"type": "gaussian", "sigma": 1.0, "times": 0}]}, ValueError, ["times"]),
    ({"mechanisms": [{"type": "gaussian", "sigma": 1.0, "sampling_rate": 1.5}]}, ValueError, ["sampling_rate"]),
    ({"mechanisms": [{"type": "gaussian", "sigma": 1.0, "sampling": "subset"}]}, ValueError, ["sampling_rate"]),
    ({"mechanisms": [{"type": "gaussian", "sigma": 1.0, "sampling_rate": 0.1, "sampling": "x"}]}, ValueError,
     ["sampling", "'x'"]),
    ({"mechanisms": [{"type": "gaussian", "sigma": 1.0}], "budget": {"minutes": 1}}, ValueError, ["'minutes'"]),
    ({"mechanisms": [{"type": "gaussian", "sigma": 1.0}], "budget": 5}, TypeError, ["budget"]),
    ({"mechanisms": [{"type": "gaussian", "sigma": 1.0}], "neighboring": "swap"}, ValueError, ["neighboring"]),
    ({"mechanisms": [{"type": "gaussian", "sigma": 1.0}], "value_discretization_interval": 0}, ValueError,
     ["value_discretization_interval"]),
])
def test_bad_specs_name_the_key(spec, error, needles):
    with pytest.raises(error) as raised:
        afa.Accountant.from_dict(spec)
    for needle in needles:
        assert needle in str(raised.value)


@dataclass(frozen=True)
class _Coin(afa.Mechanism):
    """A user's mechanism: one biased coin, written outside afa."""

    type_name: ClassVar[str] = "test_coin"
    p: float

    def _log_pmfs(self, neighboring):
        import numpy as np
        return np.log([self.p, 1 - self.p]), np.log([1 - self.p, self.p])

    def _losses(self, neighboring):
        return afa.DiscreteMechanism(p_pmf=(self.p, 1 - self.p), q_pmf=(1 - self.p, self.p)).privacy_losses(neighboring)


def test_user_mechanism_registers_and_round_trips():
    assert afa.Mechanism.types()["test_coin"] is _Coin
    accountant = afa.Accountant().compose(_Coin(0.75), 4)
    copy = afa.Accountant.from_dict(json.loads(json.dumps(accountant.to_dict())))
    assert copy.mechanisms == {_Coin(0.75): 4}
    assert copy.delta(0.5) == accountant.delta(0.5) == afa.Accountant().compose(afa.RandomizedResponse(0.75), 4).delta(0.5)


def test_type_names_are_unique_and_snake_case():
    with pytest.raises(TypeError, match="already registered"):
        type("Impostor", (afa.Mechanism,), {"type_name": "gaussian"})
    with pytest.raises(TypeError, match="snake_case"):
        type("Shouting", (afa.Mechanism,), {"type_name": "Loud-Name"})
    with pytest.raises(TypeError, match="type_name"):
        afa.Mechanism().to_dict()
