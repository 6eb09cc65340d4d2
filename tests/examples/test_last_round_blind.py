"""Issue #12 (c): a threat model that sees only the last recorded round and knows no labels is
ONE new file (`last_round_blind.py`).

Loaded as a plugin, it limits the view to that round, hands the attacks no labels (membership
then uses the attacked model's predicted labels and says so), every result records what it
observes and knows, and the registry-iterating conformance check covers it on every target.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.attacks.membership.family import PREDICTED
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.rundir import Federation
from fedattack.registry import TARGETS, THREAT_MODELS
from fedattack.results import AttackResult
from tests.attacks.test_attack_conformance import check_every_pair
from tests.examples.one_file import load_example

NAME = "last-round-blind"


@pytest.fixture(autouse=True)
def _loaded(isolated_registries: None) -> None:
    load_example("last_round_blind.py", THREAT_MODELS, NAME, "LastRoundBlind")


def test_it_sees_the_last_round_only_and_no_labels(fedavg_run: Path, tmp_path: Path) -> None:
    index = Federation(fedavg_run).transcript().index
    last = max(e["round"] for e in index)
    victim = next(e["sender"] for e in index if e["round"] == last and e["kind"] == "uplink")
    spec = EvaluationSpec(threat_models=NAME, attacks="membership", victims=[victim], aux_size=100,
                          eval_size=0, settings={"shadows": 1, "classifier": "logreg"})
    result = AttackResult.load(evaluate_run(fedavg_run, spec, tmp_path, progress=False)[0])
    assert result.applicable and result.extra["observation"] == {"round": last, "parts": ["down", "up"]}
    assert result.extra["knowledge"]["labels_known"] is False
    assert result.extra["threat_model"]["knows"]["labels"] is False
    assert {c["rounds"][0] for c in result.extra["threat_model"]["channels"]} == {last}
    assert result.extra["membership"]["labels"] == PREDICTED


def test_an_earlier_client_is_out_of_its_sight(fedavg_run: Path, tmp_path: Path) -> None:
    index = Federation(fedavg_run).transcript().index
    last = max(e["round"] for e in index)
    in_last = {e["sender"] for e in index if e["round"] == last and e["kind"] == "uplink"}
    earlier = next(e["sender"] for e in index if e["kind"] == "uplink" and e["sender"] not in in_last)
    spec = EvaluationSpec(threat_models=NAME, attacks="membership", victims=[earlier], aux_size=100,
                          eval_size=0)
    result = AttackResult.load(evaluate_run(fedavg_run, spec, tmp_path, progress=False)[0])
    assert not result.applicable and "observes nothing" in result.note


@pytest.mark.parametrize("method", TARGETS.names())
def test_every_target_and_attack(method: str, conformance_run: Callable[[str], Path], tmp_path: Path) -> None:
    results = check_every_pair(conformance_run(method), tmp_path, threats=[NAME])
    assert {r.threat_model for r in results} == {NAME}
