"""`start=first-layer`: the images read off the first dense layer's update, no optimiser from noise.

Where that layer sees the pixels (an MLP, WAFFLe's factorised `W_a` on them) its update's row
space is the images' span and `unmix` reads them off it, from one round or several folded
together (`rounds`). A one-step update of a small batch (up to `SPEAR_MAX`) through a plain
linear layer is first given to SPEAR (`spear`), which is exact on any images (CIFAR-10's too,
where the non-negative cone of `unmix` finds none) when a ReLU follows the layer; its answer is
kept where the recovered images switch off the units their gradient says they do, else `unmix`
reads the same update. Where convolutions come first, the layer sees their features, and `through`
reads the features' span and inverts the features into images. Either way the answer is ordered
so that image i carries the i-th counted label (the uplinked model's likelihood). The linear
programs depend only on the update, not on a reconstruction strategy's guess of a hidden
selection, so they are solved once per victim and reused by every strategy (`FirstLayerReader`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from fedattack.attacks.base import Adversary
from fedattack.attacks.data_reconstruction.dense import DenseLayer, dense_layer
from fedattack.attacks.data_reconstruction.joint import Inverted
from fedattack.attacks.data_reconstruction.levels import LEVELS, pixel_levels, pixel_normalisation
from fedattack.attacks.data_reconstruction.problem import VictimUpdate
from fedattack.attacks.data_reconstruction.rounds import stacked_first_layer
from fedattack.attacks.data_reconstruction.spear import consistent, disaggregate
from fedattack.attacks.data_reconstruction.through import Answers, ThroughSettings, read_through, solve_features
from fedattack.attacks.data_reconstruction.unmix import (
    FirstLayer,
    Search,
    Unmixed,
    first_layer_update,
    order_by_labels,
    unmix,
)

Read = tuple[Inverted | None, str, dict[str, Any]]
SPEAR_MAX = 20  # one-step batches up to this size are tried with SPEAR first (its search grows as 2^b)
CONSISTENT = 0.9  # share of the ReLU pattern a SPEAR answer must explain to be trusted (a wrong one: ~half)


def _digest(*arrays: np.ndarray) -> str:
    return hashlib.sha256(b"".join(a.tobytes() for a in arrays)).hexdigest()


@dataclass
class FirstLayerReader:
    """Reads a victim's images off its first dense layer, remembering the last victim's programs."""

    search: Search
    rounds: int = 1
    window: str = "last"
    through: ThroughSettings = field(default_factory=ThroughSettings)
    spear_samples: int = 2_000_000
    _unmixed: tuple[tuple[Any, ...], Unmixed] | None = None
    _answers: tuple[tuple[Any, ...], Answers] | None = None

    def read(self, update: VictimUpdate, labels: torch.Tensor, gen: torch.Generator, adv: Adversary) -> Read:
        """The images (ordered by label), how they were read, and which rounds; or None and why."""
        dense = dense_layer(update.target, update.start, update.after, update.shape)
        if dense is None:
            return None, "the optimiser from noise: no fully connected layer on the wire", {}
        if not dense.on_pixels:
            inverted, how = self.read_features(dense, update, len(labels), gen)
            once = "the observed round only (features drift between rounds)"
            note = {"rounds_used": once} if self.rounds != 1 else {}
        else:
            inverted, how, note = self.read_pixels(update, len(labels), gen, adv)
        if inverted is None:
            return None, f"the optimiser from noise: {how}", note
        held = update.extras.initial()
        uplinked = {**held, **update.start, **update.after, **inverted.extras}
        ordered = order_by_labels(update.forward, uplinked, inverted.images, labels)
        return Inverted(ordered, inverted.extras, inverted.loss), how, note

    def read_pixels(self, update: VictimUpdate, n: int, gen: torch.Generator, adv: Adversary) -> Read:
        note: dict[str, Any] = {}
        if self.rounds == 1 and self.window == "last":  # the observed round
            layer = first_layer_update(update.start, update.after, update.shape)
        else:
            layer, note = stacked_first_layer(adv, self.rounds, update.shape, self.window)
        if layer is None:
            return None, "no fully connected first layer on the wire", note
        if not note and update.one_step and n <= SPEAR_MAX:
            exact, why = self.read_spear(layer, update, n, gen)
            if exact is not None:
                return exact, why, note
        aux = adv.knowledge.aux
        norm = update.target.ctx.normalization
        levels = self.search.levels or (pixel_levels(aux.x.numpy()) if len(aux) else LEVELS)
        unmixed = self.unmixed(layer, n, update.shape, gen, None if norm is None else (norm.mean, norm.std), levels)
        if unmixed.images is None:
            return None, unmixed.note, note
        free = {k: v for k, v in update.extras.initial().items() if k in update.extras.free}
        images = unmixed.images.to(next(iter(update.after.values())).device)
        return Inverted(images, free, float("nan")), f"the first layer's update (unmix: {unmixed.note})", note

    def read_spear(self, layer: FirstLayer, update: VictimUpdate, n: int,
                   gen: torch.Generator) -> tuple[Inverted | None, str]:
        """SPEAR's exact recovery of a one-step batch (`spear`), kept only where every recovered
        image switches off exactly the units its gradient column is zero on; else None (unmix)."""
        key = next((k for k, v in update.start.items() if k.endswith("weight") and v.dim() == 2
                    and v.shape == layer.weight.shape), None)
        if key is None or layer.bias is None:
            return None, "no plain linear first layer with a bias"
        weight = update.start[key].detach().double().cpu().numpy()
        bias = update.start[key[:-len("weight")] + "bias"].detach().double().cpu().numpy()
        found = disaggregate(layer.weight.numpy(), layer.bias.numpy(), n, gen, self.spear_samples, (weight, bias))
        if found.inputs is None:
            return None, found.note
        agree = consistent(found.inputs, weight, bias, layer.weight.numpy(), n)
        if agree < CONSISTENT:
            return None, f"{found.note}, but only {agree:.1%} of its ReLU pattern agrees"
        norm = update.target.ctx.normalization
        mean, std = pixel_normalisation(*((norm.mean, norm.std) if norm else ((0.0,), (1.0,))), update.shape)
        if mean.size != found.inputs.shape[1]:
            mean, std = np.resize(mean, found.inputs.shape[1]), np.resize(std, found.inputs.shape[1])
        pixels = np.clip(found.inputs * std + mean, 0.0, 1.0)
        images = torch.as_tensor(pixels, dtype=torch.float32).view(n, *update.shape)
        free = {k: v for k, v in update.extras.initial().items() if k in update.extras.free}
        device = next(iter(update.after.values())).device
        return Inverted(images.to(device), free, float("nan")), f"{found.note} (ReLU pattern agrees {agree:.1%})"

    def unmixed(self, layer: FirstLayer, n: int, shape: tuple[int, ...], gen: torch.Generator,
                normalisation: tuple[tuple[float, ...], tuple[float, ...]] | None, levels: int) -> Unmixed:
        """`unmix`, remembered for the last layer seen (every strategy of a victim shares it)."""
        bias = layer.bias.numpy() if layer.bias is not None else np.zeros(0)
        key = (_digest(layer.weight.numpy(), bias, gen.get_state().numpy()), n, shape, levels)
        if self._unmixed is None or self._unmixed[0] != key:
            search = Search(self.search.programs, self.search.peel, self.search.rank, self.search.slack, levels)
            self._unmixed = (key, unmix(layer, n, shape, gen, search, normalisation))
        return self._unmixed[1]

    def read_features(self, dense: DenseLayer, update: VictimUpdate, n: int,
                      gen: torch.Generator) -> tuple[Inverted | None, str]:
        """`through`: the features at the weights the run's steps saw on average (the downlink
        for one step, nearly the midpoint for many), inverted into images."""
        bias = dense.update.bias.numpy() if dense.update.bias is not None else np.zeros(0)
        key = (_digest(dense.update.weight.numpy(), bias, gen.get_state().numpy()), n)
        if self._answers is None or self._answers[0] != key:
            self._answers = (key, solve_features(dense, n, gen, self.through))
        steps = update.recipe.num_steps(n)
        mean = (steps - 1) / (2 * steps)  # the steps' weights, on average along a straight run
        params = {k: v for k, v in update.start.items()}
        params.update({k: update.start[k] + mean * (update.after[k] - update.start[k]) for k in update.after})
        return read_through(self._answers[1], dense.features(update.target), params, update.extras, n,
                            update.shape, self.through)
