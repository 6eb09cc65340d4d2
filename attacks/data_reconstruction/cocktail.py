"""The cocktail party attack's separation (Kariyappa, Guo, Maeng, Xiong, Suh, Qureshi, Lee, ICML
2023, "Cocktail Party Attack: Breaking Aggregation-Based Privacy in Federated Learning using
Independent Component Analysis"; written here from the paper's description).

A dense layer's weight gradient for a batch is G = A X (m x d): X holds the batch's n inputs as
rows (here the normalised pixels), A = dloss/dZ (m x n) the gradient at the layer's m outputs.
Every row of G, a "microphone", records a linear mixture of the n inputs, the "speakers"; the
paper's insight is that this is blind source separation, solved by independent component
analysis when m >= n: whiten G (keep its top n principal directions, unit variance), then find
the orthogonal unmixing U that makes the components U G as non-Gaussian as possible. Images are
far from Gaussian and nearly independent of one another, mixtures of them are closer to
Gaussian (the central limit theorem), so the most non-Gaussian directions are the images.

The same holds for any FedAvg update of a first dense layer: every SGD step adds sum_i a_i x_i^T,
so after any number of steps and epochs the update is still A X with one row of X per image
(only A changes), and the unmixing applies unchanged (the paper's "weight updates").

Here scikit-learn's FastICA does the whitening and the optimisation: its log-cosh contrast is
the paper's negentropy approximation (J(u) ~ [E G(u^T g) - E G(nu)]^2 with G = log cosh), and
its symmetric decorrelation keeps the components exactly uncorrelated, which the paper asks of
its unmixing with a penalty on their pairwise cosine similarity instead. The paper's total
variation prior on the components is not used (FastICA's fixed-point iteration has no place for
it). ICA gives each image up to sign and scale: each component is standardised, its sign chosen
so that its pixels' skewness has the sign the auxiliary images' pixels have (bright strokes on
dark backgrounds are positively skewed), and its scale set to the auxiliary images' per-image
pixel mean and spread (the paper rescales its recovered images to their range likewise).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

MAX_ITER = 400  # FastICA's fixed-point iterations at most
TOL = 1e-4  # FastICA's convergence tolerance (the change of the unmixing)


@dataclass(frozen=True)
class PixelPrior:
    """What the auxiliary images say about one image's pixels (in [0, 1]): their mean, spread
    and the sign of their skewness, averaged over the images."""

    mean: float = 0.5
    std: float = 0.25
    skew_sign: float = 1.0

    @classmethod
    def of(cls, images: np.ndarray) -> PixelPrior:
        """From auxiliary images (k, ...) in [0, 1]; the default for none."""
        if len(images) == 0:
            return cls()
        flat = images.reshape(len(images), -1).astype(np.float64)
        mean, std = flat.mean(1), flat.std(1)
        skew = (((flat - mean[:, None]) / np.maximum(std[:, None], 1e-12)) ** 3).mean(1)
        return cls(float(mean.mean()), float(std.mean()), 1.0 if skew.mean() >= 0 else -1.0)


@dataclass(frozen=True)
class Separated:
    """The n components as images (n, d) in [0, 1], or None, and what happened."""

    images: np.ndarray | None
    note: str
    iterations: int = 0


def unmixable(units: int, pixels: int, n: int) -> str:
    """Why a layer of `units` outputs on `pixels` inputs cannot separate n images ("" if it
    can): ICA needs at least as many mixtures as sources, and the images' span (their centred
    rank) at most the pixels less one."""
    if n < 2:
        return f"{n} image(s): nothing to separate"
    if n > units:
        return f"{n:,} images are more than the first layer's {units:,} units (fewer mixtures than sources)"
    if n >= pixels:
        return f"{n:,} images of {pixels:,} pixels span every image (no more sources than pixels less one)"
    return ""


def separate(update: np.ndarray, n: int, seed: int, prior: PixelPrior, shape: tuple[int, ...],
             contrast: str = "edges", channel_std: np.ndarray | None = None) -> Separated:
    """The n inputs behind a dense layer's weight gradient or update (m x d), as images of
    `shape` (C, H, W). `contrast`: where non-Gaussianity is measured, the components' pixels
    (`pixels`, the paper's) or their horizontal and vertical differences (`edges`, see
    `edges`); either way the unmixing found is applied to the update itself. `channel_std`:
    per-pixel scale of the inputs' normalisation (d,), undone before the sign and scale are
    set; None for inputs the layer sees as pixels."""
    from sklearn.decomposition import FastICA  # deferred: discovery stays light
    from sklearn.exceptions import ConvergenceWarning
    from threadpoolctl import threadpool_limits

    m, d = update.shape
    why = unmixable(m, d, n)
    if why:
        return Separated(None, why)
    mixed = update.astype(np.float64)
    observed = edges(mixed, shape) if contrast == "edges" else mixed
    ica = FastICA(n_components=n, algorithm="parallel", whiten="unit-variance", fun="logcosh",
                  max_iter=MAX_ITER, tol=TOL, random_state=seed)
    # NumPy's BLAS threads as many as torch's (one in the tests): on a busy machine its default
    # of one per core made the same FastICA 12 times slower here (33 s against 2.6 s)
    with warnings.catch_warnings(record=True) as caught, threadpool_limits(torch.get_num_threads()):
        warnings.simplefilter("always", ConvergenceWarning)
        ica.fit(observed.T)  # the pixels (or differences) are the samples, the units the mixtures
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    sources = ica.components_ @ mixed  # (n, d): the unmixing applied to the update itself
    if channel_std is not None:
        sources = sources * channel_std[None, :]
    note = (f"FastICA ({contrast}): {n} components of the {m} x {d} update, "
            f"{ica.n_iter_} iterations{'' if converged else ' (not converged)'}")
    return Separated(to_pixels(sources, prior), note, int(ica.n_iter_))


def edges(rows: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Each row's horizontal and vertical neighbour differences, per channel: a linear map of
    the pixels, so the mixture of images becomes the same mixture of their differences
    (G F = A (X F)), where images are sparse, heavy-tailed and far less alike than their pixels
    (which share a mean image and their low frequencies)."""
    images = rows.reshape(len(rows), *shape)
    across = np.diff(images, axis=-1).reshape(len(rows), -1)
    down = np.diff(images, axis=-2).reshape(len(rows), -1)
    return np.concatenate([across, down], axis=1)


def to_pixels(sources: np.ndarray, prior: PixelPrior) -> np.ndarray:
    """Each component standardised, signed by the prior's skewness and scaled to its pixels."""
    centred = sources - sources.mean(1, keepdims=True)
    z = centred / np.maximum(centred.std(1, keepdims=True), 1e-12)
    skew = (z**3).mean(1, keepdims=True)
    z = z * np.where(skew * prior.skew_sign >= 0, 1.0, -1.0)
    return np.clip(prior.mean + prior.std * z, 0.0, 1.0)
