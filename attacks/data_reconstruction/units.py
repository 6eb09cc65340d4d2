"""The unit costs only update and gradient inversion need, measured by this family when one of
its attacks is planned (`planning.cost.Units`; a membership audit never measures them).

`MatchingUnits`: gradient matching's step per image, the parameter gradient kept
differentiable and a backward through it, and what that graph holds (per image, and whatever
the batch); and a plain forward and backward per image (a first pass without a graph).
`SimulationUnits`: one step of update inversion's simulated local run at the recipe's batch
size, its share of the outer backward included, and what its graph holds until that backward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from fedattack.attacks.data_reconstruction.local_run import LocalRecipe, simulate_local_run
from fedattack.attacks.data_reconstruction.objectives import cosine_distance, parameter_gradient
from fedattack.attacks.planning.cost import Units
from fedattack.attacks.planning.probe import fastest, input_grad, per_image, probe_params, saved_bytes
from fedattack.target import State, Target


@dataclass(frozen=True)
class MatchingUnits(Units):
    """Seconds and bytes per image of gradient matching (see the module docstring)."""

    grad_seconds: float
    second_seconds: float
    second_fixed_seconds: float
    second_bytes: int
    second_fixed_bytes: int

    @classmethod
    def measure(cls, target: Target, executor: str, seed: int) -> MatchingUnits:
        params, shape = probe_params(target, seed), tuple(target.ctx.input_shape)
        grad_s, _, _, _ = per_image(lambda x, y: input_grad(target, params, x, y), shape, target.num_classes)
        second_s, second_fixed_s, second_b, fixed_b = per_image(lambda x, y: double(target, params, x, y), shape,
                                                                target.num_classes)
        return cls(grad_s, second_s, second_fixed_s, second_b, fixed_b)


@dataclass(frozen=True)
class SimulationUnits(Units):
    """Seconds and graph bytes per step of a simulated local run (see the module docstring)."""

    sim_step_seconds: float
    sim_step_bytes: int

    @classmethod
    def measure(cls, target: Target, executor: str, seed: int) -> SimulationUnits:
        return cls(*simulated_step(target, probe_params(target, seed), tuple(target.ctx.input_shape)))


def double(target: Target, params: State, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    """Gradient matching's step: the parameter gradient with its graph, then a backward through it."""
    observed = {k: torch.randn_like(v) for k, v in params.items()}

    def run() -> None:
        xg = x.clone().requires_grad_(True)
        grads = parameter_gradient(target.forward, params, xg, y, list(params))
        torch.autograd.grad(cosine_distance(grads, observed), xg)
    return run


def simulated_step(target: Target, params: State, shape: tuple[int, ...]) -> tuple[float, int]:
    """(seconds, graph bytes) per step of update inversion's simulated local run at the
    recipe's batch size, its outer backward included, from runs of 2 and 6 steps."""
    b = target.recipe.batch_size
    observed = {k: torch.randn_like(v) for k, v in params.items()}
    out = []
    for steps in (2, 6):
        copies = torch.rand((1, steps * b, *shape), generator=torch.Generator().manual_seed(steps))
        copies.requires_grad_(True)
        labels = torch.arange(steps * b) % target.num_classes
        recipe = LocalRecipe(1, b, target.recipe.lr)

        def run(c: torch.Tensor = copies, y: torch.Tensor = labels, r: LocalRecipe = recipe) -> None:
            after = simulate_local_run(target.forward, params, c, y, r)
            loss = cosine_distance({k: after[k] - params[k] for k in observed}, observed)
            torch.autograd.grad(loss, c)
        out.append((fastest(run), saved_bytes(run)))
    (t2, b2), (t6, b6) = out
    return max(1e-7, (t6 - t2) / 4), max(0, (b6 - b2) // 4)


