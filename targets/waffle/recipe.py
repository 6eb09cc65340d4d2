"""WAFFLe's local recipe: the paper's literal one, and IBP-WF's, which personalises.

Trained literally (plain SGD at the shared lr for every parameter, the paper's section IV.A.2),
the private selection never leaves its prior (docs/lab/reproduction.md). The WAFFLe authors'
factorisation comes from IBP-WF (Mehta et al., AISTATS 2021, github.com/nikhil-dce/IBP-WF,
`train_continual.py` and `configs/*.yaml`; notes in ../shared/notes/methods-reference.md
section 1), which trains differently. `recipe = "ibp-wf"` takes IBP-WF's choice wherever the
WAFFLe paper is silent; every choice is its own setting, so one can be changed alone:

| setting | literal | ibp-wf | source of the ibp-wf value |
| --- | --- | --- | --- |
| optimizer | sgd (all at the shared lr) | adam (every parameter, adam_lr 1e-3) | IBP-WF: Adam 1e-3 for all |
| temperature_start | = temperature (constant) | 10 on 3-channel inputs, else constant | IBP-WF (1) |
| finetune_epochs | 0 | 1 (of the recipe's E) | IBP-WF MNIST configs: `fine_tuning: True`, "a few more epochs" |
| eval_threshold (kappa) | 0 (keep every factor) | 0.5 | IBP-WF kappa: 0.5 splitMNIST/CIFAR, 0.6 permutedMNIST |

(1) IBP-WF splitCIFAR10: 10 -> 0.666 by 0.99 a step; its MNIST configs: constant 0.6-0.666.
`temperature` (default 2/3) is the final or constant value.

`recipe = "personal"` is ibp-wf with the second search's choices (docs/lab/reproduction.md, "Second
search"; chosen on MNIST multimodal, seeds 0-1, 30 rounds; reported on held-out seeds 2-4 at
100 rounds), the recipe that personalises. Any of them given explicitly overrides it:

| setting | personal | where the search chose it |
| --- | --- | --- |
| optimizer | adam-selection | stage 1 (ibp-wf's Adam for every parameter: minority at 0%) |
| adam_lr | 0.03 | stage 2 (of 0.01, 0.03, 0.1) |
| r_init_mean | 1 | stage r: +4.4 points (IBP-WF's 0 starts the layer ~20x small under SGD) |
| temperature_start | 10 (annealed by 0.99 a step to 2/3) | stage 7 |
| kl_weight | 0.01 | second search: the paper's KL outweighs the data's pull on pi 3-10x |

`optimizer = "adam-selection"` is the middle way: Adam only for the private pi, c, d, and the
paper's SGD at the shared lr for the dictionary it averages.

Temperature: tau(s) = max(temperature_start * temperature_decay^s, temperature), s counting
the client's local steps. `temperature_clock = "client"` counts them over every round the client
has trained (IBP-WF counts over a task's training; a client's rounds are its one task); the
count is private state (`waffle.steps`). "round" restarts the schedule each round.

Fine-tuning, and where it runs in a federation: the last `finetune_epochs` local epochs of every
round train on the deterministic selection b = pi 1[pi >= kappa] with no KL, which is how the
client is evaluated. IBP-WF fine-tunes once after a task's training; a WAFFLe client's training
is interrupted by averaging every round, and the shared dictionary it starts from changes each
time, so we fine-tune at the end of each of its rounds: every uplink then comes from the model
the client deploys, the phase needs no knowledge of which round is a client's last (under
partial participation a client cannot tell), and it needs nothing from the round loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from fedattack.options import one_of
from fedattack.registry import UserError
from fedattack.target import State

from . import ibp

RECIPES = ("literal", "ibp-wf", "personal")
PRESETS: dict[str, dict[str, Any]] = {  # a named recipe's settings, under the user's own
    "personal": {"optimizer": "adam-selection", "adam_lr": 0.03, "r_init_mean": 1.0,
                 "temperature_start": 10.0, "kl_weight": 0.01},
}
OPTIMIZERS = ("sgd", "adam-selection", "adam")
STEPS = "waffle.steps"  # private: the client's local steps so far (temperature_clock = client)


@dataclass(frozen=True)
class Resolved:
    """The recipe's choices after defaults (a negative or empty setting takes the recipe's)."""

    optimizer: str
    temperature_start: float
    temperature: float
    decay: float
    clock: str
    finetune_epochs: int
    kappa: float

    @property
    def anneals(self) -> bool:
        return self.temperature_start != self.temperature

    @property
    def counts_steps(self) -> bool:
        return self.anneals and self.clock == "client"


def with_preset(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The user's settings over their named recipe's preset (keys kebab- or snake-case)."""
    given = {str(k).strip().replace("-", "_"): v for k, v in overrides.items()}
    return {**PRESETS.get(str(given.get("recipe", "")).strip(), {}), **given}


def resolve(hyper: Any, input_shape: tuple[int, ...], epochs: int) -> Resolved:
    """The choices of `hyper.recipe`, each overridden by its own setting when given."""
    ibp_wf = hyper.recipe in ("ibp-wf", "personal")
    start = hyper.temperature_start
    if start < 0:
        start = 10.0 if ibp_wf and input_shape[0] == 3 else hyper.temperature
    finetune = hyper.finetune_epochs if hyper.finetune_epochs >= 0 else int(ibp_wf)
    if finetune >= epochs and finetune > 0:
        raise UserError(f"waffle-ibp finetune_epochs={finetune} leaves no variational epoch "
                        f"of the recipe's {epochs}")
    kappa = hyper.eval_threshold if hyper.eval_threshold >= 0 else (0.5 if ibp_wf else 0.0)
    return Resolved(optimizer=hyper.optimizer or ("adam" if ibp_wf else "sgd"),
                    temperature_start=float(max(start, hyper.temperature)),
                    temperature=float(hyper.temperature), decay=float(hyper.temperature_decay),
                    clock=hyper.temperature_clock, finetune_epochs=int(finetune), kappa=float(kappa))


def check(hyper: Any) -> None:
    one_of(hyper.recipe, RECIPES, "waffle-ibp recipe")
    if hyper.optimizer:
        one_of(hyper.optimizer, OPTIMIZERS, "waffle-ibp optimizer")
    one_of(hyper.temperature_clock, ("client", "round"), "waffle-ibp temperature_clock")
    if not 0 < hyper.temperature_decay <= 1 or hyper.adam_lr <= 0:
        raise UserError("waffle-ibp needs 0 < temperature_decay <= 1 and adam_lr > 0")


def temperature(rec: Resolved, consts: State, step: torch.Tensor) -> float | torch.Tensor:
    """The relaxed-Bernoulli temperature of this local step (a float when it is constant)."""
    if not rec.anneals:
        return rec.temperature
    s = step.to(torch.float32) + (consts[STEPS] if rec.counts_steps else 0.0)
    return (rec.temperature_start * rec.decay ** s).clamp_min(rec.temperature)


def selection_health(pis: torch.Tensor, prior: torch.Tensor, kappa: float) -> dict[str, float]:
    """How far the clients' selections (rows of pi) moved from the prior, and how they differ."""
    on = pis >= kappa
    return {"clients": int(pis.shape[0]),
            "mean_abs_from_prior": float((pis - prior).abs().mean()),
            "max_abs_from_prior": float((pis - prior).abs().max()),
            "between_client_std": float(pis.std(0, unbiased=False).mean()),
            "active_factors_mean": float(on.sum(1).float().mean()),
            "distinct_factor_sets": int(torch.unique(on, dim=0).shape[0]),
            "share_with_the_priors_set": float((on == (prior >= kappa)).all(1).float().mean())}


def health_report(layers: dict[str, tuple[torch.Tensor, torch.Tensor]], groups: list[str],
                  kappa: float) -> dict[str, Any]:
    """Per factorised layer: `selection_health` over all trained clients and per group.

    `layers` maps a layer to (pi of each trained client, the prior's mean pi) and `groups`
    gives each trained client's group (multimodal partitions have two)."""
    out: dict[str, Any] = {"threshold": kappa, "layers": {}}
    for layer, (pis, prior) in layers.items():
        entry: dict[str, Any] = {"all": selection_health(pis, prior, kappa)}
        if len(set(groups)) > 1:
            entry["groups"] = {g: selection_health(pis[torch.tensor([k == g for k in groups])],
                                                   prior, kappa)
                               for g in sorted(set(groups))}
        out["layers"][layer] = entry
    return out


def prior_mean(alpha: float, num_factors: int) -> torch.Tensor:
    """The prior's mean pi as the client starts from it (clipped like its logit)."""
    return torch.sigmoid(ibp.prob_logit(ibp.prior_mean_probs(alpha, num_factors)))
