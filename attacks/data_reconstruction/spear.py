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

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

ZERO = 1e-5  # an entry of L' q below this share of its largest is a zero (float32 updates)
LOOSE = 1e-3  # the same for the consistency check's L, read back through a pseudo-inverse
SPARSITY_MARGIN = 0.1  # a candidate needs (b - 1) + this share of m zeros beyond the chosen rows
SAME = 0.999  # |cosine| above which two candidate columns are one
DRAW = 4096  # subsets drawn (and solved) at once
HIGH = 0.75  # a candidate this sparse, relative to the sparsest found, may be a true column
PATIENCE = 8  # draws without a new such candidate before the search stops
MARGIN = 1e-6  # an active unit's pre-activation must clear this share of the largest bias


@dataclass(frozen=True)
class SpearResult:
    """The inputs (b, n) of the layer, or None, and how the search went."""

    inputs: np.ndarray | None
    note: str


def factor(weight: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
    """L' (m x b) and R' (b x n) with weight = L' R' (its top-b SVD)."""
    u, s, vt = np.linalg.svd(weight, full_matrices=False)
    return u[:, :b] * s[:b], vt[:b]


def candidates(left: np.ndarray, b: int, samples: int, gen: torch.Generator,
               accept: Callable[[np.ndarray], bool] = lambda q: True) -> tuple[list[np.ndarray], np.ndarray]:
    """Distinct unit columns q whose L' q is sparse, from up to `samples` random (b - 1)-row
    subsets, and each one's zero count. A true column of L has about as many zeros as the units
    off on its input; a mix of two has about half as many, so only candidates within `HIGH` of
    the sparsest are kept, and the search stops once b of them stand and `PATIENCE` more draws
    add none. `accept` vets each new candidate (`feasible`, where the layer's weights are known)."""
    m = left.shape[0]
    floor = (b - 1) + max(2, int(SPARSITY_MARGIN * m))
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    rng = np.random.default_rng(seed)
    found = np.zeros((0, b))
    zeros = np.zeros(0, dtype=np.int64)
    quiet = 0
    for _ in tqdm(range(0, samples, DRAW), desc=f"SPEAR subsets (b={b})", unit="draw", leave=False,
                  mininterval=2.0):
        rows = np.argpartition(rng.random((DRAW, m)), b - 2, axis=1)[:, :b - 1]  # b - 1 distinct rows each
        _, _, vt = np.linalg.svd(left[rows], full_matrices=True)
        q = vt[:, -1, :]  # (DRAW, b): the null vector of each subset
        col = left @ q.T  # (m, DRAW)
        count = (np.abs(col) <= ZERO * np.abs(col).max(0, keepdims=True)).sum(0)
        best = max(int(count.max()), int(zeros.max(initial=0)))
        keep = count >= max(floor, HIGH * best)
        before = len(zeros)
        found, zeros = merge(found[zeros >= HIGH * best], zeros[zeros >= HIGH * best], q[keep], count[keep], accept)
        quiet = quiet + 1 if len(zeros) <= before else 0
        if len(zeros) >= b and quiet >= PATIENCE:
            break
    return list(found), zeros


def merge(found: np.ndarray, zeros: np.ndarray, new: np.ndarray, count: np.ndarray,
          accept: Callable[[np.ndarray], bool]) -> tuple[np.ndarray, np.ndarray]:
    """The candidates with the new accepted ones added, one per direction (|cosine| < `SAME`,
    up to sign)."""
    for q, z in zip(new / np.linalg.norm(new, axis=1, keepdims=True), count):
        if (not len(found) or np.abs(found @ q).max() < SAME) and accept(q):
            found, zeros = np.vstack([found, q]), np.append(zeros, z)
    return found, zeros


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


def feasible(column: np.ndarray, right: np.ndarray, layer: tuple[np.ndarray, np.ndarray]) -> bool:
    """Whether some input in the gradient's row space switches off exactly the units this column
    of L is zero on (W x + c <= 0 there, > 0 elsewhere, at the step's weights W, c): a true
    column's own input does; a mix of two columns rarely has one (a small linear program)."""
    from scipy.optimize import linprog  # deferred: discovery stays light

    weight, bias = layer
    off = np.abs(column) <= ZERO * np.abs(column).max()
    pre = weight @ right.T  # (m, b): the units' pre-activations per coordinate of x in the span
    sign = np.where(off, 1.0, -1.0)[:, None]  # off: pre c + bias <= 0; on: -(pre c + bias) <= -margin
    margin = np.where(off, 0.0, -MARGIN * np.abs(bias).max(initial=1.0))
    result = linprog(np.zeros(right.shape[0]), A_ub=sign * pre, b_ub=margin - sign[:, 0] * bias,
                     bounds=[(None, None)] * right.shape[0], method="highs")
    return result.status == 0


def disaggregate(weight: np.ndarray, bias: np.ndarray, b: int, gen: torch.Generator,
                 samples: int = 2_000_000, layer: tuple[np.ndarray, np.ndarray] | None = None) -> SpearResult:
    """The b inputs behind one step's (weight, bias) gradient (or update: the sign and the step
    size cancel), when the layer is followed by a ReLU; None where too few columns were found.
    `layer`: the layer's weights and bias at the step, to keep only candidates some input of the
    span explains (`feasible`)."""
    if b < 1 or b >= min(weight.shape):
        return SpearResult(None, f"a batch of {b} does not fit a {weight.shape[0]} x {weight.shape[1]} layer")
    left, right = factor(weight, b)
    if b == 1:
        q = np.ones((1, 1))
    else:
        vet = (lambda q: feasible(left @ q, right, layer)) if layer is not None else (lambda q: True)
        found, zeros = candidates(left, b, samples, gen, vet)
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
    zero = np.abs(left) <= LOOSE * np.abs(left).max(0, keepdims=True)
    return float((off == zero).mean())
