"""Issue #12 (b): a confidence-threshold membership attack is ONE new file (`confidence_attack.py`).

Loaded as a plugin, it is listed by `fedattack list --plugin FILE`, described in `--attack` help with its own
metric labels, reported under those labels, and checked against every target and threat model
by the registry-iterating conformance check.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.cli import cli
from fedattack.evaluation import EvaluationSpec
from fedattack.registry import ATTACKS, TARGETS
from fedattack.reports.build import build_report
from tests.attacks.test_attack_conformance import check_every_pair
from tests.examples.one_file import HERE, load_example

FILE = "confidence_attack.py"


@pytest.fixture(autouse=True)
def _loaded(isolated_registries: None) -> None:
    load_example(FILE, ATTACKS, "confidence", "Confidence")


def test_it_is_listed_and_its_metrics_are_in_the_attack_help() -> None:
    listed = CliRunner().invoke(cli, ["list", "attacks", "--plugin", str(HERE / FILE)])
    assert listed.exit_code == 0, listed.output
    assert "confidence" in listed.output and "most confident" in listed.output
    helped = CliRunner().invoke(cli, ["evaluate", "--plugin", str(HERE / FILE), "--help"])
    assert helped.exit_code == 0, helped.output
    assert "AUC by confidence" in " ".join(helped.output.split())


def test_reports_show_its_own_labels(fedavg_run: Path, tmp_path: Path) -> None:
    spec = EvaluationSpec(attacks="confidence", victims="random:2", aux_size=100, eval_size=0)
    paths = evaluate_run(fedavg_run, spec, tmp_path / "results", progress=False)
    build_report([tmp_path / "results"], tmp_path / "report", figures=False)
    text = (tmp_path / "report" / "report.md").read_text()
    assert "### confidence" in text and "AUC by confidence" in text and "loss-threshold" in text
    assert len(paths) == 2


@pytest.mark.parametrize("method", TARGETS.names())
def test_every_target_under_every_threat_model(method: str, conformance_run: Callable[[str], Path],
                                               tmp_path: Path) -> None:
    check_every_pair(conformance_run(method), tmp_path, attacks=["confidence"])
