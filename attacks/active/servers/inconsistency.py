"""Model inconsistency against secure aggregation (Pasquini, Francati, Ateniese, "Eluding Secure
Aggregation in Federated Learning via Model Inconsistency", CCS 2022).

Secure aggregation lets the server learn only the sum of the round's uplinks, and only if every
client sends the same kind of update. Nothing in the protocol makes the server send every client
the same model. So it sends the victim the real model and every other sampled client a model
whose training changes nothing it reads: all its parameters zero (the paper's gradient
suppression), where every ReLU unit is dead, so no weight moves and only the output layer's bias
does. The sum then holds the victim's update alone: with the sample counts n_k (which secure
aggregation leaves in the clear) and the models it sent, the server solves the aggregate for the
victim's uplink (`isolated`), exactly up to the fixed-point precision, whatever the number of
clients. Alone, this reduces secure aggregation to an eavesdropper on the victim's channel, so
the reading here is the eavesdropper's best closed-form one, the first layer's span (`unmix`);
`imprint:isolate=true` and `trap-weights:isolate=true` send the victim a malicious model instead.
"""

from __future__ import annotations

from typing import Any

import torch

from fedattack.attacks.active._reading import first_dense, layer_update, ratio_images, trained
from fedattack.attacks.data_reconstruction.levels import pixel_levels
from fedattack.attacks.data_reconstruction.unmix import FirstLayer, Search, unmix
from fedattack.federation.active import ActiveThreatModel, Downlinks, Exchange, Readout
from fedattack.rng import generator
from fedattack.target import State, Target
from fedattack.wire import Payload


class ModelInconsistency(ActiveThreatModel):
    """The victim gets the real model, every other sampled client a model of zeros."""

    name = "model-inconsistency"
    paper = "Pasquini et al., CCS 2022"
    acts = "sends the victim the real model and every other sampled client one of zeros, so the sum is its update"
    singles_out = True

    def __init__(self, settings: Any, target: Target, knowledge: Any = None) -> None:
        super().__init__(settings, target, knowledge)
        first_dense(target)  # its reading is the first layer's: refuse a model without one, before training

    def send(self, rnd: int, victim: int, server: State, honest: Downlinks) -> Downlinks:
        return Downlinks(honest.target, singled_out(honest.payloads, victim, honest.payloads[victim]))

    def read(self, seen: Exchange) -> Readout:
        d_weight, d_bias = layer_update(seen.sent[seen.victim], victim_model(seen, isolate=True), seen.target)
        layer = FirstLayer(d_weight, d_bias)
        n = seen.samples[seen.victim]
        norm = seen.target.ctx.normalization
        levels = pixel_levels(seen.aux.numpy()) if len(seen.aux) else 255
        found = unmix(layer, n, tuple(seen.target.ctx.input_shape), generator(0, "readout", seen.victim),
                      Search(levels=levels), None if norm is None else (norm.mean, norm.std))
        if found.images is not None:
            return Readout(found.images, {"reading": f"the first layer's span (unmix: {found.note})"})
        images, info = ratio_images(d_weight, d_bias, seen.target)
        return Readout(images, {"reading": f"unit ratios ({found.note})", **info})


def singled_out(payloads: dict[int, Payload], victim: int, victims: Payload) -> dict[int, Payload]:
    """Every sampled client's downlink: `victims` for the victim, zeros of its shapes for the rest."""
    return {k: victims if k == victim else suppressed(victims) for k in payloads}


def suppressed(payload: Payload) -> Payload:
    """A model whose training changes nothing but the output bias: every parameter zero."""
    return {n: torch.zeros_like(t) for n, t in payload.items()}


def victim_model(seen: Exchange, isolate: bool, target: Target | None = None) -> State:
    """The parameters the victim trained, as far as the server can tell (`victim_uplink`,
    decoded as the method declares its wire; `target`: the model it was sent, if not the
    method's own, e.g. one with the imprint in front)."""
    return trained(seen.target if target is None else target, seen.sent[seen.victim], victim_uplink(seen, isolate))


def victim_uplink(seen: Exchange, isolate: bool) -> Payload:
    """What the victim sent as far as the server can tell: its own uplink when the server sees
    uplinks one by one; under secure aggregation the aggregate, or, when the other clients got
    suppressed models (`isolate`), the victim's uplink solved out of it."""
    if not seen.aggregated or not isolate:
        return seen.received[seen.victim]
    return isolated(seen)


def isolated(seen: Exchange) -> Payload:
    """The victim's uplink from the aggregate A = sum_k w_k up_k / sum_k w_k (w_k = n_k, or 1 when
    the aggregate is the plain mean): every other client sent back what it was sent (a tensor
    under a name its downlink carries: the model of zeros it trained without moving it), or an
    update of zeros (a tensor only uplinks carry: SCAFFOLD's dy)."""
    weights = {k: 1.0 if seen.unweighted else float(seen.samples[k]) for k in seen.sent}
    total, own = sum(weights.values()), weights[seen.victim]
    aggregate = seen.received[seen.victim]
    out: dict[str, torch.Tensor] = {}
    for name, mean in aggregate.items():
        others = [weights[k] * seen.sent[k][name].double() for k in seen.sent
                  if k != seen.victim and name in seen.sent[k]]
        rest = torch.stack(others).sum(0) if others else torch.zeros_like(mean, dtype=torch.float64)
        out[name] = (total * mean.double() - rest) / own
    return out


def describe_isolation(seen: Exchange, isolate: bool) -> dict[str, Any]:
    """How the reading got the victim's update, for the result."""
    if not seen.aggregated:
        return {"update": "the victim's own uplink"}
    if isolate:
        return {"update": f"solved out of the aggregate of {len(seen.sent)} clients (the others sent zeros)"}
    return {"update": f"the aggregate of {len(seen.sent)} clients (images of all of them)"}
