"""`EvaluationSpec`: everything that decides an evaluation's results, beside `FederationSpec`.

One frozen value describes how a trained federation is attacked: by which threat models and
attacks, which victims, how hidden parts are guessed, how the test split is cut into the
adversary's and the scorer's pools, the seed, and the attacks' settings. The CLI's `evaluate`,
a TOML experiment's `[[evaluation]]` entry (one spec per seed) and the Python API all build
this, and `fedattack.attacks.evaluation.evaluate.evaluate_run(run, spec, out)` runs it. The spec checks
its own values (one-line `UserError`s); names are checked against the registries when it runs,
so plugins loaded later still count. The core never imports the attacks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from fedattack.registry import UserError
from fedattack.suggest import did_you_mean

SCALARS = (bool, int, float, str)


@dataclass(frozen=True, kw_only=True)
class EvaluationSpec:
    """threat_models / attacks: registered names or "all"; threat_models "default" is the
    eavesdropper and, in the default audit, the malicious server (`request.threat_model_names`);
    attacks "default" is the default
    audit (per threat model the strongest attacks that fit the budget, `attacks.planning.default_audit`).
    victims: client ids, "all" or "random:N" (drawn by the seed among the clients on the
    recorded wire). reconstruction: "strongest" (every applicable strategy, and the strongest
    chosen honestly, `attacks.evaluation.selection`), "auto" (the one of lowest rank), "all" or strategy
    names, comma-separated. aux_size / eval_size: samples of the test
    split for the adversary's auxiliary data and the evaluation classifier (None: 40% / 30%).
    max_queries: most members judged per victim. nonmembers: non-members drawn per victim (at
    least as many as members; fewer where the held-out pool cannot supply them). executor:
    trains shadow and reference models ("batched", the default: each victim's together, in
    stacks the memory budget allows; "sequential": one at a time, the reference) and, when it
    is not "sequential", inverts every victim's model at once (`attacks.evaluation.deferred`).
    settings: attack settings, each going to every chosen attack that
    has it."""

    threat_models: tuple[str, ...] = ("default",)
    attacks: tuple[str, ...] = ("default",)
    victims: tuple[int | str, ...] = ("random:5",)
    reconstruction: str = "strongest"
    aux_size: int | None = None
    eval_size: int | None = None
    max_queries: int = 1000
    nonmembers: int = 1000
    seed: int = 0
    executor: str = "batched"
    settings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("threat_models", "attacks", "victims"):
            value = getattr(self, name)
            object.__setattr__(self, name, (value,) if isinstance(value, (str, int)) else tuple(value))
        _names(self.threat_models, "threat model")
        _names(self.attacks, "attack")
        if "default" in self.attacks and len(self.attacks) > 1:
            raise UserError("attack default (the default audit) stands alone; name attacks instead, or all")
        for victim in self.victims:
            _victim(victim)
        if not isinstance(self.reconstruction, str) or not self.reconstruction.strip():
            raise UserError("reconstruction must be auto, all, or strategy names (comma-separated)")
        for name, least in (("aux_size", 0), ("eval_size", 0)):
            value = getattr(self, name)
            if value is not None:
                _int(value, name, least)
        _int(self.max_queries, "max_queries", 1)
        _int(self.nonmembers, "nonmembers", 0)
        _int(self.seed, "seed", 0)
        if not isinstance(self.executor, str) or not self.executor:
            raise UserError("executor must be an executor's name, e.g. sequential")
        bad = [k for k, v in self.settings.items() if not isinstance(k, str) or not isinstance(v, SCALARS)]
        if bad:
            raise UserError(f"attack setting {bad[0]!r} must be a name with a number, string or boolean value")
        object.__setattr__(self, "settings", dict(self.settings))

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        return {**out, **{k: list(out[k]) for k in ("threat_models", "attacks", "victims")}}


def _names(items: tuple[str, ...], what: str) -> None:
    if not items:
        raise UserError(f"name at least one {what} (or all)")
    bad = [n for n in items if not isinstance(n, str) or not n.strip()]
    if bad:
        raise UserError(f"{what} names must be non-empty strings, not {bad[0]!r}")


def _victim(victim: int | str) -> None:
    if isinstance(victim, bool) or not isinstance(victim, (int, str)):
        raise UserError(f"victim {victim!r} is not a client id, all, or random:N")
    text = str(victim).strip()
    if text == "all" or text.lstrip("-").isdigit():
        if text.lstrip("-").isdigit() and int(text) < 0:
            raise UserError(f"victim {text} is not a client id; client ids start at 0")
        return
    if text.startswith("random:"):
        count = text[7:]
        if not count.isdigit() or int(count) < 1:
            raise UserError(f"random:{count} needs a positive count, e.g. random:5")
        return
    raise UserError(f"victim {text!r}{did_you_mean(text, ('all', 'random:N'))} is not a client id, all, or random:N")


def _int(value: Any, name: str, least: int | None) -> None:
    """A seed or a size: numpy and torch take them as 64-bit integers (a negative seed or a huge
    size failed inside them with a traceback)."""
    if (isinstance(value, bool) or not isinstance(value, int) or (least is not None and value < least)
            or value >= 2**63):
        floor = f" of at least {least}" if least is not None else ""
        raise UserError(f"{name.replace('_', '-')} must be an integer{floor} and below 2^63, not {value!r}")
