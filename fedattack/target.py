"""The method contract: what every federated-learning method (a *target*) provides.

A target says what the server sends each client (`broadcast`), what a client sends back and
keeps (`client_update`), how the server combines the uplinks (`aggregate`), and which model a
client actually deploys (`deployed`). The round loop records the first two as the wire. What
`client_update` returns as private state never crosses it.

Most methods train locally by SGD on some loss. They describe that loss as a pure function of
tensors (`local_loss`) between `start_local` and `finish_local`, and the executors own the
loop over epochs and batches: sequentially, or all sampled clients at once (`batchable`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import torch
from torch import nn

from fedattack.models import build_model
from fedattack.models.layers import Layers
from fedattack.registry import TARGETS, UserError
from fedattack.training import Batch
from fedattack.wire import Payload

State = dict[str, torch.Tensor]


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """The local training recipe every method shares (the papers' E, B and learning rate)."""

    epochs: int = 5
    batch_size: int = 10
    lr: float = 0.04


@dataclass(frozen=True, kw_only=True)
class NoHyper:
    """A method without hyperparameters of its own."""


@dataclass
class LocalData:
    """One client's local data, already relabelled if its partition shifts concepts."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor

    @property
    def size(self) -> int:
        return int(self.y_train.shape[0])


@dataclass
class LocalProblem:
    """What local SGD optimises: trainable tensors and the constants the loss reads."""

    params: State
    consts: State


@dataclass(frozen=True)
class WireSchema:
    """Names and shapes of what goes down to and up from a client."""

    downlink: Mapping[str, tuple[int, ...]]
    uplink: Mapping[str, tuple[int, ...]]


class Target:
    """Base class of every method; subclasses register under `name` by defining it."""

    name: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    Hyper: ClassVar[type] = NoHyper
    batchable: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            TARGETS.add(cls.name, cls)

    def __init__(self, hyper: Any, model_name: str, input_shape: tuple[int, int, int],
                 num_classes: int, recipe: Recipe, num_clients: int) -> None:
        self.hyper = hyper
        # the federation's number of rounds, for schedules; whoever builds the target sets it
        self.total_rounds: int | None = None
        self.model_name = model_name
        self.recipe = recipe
        self.num_clients = num_clients
        self.num_classes = num_classes
        self.model = build_model(model_name, input_shape, num_classes, self.layers())
        self.param_names = [n for n, _ in self.model.named_parameters()]

    # -- what a method may override -------------------------------------------------------
    def layers(self) -> Layers:
        """The layer factory for this method's model (WAFFLe factorises)."""
        return Layers()

    def init_server(self, gen: torch.Generator) -> State:
        """The server's starting state: by default the model's initial weights."""
        return initial_weights(self.model, gen)

    def init_private(self, client: int, server: State, gen: torch.Generator) -> State:
        """A client's private state before it first trains."""
        return {}

    def broadcast(self, server: State, client: int, rnd: int) -> Payload:
        return {n: server[n] for n in self.param_names}

    def client_update(self, down: Payload, private: State, data: LocalData,
                      ctx: "ClientContext") -> tuple[Payload, State]:
        """Run local training; the default is SGD on `local_loss` through the executor."""
        problem = self.start_local(down, private, data)
        params = ctx.train(self, problem, data)
        return self.finish_local(params, problem, down, private, data)

    def start_local(self, down: Payload, private: State, data: LocalData) -> LocalProblem:
        return LocalProblem(params={n: down[n] for n in self.param_names}, consts={})

    def local_loss(self, params: State, consts: State, batch: Batch, noise: State,
                   step: torch.Tensor) -> torch.Tensor:
        """The loss one local SGD step minimises; pure, so executors may batch clients.

        Use `batch.cross_entropy(logits)`: it weights samples so padded batches stay exact.
        """
        return batch.cross_entropy(self.forward(params, batch.x))

    def noise_shapes(self, problem: LocalProblem) -> dict[str, tuple[int, ...]]:
        """Uniform(0,1) noise the loss needs per step, drawn by the executor (reproducibly)."""
        return {}

    def finish_local(self, params: State, problem: LocalProblem, down: Payload, private: State,
                     data: LocalData) -> tuple[Payload, State]:
        return dict(params), private

    def aggregate(self, server: State, uplinks: list[Payload], weights: list[float],
                  rnd: int) -> State:
        return {**server, **weighted_mean(uplinks, weights)}

    def deployed(self, server: State, private: State) -> State:
        """The full parameter dict a client uses for prediction (utility and the oracle)."""
        return {n: server[n] for n in self.param_names}

    def wire_schema(self) -> WireSchema:
        shapes = {n: tuple(p.shape) for n, p in self.model.named_parameters()}
        return WireSchema(downlink=shapes, uplink=shapes)

    # -- shared helpers -------------------------------------------------------------------
    def forward(self, params: State, x: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(self.model, params, (x,))

    @classmethod
    def make_hyper(cls, overrides: Mapping[str, Any]) -> Any:
        return build_dataclass(cls.Hyper, overrides, f"method {cls.name}")


class ClientContext:
    """What the loop tells a client about its round; `train` runs local SGD via the executor."""

    def __init__(self, rnd: int, client: int, seed: int, trainer: Any) -> None:
        self.round = rnd
        self.client = client
        self.seed = seed
        self._trainer = trainer

    def train(self, target: Target, problem: LocalProblem, data: LocalData) -> State:
        return self._trainer(target, problem, data, self)


def initial_weights(model: nn.Module, gen: torch.Generator) -> State:
    """Re-initialise a fresh copy of the model's parameters from `gen` (reproducible init)."""
    state: State = {}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen)))
        for module in model.modules():
            if hasattr(module, "reset_parameters"):
                module.reset_parameters()
        for name, p in model.named_parameters():
            state[name] = p.detach().clone()
    return state


def weighted_mean(payloads: list[Payload], weights: list[float]) -> Payload:
    """The n_k-weighted average of each named tensor (FedAvg's aggregation)."""
    total = float(sum(weights))
    names = payloads[0].keys()
    return {n: sum(w / total * p[n] for p, w in zip(payloads, weights)) for n in names}


def build_dataclass(cls: type, overrides: Mapping[str, Any], what: str) -> Any:
    """Build a frozen config dataclass from overrides, refusing unknown keys and bad types."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values = {}
    for key, raw in overrides.items():
        name = key.replace("-", "_")
        if name not in fields:
            known = ", ".join(sorted(fields)) or "none"
            raise UserError(f"{what} has no setting {key!r}; its settings are: {known}")
        values[name] = coerce(raw, fields[name], what)
    return cls(**values)


def coerce(raw: Any, field: dataclasses.Field, what: str) -> Any:
    """Turn a command-line string into the field's declared type (bool, int, float, str)."""
    if not isinstance(raw, str):
        return raw
    kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "str")
    try:
        if kind.startswith("bool"):
            if raw.lower() not in {"true", "false", "1", "0", "yes", "no"}:
                raise ValueError(raw)
            return raw.lower() in {"true", "1", "yes"}
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
    except ValueError:
        raise UserError(f"{what}: {field.name}={raw!r} is not a valid {kind}") from None
    return raw
