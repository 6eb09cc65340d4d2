"""A passive observer of the global model, as most federated membership papers assume: one file."""

from __future__ import annotations

from fedattack.attacks.threat_models.base import BROADCAST_MODEL, RunFacts, ThreatModel
from fedattack.attacks.view import Channel, Knows


class BroadcastObserver(ThreatModel):
    """Sees every model the server broadcast, and no client's uplink."""

    name = "broadcast-observer"
    observes = "every model the server broadcast, to any client (no uplink)"
    knows = Knows(every_client=True)  # the broadcast reaches every client: it reads what they received
    attacks = BROADCAST_MODEL

    def channels(self, victim: int, facts: RunFacts) -> list[Channel]:
        return [Channel(None, "downlink")]
