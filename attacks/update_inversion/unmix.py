"""Images read off the first fully connected layer's update, whatever the local run was.

A fully connected first layer sees the (normalised) pixels, so every SGD step adds
sum_i d_i x_i^T to its weight: after any number of epochs, batches and shuffles the update is
still A X^T, with one row of X per training image (the sum over steps only changes A). Its row
space, plus the constant image (a per-channel affine normalisation shifts the images by a
constant), is exactly the span of the N images: nothing about the number of epochs hides it
(Dimitrov et al. 2022 simulate the run instead; Kariyappa et al. 2023 unmix a single gradient's
layer by ICA, which separates poorly here: digits overlap, so they are far from independent).

Images are non-negative, and an image with a pixel that no other image of the set lights is an
extreme ray of the cone {x in span : x >= 0}. So, per candidate pixel p, a linear program finds
the non-negative vector of least total brightness in the span with x_p = 1; when p is private
to one image that vector is that image (scaled by 1/x_p; rescaled to a maximum of 1 here, which
is exact for images whose brightest pixel is white). Distinct solutions are kept, and the N
sparsest (most exact zeros: a mixture lights the union of its images' pixels) are the answer.
Needs N below the layer's width (else the span is everything) and a first layer that is fully
connected on the pixels (a convolution's update is not A X^T over whole images); the attack
falls back to its optimiser otherwise and says so.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from fedattack.attacks.update_inversion.image_metrics import assignment
from fedattack.attacks.update_inversion.objectives import Forward, State

SAME = 0.98  # cosine above which two solutions are the same image
ZERO = 1e-6  # a pixel below this (of a solution scaled to max 1) is off


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


def lightest_with(basis: np.ndarray, pixel: int) -> np.ndarray | None:
    """The non-negative vector of the span with x[pixel] = 1 and the least sum, scaled to max 1."""
    from scipy.optimize import linprog  # deferred: discovery stays light

    k, p = basis.shape
    result = linprog(c=basis.sum(1), A_ub=-basis.T, b_ub=np.zeros(p), A_eq=basis[:, pixel][None],
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


def unmix(update: torch.Tensor, n: int, shape: tuple[int, ...], gen: torch.Generator,
          programs: int) -> torch.Tensor | None:
    """N images (N, *shape) in [0, 1] from a (U, P) first-layer update, or None when the span
    says nothing (N not below U) or fewer than N distinct images come out of `programs` pixels."""
    matrix = update.numpy()
    if n >= matrix.shape[0]:
        return None
    basis = span_basis(matrix, n)
    lit = np.flatnonzero(np.abs(matrix).sum(0) > 0)
    order = torch.randperm(len(lit), generator=gen).numpy()
    found = [x for x in (lightest_with(basis, int(p)) for p in lit[order[:programs]]) if x is not None]
    kept = distinct(found)
    if len(kept) < n:
        return None
    sparsest = sorted(kept, key=lambda x: -int((x < ZERO).sum()))[:n]
    return torch.as_tensor(np.stack(sparsest), dtype=torch.float32).view(n, *shape)


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
