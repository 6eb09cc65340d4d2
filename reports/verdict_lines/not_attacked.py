"""What was not attacked, so that no verdict reads as more complete than it is.

`fedattack evaluate` keeps its plan beside the results (`plan.json`): the default audit lists
every attack it left out under each threat model, with the reason in one line (a workload the
attack does not take, a threat model that cannot run it, a budget it would exceed). Each becomes
one line here, under the threat model's own lines (an upper bound's folded with its lines). An
evaluation of named attacks says that only those ran; results with no plan beside them say that
what was left out is not recorded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fedattack.registry import ATTACKS, UserError
from fedattack.reports.claims import Claim
from fedattack.reports.collect import LoadedResult
from fedattack.reports.verdict_lines.base import VERDICT_LINES, Federation, LineSource, Part

PLAN = "plan.json"


def read_plan(folder: Path) -> dict[str, Any] | None:
    """The folder's plan as JSON (never executed), or None where there is none or it is unreadable."""
    try:
        data = json.loads((folder / PLAN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and str(data.get("schema", "")).startswith("fedattack.plan/") else None


def family(attack: str) -> str:
    """The default audit's family of an attack ('reconstruction'), or '' for one not registered here."""
    try:
        audit = ATTACKS.get(attack).audit
    except UserError:
        return ""
    return audit.family if audit is not None else ""


def left_out(plans: list[dict[str, Any]], ran: set[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(threat model, attack) -> why, over every default audit's plan, less what ran elsewhere."""
    out: dict[tuple[str, str], str] = {}
    for plan in plans:
        for item in plan.get("left_out") or []:
            if isinstance(item, dict):
                key = (str(item.get("threat_model", "")), str(item.get("attack", "")))
                if key not in ran:
                    out.setdefault(key, str(item.get("why") or "no reason recorded").rstrip("."))
    return out


def named(plans: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Threat model -> the attacks an evaluation of named attacks ran (no default audit)."""
    out: dict[str, set[str]] = {}
    for plan in plans:
        if not plan.get("default_audit"):
            for call in plan.get("calls") or []:
                if isinstance(call, dict):
                    out.setdefault(str(call.get("threat_model")), set()).add(str(call.get("attack")))
    return out


@VERDICT_LINES.register("not-attacked")
class NotAttacked(LineSource):
    """One line per attack the plan left out, and why; a line where the plan is not known."""

    order = 90

    def part(self, fed: Federation, claims: list[Claim]) -> Part:
        folders = sorted({r.path.parent for r in fed.results})
        plans = [p for p in (read_plan(f) for f in folders) if p is not None]
        results = fed.results
        bound = {r.result.threat_model for r in results if r.result.upper_bound}
        ran = {(r.result.threat_model, r.result.attack) for r in results if r.result.applicable}
        out = Part()
        for (tm, attack), why in left_out(plans, ran).items():
            kind = family(attack)
            said = f"**{tm}**, not attempted: {attack}{f' ({kind})' if kind else ''}: {why}."
            (out.bound if tm in bound else out.lines).append(said)
        for tm, attacks in named(plans).items():
            said = (f"**{tm}**: only the attacks named were run ({', '.join(sorted(attacks))}); the default audit "
                    "(`fedattack evaluate` without `--attack`) tries the strongest of every family that fits.")
            (out.bound if tm in bound else out.lines).append(said)
        missing = len(folders) - len(plans)
        if missing:
            out.lines.append(unrecorded(missing, results))
        return out


def unrecorded(folders: int, results: list[LoadedResult]) -> str:
    return (f"Not attempted: not recorded for {folders} of the {len({r.path.parent for r in results})} result "
            f"folder(s) (no {PLAN} beside them, which `fedattack evaluate` writes), so this verdict may leave "
            "out attacks without saying so.")
