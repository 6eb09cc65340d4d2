"""FedPer (Arivazhagan, Aggarwal, Singh, Choudhary: "Federated Learning with Personalization
Layers", arXiv 1912.00818), as WAFFLe's Table 5 compares it: the last layer is personal.

Each client trains base and head together from the global base and its own head; the server
averages the base only (n_k-weighted, FedAvg restricted to the base).

Wire: the base (every parameter but the head) down and up. Private: the head, the top
`head_layers` layers that own parameters (the output layer by default), under the model's own
parameter names (e.g. `fc2.weight`, `fc2.bias`). Each client initialises its head from its own
random generator before its first round, so no head ever crosses the wire. A client deploys the
current global base with its own head.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from fedattack.registry import UserError
from fedattack.target import Hidden, LocalData, LocalProblem, State, Target, TargetContext, WireSchema, initial_weights
from fedattack.wire import Payload


@dataclass(frozen=True, kw_only=True)
class FedPerHyper:
    """head_layers: how many top layers stay on the client (K_P)."""

    head_layers: int = 1

    def __post_init__(self) -> None:
        if self.head_layers < 1:
            raise UserError(f"fedper head_layers={self.head_layers} must be >= 1")


def head_names(model: nn.Module, layers: int) -> list[str]:
    """Parameter names of the last `layers` modules that own parameters directly."""
    owners = [n for n, m in model.named_modules() if any(True for _ in m.parameters(recurse=False))]
    if layers >= len(owners):
        raise UserError(f"fedper head_layers={layers} leaves no shared base; use fewer than {len(owners)}")
    top = set(owners[-layers:])
    return [n for n, _ in model.named_parameters() if n.rpartition(".")[0] in top]


class FedPer(Target):
    """Shared base, personal head (the last layer) kept on each client."""

    name = "fedper"
    paper = "Arivazhagan et al. 2019"
    Hyper = FedPerHyper

    def __init__(self, hyper: FedPerHyper, ctx: TargetContext) -> None:
        super().__init__(hyper, ctx)
        self.head = head_names(self.model, int(self.hyper.head_layers))

    @property
    def base(self) -> list[str]:
        """Every parameter but the head's, in order (a module a server puts in front is base too)."""
        return [n for n in self.param_names if n not in self.head]

    def init_server(self, gen: torch.Generator) -> State:
        return {n: t for n, t in initial_weights(self.model, gen).items() if n in self.base}

    def init_private(self, client: int, server: State, gen: torch.Generator) -> State:
        return {n: t for n, t in initial_weights(self.model, gen).items() if n in self.head}

    def broadcast(self, server: State, client: int, rnd: int) -> Payload:
        return {n: server[n] for n in self.base}

    def start_local(self, down: Payload, private: State, data: LocalData) -> LocalProblem:
        return LocalProblem(params={n: down[n] if n in down else private[n] for n in self.param_names},
                            consts={})

    def finish_local(self, params: State, problem: LocalProblem, down: Payload, private: State,
                     data: LocalData) -> tuple[Payload, State]:
        return {n: params[n] for n in self.base}, {n: params[n] for n in self.head}

    def deployed(self, server: State, private: State) -> State:
        return {n: server[n] if n in server else private[n] for n in self.param_names}

    def wire_schema(self) -> WireSchema:
        shapes = self.param_shapes(self.base)
        return WireSchema(downlink=shapes, uplink=shapes)

    def hidden(self) -> Hidden:
        return Hidden(parameters=tuple(self.head), note="the personal head")
