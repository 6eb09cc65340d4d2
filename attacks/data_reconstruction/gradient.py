"""Single-step gradient matching (Geiping, Bauermeister, Dröge, Moeller 2020, "Inverting
Gradients"): find images whose gradient at the downlink weights points the way the observed one
does (cosine distance: the step size and the batch-mean scale drop out), with a total-variation
prior, by Adam on box-constrained images.

The adversary knows the weights the gradient was taken at (the downlink), the labels (known or
recovered by `labels`), the number of images and their shape; a one-step update gives the
gradient as (down - up) / lr, and with the cosine distance even lr need not be known.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from fedattack.attacks.data_reconstruction.joint import Extras, Inverted, best_of
from fedattack.attacks.data_reconstruction.objectives import (
    DISTANCES,
    Forward,
    State,
    from_images,
    initial_latent,
    parameter_gradient,
    to_images,
    total_variation,
)
from fedattack.progress import steps


@dataclass(frozen=True)
class MatchSettings:
    """steps: Adam steps per restart; lr: Adam's step on the sigmoid latent of the images
    (decayed x0.1 at 3/8, 5/8 and 7/8 of the run, as Geiping et al.; larger than their 0.1 on
    raw pixels because the latent must reach about -5 for a black pixel); tv: weight of the
    total-variation prior; distance: "cosine" or "l2"; restarts: independent starts, the best
    final loss wins; chunk: the most images whose gradient graph is held at once (None: all;
    `chunked_backward`, the same loss and gradients up to float rounding)."""

    steps: int = 300
    lr: float = 0.3
    tv: float = 1e-4
    distance: str = "cosine"
    restarts: int = 1
    chunk: int | None = None


def gradient_from_update(down: Mapping[str, torch.Tensor], up: Mapping[str, torch.Tensor],
                         lr: float = 1.0) -> State:
    """The gradient of one plain SGD step, p_up = p_down - lr * g (lr = 1: up to scale)."""
    return {k: (down[k] - up[k]) / lr for k in up}


def step_decay(optimiser: torch.optim.Optimizer, steps: int) -> torch.optim.lr_scheduler.MultiStepLR:
    milestones = [steps * 3 // 8, steps * 5 // 8, steps * 7 // 8]
    return torch.optim.lr_scheduler.MultiStepLR(optimiser, milestones=milestones, gamma=0.1)


def matching_loss(forward: Forward, params: State, observed: State, x: torch.Tensor,
                  labels: torch.Tensor, settings: MatchSettings) -> torch.Tensor:
    simulated = parameter_gradient(forward, params, x, labels, list(observed))
    return DISTANCES[settings.distance](simulated, observed) + settings.tv * total_variation(x)


def one_start(forward: Forward, params: State, observed: State, labels: torch.Tensor,
              shape: tuple[int, ...], settings: MatchSettings, gen: torch.Generator,
              extras: Extras, init: torch.Tensor | None = None) -> Inverted:
    z = initial_latent(len(labels), shape, gen, labels.device) if init is None else from_images(init)
    z.requires_grad_(True)
    free = extras.latents()
    optimiser = torch.optim.Adam([z, *free.values()], lr=settings.lr)
    schedule = step_decay(optimiser, settings.steps)
    for _ in steps(range(settings.steps), "iterations"):
        optimiser.zero_grad()
        if settings.chunk is not None and settings.chunk < len(labels):
            chunked_backward(forward, params, extras, free, observed, z, labels, settings)
        else:
            weights = {**extras.values(free), **params}
            loss = matching_loss(forward, weights, observed, to_images(z), labels, settings)
            loss.backward()
        optimiser.step()
        schedule.step()
    with torch.no_grad():
        x, found = to_images(z), {k: v.detach() for k, v in extras.values(free).items()}
    if settings.chunk is not None and settings.chunk < len(labels):
        mean = mean_gradient(forward, {**found, **params}, x, labels, list(observed), settings.chunk)
        final = DISTANCES[settings.distance](mean, observed) + settings.tv * total_variation(x)
    else:
        final = matching_loss(forward, {**found, **params}, observed, x, labels, settings)
    return Inverted(x.detach(), {k: found[k] for k in free}, float(final.detach()))


def chunks(n: int, size: int) -> list[slice]:
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]


def mean_gradient(forward: Forward, params: State, images: torch.Tensor, labels: torch.Tensor, keys: list[str],
                  chunk: int) -> State:
    """The batch-mean loss's gradient over every image, `chunk` images at a time, no graph kept."""
    n = len(labels)
    total: State = {}
    for part in chunks(n, chunk):
        share = (part.stop - part.start) / n
        grads = parameter_gradient(forward, params, images[part], labels[part], keys, create_graph=False)
        total = {k: total.get(k, 0) + share * grads[k].detach() for k in keys}
    return total


def chunked_backward(forward: Forward, params: State, extras: Extras, free: State, observed: State,
                     z: torch.Tensor, labels: torch.Tensor, settings: MatchSettings) -> None:
    """`matching_loss(...).backward()` with the graph of at most `settings.chunk` images held
    at once. The batch-mean gradient is the n_c/N-weighted sum of the chunks' mean gradients, so
    a first pass without a graph gives it and the distance's gradient with respect to it; a
    second pass backpropagates that, chunk by chunk, through each chunk's gradient (and its
    share of the total-variation prior) into the images and the free extras."""
    n, chunk = len(labels), int(settings.chunk or len(labels))
    keys = list(observed)
    held = {k: v.detach() for k, v in extras.values(free).items()}
    with torch.no_grad():
        images = to_images(z)
    total = mean_gradient(forward, {**held, **params}, images, labels, keys, chunk)
    leaf = {k: v.requires_grad_(True) for k, v in total.items()}
    outer = torch.autograd.grad(DISTANCES[settings.distance](leaf, observed), [leaf[k] for k in keys])
    for part in chunks(n, chunk):
        share = (part.stop - part.start) / n
        x = to_images(z[part])
        grads = parameter_gradient(forward, {**extras.values(free), **params}, x, labels[part], keys)
        surrogate = sum((share * g * o).sum() for g, o in zip(grads.values(), outer))
        (surrogate + settings.tv * total_variation(x)).backward()


def invert_gradient_jointly(forward: Forward, params: Mapping[str, torch.Tensor],
                            observed_grad: Mapping[str, torch.Tensor], labels: torch.Tensor,
                            shape: tuple[int, ...], gen: torch.Generator,
                            settings: MatchSettings = MatchSettings(),
                            extras: Extras | None = None, init: torch.Tensor | None = None) -> Inverted:
    """`invert_gradient`, with `extras`: model inputs besides `params` (a hidden selection),
    held fixed or optimised with the images (`joint.Extras`); returns their values too.
    `init`: images to start from instead of noise (a first reading to polish)."""
    if settings.distance not in DISTANCES:
        raise ValueError(f"distance {settings.distance!r} is not one of {sorted(DISTANCES)}")
    fixed = {k: v.detach() for k, v in params.items()}
    observed = {k: v.detach() for k, v in observed_grad.items()}
    return best_of([one_start(forward, fixed, observed, labels, shape, settings, gen, extras or Extras(), init)
                    for _ in range(1 if init is not None else max(1, settings.restarts))])


def invert_gradient(forward: Forward, params: Mapping[str, torch.Tensor],
                    observed_grad: Mapping[str, torch.Tensor], labels: torch.Tensor,
                    shape: tuple[int, ...], gen: torch.Generator,
                    settings: MatchSettings = MatchSettings()) -> torch.Tensor:
    """Images (len(labels), *shape) in [0, 1] whose mean-loss gradient at `params` matches
    `observed_grad` (only its keys are matched: a partly hidden model gives fewer)."""
    return invert_gradient_jointly(forward, params, observed_grad, labels, shape, gen, settings).images
