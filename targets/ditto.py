"""Ditto (Li, Hu, Beirami, Smith: "Ditto: Fair and Robust Federated Learning Through
Personalization", ICML 2021; the official code's interleaved solver). The WAFFLE paper's future
work asks for it; it is an extra column of that benchmark here.

Client k trains two models on the same minibatches: the global copy w_k by plain SGD from w^t,
and its personal model v_k by SGD on F_k(v) + (lam/2) |v - w^t|^2, anchored at the w^t it
received this round. Both steps are one pure loss, F_k(w) + F_k(v) + (lam/2)|v - w^t|^2, whose
gradient is exactly the pair of steps, so an executor can batch clients. The client sends
delta_k = w_k - w^t; the server adds the unweighted mean of the deltas (as the code does).
v_k starts from the first w^t the client receives (the code copies the initial global model to
every client; with every client in round 1 that is the same) and persists across rounds.
lam = 1 is the official Fashion-MNIST script's value (the paper tunes it on a grid).

Wire: w^t down (parameter names), delta_k up (`delta.<name>`). Private: v_k under the parameter
names, absent until the client first trains; a trained client deploys v_k, others w^t.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedattack.registry import UserError
from fedattack.target import Hidden, LocalData, LocalProblem, State, Target, WireSchema, applied_update
from fedattack.training import Batch
from fedattack.wire import Message, Payload

W, V, ANCHOR, DELTA = "w.", "v.", "anchor.", "delta."


@dataclass(frozen=True, kw_only=True)
class DittoHyper:
    """lam: strength of the pull of the personal model towards the global one."""

    lam: float = 1.0

    def __post_init__(self) -> None:
        if self.lam < 0:
            raise UserError(f"ditto lam={self.lam} must be >= 0")


class Ditto(Target):
    """FedAvg-style global model plus a personal model regularised towards it, kept private."""

    name = "ditto"
    paper = "Li et al., ICML 2021"
    Hyper = DittoHyper
    decode_needs = frozenset({"up", "down"})

    def start_local(self, down: Payload, private: State, data: LocalData) -> LocalProblem:
        personal = {**down, **private}  # from the downlink where it has no part yet (its first round)
        params = {**{W + n: down[n] for n in self.param_names},
                  **{V + n: personal[n] for n in self.param_names}}
        return LocalProblem(params=params, consts={ANCHOR + n: down[n] for n in self.param_names})

    def local_loss(self, params: State, consts: State, batch: Batch, noise: State,
                   step: torch.Tensor) -> torch.Tensor:
        w = {n: params[W + n] for n in self.param_names}
        v = {n: params[V + n] for n in self.param_names}
        prox = sum(((v[n] - consts[ANCHOR + n]) ** 2).sum() for n in self.param_names)
        return (batch.cross_entropy(self.forward(w, batch.x))
                + batch.cross_entropy(self.forward(v, batch.x)) + 0.5 * self.hyper.lam * prox)

    def finish_local(self, params: State, problem: LocalProblem, down: Payload, private: State,
                     data: LocalData) -> tuple[Payload, State]:
        up = {DELTA + n: params[W + n] - down[n] for n in self.param_names}
        return up, {n: params[V + n] for n in self.param_names}

    def aggregate(self, server: State, uplinks: list[Message], rnd: int) -> State:
        m = len(uplinks)
        return {**server, **{n: server[n] + sum(u.payload[DELTA + n] for u in uplinks) / m
                             for n in self.param_names}}

    def deployed(self, server: State, private: State) -> State:
        source = private if private else server
        return {n: source[n] for n in self.param_names}

    def wire_schema(self) -> WireSchema:
        shapes = self.param_shapes()
        return WireSchema(downlink=shapes, uplink={DELTA + n: s for n, s in shapes.items()})

    def decode(self, down: Payload | None, up: Payload) -> State | None:
        """The client's global copy w_k: the downlink plus its uplinked delta."""
        return applied_update(down, up, self.param_names, DELTA)

    def hidden(self) -> Hidden:
        return Hidden(personal_prox=float(self.hyper.lam), note="the personal model v_k")
