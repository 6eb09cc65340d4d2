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

Whatever an executor, a kernel, a defence or an attack needs to know about a method, the method
declares (`local_objective`, `plain_forward`, `aggregates_weighted_mean`, `uplink_update`, ...);
nothing inspects its code. A declaration is about some of the method's functions
(`declared_about`): a subclass that overrides one of them without declaring it again in its own
class body loses it (False, or None from the function), so nothing trusts a fact that its class
no longer keeps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from fedattack.models import build_model
from fedattack.models.layers import Layers
from fedattack.optim import SGD, Optimizer
from fedattack.options import build_dataclass
from fedattack.registry import TARGETS, UserError
from fedattack.training import Batch
from fedattack.wire import Message, Payload, update_by_names, with_update_by_names

if TYPE_CHECKING:
    from fedattack.data.normalization import Normalization
    from fedattack.defences.base import Defence
    from fedattack.kernels.base import StepKernel
    from fedattack.training import Trainer

State = dict[str, torch.Tensor]


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """The local training recipe every method shares (the papers' E, B and learning rate)."""

    epochs: int = 5
    batch_size: int = 10
    lr: float = 0.04

    def __post_init__(self) -> None:
        require_int("epochs", self.epochs, least=1)
        require_int("batch_size", self.batch_size, least=1)
        require_number("lr", self.lr, positive=True)


@dataclass(frozen=True, kw_only=True)
class TargetContext:
    """Everything a method is built from, known before it is constructed (nothing is set later).

    `rounds` is the federation's length (for schedules such as WAFFLE's); `seed` the federation's
    (for server-side randomness, e.g. a defence's noise); `data_root` is where a method finds data
    it needs besides the clients' (CGAU's feature extractor), a machine setting that never enters
    the method's hyperparameters or a run's identity. `clients_per_round` (m) is what a defence's
    noise scale and privacy accounting need (client-side DP noise is sigma*C/sqrt(m)).
    `normalization` is applied to the inputs as the first step of `forward` (None: pixels as
    they are; see fedattack.data.normalization).
    """

    model: str
    input_shape: tuple[int, int, int]
    num_classes: int
    recipe: Recipe = field(default_factory=Recipe)
    num_clients: int = 1
    rounds: int = 1
    seed: int = 0
    data_root: str | None = None
    clients_per_round: int = 1
    normalization: Normalization | None = None


@dataclass(frozen=True, kw_only=True)
class NoHyper:
    """A method without hyperparameters of its own."""


@dataclass(frozen=True)
class Hidden:
    """What a client keeps that never crosses the wire, as the method declares it.

    parameters: model parameters never sent (FedPer's head, CGAU's conditioning);
    `zero_means_untrained` says that zeros are what a client that never trained holds there.
    selection: factorised layer -> number of factors, for a private per-client selection `<layer>.b`
    (WAFFLe); `selection_prior` gives the IBP prior's alpha per layer where there is one.
    personal_prox: the proximal weight tying a private personal model to the shared one
    (pFedMe, Ditto, APFL; 0 when there is no such pull); None when there is no personal model.
    """

    parameters: tuple[str, ...] = ()
    zero_means_untrained: bool = False
    selection: Mapping[str, int] = field(default_factory=dict)
    selection_prior: Mapping[str, float] = field(default_factory=dict)
    personal_prox: float | None = None
    note: str = ""

    @property
    def nothing(self) -> bool:
        return not (self.parameters or self.selection) and self.personal_prox is None


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
class LocalObjective:
    """What `local_loss` computes, declared so that a kernel may compute it instead: the
    weighted cross-entropy of `forward` on the batch (`Batch.cross_entropy`), plus
    (proximal / 2) |w - anchor|^2 over the local parameters when `proximal` > 0, each anchor in
    the problem's consts as `anchor.<name>` (FedProx's mu). `proximal` is also what an attack
    that replays a client's local training (update inversion) adds to its loss."""

    proximal: float = 0.0


@dataclass(frozen=True)
class WireSchema:
    """Names, shapes and dtypes of what goes down to and up from a client: float32 unless
    `dtypes` says otherwise (by direction, then name; e.g. an int8-quantised uplink)."""

    downlink: Mapping[str, tuple[int, ...]]
    uplink: Mapping[str, tuple[int, ...]]
    dtypes: Mapping[str, Mapping[str, torch.dtype]] = field(default_factory=dict)

    def dtype(self, kind: str, name: str) -> torch.dtype:
        return self.dtypes.get(kind, {}).get(name, torch.float32)

    def to_json(self) -> dict[str, dict[str, dict[str, Any]]]:
        """As the manifest records it: each tensor's shape and dtype, by direction and name."""
        return {kind: {n: {"shape": list(s), "dtype": str(self.dtype(kind, n)).removeprefix("torch.")}
                       for n, s in shapes.items()}
                for kind, shapes in (("downlink", self.downlink), ("uplink", self.uplink))}


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
    aggregates_weighted_mean: ClassVar[bool] = True  # aggregate: the n_k-weighted mean of the uplinks
    linear_uplink: ClassVar[bool] = True  # uplinks are affine in the update: their mean carries the mean update
    declared_about: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "plain_forward": ("forward",), "plain_normalization": ("normalized",),
        "local_objective": ("local_loss",), "aggregates_weighted_mean": ("aggregate",),
        "linear_uplink": ("uplink_update", "with_uplink_update")}
    defences: Sequence[Defence] = ()  # what wraps this method (`fedattack.defences.make_target`)

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
        sequential loop: autograd of `local_loss`. A method (or a defence that trains the
        clients itself, DP-SGD) that computes them otherwise cannot be batched."""
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

    @property
    def uplinks_hidden(self) -> str | None:
        """Why a recorded uplink decodes to nothing (a defence masks it), or None."""
        return None

    def seal(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        """The uplink as it leaves the client; every executor calls it after the local update.

        Identity for methods; defences (`fedattack.defences`) transform it here (clipping,
        noise, compression), so what is recorded is what a defended client sends.
        """
        return up

    def aggregate(self, server: State, uplinks: list[Message], rnd: int) -> State:
        """The new server state from the round's received messages (sender, payload, samples)."""
        return {**server, **weighted_mean(uplinks)}

    def deployed(self, server: State, private: State) -> State:
        """The full parameter dict a client uses for prediction (utility and the oracle)."""
        return {n: server[n] for n in self.param_names}

    def wire_schema(self) -> WireSchema:
        shapes = self.param_shapes()
        return WireSchema(downlink=shapes, uplink=shapes)

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


INT_LIMIT = 2**63  # counts and seeds end up in C integers (torch, numpy, tqdm): larger ones overflow there


def require_int(name: str, value: object, least: int = 0) -> None:
    """Refuse, in one line naming the setting and the value written, a non-integer, a small one,
    or one too large for the libraries it is handed to."""
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise UserError(f"{name}={value!r} must be an integer of at least {least}")
    if value >= INT_LIMIT:
        raise UserError(f"{name}={value!r} must be below 2^63")


def require_number(name: str, value: object, positive: bool = False, at_most: float | None = None) -> None:
    """Refuse NaN, infinities, non-numbers, and values out of range, in one line."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and positive:
        ok = value > 0  # type: ignore[operator]  # a finite int or float here
    if ok and at_most is not None:
        ok = value <= at_most  # type: ignore[operator]  # a finite int or float here
    if not ok:
        bound = f" and at most {at_most}" if at_most is not None else ""
        raise UserError(f"{name}={value!r} must be a finite number{' above 0' if positive else ''}{bound}")


class ClientContext:
    """What the loop tells a client about its round; `train` runs its local SGD.

    `peers` (the clients sampled this round, the client among them) and `samples` (its n_k) are
    what a protocol run by the clients needs, e.g. secure aggregation's pairwise masks.
    """

    def __init__(self, rnd: int, client: int, seed: int, trainer: Trainer, *,
                 peers: tuple[int, ...] = (), samples: int | None = None) -> None:
        self.round = rnd
        self.client = client
        self.seed = seed
        self._trainer = trainer
        self.peers = peers or (client,)
        self.samples = samples

    def train(self, target: Target, problem: LocalProblem, data: LocalData) -> State:
        return self._trainer(target, problem, data, self)


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


def weighted_mean(uplinks: list[Message], weights: list[float] | None = None) -> Payload:
    """The weighted average of each named tensor (FedAvg's: weights are the samples n_k)."""
    weights = [float(samples_of(m)) for m in uplinks] if weights is None else weights
    total = float(sum(weights))
    return {n: weighted_sum([m.payload[n] for m in uplinks], [w / total for w in weights])
            for n in uplinks[0].payload}


def weighted_sum(tensors: list[torch.Tensor], weights: list[float]) -> torch.Tensor:
    """sum_i w_i t_i, in the order given (the order the sequential reference adds them)."""
    out = weights[0] * tensors[0]
    for w, t in zip(weights[1:], tensors[1:]):
        out = out + w * t
    return out


def samples_of(message: Message) -> int:
    """The sample count a received uplink reports (every uplink the round loop delivers has one)."""
    if message.samples is None:
        raise ValueError(f"the uplink of client {message.sender} reports no sample count")
    return message.samples


def applied_update(down: Payload | None, up: Payload, names: list[str], prefix: str,
                   scale: float = 1.0) -> State | None:
    """down + scale * up[prefix + name]: a client model sent as an update of the downlink."""
    if down is None or not all(prefix + n in up and n in down for n in names):
        return None
    return {n: down[n] + scale * up[prefix + n] for n in names}
