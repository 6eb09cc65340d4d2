"""The evaluation's plan: every call costed before any runs, fitted to the budget, printed, and
filled in afterwards with what each call measured (written beside the results as `plan.json`).

A call is one attack on one victim under one threat model, over every reconstruction strategy
tried (`strategies`) and every model an upper bound holds (`Workload.models`): what is trained
once per victim (reference models, `Cost.once`) is counted once. The room a call may fill is
the budget less what the process holds when the plan is made (dataset, model, pools) and a
margin for what the run adds beside the attacks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedattack.atomic import write_json
from fedattack.attacks.base import Attack
from fedattack.attacks.planning.case import Case
from fedattack.attacks.planning.cost import Budget, Cost, Decision, Workload, largest_chunk
from fedattack.attacks.threat_models.base import ThreatModel
from fedattack.attacks.view import Observation, View
from fedattack.registry import ATTACKS
from fedattack.resources import human_bytes, human_seconds
from fedattack.results import AttackResult
from fedattack.target import Target

PLAN_SCHEMA = "fedattack.plan/1"
MARGIN = 0.05  # of the budget, kept free for what the run holds beside the attacks (results, caches)
BUSY = 1.15  # a probe this much slower on the wall clock than on free cores: the plan says what to expect


@dataclass
class Call:
    """One planned call and, once it ran, what it measured."""

    attack: Attack
    tm: ThreatModel
    victim: int
    work: Workload
    strategies: int
    decision: Decision
    measured_seconds: float | None = None
    measured_cpu: float | None = None
    measured_peak: int | None = None

    def record(self, result: AttackResult, seconds: float, cpu: float, peak: int, budget: Budget) -> None:
        """What one of the call's results measured (wall and CPU seconds, the process's peak
        resident memory), kept in the call and in the result."""
        self.measured_seconds = (self.measured_seconds or 0.0) + seconds
        self.measured_cpu = (self.measured_cpu or 0.0) + cpu
        self.measured_peak = max(self.measured_peak or 0, peak)
        cost = self.decision.cost
        result.extra["cost"] = {"planned_seconds": _finite(cost.seconds), "planned_peak_bytes": cost.peak_bytes,
                                "chunk": self.decision.chunk, "chunk_unit": self.attack.chunk_unit or None,
                                "measured_seconds": round(seconds, 3), "measured_cpu_seconds": round(cpu, 3),
                                "measured_peak_bytes": peak, "budget_bytes": budget.memory, "detail": cost.detail}

    def to_json(self, baseline: int) -> dict[str, Any]:
        cost = self.decision.cost
        out: dict[str, Any] = {"attack": self.attack.name, "threat_model": self.tm.name, "victim": self.victim,
                               "strategies": self.strategies, "samples": self.work.samples,
                               "rounds": self.work.rounds, "chunk": self.decision.chunk,
                               "chunk_unit": self.attack.chunk_unit or None, "detail": cost.detail,
                               "planned_seconds": _finite(cost.seconds),
                               "planned_peak_bytes": baseline + cost.peak_bytes}
        if self.decision.refused:
            out["refused"] = self.decision.refused
        if self.measured_seconds is not None:
            out["measured_seconds"] = round(self.measured_seconds, 3)
            out["measured_cpu_seconds"] = round(self.measured_cpu or 0.0, 3)
            out["measured_peak_bytes"] = self.measured_peak
        return out


def _finite(x: float) -> float | None:
    return None if not math.isfinite(x) else round(x, 3)


@dataclass
class Plan:
    """Every call of an evaluation, the budget and what the process held when planned."""

    budget: Budget
    baseline: int
    calls: list[Call] = field(default_factory=list)
    left_out: list[dict[str, str]] = field(default_factory=list)  # the default audit's choices
    default: bool = False
    cases: dict[tuple[str, int], Case] = field(default_factory=dict)  # (threat model, victim): what execution uses

    @property
    def room(self) -> int:
        """Bytes a call may add to the process."""
        return max(0, self.budget.memory - self.baseline - int(MARGIN * self.budget.memory))

    def running(self) -> list[Call]:
        return [c for c in self.calls if c.decision.runs]

    @property
    def total_seconds(self) -> float:
        return sum(c.decision.cost.seconds for c in self.running() if math.isfinite(c.decision.cost.seconds))

    @property
    def peak(self) -> int:
        return self.baseline + max((c.decision.cost.peak_bytes for c in self.running()), default=0)

    def lines(self) -> list[str]:
        """The plan as printed before anything runs: one line per (threat model, attack)."""
        victims = sorted({c.victim for c in self.calls})
        out = [f"plan: {len(victims)} victim(s), budget {self.budget.describe()}; "
               f"the process holds {human_bytes(self.baseline)} before the attacks"]
        groups: dict[tuple[str, str], list[Call]] = {}
        for c in self.calls:
            groups.setdefault((c.tm.name, c.attack.name), []).append(c)
        names = [*groups, *((i["threat_model"], i["attack"]) for i in self.left_out)]
        tw = max((len(tm) for tm, _ in names), default=0)
        aw = max((len(a) for _, a in names), default=0)
        for (tm, attack), calls in groups.items():
            runs = [c for c in calls if c.decision.runs]
            label = f"  {tm:<{tw}} {attack:<{aw}}"
            if not runs:
                out.append(f"{label} refused: {calls[0].decision.refused}")
                continue
            seconds = sum(c.decision.cost.seconds for c in runs)
            peak = self.baseline + max(c.decision.cost.peak_bytes for c in runs)
            chunked = [c.decision.chunk for c in runs if c.decision.chunk is not None]
            how = f", {min(chunked)} {calls[0].attack.chunk_unit} at a time" if chunked else ""
            shown = "cost not declared" if not math.isfinite(seconds) else f"~{human_seconds(seconds)}"
            refused = len(calls) - len(runs)
            more = f" ({refused} victim(s) refused: {next(c.decision.refused for c in calls if not c.decision.runs)})" \
                if refused else ""
            out.append(f"{label} {len(runs)} victim(s), {shown}, peak ~{human_bytes(peak)}{how}; "
                       f"{runs[0].decision.cost.detail}{more}")
        for item in self.left_out:
            out.append(f"  {item['threat_model']:<{tw}} {item['attack']:<{aw}} left out: {item['why']}")
        out.append(f"  total ~{human_seconds(self.total_seconds)}{self.speed()}, peak ~{human_bytes(self.peak)}")
        return out

    @property
    def probe(self) -> Any:
        return next((c.work.probe for c in self.calls), None)

    def speed(self) -> str:
        """What the total assumes: the threads it was measured with, and the machine's load then."""
        p = self.probe
        if p is None:
            return ""
        threads = f"{p.threads} torch thread{'s' if p.threads != 1 else ''}"
        load = "" if p.load is None else f", load {p.load:.1f} per core"
        if p.slowdown < BUSY:
            return f" with {threads} on free cores (as they were when planned{load})"
        return (f" with {threads} on free cores; this machine is busy (the probe ran {p.slowdown:.1f}x slower{load}): "
                f"expect ~{human_seconds(self.total_seconds * p.slowdown)}")

    def outcome(self) -> str:
        """After the evaluation: what the attacks took against what the plan said."""
        ran = [c for c in self.running() if c.measured_seconds is not None]
        planned = sum(c.decision.cost.seconds for c in ran if math.isfinite(c.decision.cost.seconds))
        took = sum(c.measured_seconds or 0.0 for c in ran)
        if not ran or planned <= 0:
            return ""
        p = self.probe
        busy = (f"; {took / (planned * p.slowdown):.2f}x what the load at planning time predicted"
                if p is not None and p.slowdown >= BUSY else "")
        return (f"measured: the attacks took {human_seconds(took)}, {took / planned:.2f}x the plan's "
                f"{human_seconds(planned)} on free cores{busy}")

    def to_json(self) -> dict[str, Any]:
        return {"schema": PLAN_SCHEMA, "budget": {"memory": self.budget.memory, "seconds": self.budget.seconds,
                                                  "source": self.budget.source},
                "baseline_bytes": self.baseline, "default_audit": self.default,
                "total_seconds": round(self.total_seconds, 3), "peak_bytes": self.peak,
                "probe": None if self.probe is None else {"threads": self.probe.threads,
                                                          "slowdown": round(self.probe.slowdown, 3),
                                                          "load_per_core": self.probe.load},
                "outcome": self.outcome(),
                "calls": [c.to_json(self.baseline) for c in self.calls], "left_out": self.left_out}

    def save(self, path: Path) -> Path:
        return write_json(path, self.to_json())


def call_cost(attack: Attack, work: Workload, strategies: int, chunk: int | None) -> Cost:
    """One call over `strategies` reconstruction strategies and `work.models` held models."""
    one = attack.cost(work, chunk)
    return one.times(max(1, strategies) * max(1, work.models))


def decide(attack: Attack, work: Workload, strategies: int, room: int) -> Decision:
    """Run unchunked if it fits `room`, else in the largest chunk that fits, else refuse."""
    full = call_cost(attack, work, strategies, None)
    if full.peak_bytes <= room:
        return Decision(full)
    if attack.chunk_unit:
        most = attack.chunks(work)
        chunk = largest_chunk(lambda c: call_cost(attack, work, strategies, c).peak_bytes <= room, most)
        if chunk is not None and chunk < most:
            return Decision(call_cost(attack, work, strategies, chunk), chunk=chunk)
        least = call_cost(attack, work, strategies, 1)
        need = f"{human_bytes(least.peak_bytes)} even one {attack.chunk_unit.rstrip('s')} at a time"
    else:
        need = human_bytes(full.peak_bytes)
    return Decision(full, refused=refusal(attack, work, need, room, None))


def refusal(attack: Attack, work: Workload, need: str, room: int, seconds: float | None) -> str:
    """One line: what the call needs, what the budget leaves, and what would fit (a cheaper
    setting of the attack, else a weaker attack of its family)."""
    cheaper = attack.cheaper(work, room, seconds) or sibling(attack, work, room, seconds)
    tail = f"; {cheaper}" if cheaper else ""
    return f"{attack.name} needs {need} beyond what the process holds, and the budget leaves {human_bytes(room)}" \
           f" (raise --memory{tail})"


def sibling(attack: Attack, work: Workload, room: int, seconds: float | None) -> str:
    """'--attack NAME fits' for the strongest other attack of the same default-audit family that
    fits `room` bytes (and `seconds`) unchunked, or ""."""
    if attack.audit is None:
        return ""
    family = [cls for _, cls in ATTACKS.items()
              if cls.audit is not None and cls.audit.family == attack.audit.family and cls.name != attack.name]
    for cls in sorted(family, key=lambda c: -(c.audit.strength if c.audit else 0)):
        cost = cls().cost(work, None)
        if cost.peak_bytes <= room and (seconds is None or cost.seconds <= seconds):
            fits = f"~{human_seconds(cost.seconds)}, ~{human_bytes(cost.peak_bytes)} a victim"
            return f"--attack {cls.name} fits ({fits})"
    return ""


def workload(target: Target, view: View, obs: Observation, samples: int, queries: int, aux: int,
             probe: Any, evaluation: int = 0) -> Workload:
    """What one call's cost depends on, from the view (rounds and uplinks it sees), the
    partition's size of the victim and the model's declared shapes."""
    entries = view.entries()
    mine = {e["round"] for e in entries if e["kind"] == "uplink" and e["sender"] == view.victim}
    ups = [e for e in entries if e["kind"] == "uplink" and e["round"] in mine]
    clients = max(1, round(len(ups) / max(1, len(mine))))
    recipe = target.recipe
    return Workload(samples=samples, rounds=max(1, len(mine)) if obs.round is not None else 1, clients=clients,
                    queries=queries, aux=aux, classes=target.num_classes, epochs=recipe.epochs,
                    batch_size=recipe.batch_size, probe=probe, first_layer=first_layer(target),
                    models=max(1, len(view.held)), evaluation=evaluation)


def first_layer(target: Target) -> tuple[int, int] | None:
    """(units, inputs) of the first weight that multiplies every input pixel, if there is one:
    an (out, P) linear weight, or a (P [+ 1], F) factorised one (WAFFLe's W_a)."""
    pixels = math.prod(target.ctx.input_shape)
    for shape in target.param_shapes().values():
        if len(shape) == 2 and shape[1] == pixels:
            return shape[0], pixels
        if len(shape) == 2 and shape[0] in (pixels, pixels + 1):
            return shape[1], pixels
        if len(shape) > 2:
            return None  # a convolution comes first
    return None
