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

Which answers are training images? Stored images have integer levels (8-bit), so a training
image read exactly, scaled to its brightest pixel, is a ratio of integers; a mixture or a
non-image ray of the cone is not (`quantisation_error`: a prior any attacker of image data has,
used for ranking only). Certified answers come first, then the sparsest (most exact zeros: a
mixture lights the union of its images' pixels). Peeling: the pixels whose answer was not
certified are solved again with the certified images' pixels made dearer, so that the least
bright answer leaves the images already found and reaches an image that shares pixels with them
(off by default: on MNIST it certified no further image).

Needs N below the layer's width (else the span is everything) and a first layer that is fully
connected on the pixels (a convolution's update is not A X^T over whole images); the attack
falls back to its optimiser otherwise and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from fedattack.attacks.update_inversion.image_metrics import assignment
from fedattack.attacks.update_inversion.objectives import Forward, State

SAME = 0.98  # cosine above which two solutions are the same image
ZERO = 1e-6  # a pixel below this (of a solution scaled to max 1) is off
LEVELS = 255  # training images are stored with integer levels (8-bit)
CERTIFIED = 0.05  # quantisation error below which an answer is taken for a training image read exactly
SAME_COLUMN = 1e-4  # columns of the update closer than this (relative) belong to equally lit pixels
PEEL_WEIGHT = 10.0  # how much dearer a certified image's pixels are in a peeling round


def first_layer_update(start: State, after: State, shape: tuple[int, ...]) -> torch.Tensor | None:
    """The update (U, P) of the first matched weight that multiplies all P pixels, or None: an
    (out, P) linear weight, or a (P [+ 1 bias row], F) one that multiplies [x, 1] from the left
    (WAFFLe's factorised W_a, whose update is sum_i [x_i; 1] g_i^T: the same span)."""
    pixels = math.prod(shape)
    for key, value in after.items():
        if value.dim() != 2 or key not in start:
            continue
        delta = (value - start[key]).detach().double().cpu()
        if value.shape[1] == pixels:
            return delta
        if value.shape[0] in (pixels, pixels + 1):
            return delta[:pixels].T
    return None


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


def quantisation_error(x: np.ndarray, levels: int = LEVELS) -> float:
    """How far x (scaled to a maximum of 1) is from an image of integer levels: over the image's
    brightest level M = 1..levels, the least largest distance of M * x to an integer on its lit
    pixels. An 8-bit training image read exactly is 0 (up to the solver's precision); a mixture
    of images or a non-image ray of the cone is near 0.5 for every M."""
    lit = x[x > ZERO]
    if lit.size == 0:
        return 1.0
    scaled = lit[None, :] * np.arange(1, levels + 1)[:, None]
    return float(np.abs(scaled - np.round(scaled)).max(1).min())


@dataclass(frozen=True)
class Search:
    """programs: candidate pixels (0: every lit one). peel: rounds that re-solve the pixels whose
    answer was not certified with the certified images' pixels made `PEEL_WEIGHT` times dearer
    (the least-bright answer then avoids them). rank: "quantised" puts certified answers
    (integer levels) first, then the sparsest; "sparsity" the sparsest only. slack: how far
    below zero an answer's pixels may go (the noise of a float32 update's span)."""

    programs: int = 0
    peel: int = 0
    rank: str = "quantised"
    slack: float = 0.0


def certified(x: np.ndarray, rank: str) -> bool:
    """Integer levels and an unlit pixel: the constant image the normalisation adds to the span
    has integer levels too, and is no training image."""
    return rank == "quantised" and bool((x < ZERO).any()) and quantisation_error(x) < CERTIFIED


def solve_pixels(basis: np.ndarray, pixels: np.ndarray, weights: np.ndarray | None,
                 rows: np.ndarray, slack: float) -> dict[int, np.ndarray]:
    return {int(p): x for p in pixels if (x := lightest_with(basis, int(p), weights, rows, slack)) is not None}


def count_certified(answers: dict[int, np.ndarray], rank: str) -> int:
    return len(distinct([x for x in answers.values() if certified(x, rank)]))


def candidates(basis: np.ndarray, tried: np.ndarray, rows: np.ndarray,
               search: Search) -> tuple[list[np.ndarray], list[int]]:
    """Distinct answers, certified ones first, and the distinct certified count after each round:
    one round over the pixels, then `peel` rounds over those whose answer was not certified,
    steering away from the images certified so far."""
    answers = solve_pixels(basis, tried, None, rows, search.slack)
    counts = [count_certified(answers, search.rank)]
    for _ in range(search.peel):
        found = [x for x in answers.values() if certified(x, search.rank)]
        pending = np.array([p for p, x in answers.items() if not certified(x, search.rank)])
        if not found or len(pending) == 0:
            break
        weights: np.ndarray = 1.0 + PEEL_WEIGHT * (np.stack(found) > ZERO).any(0).astype(float)
        answers.update({p: x for p, x in solve_pixels(basis, pending, weights, rows, search.slack).items()
                        if certified(x, search.rank)})
        counts.append(count_certified(answers, search.rank))
    kept = distinct(list(answers.values()))
    return sorted(kept, key=lambda x: (not certified(x, search.rank), -int((x < ZERO).sum()))), counts


@dataclass(frozen=True)
class Unmixed:
    """The images (None when they did not unmix) and how the search went, said in the result."""

    images: torch.Tensor | None
    note: str


def unmix(update: torch.Tensor, n: int, shape: tuple[int, ...], gen: torch.Generator,
          search: Search = Search()) -> Unmixed:
    """N images (N, *shape) in [0, 1] from a (U, P) first-layer update, or None when the span
    says nothing (N not below U) or fewer than N distinct images come out of the pixels tried."""
    matrix = update.numpy()
    if n >= matrix.shape[0]:
        return Unmixed(None, f"{n} images do not unmix from a first layer of {matrix.shape[0]} units")
    dark = dark_pixels(matrix)
    basis = without_dark(span_basis(matrix, n), dark)
    lit = np.flatnonzero(~dark)
    order = torch.randperm(len(lit), generator=gen).numpy()
    tried = lit[order[:search.programs]] if search.programs else lit[order]
    kept, counts = candidates(basis, tried, lit, search)
    note = (f"{len(tried)} pixels, {len(kept)} distinct answers, certified (integer levels) after each round: "
            f"{', '.join(map(str, counts))}")
    if len(kept) < n:
        return Unmixed(None, f"fewer than {n} distinct answers ({note})")
    return Unmixed(torch.as_tensor(np.stack(kept[:n]), dtype=torch.float32).view(n, *shape), note)


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
