"""Exact batch recovery through a dense layer followed by a ReLU, from one gradient step (SPEAR:
Dimitrov, Baader, Müller, Vechev 2024, "SPEAR: Exact Gradient Inversion of Batches in Federated
Learning"; written here from the paper's description).

A dense layer's weight gradient for a batch of b inputs is dW = L X (m x n): X (b x n) the
inputs, L = dloss/dZ (m x b) the gradient at its outputs. It has rank b, so its SVD writes it
as L' R' (L' = U S of the top b, R' = V^T), and L = L' Q, X = Q^{-1} R' for some unknown b x b
matrix Q. A ReLU after the layer makes L sparse: unit j's entry for input i is zero wherever
that unit is inactive on it (about half of them at initialisation). A column q of Q is then the
null vector of the b - 1 rows of L' where its column of L vanishes, so random (b - 1)-row
subsets of L' propose candidates (each right with probability about 2^-(b-1) per column, which
is why batches stay small: SPEAR reaches b ~ 25 on a GPU); a candidate is kept when L' q is
much sparser than b - 1 zeros (`SPARSITY_MARGIN`). The b sparsest distinct candidates form Q,
up to the scale of each column, which the bias gradient fixes: db = L 1 = L' Q 1. Where the
layer's weights at the step are known, each recovered input must switch off exactly the units
its column of L is zero on (`consistent`), which rejects a wrong Q.

This is exact where the first reading (`unmix`) needs non-negative, sparse images (MNIST, not
CIFAR-10), but it needs one step: over a local run L sums every step's gradients, and a unit
must be off at every visit of an image for its entry to vanish.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

ZERO = 1e-6  # an entry of L' q below this share of its largest is a zero
SPARSITY_MARGIN = 0.1  # a candidate needs (b - 1) + this share of m zeros beyond the chosen rows
SAME = 0.999  # |cosine| above which two candidate columns are one
DRAW = 4096  # subsets drawn (and solved) at once
HIGH = 0.75  # a candidate this sparse, relative to the sparsest found, may be a true column
PATIENCE = 8  # draws without a new such candidate before the search stops


@dataclass(frozen=True)
class SpearResult:
    """The inputs (b, n) of the layer, or None, and how the search went."""

    inputs: np.ndarray | None
    note: str


def factor(weight: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
    """L' (m x b) and R' (b x n) with weight = L' R' (its top-b SVD)."""
    u, s, vt = np.linalg.svd(weight, full_matrices=False)
    return u[:, :b] * s[:b], vt[:b]


def candidates(left: np.ndarray, b: int, samples: int, gen: torch.Generator) -> tuple[list[np.ndarray], np.ndarray]:
    """Distinct unit columns q whose L' q is sparse, from up to `samples` random (b - 1)-row
    subsets, and each one's zero count. A true column of L has about as many zeros as the units
    off on its input; a mix of two has about half as many, so the search stops once b
    candidates reach `HIGH` of the sparsest and `PATIENCE` more draws add none."""
    m = left.shape[0]
    needed = (b - 1) + max(2, int(SPARSITY_MARGIN * m))
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    rng = np.random.default_rng(seed)
    found: list[np.ndarray] = []
    zeros: list[int] = []
    quiet = 0
    for _ in tqdm(range(0, samples, DRAW), desc=f"SPEAR subsets (b={b})", unit="draw", leave=False,
                  mininterval=2.0):
        rows = np.argsort(rng.random((DRAW, m)), axis=1)[:, :b - 1]
        _, _, vt = np.linalg.svd(left[rows], full_matrices=True)
        q = vt[:, -1, :]  # (DRAW, b): the null vector of each subset
        col = left @ q.T  # (m, DRAW)
        count = (np.abs(col) <= ZERO * np.abs(col).max(0, keepdims=True)).sum(0)
        before = sum(z >= HIGH * max(zeros, default=0) for z in zeros)
        for k in np.flatnonzero(count >= needed):
            if add_distinct(found, q[k]):
                zeros.append(int(count[k]))
        high = sum(z >= HIGH * max(zeros, default=0) for z in zeros)
        quiet = quiet + 1 if high == before else 0
        if high >= b and quiet >= PATIENCE:
            break
    return found, np.asarray(zeros)


def add_distinct(found: list[np.ndarray], q: np.ndarray) -> bool:
    """Add q (normalised) unless it is one already found, up to sign; whether it was added."""
    q = q / np.linalg.norm(q)
    if all(abs(float(q @ other)) < SAME for other in found):
        found.append(q)
        return True
    return False


def choose(found: list[np.ndarray], zeros: np.ndarray, b: int) -> np.ndarray | None:
    """The b sparsest candidates that are linearly independent, as the columns of Q (b x b)."""
    chosen: list[np.ndarray] = []
    for k in np.argsort(-zeros, kind="stable"):
        trial = np.stack([*chosen, found[k]], axis=1)
        if np.linalg.matrix_rank(trial, tol=1e-6) == trial.shape[1]:
            chosen.append(found[k])
        if len(chosen) == b:
            return np.stack(chosen, axis=1)
    return None


def disaggregate(weight: np.ndarray, bias: np.ndarray, b: int, gen: torch.Generator,
                 samples: int = 2_000_000) -> SpearResult:
    """The b inputs behind one step's (weight, bias) gradient (or update: the sign and the step
    size cancel), when the layer is followed by a ReLU; None where too few columns were found."""
    if b < 1 or b >= min(weight.shape):
        return SpearResult(None, f"a batch of {b} does not fit a {weight.shape[0]} x {weight.shape[1]} layer")
    left, right = factor(weight, b)
    if b == 1:
        q = np.ones((1, 1))
    else:
        found, zeros = candidates(left, b, samples, gen)
        picked = choose(found, zeros, b) if len(found) >= b else None
        if picked is None:
            return SpearResult(None, f"{len(found)} sparse directions of the {b} needed in {samples:,} subsets")
        q = picked
    scale, *_ = np.linalg.lstsq(left @ q, bias, rcond=None)  # db = L' Q diag(s) 1
    if np.any(np.abs(scale) < 1e-12):
        return SpearResult(None, "a column's scale is zero: the bias gradient does not fix it")
    inputs = np.linalg.solve(q * scale[None, :], right)  # X = (Q diag(s))^-1 R'
    return SpearResult(inputs, f"SPEAR: {b} inputs from the {weight.shape[0]}-unit layer's gradient")


def consistent(inputs: np.ndarray, weight: np.ndarray, bias: np.ndarray, update: np.ndarray, b: int) -> float:
    """Share of (unit, input) pairs where 'unit off on this input' (W x + b <= 0 at the step's
    weights) agrees with 'its entry of L is zero' (read off the update for these inputs)."""
    left = update @ np.linalg.pinv(inputs)  # L = dW X^+
    off = (inputs @ weight.T + bias[None, :]).T <= 0  # (m, b)
    zero = np.abs(left) <= ZERO * np.abs(left).max()
    return float((off == zero).mean())
