"""FedAvg with server momentum (FedAvgM, Hsu et al. 2019), as a plugin: one file, no edits.

Its server steps along the n_k-weighted mean of the uplinks with momentum, so it reads the
uplinks only through that mean and says so (`reads_weighted_mean`): secure aggregation, which
hands the server nothing but that mean, composes with it."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedattack.target import State, Target, weighted_mean
from fedattack.wire import Message, Payload


@dataclass(frozen=True, kw_only=True)
class FedAvgMHyper:
    """beta: the server's momentum. server_lr: its step along the momentum."""

    beta: float = 0.9
    server_lr: float = 1.0


class FedAvgM(Target):
    """FedAvg whose server keeps a momentum of the mean update (Hsu et al. 2019)."""

    name = "fedavgm"
    Hyper = FedAvgMHyper
    reads_weighted_mean = True

    def init_server(self, gen: torch.Generator) -> State:
        weights = super().init_server(gen)
        return {**weights, **{f"momentum.{n}": torch.zeros_like(t) for n, t in weights.items()}}

    def broadcast(self, server: State, client: int, rnd: int) -> Payload:
        return {n: server[n] for n in self.param_names}

    def aggregate(self, server: State, uplinks: list[Message], rnd: int) -> State:
        mean, out = weighted_mean(uplinks), dict(server)
        for n in self.param_names:
            out[f"momentum.{n}"] = self.hyper.beta * server[f"momentum.{n}"] + server[n] - mean[n]
            out[n] = server[n] - self.hyper.server_lr * out[f"momentum.{n}"]
        return out
