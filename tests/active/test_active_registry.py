"""Every registered active threat model (read from the registry, so a new one is covered the moment
it exists) acts on a tiny digits federation: the wire records what it sent instead of the
broadcast, the manifest names it and the rounds it acted in, the federation trains on from the
honest model, and its readout gives a valid result that carries the adversary."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch

from fedattack.federation.active import ACTIVE
from fedattack.federation.rundir import Federation
from tests.active.conftest import readout, train


def isolating(name: str) -> bool:
    """The threat model only isolates (model inconsistency): it needs a secure sum to act on."""
    return ACTIVE.get(name).singles_out


@pytest.mark.parametrize("name", ACTIVE.names())
def test_every_active_threat_model_acts_records_and_reads(name: str, tmp_path: Path) -> None:
    secure = ("secure-aggregation",) if isolating(name) else ()
    run = train(tmp_path / "run", f"{name}:rounds=2", secure, rounds=3, fraction=0.3)
    fed = Federation(run)
    record = fed.manifest["active_adversary"]
    assert record["name"] == name and [a["round"] for a in record["acted"]] == [2]
    victim = record["acted"][0]["victim"]
    down = {m.receiver: m.payload for m in fed.transcript().load(kind="downlink", rounds={2})}[victim]
    honest = {m.receiver: m.payload for m in fed.transcript().load(kind="downlink", rounds={1})}
    first = next(iter(honest.values()))
    changed = set(down) != set(first) or any(not torch.equal(down[n], first[n]) for n in first)
    assert changed, f"{name} sent the victim the broadcast unchanged"
    assert len(fed.metrics()["rounds"]) == 3 and not fed.manifest["diverged"]
    result = readout(run, tmp_path / "out", (victim,))[0]
    assert result.applicable, result.note
    assert result.run["active_adversary"] == {"name": name, "settings": record["settings"]}
    assert all(math.isfinite(result.metrics[k]) for k in ("recovered_20", "recovered_40"))


@pytest.mark.parametrize("name", ACTIVE.names())
def test_under_secure_aggregation_every_active_threat_model_reads_more_than_the_honest_server(
        name: str, tmp_path: Path) -> None:
    """With its isolation where it has one (model inconsistency alone is nothing but isolation)."""
    isolates = "isolate" in {f.name for f in dataclasses.fields(ACTIVE.get(name).Settings)}
    active = f"{name}:rounds=1" + (",isolate=true" if isolates else "")
    secure = ("secure-aggregation",)
    acting = readout(train(tmp_path / "a", active, secure, rounds=1), tmp_path / "oa", (0,))[0]
    honest = readout(train(tmp_path / "h", None, secure, rounds=1), tmp_path / "oh", (0,))[0]
    assert acting.metrics["recovered_40"] > honest.metrics["recovered_40"], (acting.metrics, honest.metrics)


def test_waffles_server_designs_a_dictionary_that_leaks_whatever_the_selection(tmp_path: Path) -> None:
    """WAFFLe's selection stays on the client, but the server owns the dictionary: trap directions
    as its factors make every selected factor a trap (docs/active-server.md measures it)."""
    run = train(tmp_path / "w", "trap-weights:rounds=1", rounds=1, method="waffle-ibp",
                hyper={"recipe": "personal"})
    result = readout(run, tmp_path / "o", (0,))[0]
    assert result.applicable and result.metrics["recovered_40"] > 0.05, result.metrics


def test_an_adversary_that_cannot_serve_the_model_is_refused_before_training(tmp_path: Path) -> None:
    from fedattack.registry import UserError

    with pytest.raises(UserError, match="dense first layer"):
        train(tmp_path / "cnn", "trap-weights", model="lenet5")
    assert not (tmp_path / "cnn").exists()
