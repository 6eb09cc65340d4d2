"""Recording policies keep exactly the rounds they promise."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedattack.federation.rundir import Federation
from fedattack.federation.train import train_federation
from fedattack.registry import UserError
from fedattack.wire import RecordingPolicy
from tests.conftest import tiny_spec


@pytest.mark.parametrize("spec, kept", [
    ("all", list(range(1, 7))), ("last:2", [5, 6]), ("every:4", [4, 6]), ("none", []),
])
def test_round_policies(spec: str, kept: list[int]) -> None:
    policy = RecordingPolicy(spec)
    assert [r for r in range(1, 7) if policy.keeps_round(r, 6)] == kept


def test_auto_switches_on_size() -> None:
    assert RecordingPolicy("auto").resolve(10).spec == "all"
    assert RecordingPolicy("auto", auto_limit_bytes=5).resolve(10).spec == "final-per-client"


def test_bad_policy_is_a_user_error() -> None:
    with pytest.raises(UserError, match="recording policy"):
        RecordingPolicy("sometimes").resolve(0)


def test_final_per_client_keeps_each_clients_last_round(tmp_path: Path) -> None:
    fed = Federation(train_federation(tiny_spec(rounds=5, record="final-per-client"), tmp_path / "r",
                                      progress=False))
    sampled = {r["round"]: r["sampled"] for r in fed.metrics()["rounds"]}
    last = {}
    for rnd, clients in sampled.items():
        for c in clients:
            last[c] = rnd
    transcript = fed.transcript().load()
    for c, rnd in last.items():
        mine = transcript.select(client=c)
        assert {m.round for m in mine} == {rnd}
        assert {m.kind for m in mine} == {"downlink", "uplink"}
