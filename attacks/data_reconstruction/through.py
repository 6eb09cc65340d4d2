"""A CNN client's images read off its first dense layer's update, through the convolutions (#36).

Three steps, each batched over candidates (`dense` explains why the dense layer's update is
nearly the span of the N images' features):

1. **Features.** The update's top-N row space stands for the features' span. Features that no
   image lights are zero columns of the update and are left out; per candidate feature p a
   linear program finds the non-negative vector of least sum in the span with f_p = 1 (as
   `unmix` does with pixels), allowed to dip `slack` below zero because the span is only
   nearly the features' (they drift while the convolutions train). Distinct answers are kept.
2. **Images from features.** Each answer is a target: images in [0, 1] whose features at the
   run's midpoint weights ((down + up) / 2: the features the update averages over) point the
   same way (cosine), by Adam from mid grey, the features taken at the weights the run's steps
   saw on average (the downlink for one step). This is better posed than inverting a gradient
   where the features outnumber the pixels: Dimitrov et al.'s CNN gives 3,136 per 28x28 image.
   Behind max pooling it converges less well (the seeds' Fashion-MNIST CNN: about 15 dB from
   exact features); `polish` then continues with the optimiser on the whole update.
3. **Into the span.** Each image is then moved until its features lie in the update's row
   space (the squared share of their norm outside it): a training image is a good basin of that
   objective (from a noisy copy at 18.6 dB it returns to 32 dB), a random start is not, which
   is why step 1 comes first. The residual left ranks the candidates: the N most distinct
   ones of lowest residual are the answer (two images within `SAME_DB` of each other are one).

Model inputs the client does not train (WAFFLe's hidden selection, which shapes the
convolutions' weights and so the features) are held at the strategy's guess, or, for the
adaptive attacker, optimised with the images in steps 2 and 3 (`joint.Extras`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedattack.attacks.data_reconstruction.dense import DenseLayer, Features
from fedattack.attacks.data_reconstruction.image_metrics import psnr_matrix
from fedattack.attacks.data_reconstruction.joint import Extras, Inverted
from fedattack.attacks.data_reconstruction.objectives import State, to_images, total_variation
from fedattack.attacks.data_reconstruction.unmix import distinct, solve_pixels, span_shortfall

DEAD = 1e-6  # a feature column of the update below this share of the largest: no image lights it
FEATURE_SLACK = 0.02  # how far below zero an answer may dip (the span is approximate), at f_p = 1
PROGRAMS_PER_IMAGE = 6  # linear programs per image when `programs` is 0
SAME_DB = 25.0  # two candidates closer than this are the same image


@dataclass(frozen=True)
class ThroughSettings:
    """programs: linear programs (0: `PROGRAMS_PER_IMAGE` per image); slack: below-zero
    allowance (0: `FEATURE_SLACK`); iterations, step_size, tv: Adam steps per image step, its
    rate on the images' sigmoid latent, the total-variation weight."""

    programs: int = 0
    slack: float = 0.0
    iterations: int = 300
    step_size: float = 0.1
    tv: float = 0.0


def feature_span(layer: DenseLayer, n: int) -> tuple[np.ndarray | None, np.ndarray, str]:
    """The update's top-n row space (n, F), the live features, or None and why not."""
    matrix = layer.update.weight.numpy()
    norms = np.linalg.norm(matrix, axis=0)
    live = np.flatnonzero(norms > DEAD * norms.max()) if norms.max() > 0 else np.zeros(0, dtype=np.int64)
    short = span_shortfall(matrix, n, len(live))
    if short:
        return None, live, short.replace("pixels they light", "features they light")
    _, _, vt = np.linalg.svd(matrix, full_matrices=False)
    return vt[:n], live, ""


def feature_answers(span: np.ndarray, live: np.ndarray, n: int, gen: torch.Generator,
                    settings: ThroughSettings) -> list[np.ndarray]:
    """Distinct non-negative vectors of the span, one linear program per tried live feature."""
    count = settings.programs or PROGRAMS_PER_IMAGE * n
    order = torch.randperm(len(live), generator=gen).numpy()
    tried = live[order[:count]]
    answers = solve_pixels(span, tried, None, live, settings.slack or FEATURE_SLACK)
    return distinct(list(answers.values()))


def outside(f: torch.Tensor, span: torch.Tensor) -> torch.Tensor:
    """Per row, the squared share of f's norm outside the span (rows orthonormal)."""
    inside = f @ span.T @ span
    return ((f - inside) ** 2).sum(1) / ((f ** 2).sum(1) + 1e-12)


def images_from_features(features: Features, params: State, extras: Extras, targets: torch.Tensor,
                         span: torch.Tensor, shape: tuple[int, ...],
                         settings: ThroughSettings) -> tuple[torch.Tensor, torch.Tensor, State]:
    """Steps 2 and 3: images (K, *shape) whose features point at `targets`, then lie in the
    span; their final residuals (K,) and the free extras' values."""
    z = torch.zeros(len(targets), *shape, device=targets.device, requires_grad=True)
    free = extras.latents()
    for phase in ("target", "span"):
        optimiser = torch.optim.Adam([z, *free.values()], lr=settings.step_size / (2 if phase == "span" else 1))
        for _ in range(settings.iterations):
            x = to_images(z)
            f = features({**extras.values(free), **params}, x)
            if phase == "target":
                loss = (1 - torch.nn.functional.cosine_similarity(f, targets, dim=1)).sum()
            else:
                loss = outside(f, span).sum()
            loss = loss + settings.tv * total_variation(x)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    with torch.no_grad():
        x = to_images(z)
        found = {k: v.detach() for k, v in extras.values(free).items()}
        residual = outside(features({**found, **params}, x), span)
    return x.detach(), residual, {k: found[k] for k in free}


def most_distinct(images: torch.Tensor, residual: torch.Tensor, n: int) -> torch.Tensor:
    """n images: lowest residual first, skipping any within `SAME_DB` of one already taken;
    black images where fewer than n distinct ones were found."""
    order = torch.argsort(residual).tolist()
    similar = psnr_matrix(images, images) > SAME_DB
    taken: list[int] = []
    for i in order:
        if not any(similar[i, j] for j in taken):
            taken.append(i)
        if len(taken) == n:
            break
    chosen = images[torch.as_tensor(taken, dtype=torch.long, device=images.device)]
    if len(taken) < n:
        chosen = torch.cat([chosen, images.new_zeros(n - len(taken), *images.shape[1:])])
    return chosen


@dataclass(frozen=True)
class Answers:
    """Step 1's output for one update: the span, its feature vectors, or why there are none."""

    weight_key: str
    span: np.ndarray | None
    vectors: list[np.ndarray]
    programs: int
    why: str = ""


def solve_features(layer: DenseLayer, n: int, gen: torch.Generator, settings: ThroughSettings) -> Answers:
    """Step 1 (the linear programs): it depends on the update only, not on any guess."""
    span, live, why = feature_span(layer, n)
    if span is None:
        return Answers(layer.weight_key, None, [], 0, why)
    vectors = feature_answers(span, live, n, gen, settings)
    programs = min(settings.programs or PROGRAMS_PER_IMAGE * n, len(live))
    if not vectors:
        why = f"no non-negative feature vector in the span of {layer.weight_key}'s update"
    return Answers(layer.weight_key, span, vectors, programs, why)


def read_through(answers: Answers, features: Features, params: State, extras: Extras, n: int,
                 shape: tuple[int, ...], settings: ThroughSettings) -> tuple[Inverted | None, str]:
    """Steps 2 and 3 from step 1's answers: the N images, or None and why not."""
    if answers.span is None or not answers.vectors:
        return None, answers.why
    device = next(iter(params.values())).device
    targets = torch.as_tensor(np.stack(answers.vectors), dtype=torch.float32, device=device)
    basis = torch.as_tensor(answers.span, dtype=torch.float32, device=device)
    images, residual, found = images_from_features(features, params, extras, targets, basis, shape, settings)
    chosen = most_distinct(images, residual, n)
    note = (f"{answers.weight_key}'s update through the layers before it: {len(answers.vectors)} distinct "
            f"feature vectors from {answers.programs} programs, inverted; median residual off the span "
            f"{float(residual.median()):.3f}")
    return Inverted(chosen, found, float(residual.sort().values[:n].mean())), note
