"""A server in the spirit of LOKI (Zhao, Sharma, Elkordy, Ezzeldin, Avestimehr, Bagchi, "LOKI:
Large-scale Data Reconstruction Attack against Federated Learning through Model Manipulation",
IEEE S&P 2024): through secure aggregation, at scale, without model inconsistency's zero models.

Secure aggregation hands the server one sum. The imprint (`imprint.py`) then mixes every client's
images in every bin, and model inconsistency buys one client's update alone by sending everybody
else a model that trains nothing. LOKI's idea is to give each client a model of its own instead:
its own convolutional kernels, so that what it changes lands in parameters no other client
changes, and the sum keeps every client's imprint apart. Here the module in front of the model
has one block of imprint units per client of the round (`bins` each, m blocks): client j's block
holds the imprint's units (one random measurement direction of its own, biases at the quantiles
of that measurement over public data), every other block units that never fire (weights zero,
a bias just below zero). A unit that never fires is moved by nobody, so in the sum the server
holds, block j is client j's trained block alone, solved out exactly (the other clients sent back
zeros and the bias they were sent, which the fixed-point encoding carries without rounding), and
read as the imprint reads its bins. One acting round reads every sampled client at once.

Honestly said: the clients receive different models (the same architecture, different values).
A client that compares its downlink with another client's, or a hash of it, sees that at once
(a check comparing downlinks across clients), and the module is outside the method's architecture,
which `downlink-check` refuses. The module is m x bins x pixels numbers, so the wire grows with
the round: secure aggregation cannot sum fewer numbers than the images it is to give back.
Sizes above `LIMIT` entries are refused in one line.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fedattack.attacks.active._reading import normalised, ratio_images
from fedattack.attacks.active.servers._front import fronted, shaped_like, with_module
from fedattack.attacks.active.servers.imprint import Imprint
from fedattack.attacks.active.servers.inconsistency import victim_model
from fedattack.federation.active import ActiveSettings, Downlinks, Exchange, Readout
from fedattack.registry import UserError
from fedattack.rng import generator
from fedattack.target import State, Target
from fedattack.wire import Payload

WEIGHT, BIAS = "loki.weight", "loki.bias"
DEAD = -(2.0 ** -20)  # the bias of another client's units: they never fire, and the ring holds it exactly
LIMIT = 2 ** 27  # entries of the module (m x bins x pixels) it builds at most (512 MiB of float32)


@dataclass(frozen=True, kw_only=True)
class LokiSettings(ActiveSettings):
    """bins: imprint units per client (an image is read when it is alone in its bin: about
    (1 - 1/bins)^(n - 1) of a client's n images). alpha: the module's weight on the input the
    model sees (0: calibrated on public data, as the imprint's)."""

    bins: int = 128
    alpha: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.bins < 2:
            raise UserError(f"loki needs bins >= 2 per client, got {self.bins}")
        if not (math.isfinite(self.alpha) and self.alpha >= 0):
            raise UserError(f"loki alpha={self.alpha} must be a positive number (0: calibrated)")


class Loki(Imprint):
    """Every sampled client its own block of imprint units: the secure sum keeps them apart."""

    name = "loki"
    paper = "in the spirit of Zhao et al., IEEE S&P 2024 (LOKI)"
    acts = ("gives each sampled client its own block of imprint units in a layer in front of the model "
            "(different values per client), so a secure sum keeps every client's imprint apart")
    Settings = LokiSettings  # type: ignore[assignment]  # its own settings, not the imprint's

    def __init__(self, settings: LokiSettings, target: Target, knowledge: object = None) -> None:
        super().__init__(settings, target, knowledge)  # type: ignore[arg-type]
        entries = target.ctx.clients_per_round * settings.bins * math.prod(target.ctx.input_shape)
        if entries > LIMIT:
            raise UserError(f"loki with bins={settings.bins} for {target.ctx.clients_per_round} clients a round "
                            f"builds a module of {entries:,} numbers (at most {LIMIT:,}); lower bins or the "
                            "clients a round")

    @property
    def blocks(self) -> int:
        return self.target.ctx.clients_per_round

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        rows = self.blocks * self.settings.bins
        return {WEIGHT: (rows, math.prod(self.target.ctx.input_shape)), BIAS: (rows,)}

    @property
    def isolates(self) -> bool:
        return False  # nobody gets a model of zeros: every sampled client is read

    def scaled(self, module: Payload, alpha: float) -> Payload:
        return module  # the units' sum goes into every pixel (the imprint's output=sum)

    def applying(self, alpha: float) -> Callable[[State, torch.Tensor], torch.Tensor]:
        """The module's forward on the normalised input z: z plus alpha times its units' sum."""
        def apply(params: State, z: torch.Tensor) -> torch.Tensor:
            units = torch.relu(z.flatten(1) @ params[WEIGHT].T + params[BIAS])
            return z + alpha * shaped_like(z, units.sum(1))
        return apply

    def send(self, rnd: int, victim: int, server: State, honest: Downlinks) -> Downlinks:
        clients = sorted(honest.payloads)
        if len(clients) > self.blocks:
            raise UserError(f"loki built {self.blocks} blocks for {self.blocks} clients a round, and round {rnd} "
                            f"samples {len(clients)}")
        if not self.alpha:
            self.alpha = self.calibrate(self.module_for(rnd, 0), honest)
        model = self.front_model(self.alpha, honest.target)
        payloads = {k: with_module(model, honest.payloads[k], self.module_for(rnd, j)) for j, k in enumerate(clients)}
        return Downlinks(model, payloads)

    def module_for(self, rnd: int, block: int) -> Payload:
        """Block `block`'s imprint units (a direction of its own, biases at its quantiles over
        public data); every other block's units dead."""
        (rows, pixels), bins = self.shapes[WEIGHT], self.settings.bins
        weight, bias = torch.zeros(rows, pixels), torch.full((rows,), DEAD)
        own = slice(block * bins, (block + 1) * bins)
        weight[own], bias[own] = self.units(rnd, block)
        return {WEIGHT: weight, BIAS: bias}

    def units(self, rnd: int, block: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Block `block`'s own units: its direction (every row) and its biases at the quantiles."""
        assert self.knowledge is not None, "an acting server holds public data"
        pixels, bins = self.shapes[WEIGHT][1], self.settings.bins
        direction = torch.randn(pixels, generator=generator(self.knowledge.seed, "loki", rnd, block))
        direction = direction / direction.norm()
        measured = normalised(self.knowledge.aux, self.target).double() @ direction.double()
        levels = torch.arange(1, bins + 1, dtype=torch.float64) / (bins + 1)
        return direction, -torch.quantile(measured, levels).float()

    def read(self, seen: Exchange) -> Readout:
        """The victim's block, solved out of the sum (or read off its own uplink), bin by bin."""
        rows = torch.nonzero(seen.sent[seen.victim][WEIGHT].abs().sum(1) > 0).flatten()
        part = restricted(seen, rows)
        shapes = {WEIGHT: (len(rows), seen.sent[seen.victim][WEIGHT].shape[1]), BIAS: (len(rows),)}
        got = victim_model(part, seen.aggregated, fronted(seen.target, shapes, self.applying(0.0)))
        sent = part.sent[seen.victim]
        images, info = bin_images(sent[WEIGHT], sent[BIAS], got[WEIGHT], got[BIAS], seen.target)
        how = (f"its block solved out of the secure sum of {len(seen.sent)} clients (no client got a model of zeros)"
               if seen.aggregated else "its block of its own uplink")
        return Readout(images, {"reading": "bin differences of the victim's block of imprint units", **info,
                                "update": how})


def restricted(seen: Exchange, rows: torch.Tensor) -> Exchange:
    """The exchange with every tensor of the module cut to `rows` (the victim's block): the
    solve and the decoding then touch the victim's units only, whatever the round's size."""
    def cut(payload: Payload) -> Payload:
        return {n: t[rows] if "loki." in n and t.dim() >= 1 else t for n, t in payload.items()}
    return Exchange(seen.round, seen.victim, {k: cut(p) for k, p in seen.sent.items()},
                    {k: cut(p) for k, p in seen.received.items()}, seen.samples, seen.aggregated,
                    seen.unweighted, seen.target, seen.aux)


def bin_images(sent_w: torch.Tensor, sent_b: torch.Tensor, got_w: torch.Tensor, got_b: torch.Tensor,
               target: Target) -> tuple[torch.Tensor, dict[str, Any]]:
    """Each bin of a block: the difference of its two units' updates, weight over bias (the
    imprint's reading; units ordered by their cut)."""
    order = torch.argsort(-sent_b.double())
    d_weight = (got_w.double() - sent_w.double())[order]
    d_bias = (got_b.double() - sent_b.double())[order]
    bins_weight = torch.cat([d_weight[:-1] - d_weight[1:], d_weight[-1:]])
    bins_bias = torch.cat([d_bias[:-1] - d_bias[1:], d_bias[-1:]])
    return ratio_images(bins_weight, bins_bias, target)
