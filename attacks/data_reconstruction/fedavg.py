"""Multi-step update inversion for FedAvg/FedProx clients (Dimitrov, Balunović, Konstantinov,
Vechev 2022, "Data Leakage in Federated Averaging").

One unknown copy of the images per local epoch goes through a differentiable simulation of the
client's run (`local_run`); the simulated update is matched to the recorded one (cosine or L2),
with a total-variation prior on every copy and an epoch prior that asks the copies to be the same
*set* of images, whatever their order: each epoch's copy is aligned to the first by a linear
assignment among images of the same label (recomputed as the copies move, no gradient through
it) and pulled towards the aligned mean, which is also the answer. "moments" instead ties the
copies' per-pixel mean and variance over the set (order-invariant too, cheaper, weaker).

The adversary knows the downlink and the uplink, the recipe (E, B, lr, mu), the number of
images and their labels (given, or counted by `labels.estimate_label_counts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from fedattack.attacks.data_reconstruction.gradient import step_decay
from fedattack.attacks.data_reconstruction.image_metrics import assignment
from fedattack.attacks.data_reconstruction.joint import Extras, Inverted, best_of
from fedattack.attacks.data_reconstruction.local_run import (
    LocalRecipe,
    epoch_labels,
    simulate_local_run,
)
from fedattack.attacks.data_reconstruction.objectives import (
    DISTANCES,
    Forward,
    State,
    from_images,
    initial_latent,
    to_images,
    total_variation,
)
from fedattack.progress import steps

PRIORS = ("matching", "moments", "none")


@dataclass(frozen=True)
class UpdateSettings:
    """steps, lr, tv, distance, restarts: as `gradient.MatchSettings`; epoch_prior: weight of the
    epoch prior; prior: "matching", "moments" or "none"; realign_every: steps between two
    recomputations of the epoch alignment."""

    steps: int = 300
    lr: float = 0.3
    tv: float = 1e-4
    distance: str = "cosine"
    restarts: int = 1
    epoch_prior: float = 0.1
    prior: str = "matching"
    realign_every: int = 10


def label_classes(labels: torch.Tensor) -> torch.Tensor:
    """Hard classes of per-epoch labels (E, N) or soft ones (E, N, C)."""
    return labels.argmax(-1) if labels.is_floating_point() else labels


def align(copies: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
    """Per epoch, the permutation (E, N) putting its copy in the first epoch's order: a linear
    assignment on squared distance, forbidden between different labels."""
    flat = copies.detach().flatten(2)
    orders = [torch.arange(flat.shape[1])]
    for e in range(1, flat.shape[0]):
        cost = torch.cdist(flat[0].double(), flat[e].double()) ** 2
        cost = cost + 1e6 * (classes[0][:, None] != classes[e][None, :])
        cost = torch.nan_to_num(cost, nan=1e12, posinf=1e12)  # an overflowed copy: any order will do
        _, cols = assignment(cost.cpu().numpy(), maximize=False)
        orders.append(torch.as_tensor(cols, dtype=torch.long))
    return torch.stack(orders).to(copies.device)


def aligned(copies: torch.Tensor, orders: torch.Tensor) -> torch.Tensor:
    return torch.stack([copies[e, orders[e]] for e in range(copies.shape[0])])


def epoch_prior(copies: torch.Tensor, orders: torch.Tensor, kind: str) -> torch.Tensor:
    """How far the epoch copies are from being one set of images (mean squared, per pixel)."""
    if kind == "matching":
        lined = aligned(copies, orders)
        return ((lined - lined.mean(0, keepdim=True)) ** 2).mean()
    if kind == "moments":
        mean, var = copies.mean(1), copies.var(1, unbiased=False)
        return ((mean - mean.mean(0)) ** 2).mean() + ((var - var.mean(0)) ** 2).mean()
    return copies.new_zeros(())


def update_loss(forward: Forward, down: State, observed: State, copies: torch.Tensor,
                labels: torch.Tensor, orders: torch.Tensor, recipe: LocalRecipe,
                settings: UpdateSettings, held: State | None = None) -> torch.Tensor:
    after = simulate_local_run(forward, down, copies, labels, recipe, held)
    simulated = {k: after[k] - down[k] for k in observed}
    tv = total_variation(copies.flatten(0, 1))
    prior = epoch_prior(copies, orders, settings.prior)
    return DISTANCES[settings.distance](simulated, observed) + settings.tv * tv + settings.epoch_prior * prior


def one_start(forward: Forward, down: State, observed: State, labels: torch.Tensor,
              shape: tuple[int, ...], recipe: LocalRecipe, settings: UpdateSettings,
              gen: torch.Generator, extras: Extras, init: torch.Tensor | None = None) -> Inverted:
    n = labels.shape[-1] if not labels.is_floating_point() else labels.shape[-2]
    classes = label_classes(labels)
    if init is None:
        z = initial_latent(recipe.epochs * n, shape, gen, labels.device).view(recipe.epochs, n, *shape)
    else:  # every epoch's copy starts at the given images (a first reading to polish)
        z = from_images(init).to(labels.device).expand(recipe.epochs, *init.shape).clone()
    z.requires_grad_(True)
    free = extras.latents()
    optimiser = torch.optim.Adam([z, *free.values()], lr=settings.lr)
    schedule = step_decay(optimiser, settings.steps)
    orders = torch.arange(n, device=labels.device).expand(recipe.epochs, n)
    for step in steps(range(settings.steps), "iterations (each a simulated local run)"):
        if settings.prior == "matching" and step % settings.realign_every == 0:
            orders = align(to_images(z), classes)
        optimiser.zero_grad()
        loss = update_loss(forward, down, observed, to_images(z), labels, orders, recipe, settings,
                           extras.values(free))
        if not torch.isfinite(loss):
            break  # the simulated run overflowed: keep the last finite images, not NaN ones
        loss.backward()
        previous = z.detach().clone()
        optimiser.step()
        if not torch.isfinite(z).all():
            with torch.no_grad():
                z.copy_(previous)
            break
        schedule.step()
    copies = to_images(z).detach()
    found = {k: v.detach() for k, v in extras.values(free).items()}
    orders = align(copies, classes)
    final = update_loss(forward, down, observed, copies, labels, orders, recipe, settings, found)
    return Inverted(aligned(copies, orders).mean(0), {k: found[k] for k in free}, float(final.detach()))


def invert_update_jointly(forward: Forward, down: Mapping[str, torch.Tensor],
                          up: Mapping[str, torch.Tensor], labels: torch.Tensor, shape: tuple[int, ...],
                          recipe: LocalRecipe, gen: torch.Generator,
                          settings: UpdateSettings = UpdateSettings(), extras: Extras | None = None,
                          init: torch.Tensor | None = None) -> Inverted:
    """`invert_update`, with `extras`: model inputs the simulated client does not train (a
    hidden selection), held fixed or optimised with the images (`joint.Extras`); `init`: images
    (N, *shape) to start every restart from instead of noise (a first reading to polish)."""
    if settings.distance not in DISTANCES or settings.prior not in PRIORS:
        raise ValueError(f"distance must be one of {sorted(DISTANCES)}, prior one of {PRIORS}")
    fixed = {k: v.detach() for k, v in down.items()}
    observed = {k: (up[k] - down[k]).detach() for k in up}
    per_epoch, held = epoch_labels(labels, recipe.epochs), extras or Extras()
    return best_of([one_start(forward, fixed, observed, per_epoch, shape, recipe, settings, gen, held, init)
                    for _ in range(1 if init is not None else max(1, settings.restarts))])


def invert_update(forward: Forward, down: Mapping[str, torch.Tensor], up: Mapping[str, torch.Tensor],
                  labels: torch.Tensor, shape: tuple[int, ...], recipe: LocalRecipe,
                  gen: torch.Generator, settings: UpdateSettings = UpdateSettings()) -> torch.Tensor:
    """The client's images (N, *shape) in [0, 1], from its downlink and uplink weights.

    `labels`: (N,) classes, the same arrangement in every epoch, or (E, N) one per epoch; soft
    (N, C) rows are accepted too. Only the keys of `up` are matched (a hidden part is not)."""
    return invert_update_jointly(forward, down, up, labels, shape, recipe, gen, settings).images
