"""A client that looks at the model before it trains on it: refuse a suspicious downlink.

An active server attacks through the model it sends (`fedattack.federation.active`). A client
can check what it receives against what it knows: the method's protocol (the names and shapes of
the downlink's tensors, its wire schema), which of those tensors are the model it trains from
(`Target.downlink_weights`: the rest is the protocol's state, SCAFFOLD's control variates, zero
until a round moves them), and the last downlink it accepted. This check refuses a downlink that
  - carries a tensor the method's wire schema does not declare, or one of another shape (a
    module put in front of the model, Fowl et al. 2022);
  - holds a model weight (a tensor of two or more dimensions) that is all zeros or has all rows
    equal (a suppressed model, Pasquini et al. 2022; a layer of identical units);
  - holds a model weight whose rows turned away from the same rows of the last downlink this
    client accepted: their mean cosine is below `min_similarity` (values replaced wholesale: trap
    weights, Boenisch et al. 2023). Honest training turns rows slowly (the lowest mean cosine
    measured on honest federations is in docs/active-server.md); a cosine does not care how the
    server scales what it sends. A client's first downlink has nothing to compare with.
A refusing client sends back an update of zeros (its downlink, for a method that sends models),
which tells the server nothing about its data; the manifest counts every refusal and its reason
(`accounting`). What it cannot see: a downlink that is the honest model, however the others'
differ (model inconsistency's victim), and anything in a client's first downlink that keeps the
architecture. It runs client side, before the uplink is masked, so it must come before
`secure-aggregation` in the list of defences.

A method whose own opening downlink it would refuse (a weight that starts at zero, a protocol
tensor outside the schema) is refused in one line when the federation is built: its clients would
refuse every round and the federation would train nothing, which no run should report as defended.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from fedattack.defences._update import update_of, with_update
from fedattack.defences.base import Defence
from fedattack.registry import UserError
from fedattack.rng import generator
from fedattack.target import ClientContext, Target
from fedattack.wire import Payload

REFUSALS_KEPT = 100  # the manifest lists this many refusals (it counts all of them)


@dataclass(frozen=True, kw_only=True)
class CheckSettings:
    """min_similarity: the least mean cosine between a weight's rows and the same rows of this
    client's last accepted downlink."""

    min_similarity: float = 0.5

    def __post_init__(self) -> None:
        if not -1.0 <= self.min_similarity < 1.0:
            raise UserError(f"downlink-check min_similarity={self.min_similarity} must be in [-1, 1)")


class DownlinkCheck(Defence):
    """Refuses (sends a zero update for) a downlink whose architecture or weights look tampered with."""

    name = "downlink-check"
    Settings = CheckSettings
    # True for a check that needs the round's other clients' downlinks (gossiped among them), which
    # one client alone cannot run; reports say so beside its rate
    compares_clients: ClassVar[bool] = False

    def __init__(self, settings: Any, ctx: Any) -> None:
        super().__init__(settings, ctx)
        self.schema: dict[str, tuple[int, ...]] = {}
        self.weights: frozenset[str] = frozenset()  # the downlink tensors that are the model
        self.last: dict[int, Payload] = {}  # the last downlink each client accepted (its own memory)
        self.refused: list[dict[str, Any]] = []
        self.checked = 0

    def bind(self, target: Target) -> None:
        self.schema = {n: tuple(s) for n, s in target.wire_schema().downlink.items()}
        self.weights = frozenset(target.downlink_weights())
        why = self.opening(target)
        if why is not None:
            raise UserError(f"{self.name} would refuse {target.name}'s own first downlink ({why}), so every "
                            "client would refuse every round and the federation would train nothing; drop the "
                            "check for this method (a method declares which downlink tensors are its model in "
                            "Target.downlink_weights)")

    def opening(self, target: Target) -> str | None:
        """Why the method's own first-round downlinks would be refused (None: they pass), checked
        on a server state of the method's own making, once per distinct payload."""
        server = target.init_server(generator(target.ctx.seed, "defence:downlink-check:bind"))
        seen: set[tuple[int, ...]] = set()
        for client in range(target.ctx.num_clients):
            down = target.broadcast(server, client, 1)
            key = tuple(id(t) for t in down.values())
            if key not in seen:
                seen.add(key)
                why = self.suspicious(down, None)
                if why is not None:
                    return why
        return None

    def on_uplink(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        self.checked += 1
        why = self.accept(down, ctx.client, ctx.round)
        if why is None:
            return up
        self.refused.append({"round": ctx.round, "client": ctx.client, "why": why})
        return with_update(up, down, {n: torch.zeros_like(t) for n, t in update_of(up, down).items()})

    def accept(self, down: Payload, client: int, rnd: int) -> str | None:
        """Judge the downlink and, if it passes, remember it as this client's last accepted one
        (a refused downlink is not the client's model: it compares with the last it took)."""
        why = self.judge(down, client, rnd)
        if why is None:
            self.last[client] = {n: t.detach().clone() for n, t in down.items() if n in self.weights}
        return why

    def judge(self, down: Payload, client: int, rnd: int) -> str | None:
        """Why client `client` refuses this downlink of round `rnd` (None: it accepts it), by
        what that client knows: here its last accepted downlink. A stronger check that knows
        more (the round's other downlinks, `consistency-check`) overrides this."""
        return self.suspicious(down, self.last.get(client))

    def gossip(self, down: Payload) -> str:
        """What a client running a check that compares clients tells the round's others of its
        downlink (`consistency-check`: its digest). Computed once per downlink, so a round's
        downlinks never need to be held together (a LOKI round of 1,000 is 376 GB of them)."""
        raise NotImplementedError(f"{self.name} compares no clients, so a client tells the others nothing")

    def on_gossip(self, rnd: int, told: Mapping[int, str]) -> None:
        """The round's gossip (client -> what it told), before anyone judges: a comparing check's."""
        raise NotImplementedError(f"{self.name} compares no clients")

    def judge_gossip(self, own: str, client: int, rnd: int) -> str | None:
        """`judge` from what the client would tell (`gossip` of its downlink) instead of the
        downlink itself: the same decision, without the tensors."""
        raise NotImplementedError(f"{self.name} compares no clients")

    def suspicious(self, down: Payload, last: Payload | None) -> str | None:
        """Why this downlink is refused (None: it is accepted)."""
        for name, t in down.items():
            if name not in self.schema:
                return f"{name} is not in the method's model"
            if tuple(t.shape) != self.schema[name]:
                return f"{name} has shape {list(t.shape)}, the method's is {list(self.schema[name])}"
        for name, t in down.items():
            if name not in self.weights or t.dim() < 2 or not t.is_floating_point():
                continue
            rows = t.flatten(1)
            if not bool(rows.any()) or bool((rows == rows[:1]).all()):
                return f"{name} is all zeros or has all rows equal"
            before = None if last is None else last.get(name)
            if before is not None and similarity(rows, before.flatten(1)) < self.settings.min_similarity:
                return f"{name} turned away from the last downlink this client accepted (rows' mean cosine below " \
                       f"{self.settings.min_similarity:g})"
        return None

    def accounting(self) -> dict[str, Any]:
        reasons: dict[str, int] = {}
        for entry in self.refused:
            kind = self.kind(entry["why"])
            reasons[kind] = reasons.get(kind, 0) + 1
        return {"checked": self.checked, "refused": len(self.refused), "reasons": reasons,
                "refusals": self.refused[:REFUSALS_KEPT]}

    @staticmethod
    def kind(why: str) -> str:
        """The reason a refusal is counted under: its words after the tensor's name."""
        return why.split(" ", 1)[1] if " " in why else why


def similarity(rows: torch.Tensor, before: torch.Tensor) -> float:
    """The mean cosine between each row and the same row before."""
    return float(torch.nn.functional.cosine_similarity(rows.double(), before.double(), dim=1).mean())
