"""A diagnostic plugin for issue #14: WAFFLe's dictionary trained with a selection fixed by group.

WAFFLe's searched recipe never makes the minority of a multimodal partition pick factors of
its own (docs/lab/reproduction.md, "WAFFLe recipe search"). Two failures would look the same: the
selection is never learnt, or a personal selection would not help this factorised model (its
output layer and its bias are shared by every client, majority and minority alike). This
oracle separates them: every client's selection b is fixed by its group, never learnt, and
the dictionary is trained exactly as `waffle-ibp` trains it (the same SGD on W_a, W_b, r, the
same `r_init_mean`), with no KL. If the oracle's minority is far above FedAvg's, the selection
learning is what fails; if not, the factorised model is the bottleneck.

Not a method of fedattack (a `--plugin` file, so the public `waffle-ibp` stays as documented):

    fedattack train --plugin benchmarks/lab/waffle_oracle.py --method waffle-oracle \\
        --set r_init_mean=1 --set oracle=halves --dataset mnist --partition multimodal ...

The group is read off the client's own training labels (the oracle is told what WAFFLe has to
infer): a client whose labels are all even is in the `minority` group (the MNIST multimodal
partition's even digits). `oracle`:
  halves  minority factors [0, F/2), majority [F/2, F): two disjoint factorised layers
  blocks  a shared third [0, F/3), then a minority third, then a majority third
  all     every client every factor (the global model on the factorised layer: the control)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from fedattack.targets.waffle import ibp
from fedattack.registry import UserError
from fedattack.target import LocalData, LocalProblem, State
from fedattack.targets.waffle.method import WaffleHyper, WaffleIBP
from fedattack.training import Batch
from fedattack.wire import Payload

ORACLES = ("halves", "blocks", "all")


@dataclass(frozen=True, kw_only=True)
class OracleHyper(WaffleHyper):
    """oracle: which factors each group uses (see the module docstring)."""

    oracle: str = "halves"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.oracle not in ORACLES:
            raise UserError(f"waffle-oracle oracle={self.oracle!r}: use one of {', '.join(ORACLES)}")


def group_mask(oracle: str, minority: bool, num_factors: int) -> torch.Tensor:
    """The fixed selection b (0/1 per factor) of a client of the given group."""
    k = torch.arange(num_factors)
    if oracle == "all":
        return torch.ones(num_factors)
    if oracle == "halves":
        half = num_factors // 2
        return ((k < half) if minority else (k >= half)).float()
    third = num_factors // 3
    own = (k >= third) & (k < 2 * third) if minority else (k >= 2 * third)
    return ((k < third) | own).float()


class WaffleOracle(WaffleIBP):
    """waffle-ibp's dictionary training with the selection fixed by the client's group."""

    name = "waffle-oracle"
    paper = "diagnostic (issue #14), not a method"
    Hyper = OracleHyper

    def masks(self, data: LocalData) -> State:
        minority = bool((data.y_train % 2 == 0).all())
        return {f"{layer}.b": group_mask(self.hyper.oracle, minority, f)
                for layer, f in self.factorized.items()}

    def start_local(self, down: Payload, private: State, data: LocalData) -> LocalProblem:
        params = {n: down[n] for n in self.param_names}
        return LocalProblem(params=params, consts={"n_train": torch.tensor(float(data.size)),
                                                   **self.masks(data)})

    def finish_local(self, params: State, problem: LocalProblem, down: Payload, private: State,
                     data: LocalData) -> tuple[Payload, State]:
        up = {n: params[n] for n in self.param_names}
        # pi_logit at the clipped logit of b, so the tabulator's selection health reads it
        kept = {f"{layer}.pi_logit": ibp.prob_logit(problem.consts[f"{layer}.b"])
                for layer in self.factorized}
        return up, kept

    def noise_shapes(self, problem: LocalProblem) -> dict[str, tuple[int, ...]]:
        return {}

    def local_loss(self, params: State, consts: State, batch: Batch, noise: State,
                   step: torch.Tensor) -> torch.Tensor:
        weights = {n: params[n] for n in self.param_names}
        weights.update({f"{layer}.b": consts[f"{layer}.b"] for layer in self.factorized})
        return batch.cross_entropy(self.forward(weights, batch.x))

    def deployed_selection(self, private: State, layer: str) -> torch.Tensor:
        return (torch.sigmoid(private[f"{layer}.pi_logit"]) >= 0.5).float()

    def summarize(self, server: State, private: list[State], groups: list[str]) -> dict[str, Any]:
        return {}
