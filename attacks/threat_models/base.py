"""The threat-model contract: which messages the adversary observes, and what else it knows.

A threat model is one class that registers itself by defining `name` (in this package, in a
user's file passed with `--plugin`, or through the `fedattack.threat_models` entry point). It
names the channels it observes, given the run's facts (`RunFacts`: which rounds were recorded,
how many clients), and declares what its adversary knows besides the wire (`knows`: auxiliary
data, labels, the local recipe, the victim's sample count, other clients' messages). The base
class builds the `View` from the run directory, so a threat model cannot hand the adversary
anything the wire did not carry, except through `deployed`, which only an upper-bound threat
model overrides; and it refuses channels of other clients unless `knows.every_client`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from fedattack.attacks.hidden_parts.base import BROADCAST_MODEL, CLIENT_MODEL, DEPLOYED_MODEL, MODELS
from fedattack.attacks.view import Channel, Knows, View
from fedattack.registry import THREAT_MODELS, UserError
from fedattack.target import State, Target

__all__ = ["BROADCAST_MODEL", "CLIENT_MODEL", "DEPLOYED_MODEL", "RunFacts", "ThreatModel"]
ATTACKED = {CLIENT_MODEL: "model rebuilt from the wire"}  # how results have always named it


@dataclass(frozen=True, kw_only=True)
class RunFacts:
    """What is public about the attacked run: a threat model may shape its channels by it."""

    recorded_rounds: tuple[int, ...]  # rounds with at least one recorded message, ascending
    num_clients: int
    rounds: int  # rounds the federation trained

    @classmethod
    def of(cls, fed: Any) -> RunFacts:
        rounds = tuple(sorted({e["round"] for e in fed.transcript().index}))
        return cls(recorded_rounds=rounds, num_clients=fed.num_clients, rounds=int(fed.spec.rounds))


class ThreatModel:
    """Base class: override `channels` (and, for an upper bound, `deployed_model`); set `knows`."""

    name: ClassVar[str] = ""
    observes: ClassVar[str] = ""  # one sentence for results and `fedattack list`
    knows: ClassVar[Knows] = Knows()
    upper_bound: ClassVar[bool] = False
    attacks: ClassVar[str] = CLIENT_MODEL  # which model: the victim's client model, the broadcast or the deployed

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.attacks not in MODELS:
            raise TypeError(f"{cls.__name__}.attacks is {cls.attacks!r}; declare one of {', '.join(MODELS)}")
        if cls.__dict__.get("name"):
            THREAT_MODELS.add(cls.name, cls)

    def channels(self, victim: int, facts: RunFacts) -> list[Channel]:
        raise NotImplementedError

    def deployed_model(self, fed: Any, victim: int, method: Target) -> State | None:
        """The victim's deployed model; None for every threat model that is not an upper bound."""
        return None

    def held_models(self, fed: Any, victim: int, method: Target) -> dict[str, State]:
        """Every model the victim held, by name (an upper bound attacks each); {} otherwise."""
        return {}

    def view(self, fed: Any, victim: int, facts: RunFacts | None = None, method: Target | None = None) -> View:
        """The adversary's view of federation `fed` (a `Federation`) when attacking `victim`;
        `method`: the evaluation's method (default: rebuilt from the run)."""
        fed.check_client(victim)
        channels = tuple(self.channels(victim, facts or RunFacts.of(fed)))
        if not self.knows.every_client and any(ch.client != victim for ch in channels):
            raise UserError(f"threat model {self.name} observes other clients' messages; declare "
                            "knows = Knows(every_client=True) if it may use them")
        method = fed.target() if method is None else method
        return View(threat_model=self.name, victim=victim, target=method, channels=channels,
                    reader=fed.transcript(), deployed=self.deployed_model(fed, victim, method),
                    held=self.held_models(fed, victim, method), upper_bound=self.upper_bound,
                    active=fed.manifest.get("active_adversary"))

    def describe(self, victim: int | None = None, facts: RunFacts | None = None) -> dict[str, Any]:
        """For results: what it observes (the channels, when the victim and run are given) and knows."""
        out: dict[str, Any] = {"name": self.name, "observes": self.observes, "upper_bound": self.upper_bound,
                               "attacks": ATTACKED.get(self.attacks, self.attacks),
                               "knows": self.knows.describe()}
        if victim is not None and facts is not None:
            out["channels"] = [describe_channel(ch, victim) for ch in self.channels(victim, facts)]
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def describe_channel(ch: Channel, victim: int) -> dict[str, Any]:
    who = "every client" if ch.client is None else ("victim" if ch.client == victim else f"client {ch.client}")
    rounds = "every recorded round" if ch.rounds is None else sorted(ch.rounds)
    return {"client": who, "kind": ch.kind, "rounds": rounds}
