"""FedProx (Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith: "Federated Optimization in Heterogeneous
Networks", MLSys 2020).

Each sampled client approximately minimises F_k(w) + (mu/2) |w - w^t|^2 from w^t by local SGD
(the official code's PerturbedGradientDescent step); the server takes the n_k-weighted average.
WAFFLe's comparison uses mu = 1.0 (section IV.A.2), the default here.

Wire: w^t down, the client's locally trained w_k up (as FedAvg). Private: nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedattack.registry import UserError
from fedattack.target import LocalData, LocalObjective, LocalProblem, State, Target
from fedattack.training import Batch
from fedattack.wire import Payload


@dataclass(frozen=True, kw_only=True)
class FedProxHyper:
    """mu: weight of the proximal term (mu/2)|w - w^t|^2."""

    mu: float = 1.0

    def __post_init__(self) -> None:
        if self.mu < 0:
            raise UserError(f"fedprox mu={self.mu} must be >= 0")


class FedProx(Target):
    """Local SGD on the loss plus a proximal pull towards the global weights; FedAvg aggregation."""

    name = "fedprox"
    paper = "Li et al., MLSys 2020"
    Hyper = FedProxHyper

    def start_local(self, down: Payload, private: State, data: LocalData) -> LocalProblem:
        params = {n: down[n] for n in self.param_names}
        return LocalProblem(params=params, consts={f"anchor.{n}": down[n] for n in self.param_names})

    def local_objective(self) -> LocalObjective:
        """`local_loss` is the default loss plus (mu/2)|w - anchor|^2, anchors in consts as
        `anchor.<name>`: the built-in kernels train it (`fedattack.kernels.proximal`)."""
        return LocalObjective(proximal=float(self.hyper.mu))

    def local_loss(self, params: State, consts: State, batch: Batch, noise: State,
                   step: torch.Tensor) -> torch.Tensor:
        prox = sum(((params[n] - consts[f"anchor.{n}"]) ** 2).sum() for n in self.param_names)
        return batch.cross_entropy(self.forward(params, batch.x)) + 0.5 * self.hyper.mu * prox
