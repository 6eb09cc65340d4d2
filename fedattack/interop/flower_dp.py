"""A Flower app as the DP audit sees it: its declaration, its canary clients, its server's view.

To audit a Flower app's differential privacy, fedattack runs the app's own strategy (with
Flower's DP wrappers around it) and its own ClientApp, adds canary nodes (Andrew et al., ICLR
2024: each sends a fixed random direction when "in", the model it received when "out", through
the same mods as the app's clients), and keeps what the server releases: the model after every
round (`AuditingStrategy`). Two facts are read from the run, never from the app's word:

- the models, from which every canary is scored (fedattack.audit.canaries);
- whether any fresh noise reaches the aggregate: each round is aggregated a second time by a
  copy of the strategy, on copies of the same replies; a release that comes out bit-identical
  is a deterministic function of the clients' updates, which no differential privacy allows.

Flower's claim (the wrapper's noise multiplier, clipping norm and sampled clients) is read from
the strategy by `dp_wrapper`; fedattack/audit/flower.py turns it into an epsilon with Flower's
own accountant.
"""

from __future__ import annotations

import copy
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.clientapp.typing import Mod
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy
from flwr.serverapp.strategy.dp_adaptive_clipping import DifferentialPrivacyAdaptiveBase
from flwr.serverapp.strategy.dp_fixed_clipping import DifferentialPrivacyFixedClippingBase

from fedattack.registry import UserError

DP_WRAPPERS = (DifferentialPrivacyFixedClippingBase, DifferentialPrivacyAdaptiveBase)
DPWrapper = DifferentialPrivacyFixedClippingBase | DifferentialPrivacyAdaptiveBase
Arrays = dict[str, np.ndarray]


@dataclass(frozen=True)
class FlowerApp:
    """What the audit needs of a Flower app, as its author declares it.

    strategy(n): the ServerApp's strategy (DP wrappers included) for a federation of n nodes,
    every one sampled each round (the audit adds its canaries to the app's `partitions`).
    client_app: the app's ClientApp; node k < partitions gets node_config partition-id k.
    mods: the mods that ClientApp runs, which every canary runs too (fixedclipping_mod for
    client-side clipping). examples: the num-examples each client reports, which a canary
    reports too (Flower's DP wrappers calibrate their noise for a uniform mean).
    """

    strategy: Callable[[int], Strategy]
    client_app: ClientApp
    initial_arrays: Callable[[], ArrayRecord]
    partitions: int
    rounds: int
    examples: int
    mods: Sequence[Mod] = field(default=())
    delta: float = 1e-5


def dp_wrapper(strategy: Strategy) -> DPWrapper | None:
    """The outermost of Flower's DP wrappers in a chain of wrappers (each holding `.strategy`)."""
    seen: Any = strategy
    while seen is not None:
        if isinstance(seen, DP_WRAPPERS):
            return seen
        seen = getattr(seen, "strategy", None)
    return None


def clip_of(wrapper: DPWrapper | None) -> float | None:
    return None if wrapper is None else float(wrapper.clipping_norm)


def canary_app(direction: Arrays, examples: int, mods: Sequence[Mod]) -> ClientApp:
    """A node that sends `direction` as its update, whatever it receives, through the app's mods."""
    app = ClientApp(mods=list(mods))

    @app.train()
    def train(msg: Message, context: Any) -> Message:
        [(key, record)] = list(msg.content.array_records.items())
        arrays = {name: np.asarray(a) for name, a in zip(record.keys(), record.to_numpy_ndarrays())}
        arrays = {name: (a + direction[name]).astype(a.dtype) for name, a in arrays.items()}
        metrics = MetricRecord({"num-examples": examples, "partition-id": int(context.node_config["partition-id"])})
        reply = RecordDict({key: ArrayRecord({n: Array(a) for n, a in arrays.items()}), "metrics": metrics})
        return Message(reply, reply_to=msg)

    return app


def arrays_of(record: ArrayRecord) -> Arrays:
    return {name: np.array(a, copy=True) for name, a in zip(record.keys(), record.to_numpy_ndarrays())}


class AuditingStrategy(Strategy):
    """The app's strategy, keeping every released model and probing each round for fresh noise."""

    def __init__(self, strategy: Strategy, canaries: set[int]) -> None:
        self.strategy, self.canaries = strategy, canaries
        self.wrapper = dp_wrapper(strategy)
        self.states: list[Arrays] = []
        self.fresh: list[float] = []  # per round: the std of what differs between two aggregations
        self.deterministic: list[bool] = []  # per round: the two aggregations bit-identical

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        if not self.states:
            self.states.append(arrays_of(arrays))
        messages = list(self.strategy.configure_train(server_round, arrays, config, grid))
        declared = None if self.wrapper is None else int(self.wrapper.num_sampled_clients)
        if declared is not None and declared != len(messages):
            raise UserError(f"round {server_round}: the strategy samples {len(messages)} nodes, but its "
                            f"{type(self.wrapper).__name__} declares num_sampled_clients={declared}, so its "
                            f"noise (sigma C / {declared}) is not the claim's; set num_sampled_clients to "
                            "the nodes sampled each round")
        return messages

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        failed = [r for r in replies if r.has_error()]
        if failed:
            raise UserError(f"round {server_round}: node {failed[0].metadata.src_node_id}'s ClientApp failed "
                            f"({failed[0].error.reason}); an audit needs every sampled node's reply")
        uniform_weights(self.strategy, replies, server_round, self.wrapper is not None)
        twin, twin_replies = twins(self.strategy, replies)
        arrays, metrics = self.strategy.aggregate_train(server_round, replies)
        again, _ = twin.aggregate_train(server_round, twin_replies)
        if arrays is None or again is None:
            raise UserError(f"round {server_round}: the strategy released no model; nothing to audit")
        released, other = arrays_of(arrays), arrays_of(again)
        self.states.append(released)
        d = sum(a.size for a in released.values())
        gap = math.sqrt(sum(float(((released[n].astype(np.float64) - other[n]) ** 2).sum()) for n in released))
        self.deterministic.append(gap == 0)
        # two independent draws differ by sqrt(2) x their std; kept to 6 digits, a diagnostic whose
        # last bits follow the order of NumPy's float sums
        self.fresh.append(float(f"{gap / math.sqrt(2 * d):.6g}"))
        return arrays, metrics

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        messages = self.strategy.configure_evaluate(server_round, arrays, config, grid)
        return [m for m in messages if m.metadata.dst_node_id not in self.canaries]  # canaries only train

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        return self.strategy.aggregate_evaluate(server_round, replies)

    def summary(self) -> None:
        self.strategy.summary()


def twins(strategy: Strategy, replies: list[Message]) -> tuple[Strategy, list[Message]]:
    """Copies of the strategy (with its accountant and any state) and of the replies. Modules an
    object holds (Flower's RdpAccountant keeps dp-accounting's) are shared, not copied."""
    memo: dict[int, Any] = {id(m): m for m in list(sys.modules.values())}
    return copy.deepcopy((strategy, replies), memo)


def weight_key(strategy: Strategy) -> str:
    """The metric the wrapped FedAvg weighs replies by (the first strategy in the chain that has one)."""
    seen: Any = strategy
    while seen is not None:
        if hasattr(seen, "weighted_by_key"):
            return str(seen.weighted_by_key)
        seen = getattr(seen, "strategy", None)
    return "num-examples"


def uniform_weights(strategy: Strategy, replies: list[Message], rnd: int, private: bool) -> None:
    """Flower's DP noise is sigma C / m on the mean, which needs every client weighted alike."""
    key = weight_key(strategy)
    records = [r.content.metric_records.get("metrics") for r in replies]
    weights = {float(m[key]) for m in records if m is not None and key in m}  # type: ignore[arg-type]
    if private and len(weights) > 1:
        raise UserError(f"round {rnd}: the clients report {key} from {min(weights):g} to {max(weights):g}, so the "
                        "mean weighs them unequally and Flower's noise (calibrated for a uniform mean) "
                        f"does not cover the heaviest; report one {key} from every client")
