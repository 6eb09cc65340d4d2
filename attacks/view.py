"""What the adversary has: its view of the wire, and what it knows besides.

These are the only inputs an attack's `run` receives. Ground truth (who is a member, the
victim's real images, its private state) lives in `fedattack.attacks.truth` and is a different
type, handed only to scorers after the attack has made its guesses. The one deliberate
exception is the oracle's `deployed` model, an upper bound labelled as such everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fedattack.attacks.data import Samples
from fedattack.target import State, Target
from fedattack.wire import Payload, Transcript


@dataclass(frozen=True)
class Channel:
    """Messages an adversary observes: one client's (or every client's) messages of one kind."""

    client: int | None  # None: every client
    kind: str  # "downlink" or "uplink"
    rounds: frozenset[int] | None = None  # None: every recorded round

    def admits(self, entry: dict[str, Any]) -> bool:
        client = entry["receiver"] if entry["kind"] == "downlink" else entry["sender"]
        return ((self.client is None or client == self.client) and entry["kind"] == self.kind
                and (self.rounds is None or entry["round"] in self.rounds))


@dataclass(frozen=True)
class Observation:
    """One client's model-bearing messages of one round, and (oracle only) its deployed model.

    This is what a reconstruction strategy turns into a queryable model; shadow models produce
    the same shape, so the adversary reconstructs them exactly as it reconstructs the victim.
    """

    round: int | None = None
    down: Payload | None = None
    up: Payload | None = None
    deployed: State | None = None

    def parts(self) -> frozenset[str]:
        return frozenset(n for n in ("down", "up", "deployed") if getattr(self, n) is not None)


@dataclass
class View:
    """The messages a threat model lets the adversary see, read lazily from the run directory."""

    threat_model: str
    victim: int
    target: Target  # the method's public model template (architecture, hyperparameters)
    channels: tuple[Channel, ...]
    reader: Any  # fedattack.federation.transcript_io.TranscriptReader
    deployed: State | None = None
    upper_bound: bool = False

    def entries(self) -> list[dict[str, Any]]:
        """Index entries (round, sender, receiver, kind) of every visible message."""
        return [e for e in self.reader.index if any(ch.admits(e) for ch in self.channels)]

    def messages(self, *, client: int | None = None, kind: str | None = None,
                 rounds: set[int] | None = None) -> Transcript:
        loaded = self.reader.load(client=client, kind=kind, rounds=rounds)
        keep = [m for m in loaded if any(ch.admits(_entry(m)) for ch in self.channels)]
        return Transcript(keep)

    @property
    def empty(self) -> bool:
        return self.deployed is None and not self.entries()

    def observation(self, client: int | None = None) -> Observation:
        """The client's (default: victim's) latest visible uplink round, with that round's downlink."""
        client = self.victim if client is None else client
        seen = [e for e in self.entries() if _client(e) == client]
        up_rounds = sorted(e["round"] for e in seen if e["kind"] == "uplink")
        rnd = up_rounds[-1] if up_rounds else max((e["round"] for e in seen), default=None)
        if rnd is None:
            return Observation(deployed=self.deployed)
        msgs = self.messages(client=client, rounds={rnd})
        down = next((m.payload for m in msgs if m.kind == "downlink"), None)
        up = next((m.payload for m in msgs if m.kind == "uplink"), None)
        return Observation(round=rnd, down=down, up=up, deployed=self.deployed)


@dataclass(frozen=True)
class Knowledge:
    """What the adversary knows besides the wire.

    `aux` is same-distribution data nobody trained on. `queries` are the records a membership
    attack must judge (their class labels are known, their membership is not). The victim's
    data size and class counts are the standard shadow-model assumption (Shokri et al. 2017: the
    attacker knows the training data's size and distribution); every result says so.
    """

    aux: Samples
    queries: Samples
    victim_size: int
    victim_class_counts: list[int]
    assumptions: str = ("the method, its hyperparameters, model architecture and training recipe "
                        "(the public protocol); the victim's training-set size and class counts")


def _client(entry: dict[str, Any]) -> int:
    return entry["receiver"] if entry["kind"] == "downlink" else entry["sender"]


def _entry(msg: Any) -> dict[str, Any]:
    return {"round": msg.round, "sender": msg.sender, "receiver": msg.receiver, "kind": msg.kind}
