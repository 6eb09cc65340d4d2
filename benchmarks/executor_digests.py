"""Digests of every method x executor federation, to show that a refactoring changed no bit.

    FEDATTACK_DATA=/work/shared/datasets .venv/bin/python benchmarks/executor_digests.py \\
        --out digests-before.json
    ... change the code ...
    FEDATTACK_DATA=/work/shared/datasets .venv/bin/python benchmarks/executor_digests.py \\
        --compare digests-before.json

Each case trains a small federation in memory (the round loop, no run directory) with every
registered executor, at one and at two torch threads (the batched executor's grouping and its
Python threads follow the thread count), and digests everything the federation produced: every
recorded message (round, sender, receiver, kind, samples, each tensor's name, dtype, shape and
bytes), the server's final state, every client's private state and every evaluation's
accuracies. The cases cover every registered method on the digits MLP (the MLP step, the vmap
path, the sequential fallback), FedAvg and FedProx on every registered model (the
grouped-convolution step on each CNN, average-pooled ones included, and the generic path of a
model no kernel computes; on the digits where the model takes 8x8 images, else MNIST, else
CIFAR-10), WAFFLe's recipes on an MLP (its hand-written and compiled steps, SGD and Adam), and
the built-in defences around FedAvg and WAFFLe.

Float32 bits depend on the CPU (instruction set, vendor) and on torch's version, so digests
compare only with digests made on the same machine with the same software: the file records
both, and `--compare` refuses a file from elsewhere.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fedattack.data import load_dataset  # noqa: E402
from fedattack.data.partition import make_partition  # noqa: E402
from fedattack.defences.base import DEFENCES  # noqa: E402
from fedattack.federation.executors import EXECUTORS, make_executor  # noqa: E402
from fedattack.federation.loop import RoundLoop, client_data  # noqa: E402
from fedattack.federation.spec import FederationSpec  # noqa: E402
from fedattack.federation.train import build_target  # noqa: E402
from fedattack.models import build_model  # noqa: E402
from fedattack.registry import MODELS, TARGETS, UserError  # noqa: E402
from fedattack.target import Recipe  # noqa: E402

DIGITS = dict(dataset="digits", model="digits-mlp", num_clients=20, fraction=1.0, rounds=2,
              recipe=Recipe(epochs=2, batch_size=10, lr=0.1))
MNIST = dict(dataset="mnist", num_clients=100, fraction=0.2, rounds=2,
             recipe=Recipe(epochs=1, batch_size=10, lr=0.04))
CIFAR = {**MNIST, "dataset": "cifar10", "recipe": Recipe(epochs=1, batch_size=10, lr=0.02)}
SHAPES = (((1, 8, 8), DIGITS), ((1, 28, 28), MNIST), ((3, 32, 32), CIFAR))  # the first one a model takes
WAFFLE_MNIST = {**MNIST, "recipe": Recipe(epochs=2, batch_size=20, lr=0.04)}  # ibp-wf fine-tunes 1 of E
WAFFLE_RECIPES = {
    "literal": {},
    "bernoulli-scaled": {"kl_b": "bernoulli", "selection_lr_scale": 4.0},
    "ibp-wf": {"recipe": "ibp-wf"},
    "personal": {"recipe": "personal"},
    "personal-round-clock": {"recipe": "personal", "temperature_clock": "round", "finetune_epochs": 1},
}
DEFENCE_SETTINGS = {  # the cases' settings where a defence's defaults would make it trivial; every
    "clip": ("clip", {"max_norm": 0.5}),  # registered defence gets a case, with its defaults if not here
    "dp-fedavg-client": ("dp-fedavg", {"noise": "client", "noise_multiplier": 0.3}),
    "compression": ("compression", {"top_k": 0.2, "bits": 4}),
    "dp-sgd": ("dp-sgd", {"noise_multiplier": 0.3}),
    "secure-aggregation": ("secure-aggregation", {}),
}


def cases() -> dict[str, dict[str, Any]]:
    """Every case: a name and the FederationSpec settings that make it."""
    out: dict[str, dict[str, Any]] = {}
    for method in TARGETS.names():
        out[f"{method}/digits-mlp"] = {**DIGITS, "method": method}
    for method in ("fedavg", "fedprox"):
        out[f"{method}/fmnist-cnn"] = {**MNIST, "method": method, "model": "fmnist-cnn", "fraction": 0.1}
        for model in MODELS.names():
            out.setdefault(f"{method}/{model}", {**setting_for(model), "method": method, "model": model})
    for name, hyper in WAFFLE_RECIPES.items():
        out[f"waffle-ibp:{name}/mnist-mlp"] = {**WAFFLE_MNIST, "method": "waffle-ibp", "model": "mnist-mlp",
                                               "hyper": hyper}
    for name, defences in defence_cases().items():
        out[f"fedavg+{name}/digits-mlp"] = {**DIGITS, "method": "fedavg", "defences": defences}
        out[f"waffle-ibp+{name}/mnist-mlp"] = {**WAFFLE_MNIST, "method": "waffle-ibp", "model": "mnist-mlp",
                                               "defences": defences}
    return out


def defence_cases() -> dict[str, list[dict[str, Any]]]:
    """A case name and its defences for every registered defence (`DEFENCE_SETTINGS`' where given)."""
    named = {case: [{"name": name, "settings": settings}] for case, (name, settings) in DEFENCE_SETTINGS.items()}
    covered = {name for name, _ in DEFENCE_SETTINGS.values()}
    return {**named, **{name: [{"name": name, "settings": {}}] for name in DEFENCES.names() if name not in covered}}


def setting_for(model: str) -> dict[str, Any]:
    """The smallest of the cases' datasets whose images the model can be built for."""
    for shape, base in SHAPES:
        try:
            build_model(model, shape, 10)
        except (UserError, RuntimeError, ValueError):
            continue
        return {**base, "fraction": 0.1} if base is not DIGITS else dict(base)
    raise SystemExit(f"model {model} builds for none of {[s for s, _ in SHAPES]}; add a setting for it")


@cache
def setting(dataset: str, num_clients: int, seed: int):  # type: ignore[no-untyped-def]
    data = load_dataset(dataset)
    spec = FederationSpec(method="fedavg", dataset=dataset, partition="shards", num_clients=num_clients,
                          seed=seed)
    return data, make_partition(spec.partition, data, num_clients, seed)


def federate(case: dict[str, Any], executor: str) -> tuple[str, float]:
    """The digest of one federation, and the seconds it took."""
    case = {**case, "defences": tuple(case.get("defences", ()))}
    spec = FederationSpec(partition="shards", seed=0, record="all", executor=executor, **case)
    dataset, partition = setting(spec.dataset, spec.num_clients, spec.seed)
    target = build_target(spec, dataset, partition.num_clients)
    datas = [client_data(dataset, partition, k) for k in range(partition.num_clients)]
    digest = hashlib.blake2b(digest_size=16)

    def record(m: Any) -> None:
        digest.update(f"{m.round},{m.sender},{m.receiver},{m.kind},{m.samples};".encode())
        state(digest, m.payload)

    started = time.perf_counter()
    loop = RoundLoop(spec, target, datas, make_executor(executor), record)
    fed = loop.start()
    for rnd in range(1, spec.rounds + 1):
        loop.run_round(fed, rnd)
        digest.update(repr(loop.evaluate(fed)).encode())
    state(digest, fed.server)
    for private in fed.private:
        state(digest, private)
    return digest.hexdigest(), time.perf_counter() - started


def state(digest: Any, tensors: dict[str, torch.Tensor]) -> None:
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}{t.dtype}{tuple(t.shape)}:".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    digest.update(b"|")


def machine() -> dict[str, Any]:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return {"cpu": model, "cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__,
            "python": platform.python_version(), "machine": platform.node()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the digests to this JSON file")
    parser.add_argument("--compare", help="compare with digests written earlier on this machine")
    parser.add_argument("--only", default="", help="run only cases whose name contains this")
    parser.add_argument("--threads", default="1,2", help="torch thread counts (comma-separated)")
    parser.add_argument("--resume", action="store_true", help="keep the digests --out holds, run the others")
    parser.add_argument("--executors", default="", help="only these executors (comma-separated; default all)")
    parser.add_argument("--skip", default="", help="leave out `case | executor | threads` keys containing any "
                                                   "of these (comma-separated)")
    args = parser.parse_args()
    before = json.loads(Path(args.compare).read_text()) if args.compare else None
    here = machine()
    if before is not None:
        theirs = {k: v for k, v in before["machine"].items() if k != "machine"}
        if theirs != {k: v for k, v in here.items() if k != "machine"}:
            raise SystemExit(f"{args.compare} was made on {before['machine']}, this is {here}: digests compare "
                             "only on the same machine and software")
    digests: dict[str, str] = {}
    if args.resume and args.out and Path(args.out).is_file():
        digests = json.loads(Path(args.out).read_text())["digests"]
    mismatches = 0
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        for name, case in cases().items():
            if args.only not in name:
                continue
            for executor in [e for e in EXECUTORS.names() if not args.executors or e in args.executors.split(",")]:
                key = f"{name} | {executor} | {threads} thread{'s' if threads > 1 else ''}"
                if (key in digests and before is None) or any(part and part in key for part in args.skip.split(",")):
                    continue
                try:
                    digests[key], seconds = federate(case, executor)
                except UserError as exc:  # e.g. a defence that refuses the method
                    digests[key], seconds = f"refused: {exc}", 0.0
                old = before["digests"].get(key) if before is not None else None
                verdict = "" if old is None else ("same" if old == digests[key] else "DIFFERENT")
                mismatches += verdict == "DIFFERENT"
                print(f"{key:70s} {digests[key][:32]:32s} {seconds:6.1f}s {verdict}", flush=True)
                if args.out:  # as it goes, so an interrupted run keeps what it made
                    Path(args.out).write_text(json.dumps({"machine": here, "digests": digests}, indent=1) + "\n")
    if before is not None:
        whole = not (args.only or args.executors or args.skip)
        missing = sorted(set(before["digests"]) - set(digests)) if whole else []
        print(f"{len(digests)} compared: {mismatches} different, {len(missing)} missing")
        if mismatches or missing:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
