"""Issue #44 item 2: on an ordinary digits FedAvg run (its server honest), the default audit's
malicious-server results become a line of their own on the verdict's first screen, apart from the
passive lines, saying in words what one acting round would recover, with its interval and n, and
which registered client checks would refuse the round (issue #44 item 4)."""

from __future__ import annotations

import re
from pathlib import Path

from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.evaluation import EvaluationSpec
from fedattack.reports.collect import collect
from fedattack.reports.verdict_section import lead_lines
from fedattack.target import Recipe
from tests.active.conftest import train

FAST = {"shadows": 1, "references": 2, "steps": 20, "classifier": "logreg"}


def test_the_verdict_says_what_one_acting_round_would_recover(tmp_path: Path) -> None:
    run = train(tmp_path / "run", rounds=2, fraction=0.5, recipe=Recipe(epochs=2, batch_size=10, lr=0.1))
    spec = EvaluationSpec(victims=("random:3",), aux_size=200, eval_size=100, settings=FAST)
    evaluate_run(run, spec, tmp_path / "results", progress=False)
    lines = lead_lines(collect([tmp_path / "results"]).results)
    text = "\n".join(lines)
    acted = [ln for ln in lines if "Had the server acted" in ln]
    assert len(acted) == 1, text
    said = re.search(r"; acting-imprint\): a server that acts for one round would recover ([\d.]+)% \[([\d.]+), "
                     r"([\d.]+)\] of this client's training images above 20 dB .*; chance [\d.]+%; 3 victims\)",
                     acted[0])
    assert said, acted[0]
    mean, low, high = map(float, said.groups())
    assert low <= mean <= high and low > 20  # above chance (a few %) on every resample
    # every registered client check, on the imprint the round sent (broadcast to every sampled client)
    assert "downlink-check in 3 of 3 (100% [29, 100], exact 95%)" in acted[0], acted[0]  # not in the schema
    assert "layer-check in 3 of 3 (100% [29, 100], exact 95%)" in acted[0], acted[0]  # parallel rows
    assert "consistency-check in 0 of 3 (0% [0, 71], exact 95%) (it compares" in acted[0], acted[0]  # all the same
    assert "against a server that acts for one round" in text  # its own level in the head
    passive = [ln for ln in lines if ln.strip().startswith("**eavesdropper**") or "eavesdropper" in ln[:40]]
    assert passive and not any("Had the server acted" in ln for ln in passive)
