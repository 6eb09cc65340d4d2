"""One measurement of bench_mnist.py, run in its own process so its peak memory is its own.

`python -m benchmarks._measure '{"runner": ..., ...}'` prints one JSON line. Runners:
`plain` (one client at a time: nn.Module/parameters + torch.optim.SGD + DataLoader, see
_plain.py), `sequential` and `batched` (fedattack's executors in the real round loop),
`batched-vmap` (the batched executor without its hand-written MLP step),
`full` (the whole federation through `train_federation`, evaluation and recording included).
"""

from __future__ import annotations

import copy
import json
import math
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _plain import MnistMLP, average, train_client  # noqa: E402

from fedattack.data import load_dataset  # noqa: E402
from fedattack.data.partition import make_partition  # noqa: E402
from fedattack.federation.executor_plugins.batched import BatchedExecutor  # noqa: E402
from fedattack.federation.executors import make_executor  # noqa: E402
from fedattack.federation.loop import RoundLoop, client_data, sample_clients  # noqa: E402
from fedattack.federation.spec import FederationSpec  # noqa: E402
from fedattack.federation.train import build_target, train_federation  # noqa: E402
from fedattack.rng import generator  # noqa: E402
from fedattack.target import Recipe, Target  # noqa: E402
from fedattack.training import Batch, draw_noise  # noqa: E402
from fedattack.wire import SERVER, Message, payload_bytes  # noqa: E402

RECIPE = Recipe(epochs=5, batch_size=10, lr=0.04)  # WAFFLe appendix C, MNIST


def spec_for(cfg: dict[str, Any], rounds: int) -> FederationSpec:
    return FederationSpec(method=cfg["method"], dataset="mnist", partition="shards", num_clients=100,
                          model="mnist-mlp", rounds=rounds, fraction=cfg["clients"] / 100,
                          recipe=RECIPE, seed=0, executor=cfg.get("executor", "sequential"),
                          hyper=dict(cfg.get("hyper") or {}))


def rss_now() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure(cfg: dict[str, Any]) -> dict[str, Any]:
    if cfg.get("threads"):
        torch.set_num_threads(cfg["threads"])
    if cfg["runner"] == "full":
        return full_setting(cfg)
    spec = spec_for(cfg, rounds=cfg["rounds"] + 1)
    dataset = load_dataset("mnist", cfg.get("data_root"))
    partition = make_partition("shards", dataset.y_train.numpy(), 100, spec.seed, "mnist")
    target = build_target(spec, dataset, partition.num_clients)
    datas = [client_data(dataset, partition, k) for k in range(partition.num_clients)]
    baseline = rss_now()
    run = plain_rounds if cfg["runner"] == "plain" else executor_rounds
    cpu = time.process_time()
    seconds, steps, wire = run(cfg, spec, target, datas)
    return {"seconds": seconds, "steps": steps, "cpu_seconds": time.process_time() - cpu, "rounds": cfg["rounds"], "wire_bytes_per_round": wire,
            "flops_per_step": flops_per_step(target, datas[0]), "rss_baseline": baseline,
            "rss_peak": peak_rss(), "threads": torch.get_num_threads()}


def executor_rounds(cfg, spec, target, datas):  # type: ignore[no-untyped-def]
    """fedattack's round loop with the named executor; round 1 is a warm-up, not timed."""
    wire = {"bytes": 0}

    def record(message) -> None:  # type: ignore[no-untyped-def]
        if message.round > 1:
            wire["bytes"] += payload_bytes(message.payload)

    device = cfg.get("device", "cpu")
    if cfg["runner"] == "batched-vmap":  # the general path, even where the MLP fast path applies
        executor = BatchedExecutor(device, fast=False)
    else:
        executor = make_executor(cfg["runner"], device)
    loop = RoundLoop(spec, target, datas, executor, record)
    state = loop.start()
    loop.run_round(state, 1)
    steps, started = 0, time.perf_counter()
    for rnd in range(2, spec.rounds + 1):
        steps += sum(local_steps(datas[k].size) for k in loop.run_round(state, rnd))
    return time.perf_counter() - started, steps, wire["bytes"] / cfg["rounds"]


def plain_rounds(cfg, spec, target, datas):  # type: ignore[no-untyped-def]
    """One client after another in plain PyTorch; FedAvg by state dicts, other methods by the
    target's own loss (its parameters as nn.Parameters under torch.optim.SGD)."""
    n = len(datas)
    fedavg = cfg["method"] == "fedavg"
    model = MnistMLP()
    server = target.init_server(generator(0, "init"))
    private = [target.init_private(k, server, generator(0, "private", k)) for k in range(n)]
    steps, started = 0, None
    for rnd in range(1, spec.rounds + 1):
        if rnd == 2:
            started = time.perf_counter()
        clients = sample_clients(spec, n, rnd)
        if fedavg:
            states = []
            for k in clients:
                local = copy.deepcopy(model)
                steps += (rnd > 1) * train_client(local, datas[k].x_train, datas[k].y_train,
                                                  RECIPE.epochs, RECIPE.batch_size, RECIPE.lr, seed=k)
                states.append(local.state_dict())
            model.load_state_dict(average(states, [datas[k].size for k in clients]))
        else:
            ups = []
            for k in clients:
                up, private[k], taken = plain_target_client(target, target.broadcast(server, k, rnd),
                                                            private[k], datas[k], seed=k)
                ups.append(Message(rnd, k, SERVER, "uplink", up, samples=int(datas[k].size)))
                steps += (rnd > 1) * taken
            server = target.aggregate(server, ups, rnd)
    return time.perf_counter() - started, steps, None


def plain_target_client(target: Target, down, private, data, seed: int):  # type: ignore[no-untyped-def]
    problem = target.start_local(down, private, data)
    params = {k: torch.nn.Parameter(v.detach().clone()) for k, v in problem.params.items()}
    opt = torch.optim.SGD(params.values(), lr=RECIPE.lr)
    loader = DataLoader(TensorDataset(data.x_train, data.y_train), batch_size=RECIPE.batch_size,
                        shuffle=True, generator=torch.Generator().manual_seed(seed))
    noise_gen = torch.Generator().manual_seed(seed)
    shapes = target.noise_shapes(problem)
    step = 0
    for _ in range(RECIPE.epochs):
        for xb, yb in loader:
            opt.zero_grad()
            batch = Batch(xb, yb, torch.full((len(yb),), 1.0 / len(yb)))
            target.local_loss(params, problem.consts, batch, draw_noise(shapes, noise_gen),
                              torch.tensor(step)).backward()
            opt.step()
            step += 1
    trained = {k: v.detach() for k, v in params.items()}
    up, priv = target.finish_local(trained, problem, down, private, data)
    return up, priv, step


def local_steps(size: int) -> int:
    return RECIPE.epochs * math.ceil(size / RECIPE.batch_size)


def flops_per_step(target: Target, data) -> int:  # type: ignore[no-untyped-def]
    """Matrix-multiply FLOPs of one client step (forward and backward), counted by PyTorch."""
    server = target.init_server(generator(0, "init"))
    private = target.init_private(0, server, generator(0, "private", 0))
    problem = target.start_local(target.broadcast(server, 0, 1), private, data)
    params = {k: v.detach().clone().requires_grad_(True) for k, v in problem.params.items()}
    b = RECIPE.batch_size
    batch = Batch(data.x_train[:b], data.y_train[:b], torch.full((b,), 1.0 / b))
    noise = draw_noise(target.noise_shapes(problem), torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as counter:
        loss = target.local_loss(params, problem.consts, batch, noise, torch.tensor(0))
        torch.autograd.grad(loss, list(params.values()), allow_unused=True)
    return int(counter.get_total_flops())


def full_setting(cfg: dict[str, Any]) -> dict[str, Any]:
    """The paper's whole run: 100 clients, 100 rounds, every client evaluated every round."""
    spec = spec_for(cfg, rounds=cfg["full_rounds"])
    with tempfile.TemporaryDirectory() as tmp:
        started, cpu = time.perf_counter(), time.process_time()
        out = train_federation(spec, Path(tmp) / "run", data_root=cfg.get("data_root"),
                               device=cfg.get("device", "cpu"), progress=False)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        manifest = json.loads((out / "federation.json").read_text())
    return {"manifest_extras_seconds": manifest_extras_seconds(cfg),"seconds": wall, "cpu_seconds": cpu, "train_seconds": manifest.get("seconds"),
            "accuracy": manifest.get("utility", {}).get("mean"),
            "wire_bytes": manifest.get("recording", {}).get("bytes_on_wire"),
            "rss_peak": peak_rss(), "threads": torch.get_num_threads()}


def manifest_extras_seconds(cfg: dict[str, Any]) -> float | None:
    """Time of the manifest's partition heterogeneity (Gamma), a one-off cost inside `train`."""
    try:
        from fedattack.data.heterogeneity import partition_heterogeneity
    except ImportError:
        return None
    dataset = load_dataset("mnist", cfg.get("data_root"))
    partition = make_partition("shards", dataset.y_train.numpy(), 100, 0, "mnist")
    started = time.perf_counter()
    partition_heterogeneity(dataset.x_train, partition)
    return time.perf_counter() - started


if __name__ == "__main__":
    print(json.dumps(measure(json.loads(sys.argv[1]))))
