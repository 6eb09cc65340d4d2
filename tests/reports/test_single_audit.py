"""One FedAvg audit (membership inference and update inversion, an eavesdropper and the server):
the report's first screen answers "what does an attacker learn from my federation's wire?".

Issue #34: a one-federation report used to open with "only fedavg was audited" under every bold
headline. Now, before any table or figure, it states per threat model, in words, the share of a
victim's training images recovered and the membership TPR at the lowest FPR every victim's
non-members resolve, each with its interval and its n.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fedattack import rates
from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.evaluation import EvaluationSpec
from fedattack.registry import ATTACKS
from fedattack.reports.build import build_report
from fedattack.results import AttackResult
from tests.attacks.conftest import train_tiny

THREATS = ("eavesdropper", "server")
INTERVAL = r"\d+(\.\d+)?% \[\d+(\.\d+)?, \d+(\.\d+)?\]"


@pytest.fixture(scope="module")
def audit(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[AttackResult]]:
    root = tmp_path_factory.mktemp("single-audit")
    run = train_tiny(root / "run", num_clients=30, rounds=2, fraction=0.5)
    attacks = ("membership", "update-inversion")
    settings = {**ATTACKS.get("membership").fast_settings, **ATTACKS.get("update-inversion").fast_settings,
                "shadows": 1, "start": "first-layer"}
    spec = EvaluationSpec(threat_models=THREATS, attacks=attacks, victims=("random:5",), aux_size=140,
                          settings=settings, executor="batched")
    paths = evaluate_run(run, spec, root / "results", progress=False)
    build_report([root / "results", run], root / "report", figures=False)
    return root / "report", [AttackResult.load(p) for p in paths]


def first_screen(report: Path) -> str:
    """The report up to the first table or figure: the verdict's absolute lines."""
    md = (report / "report.md").read_text()
    return md[:min(i for i in (md.find("\n|"), md.find("!["), len(md)) if i >= 0)]


def test_the_first_screen_states_what_each_threat_model_learns(audit: tuple[Path, list[AttackResult]]) -> None:
    report, results = audit
    screen = first_screen(report)
    assert "only fedavg was audited" not in screen
    nonmembers = [r.extra["membership"]["nonmembers"] for r in results if r.attack == "membership" and r.applicable]
    alpha = rates.lowest_supported(nonmembers)
    assert alpha is not None
    for threat in THREATS:
        line = next(x for x in screen.splitlines() if x.startswith(f"  - **{threat}**"))
        share = re.search(rf"(recovers ({INTERVAL}) of the victim's training images above 20 dB|recovers no training "
                          rf"image reliably above 20 dB \(({INTERVAL})\)).*?\b5 victims\b", line)
        assert share, line
        tpr = re.search(rf"({INTERVAL}) of members at ≤{re.escape(rates.percent(alpha))} false positives.*?"
                        rf"\b5 victims\b", line)
        assert tpr, line


def test_the_html_opens_with_the_absolute_verdict(audit: tuple[Path, list[AttackResult]]) -> None:
    report, _ = audit
    html = (report / "report.html").read_text()
    verdict = html.index("of members at ≤")
    assert verdict < html.find("<table") and "risk <strong>" in html[:verdict]
    assert "Comparison between methods" not in html  # one federation: nothing to compare with


def test_a_result_written_before_any_of_this_still_reads(tmp_path: Path) -> None:
    """A result from before metric declarations, per-query scores, recorded defences and threat-model
    descriptions: its federation is read from what the file holds, taken as undefended (the report
    says so), and the verdict states what it can (AUC, no TPR at any FPR: no non-member count)."""
    old = {"schema": "fedattack.result/1", "attack": "membership", "threat_model": "eavesdropper",
           "run": {"method": "fedavg", "dataset": "digits", "partition": "iid", "seed": 0}, "reconstruction": "none",
           "metrics": {"auc": 0.61, "accuracy": 0.58}, "curves": {}, "baselines": {}, "applicable": True}
    for victim, auc in enumerate((0.61, 0.66, 0.58, 0.7, 0.64)):
        (tmp_path / "old").mkdir(exist_ok=True)
        (tmp_path / "old" / f"r{victim}.json").write_text(json.dumps({**old, "victim": victim,
                                                                        "metrics": {"auc": auc}}))
    md = build_report([tmp_path / "old"], tmp_path / "report", figures=False).read_text()
    screen = first_screen(tmp_path / "report")
    assert re.search(r"\*\*eavesdropper\*\*: Membership inference \(membership\): ranks members above non-members "
                     r"\(AUC 0\.\d+ \[0\.\d+, 0\.\d+\]\) \(5 victims\)", screen), screen
    assert "5 result(s) predate the recording of a run's defences" in md
