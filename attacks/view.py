"""What the adversary has: its view of the wire, and what it knows besides.

These are the only inputs an attack's `run` receives. Ground truth (who is a member, the
victim's real images, its private state) lives in `fedattack.attacks.evaluation.truth` and is a different
type, handed only to scorers after the attack has made its guesses. The one deliberate
exception is the oracle's `deployed` model, an upper bound labelled as such everywhere.

The view reads the run directory through a `Wire`: the messages its channels admit, and
nothing else of the folder. It holds no path (the transcript is read through fedattack's own
reader, which the wire names by a number), so nothing an attack is handed leads to the
clients' private state, the partition, or the seed secure aggregation's masks derive from; its
method (`View.target`) is rebuilt with that seed withheld (`Federation.target`). This keeps an
attack to what its threat model sees; it is not a sandbox (code in the same process can
import anything), which an untrusted plugin would need a process of its own for.
"""

from __future__ import annotations

import dataclasses
import itertools
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from fedattack.attacks.evaluation.data import Samples
from fedattack.target import State, Target
from fedattack.wire import Payload, Transcript

if TYPE_CHECKING:
    from fedattack.federation.transcript_io import TranscriptReader


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


ENTRY_FIELDS = ("round", "sender", "receiver", "kind", "samples")  # what a wire's index says of a message
_READERS: dict[int, TranscriptReader] = {}  # the transcripts wires read, by their handle (see `Wire`)
_HANDLES = itertools.count()


class Wire:
    """The recorded messages some channels admit, read lazily: all of a run directory that a
    `View` reads. `index` lists the admitted messages (round, sender, receiver, kind, samples);
    `load` returns them, and only them. The transcript's reader stays fedattack's: the wire
    names it by a handle, released when the wire is, so no object an attack is handed holds a
    path into the run directory."""

    def __init__(self, reader: TranscriptReader, channels: tuple[Channel, ...]) -> None:
        self.channels = channels
        self.index: tuple[dict[str, Any], ...] = tuple(
            {k: e.get(k) for k in ENTRY_FIELDS} for e in reader.index if any(ch.admits(e) for ch in channels))
        self._handle = next(_HANDLES)
        _READERS[self._handle] = reader
        weakref.finalize(self, _READERS.pop, self._handle, None)

    def load(self, *, client: int | None = None, kind: str | None = None,
             rounds: set[int] | None = None) -> Transcript:
        """The admitted messages of `client`, `kind` and `rounds` (None: any), as recorded."""
        loaded = _READERS[self._handle].load(client=client, kind=kind, rounds=rounds)
        return Transcript([m for m in loaded if any(ch.admits(_entry(m)) for ch in self.channels)])

    def __repr__(self) -> str:
        return f"Wire({len(self.index)} messages through {len(self.channels)} channel(s))"


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
    """The messages a threat model lets the adversary see, read lazily through its `Wire`."""

    threat_model: str
    victim: int
    target: Target  # the method's public model template (architecture, hyperparameters; no seed)
    wire: Wire
    deployed: State | None = None
    held: dict[str, State] = dataclasses.field(default_factory=dict)  # upper bound: each model the victim held
    upper_bound: bool = False
    active: dict[str, Any] | None = None  # the run's active server as its manifest records it (what it did)

    @property
    def channels(self) -> tuple[Channel, ...]:
        return self.wire.channels

    def entries(self) -> list[dict[str, Any]]:
        """Index entries (round, sender, receiver, kind, samples) of every visible message."""
        return list(self.wire.index)

    def messages(self, *, client: int | None = None, kind: str | None = None,
                 rounds: set[int] | None = None) -> Transcript:
        return self.wire.load(client=client, kind=kind, rounds=rounds)

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


@dataclass(frozen=True, kw_only=True)
class Knows:
    """What a threat model's adversary knows besides the wire (declared by the threat model).

    aux_source: where its auxiliary data comes from (the test split is the one source no client
    trained on). aux_size: how many auxiliary samples it holds (None: the evaluation's
    `--aux-size`, by default 40% of the test split). labels: the classes of the queries and of
    the auxiliary data. recipe: the victims' local training recipe (epochs, batch size, rate).
    local_samples: the victim's number of training samples and (with labels) its class counts,
    an assumption about the victim that no message carries whole, so granted only where a
    threat model declares it (the built-in ones do: Shokri et al.'s standard assumption, under
    which docs/ measures; a plugin's adversary does not know them unless it says so).
    every_client: whether it may use other clients' messages (a server may; an eavesdropper on
    one channel may not).
    """

    aux_source: str = "test split"
    aux_size: int | None = None
    labels: bool = True
    recipe: bool = True
    local_samples: bool = False
    every_client: bool = False

    def describe(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Knowledge:
    """What the adversary knows besides the wire, as its threat model's `Knows` allows.

    `aux` is same-distribution data nobody trained on. `queries` are the records a membership
    attack must judge (their membership is not known). With `labels_known` False neither carries
    its true labels (`y` is `UNKNOWN_LABEL`). The victim's data size and class counts are the
    shadow-model assumption (Shokri et al. 2017: the attacker knows the training data's size and
    distribution), handed over only where the threat model grants `local_samples` (`granted`
    names it, and results carry it); otherwise they are None and [].
    """

    aux: Samples
    queries: Samples
    victim_size: int | None
    victim_class_counts: list[int]
    labels_known: bool = True
    recipe_known: bool = True
    member_share: float = 0.5  # the protocol's share of members among the queries (public)
    assumptions: str = ("the method, its hyperparameters, model architecture and training recipe "
                        "(the public protocol); the victim's training-set size and class counts")
    granted: tuple[str, ...] = ()  # the assumptions about the victim its threat model granted

    def describe(self) -> dict[str, Any]:
        return {"assumptions": self.assumptions, "granted": list(self.granted), "aux": len(self.aux),
                "victim_size": self.victim_size, "victim_class_counts": self.victim_class_counts,
                "labels_known": self.labels_known, "recipe_known": self.recipe_known,
                "member_share": round(self.member_share, 4)}

    def for_attack(self, requires: frozenset[str]) -> Knowledge:
        """What an attack that `requires` these inputs is handed: the membership queries (which
        hold the victim's own training records) only to an attack that judges them."""
        if "queries" in requires:
            return self
        return dataclasses.replace(self, queries=Samples.empty_like(self.queries))

    def as_known_by(self, knows: Knows) -> Knowledge:
        """What of this (complete, scorer's side) knowledge an adversary with `knows` is handed:
        the victim's size and class counts only where `knows.local_samples` grants them."""
        aux = self.aux if knows.aux_size is None else self.aux.take(torch.arange(min(knows.aux_size, len(self.aux))))
        queries = self.queries
        if not knows.labels:
            aux, queries = without_labels(aux), without_labels(queries)
        sized = knows.local_samples and knows.labels  # class counts are label knowledge too
        granted = ("local_samples",) if knows.local_samples else ()
        return Knowledge(aux=aux, queries=queries, victim_size=self.victim_size if knows.local_samples else None,
                         victim_class_counts=list(self.victim_class_counts) if sized else [],
                         labels_known=knows.labels, recipe_known=knows.recipe, member_share=self.member_share,
                         assumptions=assumptions(knows), granted=granted)


UNKNOWN_LABEL = -1


def without_labels(samples: Samples) -> Samples:
    """The samples with every label replaced by `UNKNOWN_LABEL` (labels not handed over)."""
    return Samples(samples.x, torch.full_like(samples.y, UNKNOWN_LABEL))


def assumptions(knows: Knows) -> str:
    """One sentence for results: what the adversary is assumed to know besides the wire."""
    parts = ["the method, its hyperparameters and model architecture (the public protocol)"]
    if knows.recipe:
        parts.append("the local training recipe")
    if knows.local_samples:
        parts.append("the victim's training-set size" + (" and class counts" if knows.labels else ""))
    parts.append("the labels of its queries and auxiliary data" if knows.labels else "no labels")
    return "; ".join(parts)


def _client(entry: dict[str, Any]) -> int:
    return entry["receiver"] if entry["kind"] == "downlink" else entry["sender"]


def _entry(msg: Any) -> dict[str, Any]:
    return {"round": msg.round, "sender": msg.sender, "receiver": msg.receiver, "kind": msg.kind}
