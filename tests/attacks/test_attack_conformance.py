"""Every registered target under every built-in threat model: a valid result or a clear "not
applicable", never a crash. New targets are picked up from the registry automatically."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fedattack.attacks.evaluate import evaluate_run
from fedattack.registry import TARGETS
from fedattack.results import AttackResult
from tests.attacks.conftest import train_tiny
from tests.targets.conftest import target_spec

THREATS = ["eavesdropper", "server", "oracle"]
CHEAP = {"steps": 5, "shadows": 1, "classifier": "logreg"}
HEADLINE = {"membership": ("accuracy", "auc"), "inversion": ("psnr", "attack_accuracy")}




@pytest.mark.parametrize("method", TARGETS.names())
def test_every_threat_model_gives_a_result_or_says_why_not(method: str, tmp_path: Path) -> None:
    spec = target_spec(method)
    run = train_tiny(tmp_path / "run", **{k: getattr(spec, k) for k in ("method", "rounds", "fraction",
                                                                         "record", "recipe")})
    paths = evaluate_run(run, THREATS, "all", "random:1", "all", 100, 0, tmp_path / "out", eval_size=60,
                         max_queries=20, attack_options=CHEAP, progress=False)
    results = [AttackResult.load(p) for p in paths]
    assert {r.threat_model for r in results} == set(THREATS)
    for r in results:
        if not r.applicable:
            assert r.note, f"{method}/{r.threat_model}/{r.attack}: not applicable without a reason"
            continue
        assert r.reconstruction != "none"
        assert r.upper_bound == (r.threat_model == "oracle")
        for key in HEADLINE[r.attack]:
            assert math.isfinite(r.metrics[key]), f"{method}/{r.threat_model}/{r.attack}: {key}"
    oracle = [r for r in results if r.threat_model == "oracle"]
    assert oracle and all(r.applicable for r in oracle if r.attack == "membership")
