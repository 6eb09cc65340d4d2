"""The clients' side of one simulated acting round: what each sampled client sends back.

A malicious server's acting round (`acting_round.py`) was never run, so the victim's reply is
simulated here as the client itself would produce it: the model the server designed, trained
with the run's declared recipe on the victim's own training data (the scorer's `GroundTruth`,
which never reaches the attacker), then sealed by the run's defences as they run client side
(clipping, noise, a downlink check, secure aggregation's pairwise masks with the round's peers).
What comes back is a list of `Message`s, the wire of that round as the server would hold it.

The other clients sampled in the recorded round matter only where the server reads a secure sum:
there the design isolates the victim (model inconsistency: the others get a model of zeros), and
a model of zeros trains to itself except its output bias, which no reading uses; so each other
client is taken to send back what it received (an update of zeros where its uplink carries an
update, SCAFFOLD's dy), sealed and masked like the victim's. Where the server reads uplinks one
by one, only the victim's is made.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedattack.attacks.evaluation.truth import GroundTruth
from fedattack.federation.active import Downlinks
from fedattack.rng import generator
from fedattack.target import ClientContext, LocalData, Target
from fedattack.training import sequential_train
from fedattack.wire import SERVER, Message, Payload


@dataclass(frozen=True)
class Round:
    """The acting round as designed: who was sampled with their n_k, what each was sent."""

    round: int
    victim: int
    samples: dict[int, int]  # n_k of every client sampled in the recorded round (the victim's too)
    sent: Downlinks
    isolates: bool  # the other sampled clients got a model of zeros


def replies(design: Round, truth: GroundTruth, seed: int) -> list[Message]:
    """The round's downlinks and the uplinks the server receives (see the module docstring)."""
    model, rnd, peers = design.sent.target, design.round, tuple(sorted(design.samples))
    out = [Message(rnd, SERVER, k, "downlink", dict(p)) for k, p in sorted(design.sent.payloads.items())]
    model.deliver(rnd, design.sent.payloads)  # clients that compare their downlinks see the round's
    others = [k for k in peers if k != design.victim] if design.isolates else []
    for k in [design.victim, *others]:
        down = design.sent.payloads[k]
        ctx = ClientContext(rnd, k, seed, sequential_train, peers=peers if design.isolates else (k,),
                            samples=design.samples[k])
        up = trained(model, down, truth, ctx) if k == design.victim else returned(model, down)
        out.append(Message(rnd, k, SERVER, "uplink", model.seal(up, down, ctx), samples=design.samples[k]))
    return out


def trained(model: Target, down: Payload, truth: GroundTruth, ctx: ClientContext) -> Payload:
    """The victim's local training on its own data, as the recipe says; its private state as it held it."""
    x, y = truth.members.x, truth.members.y
    data = LocalData(x, y, x[:0], y[:0])
    private = truth.private or model.init_private(ctx.client, down, generator(ctx.seed, "acting:private", ctx.client))
    up, _ = model.client_update(down, private, data, ctx)
    return up


def returned(model: Target, down: Payload) -> Payload:
    """A client sent a model of zeros: its uplink carries that model back (an update of zeros)."""
    uplink = model.wire_schema().uplink
    return {n: down[n].clone() if n in down else torch.zeros(tuple(s)) for n, s in uplink.items()}
