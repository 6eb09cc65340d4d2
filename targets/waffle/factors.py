"""What the WAFFLe family shares: a dictionary of rank-1 factors per factorised layer, shared
over the wire, and a private per-client selection of its factors (`waffle-ibp`, `waffle-l1`).

Which layers are factorised, with how many factors, is the paper's appendix C for its three
models (see `method.py`); any other model factorises every layer but the output one.
Not a method itself (no `name`, so nothing registers here).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from fedattack.models import build_model
from fedattack.models.layers import Layers
from fedattack.models.zoo.mlp import MLP
from fedattack.registry import UserError
from fedattack.target import Hidden, LocalData, LocalProblem, State, Target, TargetContext
from fedattack.wire import Message, Payload

from .layers import LowRankLayers, LowRankLinear, factorized_modules

PAPER_FACTORS: dict[str, dict[str, int]] = {
    "mnist-mlp": {"fc1": 120},
    "fmnist-cnn": {"conv1": 25, "conv2": 25},
    "cifar-cnn": {"conv1": 10, "conv2": 10, "fc1": 80, "fc2": 40},
}


def choose_factors(model_name: str, plain: nn.Module, factors: int) -> dict[str, int]:
    """Which layers to factorise and with how many factors (see the module docstring)."""
    if model_name in PAPER_FACTORS:
        table = PAPER_FACTORS[model_name]
        return {name: factors or f for name, f in table.items()}
    layers = [(n, m) for n, m in plain.named_modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    hidden = layers[:-1]
    if not hidden:
        raise UserError(f"model {model_name!r} has no hidden layer to factorise; pick a deeper model")
    width = {n: m.out_features if isinstance(m, nn.Linear) else m.out_channels for n, m in hidden}
    return {n: factors or width[n] for n, _ in hidden}


class FactorSelectionTarget(Target):
    """Shared dictionary layers, a private per-client selection of factors (WAFFLe family).

    Subclasses say what the private selection is (`init_selection`), how training draws it
    (`local_loss`) and what a trained client deploys (`deployed_selection`).
    """

    def __init__(self, hyper: Any, ctx: TargetContext) -> None:
        plain = build_model(ctx.model, ctx.input_shape, ctx.num_classes)
        self.factor_counts = choose_factors(ctx.model, plain, int(hyper.factors))
        super().__init__(hyper, ctx)
        self.factorized = {n: m.num_factors for n, m in factorized_modules(self.model).items()}

    def layers(self) -> Layers:
        return LowRankLayers(self.factor_counts)

    # -- subclass hooks -------------------------------------------------------------------
    def init_selection(self, layer: str, num_factors: int) -> State:
        raise NotImplementedError

    def deployed_selection(self, private: State, layer: str) -> torch.Tensor:
        raise NotImplementedError

    # -- the contract ---------------------------------------------------------------------
    @property
    def selection_scale(self) -> float:
        """SGD sees private selection parameters divided by this, so their step is scale^2 * lr."""
        return float(self.hyper.selection_lr_scale) ** 0.5

    def selection(self, params: State, name: str) -> torch.Tensor:
        """A private selection parameter in its own units, inside `local_loss`."""
        return params[name] * self.selection_scale

    def start_local(self, down: Payload, private: State, data: LocalData) -> LocalProblem:
        if not private:
            private = {k: v for layer, f in self.factorized.items()
                       for k, v in self.init_selection(layer, f).items()}
        scaled = {k: v / self.selection_scale for k, v in private.items()}
        params = {**{n: down[n] for n in self.param_names}, **scaled}
        return LocalProblem(params=params, consts={"n_train": torch.tensor(float(data.size))})

    def finish_local(self, params: State, problem: LocalProblem, down: Payload, private: State,
                     data: LocalData) -> tuple[Payload, State]:
        shared = set(self.param_names)
        up = {n: params[n] for n in self.param_names}
        return up, {k: v * self.selection_scale for k, v in params.items() if k not in shared}

    def aggregate(self, server: State, uplinks: list[Message], rnd: int) -> State:
        """The paper's "simple averaging step" (equal to FedAvg's on equal-size shards)."""
        names = uplinks[0].payload.keys()
        return {**server, **{n: torch.stack([m.payload[n] for m in uplinks]).mean(0) for n in names}}

    def deployed(self, server: State, private: State) -> State:
        params = {n: server[n] for n in self.param_names}
        for layer, f in self.factorized.items():
            params[f"{layer}.b"] = (self.deployed_selection(private, layer) if private
                                    else torch.ones(f))
        return params

    def hidden(self) -> Hidden:
        return Hidden(selection=dict(self.factorized), selection_prior=self.selection_prior(),
                      note="the per-client factor selection b of every factorised layer")

    def selection_prior(self) -> dict[str, float]:
        """The IBP prior's alpha per factorised layer, for methods whose selection has one."""
        return {}

    def lowrank_chain(self, problem: LocalProblem) -> tuple[tuple[str, bool], ...] | None:
        """The zoo MLP's layers in order, True where factorised, when this method computes it as
        `MLP.forward` does (`plain_forward`) through plain and low-rank linear layers only (what
        WAFFLe's kernel reproduces); None for anything else."""
        model = self.model
        if not self.plain_forward or not isinstance(model, MLP):
            return None
        chain = []
        for name in model.chain():
            kind = type(getattr(model, name))
            if kind not in (LowRankLinear, nn.Linear):
                return None
            chain.append((name, kind is LowRankLinear))
        names = {f"{n}.{p}" for n, f in chain for p in (("W_a", "W_b", "r") if f else ("weight", "bias"))}
        shared = set(self.param_names)
        return tuple(chain) if names == shared and shared <= set(problem.params) else None
