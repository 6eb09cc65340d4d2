"""Results that record why nothing was attacked: a refused call, a threat model that sees
nothing, a method no strategy rebuilds, a run that diverged. Each is an `AttackResult` with
`applicable=False` and a note, so reports show the cell and the reason instead of a gap."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from fedattack.attacks.base import Attack, ResultContext
from fedattack.attacks.evaluation.request import build_attacks, names, parse_victims
from fedattack.attacks.evaluation.results_folder import ResultsFolder
from fedattack.attacks.planning import default_audit
from fedattack.attacks.planning import planner as planning
from fedattack.attacks.threat_models.base import RunFacts, ThreatModel
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.rundir import Federation
from fedattack.registry import ATTACKS
from fedattack.results import AttackResult, metric_table


def diverged_note(fed: Federation) -> str:
    """Why a diverged run has nothing to attack ("" when it did not diverge)."""
    names = fed.manifest.get("diverged") or []
    return (f"diverged during training (NaN or infinite weights in {', '.join(names[:3])}); attacking it "
            "would measure nothing" if names else "")


def not_applicable_into(fed: Federation, spec: EvaluationSpec, threats: list[ThreatModel], folder: ResultsFolder,
                        why: str) -> list[Path]:
    """One not-applicable result per victim, threat model (`evaluate.threat_models`) and attack,
    saying why: the cell is recorded (reports show it), nothing is attacked and no data is loaded."""
    requested = default_audit.nominal() if planning.is_default(spec) else names(spec.attacks, ATTACKS.names())
    attacks = build_attacks(requested, {} if planning.is_default(spec) else spec.settings)
    base = ResultContext(run=run_info(fed), pools={}, max_queries=spec.max_queries, executor=spec.executor,
                         reconstruction_request=spec.reconstruction, threat_model={}, knowledge={})
    facts = RunFacts.of(fed)
    victims = parse_victims(spec.victims, fed, spec.seed)
    folder.begin(victims)
    out = folder.stage()
    written = [not_applicable(a, tm, victim, spec.seed, out, replace(base, threat_model=tm.describe(victim, facts)),
                              why)
               for victim in victims for tm in threats for a in attacks]
    return folder.publish(out, written, *victims)


def not_applicable(attack: Attack, tm: ThreatModel, victim: int, seed: int, out: Path, ctx: ResultContext,
                   note: str) -> Path:
    path = out / f"{attack.name}-{tm.name}-{ctx.reconstruction or 'none'}-victim{victim}.json"
    result = AttackResult(attack=attack.name, threat_model=tm.name, run=ctx.run, victim=victim,
                          reconstruction=ctx.reconstruction or "none", settings=ctx.settings(), seed=seed,
                          extra=ctx.extra(), metric_info=metric_table(attack.metrics), applicable=False,
                          upper_bound=tm.upper_bound, note=note)
    return result.save(path)


def nothing_seen(fed: Federation, tm: ThreatModel, victim: int) -> str:
    method, recording = fed.spec.method, fed.manifest.get("recording", {})
    if recording.get("policy") == "none":
        return f"the run recorded no messages (--record none); the {tm.name} has nothing to attack"
    if not recording.get("messages"):
        return f"{method} puts nothing on the wire; the {tm.name} observes nothing to attack"
    return f"client {victim} sent or received nothing in the recorded rounds; the {tm.name} observes nothing"


def run_info(fed: Federation) -> dict[str, Any]:
    spec, m = fed.spec, fed.manifest
    return {"path": str(fed.path.resolve()), "method": spec.method, "dataset": spec.dataset,
            "partition": m.get("partition", spec.partition), "seed": spec.seed, "model": spec.model,
            "rounds": spec.rounds, "hyper": spec.hyper, "utility": m.get("utility", {}),
            "recording": m.get("recording", {}).get("policy"),
            "defences": [dict(d) for d in m.get("defences") or []],  # part of the result's identity
            "active_adversary": active_adversary(m)}


def active_adversary(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The run's acting server as results carry it (None: an honest one), so reports keep
    passive and active adversaries apart."""
    entry = manifest.get("active_adversary")
    return None if entry is None else {"name": entry["name"], "settings": entry["settings"]}
