"""Sample-level differential privacy on the clients: DP-SGD (Abadi et al., CCS 2016).

Every local step computes each sample's gradient (`torch.func.vmap(grad(...))` over the
batch, inside the project's functional step, not Opacus' module hooks), clips each to L2 norm
C over all local parameters together, sums them, adds Gaussian noise of std sigma * C, and
divides by the batch size. Everything a client sends is then post-processing of DP-SGD's
output, so the guarantee (one sample of one client) holds against the server, an
eavesdropper and the final model alike. The noise comes from a generator keyed by (seed,
dp-sgd, round, client, step). A method wrapped in it trains client by client (the batched
executor runs it through the sequential loop, so the two agree bit for bit).

Accounting (`_accountant.epsilon_dp_sgd`), per client, from what the federation did: its n_k
and the number of rounds it trained (recorded as clients send), the worst client reported:
`epsilon` composes one Gaussian mechanism per local epoch (valid for shuffled epochs, no
amplification); `epsilon_amplified` is the usual DP-SGD figure (each step an independent
fixed-size sample of B of n_k), for comparison with papers only.

Layers that mix the samples of a batch (batch normalisation) have no per-sample gradient:
such a model is refused in one line naming the layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.func import grad, vmap

from fedattack.defences import _accountant
from fedattack.defences.base import Defence
from fedattack.models import MIXING
from fedattack.registry import UserError
from fedattack.rng import generator
from fedattack.target import ClientContext, State, Target
from fedattack.training import Batch
from fedattack.wire import Payload


@dataclass(frozen=True, kw_only=True)
class DPSGDSettings:
    """clip_norm: C, per sample. noise_multiplier: sigma (noise std sigma*C on each step's sum of
    clipped per-sample gradients). delta: the accountant's."""

    clip_norm: float = 1.0
    noise_multiplier: float = 1.0
    delta: float = 1e-5

    def __post_init__(self) -> None:
        _accountant.check_gaussian("dp-sgd", self.clip_norm, self.noise_multiplier, self.delta)


class DPSGD(Defence):
    """Per-sample clipping and Gaussian noise in every local step of every client."""

    name = "dp-sgd"
    Settings = DPSGDSettings
    trains_locally = True

    def __init__(self, settings: Any, ctx: Any) -> None:
        super().__init__(settings, ctx)
        self.trained: dict[int, tuple[int, int]] = {}  # client -> (n_k, rounds it trained)

    def bind(self, target: Target) -> None:
        for name, module in target.model.named_modules():
            if isinstance(module, MIXING):
                raise UserError(f"dp-sgd cannot train {target.name} on {target.ctx.model}: its layer {name} "
                                f"({type(module).__name__}) mixes the samples of a batch, so a sample has "
                                "no gradient of its own; use a model without batch normalisation")

    def local_gradients(self, target: Target, params: State, consts: State, batch: Any, noise: State,
                        step: torch.Tensor, ctx: ClientContext) -> list[torch.Tensor | None]:
        s = self.settings
        names = list(params)
        per_sample = self._per_sample(target, {n: p.detach() for n, p in params.items()}, consts,
                                      batch, noise, step)
        norms = torch.stack([per_sample[n].flatten(1).double().pow(2).sum(1) for n in names]).sum(0).sqrt()
        scale = (s.clip_norm / norms.clamp_min(1e-12)).clamp(max=1.0).float()
        gen = generator(ctx.seed, f"defence:{self.name}", ctx.round, ctx.client, int(step))
        size = len(batch.y)
        out: list[torch.Tensor | None] = []
        for n in names:
            g = per_sample[n]
            total = (g * scale.view(-1, *([1] * (g.dim() - 1)))).sum(0)
            noisy = total + torch.randn(total.shape, generator=gen) * (s.noise_multiplier * s.clip_norm)
            out.append(noisy / size)
        return out

    @staticmethod
    def _per_sample(target: Target, params: State, consts: State, batch: Batch, noise: State,
                    step: torch.Tensor) -> State:
        def one(p: State, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return target.local_loss(p, consts, Batch(x[None], y[None], torch.ones(1)), noise, step)

        return vmap(grad(one), in_dims=(None, 0, 0))(params, batch.x, batch.y)

    def on_uplink(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        size, rounds = self.trained.get(ctx.client, (ctx.samples or 0, 0))
        self.trained[ctx.client] = (ctx.samples or size, rounds + 1)
        return up

    def accounting(self) -> dict[str, Any]:
        s, recipe = self.settings, self.ctx.recipe
        out: dict[str, Any] = {
            "delta": s.delta, "level": "sample", "batch_size": recipe.batch_size, "epochs": recipe.epochs,
            "accountant": "RDP (dp-accounting), per client: one Gaussian mechanism per local epoch "
                          "(shuffled epochs, replace-one), the worst client",
        }
        if s.noise_multiplier == 0:
            return {**out, "epsilon": None, "note": "no noise: no privacy guarantee"}
        if not self.trained:
            return {**out, "epsilon": None, "note": "accounted from the clients' n_k once they have trained"}
        cases = set(self.trained.values())
        try:
            exact = {c: self._epsilon(*c, amplified=False) for c in cases}
            loose = {c: self._epsilon(*c, amplified=True) for c in cases}
        except UserError as missing:
            return {**out, "epsilon": None, "note": str(missing)}
        worst = max(cases, key=lambda c: exact[c])
        return {**out, "epsilon": _accountant.finite(exact[worst]),
                "epsilon_amplified": _accountant.finite(max(loose.values())),
                "worst_client": {"samples": worst[0], "rounds": worst[1]}}

    def _epsilon(self, size: int, rounds: int, amplified: bool) -> float:
        s, recipe = self.settings, self.ctx.recipe
        return _accountant.epsilon_dp_sgd(s.noise_multiplier, recipe.batch_size, max(size, 1),
                                          recipe.epochs * rounds, s.delta, amplified)



