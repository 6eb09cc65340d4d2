"""The main job: its FedAvg federation learns (the issue: 60% before tuning), it has victims
enough for intervals, and the quickstart prints the verdict's lead lines."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from fedattack.commands.quickstart_cmd import verdict_lines
from fedattack.experiments import resolve
from fedattack.experiments.plan import plan
from fedattack.experiments.runner import result_dir
from fedattack.federation.train import train_federation
from tests.reports.fake_results import make


def test_quickstart_fedavg_reaches_90_percent(tmp_path: Path) -> None:
    jobs = plan(resolve("quick-digits"))
    fedavg = next(f.spec for f in jobs.federations if f.spec.method == "fedavg")
    assert fedavg.executor == "batched"  # what keeps the quickstart to a minute or two
    run = train_federation(dataclasses.replace(fedavg, record="none"), tmp_path / "run", progress=False)
    assert json.loads((run / "metrics.json").read_text())["final"]["mean"] >= 90.0


def test_quickstart_has_victims_for_intervals_and_a_caveat() -> None:
    exp = resolve("quick-digits")
    assert exp.caveat
    for ev in exp.evaluations:
        counts = [int(str(v).split(":")[1]) for v in ev.victims if str(v).startswith("random:")]
        assert sum(counts) + sum(isinstance(v, int) for v in ev.victims) >= 5


def test_verdict_lines_cover_every_group(tmp_path: Path) -> None:
    assert verdict_lines(tmp_path) == []  # nothing evaluated yet
    make(tmp_path / "fake")
    first = result_dir(tmp_path, plan(resolve("quick-digits")).evaluations[0])
    first.parent.mkdir(parents=True)
    (tmp_path / "fake" / "results").rename(first)
    (tmp_path / "results" / "stale-older-version").mkdir()  # not the experiment's: not read
    lines = verdict_lines(tmp_path)
    assert all("**" not in line for line in lines)
    heads = [line for line in lines if " on digits (multimodal): risk " in line]
    assert [h.split(" ")[0] for h in heads] == ["fedavg", "waffle-ibp"]  # the absolute verdict first
    assert lines.index(heads[0]) == 0 and lines[1].startswith("  eavesdropper: ")
    leads = [line for line in lines if line.startswith(("Membership on digits", "Inversion on digits"))]
    assert len(leads) == 4  # then the comparison: 2 attacks x 2 threat models
