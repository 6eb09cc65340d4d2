"""`batched`: the clients sampled in a round train as one computation over stacked parameters.

With the papers' small models and batches of 10, a one-client-at-a-time loop spends most of its
time on per-step overhead, not arithmetic. Here every local SGD step of every client in the
round is one `vmap(grad(local_loss))` call over stacked parameters, so the overhead is paid
once per step for all clients (plain-loss MLPs take a hand-written `baddbmm` step instead, in
groups of `CPU_MLP_GROUP` clients on a CPU, see `_mlp_fast`; WAFFLe's low-rank MLP with its
IBP selection likewise, in groups of `CPU_IBP_GROUP`, see `_ibp_fast`; the zoo's CNNs as one
grouped convolution per layer, see `_cnn_fast`). Results equal the sequential
executor's within floating-point tolerance (tests/core/test_batched_executor.py holds this for
every batchable target).

The executor owns a batchable target's local sequence: `start_local` for every job, one stacked
training of every local problem, then `finish_local` for every job. Targets with
`batchable = False` (they write their own `client_update`) run through the sequential executor
unchanged. The same executor trains any list of `ClientJob`s, e.g. an attack's shadow models.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import torch

from fedattack.federation.executor_plugins._evaluate import InputCache, evaluate_clients
from fedattack.federation.executor_plugins._stacked import (
    TrainRequest,
    hand_written,
    hand_written_step,
    signature,
    train_stacked,
)
from fedattack.federation.executors import EXECUTORS, ClientJob, SequentialExecutor, sealed
from fedattack.registry import UserError
from fedattack.target import LocalData, State, Target
from fedattack.training import sequential_train
from fedattack.wire import Payload

# On a CPU the hand-written MLP step is bound by moving the stacked weights through the caches:
# measured on the 2-core machine (FedAvg, MNIST MLP, 50 clients a round), groups of 5-10
# clients ran 25-35% faster per CPU second than all 50 at once. vmap is bound by per-call
# overhead instead and gains from the largest group, so it always takes every client.
CPU_MLP_GROUP = 8
# WAFFLe's hand-written step (`_ibp_fast`) also pays ~100 small operations per step for the
# factor selection, whatever the group's size; measured on the MNIST setting (1 thread, shared
# machine) a client step cost 0.42 ms of CPU in groups of 5, 0.32 in 10, 0.29 in 25.
CPU_IBP_GROUP = 16
# ... and it holds the GIL for each of those operations, so in Python threads (see
# `_train_chunks`) small stacks wait on each other: measured on the 2-core machine (MNIST
# setting, 10 clients a round, idle), two threads of 5 clients ran 4,000-5,500 client steps/s,
# one stack of 10 with torch's two threads inside its products 5,300-7,650, and one thread alone
# 4,700-6,400; at 20 clients two threads of 10 won (5,700-7,500 against 5,900-6,100). So WAFFLe
# runs in threads only when each gets at least this many clients.
CPU_IBP_THREAD_MIN = 8
# Under `batched-native` those operations are compiled C that releases the GIL, and larger
# stacks pay again: measured (MNIST setting, rounds alternating in one process) at 50 clients,
# groups of 16 in two threads 1,098 ms a round, one stack of 50 970, two threads of 25 956
# (bench_waffle: 12,737 client steps/s before, 12,858-13,912 after); at 20 clients one stack
# 454-500 against 513-526 for two threads of 10 there, but no difference in bench_waffle.
CPU_IBP_NATIVE_GROUP = 50
CPU_IBP_NATIVE_THREAD_MIN = 25


@EXECUTORS.register("batched")
class BatchedExecutor:
    """All sampled clients of a round at once (vmap over stacked parameters); CPU or GPU."""

    trainer = staticmethod(sequential_train)
    native = False  # WAFFLe's selection compiled to C (`batched-native`)

    def __init__(self, device: str = "cpu", fast: bool = True, group_size: int | None = None) -> None:
        try:
            self.device = torch.device(device)
        except RuntimeError:  # torch's "Invalid device string", a traceback before
            raise UserError(f"unknown device {device!r}; use cpu or cuda[:N]") from None
        self.fast = fast  # False: vmap for every target, even where the MLP fast path applies
        self.group_size = group_size  # clients trained together at most (None: all of them)
        self.eval_inputs = InputCache()  # the clients' test inputs, prepared once (see _evaluate)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise UserError(f"device {device!r} was asked for but CUDA is not available; use --device cpu")

    def run(self, target: Target, jobs: list[ClientJob]) -> list[tuple[Payload, State]]:
        if not target.batchable or len(jobs) < 2:
            return SequentialExecutor().run(target, jobs)
        problems = [target.start_local(j.down, j.private, j.data) for j in jobs]
        trained = self.serve([TrainRequest(target, p, j.data, j.ctx) for p, j in zip(problems, jobs)])
        return [sealed(target, j, *target.finish_local(params, p, j.down, j.private, j.data))
                for params, p, j in zip(trained, problems, jobs)]

    def serve(self, requests: list[TrainRequest]) -> list[State]:
        """Train every pending request; requests that stack alike train together."""
        groups: dict[tuple, list[int]] = {}
        for i, req in enumerate(requests):
            key = (id(req.target), req.target.recipe, signature(req))
            groups.setdefault(key, []).append(i)
        chunks = [chunk for members in groups.values() for chunk in self._chunks(requests, members)]
        out: list[State] = [{}] * len(requests)
        for chunk, trained in zip(chunks, self._train_chunks(requests, chunks)):
            for i, params in zip(chunk, trained):
                out[i] = params
        return out

    def _chunks(self, requests: list[TrainRequest], members: list[int]) -> list[list[int]]:
        """Split one stackable group into near-equal chunks (see CPU_MLP_GROUP and cpu_workers)."""
        first = requests[members[0]]
        kind = hand_written_step(first.target, first.problem) if self.fast else None
        native = kind == "ibp" and self.native
        group = CPU_MLP_GROUP if kind == "mlp" else CPU_IBP_NATIVE_GROUP if native else CPU_IBP_GROUP
        cap = self.group_size or (group if kind and self.device.type == "cpu" else len(members))
        threads = self.cpu_workers() if kind else 1
        if kind == "ibp":
            least = CPU_IBP_NATIVE_THREAD_MIN if native else CPU_IBP_THREAD_MIN
            threads = max(1, min(threads, len(members) // least))
        parts = max(math.ceil(len(members) / cap), min(threads, len(members)))
        size = math.ceil(len(members) / parts)
        return [members[s:s + size] for s in range(0, len(members), size)]

    def cpu_workers(self) -> int:
        """Chunks trained at once: one per torch thread on a CPU (1 on a GPU)."""
        return torch.get_num_threads() if self.device.type == "cpu" else 1

    def _train_chunks(self, requests: list[TrainRequest], chunks: list[list[int]]) -> list[list[State]]:
        """Each chunk's trained parameters. On a CPU with several torch threads, the chunks run
        side by side in Python threads with one torch thread each: the MLP step's small matrix
        products barely gain from intra-op threads, and torch releases the GIL inside each op."""
        def train(chunk: list[int]) -> list[State]:
            reqs = [requests[i] for i in chunk]
            if len(reqs) == 1 and not (self.fast and hand_written(reqs[0].target, reqs[0].problem)):
                r = reqs[0]
                return [sequential_train(r.target, r.problem, r.data, r.ctx)]
            return train_stacked(reqs, self.device, self.fast, self.native)

        # only the hand-written steps run threaded; vmap's transforms stay on one thread
        all_fast = self.fast and all(hand_written(requests[c[0]].target, requests[c[0]].problem)
                                     for c in chunks)
        workers = min(self.cpu_workers(), len(chunks)) if all_fast else 1
        if workers < 2:
            return [train(chunk) for chunk in chunks]
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                return list(pool.map(train, chunks))
        finally:
            torch.set_num_threads(threads)

    def evaluate(self, target: Target, deployed: list[State], datas: list[LocalData]) -> list[float]:
        """Local test accuracy of every client, clients with alike models evaluated together."""
        return evaluate_clients(target, deployed, datas, self.device, self.eval_inputs)
