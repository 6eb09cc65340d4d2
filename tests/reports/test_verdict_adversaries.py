"""Passive and active adversaries on separate lines (issues #34 and #38).

A federation in which the server acted (`AttackResult.run["active_adversary"]`) is audited
beside the honest one: under the same federation's bullet, the honest lines come first, the
active server's follow, marked and in words, each group with a risk level of its own, and in
the comparison the attacked federation is an entry of its own, never averaged with the honest one.
"""

from __future__ import annotations

from pathlib import Path

from fedattack.reports.absolute_section import blocks
from fedattack.reports.claims import build_claims
from fedattack.reports.collect import LoadedResult, RunInfo
from fedattack.reports.verdict import build_groups
from fedattack.results import AttackResult

DECL = {"auc": {"key": "auc", "label": "AUC", "primary": True, "leak": "higher", "bounds": [0, 1], "chance": 0.5}}
IMPRINT = {"name": "imprint", "settings": {"isolate": True}}


def results(adversary: dict | None, auc: float) -> list[LoadedResult]:  # type: ignore[type-arg]
    run = RunInfo(method="fedavg", dataset="digits", partition="iid", seed=0, adversary=adversary,
                  path=Path(f"/nowhere/{'active' if adversary else 'honest'}"))
    out = []
    for victim in range(6):
        r = AttackResult(attack="fedmia", threat_model="server", run={"active_adversary": adversary}, victim=victim,
                         metrics={"auc": auc + (victim - 2.5) / 100}, metric_info=DECL,
                         extra={"threat_model": {"observes": "every uplink of every client and round"}})
        out.append(LoadedResult(r, Path(f"/nowhere/{run.path}/{victim}.json"), run))
    return out


def test_honest_and_active_lines_are_apart_each_with_its_risk() -> None:
    found = results(None, 0.50) + results(IMPRINT, 0.90)
    ((head, lines, bound),) = blocks(build_claims(found), found)
    assert "risk **low** against passive adversaries" in head
    assert "risk **high**, set by the server's membership inference (fedmia) against an active server: " \
           "imprint(isolate=True)" in head
    assert "Act on: the server's membership inference (fedmia) ranks members above non-members (AUC 0.90" in head
    assert len(lines) == 3 and not bound
    assert lines[2].startswith("Not attempted: not recorded")  # no plan.json beside these results
    assert lines[0].startswith("**server** (sees every uplink")
    assert "learns nothing detectable about membership" in lines[0]
    assert lines[1].startswith("*Active server: imprint(isolate=True)*: **server**")
    assert "ranks members above non-members (AUC 0.90" in lines[1]


def test_the_comparison_keeps_the_attacked_federation_an_entry_of_its_own() -> None:
    (group,) = build_groups(results(None, 0.50) + results(IMPRINT, 0.90))
    assert sorted(e.name for e in group.entries) == ["fedavg", "fedavg, active server: imprint(isolate=True)"]
    assert all(e.stats["auc"].n == 6 for e in group.entries)
