"""Whether each run's differential-privacy claim held up under audit, in words.

A run claims DP when one of its defences states an epsilon (the manifest's `accounting`). Its
audits (`fedattack audit RUN ...`, found by `reports/audits.py`) each become one line: the claim,
the audited lower bound with its confidence, and how many runs and canaries it took, with the
word a user acts on: **consistent** (the bound does not exceed the claim), **refuted** (it does:
the implementation leaks more than it says), or **not differentially private** (no defence
states an epsilon, e.g. a noise multiplier of 0). A run that claims DP and has no audit says so,
with the command that audits it; a run that neither claims DP nor was audited gets no line, so
a report about an undefended federation says nothing about DP.

Which number is the audited epsilon: the Gaussian-DP bound for a white-box run (Mahloujifar et
al.; Steinke et al.'s epsilon-delta bound beside it), the Gaussian-DP bound of a multi-run audit
(Clopper-Pearson at one held-out threshold, `fedattack/audit/heldout.py`; its assumption-free
epsilon-delta bound and its Gaussian estimate beside it, the estimate never the verdict's
reason), and the
larger of the two views for the random-direction audit (as `fedattack audit` prints it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedattack.reports.audits import AuditFile
from fedattack.reports.claims import Claim
from fedattack.reports.collect import RunInfo
from fedattack.reports.verdict_lines.base import VERDICT_LINES, Federation, LineSource, Part


@dataclass(frozen=True)
class Audited:
    """What one audit found: the bound, how it was had, and what stands beside it."""

    epsilon: float
    confidence: float
    how: str           # "one run, 1,024 canaries (white-box)"
    bound: str         # "Gaussian DP"
    beside: str = ""   # "epsilon-delta bound 0.83"
    estimate_low: float | None = None


def num(x: float) -> str:
    return "unbounded" if math.isinf(x) or x >= 40 else f"{x:.3g}"


def audited(data: dict[str, Any]) -> Audited:
    """The audit's bound, read from whichever of the audit command's three shapes the file has."""
    if "bounds" in data:  # white-box, one run
        g, st = data["bounds"]["gdp"], data["bounds"]["steinke"]
        return Audited(float(g["epsilon"]), float(g["confidence"]), f"one run, {g['canaries']:,} canaries (white-box)",
                       "Gaussian DP", f"epsilon-delta bound {num(float(st['epsilon']))}")
    if "runs" in data:  # many runs, one canary each
        b, e = data["bound"], data["estimate"]
        guess = "" if e.get("epsilon") is None else \
            f"; Gaussian estimate {num(e['epsilon'])} [{num(e['epsilon_low'])}, {num(e['epsilon_high'])}]"
        return Audited(float(b.get("epsilon_of_mu", b["epsilon"])), float(data["confidence"]),
                       f"{data['runs']:,} runs of one canary each (white-box)", "Gaussian DP, Clopper-Pearson",
                       f"epsilon-delta bound {num(float(b['epsilon']))}{guess}",
                       None if e.get("epsilon_low") is None else float(e["epsilon_low"]))
    view, best = max(data["views"].items(), key=lambda kv: float(kv[1]["epsilon"]))
    level = data.get("audit", {}).get("level", "client")
    return Audited(float(best["epsilon"]), float(data["audit"]["confidence"]),
                   f"one run, {int(best['canaries']):,} {level}-level canaries", f"epsilon-delta, {view} view")


def stated(run: RunInfo) -> dict[str, Any] | None:
    """The first defence of the run that does accounting: its name and accounting."""
    for d in run.defences:
        acc = d.get("accounting")
        if isinstance(acc, dict):
            return {"defence": d.get("name"), **acc}
    return None


def audit_line(audit: AuditFile, run: RunInfo) -> str:
    """One audit in words, beside the claim of the run it audited."""
    data, found = audit.data, audited(audit.data)
    claim = data["claimed"].get("epsilon")
    said = (f"audited epsilon {num(found.epsilon)} ({found.confidence:.0%} confidence, {found.bound}"
            f"{'; ' + found.beside if found.beside else ''})")
    tail = f"{found.how}{planted(data, run)} (`{audit.path.name}`)"
    if claim is None:
        return f"**Not differentially private**: no defence states an epsilon; {said}, {tail}."
    claim = float(claim)
    against = f"against claimed {num(claim)} ({data['claimed'].get('defence')}, delta {data['claimed'].get('delta'):g})"
    if found.epsilon > claim:
        return f"**DP claim refuted**: {said} {against}, {tail}: the implementation leaks more than it claims."
    doubt = "" if found.estimate_low is None or found.estimate_low <= claim else \
        " The Gaussian estimate's interval lies above the claim (an estimate that assumes Gaussian scores, " \
        "not a bound)."
    return f"**DP claim consistent**: {said} {against}, {tail}.{doubt}"


def planted(data: dict[str, Any], run: RunInfo) -> str:
    """Say when the audit was not of the run as trained: a zoo bug planted in place of its defence."""
    bug = data.get("planted")
    own = (stated(run) or {}).get("defence")
    return f", with the zoo bug `{bug}` planted in place of the run's {own or 'defence'} (not the run as trained)" \
        if bug else ""


def unaudited_line(run: RunInfo, claim: dict[str, Any]) -> str:
    where = run.path if run.path is not None else Path("RUN")
    if claim.get("epsilon") is None:
        why = claim.get("note") or "it states no epsilon"
        return f"**Not differentially private**: {claim['defence']} states no epsilon ({why})."
    return (f"**DP claim not audited**: {claim['defence']} claims epsilon {num(float(claim['epsilon']))} at delta "
            f"{claim.get('delta', 1e-5):g}; `fedattack audit {where} --white-box` tests it, and the next report states "
            "the result here.")


@VERDICT_LINES.register("dp-audit")
class DPAudit(LineSource):
    """One line per audit of each run, and one per run that claims DP and was not audited."""

    order = 60

    def part(self, fed: Federation, claims: list[Claim]) -> Part:
        runs = list({r.run.ident: r.run for r in fed.results}.values())
        out = Part()
        for run in runs:
            who = f"run `{run.path.name}`: " if len(runs) > 1 and run.path is not None else ""
            claim = stated(run)
            out.lines += [who + audit_line(a, run) for a in run.audits]
            if claim is not None and not run.audits:
                out.lines.append(who + unaudited_line(run, claim))
        return out
