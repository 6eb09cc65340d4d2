"""CGAU (Rieger, Hoegh, Hansen: "Client Adaptation improves Federated Learning with Simulated
Non-IID Clients", FL-ICML 2020): a classifier of conditional gated activation units on features
of a frozen extractor, trained with FedAvg on the shared weights.

Each client's conditioning (its row of V_f and V_g, here the vectors `cgau<l>.v_f`, `cgau<l>.v_g`)
stays on the client, as the paper describes for a real federation ("we do not need to share the
learnt client conditioning"); the reference code instead averages every client's rows. The
paper's classifier: two layers of 64 units, 50% dropout between layers, each client taking 10
SGD steps of batch 32 per round (`local_steps`: each round a fresh random subset of
local_steps x batch samples, per epoch of the recipe; 0 uses all the data), all clients every
round; the paper's CIFAR-10 run uses lr 0.01 and 128 units. FedAvg weighs each client by the
samples it used, as TensorFlow Federated does. `conditioning=false` is the same classifier
without conditioning; `units=relu` the paper's Dense+ReLU baseline.

The extractor (`fedattack.models.zoo.cgau`): `central` (default) trains a small network on the
*test* split of `extractor_data` (no client holds any of it) and caches it; `torchvision:<arch>`
loads a user's weights file, e.g. `--set extractor=torchvision:resnet18 --set
extractor_weights=~/resnet18-f37072fd.pth --set extractor_size=224`; `pixels` uses raw pixels.
`--model` is not used: the classifier is built here. Features are computed once per client
dataset and reused, so `batchable = False` (the classifier is tiny).

Wire: the shared weights down and up (every parameter but the conditioning). Private: the
conditioning vectors, absent (zero) until the client first trains. A client deploys the shared
weights with its own conditioning.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedattack.models.zoo.cgau import CGAUNet, ExtractorSpec, build_extractor, embed
from fedattack.options import one_of
from fedattack.registry import UserError
from fedattack.rng import generator
from fedattack.target import (
    ClientContext,
    Hidden,
    LocalData,
    LocalProblem,
    State,
    Target,
    TargetContext,
    WireSchema,
    initial_weights,
    weighted_mean,
)
from fedattack.training import Batch
from fedattack.wire import Message, Payload


@dataclass(frozen=True, kw_only=True)
class CGAUHyper:
    """See the module docstring for every setting."""

    conditioning: bool = True
    units: str = "gated"
    hidden: int = 64
    layers: int = 2
    dropout: float = 0.5
    local_steps: int = 10
    extractor: str = "central"
    extractor_data: str = "digits"
    extractor_weights: str = ""
    extractor_size: int = 0

    def __post_init__(self) -> None:
        if self.hidden < 1 or self.layers < 1 or not 0 <= self.dropout < 1 or self.local_steps < 0:
            raise UserError("cgau needs hidden >= 1, layers >= 1, 0 <= dropout < 1, local_steps >= 0")
        one_of(self.units, ("gated", "relu"), "cgau units")  # refused here, not after the data loads
        one_of(self.extractor.partition(":")[0], ("central", "torchvision", "pixels"), "cgau extractor (its kind)")


class CGAU(Target):
    """Gated units conditioned per client; FedAvg on the shared weights, conditioning private."""

    name = "cgau"
    paper = "Rieger et al., FL-ICML 2020"
    Hyper = CGAUHyper
    normalizes_inputs = False  # the extractor sees the pixels it was trained on
    batchable = False

    def __init__(self, hyper: CGAUHyper, ctx: TargetContext) -> None:
        super().__init__(hyper, ctx)
        spec = ExtractorSpec(hyper.extractor, hyper.extractor_data, hyper.extractor_weights,
                             hyper.extractor_size, data_root=ctx.data_root or "")
        extractor = build_extractor(spec, ctx.input_shape, ctx.num_classes)
        self.extractor = extractor
        dim = embed(extractor, torch.zeros(1, *ctx.input_shape)).shape[1]
        self.model = CGAUNet(extractor, dim, ctx.num_classes, hyper.hidden, hyper.layers,
                             hyper.conditioning, hyper.units)
        self.param_names = [n for n, _ in self.model.named_parameters()]
        self.private_names = [n for n in self.param_names if n.endswith((".v_f", ".v_g"))]
        self.shared_names = [n for n in self.param_names if n not in self.private_names]
        self._memo: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The extractor's features, remembered per image tensor (client data never changes)."""
        if x.dim() == 2 or x.requires_grad or _transformed(x):
            return x  # 4-D inputs then go through the extractor inside the model
        hit = self._memo.get(id(x))
        if hit is None or hit[0] is not x:
            if len(self._memo) >= 256:  # attacks query many fresh tensors; keep memory bounded
                self._memo.clear()
            hit = (x, embed(self.extractor, x))
            self._memo[id(x)] = hit
        return hit[1]

    def forward(self, params: State, x: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(self.model, params, (self.features(x),))

    def init_server(self, gen: torch.Generator) -> State:
        weights = initial_weights(self.model, gen)
        return {n: weights[n] for n in self.shared_names}

    def broadcast(self, server: State, client: int, rnd: int) -> Payload:
        return {n: server[n] for n in self.shared_names}

    def client_update(self, down: Payload, private: State, data: LocalData,
                      ctx: ClientContext) -> tuple[Payload, State]:
        feats = LocalData(self.features(data.x_train), data.y_train, data.x_test, data.y_test)
        cap = self.hyper.local_steps * self.recipe.batch_size
        if cap and feats.size > cap:
            idx = torch.randperm(feats.size, generator=generator(ctx.seed, "cgau-steps", ctx.round,
                                                                  ctx.client))[:cap]
            feats = LocalData(feats.x_train[idx], feats.y_train[idx], data.x_test, data.y_test)
        problem = self.start_local(down, private, feats)
        return self.finish_local(ctx.train(self, problem, feats), problem, down, private, feats)

    def start_local(self, down: Payload, private: State, data: LocalData) -> LocalProblem:
        return LocalProblem(params=self.deployed(down, private), consts={})

    def noise_shapes(self, problem: LocalProblem) -> dict[str, tuple[int, ...]]:
        if not self.hyper.dropout:
            return {}
        return {f"drop{i}": (self.recipe.batch_size, self.hyper.hidden)
                for i in range(1, self.hyper.layers + 1)}

    def local_loss(self, params: State, consts: State, batch: Batch, noise: State,
                   step: torch.Tensor) -> torch.Tensor:
        p, b = self.hyper.dropout, batch.x.shape[0]
        masks = [(noise[f"drop{i}"][:b] >= p).to(batch.x.dtype) / (1.0 - p)
                 for i in range(1, self.hyper.layers + 1)] if noise else None
        logits = torch.func.functional_call(self.model, params, (self.features(batch.x), masks))
        return batch.cross_entropy(logits)

    def finish_local(self, params: State, problem: LocalProblem, down: Payload, private: State,
                     data: LocalData) -> tuple[Payload, State]:
        return ({n: params[n] for n in self.shared_names},
                {n: params[n] for n in self.private_names})

    def aggregate(self, server: State, uplinks: list[Message], rnd: int) -> State:
        cap = self.hyper.local_steps * self.recipe.batch_size
        sizes = [float(m.samples or 0) for m in uplinks]
        return {**server, **weighted_mean(uplinks, [min(w, cap) if cap else w for w in sizes])}

    def deployed(self, server: State, private: State) -> State:
        shapes = dict(self.model.named_parameters())
        cond = {n: private[n] if n in private else torch.zeros_like(shapes[n]) for n in self.private_names}
        return {**{n: server[n] for n in self.shared_names}, **cond}

    def wire_schema(self) -> WireSchema:
        shapes = self.param_shapes(self.shared_names)
        return WireSchema(downlink=shapes, uplink=shapes)

    def hidden(self) -> Hidden:
        return Hidden(parameters=tuple(self.private_names), zero_means_untrained=True,
                      note="the client's conditioning vectors")


def _transformed(x: torch.Tensor) -> bool:
    """Whether `x` lives inside a vmap/grad transform (never remember such tensors)."""
    check = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", None)
    return bool(check(x)) if check is not None else False
