"""The adversary's objects hold nothing its threat model does not see (issue #43).

A planted plugin attack (`cheating_plugin.py`) walks everything its `run` is handed, on a
federation whose clients keep private state (FedPer's personal heads) behind secure
aggregation, trained with a seed of its own: it must find no path into the run directory
(private.pt, the partition), no private tensor, no partition index, not the run's seed (from
which secure aggregation's masks derive), no other client's message, and the victim's size and
class counts only where the threat model grants them, named in the result.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from fedattack import registry as reg
from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.data import load_dataset
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.rundir import WITHHELD_SEED, Federation
from fedattack.federation.train import train_federation
from fedattack.registry import load_plugin_file
from fedattack.results import AttackResult
from tests.conftest import tiny_spec

SEED = 424_242
VICTIM = 1
PLUGIN = Path(__file__).with_name("cheating_plugin.py")


@pytest.fixture(scope="module")
def plugin() -> Iterator[ModuleType]:
    """The plugin loaded as a user's `--plugin` file is, and forgotten by the registries afterwards."""
    for registry in reg.ALL_REGISTRIES:
        registry.discover()
    saved, loaded = [(r, r.snapshot()) for r in list(reg.ALL_REGISTRIES)], set(reg._LOADED_PLUGINS)
    load_plugin_file(str(PLUGIN))
    yield sys.modules["fedattack_plugin_cheating_plugin"]
    for registry, items in saved:
        registry.restore(items)
    reg._LOADED_PLUGINS.clear()
    reg._LOADED_PLUGINS.update(loaded)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = tiny_spec(method="fedper", num_clients=4, fraction=1.0, rounds=2, seed=SEED,
                     defences=({"name": "secure-aggregation", "settings": {}},))
    return train_federation(spec, tmp_path_factory.mktemp("cheat") / "run", progress=False)


@pytest.fixture(scope="module")
def found(run: Path, plugin: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = {}
    for tm in ("test-tap", "eavesdropper"):
        spec = EvaluationSpec(threat_models=tm, attacks="test-cheat", victims=[VICTIM], aux_size=50, eval_size=0)
        paths = evaluate_run(run, spec, tmp_path_factory.mktemp(tm) / "results", progress=False)
        result = AttackResult.load(paths[0])
        assert result.applicable, result.note
        out[tm] = plugin.FOUND.pop(VICTIM)
        out[tm].granted_in_result = result.extra["knowledge"]["granted"]
    return out


def test_the_walk_finds_what_a_federation_holds(run: Path, plugin: ModuleType) -> None:
    """The planted attack's walk is not blind: from the opened run directory it reaches the path."""
    objects = plugin.reachable(Federation(run))
    assert any(str(run) in str(o) for o in objects if isinstance(o, (str, Path)))


@pytest.mark.parametrize("tm", ["test-tap", "eavesdropper"])
def test_no_path_into_the_run_directory(found: dict[str, Any], run: Path, tm: str) -> None:
    strings = found[tm].strings
    assert not [s for s in strings if str(run) in s or run.name in s], "a path into the run directory"
    assert not [s for s in strings if s.endswith(("private.pt", "partition.pt", "partition.json", "federation.json"))]
    assert found[tm].folder is None  # no transcript reader with its folder on the view


@pytest.mark.parametrize("tm", ["test-tap", "eavesdropper"])
def test_no_private_state_and_no_partition(found: dict[str, Any], run: Path, tm: str) -> None:
    fed = Federation(run)
    private = fed.private_state(VICTIM)
    indices = torch.as_tensor(fed.partition().clients[VICTIM].train)
    assert private  # FedPer's head: something to find
    for t in found[tm].tensors:
        assert not any(t.shape == p.shape and torch.equal(t, p) for p in private.values()), "a private tensor"
        assert not (t.shape == indices.shape and torch.equal(t, indices)), "the victim's partition"


@pytest.mark.parametrize("tm", ["test-tap", "eavesdropper"])
def test_not_the_seed_secure_aggregations_masks_derive_from(found: dict[str, Any], tm: str) -> None:
    assert SEED not in found[tm].ints
    assert found[tm].seed == WITHHELD_SEED != SEED


@pytest.mark.parametrize("tm", ["test-tap", "eavesdropper"])
def test_only_its_own_channels(found: dict[str, Any], tm: str) -> None:
    assert found[tm].other_clients == set()


def test_the_victims_size_and_class_counts_only_where_granted(found: dict[str, Any], run: Path) -> None:
    fed = Federation(run)
    labels = load_dataset("digits").y_train[torch.as_tensor(fed.partition().clients[VICTIM].train)]
    truth = torch.bincount(labels, minlength=fed.target().num_classes).tolist()
    tap, eve = found["test-tap"], found["eavesdropper"]
    assert tap.victim_size is None and tap.class_counts == [] and tap.granted == tap.granted_in_result == []
    assert eve.victim_size == sum(truth) and eve.class_counts == truth
    assert eve.granted == eve.granted_in_result == ["local_samples"]
