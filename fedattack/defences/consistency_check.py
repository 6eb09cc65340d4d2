"""Clients that compare what they received: refuse a downlink that differs from the round's others.

Model inconsistency (Pasquini et al. 2022) and a LOKI-style server (each client its own units,
Zhao et al. 2024) defeat secure aggregation by sending different clients different models. No
client can see that alone: the victim's model may be the honest one (`downlink-check` and
`layer-check` pass it). Clients that compare notes can. Here every client sampled in a round
computes a digest (SHA-256) of its downlink, every tensor's bytes in name order, except the
method's own protocol state (the downlink tensors its wire schema declares that are not model
weights, `Target.downlink_weights`: control variates, WAFFLE's per-agent zero-weight flag), which
may differ between clients honestly; a tensor the method does not declare is always compared), and
the round's clients gossip their digests; a client refuses when its own digest is not the one
more than half the round received (`quorum`; with no strict majority every client refuses).

What it assumes, plainly:
  - the clients of a round can exchange digests over a channel the server cannot forge or
    filter: authenticated by keys the server does not issue (a PKI, or keys verified out of
    band). Secure aggregation's own key agreement (Bonawitz et al. 2017) is relayed by the
    server, which without such certification could show each client a different set of peers;
  - the method sends every client of a round the same downlink (FedAvg, FedProx, SCAFFOLD, ...).
    A method that personalises what it sends is refused in one line when the federation is built
    (its honest rounds would all be alarms);
  - the server does not fill a round with clients of its own (Sybils), who would vouch for it;
  - a round of one client compares with nobody and passes.
What it cannot see: an attack that sends every client the same model (the imprint or trap
weights broadcast to all, without isolation). In this simulation the gossip is the defence's
`on_downlinks` hook, which sees the round's downlinks before anyone trains.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from fedattack.defences.downlink_check import DownlinkCheck
from fedattack.registry import UserError
from fedattack.rng import generator
from fedattack.target import Target
from fedattack.wire import Payload


@dataclass(frozen=True, kw_only=True)
class ConsistencySettings:
    """quorum: a client accepts when more than this share of the round's clients (itself included)
    received exactly its downlink (0.5: a strict majority; 1: never, which only tests use)."""

    quorum: float = 0.5

    def __post_init__(self) -> None:
        if not 0.5 <= self.quorum <= 1.0:
            raise UserError(f"consistency-check quorum={self.quorum} must be in [0.5, 1]")


class ConsistencyCheck(DownlinkCheck):
    """Refuses a downlink whose digest is not the one the round's majority received."""

    name = "consistency-check"
    Settings = ConsistencySettings  # type: ignore[assignment]  # its own settings, not downlink-check's
    compares_clients = True  # the round's digests, over a channel among its clients

    def __init__(self, settings: object, ctx: object) -> None:
        super().__init__(settings, ctx)
        self.digests: dict[int, dict[int, str]] = {}  # round -> client -> digest (the gossip)
        self.state: frozenset[str] = frozenset()  # set by bind

    def bind(self, target: Target) -> None:
        self.schema = {n: tuple(s) for n, s in target.wire_schema().downlink.items()}
        self.weights = frozenset(target.downlink_weights())
        self.state = frozenset(self.schema) - self.weights  # the method's own non-model tensors
        server = target.init_server(generator(target.ctx.seed, "defence:consistency-check:bind"))
        first = {k: digest(self.model(target.broadcast(server, k, 1))) for k in range(target.ctx.num_clients)}
        if len(set(first.values())) > 1:
            raise UserError(f"consistency-check needs a method that sends every client the same downlink, and "
                            f"{target.name} sends its {target.ctx.num_clients} clients {len(set(first.values()))} "
                            "different ones in its first round, so every honest round would be an alarm; drop the "
                            "check for this method")

    def on_downlinks(self, rnd: int, downlinks: Mapping[int, Payload]) -> None:
        self.on_gossip(rnd, {k: self.gossip(p) for k, p in downlinks.items() if p})

    def gossip(self, down: Payload) -> str:
        return digest(self.model(down))

    def on_gossip(self, rnd: int, told: Mapping[int, str]) -> None:
        self.digests[rnd] = dict(told)
        for old in [r for r in self.digests if r < rnd - 1]:
            del self.digests[old]

    def judge(self, down: Payload, client: int, rnd: int) -> str | None:
        return self.judge_gossip(self.gossip(down), client, rnd)

    def judge_gossip(self, own: str, client: int, rnd: int) -> str | None:
        return self.disagrees(own, self.digests.get(rnd, {}), self.settings.quorum)

    def model(self, down: Payload) -> Payload:
        """The part of a downlink every client of an honest round receives alike: the model. (Under
        WAFFLE's stabilised reading an agent whose weight fell to zero is told so in its downlink
        alone; comparing whole downlinks raised 26 alarms in 200 honest digits downlinks.)"""
        return {n: t for n, t in down.items() if n not in self.state}  # anything else is compared

    @staticmethod
    def kind(why: str) -> str:
        """Counted without its numbers (the parenthesis) or the tensor's name."""
        return DownlinkCheck.kind(why).split(" (")[0]

    def suspicious(self, down: Payload, last: Payload | None) -> str | None:
        return None  # alone, a downlink has nothing to disagree with

    @staticmethod
    def disagrees(own: str, gossip: Mapping[int, str], quorum: float = 0.5) -> str | None:
        """Why a client holding digest `own` refuses, given the round's gossiped digests."""
        if len(gossip) < 2:
            return None
        counts = Counter(gossip.values())
        if counts[own] > quorum * len(gossip):
            return None
        return (f"downlink differs from what the others of the round received ({counts[own]} of {len(gossip)} "
                f"clients got this one, {len(counts)} different downlinks)")


def digest(payload: Payload) -> str:
    """SHA-256 of a downlink: every tensor's name, dtype, shape and bytes, in name order. The
    bytes are hashed where they lie (no copy of a tensor of hundreds of MB per downlink)."""
    h = hashlib.sha256()
    for name in sorted(payload):
        t = payload[name].detach().contiguous().cpu()
        h.update(f"{name}:{t.dtype}:{list(t.shape)};".encode())
        h.update(t.numpy().reshape(-1).view("u1").data)
    return h.hexdigest()
