"""The round loop: sample clients, send, train locally, receive, aggregate, evaluate.

It, and only it, writes the wire: the payloads `broadcast` returns and the uplinks
`client_update` returns are recorded as messages, so a method cannot leak by logging. An active
threat model (`fedattack.federation.active`) may replace a round's downlinks, and the model the
clients train, with its own; what is recorded is then what it actually sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from fedattack.data.types import Dataset, Partition
from fedattack.federation.active import ActiveThreatModel, Downlinks
from fedattack.federation.executors import ClientJob, Executor, SequentialExecutor
from fedattack.federation.spec import FederationSpec
from fedattack.rng import generator, numpy_rng
from fedattack.target import ClientContext, LocalData, State, Target
from fedattack.wire import SERVER, Message


@dataclass
class FederationState:
    """Where training stands: the server, every client's private state, the utility history."""

    server: State
    private: list[State]
    history: list[dict[str, object]] = field(default_factory=list)


def client_data(dataset: Dataset, partition: Partition, client: int) -> LocalData:
    """A client's local tensors, relabelled by its label map if the partition has one."""
    part = partition.clients[client]
    tr, te = torch.as_tensor(part.train), torch.as_tensor(part.test)
    y_tr, y_te = dataset.y_train[tr], dataset.y_train[te]
    maps = partition.stats.get("label_maps")
    if maps is not None:
        lut = torch.as_tensor(maps[client], dtype=torch.long)
        y_tr, y_te = lut[y_tr], lut[y_te]
    return LocalData(dataset.x_train[tr], y_tr, dataset.x_train[te], y_te)


def sample_clients(spec: FederationSpec, num_clients: int, rnd: int) -> list[int]:
    m = spec.clients_per_round(num_clients)
    chosen = numpy_rng(spec.seed, "sample", rnd).choice(num_clients, size=m, replace=False)
    return sorted(int(c) for c in chosen)


class RoundLoop:
    """Runs a federation round by round, reporting messages to `record`."""

    def __init__(self, spec: FederationSpec, target: Target, datas: list[LocalData],
                 executor: Executor, record: Callable[[Message], None],
                 adversary: ActiveThreatModel | None = None) -> None:
        self.spec, self.target, self.datas = spec, target, datas
        self.executor, self.record = executor, record
        self.trainer = executor.trainer
        self.adversary = adversary

    def start(self) -> FederationState:
        server = self.target.init_server(generator(self.spec.seed, "init"))
        private = [self.target.init_private(k, server, generator(self.spec.seed, "private", k))
                   for k in range(len(self.datas))]
        return FederationState(server, private)

    def run_round(self, state: FederationState, rnd: int) -> list[int]:
        clients = sample_clients(self.spec, len(self.datas), rnd)
        sent, acted = self.downlinks(state, rnd, clients)
        # a round the server changed runs on the reference executor: its model may not be the method's
        executor = SequentialExecutor() if acted else self.executor
        sent.target.deliver(rnd, sent.payloads)
        jobs = []
        for k in clients:
            down = sent.payloads[k]
            if down:  # an empty payload is nothing on the wire (e.g. `local`)
                self.record(Message(rnd, SERVER, k, "downlink", down))
            ctx = ClientContext(rnd, k, self.spec.seed, executor.trainer, peers=tuple(clients),
                                samples=self.datas[k].size)
            jobs.append(ClientJob(k, down, state.private[k], self.datas[k], ctx))
        results = executor.run(sent.target, jobs)
        received = []
        for k, (up, priv) in zip(clients, results):
            msg = Message(rnd, k, SERVER, "uplink", up, samples=self.datas[k].size)
            if up:
                self.record(msg)
            received.append(msg)
            state.private[k] = priv
        before = state.server
        state.server = sent.target.server_step(state.server, received, rnd)
        if acted and self.adversary is not None:
            state.server = self.adversary.after_round(rnd, before, state.server)
        return clients

    def downlinks(self, state: FederationState, rnd: int, clients: list[int]) -> tuple[Downlinks, bool]:
        """The method's broadcast, or what an active adversary sends instead in its rounds (True)."""
        honest = Downlinks(self.target, {k: self.target.broadcast(state.server, k, rnd) for k in clients})
        acted = self.adversary.act(rnd, clients, state.server, honest) if self.adversary is not None else None
        return (honest, False) if acted is None else (acted, True)

    def evaluate(self, state: FederationState, datas: list[LocalData] | None = None) -> list[float]:
        """Every client's local test accuracy on the model it deploys (on `datas`' test sets
        where given instead of the clients' own: `fedattack.federation.utility`), as the
        executor evaluates them (the sequential one client by client, the batched one pooling
        clients with alike models)."""
        datas = self.datas if datas is None else datas
        with torch.no_grad():
            deployed = [self.target.deployed(state.server, p) for p in state.private]
            return self.executor.evaluate(self.target, deployed, datas)
