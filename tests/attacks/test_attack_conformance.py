"""Every registered attack x every registered threat model x every registered target: a valid
result whose declared headline metrics are finite, or a clear "not applicable", never a crash.

Everything is read from the registries when the test runs, so an attack, threat model or
target added as one file (or loaded as a plugin before this test runs) is covered without an
edit here. Each tiny federation trains once per session (`conformance_run`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.attacks.membership.family import MembershipAttack
from fedattack.attacks.threat_models.base import DEPLOYED_MODEL
from fedattack.evaluation import EvaluationSpec
from fedattack.registry import ATTACKS, TARGETS, THREAT_MODELS
from fedattack.results import AttackResult


def fast_settings(attacks: list[str]) -> dict[str, Any]:
    """The smoke-test settings each attack declares, merged (each goes to the attacks that have it)."""
    out: dict[str, Any] = {}
    for name in attacks:
        out.update(ATTACKS.get(name).fast_settings)
    return out


def check_every_pair(run: Path, out: Path, attacks: list[str] | None = None,
                     threats: list[str] | None = None) -> list[AttackResult]:
    """Evaluate `run` with the given (default: every) attack under the given (default: every)
    threat model and check each pair gave a result that is valid by the attack's own declaration."""
    attacks = attacks or ATTACKS.names()
    threats = threats or THREAT_MODELS.names()
    spec = EvaluationSpec(threat_models=threats, attacks=attacks, victims=("random:1",), reconstruction="all",
                          aux_size=100, eval_size=60, max_queries=20, settings=fast_settings(attacks))
    results = [AttackResult.load(p) for p in evaluate_run(run, spec, out, progress=False)]
    assert {(r.attack, r.threat_model) for r in results} == {(a, t) for a in attacks for t in threats}
    for r in results:
        where = f"{r.run['method']}/{r.threat_model}/{r.attack}/{r.reconstruction}"
        declared = ATTACKS.get(r.attack).metrics
        assert [m.key for m in declared] == list(r.metric_info), f"{where}: result lacks the declarations"
        assert r.upper_bound == THREAT_MODELS.get(r.threat_model).upper_bound
        assert "knows" in r.extra["threat_model"], f"{where}: result does not say what the adversary knows"
        if not r.applicable:
            assert r.note, f"{where}: not applicable without a reason"
            continue
        assert r.reconstruction != "none"
        undeclared = set(r.metrics) - set(r.metric_info)
        assert not undeclared, f"{where}: undeclared metrics {undeclared}"
        unmeasurable = set(r.extra.get("membership", {}).get("not_measurable", []))
        for m in declared:
            if m.headline and m.key not in unmeasurable:  # e.g. TPR at an FPR below 1/#non-members
                assert math.isfinite(r.metrics[m.key]), f"{where}: headline {m.key} is not finite"
    return results


@pytest.mark.parametrize("method", TARGETS.names())
def test_every_attack_and_threat_model_gives_a_result_or_says_why_not(
        method: str, conformance_run: Callable[[str], Path], tmp_path: Path) -> None:
    results = check_every_pair(conformance_run(method), tmp_path / "out")
    deployed = {name for name, cls in THREAT_MODELS.items() if cls.attacks == DEPLOYED_MODEL}
    membership = {name for name, cls in ATTACKS.items()
                  if issubclass(cls, MembershipAttack) and not cls.reads_every_client}
    # Attacking the deployed model needs no reconstruction: membership applies to every method
    # (except where the attack reads every client's decoded messages, which not every wire gives).
    assert all(r.applicable for r in results if r.threat_model in deployed and r.attack in membership)
