"""Trap weights in the first dense layer ("When the Curious Abandon Honesty: Federated Learning Is
Not Private", Boenisch, Dziedzic, Schuster, Shamsabadi, Shumailov, Papernot, EuroS&P 2023).

The server changes no architecture, only the values of the first dense layer it broadcasts: it
makes each unit fire for very few inputs (the paper's trap weights: random rows whose negative
half is scaled so that activations are rare). A unit that one image alone activates is moved by
that image only, so its weight update over its bias update is the image, exactly, through any
number of local steps: the paper recovers more than half of 100-image ImageNet batches.

How rare: with n images a unit catches exactly one with probability n p (1 - p)^(n - 1), largest
at p = 1/n. Here each unit gets a random direction and its bias is set at the (1 - p) quantile of
that direction over the server's public data, which reaches the rate directly on normalised
inputs (the paper's sign-scaling reaches it on raw non-negative pixels); p is `rate`, or 1/n
for the federation's mean client size n. The rest of the model is the honest one.

WAFFLe's server owns the dictionary but not the selection: its first layer is
W_a diag(r * b) W_b, b private. Trap directions as the dictionary's columns W_a (bias row
included), r = 1 and W_b routing factor f to hidden unit f make every factor a trap whatever b:
the unit is b_f times the trap's pre-activation, b_f > 0 (a relaxed Bernoulli during training),
so it fires for the trap's images alone, and W_a's column moves along that image. The reading
is the same ratio (`layer_update` reads W_a's layout, bias row last). `isolate=true` adds model
inconsistency (Pasquini et al. 2022) against secure aggregation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from fedattack.attacks.active._reading import first_dense, layer_update, normalised, ratio_images
from fedattack.attacks.active.servers.inconsistency import describe_isolation, singled_out, victim_model
from fedattack.federation.active import ActiveSettings, ActiveThreatModel, Downlinks, Exchange, Readout
from fedattack.registry import UserError
from fedattack.rng import generator
from fedattack.target import State, Target
from fedattack.wire import Payload

# Training grows W_b's entries off the routing (a unit that fires feeds back to every factor,
# whose pre-activation is never zero: WAFFLe has no ReLU per factor), and through them every
# image of the round reaches every trap's column. A routing of g with strengths 1/g keeps the
# composed layer and makes those couplings g^2 times weaker. On digits (WAFFLe, personal recipe,
# one victim) g = 1, 3, 10, 30 read 1.7, 9.6, 13.9, 14.8% of its images above 40 dB.
ROUTING = 10.0


@dataclass(frozen=True, kw_only=True)
class TrapSettings(ActiveSettings):
    """rate: the share of images each unit fires for (0: one over the mean client size).
    isolate: send the other sampled clients a model of zeros (model inconsistency)."""

    rate: float = 0.0
    isolate: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.rate < 1.0:
            raise UserError(f"trap-weights rate={self.rate} must be in [0, 1) (0: one over the client size)")


class TrapWeights(ActiveThreatModel):
    """The first dense layer's units made to fire rarely: a unit one image moves gives it away."""

    name = "trap-weights"
    paper = "Boenisch et al., EuroS&P 2023"
    acts = "sends a first dense layer whose units each fire for about one image"
    Settings = TrapSettings

    def __init__(self, settings: TrapSettings, target: Target, knowledge: object = None) -> None:
        super().__init__(settings, target, knowledge)  # type: ignore[arg-type]
        self.layer = first_dense(target)

    @property
    def isolates(self) -> bool:
        return bool(self.settings.isolate)

    def send(self, rnd: int, victim: int, server: State, honest: Downlinks) -> Downlinks:
        payloads = {k: {**down, **self.traps(down, rnd)} for k, down in honest.payloads.items()}
        if self.settings.isolate:
            payloads = singled_out(payloads, victim, payloads[victim])
        return Downlinks(honest.target, payloads)

    def traps(self, down: Payload, rnd: int) -> Payload:
        """The first layer's tensors with every unit a trap."""
        assert self.knowledge is not None, "an acting server holds public data"
        weight_name, layout = self.layer
        units = down[weight_name].shape[1] if layout == "factors" else down[weight_name].shape[0]
        pixels = math.prod(self.target.ctx.input_shape)
        rows = torch.randn(units, pixels, generator=generator(self.knowledge.seed, "trap-weights", rnd))
        rows = rows / rows.norm(dim=1, keepdim=True)
        rate = self.rate()
        pre = normalised(self.knowledge.aux, self.target).double() @ rows.double().T
        bias = -torch.quantile(pre, 1.0 - rate, dim=0).float()
        if layout == "factors":
            return self.dictionary(down, weight_name, rows, bias)
        return {weight_name: rows, weight_name[:-len("weight")] + "bias": bias}

    def rate(self) -> float:
        """p = 1/n for the federation's mean client size (public: train size over clients)."""
        assert self.knowledge is not None
        return self.settings.rate or min(0.5, self.knowledge.num_clients / max(self.knowledge.train_size, 1))

    @staticmethod
    def dictionary(down: Payload, w_a: str, rows: torch.Tensor, bias: torch.Tensor) -> Payload:
        """WAFFLe's dictionary made of traps: W_a's columns the traps, W_b routing factor f to unit
        f with weight `ROUTING`, r = 1 / `ROUTING` (the composed layer is the traps either way)."""
        layer = w_a[:-len("W_a")]
        w_b = torch.zeros_like(down[f"{layer}W_b"])
        both = min(w_b.shape)
        w_b[torch.arange(both), torch.arange(both)] = ROUTING
        return {w_a: torch.cat([rows.T, bias[None]], 0), f"{layer}W_b": w_b,
                f"{layer}r": torch.full_like(down[f"{layer}r"], 1.0 / ROUTING)}

    def read(self, seen: Exchange) -> Readout:
        """Every unit: its weight update over its bias update."""
        got = victim_model(seen, self.settings.isolate)
        images, info = ratio_images(*layer_update(seen.sent[seen.victim], got, seen.target), seen.target)
        return Readout(images, {"reading": "unit ratios of the first dense layer", **info,
                                **describe_isolation(seen, self.settings.isolate)})
