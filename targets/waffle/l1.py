"""WAFFLe's non-Bayesian ablation (Hao et al., IEEE Access 2022, section IV.G.3 and Table 8).

"We replace WAFFLe's inferred per-client weight factors with per-client weight factors optimized
by standard gradient descent, and use an L1 sparsity constraint on factor usage as a replacement
for the sparsity induced by the IBP." The dictionary, its factorised layers, the wire and the
aggregation are WAFFLe's (`waffle-ibp`); only the selection differs.

Private state, per factorised layer L, created the first time the client trains:
  `L.score`  the client's real-valued factor scores s_i, so W_i = W_a diag(r * s_i) W_b;
             initialised at 1 (every factor fully on, i.e. the global model).
Local objective: mean_batch NLL + l1_weight * sum_L |s_i^L|_1 / |D_i|. The penalty takes the
place of WAFFLe's KL term, so it gets the same per-data-point scaling; the paper does not say
how it scaled its weights (0.1, 1, 2, 10; 1.0 was best in Table 8 and is the default).
Evaluation: a trained client uses its own scores, one that never trained uses s = 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedattack.registry import UserError
from fedattack.target import State
from fedattack.training import Batch

from .factors import FactorSelectionTarget


@dataclass(frozen=True, kw_only=True)
class WaffleL1Hyper:
    """l1_weight: weight of the L1 penalty on factor scores. factors: F override (0 = paper).
    selection_lr_scale: SGD step of the scores relative to the shared lr."""

    l1_weight: float = 1.0
    factors: int = 0
    selection_lr_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.l1_weight < 0 or self.factors < 0 or self.selection_lr_scale <= 0:
            raise UserError("waffle-l1 needs l1_weight >= 0, factors >= 0, selection_lr_scale > 0")


class WaffleL1(FactorSelectionTarget):
    """WAFFLe ablation: private factor scores by gradient descent with an L1 penalty (Table 8)."""

    name = "waffle-l1"
    paper = "Hao et al., WAFFLe, IEEE Access 2022, Table 8"
    Hyper = WaffleL1Hyper

    def init_selection(self, layer: str, num_factors: int) -> State:
        return {f"{layer}.score": torch.ones(num_factors)}

    def local_loss(self, params: State, consts: State, batch: Batch, noise: State,
                   step: torch.Tensor) -> torch.Tensor:
        weights = {n: params[n] for n in self.param_names}
        l1 = torch.zeros(())
        for layer in self.factorized:
            score = self.selection(params, f"{layer}.score")
            weights[f"{layer}.b"] = score
            l1 = l1 + score.abs().sum()
        penalty = float(self.hyper.l1_weight) * l1 / consts["n_train"]
        return batch.cross_entropy(self.forward(weights, batch.x)) + penalty

    def deployed_selection(self, private: State, layer: str) -> torch.Tensor:
        return private[f"{layer}.score"]
