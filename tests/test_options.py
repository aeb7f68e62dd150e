"""Option objects: validation naming the field, round trips, and each setting reaching its engine.

The references are the engines' documented refusals: a limit lowered below what a query needs must
refuse it (CompositionTooLargeError, PLDTooLargeError, NodeBudgetError), and the default must answer.
"""

import json
import pickle
import threading

import pytest

import afa
import afa.numerics.atoms
from afa import options as settings


@pytest.mark.parametrize("make, error, needle", [
    (lambda: afa.ExactOptions(max_atoms=0), ValueError, "ExactOptions.max_atoms"),
    (lambda: afa.ExactOptions(max_atoms=2.5), TypeError, "ExactOptions.max_atoms"),
    (lambda: afa.ExactOptions(max_pairs=True), TypeError, "ExactOptions.max_pairs"),
    (lambda: afa.ContourOptions(numeric_nodes=8), ValueError, "ContourOptions.numeric_nodes"),
    (lambda: afa.ContourOptions(numeric_nodes=512, wide_numeric_nodes=256), ValueError, "wide_numeric_nodes"),
    (lambda: afa.ContourOptions(work_per_node=0), ValueError, "ContourOptions.work_per_node"),
    (lambda: afa.PLDOptions(tail_fraction=0.0), ValueError, "PLDOptions.tail_fraction"),
    (lambda: afa.PLDOptions(tail_fraction=float("nan")), ValueError, "PLDOptions.tail_fraction"),
    (lambda: afa.PLDOptions(smallest_tail=1e-3), ValueError, "PLDOptions.smallest_tail"),
    (lambda: afa.PLDOptions(max_grid_points=10), ValueError, "PLDOptions.max_grid_points"),
    (lambda: afa.AutoOptions(share=1.5), ValueError, "AutoOptions.share"),
    (lambda: afa.AutoOptions(bracket_rtol="1%"), TypeError, "AutoOptions.bracket_rtol"),
    (lambda: afa.AutoOptions(fallbacks="pld"), TypeError, "AutoOptions.fallbacks"),
    (lambda: afa.AutoOptions(fallbacks=("pld", 3)), TypeError, "AutoOptions.fallbacks"),
    (lambda: afa.AutoOptions(fallbacks=("pld", "exact")), ValueError, "AutoOptions.fallbacks"),
    (lambda: afa.AutoOptions(fallbacks=("pld", "pld")), ValueError, "AutoOptions.fallbacks"),
    (lambda: afa.AutoOptions(recursions=1), TypeError, "AutoOptions.recursions"),
    (lambda: afa.ExactOptions(lattice=1), TypeError, "ExactOptions.lattice"),
    (lambda: afa.PLDOptions(direct_power_limit=-1), ValueError, "PLDOptions.direct_power_limit"),
    (lambda: afa.Options(exact=afa.PLDOptions()), TypeError, "Options.exact"),
    (lambda: afa.Accountant(options={"exact": {}}), TypeError, "options"),
    (lambda: afa.Options.from_dict({"fft": {}}), ValueError, "'fft'"),
    (lambda: afa.Options.from_dict({"pld": {"tail": 1e-9}}), ValueError, "'tail'"),
])
def test_bad_options_name_the_field(make, error, needle):
    with pytest.raises(error, match=needle):
        make()


def test_options_are_frozen_and_round_trip():
    options = afa.Options(exact=afa.ExactOptions(max_atoms=1000), auto=afa.AutoOptions(share=0.3))
    with pytest.raises(AttributeError):
        options.exact.max_atoms = 5
    assert options.to_dict() == {"exact": {"max_atoms": 1000}, "auto": {"share": 0.3}}
    assert afa.Options.from_dict(json.loads(json.dumps(options.to_dict()))) == options
    assert afa.Options().to_dict() == {}
    accountant = afa.Accountant(options=options).compose(afa.Gaussian(3.0), 2)
    for copy in (pickle.loads(pickle.dumps(accountant)), afa.Accountant.from_dict(accountant.to_dict())):
        assert copy.options == options


def test_the_fallbacks_of_auto_are_an_ordered_option(monkeypatch):
    """AutoOptions.fallbacks orders what 'auto' tries after its first choice and the contour.  With the contour
    unavailable, a Laplace composition goes first to the quadrature (every mechanism being continuous), made to
    refuse here; then, in the order given, fallbacks ("certified", "pld") try the certified bracket (which cannot
    serve it) and the PLD, ("pld",) the PLD alone, and none leaves a refusal naming every attempt.  The option
    round-trips through to_dict (a list) and from_dict."""
    from afa.engines.planner import Planner

    def unavailable(self, index):
        raise afa.UnsupportedCompositionError("unavailable (raised by the test)")

    def refusing(self, index):
        raise afa.AccuracyError("refused (raised by the test)")

    monkeypatch.setitem(Planner._BUILDERS, "contour", unavailable)
    monkeypatch.setitem(Planner._BUILDERS, "quadrature", refusing)
    seen = {}
    for fallbacks in (("certified", "pld"), ("pld",), ()):
        options = afa.Options(auto=afa.AutoOptions(fallbacks=fallbacks))
        acc = afa.Accountant(options=options).compose(afa.Laplace(1.0), 3)
        try:
            result = acc.delta_result(1.0)
        except afa.AccuracyError as error:
            seen[fallbacks] = [(a.method, a.outcome) for a in error.attempts]
        else:
            seen[fallbacks] = [(a.method, a.outcome) for a in result.attempts]
    assert seen[("certified", "pld")] == [("contour", "passed over"), ("quadrature", "refused"),
                                          ("certified", "refused"), ("pld", "answered")]
    assert seen[("pld",)] == [("contour", "passed over"), ("quadrature", "refused"), ("pld", "answered")]
    assert seen[()] == [("contour", "passed over"), ("quadrature", "refused")]
    options = afa.Options(auto=afa.AutoOptions(fallbacks=("quadrature",)))
    assert options.to_dict() == {"auto": {"fallbacks": ["quadrature"]}}
    assert afa.Options.from_dict(json.loads(json.dumps(options.to_dict()))) == options


def test_auto_without_the_recursions_leaves_their_queries_to_the_others():
    """AutoOptions(recursions=False): an eps(delta) of 2 uses of q = 0.001 (the step recursion's, first by
    default) is answered by the contour or the PLD instead, and the two answers' brackets meet."""
    def accountant(options=None):
        return afa.Accountant(options=options).compose(afa.Gaussian(1.0).poisson_subsampled(0.001), 2)

    default = accountant().epsilon_result(1e-5)
    assert default.method == "exact" and default.attempts[-1].method == "exact (step recursion)"
    without = accountant(afa.Options(auto=afa.AutoOptions(recursions=False))).epsilon_result(1e-5)
    assert without.method in ("contour", "pld")
    assert all(attempt.method not in ("exact (step recursion)", "exact (doubling, far reach)")
               for attempt in without.attempts)
    assert without.lower <= default.upper and default.lower <= without.upper


def test_the_exact_limits_reach_the_exact_engine():
    """20 discrete Gaussians and 5 RR: the enumeration has thousands of atoms, so a limit of 50 refuses what
    the default answers; 'auto' then answers with the PLD, whose certified bracket holds the exact value."""
    def build(options=None):
        return (afa.Accountant(options=options).compose(afa.DiscreteGaussian(2.0), 20)
                .compose(afa.RandomizedResponse(0.6), 5))
    truth = build().epsilon_result(1e-6, method="exact")
    crowded = build(afa.Options(exact=afa.ExactOptions(max_atoms=50)))
    with pytest.raises(afa.numerics.atoms.CompositionTooLargeError):
        crowded.epsilon_result(1e-6, method="exact")
    answer = crowded.epsilon_result(1e-6)
    assert answer.method == "pld" and answer.lower <= truth.value <= answer.upper
    assert [a.outcome for a in answer.attempts][-1] == "answered"


def test_the_pld_grid_limit_and_the_contour_node_budget_reach_their_engines():
    gaussians = afa.Accountant(options=afa.Options(pld=afa.PLDOptions(max_grid_points=1024)))
    gaussians.compose(afa.Gaussian(1.0), 10)
    with pytest.raises(afa.UnsupportedCompositionError, match="grid points"):
        gaussians.epsilon_result(1e-5, method="pld")
    dpsgd = afa.Gaussian(1.0).poisson_subsampled(0.01)
    tight = afa.Accountant(options=afa.Options(contour=afa.ContourOptions(numeric_nodes=16)))
    with pytest.raises(afa.AccuracyError, match="16 nodes"):
        tight.compose(dpsgd, 100).epsilon_result(1e-5, method="contour")
    assert afa.Accountant().compose(dpsgd, 100).epsilon_result(1e-5, method="contour").method == "contour"
    starved = afa.Accountant(options=afa.Options(contour=afa.ContourOptions(work_per_node=1)))
    with pytest.raises(afa.AccuracyError, match="work_per_node"):
        starved.compose(dpsgd, 100).epsilon_result(1e-5, method="contour")


def test_options_are_active_only_inside_the_accountant_s_queries():
    seen = []
    accountant = afa.Accountant(options=afa.Options(exact=afa.ExactOptions(max_atoms=123)))
    accountant.compose(afa.RandomizedResponse(0.7), 3)

    def spy(*args):
        seen.append(settings.current().exact.max_atoms)
        return original(*args)

    from afa.engines import base as engines
    original = engines.ExactEngine.epsilon_bracket
    engines.ExactEngine.epsilon_bracket = spy
    try:
        accountant.epsilon_result(1e-3, method="exact")
        afa.Accountant().compose(afa.RandomizedResponse(0.7), 3).epsilon_result(1e-3, method="exact")
    finally:
        engines.ExactEngine.epsilon_bracket = original
    assert seen == [123, afa.ExactOptions().max_atoms]
    assert settings.current() == afa.Options()


def test_threads_keep_their_own_options():
    results = {}

    def run(name, limit):
        with settings.using(afa.Options(exact=afa.ExactOptions(max_atoms=limit))):
            for _ in range(200):
                if settings.current().exact.max_atoms != limit:
                    results[name] = "leaked"
                    return
        results[name] = "ok"

    threads = [threading.Thread(target=run, args=(f"t{i}", 10 + i)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(results.values()) == {"ok"}
