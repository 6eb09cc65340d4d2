"""A defended run and its undefended twin: two rows, and the defence's effect with its interval.

Issue #34: results did not record their run's defences, so a report averaged a DP-FedAvg run and
a plain FedAvg run of the same method into one row, and no report could say what the defence
did. Now each result records `run["defences"]` (from the manifest), the report keeps the two
federations apart, and the verdict compares them, paired by victim.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.cli import cli
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.rundir import Federation
from fedattack.registry import ATTACKS
from fedattack.reports.build import build_report
from fedattack.reports.collect import collect
from fedattack.results import AttackResult

TINY = ["--dataset", "digits", "--clients", "6", "--fraction", "1", "--epochs", "1", "--rounds", "2",
        "--batch-size", "16", "--lr", "0.1", "--quiet", "--record", "all"]
DP = "dp-fedavg:noise_multiplier=0.01"


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("dp_accounting")
    root = tmp_path_factory.mktemp("twins")
    spec = EvaluationSpec(threat_models=("eavesdropper",), attacks=("membership",), victims=("all",), aux_size=140,
                          settings={**ATTACKS.get("membership").fast_settings, "shadows": 1}, executor="batched")
    for name, extra in (("plain", []), ("dp", ["--defence", DP])):
        result = CliRunner().invoke(cli, ["train", *TINY, *extra, "--out", str(root / "runs" / name)])
        assert result.exit_code == 0, result.output
        evaluate_run(root / "runs" / name, spec, root / "results" / name, progress=False)
    return root


def test_each_result_records_its_runs_defences(twins: Path) -> None:
    (entry,) = Federation(twins / "runs" / "dp").manifest["defences"]
    dp = [AttackResult.load(p) for p in (twins / "results" / "dp").glob("membership-*.json")]
    plain = [AttackResult.load(p) for p in (twins / "results" / "plain").glob("membership-*.json")]
    assert dp and all(r.run["defences"] == [entry] for r in dp)
    assert plain and all(r.run["defences"] == [] for r in plain)


def test_the_report_keeps_them_apart_and_states_the_effect(twins: Path, tmp_path: Path) -> None:
    results = collect([twins / "results"]).results
    assert {r.run.label for r in results} == {"fedavg", "fedavg + dp-fedavg(noise_multiplier=0.01)"}
    md = build_report([twins / "results", twins / "runs"], tmp_path / "report", figures=False).read_text()
    table = md[md.index("### membership\n"):]
    rows = [line for line in table.splitlines()[:8] if line.startswith("| digits |")]
    assert [row.split(" | ")[1] for row in rows] == ["fedavg", "fedavg + dp-fedavg(noise_multiplier=0.01)"]
    effect = md[md.index("### What the defences change"):md.index("## Comparison between methods")]
    assert "**dp-fedavg(noise_multiplier=0.01)** on fedavg" in effect
    assert re.search(r"(lowers|raises|does not detectably change) the membership AUC from [\d.]+ \[[\d.]+, [\d.]+\] "
                     r"\(6 victims\) to [\d.]+ \[[\d.]+, [\d.]+\] \(6 victims\); difference [+-][\d.]+ "
                     r"\[[+-][\d.]+, [+-][\d.]+\] \(6 victims, paired\), at a cost of [+-][\d.]+ pp of mean local "
                     r"test accuracy", effect), effect
    assert "dp-fedavg claims epsilon" in effect
