"""Where a 10-client WAFFLe step's time goes: the whole step against its parts, in one run.

    .venv/bin/python benchmarks/waffle_step_parts.py --data-root ../shared/datasets [--clients 10]

The whole step is `IBPRun.step` timed inside the real round loop (the WAFFLe paper's MNIST
setting, literal recipe, batched executor, rounds 2-6, best round); its parts are timed alone at
the same shapes: the eight batched products (`waffle_products.py`'s, random tensors) and the
factor selection with its KL and backward (`SelectionStep` on one layer of F = 120). What is
left, the step less both, is the ~25 other operations and the Python between them, and also
whatever the products lose in the loop to operands that left the caches between steps (alone,
they run back to back on the same tensors): so "the rest" is an upper bound on the small
operations' share. Each part is measured with torch's two threads and with one. Proportions,
not targets: this machine's timings swing between runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import spec_for  # noqa: E402
from waffle_compile_selection import F as FACTORS  # noqa: E402
from waffle_compile_selection import inputs  # noqa: E402
from waffle_products import seconds_per_step, shapes  # noqa: E402

import fedattack.targets.waffle.kernel as ibp_fast  # noqa: E402
from fedattack.data import load_dataset  # noqa: E402
from fedattack.data.partition import make_partition  # noqa: E402
from fedattack.federation.executors import make_executor  # noqa: E402
from fedattack.federation.loop import RoundLoop, client_data  # noqa: E402
from fedattack.federation.train import build_target  # noqa: E402
from fedattack.targets.waffle.selection import LayerPrior, SelectionStep  # noqa: E402


def step_in_loop(clients: int, data_root: str | None, rounds: int = 5) -> float:
    """Seconds per `IBPRun.step` of a whole stack, best round of `rounds` after a warm-up."""
    spec = spec_for({"method": "waffle-ibp", "clients": clients, "executor": "batched"}, rounds=rounds + 1)
    dataset = load_dataset("mnist", data_root)
    partition = make_partition("shards", dataset.y_train.numpy(), 100, spec.seed, "mnist")
    target = build_target(spec, dataset, partition.num_clients)
    datas = [client_data(dataset, partition, k) for k in range(partition.num_clients)]
    loop = RoundLoop(spec, target, datas, make_executor("batched", "cpu"), lambda message: None)
    spent = {"seconds": 0.0, "steps": 0}
    plain_step = ibp_fast.IBPRun.step

    def timed(self: ibp_fast.IBPRun, s: int, a: int) -> None:
        started = time.perf_counter()
        plain_step(self, s, a)
        if a == clients:  # whole stacks only: a prefix (clients with fewer steps) is a smaller step
            spent["seconds"] += time.perf_counter() - started
            spent["steps"] += 1

    ibp_fast.IBPRun.step = timed  # type: ignore[method-assign]
    try:
        state = loop.start()
        loop.run_round(state, 1)
        best = float("inf")
        for rnd in range(2, rounds + 2):
            spent.update(seconds=0.0, steps=0)
            loop.run_round(state, rnd)
            best = min(best, spent["seconds"] / max(spent["steps"], 1))
        return best
    finally:
        ibp_fast.IBPRun.step = plain_step  # type: ignore[method-assign]


def seconds_per_call(fn: Callable[[], object], calls: int = 2000, repeats: int = 3) -> float:
    for _ in range(100):
        fn()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - started) / calls)
    return best


def parts(clients: int) -> dict[str, float]:
    """The products and the selection alone, seconds a step."""
    tensors = shapes(clients)
    sel, logistic, log_1mu_v, k, g_b = inputs(clients)
    prior = LayerPrior.of(5.0, 1.0, "concrete", 0.0, torch.zeros(clients, FACTORS))
    tau = torch.tensor(2 / 3)
    out = torch.empty_like(sel)

    def selection() -> None:
        SelectionStep(sel, logistic, log_1mu_v, tau, k, prior, None).grads(g_b, out)

    return {"products": seconds_per_step(tensors), "selection": seconds_per_call(selection)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--data-root", default=os.environ.get("FEDATTACK_DATA"))
    args = p.parse_args()
    c = args.clients
    print(f"torch {torch.__version__}, {os.cpu_count()} cores; load {os.getloadavg()[0]:.2f}; {c} clients a stack")
    print("| threads | whole step (ms) | products alone (ms) | selection alone (ms) | the rest (ms) |")
    print("| --- | --- | --- | --- | --- |")
    for threads in (2, 1):
        torch.set_num_threads(threads)
        whole = step_in_loop(c, args.data_root)
        alone = parts(c)
        rest = whole - alone["products"] - alone["selection"]
        shares = {k: f"{1e3 * v:.3f} ({100 * v / whole:.0f}%)" for k, v in alone.items()}
        print(f"| {threads} | {1e3 * whole:.3f} | {shares['products']} | {shares['selection']} | "
              f"{1e3 * rest:.3f} ({100 * rest / whole:.0f}%) |", flush=True)
    print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
