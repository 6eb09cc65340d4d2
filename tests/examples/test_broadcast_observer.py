"""Issue #42 (4): a threat model that attacks the broadcast (global) model is ONE file of about 20
lines (`broadcast_observer.py`) and works: the built-in `broadcast` strategy serves it, the
strategies that rebuild a client's model stay out of it (and `broadcast` out of theirs), and an
attack that compares the victim with other clients' uplinks is not planned for it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.attacks.hidden_parts.base import BROADCAST_MODEL, CLIENT_MODEL, resolve
from fedattack.attacks.planning.case import observe
from fedattack.attacks.view import Knowledge
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.rundir import Federation
from fedattack.registry import TARGETS, THREAT_MODELS
from fedattack.results import AttackResult
from tests.attacks.test_attack_conformance import check_every_pair
from tests.examples.one_file import HERE, load_example

NAME = "broadcast-observer"
CHEAP = {"shadows": 1, "classifier": "logreg", "references": 2, "population": 30}


@pytest.fixture(autouse=True)
def _loaded(isolated_registries: None) -> None:
    load_example("broadcast_observer.py", THREAT_MODELS, NAME, "BroadcastObserver")


def test_it_is_one_short_file() -> None:
    assert len((HERE / "broadcast_observer.py").read_text().splitlines()) <= 20


def test_it_attacks_the_latest_broadcast(fedavg_run: Path, tmp_path: Path) -> None:
    fed = Federation(fedavg_run)
    downlinks = [m for m in fed.transcript().load() if m.kind == "downlink"]
    last = max(m.round for m in downlinks)
    spec = EvaluationSpec(threat_models=NAME, attacks=("membership", "rmia"), victims=(1, 4), aux_size=120,
                          eval_size=0, max_queries=30, settings=CHEAP)
    results = [AttackResult.load(p) for p in evaluate_run(fedavg_run, spec, tmp_path / "out", progress=False)]
    assert {(r.attack, r.victim) for r in results} == {(a, v) for a in ("membership", "rmia") for v in (1, 4)}
    for r in results:
        assert r.applicable and r.reconstruction == "broadcast", r.note
        assert r.extra["observation"] == {"round": last, "parts": ["down"]}
        assert r.extra["threat_model"]["attacks"] == BROADCAST_MODEL
        assert 0.0 <= r.metrics["auc"] <= 1.0
    # the model attacked is the broadcast itself: the same for every victim of the round
    target = fed.target()
    down = next(m.payload for m in downlinks if m.round == last)
    (strategy,) = resolve("auto", target, frozenset({"down"}), BROADCAST_MODEL)
    tm = THREAT_MODELS.get(NAME)()
    nothing = Samples(torch.zeros(0, 1, 8, 8), torch.zeros(0, dtype=torch.long))
    knowledge = Knowledge(aux=nothing, queries=nothing, victim_size=None, victim_class_counts=[])
    rebuilt = strategy.reconstruct(target, observe(tm.view(fed, 4, method=target), tm), knowledge, torch.Generator())
    assert all(torch.equal(rebuilt.params[n], down[n]) for n in target.param_names)


def test_strategies_stay_out_of_the_models_they_do_not_serve(fedavg_run: Path) -> None:
    target = Federation(fedavg_run).target()
    everything = frozenset({"down", "up"})
    assert [s.name for s in resolve("all", target, everything, BROADCAST_MODEL)] == ["broadcast"]
    assert "broadcast" not in {s.name for s in resolve("all", target, everything, CLIENT_MODEL)}


def test_the_default_audit_plans_nothing_that_needs_uplinks(fedavg_run: Path, tmp_path: Path) -> None:
    spec = EvaluationSpec(threat_models=NAME, victims=(4,), aux_size=100, eval_size=60, max_queries=20,
                          settings={"references": 2, "population": 30, "shadows": 1, "steps": 5})
    written = evaluate_run(fedavg_run, spec, tmp_path / "audit", progress=False)
    attacks = {AttackResult.load(p).attack for p in written}
    assert "rmia" in attacks and not attacks & {"fedmia", "fedmia-rmia"}
    assert all(c["attack"] not in ("fedmia", "fedmia-rmia")
               for c in json.loads((tmp_path / "audit" / "plan.json").read_text())["calls"])


@pytest.mark.parametrize("method", TARGETS.names())
def test_every_target_and_attack(method: str, conformance_run: Callable[[str], Path], tmp_path: Path) -> None:
    results = check_every_pair(conformance_run(method), tmp_path, threats=[NAME])
    assert {r.threat_model for r in results} == {NAME}
