"""Record a Flower federation: a strategy wrapper that composes with any Flower strategy.

`RecordingStrategy(strategy, recorder)` is used where `strategy` was, as Flower's own
differential-privacy wrappers are: it keeps the training messages the wrapped strategy
configures (the downlink each node is sent) and, when their replies come back, records each
client's downlink and uplink through a `Recorder` before the wrapped strategy aggregates.
Evaluation rounds carry no training update and are passed through unrecorded. A node that was
sent a model but did not answer has its downlink recorded if an earlier reply named its client.

Flower names nodes by node id; fedattack's partition names clients 0..K-1. Each ClientApp
reports which partition it trains on in its reply's MetricRecord (`partition-id`, as Flower's
simulation gives it in `context.node_config`), or `client_of` maps a reply to a client.
Requires the current Flower Message API (`flwr>=1.21`, `pip install "fedattack[flower]"`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

try:
    from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
    from flwr.serverapp import Grid
    from flwr.serverapp.strategy import Strategy
except ImportError as exc:  # not installed, or a Flower before the Message API
    raise ImportError(f'fedattack.interop.flower needs Flower 1.21 or later ({exc}); '
                      'pip install "fedattack[flower]"') from None

from fedattack.interop.record import Recorder
from fedattack.registry import UserError

PARTITION_KEY = "partition-id"


class RecordingStrategy(Strategy):
    """Any Flower strategy, with every training message recorded into a fedattack run directory."""

    def __init__(self, strategy: Strategy, recorder: Recorder, *,
                 client_of: Callable[[Message], int] | None = None,
                 samples_key: str | None = None) -> None:
        self.strategy, self.recorder = strategy, recorder
        self.client_of = client_of or self._partition_id
        self.arrays_key = str(getattr(strategy, "arrayrecord_key", "arrays"))
        self.samples_key = samples_key or str(getattr(strategy, "weighted_by_key", "num-examples"))
        self.sent: dict[int, dict[str, Any]] = {}
        self.node_client: dict[int, int] = {}  # learned from replies: node ids are stable within a run

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        messages = list(self.strategy.configure_train(server_round, arrays, config, grid))
        self.sent = {m.metadata.dst_node_id: self._state(m) for m in messages}
        return messages

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        try:
            answered = sorted((r for r in replies if not r.has_error()), key=self.client_of)
            for reply in answered:
                self.node_client[reply.metadata.src_node_id] = self.client_of(reply)
                self._record(server_round, reply)
            for node in sorted(set(self.sent) - {r.metadata.src_node_id for r in answered}):
                if node in self.node_client:  # sent a model but did not answer: the downlink crossed anyway
                    self.recorder.record(server_round, self.node_client[node], downlink=self.sent[node])
        except Exception as exc:
            self.recorder.abort()  # nothing half-written, whatever went wrong
            if isinstance(exc, UserError) and "recording aborted" not in str(exc):
                raise UserError(f"{exc} (recording aborted, nothing written)") from None
            raise
        return self.strategy.aggregate_train(server_round, replies)

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        return self.strategy.aggregate_evaluate(server_round, replies)

    def summary(self) -> None:
        self.strategy.summary()

    def _record(self, rnd: int, reply: Message) -> None:
        node = reply.metadata.src_node_id
        if node not in self.sent:
            raise UserError(f"round {rnd}: a reply from node {node}, which was sent no training message")
        metrics = reply.content.metric_records.get("metrics")
        samples = None if metrics is None else metrics.get(self.samples_key)
        self.recorder.record(rnd, self.client_of(reply), downlink=self.sent[node], uplink=self._state(reply),
                             samples=None if samples is None else int(samples))  # type: ignore[arg-type]

    def _state(self, message: Message) -> dict[str, Any]:
        """The message's arrays by parameter name (a list of arrays is named in state_dict order)."""
        record = message.content.array_records.get(self.arrays_key)
        if record is None:
            raise UserError(f"a training message carries no ArrayRecord {self.arrays_key!r}")
        arrays = dict(zip(record.keys(), record.to_numpy_ndarrays()))
        names = list(self.recorder.target.model.state_dict())
        if not set(arrays) <= set(names) and len(arrays) == len(names):
            arrays = dict(zip(names, arrays.values()))
        return arrays

    @staticmethod
    def _partition_id(reply: Message) -> int:
        metrics = reply.content.metric_records.get("metrics")
        if metrics is None or PARTITION_KEY not in metrics:
            raise UserError(f"node {reply.metadata.src_node_id}'s reply reports no {PARTITION_KEY!r} "
                            "metric; add it to the ClientApp's MetricRecord, or pass client_of=...")
        return int(metrics[PARTITION_KEY])  # type: ignore[arg-type]
