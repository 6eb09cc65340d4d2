"""Issue #38's test: through secure aggregation with 10 clients a round, a malicious server reads a
victim's digit verbatim (above 40 dB); an honest server reading the same securely aggregated
round recovers nothing above chance.

The malicious server is the imprint module (Fowl et al. 2022) with model inconsistency (Pasquini
et al. 2022): the victim gets the module, the nine others a model of zeros, and the victim's
update is solved out of the secure sum. The honest twin is the same federation (seed, clients,
round) with a server that follows the protocol and reads what it holds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fedattack.federation.rundir import Federation
from fedattack.results import AttackResult
from tests.active.conftest import readout, train

SECURE = ("secure-aggregation",)


@pytest.fixture(scope="module")
def malicious(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train(tmp_path_factory.mktemp("active") / "imprint", "imprint:isolate=true,rounds=1", SECURE, rounds=1)


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train(tmp_path_factory.mktemp("active") / "honest", None, SECURE, rounds=1)


def victim_of(run: Path) -> int:
    return int(Federation(run).manifest["active_adversary"]["acted"][0]["victim"])


def test_the_wire_records_what_the_server_sent_each_client(malicious: Path) -> None:
    fed = Federation(malicious)
    victim = victim_of(malicious)
    downs = {m.receiver: m.payload for m in fed.transcript().load(kind="downlink", rounds={1})}
    assert len(downs) == 10 and fed.manifest["spec"]["fraction"] == 1.0
    assert bool(downs[victim]["imprint.weight"].any())
    assert all(not bool(p["imprint.weight"].any()) for k, p in downs.items() if k != victim)
    ups = fed.transcript().load(kind="uplink", rounds={1})
    assert all(str(t.dtype) == "torch.int64" for m in ups for t in m.payload.values())  # masked on the wire
    assert fed.manifest["active_adversary"]["name"] == "imprint"


def test_a_malicious_server_reads_a_victims_digit_verbatim_through_secure_aggregation(
        malicious: Path, tmp_path: Path) -> None:
    victim = victim_of(malicious)
    result = readout(malicious, tmp_path, (victim,))[0]
    assert result.applicable, result.note
    assert result.run["active_adversary"]["name"] == "imprint"
    assert result.run["active_adversary"]["settings"]["isolate"] is True
    assert max(result.extra["reconstruction_match"]["psnr"]) > 40.0
    assert result.metrics["recovered_40"] >= 0.3, result.metrics  # a third of its images, verbatim
    assert result.baselines["chance"]["recovered_20"] < 0.05


def test_an_honest_server_reading_the_same_secure_round_recovers_nothing_above_chance(
        honest: Path, tmp_path: Path) -> None:
    """Over all ten clients (one image is 0.9% of a client), the honest server's best closed-form
    reading of the secure sum matches no more of their images than as many public images do."""
    results = readout(honest, tmp_path, ("all",))
    assert len(results) == 10 and all(r.applicable for r in results), [r.note for r in results]
    assert all(r.run["active_adversary"] is None for r in results)
    assert all("secure aggregate" in r.extra["reconstruction_match"]["reading"] for r in results)
    read = sum(r.metrics["recovered_20"] for r in results) / len(results)
    chance = sum(r.baselines["chance"]["recovered_20"] for r in results) / len(results)
    assert read <= chance + 0.005, (read, chance)
    assert all(r.metrics["recovered_40"] == 0.0 for r in results)


def test_without_isolation_the_secure_sum_mixes_every_clients_images(tmp_path: Path) -> None:
    run = train(tmp_path / "mixed", "imprint:rounds=1", SECURE)
    results = readout(run, tmp_path / "out", ("all",))
    assert all(r.applicable for r in results)  # every sampled client took the module
    isolated = readout(train(tmp_path / "alone", "imprint:rounds=1,isolate=true", SECURE), tmp_path / "o2", (0,))
    mixed = next(r for r in results if r.victim == 0)
    assert mixed.metrics["recovered_40"] < isolated[0].metrics["recovered_40"]


def test_results_of_an_acting_server_say_so_in_every_attack(malicious: Path, tmp_path: Path) -> None:
    results = readout(malicious, tmp_path, (victim_of(malicious),), threat_model="eavesdropper")
    assert all(isinstance(r, AttackResult) and r.run["active_adversary"]["name"] == "imprint" for r in results)
    assert not results[0].applicable and "sum" in results[0].note  # one masked uplink says nothing
