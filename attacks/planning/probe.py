"""Measuring the attacked model's generic unit costs on this machine, once per evaluation
(`cost.Probe`), and the tools a family measures its own units with (`cost.Units`).

Everything runs on random inputs of the model's shape, never on anyone's data. Every evaluation
measures a few local SGD steps through the evaluation's executor (two sizes, so the fixed cost
of a local run separates from the cost of a step; on an executor that stacks models, also a
stack of `STACK` short runs at once, so what each further model adds to a stacked step is
known: reference models trained together cost that, not a step each) and a forward pass in
large batches. A
family's own units (model inversion's input gradient, gradient matching's double backward,
update inversion's simulated step) are measured by that family, when a planned attack asks,
with `per_image` and `saved_bytes`: the memory a graph holds is counted exactly, as the bytes
of the distinct tensors autograd saves for the backward
(`torch.autograd.graph.saved_tensors_hooks`), at two batch sizes, so what grows per image
separates from what a step holds whatever its batch. Timings take the fastest of a few repeats
(the machine's noise only ever adds), each the fewer of its wall and CPU seconds: the plan is
the time on CPUs free for the evaluation, whatever else the machine runs while it is made.
The same runs' wall clock says how busy the machine is now (`Probe.slowdown`: their fastest
wall seconds over those free-CPU seconds, beside the load average), so the plan can say what to
expect at the present load. A probe runs with the torch threads the evaluation has set, and
records them.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

import torch

from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.membership.shadow import ShadowData, ShadowModels
from fedattack.attacks.planning.cost import Probe
from fedattack.attacks.view import Observation
from fedattack.rng import generator
from fedattack.target import State, Target

REPEATS = 3
LONG_ENOUGH = 0.02  # seconds: a batch is grown until one run takes this long (timer noise is ~0.1 ms)
MOST_IMAGES = 512
TRAINING_IMAGES = 500
STACK = 8  # models in the probe's stacked run (on an executor that stacks them)


class _Clock:
    """The probe's timings summed: free-CPU seconds and wall seconds (`Probe.slowdown`)."""

    free = 0.0
    wall = 0.0


def measure(target: Target, executor: str = "sequential", seed: int = 0) -> Probe:
    """The generic unit costs of `target`'s model (see the module docstring)."""
    _Clock.free = _Clock.wall = 0.0
    params = probe_params(target, seed)
    shape = tuple(target.ctx.input_shape)
    step, job, stacked = _training(target, executor, seed, shape)
    return Probe(params=sum(v.numel() for v in params.values()), step_seconds=step, job_seconds=job,
                 stacked_step_seconds=stacked,
                 forward_seconds=_forward(target, params, shape), input_numel=math.prod(shape),
                 target=target, executor=executor, seed=seed, threads=torch.get_num_threads(),
                 slowdown=max(1.0, _Clock.wall / _Clock.free) if _Clock.free > 0 else 1.0,
                 load=os.getloadavg()[0] / (os.cpu_count() or 1) if hasattr(os, "getloadavg") else None)


def probe_params(target: Target, seed: int) -> State:
    """The model's parameters at initialisation (random, the seed's): what every unit runs on."""
    gen = generator(seed, "probe")
    server = target.init_server(gen)
    return {k: v.detach().float() for k, v in target.deployed(server, target.init_private(0, server, gen)).items()
            if v.is_floating_point()}


def fastest(fn: Callable[[], Any], repeats: int = REPEATS) -> float:
    """The run's time on this machine's CPUs when they are free for it: the fewer of its wall and
    its CPU seconds (a loaded machine stretches the wall time, several threads the CPU time),
    the least over a few runs."""
    best = wall = float("inf")
    for _ in range(repeats):
        started, cpu = time.perf_counter(), time.process_time()
        fn()
        took = time.perf_counter() - started
        best, wall = min(best, took, time.process_time() - cpu), min(wall, took)
    _Clock.free, _Clock.wall = _Clock.free + best, _Clock.wall + wall
    return best


def _training(target: Target, executor: str, seed: int,
              shape: tuple[int, ...]) -> tuple[float, float, float | None]:
    """(seconds per local step, seconds per local run besides its steps, seconds a step adds per
    model in a stack or None), from two run lengths of one model and, on an executor that
    stacks models (any but the sequential one), one run of `STACK` models at once."""
    recipe = target.recipe
    # the longer run on a few MB of images: a step's batch gathered from a client's thousands of
    # images misses the caches that a few dozen fit in (1.7x the time per step on mnist-mlp)
    sizes = (recipe.batch_size, max(4 * recipe.batch_size, min(TRAINING_IMAGES, 2**20 // math.prod(shape))))
    trainer = ShadowModels(target, executor, seed, 0)

    def run(data: ShadowData) -> Callable[[], object]:  # the data made once, outside the timing
        return lambda: trainer.train(Observation(), [data], False)

    times = [fastest(run(_data(seed, shape, n, target)), repeats=2) for n in sizes]
    steps = [recipe.epochs * math.ceil(n / recipe.batch_size) for n in sizes]
    per_step = max(1e-7, (times[1] - times[0]) / (steps[1] - steps[0]))
    job = max(0.0, times[0] - steps[0] * per_step)
    if executor == "sequential":
        return per_step, job, None
    # a stack of the longer runs: what each further model adds to a step (on short runs, whose
    # data sit in the caches, it measured a third of what 16 models of 2,400 images pay)
    n = sizes[1]
    datas = [_data(seed, shape, n, target, j) for j in range(STACK)]
    stacked = fastest(lambda: trainer.train(Observation(), datas, False), repeats=1)
    per_model = ((stacked - STACK * job) / steps[1] - per_step) / (STACK - 1)
    return per_step, job, min(per_step, max(1e-8, per_model))


def _data(seed: int, shape: tuple[int, ...], n: int, target: Target, j: int = 0) -> ShadowData:
    """n random images of the model's shape, with every class in turn: a probe's training data."""
    x = torch.rand((n, *shape), generator=generator(seed, "probe-data", n, j))
    y = torch.arange(n) % target.num_classes
    return ShadowData(Samples(x, y), Samples(x[:0], y[:0]))


def _forward(target: Target, params: State, shape: tuple[int, ...]) -> float:
    x = torch.rand((256, *shape), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        return fastest(lambda: target.forward(params, x)) / len(x)


def input_grad(target: Target, params: State, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    """A forward and a backward to the inputs with a graph (model inversion's step, gradient
    matching's first pass): a run for `per_image`."""
    def run() -> None:
        xg = x.clone().requires_grad_(True)
        torch.autograd.grad(torch.nn.functional.cross_entropy(target.forward(params, xg), y), xg)
    return run


def per_image(make: Callable[[torch.Tensor, torch.Tensor], Callable[[], None]], shape: tuple[int, ...],
               classes: int) -> tuple[float, float, int, int]:
    """(seconds per image, seconds whatever the batch, graph bytes per image, graph bytes
    whatever the batch) of `make`'s
    computation, from two batch sizes n and 4n, n grown until a run takes `LONG_ENOUGH` (on a
    few images the fixed cost hides what each image adds)."""

    def on(n: int) -> Callable[[], None]:
        x = torch.rand((n, *shape), generator=torch.Generator().manual_seed(n))
        return make(x, torch.arange(n) % classes)

    n = 4
    while n < MOST_IMAGES // 4 and fastest(on(n)) < LONG_ENOUGH:
        n *= 2
    sizes = (n, 4 * n)
    runs = [on(k) for k in sizes]
    seconds = [fastest(run) for run in runs]
    held = [saved_bytes(run) for run in runs]
    per_s = max(1e-8, (seconds[1] - seconds[0]) / (sizes[1] - sizes[0]))
    per_b = max(0, (held[1] - held[0]) // (sizes[1] - sizes[0]))
    return per_s, max(0.0, seconds[0] - sizes[0] * per_s), per_b, max(0, held[0] - sizes[0] * per_b)


def saved_bytes(run: Callable[[], None]) -> int:
    """Bytes of the distinct tensors autograd saves for backward while `run` runs."""
    seen: dict[tuple[int, int], int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        seen[(storage.data_ptr(), storage.nbytes())] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        run()
    return sum(seen.values())
