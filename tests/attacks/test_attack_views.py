"""Threat models: who sees what, the oracle's upper bound, and a user's plugin threat model."""

from __future__ import annotations

from pathlib import Path

import torch

from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.rundir import Federation
from fedattack.registry import THREAT_MODELS, load_plugin_file
from fedattack.results import AttackResult


def test_builtin_threat_models_register_themselves() -> None:
    assert {"eavesdropper", "server", "oracle"} <= set(THREAT_MODELS.names())


def test_eavesdropper_sees_only_the_victims_channel(fedavg_run: Path) -> None:
    fed = Federation(fedavg_run)
    victim = fed.transcript().clients()[0]
    entries = THREAT_MODELS.get("eavesdropper")().view(fed, victim).entries()
    assert entries and {e["kind"] for e in entries} == {"downlink", "uplink"}
    assert all(victim in (e["sender"], e["receiver"]) for e in entries)


def test_server_sees_every_uplink(fedavg_run: Path) -> None:
    fed = Federation(fedavg_run)
    view = THREAT_MODELS.get("server")().view(fed, 0)
    senders = {e["sender"] for e in view.entries() if e["kind"] == "uplink"}
    assert senders == {e["sender"] for e in fed.transcript().index if e["kind"] == "uplink"}
    assert len(senders) > 1


def test_oracle_holds_the_deployed_model_and_is_an_upper_bound(fedavg_run: Path) -> None:
    fed = Federation(fedavg_run)
    view = THREAT_MODELS.get("oracle")().view(fed, 2)
    expected = fed.target().deployed(fed.server_state(), fed.private_state(2))
    assert view.upper_bound and view.deployed is not None
    assert all(torch.equal(view.deployed[n], expected[n]) for n in expected)
    assert THREAT_MODELS.get("eavesdropper")().view(fed, 2).deployed is None


PLUGIN = '''
from fedattack.attacks.threat_models.base import ThreatModel
from fedattack.attacks.view import Channel

class UplinkSniffer(ThreatModel):
    """Test plugin: only the victim's uplinks."""
    name = "test-uplink-sniffer"
    observes = "the victim's uplinks only"

    def channels(self, victim, facts):
        return [Channel(victim, "uplink")]
'''


def test_a_plugin_file_adds_a_threat_model(fedavg_run: Path, tmp_path: Path) -> None:
    plugin = tmp_path / "sniffer.py"
    plugin.write_text(PLUGIN)
    load_plugin_file(str(plugin))
    fed = Federation(fedavg_run)
    victim = fed.transcript().clients()[0]
    assert {e["kind"] for e in THREAT_MODELS.get("test-uplink-sniffer")().view(fed, victim).entries()} == {"uplink"}
    spec = EvaluationSpec(threat_models="test-uplink-sniffer", attacks="membership", victims=[victim],
                          aux_size=80, eval_size=0, settings={"shadows": 1, "classifier": "logreg"})
    paths = evaluate_run(fedavg_run, spec, tmp_path / "out", progress=False)
    result = AttackResult.load(paths[0])
    assert result.applicable and result.threat_model == "test-uplink-sniffer"
    assert result.extra["observation"]["parts"] == ["up"]  # no downlink: shadows start fresh
