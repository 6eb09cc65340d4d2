"""The records of the method contract: what a method is built from and what it declares.

`fedattack.target.Target` is the contract itself; these are the values it is built from
(`TargetContext`, its `Recipe`), the local problem an executor trains (`LocalData`,
`LocalProblem`) and what a method declares about itself besides its functions (`Hidden`: what
its clients keep off the wire; `LocalObjective`: what its loss computes; `WireSchema`: the
names, shapes and dtypes it sends). `fedattack.target` exports every one of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from fedattack.registry import UserError

if TYPE_CHECKING:
    from fedattack.data.normalization import Normalization
    from fedattack.defences.base import Defence
    from fedattack.target import Target
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
    they are; see fedattack.data.normalization). `defences` are what the method is composed
    with, innermost first (`fedattack.defences.make_target` builds them here, before the
    method): the method's base class runs them.
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
    defences: tuple[Defence, ...] = ()


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
