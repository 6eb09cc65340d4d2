"""Would `torch.compile` pay for WAFFLe's selection? Eager against compiled, one step's worth.

    .venv/bin/python benchmarks/waffle_compile_selection.py [--clients 10]

The hand-written step's factor selection (`fedattack.models.ibp_grad.SelectionStep`: the relaxed
Bernoulli and Kumaraswamy draws, the stick-breaking prior, the KL terms and their backward) is
~60 small operations on (clients, F) tensors. Here it runs for the MNIST setting's fc1 (F = 120,
literal recipe) on one torch thread, eagerly and through `torch.compile` (inductor, static
shapes), timing the compile (cold the first time on a machine, then from torch's cache) and the
microseconds per step, and checking the two agree.
"""

from __future__ import annotations

import argparse
import time

import torch

from fedattack.targets.waffle.selection import LayerPrior, SelectionStep

F = 120


def inputs(c: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(3, c, F, generator=gen) * 0.5, torch.randn(c, F, generator=gen),
            -torch.rand(c, F, generator=gen), torch.full((c, 1), 1e-3), torch.randn(c, F, generator=gen))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clients", type=int, default=10)
    c = p.parse_args().clients
    torch.set_num_threads(1)
    prior = LayerPrior.of(5.0, 1.0, "concrete", 0.0, torch.zeros(c, F))

    def selection(sel: torch.Tensor, logistic: torch.Tensor, log_1mu_v: torch.Tensor, k: torch.Tensor,
                  g_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        step = SelectionStep(sel, logistic, log_1mu_v, 2 / 3, k, prior, None)
        out = torch.empty_like(sel)
        step.grads(g_b, out)
        return step.b, out

    args = inputs(c)

    def micros(fn, n: int = 2000) -> float:  # type: ignore[no-untyped-def]
        for _ in range(50):
            fn(*args)
        started = time.perf_counter()
        for _ in range(n):
            fn(*args)
        return (time.perf_counter() - started) / n * 1e6

    eager = micros(selection)
    started = time.perf_counter()
    compiled = torch.compile(selection, dynamic=False)
    b, grads = compiled(*args)
    compile_s = time.perf_counter() - started
    b0, grads0 = selection(*args)
    print(f"{c} clients, F = {F}: eager {eager:.1f} us a step; compile {compile_s:.1f} s; "
          f"compiled {micros(compiled):.1f} us a step; largest difference b {float((b - b0).abs().max()):.1e}, "
          f"gradients {float((grads - grads0).abs().max()):.1e}")


if __name__ == "__main__":
    main()
