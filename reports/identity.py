"""What tells two audited federations of one method apart beyond its hyperparameters: the
defences the run was trained with, and an active adversary that acted during training.

A defended run and its undefended twin are different federations: averaged into one row, a
defence's effect could not be read off a report at all. Both facts are read from the run's
manifest where the run directory is reachable, else from what each result records
(`AttackResult.run["defences"]`, `AttackResult.run["active_adversary"]`); a result written
before defences were recorded, whose run is not reachable, is taken as undefended and the
report says how many such results it read.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fedattack.registry import UserError

Entry = dict[str, Any]


def defences_in(*sources: Any) -> tuple[list[Entry], bool]:
    """The defence entries ({"name", "settings", ...}) of the first source that records them
    (a manifest, its spec, a result's `run`), and whether any did."""
    for source in sources:
        if isinstance(source, dict) and isinstance(source.get("defences"), list):
            return [dict(d) for d in source["defences"] if isinstance(d, dict) and isinstance(d.get("name"), str)], True
    return [], False


def adversary_in(*sources: Any) -> Entry | None:
    """The active adversary ({"name", "settings"}) of the first source that names one; None for
    an honest federation (the field absent or null)."""
    for source in sources:
        found = source.get("active_adversary") if isinstance(source, dict) else None
        if isinstance(found, dict) and isinstance(found.get("name"), str) and found["name"]:
            return {"name": found["name"], "settings": dict(found.get("settings") or {})}
    return None


def changed_settings(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The settings a defence was given away from its defaults (all of them for a defence this
    installation does not know)."""
    from fedattack.defences import DEFENCES

    try:
        defaults = dataclasses.asdict(DEFENCES.get(name).Settings())
    except (UserError, TypeError, ValueError):
        return dict(settings)
    return {k: v for k, v in settings.items() if k not in defaults or defaults[k] != v}


def call(name: str, settings: dict[str, Any]) -> str:
    """'dp-fedavg(noise_multiplier=0.01)', or the bare name with its defaults."""
    inner = ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))
    return f"{name}({inner})" if inner else name


def defence_label(defences: list[Entry]) -> str:
    """Every defence, innermost first, with what it set: 'clip(max_norm=0.5) + dp-fedavg'."""
    return " + ".join(call(d["name"], changed_settings(d["name"], dict(d.get("settings") or {})))
                      for d in defences)


def adversary_label(adversary: Entry | None) -> str:
    """'active server: trap-weights(isolate=True)', or '' for an honest federation."""
    if adversary is None:
        return ""
    name, settings = adversary["name"], dict(adversary.get("settings") or {})
    return f"active server: {call(name, changed_adversary_settings(name, settings))}"


def changed_adversary_settings(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The settings an active adversary was given away from its defaults, which are read from the
    plugins' source (`fedattack.catalog`, no import of the attacks); all of them for one this
    installation does not know."""
    from fedattack.catalog import CannotTell, RegistryRef, entries

    try:
        known = {e.name: dict(e.settings) for e in entries(RegistryRef("fedattack.registry", "ACTIVE"))}
    except (CannotTell, UserError, ImportError):
        return settings
    defaults = known.get(name)
    return settings if defaults is None else {k: v for k, v in settings.items() if defaults.get(k, object()) != v}


def accounting(defences: list[Entry]) -> str:
    """A privacy accountant's claim, where a defence recorded one: 'epsilon 8.1 at delta 1e-05'."""
    parts = []
    for d in defences:
        acc = d.get("accounting")
        if isinstance(acc, dict) and isinstance(acc.get("epsilon"), (int, float)):
            delta = acc.get("delta", (d.get("settings") or {}).get("delta"))
            parts.append(f"{d['name']} claims epsilon {acc['epsilon']:.3g}" + (f" at delta {delta:g}" if
                                                                               isinstance(delta, (int, float)) else ""))
    return "; ".join(parts)
