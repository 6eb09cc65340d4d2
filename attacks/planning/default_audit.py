"""The default audit (`fedattack evaluate` without `--attack`): the strongest attacks that fit.

Every attack declares its place (`Attack.audit`: a family, a strength within it, whether it is
one of the seed papers'); nothing here names an attack. Per threat model, for each family in
`FAMILIES` order, the strongest attack that the threat model can run (`can_run`), that takes
the victim's workload (`Attack.for_audit`, e.g. update inversion only where the first layer is
fully connected and wider than the victim's images are many) and that fits the memory budget
(at some chunk size) and the time still left is chosen; the weaker ones of the family are not
run. Then every `paper` attack not chosen yet, for the papers' comparison, as long as it fits.
Last, every attack that `complements` its family (`AuditRole`: it reads the victim by other
means, e.g. the cocktail party attack's independent component analysis beside update
inversion's linear programs, and recovers images they miss) and was not chosen yet, where it
takes the workload and fits the time left: last, so that it never crowds out what the audit
would run without it. What was left out, and why, is printed in the plan and kept in
`plan.json`.

The time budget is shared in that order, so the strongest membership attack of every threat
model is costed first. Without `--time` the default audit plans for `DEFAULT_SECONDS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fedattack.attacks.base import Attack, AuditRole, acting_mismatch, sees_every_uplink
from fedattack.attacks.planning.cost import Decision, Workload
from fedattack.attacks.planning.plan import decide
from fedattack.attacks.threat_models.base import ThreatModel
from fedattack.attacks.view import View
from fedattack.registry import ATTACKS, UserError
from fedattack.resources import human_seconds

DEFAULT = "default"  # the attack request that means the default audit
FAMILIES = ("membership", "server membership", "reconstruction", "model inversion", "active server")
DEFAULT_SECONDS = 30 * 60


@dataclass
class Chosen:
    """The calls of one attack under one threat model: per victim its instance and decision."""

    name: str
    tm: ThreatModel
    calls: dict[int, tuple[Attack, Decision]] = field(default_factory=dict)


def can_run(cls: type[Attack], tm: ThreatModel, views: list[View] | None = None) -> str:
    """Why the threat model cannot run the attack at all ("" if it can): an attack that reads
    every client's uplinks (`Attack.reads_every_client`) needs a threat model that may use them
    and, where its views are known, sees them; an attack that designs an acting round runs only
    under a threat model that acts, and only it does (`acting_mismatch`)."""
    if why := acting_mismatch(cls, tm):
        return why
    if cls.reads_every_client and (not tm.knows.every_client or not all(map(sees_every_uplink, views or []))):
        return f"it compares the victim with other clients, which the {tm.name} does not see"
    return ""


def ranked(family: str) -> list[type[Attack]]:
    """The family's attacks, strongest first (name breaks ties)."""
    found = [cls for _, cls in ATTACKS.items() if cls.audit is not None and cls.audit.family == family]
    return sorted(found, key=lambda c: (-(c.audit.strength if c.audit else 0), c.name))


def settings_for(cls: type[Attack], options: dict[str, Any]) -> dict[str, Any]:
    fields = cls.setting_names()
    return {k: v for k, v in options.items() if k.replace("-", "_") in fields}


def check_options(options: dict[str, Any]) -> None:
    """A --set that no attack of the default audit has is a mistake, as with named attacks."""
    candidates = [cls for _, cls in ATTACKS.items() if cls.audit is not None]
    for key in options:
        if not any(key.replace("-", "_") in c.setting_names() for c in candidates):
            raise UserError(f"no attack of the default audit has the setting {key!r}; see `fedattack list attacks`")


class DefaultAudit:
    """Chooses the default audit's calls for every threat model (see the module docstring)."""

    def __init__(self, works: dict[tuple[str, int], tuple[Workload, int]], options: dict[str, Any],
                 room: int, seconds: float | None, views: dict[str, list[View]] | None = None) -> None:
        self.works, self.options, self.room = works, options, room
        self.views = views or {}
        self.left = seconds
        self.left_out: list[dict[str, str]] = []
        self._instances: dict[tuple[str, str], Attack] = {}

    def choose(self, threats: list[ThreatModel]) -> list[Chosen]:
        chosen: list[Chosen] = []
        for family in FAMILIES:
            for tm in threats:
                for cls in ranked(family):
                    pick = self._try(cls, tm)
                    if pick is not None:
                        chosen.append(pick)
                        break
        chosen += self._also(threats, chosen, lambda role: role.paper)
        chosen += self._also(threats, chosen, lambda role: role.complements)
        return chosen

    def _also(self, threats: list[ThreatModel], chosen: list[Chosen],
              wanted: Callable[[AuditRole], bool]) -> list[Chosen]:
        """Every attack whose role is `wanted` and that a threat model has not chosen yet, tried."""
        out: list[Chosen] = []
        for tm in threats:
            taken = {c.name for c in chosen if c.tm is tm}
            for _, cls in ATTACKS.items():
                if cls.audit is not None and wanted(cls.audit) and cls.name not in taken:
                    pick = self._try(cls, tm)
                    if pick is not None:
                        out.append(pick)
        return out

    def _try(self, cls: type[Attack], tm: ThreatModel) -> Chosen | None:
        why = can_run(cls, tm, self.views.get(tm.name))
        if why:
            return None  # not a choice the audit made: the threat model cannot run it
        pick, reasons = Chosen(cls.name, tm), []
        for (tm_name, victim), (work, strategies) in self.works.items():
            if tm_name != tm.name:
                continue
            attack = self._instance(cls, work)
            if isinstance(attack, str):
                reasons.append(attack)
                continue
            decision = decide(attack, work, strategies, self.room)
            if decision.refused:
                reasons.append(decision.refused)
                continue
            pick.calls[victim] = (attack, decision)
        seconds = sum(d.cost.seconds for _, d in pick.calls.values())
        if pick.calls and self.left is not None and seconds > self.left:
            cheaper = next(iter(pick.calls.values()))[0].cheaper(next(iter(self.works.values()))[0], self.room,
                                                                   self.left / max(1, len(pick.calls)))
            reasons = [f"~{human_seconds(seconds)} for {len(pick.calls)} victim(s), and "
                       f"{human_seconds(self.left)} of the time budget is left (--time)"
                       + (f"; {cheaper}" if cheaper else "")]
            pick.calls = {}
        if not pick.calls:
            entry = {"threat_model": tm.name, "attack": cls.name, "why": reasons[0] if reasons else "no victim"}
            said = {(e["threat_model"], e["attack"]) for e in self.left_out}
            if (tm.name, cls.name) not in said:  # tried again as a paper or complementing attack: said once
                self.left_out.append(entry)
            return None
        if self.left is not None:
            self.left -= seconds
        return pick

    def _instance(self, cls: type[Attack], work: Workload) -> Attack | str:
        """The attack with the settings the default audit gives it on `work` (the user's --set on
        top), or why it is left out there; one instance per distinct setting."""
        audit = cls().for_audit(work)
        if isinstance(audit, str):
            return audit
        settings = {**audit, **settings_for(cls, self.options)}
        key = (cls.name, repr(sorted(settings.items())))
        if key not in self._instances:
            self._instances[key] = cls.from_options(settings)
        return self._instances[key]


def nominal() -> list[str]:
    """The default audit's attacks before any budget: the strongest of each family, every paper
    attack and every complementing one (for results that say why nothing was attacked, e.g. a diverged run)."""
    out = [ranked(f)[0].name for f in FAMILIES if ranked(f)]
    out += [name for name, cls in ATTACKS.items()
            if cls.audit is not None and (cls.audit.paper or cls.audit.complements)]
    return list(dict.fromkeys(out))
