"""Issue #49 item 2: what was not attacked is in the verdict, and a new kind of line is one new source.

- every attack the plan left out (`plan.json` beside the results) is a line under its threat model,
  with the plan's reason; an upper bound's go with its folded lines; an attack that ran in another
  evaluation of the same federation is not said to be missing;
- an evaluation of named attacks says that only those ran; results without a plan say that what
  was left out is not recorded;
- a `LineSource` registered from outside (as the malicious server's or the DP audit's lines will
  be) adds its level, its finding and its lines, and takes its claims from the passive lines,
  with no edit of theirs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedattack.reports.absolute_section import blocks
from fedattack.reports.claims import Claim, build_claims
from fedattack.reports.collect import LoadedResult, RunInfo
from fedattack.reports.risk import Risk
from fedattack.reports.verdict_lines.base import VERDICT_LINES, Federation, Level, LineSource, Part
from fedattack.results import AttackResult

DECL = {"auc": {"key": "auc", "label": "AUC", "primary": True, "leak": "higher", "bounds": [0, 1], "chance": 0.5}}
WHY = "the victim's 113 images are more than its first layer's 64 units"


def results(folder: Path, threat: str = "eavesdropper", attack: str = "rmia", upper: bool = False,
            auc: float = 0.5) -> list[LoadedResult]:
    run = RunInfo(method="fedavg", dataset="digits", partition="iid", seed=0, path=Path("/nowhere/run"))
    out = []
    for victim in range(5):
        r = AttackResult(attack=attack, threat_model=threat, run={}, victim=victim, metric_info=DECL,
                         metrics={"auc": auc + (victim - 2) / 100}, upper_bound=upper)
        out.append(LoadedResult(r, folder / f"{attack}-{threat}-{victim}.json", run))
    return out


def plan(folder: Path, left_out: list[dict[str, str]], default: bool = True, calls: list[dict] | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plan.json").write_text(json.dumps({"schema": "fedattack.plan/1", "default_audit": default,
                                                  "left_out": left_out, "calls": calls or []}))


def verdict(found: list[LoadedResult]) -> tuple[str, list[str], list[str]]:
    (block,) = blocks(build_claims(found), found)
    return block


def test_every_attack_the_plan_left_out_is_a_line_with_its_reason(tmp_path: Path) -> None:
    plan(tmp_path / "a", [{"threat_model": "eavesdropper", "attack": "update-inversion", "why": WHY},
                          {"threat_model": "oracle", "attack": "gradient-inversion", "why": "one gradient."},
                          {"threat_model": "eavesdropper", "attack": "lira-online", "why": "too slow"}])
    found = results(tmp_path / "a") + results(tmp_path / "a", "oracle", upper=True)
    found += results(tmp_path / "b", attack="lira-online")  # ran in another evaluation: not missing
    plan(tmp_path / "b", [], default=False, calls=[{"threat_model": "eavesdropper", "attack": "lira-online"}])
    _, lines, bound = verdict(found)
    assert f"**eavesdropper**, not attempted: update-inversion (reconstruction): {WHY}." in lines
    assert "**oracle**, not attempted: gradient-inversion (reconstruction): one gradient." in bound
    assert not any("not attempted: lira-online" in x for x in lines + bound)
    assert any(x.startswith("**eavesdropper**: only the attacks named were run (lira-online)") for x in lines)
    assert not any("not recorded" in x for x in lines)


def test_results_without_a_plan_say_what_was_left_out_is_not_known(tmp_path: Path) -> None:
    plan(tmp_path / "a", [])
    _, lines, _ = verdict(results(tmp_path / "a") + results(tmp_path / "b", attack="lira-offline"))
    assert lines[-1].startswith("Not attempted: not recorded for 1 of the 2 result folder(s)")


class Sniffer(LineSource):
    """A stand-in for a new kind of adversary: it states the `sniffer` threat model's claims."""

    order = 15

    def takes(self, claim: Claim) -> bool:
        return claim.threat == "sniffer"

    def part(self, fed: Federation, claims: list[Claim]) -> Part:
        level = Level(Risk("high", claims[0]), "a sniffer", "Act on: the sniffer.", named=True)
        return Part([level], [f"*Sniffer*: {len(claims)} claim(s) of {fed.name}"])


@pytest.mark.usefixtures("isolated_registries")
def test_a_new_kind_of_line_is_one_registered_source(tmp_path: Path) -> None:
    plan(tmp_path, [])
    VERDICT_LINES.add("sniffer", Sniffer)
    head, lines, _ = verdict(results(tmp_path) + results(tmp_path, "sniffer", auc=0.9))
    assert "risk **low** against passive adversaries; risk **high**, set by the sniffer's membership inference " \
           "(rmia) against a sniffer." in head
    assert "Act on: the sniffer." in head  # the severest level's finding
    assert lines[0].startswith("**eavesdropper**") and lines[1] == "*Sniffer*: 1 claim(s) of fedavg"
    assert not any(x.startswith("**sniffer**") for x in lines)  # taken from the passive lines
