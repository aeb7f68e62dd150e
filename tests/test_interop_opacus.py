"""afa.interop.opacus without opacus or torch: Opacus's accountant contract, the ledger, checkpoints,
epsilon against independent closed forms, bad input, and the calibration's safety.

The contract is written down here from Opacus's source (opacus/accountants/accountant.py, IAccountant, and
the calls opacus/privacy_engine.py and opacus/accountants/utils.py make on an accountant; Opacus 1.5.4 and
1.6.0 agree), not imported.  tests/test_opacus_integration.py runs the real thing when opacus is installed.
"""

import copy
import inspect
import json
import math
import pickle
import subprocess
import sys
from collections import OrderedDict
from types import SimpleNamespace

import mpmath
import pytest

import afa
from afa.interop.opacus import OPACUS_MECHANISMS, AfaAccountant, get_noise_multiplier

P, K, KW = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD

# IAccountant's methods as Opacus declares them: name -> [(parameter, kind)] after self (or cls), and whether
# the method is a classmethod.  get_epsilon is declared (delta, *args, **kwargs); what callers rely on is
# delta by position or keyword plus arbitrary keywords.
OPACUS_METHODS = {
    "step": ([("noise_multiplier", K), ("sample_rate", K)], False),
    "get_epsilon": ([("delta", P)], False),
    "__len__": ([], False),
    "mechanism": ([], True),
    "get_optimizer_hook_fn": ([("sample_rate", P)], False),
    "state_dict": ([("destination", P)], False),
    "load_state_dict": ([("state_dict", P)], False),
}


# -- independent truths (mpmath, 40 digits) ----------------------------------------------------------------
mpmath.mp.dps = 40


def gaussian_delta(epsilon, mu):
    """delta(epsilon) of the Gaussian mechanism with mu = sensitivity / sigma (Balle & Wang 2018, Thm 8)."""
    epsilon, mu = mpmath.mpf(epsilon), mpmath.mpf(mu)
    return mpmath.ncdf(mu / 2 - epsilon / mu) - mpmath.exp(epsilon) * mpmath.ncdf(-mu / 2 - epsilon / mu)


def subsampled_delta(epsilon, sigma, q):
    """delta(epsilon) of one Poisson-subsampled Gaussian step under add/remove: the larger of
    H_{e^eps}((1-q)N(0,s^2) + qN(1,s^2) || N(0,s^2)) and H_{e^eps}(N(0,s^2) || (1-q)N(0,s^2) + qN(1,s^2)).
    The likelihood ratio (1-q) + q exp((2x-1)/(2 s^2)) is monotone in x, so each divergence is a difference of
    normal tails beyond the one crossing point."""
    epsilon, s, q = mpmath.mpf(epsilon), mpmath.mpf(sigma), mpmath.mpf(q)
    e = mpmath.exp(epsilon)
    x = s ** 2 * mpmath.log((e - 1 + q) / q) + mpmath.mpf(1) / 2  # remove: P/Q > e^eps for x beyond
    remove = (1 - q) * mpmath.ncdf(-x / s) + q * mpmath.ncdf(-(x - 1) / s) - e * mpmath.ncdf(-x / s)
    add = mpmath.mpf(0)
    if 1 / e > 1 - q:  # add: Q/P > e^eps for x below a point, if at all
        y = s ** 2 * mpmath.log((1 / e - 1 + q) / q) + mpmath.mpf(1) / 2
        add = mpmath.ncdf(y / s) - e * ((1 - q) * mpmath.ncdf(y / s) + q * mpmath.ncdf((y - 1) / s))
    return max(remove, add)


def invert(delta_of, delta, high=60.0):
    """The smallest epsilon >= 0 with delta_of(epsilon) <= delta (bisection; delta_of decreases)."""
    low, high = mpmath.mpf(0), mpmath.mpf(high)
    if delta_of(low) <= delta:
        return 0.0
    for _ in range(120):
        middle = (low + high) / 2
        low, high = (low, middle) if delta_of(middle) <= delta else (middle, high)
    return float(high)


def fake_optimizer(noise_multiplier, accumulated_iterations=1):
    """What Opacus's step hook reads from a DPOptimizer."""
    return SimpleNamespace(noise_multiplier=noise_multiplier, accumulated_iterations=accumulated_iterations)


# -- the contract --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(OPACUS_METHODS))
def test_methods_have_opacus_signatures(name):
    expected, is_classmethod = OPACUS_METHODS[name]
    attribute = inspect.getattr_static(AfaAccountant, name)
    assert isinstance(attribute, classmethod) == is_classmethod
    parameters = list(inspect.signature(getattr(AfaAccountant() if not is_classmethod else AfaAccountant,
                                                name)).parameters.values())
    named = [(p.name, p.kind) for p in parameters if p.kind not in (inspect.Parameter.VAR_KEYWORD,
                                                                     inspect.Parameter.VAR_POSITIONAL)]
    assert named[:len(expected)] == expected
    # Any further parameter must have a default (callers pass only Opacus's).
    assert all(p.default is not inspect.Parameter.empty for p in parameters[len(expected):]
               if p.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL))


def test_get_epsilon_takes_the_keywords_opacus_passes():
    # PrivacyEngine.get_epsilon(delta) passes delta by position; opacus.accountants.utils.get_noise_multiplier
    # assigns history and passes delta=... with the user's **kwargs (e.g. PRV's eps_error, RDP's alphas).
    assert any(p.kind == KW for p in inspect.signature(AfaAccountant.get_epsilon).parameters.values())
    accountant = AfaAccountant()
    accountant.history = [(1.0, 0.01, 100)]
    by_position = accountant.get_epsilon(1e-5)
    assert accountant.get_epsilon(delta=1e-5, eps_error=0.01, delta_error=1e-8, alphas=[2, 4]) == by_position


def test_the_calls_privacy_engine_makes():
    accountant = AfaAccountant()
    assert AfaAccountant.mechanism() == accountant.mechanism() == "afa"
    assert accountant.history == [] and len(accountant) == 0
    hook = accountant.get_optimizer_hook_fn(sample_rate=0.25)
    for _ in range(3):
        hook(fake_optimizer(1.5))
    hook(fake_optimizer(1.5, accumulated_iterations=2))  # two batches accumulated: twice the rate
    assert accountant.history == [(1.5, 0.25, 3), (1.5, 0.5, 1)]
    assert len(accountant) == 4
    state = accountant.state_dict()
    assert isinstance(state, OrderedDict) and set(state) == {"history", "mechanism"}
    assert state["mechanism"] == "afa" and state["history"] == accountant.history
    destination = {"other": 1}
    assert accountant.state_dict(destination=destination) is destination and destination["other"] == 1
    fresh = AfaAccountant()
    fresh.load_state_dict(state)
    assert fresh.history == accountant.history
    assert fresh.get_epsilon(1e-5) == accountant.get_epsilon(1e-5)


def test_import_and_use_load_neither_opacus_nor_torch():
    code = ("import sys\n"
            "from afa.interop.opacus import AfaAccountant, get_noise_multiplier\n"
            "a = AfaAccountant()\n"
            "a.step(noise_multiplier=1.0, sample_rate=0.5)\n"
            "a.load_state_dict(a.state_dict())\n"
            "assert a.get_epsilon(1e-5) > 0\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('opacus', 'torch'))\n"
            "assert not loaded, loaded\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_history_is_assignable_as_opacus_does():
    accountant = AfaAccountant()
    accountant.history = [[2.0, 0.1, 5]]  # lists (e.g. after JSON) are stored as tuples
    assert accountant.history == [(2.0, 0.1, 5)]
    accountant.step(noise_multiplier=2.0, sample_rate=0.1)
    assert accountant.history == [(2.0, 0.1, 6)]


# -- the ledger ------------------------------------------------------------------------------------------------
def test_a_million_steps_are_one_entry():
    accountant = AfaAccountant()
    for _ in range(10 ** 6):
        accountant.step(noise_multiplier=1.0, sample_rate=0.001)
    assert accountant.history == [(1.0, 0.001, 10 ** 6)]
    assert len(accountant) == 10 ** 6
    # ... and one mechanism with a count in afa's accountant: a query costs what one step's does.
    assert accountant.accountant().mechanisms == {afa.Gaussian(1.0).poisson_subsampled(0.001): 10 ** 6}


def test_compression_keeps_the_order_of_changes():
    accountant = AfaAccountant()
    for sigma, q, times in [(1.0, 0.01, 3), (2.0, 0.01, 2), (2.0, 0.02, 1), (1.0, 0.01, 4)]:
        for _ in range(times):
            accountant.step(noise_multiplier=sigma, sample_rate=q)
    assert accountant.history == [(1.0, 0.01, 3), (2.0, 0.01, 2), (2.0, 0.02, 1), (1.0, 0.01, 4)]
    assert len(accountant) == 10
    # Entries of the same (sigma, q) are one mechanism in afa's composition.
    assert accountant.accountant().mechanisms[afa.Gaussian(1.0).poisson_subsampled(0.01)] == 7


# -- checkpoints ---------------------------------------------------------------------------------------------
def trained():
    accountant = AfaAccountant()
    accountant.history = [(1.1, 256 / 60000, 500), (0.9, 0.01, 20), (3.0, 1.0, 2)]
    return accountant


@pytest.mark.parametrize("transport", ["pickle", "deepcopy", "json", "torch-like"])
def test_state_dict_round_trip_gives_identical_epsilon(transport):
    accountant = trained()
    state = accountant.state_dict()
    if transport == "pickle":
        state = pickle.loads(pickle.dumps(state))
    elif transport == "deepcopy":
        state = copy.deepcopy(state)
    elif transport == "json":
        state = json.loads(json.dumps(state))
    else:  # torch.save(checkpoint) / torch.load: a dict of checkpoint entries, pickled
        checkpoint = {"module_state_dict": {}, "privacy_accountant_state_dict": state}
        state = pickle.loads(pickle.dumps(copy.deepcopy(checkpoint)))["privacy_accountant_state_dict"]
    restored = AfaAccountant()
    restored.step(noise_multiplier=5.0, sample_rate=0.5)  # replaced by the load
    restored.load_state_dict(state)
    assert restored.history == accountant.history
    assert restored.get_epsilon(1e-5) == accountant.get_epsilon(1e-5)


def test_the_state_dict_is_a_copy():
    accountant = trained()
    state = accountant.state_dict()
    accountant.step(noise_multiplier=3.0, sample_rate=1.0)
    assert state["history"][-1] == (3.0, 1.0, 2)


def test_the_accountant_itself_pickles():
    accountant = trained()
    epsilon = accountant.get_epsilon(1e-5)
    restored = pickle.loads(pickle.dumps(accountant))
    assert restored.history == accountant.history and restored.get_epsilon(1e-5) == epsilon


@pytest.mark.parametrize("mechanism", OPACUS_MECHANISMS)
def test_opacus_accountants_checkpoints_load(mechanism):
    # Their history holds the same (noise_multiplier, sample_rate, num_steps): re-accounted by afa.
    restored = AfaAccountant()
    restored.load_state_dict({"history": [(1.0, 0.01, 100)], "mechanism": mechanism})
    reference = afa.Accountant().compose(afa.Gaussian(1.0).poisson_subsampled(0.01), 100)
    assert restored.get_epsilon(1e-5) == reference.epsilon(1e-5)


@pytest.mark.parametrize("state, error, words", [
    (None, ValueError, "empty"),
    ({}, ValueError, "empty"),
    ({"history": []}, ValueError, "'mechanism'"),
    ({"mechanism": "afa"}, ValueError, "'history'"),
    ({"history": [], "mechanism": "dpsgd-magic"}, ValueError, "dpsgd-magic"),
    ({"history": [(1.0, 0.01, 10), (1.0, 2.0, 10)], "mechanism": "afa"}, ValueError, "history[1] sample_rate"),
    ({"history": [(1.0, 0.01, 0)], "mechanism": "afa"}, ValueError, "history[0] num_steps"),
    ({"history": [(1.0, 0.01)], "mechanism": "afa"}, TypeError, "history[0]"),
    ({"history": "(1.0, 0.01, 1)", "mechanism": "afa"}, TypeError, "history must be a list"),
])
def test_bad_state_dicts_leave_the_ledger(state, error, words):
    accountant = trained()
    before = list(accountant.history)
    with pytest.raises(error) as raised:
        accountant.load_state_dict(state)
    assert words in str(raised.value)
    assert accountant.history == before


# -- epsilon against independent truths ----------------------------------------------------------------------
@pytest.mark.parametrize("sigma, steps, delta", [(1.0, 1, 1e-5), (0.5, 1, 1e-3), (3.0, 1, 1e-10),
                                                 (10.0, 100, 1e-5), (2.0, 7, 1e-6)])
def test_full_batch_steps_are_the_analytic_gaussian(sigma, steps, delta):
    accountant = AfaAccountant()
    for _ in range(steps):
        accountant.step(noise_multiplier=sigma, sample_rate=1.0)
    mu = math.sqrt(steps) / sigma  # k full-batch steps of sigma: one Gaussian of mu = sqrt(k) / sigma
    truth = invert(lambda eps: gaussian_delta(eps, mu), delta)
    epsilon = accountant.get_epsilon(delta)
    assert epsilon >= truth - 1e-12 * max(1.0, truth)  # never below the truth (to rounding)
    assert epsilon == pytest.approx(truth, rel=1e-9)


@pytest.mark.parametrize("sigma, q, delta", [(1.0, 0.01, 1e-5), (0.8, 0.1, 1e-6), (2.0, 0.5, 1e-4)])
def test_one_subsampled_step_is_the_hockey_stick_closed_form(sigma, q, delta):
    accountant = AfaAccountant()
    accountant.step(noise_multiplier=sigma, sample_rate=q)
    truth = invert(lambda eps: subsampled_delta(eps, sigma, q), delta)
    epsilon = accountant.get_epsilon(delta)
    assert epsilon >= truth - 1e-12 * max(1.0, truth)
    assert epsilon == pytest.approx(truth, rel=1e-8)


def test_dpsgd_rows_are_afa_accountant_on_the_same_composition():
    history = [(1.1, 256 / 60000, 14063), (2.0, 0.01, 100), (0.8, 1.0, 5), (1.1, 256 / 60000, 7), (4.0, 0.0, 9)]
    accountant = AfaAccountant()
    accountant.history = history
    reference = (afa.Accountant("add_remove")
                 .compose(afa.Gaussian(1.1).poisson_subsampled(256 / 60000), 14063 + 7)
                 .compose(afa.Gaussian(2.0).poisson_subsampled(0.01), 100)
                 .compose(afa.Gaussian(0.8), 5))  # sample_rate 1: the plain Gaussian; sample_rate 0: nothing
    for delta in (1e-5, 1e-8):
        assert accountant.get_epsilon(delta) == reference.epsilon(delta)


def test_no_steps_spend_nothing():
    accountant = AfaAccountant()
    assert accountant.get_epsilon(1e-5) == 0.0
    accountant.step(noise_multiplier=1.0, sample_rate=0.0)  # never touches the record
    assert accountant.get_epsilon(1e-5) == 0.0 and accountant.accountant() is None


@pytest.mark.parametrize("q, steps", [(0.01, 3), (1.0, 1), (0.2, 10)])
def test_noise_multiplier_zero_is_infinite_epsilon(q, steps):
    # Released without noise, the record shows itself with probability q per step: the composed delta(eps)
    # is 1 - (1 - q)^k at every eps >= 0 (remove direction), so eps(delta) = inf below it and 0 above it.
    accountant = AfaAccountant()
    accountant.history = [(0.0, q, steps)]
    revealed = 1 - (1 - q) ** steps
    assert accountant.get_epsilon(min(1e-5, revealed / 2)) == math.inf
    if revealed < 0.99:
        assert accountant.get_epsilon(revealed + 0.01) == 0.0
    accountant.step(noise_multiplier=1.0, sample_rate=0.01)  # noisy steps on top do not help
    assert accountant.get_epsilon(1e-5) == math.inf


def test_noise_too_small_for_afa_is_bounded_by_the_revealing_pair():
    accountant = AfaAccountant()
    accountant.history = [(1e-5, 0.01, 3)]  # 1 / sigma above afa's subsampled range
    assert accountant.get_epsilon(1e-5) == math.inf  # the truth: delta(eps) ~ 1 - 0.99^3 ~ 0.03 for eps < 1e4


# -- bad input -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arguments, error, words", [
    ({"noise_multiplier": -1.0, "sample_rate": 0.1}, ValueError, "noise_multiplier must be a finite number >= 0"),
    ({"noise_multiplier": math.nan, "sample_rate": 0.1}, ValueError, "noise_multiplier"),
    ({"noise_multiplier": math.inf, "sample_rate": 0.1}, ValueError, "noise_multiplier"),
    ({"noise_multiplier": 1.0, "sample_rate": 1.5}, ValueError, "sample_rate must be in [0, 1]"),
    ({"noise_multiplier": 1.0, "sample_rate": -0.1}, ValueError, "sample_rate must be in [0, 1]"),
    ({"noise_multiplier": 1.0, "sample_rate": math.nan}, ValueError, "sample_rate"),
    ({"noise_multiplier": "1.0", "sample_rate": 0.1}, TypeError, "noise_multiplier must be a real number"),
    ({"noise_multiplier": 1.0, "sample_rate": None}, TypeError, "sample_rate must be a real number"),
])
def test_bad_steps_are_refused_before_the_ledger(arguments, error, words):
    accountant = trained()
    before, epsilon = list(accountant.history), accountant.get_epsilon(1e-5)
    with pytest.raises(error) as raised:
        accountant.step(**arguments)
    assert words in str(raised.value)
    assert accountant.history == before and accountant.get_epsilon(1e-5) == epsilon


def test_steps_are_keyword_only():
    with pytest.raises(TypeError):
        AfaAccountant().step(1.0, 0.1)


def test_bad_histories_are_refused_whole():
    accountant = trained()
    before = list(accountant.history)
    for history, words in [([(1.0, 0.1, 2.5)], "history[0] num_steps must be an integer >= 1"),
                           ([(1.0, 0.1, 3), (-2.0, 0.1, 3)], "history[1] noise_multiplier"),
                           ([(1.0, 0.1, True)], "history[0] num_steps must be a real number")]:
        with pytest.raises((ValueError, TypeError)) as raised:
            accountant.history = history
        assert words in str(raised.value)
        assert accountant.history == before


def test_hook_refuses_a_bad_rate_early_and_a_bad_step_late():
    with pytest.raises(ValueError, match="sample_rate must be in"):
        AfaAccountant().get_optimizer_hook_fn(sample_rate=2.0)
    accountant = AfaAccountant()
    hook = accountant.get_optimizer_hook_fn(sample_rate=0.6)
    hook(fake_optimizer(1.0))
    with pytest.raises(ValueError, match="sample_rate must be in"):
        hook(fake_optimizer(1.0, accumulated_iterations=2))  # 1.2
    assert accountant.history == [(1.0, 0.6, 1)]


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-5, math.nan, "1e-5"])
def test_bad_delta(delta):
    with pytest.raises(ValueError, match="delta must be a number in"):
        trained().get_epsilon(delta)


def test_history_mutated_in_place_is_checked_at_query():
    accountant = trained()
    accountant.history.append((1.0, 7.0, 1))  # bypasses the setter
    with pytest.raises(ValueError, match=r"history\[3\] sample_rate"):
        accountant.get_epsilon(1e-5)


def test_bad_settings():
    with pytest.raises(ValueError, match="method must be one of"):
        AfaAccountant(method="fft")
    with pytest.raises(TypeError, match="budget"):
        AfaAccountant(budget=30)


# -- calibration -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target, delta, steps", [(1.0, 1e-5, 1), (0.5, 1e-6, 10), (4.0, 1e-5, 100)])
def test_full_batch_calibration_never_overshoots_the_closed_form(target, delta, steps):
    sigma = get_noise_multiplier(target_epsilon=target, target_delta=delta, sample_rate=1.0, steps=steps,
                                 epsilon_tolerance=0.001)
    mu = math.sqrt(steps) / sigma
    assert gaussian_delta(target, mu) <= delta  # the answer meets the target...
    # ... and is within the tolerance of the smallest sigma that does (solved here in mpmath).
    smallest = float(math.sqrt(steps) / mpmath.findroot(lambda m: gaussian_delta(target, m) - delta,
                                                        mpmath.mpf(mu)))
    assert smallest <= sigma <= smallest * (1 + 0.001 / target)


def test_subsampled_calibration_never_overshoots():
    # One step: the hockey-stick closed form is the truth.
    sigma = get_noise_multiplier(target_epsilon=1.0, target_delta=1e-5, sample_rate=0.1, steps=1)
    assert subsampled_delta(1.0, sigma, 0.1) <= 1e-5
    assert subsampled_delta(1.0, sigma * (1 - 0.01), 0.1) > 1e-5  # epsilon_tolerance 0.01 at target 1
    # Many steps: afa's certified PLD bound and the accountant's answer both meet the target.
    sigma = get_noise_multiplier(target_epsilon=2.0, target_delta=1e-5, sample_rate=0.01, epochs=3)
    accountant = AfaAccountant()
    accountant.history = [(sigma, 0.01, 300)]  # steps = int(epochs / sample_rate)
    assert accountant.get_epsilon(1e-5) <= 2.0
    result = accountant.accountant().epsilon_result(1e-5, method="pld")
    assert result.certified and result.upper <= 2.0


def test_epochs_count_as_opacus_counts():
    # int(epochs / sample_rate): 3.7 epochs of full batches are 3 steps (the closed form, quick).
    by_epochs = get_noise_multiplier(target_epsilon=1.0, target_delta=1e-5, sample_rate=1.0, epochs=3.7)
    by_steps = get_noise_multiplier(target_epsilon=1.0, target_delta=1e-5, sample_rate=1.0, steps=3)
    assert by_epochs == by_steps


@pytest.mark.parametrize("arguments, words", [
    ({"steps": 10, "epochs": 1}, "exactly one of epochs and steps"),
    ({}, "exactly one of epochs and steps"),
    ({"steps": 10, "accountant": "rdp"}, "accountant must be 'afa'"),
    ({"steps": 10, "sample_rate": 0.0}, "sample_rate must be in (0, 1]"),
    ({"steps": 10, "sample_rate": 1.5}, "sample_rate must be in [0, 1]"),
    ({"steps": 0}, "steps must be an integer >= 1"),
    ({"steps": 2.5}, "steps must be an integer >= 1"),
    ({"steps": 10, "target_epsilon": 0.0}, "target_epsilon must be a finite number > 0"),
    ({"steps": 10, "epsilon_tolerance": -1.0}, "epsilon_tolerance must be a finite number > 0"),
    ({"epochs": 0.5, "sample_rate": 1.0}, "less than one step"),
])
def test_calibration_bad_input(arguments, words):
    settings = {"target_epsilon": 1.0, "target_delta": 1e-5, "sample_rate": 1.0, **arguments}
    with pytest.raises(ValueError) as raised:
        get_noise_multiplier(**settings)
    assert words in str(raised.value)


def test_register_with_opacus_says_what_it_needs(monkeypatch):
    from afa.interop import opacus as adapter
    monkeypatch.setitem(sys.modules, "opacus", None)  # as if opacus were not installed
    with pytest.raises(ImportError, match="needs opacus"):
        adapter.register_with_opacus()
