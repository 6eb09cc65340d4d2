"""The adversary's data, drawn from the dataset's test split.

No client ever receives the test split, so it is the one source that is same-distribution and
disjoint from every client's data by construction. It is cut, once per evaluation and by the
seed alone (never by anything about the victim), into three disjoint pools:

  aux         the adversary's auxiliary data (shadow models, fitting guessed parts)
  evaluation  the evaluation classifier's data (scorer only: it labels inversion results)
  nonmember   where the scorer draws membership non-members from

Sizes are stated in every result (`settings["pools"]`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedattack.data.types import Dataset
from fedattack.registry import UserError
from fedattack.rng import numpy_rng

DEFAULT_AUX_FRACTION = 0.4
DEFAULT_EVAL_FRACTION = 0.3


@dataclass(frozen=True)
class Samples:
    """Labelled images (N, C, H, W) in [0, 1] with int64 labels (N,)."""

    x: torch.Tensor
    y: torch.Tensor

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def take(self, idx: np.ndarray | torch.Tensor) -> Samples:
        idx_t = torch.as_tensor(np.asarray(idx, dtype=np.int64))
        return Samples(self.x[idx_t], self.y[idx_t])

    def class_counts(self, num_classes: int) -> list[int]:
        return torch.bincount(self.y, minlength=num_classes).tolist()

    def by_class(self) -> dict[int, np.ndarray]:
        labels = self.y.numpy()
        return {int(c): np.flatnonzero(labels == c) for c in np.unique(labels)}

    @staticmethod
    def concat(parts: list[Samples]) -> Samples:
        return Samples(torch.cat([p.x for p in parts]), torch.cat([p.y for p in parts]))

    @staticmethod
    def empty_like(other: Samples) -> Samples:
        return Samples(other.x[:0], other.y[:0])


@dataclass(frozen=True)
class Pools:
    """The three disjoint pools cut from the test split (see the module docstring)."""

    aux: Samples
    evaluation: Samples
    nonmember: Samples

    def sizes(self) -> dict[str, int | str]:
        return {"source": "test split", "aux": len(self.aux), "evaluation": len(self.evaluation),
                "nonmember": len(self.nonmember)}


def split_pools(dataset: Dataset, aux_size: int | None, eval_size: int | None, seed: int) -> Pools:
    """Shuffle the test split by `seed` and cut aux, evaluation, then non-member pools."""
    n = int(dataset.y_test.shape[0])
    aux_n = round(DEFAULT_AUX_FRACTION * n) if aux_size is None else int(aux_size)
    eval_n = round(DEFAULT_EVAL_FRACTION * n) if eval_size is None else int(eval_size)
    if aux_n < 0 or eval_n < 0:
        raise UserError("--aux-size and --eval-size must not be negative")
    if aux_n + eval_n > n:
        raise UserError(f"--aux-size {aux_n} plus --eval-size {eval_n} exceed the {n} test samples of "
                        f"{dataset.name}; lower them (the rest of the test split holds the non-members)")
    order = numpy_rng(seed, "pools").permutation(n)
    test = Samples(dataset.x_test, dataset.y_test)
    return Pools(aux=test.take(order[:aux_n]), evaluation=test.take(order[aux_n:aux_n + eval_n]),
                 nonmember=test.take(order[aux_n + eval_n:]))


def sample_class_mix(pool: Samples, counts: dict[int, int], rng: np.random.Generator) -> np.ndarray:
    """Indices into `pool` with `counts[c]` samples of class c (as many as it has, at most)."""
    groups = pool.by_class()
    chosen = [rng.choice(groups.get(c, np.zeros(0, np.int64)), size=min(k, len(groups.get(c, ()))),
                         replace=False) for c, k in sorted(counts.items()) if k > 0]
    return np.concatenate(chosen).astype(np.int64) if chosen else np.zeros(0, np.int64)
