"""Update clipping alone: every client's update leaves it with an L2 norm of at most max_norm.

The update is the uplink relative to the downlink (`fedattack.defences._update`): for a method
that sends models, the trained model minus the model received; for one that sends an update
under its own name (SCAFFOLD's dy and dc, Ditto's delta, Weight Erosion's gradient), that
update as it is sent. Clipping bounds what one client can move the aggregate (robustness to
outliers and poisoning, Sun et al. 2019) and is the first half of DP-FedAvg; on its own it gives
no formal privacy. The recorded uplink is the clipped one.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedattack.defences._update import clipped, l2_norm
from fedattack.defences.base import Defence
from fedattack.registry import UserError
from fedattack.target import ClientContext
from fedattack.wire import Payload


@dataclass(frozen=True, kw_only=True)
class ClipSettings:
    """max_norm: the largest L2 norm a client's update may have on the wire."""

    max_norm: float = 1.0

    def __post_init__(self) -> None:
        if not self.max_norm > 0:
            raise UserError(f"clip max_norm={self.max_norm} must be > 0")


class Clip(Defence):
    """Clips each client's update (uplink relative to downlink) to an L2 norm of max_norm."""

    name = "clip"
    Settings = ClipSettings

    def on_uplink(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        update = self.update_of(up, down)
        if not update or l2_norm(update) <= self.settings.max_norm:
            return up  # as it is, bit for bit
        return self.with_update(up, down, clipped(update, self.settings.max_norm))
