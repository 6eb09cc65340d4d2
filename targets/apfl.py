"""APFL (Deng, Kamani, Mahdavi: "Adaptive Personalized Federated Learning", arXiv 2003.13461,
Algorithm 1 with adaptive alpha), as the WAFFLE paper benchmarks it ("adaptively update the
hyperparameter").

Client i keeps a personal model v_i and a mixing weight alpha_i. On each minibatch xi, from the
current (w, v, alpha) and with the mixture vbar = alpha v + (1 - alpha) w:
    w     <- w - lr grad f(w; xi)
    v     <- v - lr alpha grad f(vbar; xi)
    alpha <- clip(alpha - alpha_lr <v - w, grad f(vbar; xi)>, 0, 1)
The three gradients are those of the pure loss f(w) + f(alpha v + (1 - alpha) stop(w)); the
projection of alpha onto [0, 1] after every step is not a gradient step, so this target runs its
own loop (`batchable = False`). The server averages the uploaded w (n_k-weighted, as FedAvg).
The personal model mixes parameters as the paper does (the official FedTorch code mixes outputs).
v_i starts from the first w the client receives and alpha_i from `alpha` (0.5, the code's
default); with `adaptive=false` alpha stays fixed.

Wire: w down and the locally trained w_i up (parameter names). Private: v_i under the parameter
names and `alpha`, absent until the client first trains. A trained client deploys
alpha v_i + (1 - alpha) w; one that never trained deploys w.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedattack.registry import UserError
from fedattack.target import ClientContext, Hidden, LocalData, State, Target
from fedattack.training import Batch, step_batches
from fedattack.wire import Payload

W, V, ALPHA = "w.", "v.", "alpha"


@dataclass(frozen=True, kw_only=True)
class APFLHyper:
    """alpha: initial mixing weight. adaptive: learn alpha. alpha_lr: its step (0: the local lr)."""

    alpha: float = 0.5
    adaptive: bool = True
    alpha_lr: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.alpha <= 1 or self.alpha_lr < 0:
            raise UserError("apfl needs 0 <= alpha <= 1 and alpha_lr >= 0")


class APFL(Target):
    """A personal model mixed with the global one by a learned weight; both stay on the client."""

    name = "apfl"
    paper = "Deng et al. 2020"
    Hyper = APFLHyper
    batchable = False

    def client_update(self, down: Payload, private: State, data: LocalData,
                      ctx: ClientContext) -> tuple[Payload, State]:
        r = self.recipe
        personal = {**down, **private}  # from the downlink where it has no part yet (its first round)
        params = {**{W + n: down[n] for n in self.param_names},
                  **{V + n: personal[n] for n in self.param_names},
                  ALPHA: private.get(ALPHA, torch.tensor(float(self.hyper.alpha)))}
        for idx in step_batches(data.size, r.epochs, r.batch_size, ctx.seed, ctx.round, ctx.client):
            batch = Batch(data.x_train[idx], data.y_train[idx], torch.full((len(idx),), 1.0 / len(idx)))
            params = self._step(params, batch)
        up = {n: params[W + n] for n in self.param_names}
        return up, {**{n: params[V + n] for n in self.param_names}, ALPHA: params[ALPHA]}

    def local_loss(self, params: State, consts: State, batch: Batch, noise: State,
                   step: torch.Tensor) -> torch.Tensor:
        a = params[ALPHA]
        w = {n: params[W + n] for n in self.param_names}
        mix = {n: a * params[V + n] + (1 - a) * w[n].detach() for n in self.param_names}
        return (batch.cross_entropy(self.forward(w, batch.x))
                + batch.cross_entropy(self.forward(mix, batch.x)))

    def _step(self, params: State, batch: Batch) -> State:
        h, lr = self.hyper, self.recipe.lr
        leaves = {k: t.detach().requires_grad_(True) for k, t in params.items()}
        loss = self.local_loss(leaves, {}, batch, {}, torch.tensor(0))
        grads = dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values()))))
        out = {k: (leaves[k] - lr * grads[k]).detach() for k in leaves if k != ALPHA}
        alpha = leaves[ALPHA].detach()
        if h.adaptive:
            alpha = (alpha - (h.alpha_lr or lr) * grads[ALPHA]).clamp(0.0, 1.0)
        return {**out, ALPHA: alpha}

    def hidden(self) -> Hidden:
        return Hidden(personal_prox=0.0, note="the personal model v_i and its mixing weight")

    def deployed(self, server: State, private: State) -> State:
        if not private:
            return {n: server[n] for n in self.param_names}
        a = private[ALPHA]
        return {n: a * private[n] + (1 - a) * server[n] for n in self.param_names}
