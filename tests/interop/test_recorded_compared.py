"""A recorded FedAvg is compared with fedattack's own FedAvg (issue #39: the report said "no fedavg
results to compare with", since every recorded run had the partition `recorded`).

The recorder is told which fedattack partition the clients' indices are (`partition="iid"`); it
checks them against `make_partition` and records the run under that partition, so the report's
verdict pairs the two federations victim by victim, as docs/audit-your-federation.md promises.
Here the "user's loop" replays fedattack's own FedAvg message by message into a `Recorder`, so the
two federations are the same and the verdict must say they cannot be told apart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.rundir import Federation
from fedattack.federation.train import train_federation
from fedattack.interop import Recorder
from fedattack.target import Recipe
from tests.conftest import tiny_spec


def replay(run: Path, out: Path, partition: str | None) -> Path:
    fed = Federation(run)
    spec = fed.spec
    clients = [c.train for c in fed.partition().clients]
    tests = [c.test for c in fed.partition().clients]
    with Recorder(out, model=spec.model, dataset=spec.dataset, clients=clients, test_clients=tests,
                  epochs=spec.recipe.epochs, batch_size=spec.recipe.batch_size, lr=spec.recipe.lr, seed=spec.seed,
                  partition=partition) as rec:
        by_round: dict[int, list] = {}
        for m in fed.transcript().load():
            by_round.setdefault(m.round, []).append(m)
        for rnd in sorted(by_round):
            for m in sorted(by_round[rnd], key=lambda m: (m.client, m.kind != "downlink")):
                if m.kind == "downlink":
                    rec.record(rnd, m.client, downlink=m.payload)
                else:
                    rec.record(rnd, m.client, uplink=m.payload, samples=m.samples)
        rec.close(server=fed.server_state())
    return out


@pytest.mark.usefixtures("isolated_registries")
def test_a_recorded_fedavg_is_compared_with_fedattacks_own(tmp_path: Path) -> None:
    from fedattack.reports.collect import collect
    from fedattack.reports.verdict_section import lead_lines

    spec = tiny_spec(num_clients=4, fraction=1.0, rounds=2, partition="iid", normalize="none",
                     recipe=Recipe(epochs=1, batch_size=16, lr=0.1))
    own = train_federation(spec, tmp_path / "own", progress=False)
    recorded = replay(own, tmp_path / "recorded", partition="iid")
    assert Federation(recorded).manifest["partition"] == Federation(own).manifest["partition"]
    ev = EvaluationSpec(threat_models=("eavesdropper",), attacks=("membership",), victims=("all",),
                        max_queries=40, settings={"shadows": 1, "classifier": "logreg"})
    for run in (own, recorded):
        evaluate_run(run, ev, tmp_path / f"results-{run.name}", progress=False)
    lines = lead_lines(collect([tmp_path / "results-own", tmp_path / "results-recorded", own, recorded]).results)
    compared = [line for line in lines if "fedavg [recorded from pytorch]" in line and "from fedavg" in line]
    assert compared and "cannot be told apart from fedavg" in compared[0], lines  # one group, the two side by side
    assert all("no fedavg results to compare with" not in line for line in lines)
    # without the partition's name the run is on a partition of its own, as before: not compared
    alone = replay(own, tmp_path / "alone", partition=None)
    assert Federation(alone).spec.partition == "recorded"
    evaluate_run(alone, ev, tmp_path / "results-alone", progress=False)
    apart = lead_lines(collect([tmp_path / "results-own", tmp_path / "results-alone", own, alone]).results)
    assert not [line for line in apart if "recorded from pytorch" in line and "from fedavg" in line], apart
