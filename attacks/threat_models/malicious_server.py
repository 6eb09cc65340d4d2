"""`malicious-server`: the federation's own server, had it acted for one round.

The passive threat models read what the run's wire carried. This one asks what the same
federation would have given away to a server that, once, sends what it chooses: from the
downlinks the run recorded (the model the clients really held), it designs one acting round per
victim with an active server of `attacks/active/servers/` (the imprint, trap weights), and reads
what the victim sends back with that server's own reading. The victim's reply is not on the
recorded wire, so it is simulated, as the client itself would run it: the run's declared local
recipe on the victim's training data, through the run's defences (clipping, noise, secure
aggregation's masks, a downlink check). That data is the scorer's side (`GroundTruth`): it
produces the client's message and never reaches the attacker, whose reading holds only what
the server holds (`Exchange`: what it sent, what came back after its defences' server side,
n_k). Only attacks that declare `Attack.acting` run under it (`attacks/active/acting_round.py`).

A run whose manifest does not declare its local recipe (epochs, batch size, rate) cannot be
simulated: the view says which fact is missing (`ActingView.undeclared`), and each attack
returns a one-line not-applicable result naming it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fedattack.attacks.threat_models.base import RunFacts, RunRecord, ThreatModel
from fedattack.attacks.view import Channel, Knows, View
from fedattack.target import Target

if TYPE_CHECKING:
    from fedattack.federation.rundir import Federation


@dataclass
class ActingView(View):
    """The server's view, and what the run leaves undeclared for simulating a client ("" if nothing)."""

    undeclared: str = ""


class MaliciousServer(ThreatModel):
    """The server, acting for one round on the recorded downlink; every message of the run besides."""

    name = "malicious-server"
    observes = ("the downlinks it sent (the model the clients held) and every uplink; in one round it acts in, "
                "what it sent the victim and what came back (the victim's reply simulated with the run's recipe)")
    knows = Knows(every_client=True, local_samples=True)  # a server sees every n_k on the wire
    acts = True
    in_default_audit = True

    def channels(self, victim: int, facts: RunFacts) -> list[Channel]:
        return [Channel(None, "downlink"), Channel(None, "uplink")]

    def view(self, run: Federation | RunRecord, victim: int, facts: RunFacts | None = None,
             method: Target | None = None) -> View:
        record = run if isinstance(run, RunRecord) else RunRecord(run, method)
        base = super().view(record, victim, facts, method)
        fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(View)}
        return ActingView(**fields, undeclared=record.undeclared_recipe())
