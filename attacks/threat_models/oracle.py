"""`oracle`: every model the victim held, private state included, and everything on the wire.
An UPPER BOUND.

No real adversary of these protocols holds this. The oracle sees what the server sees (every
client's messages) and, besides, every model the victim itself held (`held_models`): its
deployed model, `target.deployed(server state, private state)`, and its local model right after
its last local training (its last uplink merged into that round's downlink, with its private
state: for FedAvg the uplink model itself, for a method with private parts the model the
client had in hand). Each attack runs on each held model and the result keeps, per metric, the
strongest value and which model gave it (`attacks/evaluation/upper_bound.py`), so the bound is at least
what the eavesdropper or the server gets from the same messages: the deployed model alone is
often weaker than the freshly trained uplink the eavesdropper reads. Every result it produces
has `upper_bound=True`.
"""

from __future__ import annotations

from fedattack.attacks.membership.shadow import deployed_alone
from fedattack.attacks.threat_models.base import Holdings, RunFacts, ThreatModel
from fedattack.attacks.view import Channel, Knows, Wire
from fedattack.target import State


class Oracle(ThreatModel):
    """Upper bound: every model the victim held (deployed, local after training), every message."""

    name = "oracle"
    observes = ("every model the victim held, private state included (its deployed model and its "
                "local model after its last training), and every client's messages (upper bound)")
    knows = Knows(every_client=True, local_samples=True)
    upper_bound = True
    attacks_deployed = True

    def channels(self, victim: int, facts: RunFacts) -> list[Channel]:
        return [Channel(None, "downlink"), Channel(None, "uplink")]

    def held_models(self, held: Holdings, wire: Wire, victim: int) -> dict[str, State]:
        """The deployed model and, when the wire kept its last round, the victim's local model."""
        out = {"deployed": held.method.deployed(held.server, held.private)}
        sent = [e["round"] for e in wire.index if e["kind"] == "uplink" and e["sender"] == victim]
        if sent:
            rnd = max(sent)
            msgs = wire.load(client=victim, rounds={rnd})
            down = next((m.payload for m in msgs if m.kind == "downlink"), None)
            up = next(m for m in msgs if m.kind == "uplink")
            if down is not None:
                out[f"local (round {rnd})"] = deployed_alone(held.method, dict(down), up.payload, held.private,
                                                            up.samples or 1, rnd, victim)
        return out
