"""How fast could WAFFLe's step be? Its matrix products alone, back to back, at 10 clients.

    .venv/bin/python benchmarks/waffle_products.py [--clients 10]

The hand-written step (`targets/waffle/kernel.py`) on the MNIST setting does eight batched
products a step (fc1 = [x, 1] W_a diag(r b) W_b with F = 120, then fc2; forward, backward and
the SGD updates taken straight into the weights), 5.33 MFLOP per client step, the figure
`bench_waffle.py` divides by. Timed here with random tensors of the same shapes and nothing
else, with one and two torch threads, beside `torch.bmm`'s ceiling at FedAvg's shapes
(`bench_mnist.bmm_gflops`): the steps per second the step would reach if its ~85 other
operations (the selection, softmax, ReLU, gathers, views) cost nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mnist import bmm_gflops  # noqa: E402

B, D, F, H, K = 10, 785, 120, 200, 10  # batch, input with its column of ones, factors, hidden, classes


def shapes(c: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    sizes = {"x": (c, B, D), "w_a": (c, D, F), "g": (c, B, F), "w_b": (c, F, H), "act": (c, B, H),
             "w2t": (c, H, K), "b2": (c, 1, K), "grad": (c, B, K), "w2": (c, K, H), "d_h": (c, B, F)}
    return {k: torch.randn(s, generator=gen) for k, s in sizes.items()}


def products(t: dict[str, torch.Tensor]) -> None:
    """One step's products, in the order the step runs them."""
    torch.bmm(t["x"], t["w_a"])                                        # h = [x, 1] W_a
    torch.bmm(t["g"], t["w_b"])                                        # z1 = h diag(r b) W_b
    torch.baddbmm(t["b2"], t["act"], t["w2t"])                         # z2 = relu(z1) W2^T + b2
    torch.bmm(t["grad"], t["w2"])                                      # back through fc2
    t["w2"].baddbmm_(t["grad"].transpose(1, 2), t["act"], alpha=-1e-3)  # fc2's update
    torch.bmm(t["act"], t["w_b"].transpose(1, 2))                      # back through W_b
    t["w_b"].baddbmm_(t["g"].transpose(1, 2), t["act"], alpha=-1e-3)   # W_b's update
    t["w_a"].baddbmm_(t["x"].transpose(1, 2), t["d_h"], alpha=-1e-3)   # W_a's update


def flops(c: int) -> int:
    return 2 * c * B * (2 * D * F + 3 * F * H + 3 * H * K)


def seconds_per_step(t: dict[str, torch.Tensor], repeats: int = 200) -> float:
    for _ in range(50):
        products(t)
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(repeats):
            products(t)
        best = min(best, (time.perf_counter() - started) / repeats)
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clients", type=int, default=10)
    c = p.parse_args().clients
    t = shapes(c)
    print(f"{flops(c) / c / 1e6:.2f} MFLOP per client step")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        s = seconds_per_step(t)
        print(f"{threads} thread(s): {1e3 * s:.3f} ms a step of {c} clients, {c / s:,.0f} client steps/s, "
              f"{flops(c) / s / 1e9:.1f} GFLOP/s", flush=True)
    torch.set_num_threads(2)
    print(f"torch.bmm at FedAvg's shapes, 2 threads: {bmm_gflops(c):.1f} GFLOP/s")


if __name__ == "__main__":
    main()
