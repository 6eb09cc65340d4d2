"""The method contract: what every federated-learning method (a *target*) provides.

A target says what the server sends each client (`broadcast`), what a client sends back and
keeps (`client_update`), how the server combines the uplinks it received (`aggregate`, given
the recorded messages with their senders), and which model a client actually deploys
(`deployed`). The round loop records the first two as the wire; what `client_update` returns as
private state never crosses it.

A target also says what its wire *means*, so attacks never need to know a method by name:
`decode` rebuilds the client's trained parameters from one round's messages, and `hidden`
declares what the client keeps that the wire does not carry (parameters, a factor selection, a
personal model). Reconstruction strategies select on those declarations.

Most methods train locally by SGD on some loss. They describe that loss as a pure function of
tensors (`local_loss`) between `start_local` and `finish_local`, and the executors own the
sequence and the loop over epochs and batches: sequentially, or all sampled clients at once
(`batchable`). A method that writes its own `client_update` cannot be batched. How many
clients train at once is the method's to say too: `step_kernel` hands the batched executors a
hand-written training of a stack of clients (`fedattack.kernels`), or None for the generic
`vmap(grad(local_loss))`.

A method's defences are part of its context (`TargetContext.defences`), and this base class runs
them where the contract says: each one's client side as the uplink leaves the client (`seal`),
each one's server side before `aggregate` (`receive`, `server_step`), the dtypes they send
(`recorded_schema`), whether they mask the uplinks (`uplinks_hidden`, `read_uplink`), and
whether one trains the clients itself (`trains_in_stacks`; the sequential loop then takes its
local gradients, `fedattack.training.local_gradients`).

Whatever an executor, a kernel, a defence or an attack needs to know about a method, the method
declares (`local_objective`, `plain_forward`, `reads_weighted_mean`, `uplink_update`, ...);
nothing inspects its code. A declaration is about some of the method's functions
(`declared_about`): a subclass that overrides one of them without declaring it again in its own
class body loses it (False, or None from the function), so nothing trusts a fact that its class
no longer keeps.

The records a method is built from and declares (`TargetContext`, `Recipe`, `Hidden`,
`LocalObjective`, `WireSchema`, ...) are in `fedattack.contract`, the shared aggregation helpers
in `fedattack.aggregation`; this module exports them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from fedattack.aggregation import applied_update, samples_of, weighted_mean, weighted_sum
from fedattack.contract import (
    INT_LIMIT,
    ClientContext,
    Hidden,
    LocalData,
    LocalObjective,
    LocalProblem,
    NoHyper,
    Recipe,
    State,
    TargetContext,
    WireSchema,
    require_int,
    require_number,
)
from fedattack.models import build_model, mixes_samples
from fedattack.models.layers import Layers
from fedattack.optim import SGD, Optimizer
from fedattack.options import build_dataclass
from fedattack.registry import TARGETS
from fedattack.rng import generator
from fedattack.training import Batch
from fedattack.wire import Message, Payload, update_by_names, with_update_by_names

__all__ = ["INT_LIMIT", "ClientContext", "Hidden", "LocalData", "LocalObjective", "LocalProblem", "NoHyper", "Recipe",
           "State", "Target", "TargetContext", "WireSchema", "applied_update", "initial_weights", "require_int",
           "require_number", "samples_of", "weighted_mean", "weighted_sum"]

if TYPE_CHECKING:
    from fedattack.defences.base import Defence
    from fedattack.kernels.base import StepKernel


class Target:
    """Base class of every method; subclasses register under `name` by defining it."""

    name: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    Hyper: ClassVar[type] = NoHyper
    batchable: ClassVar[bool] = True
    decode_needs: ClassVar[frozenset[str]] = frozenset({"up"})  # Observation parts `decode` reads
    wire_exposes: ClassVar[dict[str, str]] = {}  # private names the wire reveals anyway, and how
    # False for a method whose forward never calls `normalized` (CGAU feeds a frozen extractor
    # its own inputs): the run then records no normalisation, since none was applied.
    normalizes_inputs: ClassVar[bool] = True
    # -- declarations (see the module docstring) --
    plain_forward: ClassVar[bool] = True  # forward(params, x) is the model on normalized(x)
    plain_normalization: ClassVar[bool] = True  # normalized(x): (x - mean) / std by channel, the context's
    # aggregate reads the uplinks only through their n_k-weighted mean (FedAvg's; a server
    # momentum on that mean, FedAvgM's): what secure aggregation composes with
    reads_weighted_mean: ClassVar[bool] = True
    linear_uplink: ClassVar[bool] = True  # uplinks are affine in the update: their mean carries the mean update
    declared_about: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "plain_forward": ("forward",), "plain_normalization": ("normalized",),
        "local_objective": ("local_loss",), "reads_weighted_mean": ("aggregate",),
        "linear_uplink": ("uplink_update", "with_uplink_update")}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.batchable and ("client_update" in cls.__dict__ or "local_gradients" in cls.__dict__):
            raise TypeError(f"{cls.__name__} writes its own client_update or local_gradients, which an "
                            "executor cannot batch; set batchable = False")
        for fact, about in cls.declared_about.items():
            if fact not in cls.__dict__ and any(name in cls.__dict__ for name in about):
                setattr(cls, fact, False if isinstance(getattr(cls, fact), bool) else _undeclared)
        if cls.__dict__.get("name"):
            TARGETS.add(cls.name, cls)

    def __init__(self, hyper: Any, ctx: TargetContext) -> None:
        self.hyper = hyper
        self.ctx = ctx
        self.recipe = ctx.recipe
        self.num_clients = ctx.num_clients
        self.num_classes = ctx.num_classes
        self.model = build_model(ctx.model, ctx.input_shape, ctx.num_classes, self.layers())
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
                      ctx: ClientContext) -> tuple[Payload, State]:
        """Run local training; the default is SGD on `local_loss` (what executors batch)."""
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

    def optimizer(self, name: str) -> Optimizer:
        """The optimiser of local parameter `name` (fedattack.optim); SGD at the recipe's lr."""
        return SGD(self.recipe.lr)

    def local_objective(self) -> LocalObjective | None:
        """What `local_loss` computes, as facts (see `LocalObjective`): the default loss here;
        None for a loss of its own, which only `local_loss` says."""
        return LocalObjective()

    def local_gradients(self, params: State, consts: State, batch: Batch, noise: State, step: torch.Tensor,
                        ctx: ClientContext) -> Sequence[torch.Tensor | None]:
        """One local step's gradient of every parameter (None: unused by the loss), for the
        sequential loop: autograd of `local_loss`. A method that computes them otherwise cannot
        be batched; a defence that trains the clients itself (DP-SGD) replaces them
        (`fedattack.training.local_gradients`)."""
        loss = self.local_loss(params, consts, batch, noise, step)
        return torch.autograd.grad(loss, list(params.values()), allow_unused=True)

    def step_kernel(self, problem: LocalProblem) -> StepKernel | None:
        """A hand-written training of many clients' problems like `problem` at once
        (`fedattack.kernels`), or None: the batched executors' `vmap(grad(local_loss))`. By
        default the built-in `dense` or `conv` kernel, where this method's declared objective,
        forward, model and optimisers are what it computes (`fedattack.kernels.standard`)."""
        from fedattack.kernels.standard import standard_kernel  # the kernels read this module
        return standard_kernel(self, problem)

    def noise_shapes(self, problem: LocalProblem) -> dict[str, tuple[int, ...]]:
        """Uniform(0,1) noise the loss needs per step, drawn by the executor (reproducibly)."""
        return {}

    def finish_local(self, params: State, problem: LocalProblem, down: Payload, private: State,
                     data: LocalData) -> tuple[Payload, State]:
        return dict(params), private

    def uplink_update(self, down: Payload, up: Payload) -> Payload:
        """What the client changed, as float tensors: what a defence clips, noises or compresses.

        By default read from the names (`fedattack.wire.update_by_names`): a tensor sent under
        a name the downlink also carries is a model, its update `up - down`; one only the uplink
        carries is an update already. A method whose uplink is encoded otherwise (quantised,
        say) declares its update here and the inverse in `with_uplink_update`, so a defence acts
        on the update, never on the encoding."""
        return update_by_names(up, down)

    def with_uplink_update(self, down: Payload, up: Payload, update: Payload) -> Payload:
        """The uplink that carries `update` instead (the inverse of `uplink_update`)."""
        return with_update_by_names(up, down, update)

    def aggregate(self, server: State, uplinks: list[Message], rnd: int) -> State:
        """The new server state from the round's received messages (sender, payload, samples)."""
        return {**server, **weighted_mean(uplinks)}

    def deployed(self, server: State, private: State) -> State:
        """The full parameter dict a client uses for prediction (utility and the oracle)."""
        return {n: server[n] for n in self.param_names}

    def wire_schema(self) -> WireSchema:
        shapes = self.param_shapes()
        return WireSchema(downlink=shapes, uplink=shapes)

    def downlink_weights(self) -> tuple[str, ...]:
        """The downlink tensors that are the model a client trains from: what a client's check of
        the model it receives may judge by their values (`downlink-check`: all zeros, rows turned
        away from the last ones). The rest of the downlink is the protocol's state, legitimately
        any value (SCAFFOLD's and WAFFLE's control variates c, zero until a round moves them;
        WAFFLE's zero-weight flag), and only its names and shapes are the method's to fix. By
        default the downlink tensors under the model's parameter names."""
        down = self.wire_schema().downlink
        return tuple(n for n in self.param_names if n in down)

    # -- what the wire means (read by attacks) ---------------------------------------------
    def decode(self, down: Payload | None, up: Payload) -> State | None:
        """The client's trained parameters that crossed the wire, from one round's messages.

        The default reads an uplink that carries parameters under their own names (FedAvg's
        model, FedPer's base). Methods that send updates or encodings override it; None means
        these messages cannot be decoded (e.g. an update whose downlink was not observed).
        """
        found = {n: up[n] for n in self.param_names if n in up}
        return found or None

    def hidden(self) -> Hidden:
        """What each client keeps off the wire (see `Hidden`); nothing by default."""
        return Hidden()

    def summarize(self, server: State, private: list[State], groups: list[str]) -> dict[str, Any]:
        """Facts about the trained federation for its manifest (`method_summary`), from the
        final server and private states and each client's group; e.g. WAFFLe's selection
        health. Nothing by default."""
        return {}

    # -- what the base class runs: the method's defences (see the module docstring) ----------
    @property
    def defences(self) -> tuple[Defence, ...]:
        """What the method is composed with, innermost first (`TargetContext.defences`)."""
        return self.ctx.defences

    def seal(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        """The uplink as it leaves the client; every executor calls it after the local update.
        Each defence's client side runs here, innermost first (clipping, noise, compression),
        so what is recorded is what a defended client sends."""
        for defence in self.defences:
            up = defence.on_uplink(up, down, ctx)
        return up

    def deliver(self, rnd: int, downlinks: Mapping[int, Payload]) -> None:
        """The round's downlinks reach the clients: every defence's `on_downlinks` sees them
        (clients comparing digests of what they received); the loop calls it before training."""
        for defence in self.defences:
            defence.on_downlinks(rnd, downlinks)

    def receive(self, uplinks: list[Message], rnd: int) -> list[Message]:
        """The round's uplinks as `aggregate` gets them: every defence's server side, outermost
        first (under secure aggregation, m messages that all carry the weighted mean)."""
        for defence in reversed(self.defences):
            gen = generator(self.ctx.seed, f"defence:{defence.name}:server", rnd)
            uplinks = defence.on_receive(uplinks, rnd, gen)
        return uplinks

    def server_step(self, server: State, uplinks: list[Message], rnd: int) -> State:
        """The server's round: its defences' server side (`receive`), then the method's `aggregate`."""
        return self.aggregate(server, self.receive(uplinks, rnd), rnd)

    def recorded_schema(self) -> WireSchema:
        """The wire schema as the run records it: the method's, through every defence's `wire`."""
        schema = self.wire_schema()
        for defence in self.defences:
            schema = defence.wire(schema)
        return schema

    @property
    def uplinks_hidden(self) -> str | None:
        """Why a recorded uplink decodes to nothing (a defence masks it), or None."""
        hiding = [d.name for d in self.defences if d.hides_uplinks]
        return f"{', '.join(hiding)} masks every uplink" if hiding else None

    def read_uplink(self, down: Payload | None, up: Payload) -> State | None:
        """What an observer decodes from one round's messages: nothing where a defence masks the
        uplinks, else the method's `decode`."""
        return None if self.uplinks_hidden else self.decode(down, up)

    @property
    def trains_in_stacks(self) -> bool:
        """Whether an executor may train its clients stacked: it is `batchable` and no defence
        computes the local steps itself (DP-SGD: then client by client, through the sequential loop),
        nor does the model mix a batch's samples (batch norm: a stacked step's padding would enter
        the batch's statistics; `fedattack.models.mixes_samples`)."""
        return (self.batchable and not any(d.trains_locally for d in self.defences)
                and mixes_samples(self.model) is None)

    # -- shared helpers -------------------------------------------------------------------
    def forward(self, params: State, x: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(self.model, params, (self.normalized(x),))

    def normalized(self, x: torch.Tensor) -> torch.Tensor:
        """Pixels in [0, 1] as the model sees them (the context's normalisation, if any)."""
        norm = self.ctx.normalization
        return x if norm is None else norm.apply(x)

    def param_shapes(self, names: list[str] | None = None) -> dict[str, tuple[int, ...]]:
        shapes = {n: tuple(p.shape) for n, p in self.model.named_parameters()}
        return shapes if names is None else {n: shapes[n] for n in names}

    @classmethod
    def make_hyper(cls, overrides: Mapping[str, Any]) -> Any:
        return build_dataclass(cls.Hyper, overrides, f"method {cls.name}")


def _undeclared(self: Target, *args: Any, **kwargs: Any) -> None:
    """What a declaration becomes where a subclass changed what it was about (see `Target`)."""
    return None


def initial_weights(model: nn.Module, gen: torch.Generator) -> State:
    """Re-initialise a fresh copy of the model's parameters from `gen` (reproducible init)."""
    state: State = {}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen)))
        for module in model.modules():
            reset = getattr(module, "reset_parameters", None)
            if callable(reset):
                reset()
        for name, p in model.named_parameters():
            state[name] = p.detach().clone()
    return state
