"""Which answers of the first-layer programs are training images, and at what brightness.

Stored images have integer levels (8-bit), so a training image read exactly is a vector of
integers over 255; a mixture of images, or a ray of the cone that is no image, is not. Without
knowing an answer's brightness this can only be tested up to scale (`quantisation_error`: the
best of 255 scalings, which a noisy answer fails and a lucky mixture may pass).

The bias update fixes the scale. Every SGD step adds d x~^T to the first layer's weight and d to
its bias, x~ = (x - mean) / std the normalised image, so after any number of epochs
dW = A X~^T and db = A 1 with the same A (one column per training image). Undoing the
normalisation, R = dW std + db mean^T = A X^T, and the y solving R y = db in R's row space
satisfies A X^T y = A 1, i.e. x_i . y = 1 for every training image (A has full column rank
when N is below the layer's width). So `image_functional` reads off the wire a linear form that
is exactly 1 on each of the client's images: an answer x of the programs (any scale) is that
image at x / (x . y), and its levels can be tested at that one scale (`LevelJudge`). This also
returns each image at its own brightness rather than scaled to a white brightest pixel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ZERO = 1e-6  # a pixel below this (of an answer scaled to max 1) is off
LEVELS = 255  # training images are stored with integer levels (8-bit)
CERTIFIED = 0.05  # up-to-scale quantisation error below which an answer is taken for an image
EXACT_CERTIFIED = 0.25  # the same at the scale the bias fixes (a level's fraction; a mixture is near 0.5)


def pixel_levels(pixels: np.ndarray) -> int:
    """The integer levels of the data's pixel grid (255 for 8-bit images, 16 for scikit-learn's
    digits), read off public images in [0, 1] as the smallest gap between distinct pixel values:
    the image format is public knowledge, and a wrong grid certifies no image at all."""
    values = np.unique(np.round(pixels.astype(np.float64).ravel(), 9))
    gaps = np.diff(values)
    gaps = gaps[gaps > ZERO]
    return LEVELS if gaps.size == 0 else max(1, round(1.0 / float(gaps.min())))


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


def image_functional(weight: np.ndarray, bias: np.ndarray, n: int, mean: np.ndarray,
                     std: np.ndarray) -> np.ndarray | None:
    """y (P,) with x . y = 1 for each of the n training images, from the first layer's weight
    update (U, P), bias update (U,) and the input normalisation per pixel; None when the bias
    update is outside the span (not an SGD run of this layer, or nothing learnt)."""
    r = weight * std[None, :] + np.outer(bias, mean)
    u, s, vt = np.linalg.svd(r, full_matrices=False)
    if s[n - 1] <= 0:
        return None
    coords = u[:, :n].T @ bias
    if np.linalg.norm(bias - u[:, :n] @ coords) > 1e-3 * max(float(np.linalg.norm(bias)), 1e-30):
        return None
    return vt[:n].T @ (coords / s[:n])


def pixel_normalisation(mean: tuple[float, ...], std: tuple[float, ...],
                        shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Per-pixel mean and std in the flattened (C, H, W) order (per channel given)."""
    per = math.prod(shape[1:])
    return np.repeat(np.asarray(mean, dtype=float), per), np.repeat(np.asarray(std, dtype=float), per)


@dataclass(frozen=True)
class LevelJudge:
    """How answers are ranked and returned. rank "levels": integer levels at the scale the bias
    fixes (`functional`), falling back to "quantised" (up to scale) without one; "sparsity":
    the most exact zeros first. Certified answers come first, then the rest by `key`."""

    rank: str
    functional: np.ndarray | None = None
    levels: int = LEVELS

    @property
    def exact(self) -> bool:
        return self.rank == "levels" and self.functional is not None

    def level_error(self, x: np.ndarray) -> float:
        """Largest distance to an integer level of x at its exact scale, in levels, plus how far
        it rises above white; infinite when the form is not positive on x (no image is)."""
        assert self.functional is not None
        s = float(x @ self.functional)
        if not s > 0:
            return math.inf
        z = x / s
        lit = z[x > ZERO]
        if lit.size == 0:
            return math.inf
        off = np.abs(self.levels * lit - np.round(self.levels * lit)).max()
        return float(off + max(0.0, self.levels * (float(z.max()) - 1.0)))

    def certified(self, x: np.ndarray) -> bool:
        """Integer levels and an unlit pixel (the constant image has integer levels too)."""
        if not (x < ZERO).any() or self.rank == "sparsity":
            return False
        if self.exact:
            return self.level_error(x) < EXACT_CERTIFIED
        return quantisation_error(x, self.levels) < CERTIFIED

    def key(self, x: np.ndarray) -> tuple[bool, float]:
        if self.exact:
            return not self.certified(x), self.level_error(x)
        return not self.certified(x), -float((x < ZERO).sum())

    def image(self, x: np.ndarray) -> np.ndarray:
        """The answer as an image: at the bias's scale (clipped to [0, 1]) where there is one."""
        if not self.exact:
            return x
        assert self.functional is not None
        s = float(x @ self.functional)
        return np.clip(x / s, 0.0, 1.0) if s > 0 else x
