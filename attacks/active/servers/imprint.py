"""The imprint module of "Robbing the Fed" (Fowl, Geiping, Czaja, Goldblum, Goldstein, ICLR 2022).

The server puts a dense layer of k units in front of the model (it builds the model, so any
method whose model it builds can be sent one). Every unit measures the same thing, m(x) = w . z
(z the normalised image; the paper's average brightness, or a random direction), and unit i has
the bias -c_i, with c_1 < ... < c_k the quantiles of m over public data: unit i fires for every
image with m(x) > c_i, so the images with c_i < m(x) <= c_(i+1) are exactly those that move unit
i and not unit i+1. The difference of the two units' weight updates over the difference of their
bias updates is then the image itself whenever one image lies in that bin: 64 ImageNet images at
about 71 dB from one aggregated update in the paper.

Two choices the paper leaves open or makes for one gradient step, made here for FedAvg's many:
- The units' output. The paper maps it back to the input size with a dense layer of ones; that
  layer is trained too, its columns drift apart after the first local step, and the two units of
  a bin then carry different per-image factors, so their difference mixes every image above the
  bin. `output=sum` (default) adds alpha times the units' sum to every pixel instead (a module
  without parameters after the units), so all units share each image's factor at every step and
  the difference stays exact over any number of epochs; `output=linear` is the paper's layer
  (scaled by alpha), kept to measure that difference.
- alpha, the module's weight on what the model sees: small enough that the bins do not drift
  while the client trains, large enough that the float32 update still resolves the images. Which
  alpha does both depends on the model, the data and the recipe, all of which the server knows:
  with `alpha=0` (default) it trains a client of the mean client size on its own public data
  through the module for each candidate in `ALPHAS` and keeps the one that reads the most of
  those images back above 40 dB (docs/active-server.md shows the search).
Under secure aggregation the bins mix every client's images (an image alone in its bin is still
recovered, but a bin is shared by m clients' images); `isolate=true` adds model inconsistency
(Pasquini et al. 2022): the other sampled clients get a model of zeros and the victim's update is
solved out of the sum.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fedattack.attacks.active._reading import normalised, ratio_images, share_read
from fedattack.attacks.active.servers._front import check_frontable, fronted, shaped_like, with_module
from fedattack.attacks.active.servers.inconsistency import describe_isolation, singled_out, victim_model
from fedattack.federation.active import ActiveSettings, ActiveThreatModel, Downlinks, Exchange, Readout
from fedattack.options import one_of
from fedattack.registry import UserError
from fedattack.rng import generator
from fedattack.target import ClientContext, LocalData, State, Target
from fedattack.training import sequential_train
from fedattack.wire import Payload

WEIGHT, BIAS, OUT = "imprint.weight", "imprint.bias", "imprint.out"
ALPHAS = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)  # the candidates a calibrating server tries


@dataclass(frozen=True, kw_only=True)
class ImprintSettings(ActiveSettings):
    """bins: units of the module (k). measurement: random (a random direction) or brightness
    (the paper's average). output: sum (a parameter-free sum into every pixel) or linear (the
    paper's trained layer of ones). alpha: the module's weight on the input the model sees.
    isolate: send the other sampled clients a model of zeros (model inconsistency)."""

    bins: int = 500
    measurement: str = "random"
    output: str = "sum"
    alpha: float = 0.0
    isolate: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.bins < 2:
            raise UserError(f"imprint needs bins >= 2, got {self.bins}")
        one_of(self.measurement, ("random", "brightness"), "imprint measurement")
        one_of(self.output, ("sum", "linear"), "imprint output")
        if not (math.isfinite(self.alpha) and self.alpha >= 0):
            raise UserError(f"imprint alpha={self.alpha} must be a positive number (0: calibrated)")


class Imprint(ActiveThreatModel):
    """A binning layer in front of the model: an image alone in its bin is read off exactly."""

    name = "imprint"
    paper = "Fowl et al., ICLR 2022"
    acts = "puts a layer of binned units in front of the model it broadcasts"
    Settings = ImprintSettings

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        k, pixels = self.settings.bins, math.prod(self.target.ctx.input_shape)
        out = {WEIGHT: (k, pixels), BIAS: (k,)}
        return {**out, OUT: (pixels, k)} if self.settings.output == "linear" else out

    @property
    def isolates(self) -> bool:
        return bool(self.settings.isolate)

    def wire_schema(self) -> dict[str, dict[str, tuple[int, ...]]]:
        """The fronted method's wire beyond the method's: the module under each name the method
        sends a parameter by (SCAFFOLD: c., dy. and dc.; q-FFL: delta.)."""
        honest, front = self.target.wire_schema(), self.front_model(0.0).wire_schema()
        return {"downlink": {n: s for n, s in front.downlink.items() if n not in honest.downlink},
                "uplink": {n: s for n, s in front.uplink.items() if n not in honest.uplink}}

    def __init__(self, settings: ImprintSettings, target: Target, knowledge: object = None) -> None:
        super().__init__(settings, target, knowledge)  # type: ignore[arg-type]
        check_frontable(target)  # before training, not in its first acting round
        self.alpha = settings.alpha
        self.tried: dict[str, float] = {}  # calibration: alpha -> share read back on public data

    def front_model(self, alpha: float, target: Target | None = None) -> Target:
        """The method's model (`target`'s: the method's own by default) with the module in front."""
        return fronted(self.target if target is None else target, self.shapes, self.applying(alpha))

    def send(self, rnd: int, victim: int, server: State, honest: Downlinks) -> Downlinks:
        module = self.module(rnd)
        if not self.alpha:
            self.alpha = self.calibrate(module, honest)
        model, sent = self.front_model(self.alpha, honest.target), self.scaled(module, self.alpha)
        payloads = {k: with_module(model, down, sent) for k, down in honest.payloads.items()}
        if self.settings.isolate:
            payloads = singled_out(payloads, victim, payloads[victim])
        return Downlinks(model, payloads)

    def module(self, rnd: int) -> Payload:
        """The units: one measurement direction, biases at its quantiles over public data."""
        assert self.knowledge is not None, "an acting server holds public data"
        s, pixels = self.settings, math.prod(self.target.ctx.input_shape)
        if s.measurement == "brightness":
            direction = torch.full((pixels,), 1.0 / math.sqrt(pixels))
        else:
            direction = torch.randn(pixels, generator=generator(self.knowledge.seed, "imprint", rnd))
            direction = direction / direction.norm()
        measured = normalised(self.knowledge.aux, self.target).double() @ direction.double()
        levels = torch.arange(1, s.bins + 1, dtype=torch.float64) / (s.bins + 1)
        cuts = torch.quantile(measured, levels).float()
        return {WEIGHT: direction.expand(s.bins, pixels).clone(), BIAS: -cuts}

    def scaled(self, module: Payload, alpha: float) -> Payload:
        """The module with its output layer (the paper's ones, times alpha) where it has one."""
        if self.settings.output != "linear":
            return module
        pixels, k = module[WEIGHT].shape[1], module[WEIGHT].shape[0]
        return {**module, OUT: torch.full((pixels, k), alpha)}

    def applying(self, alpha: float) -> Callable[[State, torch.Tensor], torch.Tensor]:
        """The module's forward on the normalised input z: z plus what the units add."""
        def apply(params: State, z: torch.Tensor) -> torch.Tensor:
            units = torch.relu(z.flatten(1) @ params[WEIGHT].T + params[BIAS])
            if OUT in params:
                return z + (units @ params[OUT].T).view_as(z)
            return z + alpha * shaped_like(z, units.sum(1))
        return apply

    def calibrate(self, module: Payload, honest: Downlinks) -> float:
        """The alpha that reads most of a client of the mean size, made of public images, back."""
        assert self.knowledge is not None
        know = self.knowledge
        n = max(2, min(len(know.aux) // 2, round(know.train_size / max(know.num_clients, 1))))
        data = LocalData(know.aux[:n], know.aux_labels[:n], know.aux[:0], know.aux_labels[:0])
        down = next(iter(honest.payloads.values()))
        for alpha in ALPHAS:
            model = self.front_model(alpha, honest.target)
            sent = with_module(model, down, self.scaled(module, alpha))
            private = honest.target.init_private(0, down, generator(know.seed, "imprint:calibrate"))
            ctx = ClientContext(0, 0, know.seed, sequential_train, samples=n)
            up, _ = model.client_update(sent, private, data, ctx)
            seen = Exchange(0, 0, {0: sent}, {0: up}, {0: n}, False, False, self.target, know.aux)
            self.tried[f"{alpha:g}"] = share_read(self.read(seen).images, data.x_train)
        return float(max(ALPHAS, key=lambda a: self.tried[f"{a:g}"]))

    def record(self) -> dict[str, Any]:
        out = super().record()
        return {**out, "calibration": {"alpha": self.alpha, "read_back_above_40db": self.tried}}

    def read(self, seen: Exchange) -> Readout:
        """Each bin: the difference of its two units' updates, weight over bias."""
        sent = seen.sent[seen.victim]
        got = victim_model(seen, self.settings.isolate, self.front_model(0.0, seen.target))
        cuts = -sent[BIAS].double()
        order = torch.argsort(cuts)
        d_weight = (got[WEIGHT].double() - sent[WEIGHT].double())[order]
        d_bias = (got[BIAS].double() - sent[BIAS].double())[order]
        bins_weight = torch.cat([d_weight[:-1] - d_weight[1:], d_weight[-1:]])
        bins_bias = torch.cat([d_bias[:-1] - d_bias[1:], d_bias[-1:]])
        images, info = ratio_images(bins_weight, bins_bias, seen.target)
        return Readout(images, {"reading": "bin differences of the imprint units", **info,
                                **describe_isolation(seen, self.settings.isolate)})
