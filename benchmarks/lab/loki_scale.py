"""docs/active-server.md, "Through secure aggregation at scale": one `loki` round (each sampled
client its own block of imprint units, nobody a model of zeros) read out of the secure sum of
10, 100 and 1,000 clients (MNIST) and 100 (CIFAR-10); `checks` and `honest`: every registered
client check on that round's downlinks, streamed, and on honest rounds of the same federation
(benchmarks/lab/loki_checks.py).

    FEDATTACK_DATA=../shared/datasets python -m benchmarks.lab.loki_scale run --out /tmp/loki \
        [--dataset mnist --clients 10,100,1000] [--check]
    FEDATTACK_DATA=../shared/datasets python -m benchmarks.lab.loki_scale checks --out /tmp/loki --clients 10,100,1000
    FEDATTACK_DATA=../shared/datasets python -m benchmarks.lab.loki_scale honest --out /tmp/loki --clients 1000 --rounds 3
    python -m benchmarks.lab.loki_scale evidence --out /tmp/loki   # docs/evidence/active-server/loki-scale.json

What is simulated, precisely. Real pairwise masks for m clients are m(m - 1)/2 mask vectors of
the module's size (m x bins x pixels numbers), which does not fit this machine beyond a few dozen
clients. So each client trains the designed model with its own block only: the other blocks'
units have weight 0 and a bias below 0, so they never fire, add exactly 0 to the forward pass
and get no gradient, and the client's trained block is the same as with them there. The block is
then put through what secure aggregation and the server's solve do to it: the fixed-point
encoding of n_k u_k at 2^-24 (`secure-aggregation`'s `fraction_bits`), the other clients' block
entries (the exact 0 and bias they were sent) subtracted, divided by n_k. The masks' cancellation
is exact modular arithmetic and is tested through the real protocol with 100 clients
(tests/active/test_loki.py); `--check` runs the real protocol (real masks, the real `loki`
server, told the simulation's alpha) on the same round and records, per victim, whether the two
shares agree.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from benchmarks.lab.detection import share
from fedattack.attacks.active.servers._front import with_module
from fedattack.attacks.active.servers.imprint import Imprint
from fedattack.attacks.active.servers.loki import BIAS, WEIGHT, Loki, LokiSettings, bin_images
from fedattack.data import load_dataset
from fedattack.data.partition import make_partition
from fedattack.defences import parse_defence
from fedattack.federation.active import Downlinks, parse_active
from fedattack.federation.loop import client_data, sample_clients
from fedattack.federation.spec import FederationSpec
from fedattack.federation.train import active_adversary, build_target
from fedattack.rng import generator
from fedattack.target import ClientContext, Recipe, Target
from fedattack.training import sequential_train

BITS = 24
EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "active-server" / "loki-scale.json"
SETTINGS = {  # the clients a round are the fraction of these
    "mnist": FederationSpec(dataset="mnist", model="mnist-mlp", partition="iid",
                            partition_options={"client_size": 60, "test_fraction": 0.5}, num_clients=1000,
                            rounds=1, recipe=Recipe(epochs=5, batch_size=5, lr=0.04), seed=0),
    "cifar10": FederationSpec(dataset="cifar10", model="cifar-cnn", partition="iid",
                              partition_options={"client_size": 250}, num_clients=200, rounds=1,
                              recipe=Recipe(epochs=1, batch_size=10, lr=0.02), seed=0),
}


class OneBlock(Loki):
    """The `loki` server's design seen one block at a time: a module of that block's units only
    (so the size limit of the whole module, which this never builds, does not apply)."""

    def __init__(self, settings: LokiSettings, target: Target, knowledge: object = None) -> None:
        Imprint.__init__(self, settings, target, knowledge)  # type: ignore[arg-type]

    @property
    def blocks(self) -> int:
        return 1

    def module_for(self, rnd: int, block: int) -> dict[str, torch.Tensor]:
        direction, bias = self.units(rnd, block)
        return {WEIGHT: direction.expand(self.settings.bins, -1).clone(), BIAS: bias}


def fixed_point(trained: torch.Tensor, samples: int) -> torch.Tensor:
    """What the server's solve returns for one client's entries: n_k u_k at 2^-BITS, over n_k."""
    scale = 2.0 ** BITS
    return torch.round(trained.double() * samples * scale) / (samples * scale)


def run(dataset: str, clients: int, out: Path) -> dict[str, object]:
    base = SETTINGS[dataset]
    data = load_dataset(dataset)
    bins = 4 * round(base.partition_options["client_size"] * (1 - base.partition_options.get("test_fraction", 0.2)))
    spec = replace(base, fraction=clients / base.num_clients, active=parse_active(f"loki:rounds=1,bins={bins}"),
                   defences=(parse_defence("secure-aggregation"),))
    target = build_target(spec, data, spec.num_clients)
    single = replace(spec, fraction=1 / spec.num_clients, defences=())  # what the server knows; no whole module
    real = active_adversary(single, build_target(single, data, spec.num_clients), data, spec.num_clients)
    server = OneBlock(real.settings, target, real.knowledge)  # type: ignore[arg-type,union-attr]
    partition = make_partition(spec.partition, data, spec.num_clients, spec.seed, **spec.partition_options)
    sampled = sample_clients(spec, spec.num_clients, 1)
    state = target.init_server(generator(spec.seed, "init"))
    honest = Downlinks(target, {k: target.broadcast(state, k, 1) for k in sampled[:1]})
    server.alpha = server.calibrate(server.module_for(1, 0), honest)
    model = server.front_model(server.alpha, target)
    rows, start, cpu = [], time.time(), time.process_time()
    for block, k in enumerate(sorted(sampled)):
        local = client_data(data, partition, k)
        module = server.module_for(1, block)
        down = with_module(model, target.broadcast(state, k, 1), module)
        ctx = ClientContext(1, k, spec.seed, sequential_train, samples=local.size)
        private = target.init_private(k, down, generator(spec.seed, "private", k))
        up, _ = model.client_update(down, private, local, ctx)
        got_w, got_b = (fixed_point(up[n], local.size) for n in (WEIGHT, BIAS))
        images, _ = bin_images(module[WEIGHT], module[BIAS], got_w, got_b, target)
        public = data.x_test[(k * 37) % max(1, len(data.x_test) - len(images)):][:len(images)]
        rows.append({"client": k, "train": len(local.x_train), "recovered_20": round(share(images, local.x_train), 4),
                     "chance_20": round(share(public, local.x_train), 4)})
    return {"dataset": dataset, "clients": clients, "bins": bins, "alpha": server.alpha, "rows": rows,
            "seconds": round(time.time() - start), "cpu_seconds": round(time.process_time() - cpu)}


def check(dataset: str, clients: int, simulated: dict[str, object]) -> dict[str, object]:
    """The same round through the real protocol (real masks, the real `loki` server, its reading
    of the one sum); every victim's share must equal the simulated one."""
    import dataclasses

    from fedattack.attacks.active.readout import held
    from fedattack.federation.executors import make_executor
    from fedattack.federation.loop import RoundLoop
    from fedattack.wire import Message

    base, data = SETTINGS[dataset], load_dataset(dataset)
    spec = replace(base, fraction=clients / base.num_clients, defences=(parse_defence("secure-aggregation"),),
                   active=parse_active(f"loki:rounds=1,bins={simulated['bins']},alpha={simulated['alpha']}"))
    target = build_target(spec, data, spec.num_clients)
    adversary = active_adversary(spec, target, data, spec.num_clients)
    partition = make_partition(spec.partition, data, spec.num_clients, spec.seed, **spec.partition_options)
    datas = [client_data(data, partition, k) for k in range(spec.num_clients)]
    messages: list[Message] = []
    loop = RoundLoop(spec, target, datas, make_executor("sequential"), messages.append, adversary)
    loop.run_round(loop.start(), 1)
    seen = held(target, messages, 1, 0, data.x_test)
    real = {k: share(adversary.read(dataclasses.replace(seen, victim=k)).images, datas[k].x_train)  # type: ignore[union-attr]
            for k in sorted({m.receiver for m in messages if m.kind == "downlink"})}
    same = sum(abs(real[r["client"]] - r["recovered_20"]) < 1e-3 for r in simulated["rows"])  # type: ignore[attr-defined]
    return {"real_protocol": {"victims": len(real), "same_share": same,
                              "shares": {str(k): round(v, 4) for k, v in real.items()}}}


def cell_of(out: Path, dataset: str, clients: int) -> dict[str, Any]:
    """A cell's round (its bins and alpha): the one `run` wrote into `out`, else the committed one."""
    path = out / f"{dataset}-{clients}.json"
    if path.exists():
        return dict(json.loads(path.read_text()))
    cells = json.loads(EVIDENCE.read_text())["cells"]
    return next(c for c in cells if (c["dataset"], c["clients"]) == (dataset, clients))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["run", "checks", "honest", "evidence"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dataset", default="mnist", choices=sorted(SETTINGS))
    parser.add_argument("--clients", default="10,100,1000")
    parser.add_argument("--check", action="store_true", help="also run the real protocol on each round (small m)")
    parser.add_argument("--rounds", type=int, default=3, help="honest: the honest rounds judged")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.what in ("checks", "honest"):  # every registered check on each cell's round (benchmarks/lab/loki_checks.py)
        from benchmarks.lab import loki_checks

        args.out.mkdir(parents=True, exist_ok=True)
        for clients in (int(c) for c in args.clients.split(",")):
            path = args.out / f"{args.what}-{args.dataset}-{clients}.json"
            if not path.exists():
                got = (loki_checks.attacked(SETTINGS[args.dataset], clients, cell_of(args.out, args.dataset, clients))
                       if args.what == "checks" else loki_checks.honest(SETTINGS[args.dataset], clients, args.rounds))
                path.write_text(json.dumps(got, indent=1))
                print(args.dataset, clients, path.read_text(), flush=True)
        return
    if args.what == "evidence":
        cells = {(c["dataset"], c["clients"]): c for c in json.loads(EVIDENCE.read_text())["cells"]}
        for p in sorted(args.out.glob("*.json")):  # the cells run into DIR replace the committed ones
            if not p.name.startswith(("checks-", "honest-")):
                cell = json.loads(p.read_text())
                cells[(cell["dataset"], cell["clients"])] = cell
        for (dataset, clients), cell in cells.items():
            for kind in ("checks", "honest"):
                judged = args.out / f"{kind}-{dataset}-{clients}.json"
                cell.update(json.loads(judged.read_text()) if judged.exists() else {})
        EVIDENCE.write_text(json.dumps({"render": "benchmarks/lab/detection_tables.py:loki_scale", "command": (
            "python -m benchmarks.lab.loki_scale run|checks|honest --out DIR [--dataset D --clients M]; "
            "python -m benchmarks.lab.loki_scale evidence --out DIR"),
            "cells": sorted(cells.values(), key=lambda c: (c["dataset"] != "mnist", c["clients"]))}, indent=1) + "\n")
        return
    args.out.mkdir(parents=True, exist_ok=True)
    for clients in (int(c) for c in args.clients.split(",")):
        path = args.out / f"{args.dataset}-{clients}.json"
        if not path.exists():
            cell = run(args.dataset, clients, args.out)
            if args.check:
                cell.update(check(args.dataset, clients, cell))
            path.write_text(json.dumps(cell, indent=1))
            print(args.dataset, clients, cell["seconds"], "s", flush=True)


if __name__ == "__main__":
    main()
