"""Record a federation trained elsewhere (your own loop, Flower) into a fedattack run directory.

The user declares what fedattack cannot see (the model, the dataset and who holds which
samples, the local recipe, the method's semantics) and hands over each message as it crosses
the wire. The run directory is staged beside its destination and renamed into place by
`close`, so `Federation(path)`, `fedattack evaluate` and `fedattack report` read it like a run
fedattack trained. Every message is checked before anything is kept; a refused message aborts
the recording and removes the staging folder, so nothing half-written remains.

A recorder refuses what the protocol it claims to record cannot produce: NaN or infinite
weights in a message, a sample count n_k other than the client's number of training indices (the
partition is the ground truth of membership, and n_k weighs FedAvg's mean), and, for a method
whose server sends every client the same model (the contract's default `broadcast`), two
different downlinks within one round. Two recorders on one folder are refused as two writers.
When the clients' indices are a fedattack partition (`partition="iid"` and its options, checked
against `make_partition` with the recorder's seed), the run is recorded under that partition,
so reports compare it, victim by victim, with fedattack's own runs of the same setting; any
other split is the partition `recorded`, compared only with runs recorded on it.
"""

from __future__ import annotations

import shutil
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np
import torch

from fedattack.data import load_dataset
from fedattack.data.partition import make_partition
from fedattack.data.types import ClientData, Partition
from fedattack.federation.rundir import RunWriter
from fedattack.federation.spec import FederationSpec
from fedattack.federation.storage import write_json
from fedattack.federation.train import describe
from fedattack.federation.transcript_io import TranscriptWriter
from fedattack.interop import plugins
from fedattack.interop.messages import WireCheck
from fedattack.metrics import accuracy, utility_summary
from fedattack.registry import UserError
from fedattack.target import Recipe, Target, TargetContext
from fedattack.wire import SERVER, Message, RecordingPolicy

Tensors = Mapping[str, Any]
Indices = Sequence[int] | np.ndarray  # one client's indices into the train split


class Recorder:
    """Turns `record(round, client, downlink=..., uplink=...)` calls into a run directory.

    `model`: a registered name, a `module:factory` import path, or a factory (registered under
    its import path, or `model_name`). `dataset`: likewise (a built-in name such as "digits", an
    import path, a factory returning the data, or the data itself with `dataset_name`).
    `clients[k]`: indices into the dataset's train split that client k trains on; indices no
    client holds are recorded as discarded. `method` names the fedattack method whose wire
    semantics the recorded federation has (FedAvg: the uplink is the client's model after local
    training from the downlink).
    """

    def __init__(self, out: str | Path, *, model: str | Callable[..., Any], dataset: Any,
                 clients: Sequence[Indices], epochs: int, batch_size: int, lr: float,
                 test_clients: Sequence[Indices] | None = None, method: str = "fedavg",
                 hyper: Mapping[str, Any] | None = None, seed: int = 0, model_name: str | None = None,
                 dataset_name: str | None = None, data_root: str | Path | None = None,
                 overwrite: bool = False, source: str = "pytorch", partition: str | None = None,
                 partition_options: Mapping[str, Any] | None = None) -> None:
        model_reg = plugins.register_model(model, model_name)
        data_reg = plugins.register_dataset(dataset, dataset_name)
        self.dataset = load_dataset(data_reg, data_root)
        self.partition = partition_from_indices(clients, test_clients, int(self.dataset.y_train.shape[0]), seed)
        if partition is not None:
            self.partition = same_partition(self.partition, partition, dict(partition_options or {}), self.dataset,
                                            seed)
        self.spec = FederationSpec(method=method, hyper=dict(hyper or {}), dataset=data_reg,
                                   partition=partition or "recorded",
                                   partition_options=dict(partition_options or {}),
                                   num_clients=len(clients), model=model_reg,
                                   recipe=Recipe(epochs=epochs, batch_size=batch_size, lr=lr), seed=seed,
                                   record="all", normalize="none")  # the user's model sees the data as given
        self.target = _build_target(self.spec, self.dataset.input_shape, self.dataset.num_classes)
        self.source = {"recorded_by": "fedattack.interop", "framework": source,
                       "user_model": plugins.is_user("model", model_reg),
                       "user_dataset": plugins.is_user("dataset", data_reg)}
        self.check = WireCheck(self.target, self.partition.num_clients)
        self.writer = RunWriter(Path(out), overwrite)  # claims `out`: a second recorder on it is refused
        # a recorder dropped unclosed (the user's loop crashed outside a `with`) leaves no staging folder
        self._cleanup = weakref.finalize(self, _discard, self.writer)
        self.transcript = TranscriptWriter(self.writer.tmp / "transcript", RecordingPolicy("all"), 0)
        self.round: int | None = None
        self.downed: dict[int, Message] = {}
        self.uplinks: list[Message] = []
        self.max_clients = 0
        self.sampled: list[int] = []
        self.last: tuple[int, dict[int, Message], list[Message]] | None = None
        self.closed = False
        self.started = time.perf_counter()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self.abort()
        elif not self.closed:
            self.close()

    def record(self, round: int, client: int, *, downlink: Tensors | None = None,
               uplink: Tensors | None = None, samples: int | None = None) -> None:
        """One client's messages of one round (either or both; the downlink comes first)."""
        self._guard(lambda: self._record(round, client, downlink, uplink, samples))

    def close(self, server: Tensors | None = None) -> Path:
        """Write the run directory; `server` is the final global model (default: FedAvg of the last round)."""
        return self._guard(lambda: self._close(server))

    def abort(self) -> None:
        """Discard everything recorded so far (the staging folder goes)."""
        self.closed = True
        self._cleanup()

    def _guard(self, work: Callable[[], Any]) -> Any:
        if self.closed:
            raise UserError(f"the recording of {self.writer.out} is closed; start a new Recorder")
        try:
            return work()
        except _Retry:
            raise
        except UserError as exc:
            self.abort()
            raise UserError(f"{exc} (recording aborted, nothing written)") from None

    def _record(self, rnd: int, client: int, down: Tensors | None, up: Tensors | None,
                samples: int | None) -> None:
        self.check.round_and_client(rnd, client, self.round)
        rnd, client = int(rnd), int(client)
        if self.round is not None and rnd > self.round:
            self._end_round()
        self.round = rnd
        if down is not None:
            if client in self.downed:
                raise UserError(f"round {rnd}: client {client} already received a downlink this round")
            msg = Message(rnd, SERVER, client, "downlink", self.check.payload("downlink", down, rnd, client))
            self._same_broadcast(msg)
            self.transcript.add(msg)
            self.downed[client] = msg
        if up is not None:
            if client not in self.downed:
                raise UserError(f"round {rnd}: client {client} sent an uplink but received no downlink "
                                "this round; record the model it started from (downlink=...)")
            if any(m.sender == client for m in self.uplinks):
                raise UserError(f"round {rnd}: client {client} already sent an uplink this round")
            n = self._samples(rnd, client, samples)
            msg = Message(rnd, client, SERVER, "uplink", self.check.payload("uplink", up, rnd, client), n)
            self.transcript.add(msg)
            self.uplinks.append(msg)

    def _samples(self, rnd: int, client: int, samples: Any) -> int:
        """n_k: what the client reports, which must be its number of training indices."""
        held = len(self.partition.clients[client].train)
        if samples is None:
            return held
        if not isinstance(samples, (int, np.integer)) or isinstance(samples, bool) or samples < 1:
            raise UserError(f"round {rnd}: client {client} reports samples={samples!r}; a sample count is a "
                            "positive integer")
        if int(samples) != held:
            raise UserError(f"round {rnd}: client {client} reports samples={int(samples)}, but the partition gives it "
                            f"{held} training samples; declare the indices it trains on (clients=...)")
        return int(samples)

    def _same_broadcast(self, msg: Message) -> None:
        """A method whose server sends every client one model cannot send two within a round."""
        if type(self.target).broadcast is not Target.broadcast or not self.downed:
            return
        first = next(iter(self.downed.values()))
        for name, t in msg.payload.items():
            if not torch.equal(t, first.payload[name]):
                raise UserError(f"round {msg.round}: client {msg.receiver}'s downlink differs from client "
                                f"{first.receiver}'s in {name!r}; {self.spec.method}'s server sends every client "
                                "the same model, so this is not a recording of it")

    def _end_round(self) -> None:
        assert self.round is not None
        self.transcript.end_round(self.round)
        self.max_clients = max(self.max_clients, len(self.uplinks), len(self.downed))
        self.last = (self.round, dict(self.downed), list(self.uplinks))
        self.downed, self.uplinks = {}, []

    def _close(self, server: Tensors | None) -> Path:
        if self.round is None:
            raise UserError("nothing was recorded; call record(...) for at least one round")
        if server is None and not self.uplinks:
            raise _Retry(f"round {self.round}, the last, has no uplink to aggregate; call "
                         "close(server=final_state) with the final global model (nothing recorded is lost)")
        self._end_round()
        assert self.last is not None
        rnd, downed, uplinks = self.last
        if server is not None:
            state = self.check.params(server, "the final server state")
        else:  # what the declared method's server makes of the last round (FedAvg: the n_k-weighted mean)
            start = next(iter(downed.values())).payload
            state = self.target.server_step(dict(start), uplinks, rnd)
        recording = self.transcript.close()
        self.sampled = sorted(m.sender for m in uplinks)
        self.closed = True
        return self._write(state, recording, rnd)

    def _write(self, server: dict[str, torch.Tensor], recording: dict[str, Any], rounds: int) -> Path:
        import dataclasses
        spec = dataclasses.replace(self.spec, rounds=rounds,
                                   fraction=self.max_clients / self.partition.num_clients)
        accs = client_accuracies(self.target, server, self.dataset, self.partition)
        final = utility_summary(accs, self.partition.groups())
        self.writer.write_partition(self.partition)
        self.writer.write_states(server, [{} for _ in self.partition.clients])
        last = {"round": rounds, "sampled": self.sampled, "accuracy": accs}
        write_json(self.writer.tmp / "metrics.json", {"rounds": [last], "final": final})
        manifest = describe(spec, self.dataset, self.partition, self.target, recording, final)
        manifest["source"] = {**self.source, "utility_on": self.utility_on,
                              "not_recorded": sorted(self.check.left_off)}
        manifest["seconds"] = round(time.perf_counter() - self.started, 3)
        path = self.writer.finish(manifest)
        self._cleanup.detach()
        self.writer.claim.release()
        return path

    @property
    def utility_on(self) -> str:
        if any(len(c.test) for c in self.partition.clients):
            return "each client's local test indices"
        return "the dataset's test split (no client test indices were given)"


class _Retry(UserError):
    """A refusal that keeps the recording: the call can be made again correctly."""


def _discard(writer: RunWriter) -> None:
    """The staging folder goes and the output is no longer claimed."""
    shutil.rmtree(writer.tmp, ignore_errors=True)
    writer.claim.release()


def client_accuracies(target: Target, server: dict[str, torch.Tensor], dataset: Any,
                      partition: Partition) -> list[float]:
    """Each client's accuracy on its local test indices, or every client's on the test split."""
    params = target.deployed(server, {})
    with torch.no_grad():
        if not any(len(c.test) for c in partition.clients):
            acc = accuracy(target.forward(params, dataset.x_test), dataset.y_test)
            return [acc] * partition.num_clients
        out = []
        for c in partition.clients:
            idx = torch.as_tensor(c.test)
            out.append(accuracy(target.forward(params, dataset.x_train[idx]), dataset.y_train[idx]))
        return out


def partition_from_indices(clients: Sequence[Indices], tests: Sequence[Indices] | None,
                           train_size: int, seed: int) -> Partition:
    """The recorded partition: each client's indices; whatever no client holds is discarded."""
    if not clients:
        raise UserError("clients is empty; give each client's train indices")
    if tests is not None and len(tests) != len(clients):
        raise UserError(f"test_clients has {len(tests)} entries for {len(clients)} clients")
    arrays = [np.asarray(list(c), dtype=np.int64).reshape(-1) for c in clients]
    test_arrays = [np.asarray(list(t), dtype=np.int64).reshape(-1) for t in tests or [[] for _ in clients]]
    every = np.concatenate(arrays + test_arrays)
    if every.size and (every.min() < 0 or every.max() >= train_size):
        raise UserError(f"a client index is outside the dataset's train split 0..{train_size - 1}")
    counts = np.bincount(every, minlength=train_size)
    if (counts > 1).any():
        raise UserError(f"train sample {int(np.argmax(counts > 1))} is given to more than one client "
                        "(or to a client's train and test sets)")
    if any(a.size == 0 for a in arrays):
        raise UserError(f"client {next(k for k, a in enumerate(arrays) if a.size == 0)} holds no training samples")
    spec = {"name": "recorded", "num_clients": len(arrays), "seed": seed, "options": {}}
    return Partition(spec, tuple(ClientData(a, t, "all") for a, t in zip(arrays, test_arrays)),
                     np.flatnonzero(counts == 0).astype(np.int64), {})


def same_partition(given: Partition, name: str, options: dict[str, Any], dataset: Any, seed: int) -> Partition:
    """fedattack's partition `name` when the clients' indices are exactly it; else a one-line refusal."""
    made = make_partition(name, dataset, given.num_clients, seed, **options)
    for k, (mine, theirs) in enumerate(zip(given.clients, made.clients)):
        for part in ("train", "test"):
            a, b = np.sort(np.asarray(getattr(mine, part))), np.sort(np.asarray(getattr(theirs, part)))
            if not np.array_equal(a, b):
                raise UserError(f"client {k}'s {part} indices are not those of fedattack's {name} partition "
                                f"({given.num_clients} clients, seed {seed}); pass the indices it gives, or "
                                "leave partition out (the run is then recorded on its own partition)")
    return made


def _build_target(spec: FederationSpec, input_shape: tuple[int, int, int], num_classes: int) -> Target:
    from fedattack.defences import make_target
    ctx = TargetContext(model=spec.model, input_shape=input_shape, num_classes=num_classes,
                        recipe=spec.recipe, num_clients=spec.num_clients or 1, rounds=1, seed=spec.seed)
    return make_target(spec.method, spec.hyper, ctx, ())

