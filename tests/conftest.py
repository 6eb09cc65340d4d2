"""Shared fixtures: small federations on the embedded digits dataset, trained once per session."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch

from fedattack.federation.executors import Executor
from fedattack.federation.loop import FederationState, RoundLoop
from fedattack.federation.spec import FederationSpec
from fedattack.federation.train import train_federation
from fedattack.models import compact
from fedattack.registry import MODELS, TARGETS
from fedattack.target import LocalData, Recipe, Target, TargetContext
from fedattack.wire import SERVER, Message

# The tests' models are tiny: one intra-op thread is faster than two, and much faster when the
# machine is busy (threads waiting on descheduled siblings slowed the suite 10-20x here).
torch.set_num_threads(1)

# Every registered model is built in its compact form (`fedattack.models.compact`: the same
# architecture at a width the suite affords; ResNet-18 at width 4), so the tests that iterate
# every model x method x executor stay fast; tests/core/test_resnet.py builds it at full width.
MODELS.restore({name: compact(builder) for name, builder in MODELS.snapshot().items()})

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"

# A runner that starts the suite as a background job of a non-interactive shell (`cmd &`, as
# nohup scripts do) hands it SIGINT ignored, and every command a test starts inherits that, so
# the interrupt tests would test the runner instead of fedattack's Ctrl-C. Python's default
# handler here, which children exec'd from this process get back as the default disposition.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (two workers, `--dist loadgroup`), tests sharing an expensive session
    fixture that must exist once run on one worker: the hostile tests' `busy` processes are
    started together and signalled at once, so two copies on two workers would race each other
    for the cores their timing assumes."""
    for item in items:
        if "busy" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("hostile-busy"))


def tiny_spec(**overrides) -> FederationSpec:  # type: ignore[no-untyped-def]
    """A federation small enough to train in about a second."""
    base = dict(method="fedavg", dataset="digits", partition="shards", num_clients=10,
                model="digits-mlp", rounds=3, fraction=0.3, recipe=Recipe(epochs=1, batch_size=10, lr=0.1),
                seed=0, record="all")
    base.update(overrides)
    return FederationSpec(**base)


@pytest.fixture(scope="session")
def fedavg_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "fedavg"
    return train_federation(tiny_spec(rounds=4), out, progress=False)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the tensor cache out of the user's home (shared across the session for speed)."""
    if "FEDATTACK_CACHE" not in os.environ:
        monkeypatch.setenv("FEDATTACK_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def data_root() -> Path | None:
    """The real datasets, when CI or the developer points FEDATTACK_DATA at them."""
    root = os.environ.get("FEDATTACK_DATA")
    return Path(root) if root and Path(root).is_dir() else None


def run_rounds(spec: FederationSpec, target: Target, datas: list[LocalData],
               executor: Executor) -> tuple[RoundLoop, FederationState, list[Message]]:
    """Every round of `spec` in memory (no run directory), with the messages it sent."""
    messages: list[Message] = []
    loop = RoundLoop(spec, target, datas, executor, messages.append)
    state = loop.start()
    for rnd in range(1, spec.rounds + 1):
        loop.run_round(state, rnd)
    return loop, state, messages


def received(payloads: list[dict[str, torch.Tensor]], samples: list[float],
             senders: list[int] | None = None, rnd: int = 1) -> list[Message]:
    """Uplink messages as a server receives them (sender, payload, reported sample count)."""
    senders = list(range(len(payloads))) if senders is None else senders
    return [Message(rnd, k, SERVER, "uplink", p, samples=int(n))
            for k, p, n in zip(senders, payloads, samples)]


def build(method: str, hyper: dict[str, object] | None = None, model: str = "digits-mlp",
          shape: tuple[int, int, int] = (1, 8, 8), recipe: Recipe | None = None, clients: int = 10,
          rounds: int = 20) -> Target:
    """A target built from a context, as the round loop builds it (no dataset needed)."""
    cls = TARGETS.get(method)
    ctx = TargetContext(model=model, input_shape=shape, num_classes=10, recipe=recipe or Recipe(),
                        num_clients=clients, rounds=rounds)
    return cls(cls.make_hyper(hyper or {}), ctx)


@pytest.fixture
def isolated_registries():  # type: ignore[no-untyped-def]
    """Plugins a test loads (its own files) are forgotten afterwards, so later tests see the
    built-in registries only."""
    from fedattack import registry as reg

    for registry in reg.ALL_REGISTRIES:
        registry.discover()
    saved = [(r, r.snapshot()) for r in list(reg.ALL_REGISTRIES)]
    loaded = set(reg._LOADED_PLUGINS)
    yield
    for registry, items in saved:
        registry.restore(items)
    reg._LOADED_PLUGINS.clear()
    reg._LOADED_PLUGINS.update(loaded)
