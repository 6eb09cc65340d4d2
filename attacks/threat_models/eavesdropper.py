"""`eavesdropper`: one client's channel, both directions, every recorded round.

The seeds' adversary: "updates are intercepted" on the way between one client and the server.
It sees what the server sent the victim and what the victim sent back, nothing else.
"""

from __future__ import annotations

from fedattack.attacks.threat_models.base import RunFacts, ThreatModel
from fedattack.attacks.view import Channel, Knows


class Eavesdropper(ThreatModel):
    """Intercepts the victim's channel: every downlink to it and every uplink from it."""

    name = "eavesdropper"
    observes = "the victim's channel, both directions, every recorded round"
    knows = Knows(local_samples=True)  # the victim's size and class mix: Shokri et al.'s assumption

    def channels(self, victim: int, facts: RunFacts) -> list[Channel]:
        return [Channel(victim, "downlink"), Channel(victim, "uplink")]
