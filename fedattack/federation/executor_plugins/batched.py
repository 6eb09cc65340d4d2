"""`batched`: the clients sampled in a round train as one computation over stacked parameters.

With the papers' small models and batches of 10, a one-client-at-a-time loop spends most of its
time on per-step overhead, not arithmetic. Here every local SGD step of every client in the
round is one computation over stacked parameters: the method's own step kernel where it
declares one (`Target.step_kernel`, `fedattack.kernels`: the zoo's MLP and CNNs by hand-written
steps, WAFFLe by its own), else one `vmap(grad(local_loss))` call, so the overhead is paid once
per step for all clients. This executor owns only what is the same for every method: which
clients stack together, their minibatches and noise, how many share a stack and whether stacks
run side by side in threads (as the kernel's `Chunking` asks), and the dispatch. Results equal
the sequential executor's within floating-point tolerance (tests/core/test_batched_executor.py
holds this for every batchable target).

The executor owns a batchable target's local sequence: `start_local` for every job, one stacked
training of every local problem, then `finish_local` for every job. Targets with
`batchable = False` (they write their own `client_update`) run through the sequential executor
unchanged. The same executor trains any list of `ClientJob`s, e.g. an attack's shadow models.
`options` are kernel options it passes to every kernel (`batched-native`: "native").
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch

from fedattack.federation.executor_plugins._evaluate import InputCache, evaluate_clients
from fedattack.federation.executor_plugins._stacked import TrainRequest, signature, train_stacked
from fedattack.federation.executors import EXECUTORS, ClientJob, SequentialExecutor, sealed
from fedattack.kernels import StepKernel
from fedattack.registry import UserError
from fedattack.target import LocalData, State, Target
from fedattack.training import sequential_train
from fedattack.wire import Payload


@dataclass
class Chunk:
    """Requests trained as one stack, by `kernel` (None: vmap)."""

    members: list[int]
    kernel: StepKernel | None


@EXECUTORS.register("batched")
class BatchedExecutor:
    """All sampled clients of a round at once (the method's step kernel, else vmap); the default; CPU or GPU."""

    trainer = staticmethod(sequential_train)
    options: frozenset[str] = frozenset()  # kernel options (`batched-native`: "native")

    def __init__(self, device: str = "cpu", fast: bool = True, group_size: int | None = None) -> None:
        try:
            self.device = torch.device(device)
        except RuntimeError:  # torch's "Invalid device string", a traceback before
            raise UserError(f"unknown device {device!r}; use cpu or cuda[:N]") from None
        self.fast = fast  # False: vmap for every target, whatever kernel it declares
        self.group_size = group_size  # clients trained together at most (None: all of them)
        self.eval_inputs = InputCache()  # the clients' test inputs, prepared once (see _evaluate)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise UserError(f"--device {device} was asked for but CUDA is not available; use --device cpu")

    def run(self, target: Target, jobs: list[ClientJob]) -> list[tuple[Payload, State]]:
        if not target.trains_in_stacks or len(jobs) < 2:
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
            for i, params in zip(chunk.members, trained):
                out[i] = params
        return out

    def _chunks(self, requests: list[TrainRequest], members: list[int]) -> list[Chunk]:
        """Split one stackable group into near-equal chunks, as its kernel's `Chunking` asks
        (on a CPU; a GPU, and vmap, take every client at once) and `cpu_workers` allows."""
        first = requests[members[0]]
        kernel = first.target.step_kernel(first.problem) if self.fast else None
        if kernel is not None:
            kernel.prepare(self.options)
        chunking = kernel.chunking(self.options) if kernel is not None else None
        group = chunking.group if chunking is not None and self.device.type == "cpu" else None
        cap = self.group_size or group or len(members)
        threads = 1
        if chunking is not None and chunking.thread_min is not None:
            threads = max(1, min(self.cpu_workers(), len(members) // chunking.thread_min))
        parts = max(math.ceil(len(members) / cap), min(threads, len(members)))
        size = math.ceil(len(members) / parts)
        return [Chunk(members[s:s + size], kernel) for s in range(0, len(members), size)]

    def cpu_workers(self) -> int:
        """Chunks trained at once: one per torch thread on a CPU (1 on a GPU)."""
        return torch.get_num_threads() if self.device.type == "cpu" else 1

    def _train_chunks(self, requests: list[TrainRequest], chunks: list[Chunk]) -> list[list[State]]:
        """Each chunk's trained parameters. On a CPU with several torch threads, chunks whose
        kernel allows it run side by side in Python threads with one torch thread each: small
        matrix products barely gain from intra-op threads, and torch releases the GIL inside each op."""
        def train(chunk: Chunk) -> list[State]:
            reqs = [requests[i] for i in chunk.members]
            if len(reqs) == 1 and chunk.kernel is None:
                r = reqs[0]
                return [sequential_train(r.target, r.problem, r.data, r.ctx)]
            return train_stacked(reqs, self.device, chunk.kernel, self.options)

        threaded = all(c.kernel is not None and c.kernel.chunking(self.options).thread_min is not None
                       for c in chunks)  # vmap's transforms stay on one thread
        workers = min(self.cpu_workers(), len(chunks)) if threaded else 1
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
