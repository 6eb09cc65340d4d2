"""What an evaluation asks for, from names to objects: threat-model and attack names ("all" or
a list), the attacks with their settings (each setting to every chosen attack that has it),
and the victims (ids, "all", "random:N"). Kept apart from `evaluate` so the commands can check
a request before any data is loaded."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fedattack.attacks.base import Attack
from fedattack.federation.rundir import Federation
from fedattack.registry import ATTACKS, THREAT_MODELS, UserError
from fedattack.rng import numpy_rng
from fedattack.suggest import did_you_mean


def names(request: str | Sequence[str], known: list[str]) -> list[str]:
    items = [request] if isinstance(request, str) else list(request)
    if "all" in items:
        return known
    if not items:
        raise UserError("name at least one threat model and one attack (or all)")
    return items


DEFAULT_THREATS = "default"  # what `evaluate` attacks as when no threat model is named


def threat_model_names(request: str | Sequence[str], default_audit: bool) -> list[str]:
    """The threat models asked for. "default" (no `--threat-model` given) is the eavesdropper and,
    in the default audit, every threat model that declares `in_default_audit` (the malicious
    server, fitted to the budget like any other); a name given is taken as given, so
    `--threat-model eavesdropper` audits the eavesdropper alone."""
    chosen: list[str] = []
    for item in [request] if isinstance(request, str) else list(request):
        if item == DEFAULT_THREATS:
            extra = [n for n, cls in THREAT_MODELS.items() if cls.in_default_audit] if default_audit else []
            found = ["eavesdropper", *extra]
        else:
            found = names([item], THREAT_MODELS.names())
        chosen += [n for n in found if n not in chosen]
    return chosen


def build_attacks(chosen: list[str], options: dict[str, Any]) -> list[Attack]:
    """Attack objects; each option goes to every chosen attack that has such a setting."""
    classes = [ATTACKS.get(n) for n in chosen]
    fields = [c.setting_names() for c in classes]
    unused = [k for k in options if not any(k.replace("-", "_") in f for f in fields)]
    if unused:
        raise UserError(f"no chosen attack has the setting {unused_setting(unused[0], chosen, fields)}; "
                        "see `fedattack list attacks`")
    return [c.from_options({k: v for k, v in options.items() if k.replace("-", "_") in f})
            for c, f in zip(classes, fields)]


def unused_setting(key: str, chosen: list[str], fields: list[set[str]]) -> str:
    """The setting no chosen attack has, with the chosen attacks' setting it is most like, or
    else the attacks that do have it (the user may have meant to choose one of them)."""
    close = did_you_mean(key, sorted(set().union(*fields)))
    if close:
        return f"{key!r}{close}"
    owners = [n for n in ATTACKS.names() if n not in chosen
              and key.replace("-", "_") in ATTACKS.get(n).setting_names()]
    return f"{key!r} (attack {', '.join(owners)} has it: choose it too)" if owners else repr(key)


def parse_victims(victims: str | int | Sequence[str | int], fed: Federation, seed: int) -> list[int]:
    """Client ids from ids, "all" or "random:N" (see `evaluate_run`). A random:N above the
    federation's clients is refused, except the default (EvaluationSpec's), which takes every
    client of a federation smaller than it."""
    from fedattack.evaluation import EvaluationSpec

    items = [victims] if isinstance(victims, (str, int)) else list(victims)
    default = [str(v) for v in items] == [str(v) for v in EvaluationSpec.victims]
    chosen: list[int] = []
    for item in items:
        text = str(item).strip()
        if text == "all":
            chosen += range(fed.num_clients)
        elif text.startswith("random:"):
            chosen += random_victims(fed, text[7:], seed, at_most_all=default)
        else:
            try:
                client = int(text)
            except ValueError:
                raise UserError(f"victim {text!r} is not a client id, all, or random:N") from None
            fed.check_client(client)
            chosen.append(client)
    return list(dict.fromkeys(chosen))


def random_victims(fed: Federation, count: str, seed: int, at_most_all: bool = False) -> list[int]:
    if not count.isdigit() or int(count) < 1:
        raise UserError(f"random:{count} needs a positive count, e.g. random:5")
    if int(count) > fed.num_clients and not at_most_all:
        raise UserError(f"random:{count} asks for {int(count)} victims, but this federation has {fed.num_clients} "
                        f"clients; pass random:{fed.num_clients} or all")
    seen = sorted(set(fed.transcript().clients())) or list(range(fed.num_clients))
    k = min(int(count), len(seen))
    return sorted(int(c) for c in numpy_rng(seed, "victims").choice(seen, size=k, replace=False))


def victims_done(kept: list[Path], chosen: list[int], spec: Any, threats: Sequence[Any],
                 echo: Callable[[str], None]) -> set[int]:
    """The chosen victims whose every (threat model, attack) result is among `kept` (a resumed
    evaluation skips them, and says so). Under the default audit, whose attacks depend on the
    budget, a victim is done once every threat model has its results."""
    from fedattack.attacks.planning.default_audit import DEFAULT

    if not kept:
        return set()
    tms = [tm.name for tm in threats]
    wanted = ({(tm, "*") for tm in tms} if DEFAULT in spec.attacks
              else {(tm, a) for tm in tms for a in names(spec.attacks, ATTACKS.names())})
    have: dict[int, set[tuple[str, str]]] = {}
    made: list[object] = []
    for path in kept:
        r = json.loads(path.read_text())
        have.setdefault(int(r["victim"]), set()).update({(r["threat_model"], r["attack"]), (r["threat_model"], "*")})
        made.append((r.get("extra") or {}).get("software"))
    done = {v for v in chosen if wanted <= have.get(v, set())}
    if done:
        echo(f"resume: {len(done)} victim(s) already evaluated in this folder, skipped{_other_software(made)}")
    return done


def _other_software(made: list[object]) -> str:
    """A note when results kept by a resume were made by other software than this one."""
    from fedattack.provenance import describe, made_elsewhere, software

    other = [m for m in made if made_elsewhere(m)]
    if not other:
        return ""
    return (f"; {len(other)} of the results kept were made by other software than this "
            f"({describe(software())}): --force recomputes them")
