"""An in-process Flower Grid: every node's ClientApp called in this process, in node order.

Flower's simulation engine (`flwr.simulation.run_simulation`) runs each node's ClientApp in a
Ray worker; that costs a Ray start (tens of seconds on a small machine) and hands every
message through a link state. An audit needs hundreds of canary nodes and a repeatable run, so
it drives the app's own strategy with this Grid instead: the messages, the ClientApps with
their mods, and the strategy (with Flower's DP wrappers) are Flower's; only the transport is a
function call. Each node keeps one `Context` for the whole run (its node_config names the
partition it trains on, as the simulation's does), so stateful mods see what they would see.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from uuid import uuid4

from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.serverapp import Grid
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

from fedattack.registry import UserError

NodeConfig = Mapping[str, int | float | str | bool]
FIRST_NODE = 1001  # node ids are Flower's to choose; 1 is the SuperLink's own


@contextmanager
def serving(run_id: int = 1) -> Iterator[None]:
    """The server's task identity, which Flower's Message constructor reads, for the block only."""
    saved = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = run_id, SUPERLINK_NODE_ID, 1
    try:
        yield
    finally:
        TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved


class LocalGrid(Grid):
    """n nodes, the k-th (k = 0..n-1, node id FIRST_NODE + k) running `apps(k)` with `configs(k)`."""

    def __init__(self, n: int, apps: Callable[[int], ClientApp], configs: Callable[[int], NodeConfig],
                 run_id: int = 1) -> None:
        self._run = Run.create_empty(run_id)
        self.apps = {FIRST_NODE + k: apps(k) for k in range(n)}
        self.contexts = {node: Context(run_id, node, dict(configs(node - FIRST_NODE)), RecordDict(), {})
                         for node in self.apps}
        self.replies: dict[str, Message] = {}

    def set_run(self, run: Run) -> None:
        self._run = run

    @property
    def run(self) -> Run:
        return self._run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str,
                       ttl: float | None = None) -> Message:
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.apps)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for msg in messages:
            node = msg.metadata.dst_node_id
            if node not in self.apps:
                raise UserError(f"the strategy sent a message to node {node}, which this grid does not have")
            msg.metadata.__dict__["_message_id"] = uuid4().hex  # what a link state assigns
            try:
                reply = self.apps[node](msg, self.contexts[node])
            except UserError:
                raise
            except Exception as exc:  # noqa: BLE001 - the app's code: one line, whatever it raised
                said = (str(exc).strip().splitlines() or [""])[0][:200]
                raise UserError(f"node {node}'s ClientApp (partition-id {node - FIRST_NODE}) raised "
                                f"{type(exc).__name__}: {said}; "
                                "fix the app") from None
            self.replies[msg.metadata.message_id] = reply
            ids.append(msg.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self.replies.pop(i) for i in message_ids if i in self.replies]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        return list(self.pull_messages(list(self.push_messages(messages))))
