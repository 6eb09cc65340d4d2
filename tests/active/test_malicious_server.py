"""The malicious server in the default audit (#44 item 1): from the run's recorded downlink, one
acting round per victim, the victim's reply simulated with the run's recipe on its own data, and
the server's reading of what it holds; a run that does not declare its recipe is refused in one
line naming the fact."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path
from typing import Any

import pytest
import torch

from fedattack.attacks.base import Attack, acting_mismatch
from fedattack.attacks.evaluation import truth as truth_mod
from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.attacks.threat_models.base import RunRecord
from fedattack.evaluation import EvaluationSpec
from fedattack.registry import ATTACKS, THREAT_MODELS
from fedattack.results import AttackResult
from fedattack.target import Recipe
from tests.active.conftest import train
from tests.attacks.test_default_audit import destroyed

ACTING = sorted(n for n, cls in ATTACKS.items() if cls.acting)
ACTS = sorted(n for n, cls in THREAT_MODELS.items() if cls.acts)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ordinary digits FedAvg run: no server acted while it trained."""
    return train(tmp_path_factory.mktemp("plain") / "run", rounds=2, fraction=0.5,
                 recipe=Recipe(epochs=2, batch_size=10, lr=0.1))


def results(run: Path, out: Path, **spec: object) -> list[AttackResult]:
    args: dict[str, object] = dict(victims=("random:2",), aux_size=200, eval_size=100)
    args.update(spec)
    return [AttackResult.load(p) for p in evaluate_run(run, EvaluationSpec(**args), out, progress=False)]  # type: ignore[arg-type]


def test_the_default_audit_adds_the_malicious_server_and_it_reads_above_chance(plain: Path, tmp_path: Path) -> None:
    found = results(plain, tmp_path / "out", settings={"shadows": 1, "references": 2, "steps": 20})
    acting = [r for r in found if r.threat_model in ACTS]
    assert acting and {r.attack for r in acting} <= set(ACTING)
    assert {r.threat_model for r in found} - set(ACTS) == {"eavesdropper"}  # beside the passive audit
    assert all(ATTACKS.get(r.attack).acting for r in acting)  # no passive attack under it, nor it elsewhere
    for r in acting:
        assert r.applicable, r.note
        assert r.run["active_adversary"] is None  # the run itself was honest: this is a what-if, labelled
        assert r.metrics["recovered_20"] > r.baselines["chance"]["recovered_20"] + 0.2
        assert r.extra["acting_round"]["reply"].startswith("simulated")
    # the plan priced as many chance draws as the readout scored (it priced 20 whatever the pool held)
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    for r in acting:
        call = next(c for c in plan["calls"] if c["attack"] == r.attack and c["victim"] == r.victim)
        priced = int(re.search(r"matched (\d+) times", call["detail"]).group(1))  # type: ignore[union-attr]
        scored = int(re.match(r"(\d+) draws", r.extra["chance"]).group(1))  # type: ignore[union-attr]
        assert priced == 1 + scored, (call["detail"], r.extra["chance"])


def test_a_threat_model_named_is_audited_alone() -> None:
    """`--threat-model eavesdropper` once added the malicious server too (the name given was the
    spec's default, which the default audit could not tell from none given)."""
    from fedattack.attacks.evaluation.evaluate import threat_models
    joins = sorted(n for n, cls in THREAT_MODELS.items() if cls.in_default_audit)
    assert joins  # else the default audit has no threat model of its own to add
    assert [t.name for t in threat_models(EvaluationSpec())] == ["eavesdropper", *joins]
    assert [t.name for t in threat_models(EvaluationSpec(threat_models=("eavesdropper",)))] == ["eavesdropper"]
    assert [t.name for t in threat_models(EvaluationSpec(attacks=("rmia",)))] == ["eavesdropper"]


@pytest.mark.parametrize("attack", ACTING)
def test_every_acting_attack_isolates_through_secure_aggregation(attack: str, tmp_path: Path) -> None:
    run = train(tmp_path / "run", defences=("secure-aggregation",), rounds=1, fraction=0.5,
                recipe=Recipe(epochs=1, batch_size=10, lr=0.1))
    (r,) = results(run, tmp_path / "out", threat_models=ACTS[:1], attacks=(attack,), victims=("random:1",))
    assert r.applicable, r.note
    assert r.extra["acting_round"]["isolated"]
    assert r.metrics["recovered_20"] > r.baselines["chance"]["recovered_20"] + 0.1


def test_a_passive_attack_under_the_acting_threat_model_says_why(plain: Path, tmp_path: Path) -> None:
    attack, tm = ATTACKS.get("readout")(), THREAT_MODELS.get(ACTS[0])()
    assert acting_mismatch(attack, tm) and acting_mismatch(ATTACKS.get(ACTING[0])(), THREAT_MODELS.get("server")())
    found = results(plain, tmp_path / "out", threat_models=(ACTS[0], "server"), attacks=("readout", ACTING[0]),
                    victims=("random:1",))
    cells = {(r.threat_model, r.attack): r for r in found}
    assert len(cells) == 4
    assert not cells[(ACTS[0], "readout")].applicable and "acts" in cells[(ACTS[0], "readout")].note
    assert not cells[("server", ACTING[0])].applicable and "reads the wire" in cells[("server", ACTING[0])].note
    assert cells[(ACTS[0], ACTING[0])].applicable


def test_an_undeclared_recipe_is_named(plain: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stub = types.SimpleNamespace(manifest={"spec": {"recipe": {"epochs": 1}}})
    assert RunRecord(stub).undeclared_recipe() == "batch_size, lr"  # type: ignore[arg-type]
    assert RunRecord(types.SimpleNamespace(manifest={"spec": {}})).undeclared_recipe() == "epochs, batch_size, lr"  # type: ignore[arg-type]
    monkeypatch.setattr(RunRecord, "undeclared_recipe", lambda self: "lr")
    (r,) = results(plain, tmp_path / "out", threat_models=ACTS[:1], attacks=ACTING[:1], victims=("random:1",))
    assert not r.applicable and "local recipe's lr" in r.note and "\n" not in r.note


@pytest.mark.parametrize("name", ACTING)
def test_the_design_never_sees_the_truth(name: str, plain: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Its guesses (what the server sends) byte for byte the same when every piece of ground truth
    is destroyed; only the simulated reply, on the scorer's side, reads the victim's data."""
    seen: list[bytes] = []
    original = ATTACKS.get(name).run_many

    def recording(self: Attack, advs: list[Any], gens: list[torch.Generator]) -> list[Any]:
        out = original(self, advs, gens)
        seen.append(b"".join(t.numpy().tobytes() for g in out for p in g.round.sent.payloads.values()
                             for t in p.values()))
        return out

    monkeypatch.setattr(ATTACKS.get(name), "run_many", recording)
    spec = dict(threat_models=ACTS[:1], attacks=(name,), victims=("random:1",))
    first = results(plain, tmp_path / "true", **spec)
    monkeypatch.setattr(truth_mod, "build", destroyed(truth_mod.build))
    second = results(plain, tmp_path / "destroyed", **spec)
    assert len(seen) == 2 and seen[0] and seen[0] == seen[1]
    assert first[0].metrics["recovered_20"] > second[0].metrics["recovered_20"]  # the noise is not what it read
