"""The replace-special relation (Google DP team 2025, Sec. 3.6): x replaced by a special record bottom.

Independent truth: the supplement's explicit privacy-loss distributions of k-ary randomized response, written
out here with mpmath (its r is the randomisation probability, r = k (1 - p) / (k - 1) in afa's terms), composed
by enumerating the multinomial counts; additive-noise mechanisms against their add/remove answers (bottom
contributes f = 0, so the dataset holding bottom releases what the dataset without x releases).
"""

from __future__ import annotations

import itertools
import json
import math

import mpmath
import pytest

import afa
import afa.cli

mpmath.mp.dps = 40


def supplement_plds(k, p):
    """(remove, add) as [(loss, probability)] from Sec. 3.6, with r = k (1 - p) / (k - 1)."""
    k, p = mpmath.mpf(k), mpmath.mpf(p)
    r = k * (1 - p) / (k - 1)
    remove = [(mpmath.log(k * (1 - r) + r), 1 - r + r / k), (mpmath.log(r), r * (k - 1) / k)]
    add = [(-mpmath.log(k * (1 - r) + r), 1 / k), (-mpmath.log(r), (k - 1) / k)]
    return remove, add


def composed_delta(pld, uses, eps):
    """E[(1 - e^{eps - L})_+] for the sum L of ``uses`` independent draws of the two-atom ``pld``."""
    (a, pa), (b, pb) = pld
    total = mpmath.mpf(0)
    for j in range(uses + 1):
        loss = j * a + (uses - j) * b
        if loss > eps:
            total += mpmath.binomial(uses, j) * pa ** j * pb ** (uses - j) * (1 - mpmath.exp(eps - loss))
    return total


@pytest.mark.parametrize("k, p", [(2, 0.8), (4, 0.55), (5, 0.4), (10, 0.9)])
@pytest.mark.parametrize("uses", [1, 3, 8])
def test_kary_replace_special_matches_the_supplement_pld(k, p, uses):
    remove, add = supplement_plds(k, p)
    accountant = afa.Accountant("replace_special").compose(afa.KaryRandomizedResponse(k, p), uses)
    assert accountant.directions == ("remove", "add")
    for eps in (-0.5, 0.0, 0.4, 1.3):
        expected_remove = composed_delta(remove, uses, eps)
        expected_add = composed_delta(add, uses, eps)
        for index, expected in ((0, expected_remove), (1, expected_add)):
            value = accountant.delta_result(eps, method="exact", direction=accountant.directions[index]).upper
            assert value == pytest.approx(float(expected), rel=1e-9, abs=1e-14)
        assert accountant.delta(eps, method="exact") == pytest.approx(float(max(expected_remove, expected_add)),
                                                                       rel=1e-9, abs=1e-14)


def test_kary_remove_direction_is_x_to_bottom():
    """The first direction's loss law is the supplement's "Remove" (x -> bottom): ln(k(1-r)+r) w.p. 1 - r + r/k."""
    k, p = 5, 0.4
    remove_loss, add_loss = afa.KaryRandomizedResponse(k, p).privacy_losses("replace_special")
    remove, add = supplement_plds(k, p)
    for loss, pld in ((remove_loss, remove), (add_loss, add)):
        got = sorted(zip(loss.atoms.losses.tolist(), [math.exp(v) for v in loss.atoms.log_masses]))
        want = sorted((float(a), float(b)) for a, b in pld)
        assert len(got) == len(want)
        for (got_loss, got_mass), (want_loss, want_mass) in zip(got, want):
            assert got_loss == pytest.approx(want_loss, rel=1e-12) and got_mass == pytest.approx(want_mass, rel=1e-12)


ADDITIVE = [afa.Gaussian(1.3, 2.0), afa.Laplace(0.7, 1.5), afa.DiscreteLaplace(0.6, 3), afa.DiscreteGaussian(1.5, 2),
            afa.DiscreteGaussian(1.0, 1, truncation=5)]


@pytest.mark.parametrize("mechanism", ADDITIVE, ids=repr)
def test_additive_noise_under_replace_special_is_add_remove(mechanism):
    """Bottom contributes f = 0: its dataset releases what the dataset without x releases (the add/remove pair)."""
    special = afa.Accountant("replace_special").compose(mechanism, 4)
    add_remove = afa.Accountant("add_remove").compose(mechanism, 4)
    for eps in (0.0, 0.5, 2.0):
        assert special.delta(eps) == add_remove.delta(eps)
    assert special.epsilon(1e-6) == add_remove.epsilon(1e-6)
    assert [str(expr) for expr in special.log_phi.values()] == [str(expr) for expr in add_remove.log_phi.values()]


def test_truncated_poisson_under_replace_special_has_the_add_remove_pair():
    """Google DP team 2025, Sec. 4.3: the untruncated part is the Poisson pair of x against bottom (add/remove's),
    the truncated part the substitution-type pair used under every relation."""
    mechanism = afa.Gaussian(1.0).truncated_poisson_subsampled(0.05, batch_size=8, dataset_size=100)
    special, add_remove = mechanism.dominating_pair("replace_special"), mechanism.dominating_pair("add_remove")
    assert special.components == add_remove.components
    assert list(special.log_weights) == list(add_remove.log_weights)
    assert special.components[0].b_shifts == (0.0,) and special.components[1].b_shifts == (0.0, 2.0)


@pytest.mark.parametrize("mechanism", [
    afa.RandomizedResponse(0.7), afa.MixtureOfGaussians((0.0, 1.0), (0.5, 0.5), 1.0),
    afa.DataDependentGaussian(1.0, 1.5, 1.0), afa.ProposeTestRelease(1.0, 1e-6),
    afa.KaryRandomizedResponse(3, 0.6).poisson_subsampled(0.2), afa.Gaussian(1.0, 2.0).subset_subsampled(0.1)],
    ids=repr)
def test_refusals_name_mechanism_and_relation(mechanism):
    accountant = afa.Accountant("replace_special").compose(afa.Gaussian(5.0))
    message = f"{type(mechanism).__name__} declares no dominating pair under neighboring='replace_special'"
    if getattr(mechanism, "scheme", None) == "subset":
        message = "subset sampling is analysed under neighboring='add_remove'"
    with pytest.raises(ValueError, match=message):
        accountant.compose(mechanism)
    assert accountant.mechanisms == {afa.Gaussian(5.0): 1}  # unchanged
    assert "replace_special" not in mechanism.relations
    with pytest.raises(ValueError, match="replace_special"):
        mechanism.loss_tails("replace_special")


@pytest.mark.parametrize("base", [afa.Gaussian(1.0), afa.Laplace(0.5, sensitivity=2.0)], ids=repr)
def test_poisson_subsampled_additive_noise_under_replace_special_is_the_add_remove_pair(base):
    """The special record contributes f = 0: when its position is sampled the output is the subsample's without
    x, exactly as when x is absent, so x against the special record has the add/remove pair, in both directions."""
    mechanism = base.poisson_subsampled(0.1)
    assert mechanism.dominating_pair("replace_special") == mechanism.dominating_pair("add_remove")
    special = afa.Accountant("replace_special").compose(mechanism, times=20)
    add_remove = afa.Accountant("add_remove").compose(mechanism, times=20)
    assert special.delta_result([0.2, 1.0]).value.tolist() == add_remove.delta_result([0.2, 1.0]).value.tolist()


def test_subsampling_at_the_ends_and_relations():
    # q = 1 is the base, q = 0 never uses the record: both served; 0 < q < 1 only with additive noise.
    assert afa.Accountant("replace_special").compose(afa.Gaussian(1.0).poisson_subsampled(1.0)).delta(0.5) == \
        afa.Accountant("replace_special").compose(afa.Gaussian(1.0)).delta(0.5)
    assert afa.Gaussian(1.0).poisson_subsampled(0.0).relations == afa.mechanisms.catalog.NEIGHBORING_RELATIONS
    for relation in afa.mechanisms.catalog.NEIGHBORING_RELATIONS:
        with pytest.raises(ValueError, match="neighboring"):
            afa.Accountant(relation.upper())


def test_spec_and_cli_carry_the_relation(tmp_path, capsys):
    accountant = afa.Accountant("replace_special").compose(afa.KaryRandomizedResponse(4, 0.6), 3)
    spec = accountant.to_dict()
    assert spec["neighboring"] == "replace_special"
    back = afa.Accountant.from_dict(json.loads(json.dumps(spec)))
    assert back.neighboring == "replace_special" and back.mechanisms == accountant.mechanisms
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"mechanisms": [{"type": "kary_randomized_response", "k": 4, "p": 0.6, "times": 3}]}))
    afa.cli.main(["delta", "--spec", str(path), "--epsilon", "0.5", "--neighboring", "replace_special", "--json"])
    printed = json.loads(capsys.readouterr().out)
    assert printed["neighboring"] == "replace_special"
    assert printed["reported"] == pytest.approx(accountant.delta(0.5), rel=1e-12)


def test_directions_of_every_relation():
    names = {relation: afa.Accountant(relation).directions for relation in afa.mechanisms.catalog.NEIGHBORING_RELATIONS}
    assert names == {"add_remove": ("remove", "add"), "substitution": ("forward", "reverse"),
                     "replace_special": ("remove", "add")}
    assert list(itertools.chain(*names.values()))
