"""The threat-model contract: which messages the adversary observes, and what else it knows.

A threat model is one class that registers itself by defining `name` (in this package, in a
user's file passed with `--plugin`, or through the `fedattack.threat_models` entry point). It
names the channels it observes, given the run's facts (`RunFacts`: which rounds were recorded,
how many clients), and declares what its adversary knows besides the wire (`knows`: auxiliary
data, labels, the local recipe, the victim's sample count and class counts, other clients'
messages); an assumption about the victim is handed to attacks only where `knows` grants it.

The base class builds the `View` from a `RunRecord`, which is all a threat model is given of
the run: the transcript, read only through the channels it names (a `Wire`), the method with
the run's seed withheld, and, for an upper bound alone, what the victim held (`Holdings`: the
server's final state and the victim's private state). So a threat model cannot hand the
adversary anything the wire did not carry, except through `held_models`, which only an
upper-bound threat model overrides and whose views are labelled as such; and it refuses
channels of other clients unless `knows.every_client`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from fedattack.attacks.hidden_parts.base import BROADCAST_MODEL, CLIENT_MODEL, DEPLOYED_MODEL, MODELS
from fedattack.attacks.view import Channel, Knows, View, Wire
from fedattack.registry import THREAT_MODELS, UserError
from fedattack.target import State, Target

if TYPE_CHECKING:
    from fedattack.federation.rundir import Federation

__all__ = ["BROADCAST_MODEL", "CLIENT_MODEL", "DEPLOYED_MODEL", "Holdings", "RunFacts", "RunRecord", "ThreatModel"]
RECIPE_FACTS = ("epochs", "batch_size", "lr")  # what a declared local recipe holds (`Recipe`)
ATTACKED = {CLIENT_MODEL: "model rebuilt from the wire"}  # how results have always named it


@dataclass(frozen=True, kw_only=True)
class RunFacts:
    """What is public about the attacked run: a threat model may shape its channels by it."""

    recorded_rounds: tuple[int, ...]  # rounds with at least one recorded message, ascending
    num_clients: int
    rounds: int  # rounds the federation trained

    @classmethod
    def of(cls, fed: Federation | RunRecord) -> RunFacts:
        run = fed if isinstance(fed, RunRecord) else RunRecord(fed)
        return run.facts()


@dataclass(frozen=True)
class Holdings:
    """What the victim itself held at the end of the run: for upper-bound threat models only."""

    method: Target
    server: State
    private: State


class RunRecord:
    """What a threat model is given of a trained federation (see the module docstring): its
    wire through channels, its method (seed withheld), and the victim's holdings for an upper
    bound. Built by the evaluation from the opened run directory; never part of a `View`."""

    def __init__(self, fed: Federation, method: Target | None = None) -> None:
        self._fed = fed
        self._method = method

    @property
    def num_clients(self) -> int:
        return self._fed.num_clients

    def method(self) -> Target:
        """The method as the public protocol describes it (`Federation.target`: no seed)."""
        if self._method is None:
            self._method = self._fed.target()
        return self._method

    def wire(self, channels: tuple[Channel, ...]) -> Wire:
        return Wire(self._fed.transcript(), channels)

    def facts(self) -> RunFacts:
        rounds = tuple(sorted({e["round"] for e in self._fed.transcript().index}))
        return RunFacts(recorded_rounds=rounds, num_clients=self._fed.num_clients, rounds=int(self._fed.spec.rounds))

    def active(self) -> dict[str, Any] | None:
        """The run's active server as its manifest records it (what the server itself did)."""
        return self._fed.manifest.get("active_adversary")

    def undeclared_recipe(self) -> str:
        """The local recipe's facts the run's manifest does not declare (comma-separated; "" when
        epochs, batch size and rate are all there): what simulating a client's training needs."""
        recipe = (self._fed.manifest.get("spec") or {}).get("recipe")
        return ", ".join(k for k in RECIPE_FACTS if not isinstance(recipe, dict) or recipe.get(k) is None)

    def holdings(self, victim: int) -> Holdings:
        return Holdings(self.method(), self._fed.server_state(), self._fed.private_state(victim))

    def check_client(self, victim: int) -> None:
        self._fed.check_client(victim)


class ThreatModel:
    """Base class: override `channels` (and, for an upper bound, `held_models`); set `knows`."""

    name: ClassVar[str] = ""
    observes: ClassVar[str] = ""  # one sentence for results and `fedattack list`
    knows: ClassVar[Knows] = Knows()
    upper_bound: ClassVar[bool] = False
    attacks: ClassVar[str] = CLIENT_MODEL  # which model: the victim's client model, the broadcast or the deployed
    # It acts: it designs what the server sends for one round (`malicious_server.py`), so only
    # attacks that declare `Attack.acting` run under it, and those run under no other.
    acts: ClassVar[bool] = False
    in_default_audit: ClassVar[bool] = False  # added to the default audit's eavesdropper when no threat model is named

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.attacks not in MODELS:
            raise TypeError(f"{cls.__name__}.attacks is {cls.attacks!r}; declare one of {', '.join(MODELS)}")
        if cls.__dict__.get("name"):
            THREAT_MODELS.add(cls.name, cls)

    def channels(self, victim: int, facts: RunFacts) -> list[Channel]:
        raise NotImplementedError

    def held_models(self, held: Holdings, wire: Wire, victim: int) -> dict[str, State]:
        """Every model the victim held, by name, the deployed one first (an upper bound attacks
        each); called for upper-bound threat models only."""
        return {}

    def view(self, run: Federation | RunRecord, victim: int, facts: RunFacts | None = None,
             method: Target | None = None) -> View:
        """The adversary's view of the run (an opened `Federation`, or its `RunRecord`) when
        attacking `victim`; `method`: the evaluation's own copy of the run's method, if it has one."""
        record = run if isinstance(run, RunRecord) else RunRecord(run, method)
        record.check_client(victim)
        channels = tuple(self.channels(victim, facts or record.facts()))
        if not self.knows.every_client and any(ch.client != victim for ch in channels):
            raise UserError(f"threat model {self.name} observes other clients' messages; declare "
                            "knows = Knows(every_client=True) if it may use them")
        wire = record.wire(channels)
        held = self.held_models(record.holdings(victim), wire, victim) if self.upper_bound else {}
        return View(threat_model=self.name, victim=victim, target=method or record.method(), wire=wire,
                    deployed=next(iter(held.values()), None), held=held, upper_bound=self.upper_bound,
                    active=record.active())

    def describe(self, victim: int | None = None, facts: RunFacts | None = None) -> dict[str, Any]:
        """For results: what it observes (the channels, when the victim and run are given) and knows."""
        out: dict[str, Any] = {"name": self.name, "observes": self.observes, "upper_bound": self.upper_bound,
                               "attacks": ATTACKED.get(self.attacks, self.attacks), "acts": self.acts,
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
