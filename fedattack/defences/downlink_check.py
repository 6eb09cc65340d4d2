"""A client that looks at the model before it trains on it: refuse a suspicious downlink.

An active server attacks through the model it sends (`fedattack.federation.active`). A client
can check what it receives against what it knows: the method's architecture (the protocol fixes
the names and shapes of the downlink's tensors) and the last downlink it received. This check
refuses a downlink that
  - carries a tensor the method's wire schema does not declare, or one of another shape (a
    module put in front of the model, Fowl et al. 2022);
  - holds a weight (a tensor of two or more dimensions) that is all zeros or has all rows equal
    (a suppressed model, Pasquini et al. 2022; a layer of identical units);
  - changed a weight by more than `max_change` of its norm since the last downlink this client
    received (values replaced wholesale: trap weights, Boenisch et al. 2023), which honest
    training does slowly; a client's first downlink has nothing to compare with.
A refusing client sends back an update of zeros (its downlink, for a method that sends models),
which tells the server nothing about its data; the manifest counts every refusal and its reason
(`accounting`). What it cannot see: a downlink that is the honest model, however the others'
differ (model inconsistency's victim), and anything in a client's first downlink that keeps the
architecture. It runs client side, before the uplink is masked, so it must come before
`secure-aggregation` in the list of defences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from fedattack.defences._update import update_of, with_update
from fedattack.defences.base import Defence
from fedattack.registry import UserError
from fedattack.target import ClientContext, Target
from fedattack.wire import Payload


@dataclass(frozen=True, kw_only=True)
class CheckSettings:
    """max_change: the largest relative L2 change of a weight against this client's last downlink."""

    max_change: float = 1.0

    def __post_init__(self) -> None:
        if not self.max_change > 0:
            raise UserError(f"downlink-check max_change={self.max_change} must be > 0")


class DownlinkCheck(Defence):
    """Refuses (sends a zero update for) a downlink whose architecture or weights look tampered with."""

    name = "downlink-check"
    Settings = CheckSettings

    def __init__(self, settings: Any, ctx: Any) -> None:
        super().__init__(settings, ctx)
        self.schema: dict[str, tuple[int, ...]] = {}
        self.last: dict[int, Payload] = {}  # what each client received last (its own memory)
        self.refused: list[dict[str, Any]] = []
        self.checked = 0

    def bind(self, target: Target) -> None:
        self.schema = {n: tuple(s) for n, s in target.wire_schema().downlink.items()}

    def on_uplink(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        self.checked += 1
        why = self.suspicious(down, self.last.get(ctx.client))
        self.last[ctx.client] = {n: t.detach().clone() for n, t in down.items() if n in self.schema}
        if why is None:
            return up
        self.refused.append({"round": ctx.round, "client": ctx.client, "why": why})
        return with_update(up, down, {n: torch.zeros_like(t) for n, t in update_of(up, down).items()})

    def suspicious(self, down: Payload, last: Payload | None) -> str | None:
        """Why this downlink is refused (None: it is accepted)."""
        for name, t in down.items():
            if name not in self.schema:
                return f"{name} is not in the method's model"
            if tuple(t.shape) != self.schema[name]:
                return f"{name} has shape {list(t.shape)}, the method's is {list(self.schema[name])}"
        for name, t in down.items():
            if t.dim() < 2 or not t.is_floating_point():
                continue
            rows = t.flatten(1)
            if not bool(rows.any()) or bool((rows == rows[:1]).all()):
                return f"{name} is all zeros or has all rows equal"
            before = None if last is None else last.get(name)
            if before is not None and float((t - before).norm()) > self.settings.max_change * float(before.norm()):
                return f"{name} changed by more than {self.settings.max_change:g} of its norm since the last round"
        return None

    def accounting(self) -> dict[str, Any]:
        reasons: dict[str, int] = {}
        for entry in self.refused:
            kind = entry["why"].split(" ", 1)[1] if " " in entry["why"] else entry["why"]
            reasons[kind] = reasons.get(kind, 0) + 1
        return {"checked": self.checked, "refused": len(self.refused), "reasons": reasons,
                "refusals": self.refused[:100]}
