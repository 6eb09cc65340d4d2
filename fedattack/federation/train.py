"""Train a federation from a spec and write its run directory (what `fedattack train` does)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from fedattack.contract import WireSchema
from fedattack.data import load_dataset, normalization
from fedattack.data.partition import make_partition
from fedattack.data.types import Dataset, Partition
from fedattack.defences import defence_entries, make_target
from fedattack.defences.base import sent_through
from fedattack.federation.active import ActiveThreatModel, ServerKnowledge, build_active
from fedattack.federation.executors import make_executor
from fedattack.federation.loop import FederationState, RoundLoop, client_data
from fedattack.federation.rundir import RunWriter
from fedattack.federation.spec import FederationSpec
from fedattack.federation.storage import write_json
from fedattack.federation.transcript_io import TranscriptWriter
from fedattack.federation.utility import final_utility
from fedattack.interrupts import terminate_as_interrupt
from fedattack.metrics import utility_summary
from fedattack.models import count_parameters
from fedattack.registry import TARGETS
from fedattack.target import Target, TargetContext
from fedattack.wire import RecordingPolicy


def build_target(spec: FederationSpec, dataset: Dataset, num_clients: int,
                 data_root: str | Path | None = None) -> Target:
    """The spec's method, wrapped in its defences, built from one context."""
    applies = TARGETS.get(spec.method).normalizes_inputs
    ctx = TargetContext(model=spec.model, input_shape=dataset.input_shape,
                        num_classes=dataset.num_classes, recipe=spec.recipe, num_clients=num_clients,
                        rounds=spec.rounds, seed=spec.seed,
                        clients_per_round=spec.clients_per_round(num_clients),
                        data_root=None if data_root is None else str(data_root),
                        normalization=normalization.resolve(spec.normalize if applies else "none",
                                                            dataset.x_train))
    return make_target(spec.method, spec.hyper, ctx, spec.defences)


def estimate_wire_bytes(target: Target, spec: FederationSpec, num_clients: int) -> int:
    schema = target.recorded_schema()
    per_msg = sum(torch.Size(s).numel() * schema.dtype(kind, n).itemsize
                  for kind, shapes in (("downlink", schema.downlink), ("uplink", schema.uplink))
                  for n, s in shapes.items())
    return per_msg * spec.clients_per_round(num_clients) * spec.rounds


def train_federation(spec: FederationSpec, out: str | Path, data_root: str | None = None,
                     download: bool = False, overwrite: bool = False, device: str = "cpu",
                     progress: bool = True) -> Path:
    """Train `spec` and write it to `out` atomically; returns the run directory. A SIGTERM
    while it trains cleans up as Ctrl-C does (`terminate_as_interrupt`)."""
    with terminate_as_interrupt():
        return _train_federation(spec, out, data_root, download, overwrite, device, progress)


def _train_federation(spec: FederationSpec, out: str | Path, data_root: str | None, download: bool,
                      overwrite: bool, device: str, progress: bool) -> Path:
    started = time.perf_counter()
    dataset = load_dataset(spec.dataset, data_root, download)
    partition = make_partition(spec.partition, dataset, spec.num_clients, spec.seed,
                               **spec.partition_options)
    n = partition.num_clients
    target = build_target(spec, dataset, n, data_root)
    policy = RecordingPolicy(spec.record).resolve(estimate_wire_bytes(target, spec, n))
    with RunWriter(Path(out), overwrite) as writer:
        recorder = TranscriptWriter(writer.tmp / "transcript", policy, spec.rounds)
        datas = [client_data(dataset, partition, k) for k in range(n)]
        adversary = active_adversary(spec, target, dataset, n)
        loop = RoundLoop(spec, target, datas, make_executor(spec.executor, device), recorder.add, adversary)
        state, history = run_rounds(loop, spec, recorder, partition, progress)
        recording = recorder.close()
        writer.write_partition(partition)
        writer.write_states(state.server, state.private)
        final = final_utility(loop, state, history[-1]["accuracy"], dataset, partition, spec.seed)
        write_json(writer.tmp / "metrics.json", {"rounds": history, "final": final})
        manifest = describe(spec, dataset, partition, target, recording, final)
        if adversary is not None:
            manifest["active_adversary"] = adversary.record()
            manifest["wire_schema"] = widened(manifest["wire_schema"], adversary.wire_schema(), target)
        summary = target.summarize(state.server, state.private, partition.groups())
        if summary:
            manifest["method_summary"] = summary
        manifest["diverged"] = nonfinite(state.server)
        manifest["seconds"] = round(time.perf_counter() - started, 3)
        return writer.finish(manifest)


def active_adversary(spec: FederationSpec, target: Target, dataset: Dataset,
                     num_clients: int) -> ActiveThreatModel | None:
    """The spec's active threat model, holding what a server holds: the public test split."""
    if spec.active is None:
        return None
    knowledge = ServerKnowledge(aux=dataset.x_test, aux_labels=dataset.y_test, num_clients=num_clients, seed=spec.seed,
                                train_size=int(dataset.y_train.shape[0]), rounds=spec.rounds)
    return build_active(spec.active, target, knowledge)


def widened(schema: dict[str, Any], extra: dict[str, dict[str, tuple[int, ...]]], target: Target) -> dict[str, Any]:
    """The wire schema with the tensors an active server added (what crossed the wire is
    declared), sent as the method's defences send the rest (secure aggregation: int64)."""
    added = WireSchema(downlink=extra.get("downlink", {}), uplink=extra.get("uplink", {}))
    more = sent_through(target.defences, added).to_json()
    return {kind: {**shapes, **more.get(kind, {})} for kind, shapes in schema.items()}


def nonfinite(server: dict[str, torch.Tensor]) -> list[str]:
    """The server tensors holding NaN or infinity: a federation that diverged (recorded, flagged)."""
    return sorted(n for n, t in server.items() if t.is_floating_point() and not bool(torch.isfinite(t).all()))


def run_rounds(loop: RoundLoop, spec: FederationSpec, recorder: TranscriptWriter,
               partition: Partition, progress: bool) -> tuple[FederationState, list[dict[str, Any]]]:
    state = loop.start()
    history: list[dict[str, Any]] = []
    bar = tqdm(range(1, spec.rounds + 1), desc=f"{spec.method} on {spec.dataset}", unit="round",
               disable=not progress, leave=False)
    for rnd in bar:
        sampled = loop.run_round(state, rnd)
        recorder.end_round(rnd)
        if rnd % spec.eval_every == 0 or rnd == spec.rounds:
            accs = loop.evaluate(state)
            history.append({"round": rnd, "sampled": sampled, "accuracy": accs})
            mean = utility_summary(accs, partition.groups()).get("mean")
            if mean is not None:  # no client holds test images: nothing to show
                bar.set_postfix(acc=f"{mean:.2f}")
    return state, history


def describe(spec: FederationSpec, dataset: Dataset, partition: Partition, target: Target,
             recording: dict, final: dict) -> dict[str, Any]:
    from fedattack.data.heterogeneity import partition_heterogeneity
    schema = target.recorded_schema()
    return {
        "spec": spec.to_json(),
        "dataset": {"name": dataset.name, "input_shape": list(dataset.input_shape),
                    "num_classes": dataset.num_classes, "classes": list(dataset.classes),
                    "train_size": int(dataset.y_train.shape[0]), "test_size": int(dataset.y_test.shape[0])},
        "num_clients": partition.num_clients,
        "partition": partition.spec,
        "heterogeneity": partition_heterogeneity(dataset.x_train, partition),
        "model": {"name": spec.model, "parameters": count_parameters(target.model)},
        "normalization": (None if target.ctx.normalization is None
                          else target.ctx.normalization.to_json()),
        "defences": defence_entries(target),
        "wire_schema": schema.to_json(),
        "recording": recording,
        "utility": final,
        "numerics": numerics(),
    }


def numerics() -> dict[str, Any]:
    """What decides the float32 bits besides the seed, so two runs that differ can be told
    apart: torch's kernels for the CPU's instruction set, its thread count (on AVX-512 CPUs the
    batched executor's grouping follows it and MKL's batched products round by stack size) and
    MKL's reproducibility mode (`MKL_CBWR=AUTO,STRICT` removes that dependence; docs/architecture.md)."""
    return {"cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "torch_threads": torch.get_num_threads(), "mkl_cbwr": os.environ.get("MKL_CBWR")}
