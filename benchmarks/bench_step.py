"""One local SGD step of C clients on the MNIST MLP, four ways: does vmap cost anything?

    .venv/bin/python benchmarks/bench_step.py --clients 10 50

- `sequential`: the reference loop's step (functional_call + autograd.grad), once per client;
- `vmap(grad)`: what the batched executor runs, for any target's `local_loss`;
- `bmm+autograd`: the MLP written with torch.baddbmm over stacked weights, autograd backward;
- `bmm manual`: the same with a hand-written backward and in-place update (a lower bound for
  what an MLP-only fast path could reach).
Wall and CPU time per step are printed; CPU time is the steadier number on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fedattack.models import build_model  # noqa: E402

B, LR = 10, 0.04
State = dict[str, torch.Tensor]


def setup(clients: int) -> tuple[torch.nn.Module, State, torch.Tensor, torch.Tensor, torch.Tensor]:
    model = build_model("mnist-mlp", (1, 28, 28), 10)
    params = {n: p.detach().expand(clients, *p.shape).clone() for n, p in model.named_parameters()}
    x = torch.rand(clients, B, 1, 28, 28)
    y = torch.randint(0, 10, (clients, B))
    w = torch.full((clients, B), 1.0 / B)
    return model, params, x, y, w


def variants(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor,
             w: torch.Tensor) -> dict[str, Callable[[State], None]]:
    def loss(p: State, xb: torch.Tensor, yb: torch.Tensor, wb: torch.Tensor) -> torch.Tensor:
        return (wb * F.cross_entropy(functional_call(model, p, (xb,)), yb, reduction="none")).sum()

    step_grads = vmap(grad(loss))

    def sequential(p: State) -> None:
        for c in range(x.shape[0]):
            mine = {k: v[c].requires_grad_(False).clone().requires_grad_(True) for k, v in p.items()}
            g = torch.autograd.grad(loss(mine, x[c], y[c], w[c]), list(mine.values()))
            for (k, v), gk in zip(p.items(), g):
                v[c] = mine[k].detach() - LR * gk

    def vmapped(p: State) -> None:
        g = step_grads(p, x, y, w)
        for k, v in p.items():
            v.sub_(g[k].mul_(LR))

    def bmm_autograd(p: State) -> None:
        q = {k: v.detach().requires_grad_(True) for k, v in p.items()}
        logits = _mlp(q, x.flatten(2))
        out = (w.flatten() * F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none")).sum()
        g = torch.autograd.grad(out, list(q.values()))
        with torch.no_grad():
            for v, gk in zip(p.values(), g):
                v.sub_(gk.mul_(LR))

    def bmm_manual(p: State) -> None:
        xf = x.flatten(2)
        w1, b1, w2, b2 = p["fc1.weight"], p["fc1.bias"], p["fc2.weight"], p["fc2.bias"]
        z = torch.baddbmm(b1.unsqueeze(1), xf, w1.transpose(1, 2))
        h = z.relu()
        logits = torch.baddbmm(b2.unsqueeze(1), h, w2.transpose(1, 2))
        d_out = (logits.softmax(-1) - F.one_hot(y, 10)) * w.unsqueeze(-1)
        d_h = d_out.bmm(w2) * (z > 0)
        w2.baddbmm_(d_out.transpose(1, 2), h, alpha=-LR)
        b2.sub_(d_out.sum(1).mul_(LR))
        w1.baddbmm_(d_h.transpose(1, 2), xf, alpha=-LR)
        b1.sub_(d_h.sum(1).mul_(LR))

    return {"sequential": sequential, "vmap(grad)": vmapped, "bmm+autograd": bmm_autograd,
            "bmm manual": bmm_manual}


def _mlp(p: State, x: torch.Tensor) -> torch.Tensor:
    h = torch.baddbmm(p["fc1.bias"].unsqueeze(1), x, p["fc1.weight"].transpose(1, 2)).relu()
    return torch.baddbmm(p["fc2.bias"].unsqueeze(1), h, p["fc2.weight"].transpose(1, 2))


def time_step(fn: Callable[[State], None], params: State, steps: int) -> tuple[float, float]:
    for _ in range(3):
        fn(params)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        fn(params)
    return (time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, nargs="+", default=[10, 50])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.2f}")
    for c in args.clients:
        model, params, x, y, w = setup(c)
        print(f"\n{c} clients, batch {B}:  {'ms/step wall':>13s} {'ms/step CPU':>12s} {'client-steps/s':>15s}")
        for name, fn in variants(model, x, y, w).items():
            wall, cpu = time_step(fn, {k: v.clone() for k, v in params.items()}, args.steps)
            print(f"  {name:14s} {wall * 1e3:13.2f} {cpu * 1e3:12.2f} {c / wall:15.0f}")


if __name__ == "__main__":
    main()
