"""Active threat models: a server that chooses what it sends.

Every other adversary in fedattack reads the wire after the fact. An active one is the server
itself, acting during training: in the rounds it chooses it replaces what the method would
broadcast (`act`) with downlinks of its own, a modified model (other values, extra layers in
front of the model) or a different model per client, and afterwards reads what came back
(`read`). The round loop (`fedattack.federation.loop`) calls `act` and records what was actually
sent, so the transcript stays the truth of the wire; the manifest names the adversary, its
settings and the rounds and clients it acted on (`record`), and every attack result on such a
run carries `run["active_adversary"]`, so reports keep passive and active adversaries apart.

A plugin is one class that registers itself by defining `name` (built-ins in
`attacks/active/`, a user's file through `--plugin`, or the `fedattack.active_threat_models`
entry point). It writes `send` (what the acting rounds' clients receive) and `read` (images
from what the server got back); the base class decides when it acts (`rounds`, `victim`),
keeps the record, and by default restores the server's model after an acting round, so the
federation goes on training from the honest model (`after_round`).

Before training (when it is built with the server's knowledge) the base class refuses, in one
line, what would act on nothing or say nothing: a method that puts nothing on the wire, a
victim or an acting round outside the federation, and isolating the victim (`isolates`: model
inconsistency, `isolate=true`) without a defence that hides the uplinks (secure aggregation),
where the server reads every uplink anyway and isolation only stops the other clients training.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from fedattack.options import build_dataclass, named_settings
from fedattack.registry import ACTIVE, UserError
from fedattack.target import State, Target
from fedattack.wire import Payload

__all__ = ["ACTIVE", "ActiveSettings", "ActiveThreatModel", "Downlinks", "Exchange", "Readout", "ServerKnowledge"]


@dataclass(frozen=True, kw_only=True)
class ActiveSettings:
    """rounds: the rounds it acts in ("1", "1-12", "2+5+9", "all"). victim: the client it singles
    out (-1: in each acting round, the lowest-numbered sampled client it has not attacked yet)."""

    rounds: str = "1"
    victim: int = -1

    def __post_init__(self) -> None:
        parse_rounds(self.rounds, 1)
        if self.victim < -1:
            raise UserError(f"victim={self.victim} must be a client id, or -1 for a new one each round")


@dataclass(frozen=True)
class ServerKnowledge:
    """What the server holds besides the wire: public labelled images no client trained on (the
    test split, as the passive adversaries' auxiliary data), and the federation's public facts."""

    aux: torch.Tensor
    aux_labels: torch.Tensor
    num_clients: int
    train_size: int
    rounds: int
    seed: int


@dataclass
class Downlinks:
    """What the sampled clients receive in one round: the model they train (the method's own,
    or one the server built) and each client's payload."""

    target: Target
    payloads: dict[int, Payload]


@dataclass(frozen=True)
class Exchange:
    """One acting round as the server holds it: what it sent each client, what it received
    (after its defences' server side: under secure aggregation every entry is the one
    aggregate, `aggregated`), each client's n_k, whether the aggregate is the plain mean, and
    the public images it holds (`aux`, pixels in [0, 1])."""

    round: int
    victim: int
    sent: dict[int, Payload]
    received: dict[int, Payload]
    samples: dict[int, int]
    aggregated: bool
    unweighted: bool
    target: Target
    aux: torch.Tensor


@dataclass
class Readout:
    """Images (N, C, H, W) in [0, 1] read off what the server received, and how."""

    images: torch.Tensor
    info: dict[str, Any] = field(default_factory=dict)


class ActiveThreatModel:
    """Base class: set `name`, `paper`, `acts`, `Settings`; write `send` and `read`."""

    name: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    acts: ClassVar[str] = ""  # one sentence: what the server sends, for results and `fedattack list`
    Settings: ClassVar[type] = ActiveSettings
    singles_out: ClassVar[bool] = False  # it treats one victim apart from the others (or `isolate=true`)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            ACTIVE.add(cls.name, cls)

    def __init__(self, settings: Any, target: Target, knowledge: ServerKnowledge | None = None) -> None:
        self.settings, self.target, self.knowledge = settings, target, knowledge
        self.acted: list[dict[str, Any]] = []
        if knowledge is not None:  # a server about to act (not one rebuilt to read a run)
            self.refuse_unfit(knowledge)

    @property
    def isolates(self) -> bool:
        """Whether it sends the victim something apart from the other sampled clients (model
        inconsistency: they get a model of zeros), so that a secure sum is the victim's update."""
        return self.singles_out

    def refuse_unfit(self, knowledge: ServerKnowledge) -> None:
        """One line, before training, for a server that would act on nothing or isolate for nothing."""
        name, method = self.name, self.target.name
        if not self.target.wire_schema().downlink:
            raise UserError(f"{method} puts nothing on the wire, so a server has nothing to send instead; "
                            "choose a federated method")
        if self.settings.victim >= knowledge.num_clients:
            raise UserError(f"{name} victim={self.settings.victim}: this federation has {knowledge.num_clients} "
                            f"clients (0 to {knowledge.num_clients - 1}), or -1 for a new one each round")
        late = sorted(r for r in parse_rounds(self.settings.rounds, knowledge.rounds) if r > knowledge.rounds)
        if late:
            raise UserError(f"{name} rounds={self.settings.rounds}: this federation runs {knowledge.rounds} "
                            f"rounds, so round {late[0]} never comes; act in rounds 1 to {knowledge.rounds} or all")
        if self.isolates and not self.target.uplinks_hidden:
            raise UserError(f"{name} isolates the victim's update from a secure sum, but no defence of this "
                            "federation hides the uplinks: the server reads every client's uplink already and "
                            "isolation would only stop the others training; add --defence secure-aggregation "
                            "(or drop isolate=true)")

    # -- what a plugin writes ---------------------------------------------------------------
    def send(self, rnd: int, victim: int, server: State, honest: Downlinks) -> Downlinks:
        """The downlinks of an acting round, given the honest ones and the victim it picked."""
        raise NotImplementedError

    def read(self, seen: Exchange) -> Readout:
        """The victim's images from one acting round as the server holds it."""
        raise NotImplementedError

    def wire_schema(self) -> dict[str, dict[str, tuple[int, ...]]]:
        """Tensors it adds to the wire beyond the method's schema ({"downlink": ..., "uplink": ...})."""
        return {}

    # -- what the base class does -------------------------------------------------------------
    def act(self, rnd: int, sampled: list[int], server: State, honest: Downlinks) -> Downlinks | None:
        """The round's downlinks if it acts in round `rnd`, else None (the honest ones go out)."""
        if rnd not in parse_rounds(self.settings.rounds, self.knowledge.rounds if self.knowledge else rnd):
            return None
        victim = self.pick_victim(sampled)
        if victim is None:
            return None
        sent = self.send(rnd, victim, server, honest)
        targets = [victim] if self.isolates else list(sampled)
        self.acted.append({"round": rnd, "victim": victim, "targets": targets})
        return sent

    def pick_victim(self, sampled: list[int]) -> int | None:
        if self.settings.victim >= 0:
            return self.settings.victim if self.settings.victim in sampled else None
        done = {a["victim"] for a in self.acted}
        fresh = [k for k in sampled if k not in done]
        return fresh[0] if fresh else None

    def after_round(self, rnd: int, before: State, after: State) -> State:
        """The server's state after an acting round: the honest model it had before, so the
        federation trains on as if the round had not happened (the clients' work is discarded)."""
        return before

    def describe(self) -> dict[str, Any]:
        """What results carry as `run["active_adversary"]`: its name and typed settings."""
        return {"name": self.name, "settings": dataclasses.asdict(self.settings)}

    def record(self) -> dict[str, Any]:
        """What the manifest records: `describe()`, the paper, what it sends and when it acted."""
        return {**self.describe(), "paper": self.paper, "acts": self.acts, "acted": self.acted}

    def acted_on(self, client: int) -> dict[str, Any] | None:
        """The first acting round in which `client` was one of its targets, or None."""
        return next((a for a in self.acted if client in a["targets"]), None)


def parse_rounds(text: str, last: int) -> set[int]:
    """"1", "1-12", "2+5+9" (or "2,5,9" in a file) or "all" (1..last) as a set of round numbers."""
    text = str(text).strip()
    if text == "all":
        return set(range(1, last + 1))
    rounds: set[int] = set()
    for part in filter(None, (p.strip() for p in text.replace("+", ",").split(","))):
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()) or int(lo) < 1:
            raise UserError(f"rounds={text!r}: write rounds as 1, 1-12, 2+5+9 or all")
        rounds.update(range(int(lo), int(hi if sep else lo) + 1))
    if not rounds:
        raise UserError(f"rounds={text!r} names no round; e.g. rounds=1 or rounds=1-12")
    return rounds


def parse_active(text: str) -> dict[str, Any]:
    """`imprint:bins=500,rounds=1-3` -> {"name": "imprint", "settings": {...}} (typed)."""
    name, settings = named_settings(text, "--active", "imprint:bins=500")
    return normalise_active({"name": name, "settings": settings})


def normalise_active(entry: Any) -> dict[str, Any]:
    """An adversary entry with every setting typed and its default explicit (for specs, manifests)."""
    cls, settings = _typed(entry)
    return {"name": cls.name, "settings": dataclasses.asdict(settings)}


def build_active(entry: dict[str, Any], target: Target, knowledge: ServerKnowledge | None) -> ActiveThreatModel:
    cls, settings = _typed(entry)
    return cls(settings, target, knowledge)


def _typed(entry: Any) -> tuple[type[ActiveThreatModel], Any]:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise UserError(f"an active adversary entry must name its threat model, got {entry!r}")
    cls = ACTIVE.get(entry["name"])
    settings = entry.get("settings", {})
    if not isinstance(settings, dict):
        raise UserError(f"active adversary {cls.name}: settings must be a table of key = value")
    return cls, build_dataclass(cls.Settings, settings, f"active threat model {cls.name}")
