"""Images read off the first fully connected layer's update, whatever the local run was.

A fully connected first layer sees the (normalised) pixels, so every SGD step adds
sum_i d_i x_i^T to its weight: after any number of epochs, batches and shuffles the update is
still A X^T, with one row of X per training image (the sum over steps only changes A). Its row
space, plus the constant image (a per-channel affine normalisation shifts the images by a
constant), is exactly the span of the N images: nothing about the number of epochs hides it
(Dimitrov et al. 2022 simulate the run instead; Kariyappa et al. 2023 unmix a single gradient's
layer by ICA, which separates poorly here: digits overlap, so they are far from independent).
The pixels that no image of the client lights all feed the layer the same normalised black, so
their columns of the update are equal (`dark_pixels`); pinning them at zero takes the constant
image, and the inverted images 1 - x it brings, out of the span (`without_dark`).

Images are non-negative, and an image with a pixel that no other image of the set lights is an
extreme ray of the cone {x in span : x >= 0}. So, per candidate pixel p, a linear program finds
the non-negative vector of least total brightness in the span with x_p = 1; when p is private
to one image that vector is that image (scaled by 1/x_p; rescaled to a maximum of 1 here, which
is exact for images whose brightest pixel is white). More generally the answer is always an
extreme ray of that cone; a training image is one whenever no other non-negative vector of the
span lives inside its lit pixels, which many images without a private pixel still satisfy.

Which answers are training images? Stored images have integer levels, and the bias update
fixes each image's scale (`levels`): answers with integer levels at that scale come first, then
the nearest to integer levels (rank "levels"; without a bias on the wire the levels are tested
up to scale and the rest ranked by sparsity, rank "quantised"), each returned at that scale.
Peeling: the pixels whose answer was not certified are solved again with the certified images'
pixels made dearer, so that the least bright answer leaves the images already found and
reaches an image that shares pixels with them (off by default: on MNIST it certified no
further image).

Needs N below the layer's width (else the span is everything) and a first layer that is fully
connected on the pixels (a convolution's update is not A X^T over whole images); the attack
falls back to its optimiser otherwise and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from fedattack.attacks.data_reconstruction.image_metrics import assignment
from fedattack.attacks.data_reconstruction.levels import ZERO, LevelJudge, image_functional, pixel_normalisation
from fedattack.attacks.data_reconstruction.objectives import Forward, State
from fedattack.progress import steps

SAME = 0.98  # cosine above which two solutions are the same image
RANK_TOL = 1e-5  # singular values below this share of the largest are float32 noise, not images
SAME_COLUMN = 1e-4  # columns of the update closer than this (relative) belong to equally lit pixels
PEEL_WEIGHT = 10.0  # how much dearer a certified image's pixels are in a peeling round


@dataclass(frozen=True)
class FirstLayer:
    """A fully connected first layer's update on the wire: weight (U, P), bias (U,) or None."""

    weight: torch.Tensor
    bias: torch.Tensor | None


def first_layer_update(start: State, after: State, shape: tuple[int, ...]) -> FirstLayer | None:
    """The update of the first matched weight that multiplies all P pixels, or None: an (out, P)
    linear weight (its bias `<name>bias` beside `<name>weight`), or a (P [+ 1 bias row], F) one
    that multiplies [x, 1] from the left (WAFFLe's factorised W_a, whose update is
    sum_i [x_i; 1] g_i^T: the same span, and its last row is the bias's update)."""
    pixels = math.prod(shape)
    for key, value in after.items():
        if value.dim() != 2 or key not in start:
            continue
        delta = (value - start[key]).detach().double().cpu()
        if value.shape[1] == pixels:
            bias_key = key[:-len("weight")] + "bias" if key.endswith("weight") else ""
            bias = after.get(bias_key)
            found = None if bias is None or bias_key not in start else (bias - start[bias_key]).detach().double().cpu()
            return FirstLayer(delta, found)
        if value.shape[0] in (pixels, pixels + 1):
            return FirstLayer(delta[:pixels].T, delta[pixels] if value.shape[0] > pixels else None)
    return None


def span_rank(update: np.ndarray) -> int:
    """Directions the update spans above float32's noise (`RANK_TOL` of its largest)."""
    s = np.linalg.svd(update, compute_uv=False)
    return int((s > RANK_TOL * s[0]).sum()) if s.size and s[0] > 0 else 0


def span_shortfall(update: np.ndarray, n: int, lit: int) -> str:
    """Why n images cannot be read off this update's span, or "" when they can: they light no
    more pixels than there are images (their span is every image there), or the update spans
    fewer directions than there are images (one round of a layer narrower than N: more rounds)."""
    if n >= lit:
        return f"{n} images span all {lit} pixels they light: every image is in their span, none stands out"
    rank = span_rank(update)
    if rank < n:
        return (f"the update spans {rank} directions, fewer than the {n} images (a first layer of "
                f"{update.shape[0]} rows: use more rounds, --set rounds=K or 0 for all)")
    return ""


def span_basis(update: np.ndarray, n: int) -> np.ndarray:
    """An orthonormal basis (n + 1, P) of the update's top-n row space and the constant image."""
    _, _, vt = np.linalg.svd(update, full_matrices=False)
    constant = np.ones((1, update.shape[1])) / math.sqrt(update.shape[1])
    q, _ = np.linalg.qr(np.vstack([vt[:n], constant]).T)
    return q.T


def dark_pixels(update: np.ndarray) -> np.ndarray:
    """Pixels dark in every one of the client's images: their columns of the update are equal
    (each is D times the one normalised value of black), so the largest group of equal columns
    is them (empty when no two columns are equal)."""
    columns = torch.as_tensor(update.T)
    tol = SAME_COLUMN * float(columns.norm(dim=1).median())
    near = (torch.cdist(columns, columns) <= tol).numpy()
    group = near[near.sum(1).argmax()]
    return group if group.sum() >= 2 else np.zeros(update.shape[1], dtype=bool)


def without_dark(basis: np.ndarray, dark: np.ndarray) -> np.ndarray:
    """An orthonormal basis of the span's vectors that are zero on the dark pixels: the images'
    own span (the constant image, and every inverted image 1 - x it brings, drop out). Every
    vector of the span is the same on all dark pixels (up to float noise), so this is the one
    constraint that their mean is zero."""
    if not dark.any():
        return basis
    on_dark = basis[:, dark].mean(1)
    _, _, vt = np.linalg.svd(on_dark[None], full_matrices=True)
    q, _ = np.linalg.qr((vt[1:] @ basis).T)
    return q.T


def lightest_with(basis: np.ndarray, pixel: int, weights: np.ndarray | None = None,
                  rows: np.ndarray | None = None, slack: float = 0.0) -> np.ndarray | None:
    """The non-negative vector of the span with x[pixel] = 1 and the least (weighted) sum,
    scaled to max 1; non-negativity is imposed on `rows` (default every pixel: the dark ones,
    zero throughout the span, need no constraint), down to -slack: the span read off a float32
    update is only nearly the images' span, and an image's exact zeros may be just outside it."""
    from scipy.optimize import linprog  # deferred: discovery stays light

    k = basis.shape[0]
    cost = basis.sum(1) if weights is None else basis @ weights
    bound = basis if rows is None else basis[:, rows]
    result = linprog(c=cost, A_ub=-bound.T, b_ub=np.full(bound.shape[1], slack), A_eq=basis[:, pixel][None],
                     b_eq=[1.0], bounds=[(None, None)] * k, method="highs")
    if result.status != 0:
        return None
    x = np.clip(result.x @ basis, 0.0, None)
    return x / x.max() if x.max() > 0 else None


def distinct(candidates: list[np.ndarray]) -> list[np.ndarray]:
    kept: list[np.ndarray] = []
    for x in candidates:
        if all(float(x @ y) / (np.linalg.norm(x) * np.linalg.norm(y)) < SAME for y in kept):
            kept.append(x)
    return kept


@dataclass(frozen=True)
class Search:
    """programs: candidate pixels (0: every lit one). peel: rounds that re-solve the pixels whose
    answer was not certified with the certified images' pixels made `PEEL_WEIGHT` times dearer
    (the least-bright answer then avoids them). rank: how answers are judged (`LevelJudge`:
    "levels", "quantised", "sparsity"); levels: the images' integer levels (255: 8-bit).
    slack: how far below zero an answer's pixels may go (the noise of a float32 update's span)."""

    programs: int = 0
    peel: int = 0
    rank: str = "levels"
    slack: float = 0.0
    levels: int = 255


def solve_pixels(basis: np.ndarray, pixels: np.ndarray, weights: np.ndarray | None,
                 rows: np.ndarray, slack: float) -> dict[int, np.ndarray]:
    """One linear program per pixel, each a step of the evaluation's progress (hundreds of programs)."""
    return {int(p): x for p in steps(pixels, f"linear programs ({basis.shape[0]} variables)")
            if (x := lightest_with(basis, int(p), weights, rows, slack)) is not None}


def count_certified(answers: dict[int, np.ndarray], judge: LevelJudge) -> int:
    return len(distinct([x for x in answers.values() if judge.certified(x)]))


def candidates(basis: np.ndarray, tried: np.ndarray, rows: np.ndarray, search: Search,
               judge: LevelJudge) -> tuple[list[np.ndarray], list[int]]:
    """Distinct answers, certified ones first, and the distinct certified count after each round:
    one round over the pixels, then `peel` rounds over those whose answer was not certified,
    steering away from the images certified so far."""
    answers = solve_pixels(basis, tried, None, rows, search.slack)
    counts = [count_certified(answers, judge)]
    for _ in range(search.peel):
        found = [x for x in answers.values() if judge.certified(x)]
        pending = np.array([p for p, x in answers.items() if not judge.certified(x)])
        if not found or len(pending) == 0:
            break
        weights: np.ndarray = 1.0 + PEEL_WEIGHT * (np.stack(found) > ZERO).any(0).astype(float)
        answers.update({p: x for p, x in solve_pixels(basis, pending, weights, rows, search.slack).items()
                        if judge.certified(x)})
        counts.append(count_certified(answers, judge))
    kept = distinct(list(answers.values()))
    return sorted(kept, key=judge.key), counts


@dataclass(frozen=True)
class Unmixed:
    """The images (None when they did not unmix) and how the search went, said in the result."""

    images: torch.Tensor | None
    note: str


def unmix(layer: FirstLayer, n: int, shape: tuple[int, ...], gen: torch.Generator, search: Search = Search(),
          normalisation: tuple[tuple[float, ...], tuple[float, ...]] | None = None) -> Unmixed:
    """N images (N, *shape) in [0, 1] from a first layer's update, or None when the span says
    nothing (N not below its width) or fewer than N distinct images come out of the pixels tried.
    `normalisation` (mean, std per channel) is the one the model applies to its input."""
    matrix = layer.weight.numpy()
    dark = dark_pixels(matrix)
    lit = np.flatnonzero(~dark)
    short = span_shortfall(matrix, n, len(lit))
    if short:
        return Unmixed(None, short)
    basis = without_dark(span_basis(matrix, n), dark)
    order = torch.randperm(len(lit), generator=gen).numpy()
    tried = lit[order[:search.programs]] if search.programs else lit[order]
    judge = level_judge(layer, n, shape, search, normalisation)
    kept, counts = candidates(basis, tried, lit, search, judge)
    scale = "at the bias's scale" if judge.exact else "up to scale"
    note = (f"{len(tried)} pixels, {len(kept)} distinct answers, certified (integer levels {scale}) "
            f"after each round: {', '.join(map(str, counts))}")
    if not kept:
        return Unmixed(None, f"no answer ({note})")
    images = np.stack([judge.image(x) for x in kept[:n]])
    if len(kept) < n:  # what was found, and black for the rest: the share stays one of n images
        note = f"{note}; only {len(kept)} of {n}, the rest left black"
        images = np.vstack([images, np.zeros((n - len(kept), images.shape[1]))])
    return Unmixed(torch.as_tensor(images, dtype=torch.float32).view(n, *shape), note)


def level_judge(layer: FirstLayer, n: int, shape: tuple[int, ...], search: Search,
                normalisation: tuple[tuple[float, ...], tuple[float, ...]] | None) -> LevelJudge:
    """The judge of answers, with the bias's image functional when the bias is on the wire."""
    if search.rank != "levels" or layer.bias is None:
        return LevelJudge(search.rank, None, search.levels)
    pixels = math.prod(shape)
    mean, std = pixel_normalisation(*(normalisation or ((0.0,) * shape[0], (1.0,) * shape[0])), shape)
    if mean.size != pixels:
        return LevelJudge(search.rank, None, search.levels)
    functional = image_functional(layer.weight.numpy(), layer.bias.numpy(), n, mean, std)
    return LevelJudge(search.rank, functional, search.levels)


def order_by_labels(forward: Forward, uplinked: State, images: torch.Tensor,
                    labels: torch.Tensor) -> torch.Tensor:
    """The images reordered so that image i carries labels[i]: the assignment of the counted
    labels of highest total log-likelihood under the uplinked model (trained on these images)."""
    with torch.no_grad():
        logp = forward(uplinked, images).log_softmax(1)
    score = logp[:, labels].double().cpu().numpy()  # (image, label slot)
    rows, cols = assignment(score, maximize=True)
    order = np.empty(len(labels), dtype=np.int64)
    order[cols] = rows
    return images[torch.as_tensor(order)]
