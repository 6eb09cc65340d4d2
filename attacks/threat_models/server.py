"""`server`: an honest-but-curious server.

It follows the protocol but keeps everything it receives: every uplink of every client and
round. It also knows what it broadcast, so the downlinks are part of its view.
"""

from __future__ import annotations

from fedattack.attacks.threat_models.base import RunFacts, ThreatModel
from fedattack.attacks.view import Channel, Knows


class Server(ThreatModel):
    """Honest-but-curious server: every uplink of every round, and its own downlinks."""

    name = "server"
    observes = "every uplink of every client and round, and the downlinks it sent"
    knows = Knows(every_client=True, local_samples=True)  # sizes and class mixes: Shokri et al.'s assumption

    def channels(self, victim: int, facts: RunFacts) -> list[Channel]:
        return [Channel(None, "uplink"), Channel(None, "downlink")]
