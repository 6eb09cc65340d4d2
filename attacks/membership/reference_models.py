"""Reference models for likelihood-ratio membership attacks (LiRA, RMIA).

A reference model is a shadow client (`attacks/membership/shadow.py`): the attacked method's local
training, the victim's recipe, started from the downlink the victim started from, on data the
adversary chose; all of them go to the executor in one call (the batched executor stacks them).
Each is rebuilt with the victim's reconstruction strategy and queried like the victim.

Two ways to choose their data (Carlini et al. 2022):
- offline: auxiliary data only, with the victim's size and class mix (no query is ever "in");
- online: every query is in a model's training set with probability 1/2 (independently per
  model), topped up per class with auxiliary data to the victim's class counts, so each query
  has models trained with it and models trained without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from fedattack.attacks.base import Adversary, NotApplicable
from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.hidden_parts.base import log_probs
from fedattack.attacks.membership.family import SCORE_SECONDS_PER_QUERY, MembershipAttack
from fedattack.attacks.membership.shadow import ShadowData, shadow_splits, train_shadows
from fedattack.attacks.planning.cost import Cost, Workload
from fedattack.rng import numpy_rng
from fedattack.target import State


def logit_confidence(logp: torch.Tensor, labels: np.ndarray) -> np.ndarray:
    """log(p / (1 - p)) of the given class, from log-probabilities without ever forming 1 - p:
    log(1 - p_y) is the log-sum-exp of the other classes' log-probabilities."""
    logp = logp.double()
    rows, idx = torch.arange(len(labels)), torch.as_tensor(labels, dtype=torch.long)
    true = logp[rows, idx]
    others = logp.clone()
    others[rows, idx] = -torch.inf
    return (true - others.logsumexp(1)).numpy()


def true_class_log_prob(logp: torch.Tensor, labels: np.ndarray) -> np.ndarray:
    return logp.double()[torch.arange(len(labels)), torch.as_tensor(labels, dtype=torch.long)].numpy()


@dataclass(frozen=True)
class Plan:
    """Each reference model's training data, and which queries it holds (models x queries)."""

    datas: list[ShadowData]
    included: np.ndarray


def victim_counts(adv: Adversary, aux: Samples, in_fraction: float) -> list[int]:
    """The victim's class counts if known, else `in_fraction` of every auxiliary class."""
    known = adv.knowledge.victim_class_counts
    if known:
        return list(known)
    return [int(in_fraction * c) for c in aux.class_counts(adv.view.target.num_classes)]


def offline_plan(aux: Samples, counts: list[int], models: int, in_fraction: float, seed: int,
                 queries: int) -> Plan:
    datas = shadow_splits(aux, counts, models, in_fraction, seed)
    return Plan(datas, np.zeros((models, queries), bool))


def online_plan(aux: Samples, queries: Samples, counts: list[int], models: int, in_fraction: float,
                seed: int) -> Plan:
    """Each query in with probability 1/2 per model; the rest of each class drawn from aux."""
    groups = aux.by_class()
    datas, included = [], np.zeros((models, len(queries)), bool)
    qy = queries.y.numpy()
    for j in range(models):
        rng = numpy_rng(seed, "online-plan", j)
        included[j] = rng.random(len(queries)) < 0.5
        fill = []
        for c, want in enumerate(counts):
            have = groups.get(c, np.zeros(0, np.int64))
            need = max(0, want - int((included[j] & (qy == c)).sum()))
            fill.append(rng.permutation(have)[:min(need, int(in_fraction * len(have)))])
        extra = aux.take(np.concatenate(fill) if fill else np.zeros(0, np.int64))
        trained = Samples.concat([queries.take(np.flatnonzero(included[j])), extra])
        datas.append(ShadowData(trained.take(rng.permutation(len(trained))), Samples.empty_like(aux)))
    return Plan(datas, included)


def train_references(adv: Adversary, plan: Plan, seed: int) -> list[State]:
    """Train every reference model in one executor call; rebuild each as the victim was."""
    if not adv.knowledge.recipe_known:
        raise NotApplicable("reference models repeat the victim's local training, and this threat "
                            "model does not know the local recipe")
    if not any(len(d.trained) for d in plan.datas):
        raise NotApplicable("no auxiliary data to train reference models on; raise --aux-size")
    solo = "deployed" in adv.reconstructor.strategy.needs
    shadows = train_shadows(adv, seed, plan.datas, solo)
    return [adv.reconstructor(sh.obs, key=j + 1).params for j, sh in enumerate(shadows)]


def reference_log_probs(adv: Adversary, models: list[State], x: torch.Tensor) -> list[torch.Tensor]:
    """Each reference model's log-probabilities on `x`."""
    return [log_probs(adv.view.target, params, x) for params in models]


def reference_confidences(adv: Adversary, models: list[State], x: torch.Tensor,
                           labels: np.ndarray) -> np.ndarray:
    """(models, queries): each reference model's logit-scaled confidence in each query's label."""
    return np.stack([logit_confidence(lp, labels) for lp in reference_log_probs(adv, models, x)])


def plan_info(plan: Plan) -> dict[str, object]:
    sizes = [len(d.trained) for d in plan.datas]
    return {"reference_models": len(sizes), "reference_sizes": {"min": min(sizes), "max": max(sizes)}}


def offline_size(work: Workload, pool: int, in_fraction: float) -> int:
    """About how many images one offline reference model trains on: the victim's size, at most
    `in_fraction` of the pool it draws from (per class, summed)."""
    return max(1, min(work.samples, int(in_fraction * pool)))


def references_cost(work: Workload, models: int, trained_on: int, scored: int, what: str = "reference models",
                    rounds: int = 1, chunk: int | None = None) -> Cost:
    """`models` local runs over `trained_on` images each (once per round used), `chunk` models
    at a time (None: all at once on an executor that stacks them, else one by one), and every
    model and the victim's scoring `scored` images. Memory: every model's training data (drawn
    up front) and parameters, the training of the models in one stack, and the
    log-probabilities kept."""
    p = work.probe
    stack = max(1, min(models, chunk or models)) if p.stacks else 1
    train = rounds * work.training_seconds(models, trained_on, stack)
    score = rounds * (models + 1) * scored * p.forward_seconds + work.queries * SCORE_SECONDS_PER_QUERY
    memory = (models * trained_on * p.input_numel * 4 + 3 * models * p.param_bytes + 8 * stack * p.param_bytes
              + 2 * (models + 1) * scored * work.classes * 8)
    rounds_note = f" x {rounds} rounds" if rounds > 1 else ""
    together = f", {stack} at a time" if stack > 1 else ""
    return Cost(train + score, memory,
                f"{models} {what} x {work.local_steps(trained_on):,} local steps{together}{rounds_note}", once=train)


class TrainsModels(MembershipAttack):
    """A membership attack that trains reference or shadow models (its setting `models_setting`):
    the planner may train them in chunks of fewer models (`Adversary.chunk`) to fit the memory
    budget; `train_shadows` trains each chunk in one executor call."""

    chunk_unit = "models"
    models_setting: ClassVar[str] = "references"

    def chunks(self, work: Workload) -> int:
        return max(1, int(getattr(self.settings, self.models_setting)))
