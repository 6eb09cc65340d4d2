"""The first layer's update over every round an eavesdropper saw the same client (#33 item 4).

A client trains on the same N images every round it takes part in, so each of its first-layer
updates is A_r X~ (U x P) with its own mixing A_r (U x N) and the same images X~: one round
shows at most a U-dimensional slice of their span. A client with more images than the layer
has units (the WAFFLe paper's 480 on `mnist-mlp`'s 200) gives one round whose row space holds
none of its images, but stacked over rounds, [A_1; ...; A_R] X~ has the images' whole span as
its row space once R U >= N. The bias updates are A_r 1 with the same A_r, so the stacked bias
still fixes every image's brightness (`levels.image_functional`: [R_1; ...] y = [db_1; ...]).
What no number of rounds gives: a span smaller than the pixels the images light. Past that
(about 600 lit pixels for MNIST clients of 500 or more images) the span is every image there
is, and `unmix` says so.

Streaming: each round's [dW_r | db_r] (scaled to unit norm, so the small updates of a trained
model count as much as the first rounds') is folded into at most P + 1 rows by an SVD. That is
a rotation from the left: the row space, the equality of columns (`unmix.dark_pixels`) and the
bias's relation to the weight are unchanged, so memory stays (P + 1)^2 floats however many
rounds were recorded, and one round's messages are loaded at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm import tqdm

from fedattack.attacks.base import Adversary
from fedattack.attacks.data_reconstruction.unmix import FirstLayer, first_layer_update


@dataclass
class StackedLayer:
    """The rounds' first-layer updates folded into at most P + 1 rows (bias last when present)."""

    pixels: int
    rows: np.ndarray | None = None
    has_bias: bool = True
    rounds: list[int] = field(default_factory=list)

    def add(self, layer: FirstLayer, rnd: int) -> None:
        """Fold one round's update in: a unit-norm block, then an SVD when rows exceed P + 1."""
        weight = layer.weight.numpy()
        self.has_bias = self.has_bias and layer.bias is not None
        block = np.hstack([weight, layer.bias.numpy()[:, None]]) if layer.bias is not None else weight
        if not self.has_bias:
            block = block[:, :self.pixels]
        norm = float(np.linalg.norm(block))
        if norm == 0 or not math.isfinite(norm):
            return
        block = block / norm
        if self.rows is not None and self.rows.shape[1] != block.shape[1]:
            self.rows = self.rows[:, :block.shape[1]]  # a round without a bias: drop the bias column
        stacked = block if self.rows is None else np.vstack([self.rows, block])
        if stacked.shape[0] > stacked.shape[1]:
            _, s, vt = np.linalg.svd(stacked, full_matrices=False)
            stacked = s[:, None] * vt
        self.rows = stacked
        self.rounds.append(rnd)

    def layer(self) -> FirstLayer | None:
        import torch

        if self.rows is None:
            return None
        weight = torch.as_tensor(self.rows[:, :self.pixels])
        bias = torch.as_tensor(self.rows[:, self.pixels]) if self.has_bias else None
        return FirstLayer(weight, bias)


def victim_rounds(adv: Adversary, count: int, window: str = "last") -> list[int]:
    """The rounds (ascending) with both of the victim's messages visible, up to the observed
    one: the first or the last `count` of them (0: all). The first are the richer: once the model
    fits an image its gradient, and its direction in later updates, fades below float32's noise."""
    seen: dict[int, set[str]] = {}
    for e in adv.view.entries():
        client = e["receiver"] if e["kind"] == "downlink" else e["sender"]
        if client == adv.view.victim and (adv.obs.round is None or e["round"] <= adv.obs.round):
            seen.setdefault(e["round"], set()).add(e["kind"])
    both = sorted(r for r, kinds in seen.items() if {"downlink", "uplink"} <= kinds)
    if not count:
        return both
    return both[:count] if window == "first" else both[-count:]


def stacked_first_layer(adv: Adversary, count: int, shape: tuple[int, ...], window: str = "last",
                        progress: bool = True) -> tuple[FirstLayer | None, dict[str, Any]]:
    """The victim's first-layer updates of its first (or last) `count` rounds (0: all) folded
    together, loading one round at a time; None when no round gives a fully connected first layer."""
    target, victim = adv.view.target, adv.view.victim
    rounds = victim_rounds(adv, count, window)
    stacked = StackedLayer(math.prod(shape))
    for rnd in tqdm(rounds, desc="first-layer updates", unit="round", leave=False, disable=not progress):
        msgs = adv.view.messages(client=victim, rounds={rnd})
        down = next((m.payload for m in msgs if m.kind == "downlink"), None)
        up = next((m.payload for m in msgs if m.kind == "uplink"), None)
        if down is None or up is None:
            continue
        decoded = target.read_uplink(down, up)
        if decoded is None:
            continue
        start = {k: down[k].detach().float() for k in decoded if k in down and down[k].shape == decoded[k].shape}
        layer = first_layer_update(start, {k: decoded[k].detach().float() for k in start}, shape)
        if layer is not None:
            stacked.add(layer, rnd)
    note = {"rounds_asked": f"{window} {count}" if count else "all", "rounds_used": stacked.rounds}
    return stacked.layer(), note
