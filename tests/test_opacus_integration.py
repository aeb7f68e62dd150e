"""AfaAccountant inside a real Opacus PrivacyEngine: training records every step, checkpoints restore it, and
its epsilon sits below Opacus's RDP bound and beside its PRV accountant.

Needs opacus and torch (skipped without them); ``bash scripts/opacus_env.sh`` builds an environment with both
and runs this file with -s, which prints the numbers docs/opacus.md reports.
"""

import math
import time

import pytest

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")

from opacus import PrivacyEngine  # noqa: E402
from opacus.accountants import IAccountant, PRVAccountant, RDPAccountant  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import afa  # noqa: E402
from afa.interop.opacus import AfaAccountant, get_noise_multiplier, register_with_opacus  # noqa: E402

pytestmark = pytest.mark.opacus

DELTA = 1e-5
POINTS, BATCH = 256, 64  # Poisson sampling at rate 64 / 256 = 0.25: 4 expected batches per epoch
SCHEDULE = [(1.0, 3), (1.5, 2)]  # (noise multiplier, epochs): the noise is raised after 3 epochs


def data_loader(seed=0):
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(POINTS, 5, generator=generator)
    labels = (features @ torch.tensor([1.0, -2.0, 0.5, 0.0, 1.0]) > 0).long()
    return DataLoader(TensorDataset(features, labels), batch_size=BATCH)


def private_logistic_regression(engine, noise_multiplier, **make_private):
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    if "target_epsilon" in make_private:
        return engine.make_private_with_epsilon(module=model, optimizer=optimizer, data_loader=data_loader(),
                                                max_grad_norm=1.0, poisson_sampling=True, **make_private)
    return engine.make_private(module=model, optimizer=optimizer, data_loader=data_loader(),
                               noise_multiplier=noise_multiplier, max_grad_norm=1.0, poisson_sampling=True)


def train(model, optimizer, loader, epochs):
    """Train for ``epochs``; returns the number of optimizer steps taken."""
    steps = 0
    loss = torch.nn.CrossEntropyLoss()
    for _ in range(epochs):
        for features, labels in loader:
            optimizer.zero_grad()
            loss(model(features), labels).backward()
            optimizer.step()
            steps += 1
    return steps


@pytest.fixture(scope="module")
def trained():
    """A PrivacyEngine with an AfaAccountant after the SCHEDULE, and the steps it took."""
    engine = PrivacyEngine()
    engine.accountant = AfaAccountant()
    model, optimizer, loader = private_logistic_regression(engine, SCHEDULE[0][0])
    steps = []
    for noise_multiplier, epochs in SCHEDULE:
        optimizer.noise_multiplier = noise_multiplier
        steps.append(train(model, optimizer, loader, epochs))
    return engine, model, optimizer, steps


def test_training_records_every_step(trained):
    engine, _, _, steps = trained
    rate = 1 / math.ceil(POINTS / BATCH)  # PrivacyEngine's sample_rate: 1 / len(data_loader)
    assert engine.accountant.history == [(sigma, rate, count) for (sigma, _), count in zip(SCHEDULE, steps)]
    assert len(engine.accountant) == sum(steps)
    expected = afa.Accountant()
    for (sigma, _), count in zip(SCHEDULE, steps):
        expected.compose(afa.Gaussian(sigma).poisson_subsampled(rate), count)
    assert engine.get_epsilon(DELTA) == expected.epsilon(DELTA)


def test_checkpoint_restores_the_accountant(trained, tmp_path):
    engine, model, optimizer, _ = trained
    path = tmp_path / "checkpoint.pt"
    engine.save_checkpoint(path=path, module=model, optimizer=optimizer)
    fresh = PrivacyEngine()
    fresh.accountant = AfaAccountant()
    fresh.load_checkpoint(path=path, module=model, optimizer=optimizer)
    assert fresh.accountant.history == engine.accountant.history
    assert fresh.get_epsilon(DELTA) == engine.get_epsilon(DELTA)
    # The accountant's state is plain data: torch.load's safe mode reads it too.
    state = torch.load(path, weights_only=True)["privacy_accountant_state_dict"]
    restored = AfaAccountant()
    restored.load_state_dict(state)
    assert restored.get_epsilon(DELTA) == engine.get_epsilon(DELTA)


def test_epsilon_beside_opacus_prv_and_rdp(trained):
    engine, _, _, steps = trained
    history = list(engine.accountant.history)
    timings, epsilons = {}, {}
    for name, accountant, options in [("afa", AfaAccountant(), {}), ("prv", PRVAccountant(), {}),
                                      ("prv (eps_error 1e-3)", PRVAccountant(), {"eps_error": 1e-3}),
                                      ("rdp", RDPAccountant(), {})]:
        accountant.history = list(history)
        start = time.perf_counter()
        epsilons[name] = accountant.get_epsilon(delta=DELTA, **options)
        timings[name] = time.perf_counter() - start
    print(f"\nhistory (noise_multiplier, sample_rate, steps): {history}; delta = {DELTA:g}")
    for name in epsilons:
        print(f"  {name:>22}: epsilon = {epsilons[name]:.8f}  ({timings[name]:.2f} s)")
    bracket = AfaAccountant()
    bracket.history = history
    certified = bracket.accountant().epsilon_result(DELTA, method="pld")
    print(f"  {'afa pld bracket':>22}: [{certified.lower:.8f}, {certified.upper:.8f}] (certified={certified.certified})")
    assert epsilons["afa"] <= epsilons["rdp"]  # RDP is an upper bound; afa is tight
    assert certified.lower <= epsilons["afa"] <= certified.upper + 1e-9
    # Opacus's PRV accountant returns the upper end of an estimate within eps_error of the truth.
    assert abs(epsilons["afa"] - epsilons["prv (eps_error 1e-3)"]) <= 2e-3
    assert abs(epsilons["afa"] - epsilons["prv"]) <= 2e-2


def test_registered_name_and_make_private_with_epsilon():
    register_with_opacus()
    register_with_opacus()  # again: harmless
    engine = PrivacyEngine(accountant="afa")
    assert isinstance(engine.accountant, AfaAccountant) and isinstance(engine.accountant, IAccountant)
    target, epochs = 3.0, 4
    start = time.perf_counter()
    model, optimizer, loader = private_logistic_regression(engine, None, target_epsilon=target,
                                                           target_delta=DELTA, epochs=epochs)
    bisection_seconds = time.perf_counter() - start
    steps = train(model, optimizer, loader, epochs)
    assert steps == int(epochs / (BATCH / POINTS))
    assert engine.get_epsilon(DELTA) <= target
    start = time.perf_counter()
    certified = get_noise_multiplier(target_epsilon=target, target_delta=DELTA, sample_rate=BATCH / POINTS,
                                     epochs=epochs)
    certified_seconds = time.perf_counter() - start
    from opacus.accountants.utils import get_noise_multiplier as opacus_noise_multiplier
    rdp = opacus_noise_multiplier(target_epsilon=target, target_delta=DELTA, sample_rate=BATCH / POINTS,
                                  epochs=epochs, accountant="rdp")
    print(f"\nnoise multiplier for epsilon = {target:g}, delta = {DELTA:g}, {steps} steps at q = {BATCH / POINTS:g}: "
          f"make_private_with_epsilon (Opacus's bisection on AfaAccountant) {optimizer.noise_multiplier:.4f} "
          f"({bisection_seconds:.1f} s), afa.interop.opacus.get_noise_multiplier {certified:.4f} "
          f"({certified_seconds:.1f} s), Opacus with RDP {rdp:.4f}")
    check = AfaAccountant()
    check.history = [(certified, BATCH / POINTS, steps)]
    assert check.get_epsilon(DELTA) <= target
    assert certified <= rdp  # a tight accountant needs no more noise than the RDP bound
