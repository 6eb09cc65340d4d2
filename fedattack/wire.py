"""What crosses the network: typed messages, the transcript, and the recording policy.

The round loop, never a method, creates these records from what `broadcast` and
`client_update` return, so the transcript is exactly what an eavesdropper would see and a
method cannot put anything else on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import torch

from fedattack.registry import UserError
from fedattack.suggest import did_you_mean

Payload = dict[str, torch.Tensor]
SERVER = -1
Direction = Literal["downlink", "uplink"]


@dataclass(frozen=True)
class Message:
    """One message: who sent it to whom in which round, and its named tensors.

    `samples` is the sample count a client reports beside its update (FedAvg's n_k, which the
    server weighs by); None on downlinks and where a method sends none.
    """

    round: int
    sender: int
    receiver: int
    kind: Direction
    payload: Payload
    samples: int | None = None

    @property
    def client(self) -> int:
        return self.receiver if self.kind == "downlink" else self.sender

    @property
    def nbytes(self) -> int:
        return payload_bytes(self.payload)


def payload_bytes(payload: Payload) -> int:
    return sum(t.numel() * t.element_size() for t in payload.values())


def update_by_names(up: Payload, down: Payload) -> Payload:
    """What a client changed, read from the names alone (`Target.uplink_update`'s default).

    A tensor sent under a name the downlink also carries, with its shape, is a model the client
    trained from that downlink, so its update is `up - down` (FedAvg, FedProx, FedPer, APFL,
    pFedMe, CGAU, WAFFLe); a tensor only the uplink carries is an update already, under its
    method's own name (SCAFFOLD's dy and dc, Ditto's and q-FFL's delta, Weight Erosion's
    g = update / lr, q-FFL's h), taken as it is. Only floating-point tensors are an update.
    """
    return {n: t - down[n] if _paired(n, t, down) else t
            for n, t in up.items() if t.is_floating_point()}


def with_update_by_names(up: Payload, down: Payload, update: Payload) -> Payload:
    """The uplink that carries `update` (the inverse of `update_by_names`; other tensors unchanged)."""
    return {**up, **{n: down[n] + u if _paired(n, up[n], down) else u for n, u in update.items()}}


def _paired(name: str, tensor: torch.Tensor, down: Payload) -> bool:
    return name in down and down[name].shape == tensor.shape


@dataclass
class Transcript:
    """The recorded messages, in the order they crossed the wire."""

    messages: list[Message] = field(default_factory=list)

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    def select(
        self, *, client: int | None = None, kind: str | None = None, rounds: set[int] | None = None
    ) -> Transcript:
        """The messages of one client's channel, one direction, or some rounds."""
        keep = [
            m
            for m in self.messages
            if (client is None or m.client == client)
            and (kind is None or m.kind == kind)
            and (rounds is None or m.round in rounds)
        ]
        return Transcript(keep)

    def rounds(self) -> list[int]:
        return sorted({m.round for m in self.messages})

    def last(self) -> Message | None:
        return self.messages[-1] if self.messages else None


POLICIES = ("all", "none", "auto", "final-per-client", "last:K", "every:K")  # as a user spells them


@dataclass(frozen=True)
class RecordingPolicy:
    """Which rounds of the wire are kept on disk.

    `all` keeps every message; `last:K` the last K rounds; `every:K` every K-th round and the
    last; `final-per-client` each client's last round of participation (both directions);
    `none` nothing. `auto` is `all` unless the estimate exceeds `auto_limit_bytes`, then
    `final-per-client`; the manifest records which policy was applied.
    """

    spec: str = "auto"
    auto_limit_bytes: int = 256 * 2**20

    def resolve(self, estimated_bytes: int) -> RecordingPolicy:
        self.validate()
        if self.spec != "auto":
            return self
        return RecordingPolicy("all" if estimated_bytes <= self.auto_limit_bytes else "final-per-client")

    def validate(self) -> None:
        head, _, arg = self.spec.partition(":")
        if head in {"all", "none", "auto", "final-per-client"} and not arg:
            return
        if head in {"last", "every"} and arg.isdigit() and int(arg) > 0:
            return
        raise UserError(
            f"unknown recording policy {self.spec!r}{did_you_mean(self.spec, POLICIES)}; "
            "use all, none, auto, final-per-client, last:K or every:K"
        )

    @property
    def per_client_final(self) -> bool:
        return self.spec == "final-per-client"

    def keeps_round(self, rnd: int, total_rounds: int) -> bool:
        """Whether messages of round `rnd` (1-based) are kept under a round-based policy."""
        head, _, arg = self.spec.partition(":")
        if head in {"all", "final-per-client"}:
            return True
        if head == "none":
            return False
        if head == "last":
            return rnd > total_rounds - int(arg)
        return rnd % int(arg) == 0 or rnd == total_rounds
