"""`rmia`: Robust Membership Inference Attack, offline (Zarifzadeh et al., ICML 2024).

The auxiliary data is cut, by the attack's seed, into a population (`population` records z,
never trained on by a reference model) and the pool the reference models train on (offline:
victim's size and class mix, no query is ever "in"). With p(x | theta) the probability the
model gives x's class:

    Pr(x) = mean over reference models of p(x | theta_ref)   (all "out" models), corrected
            offline to the in/out average the paper wants: Pr(x) ~ ((1 + a) Pr_out(x) + 1 - a) / 2
    LR(x, z) = [p(x | theta) / Pr(x)] / [p(z | theta) / Pr(z)]
    score(x) = the share of population points z with LR(x, z) >= gamma

Settings: `references` (16), `population` (most population points; at most a third of the
auxiliary data), `a` (0.3: the offline correction, the paper's tuned value lies in 0.2-0.6
and is best set on a reference model held out as a target), `gamma` (1.0: the paper's pairwise
threshold), `in_fraction` as LiRA's. Ties (queries that dominate every z) are broken by the
mean log-ratio over z, which keeps the order among the strongest members the low-FPR regime
reads; that is a refinement of ours, not the paper's.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace as _replace

import numpy as np
import torch

from fedattack.attacks.base import Adversary, AuditRole, NotApplicable
from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.hidden_parts.base import log_probs
from fedattack.attacks.membership.family import MEMBERSHIP_METRICS, Calibrated
from fedattack.attacks.membership.reference_models import (
    TrainsModels,
    offline_plan,
    offline_size,
    plan_info,
    reference_log_probs,
    references_cost,
    train_references,
    true_class_log_prob,
    victim_counts,
)
from fedattack.attacks.planning.cost import Cost, Workload, cheaper_setting
from fedattack.registry import UserError
from fedattack.rng import numpy_rng


@dataclass(frozen=True, kw_only=True)
class RmiaSettings:
    """references: reference models. population: most population points z. a: the offline
    correction. gamma: the pairwise likelihood-ratio threshold. in_fraction: as LiRA's."""

    references: int = 16
    population: int = 1000
    a: float = 0.3
    gamma: float = 1.0
    in_fraction: float = 0.5

    def __post_init__(self) -> None:
        if self.references < 1:
            raise UserError(f"rmia references={self.references} must be at least 1")
        if self.population < 1:
            raise UserError(f"rmia population={self.population} must be at least 1")
        check_pairwise_test("rmia", self.a, self.gamma)
        if not 0.0 < self.in_fraction < 1.0:
            raise UserError("rmia in_fraction must be between 0 and 1")


def check_pairwise_test(attack: str, a: float, gamma: float) -> None:
    """The offline correction a and the pairwise threshold gamma, shared by every RMIA-style test."""
    if not 0.0 <= a <= 1.0:
        raise UserError(f"{attack} a={a} must be between 0 and 1")
    if gamma <= 0:
        raise UserError(f"{attack} gamma={gamma} must be positive")


def split_population(aux: Samples, most: int, seed: int) -> tuple[Samples, Samples]:
    """(population z, the reference models' pool), disjoint."""
    order = numpy_rng(seed, "rmia-population").permutation(len(aux))
    k = min(most, len(aux) // 3)
    if k < 1:
        raise NotApplicable("too little auxiliary data for a population; raise --aux-size")
    return aux.take(order[:k]), aux.take(order[k:])


def relative_log_prob(target_lp: np.ndarray, ref_lps: np.ndarray, a: float) -> np.ndarray:
    """log [p(x | theta) / Pr(x)] with the offline correction of Pr(x) (ref_lps: models x points)."""
    pr_out = np.exp(ref_lps).mean(0)
    return target_lp - np.log(0.5 * ((1 + a) * pr_out + (1 - a)))


def pairwise_scores(rel_x: np.ndarray, rel_z: np.ndarray, gamma: float) -> np.ndarray:
    """The share of z with LR(x, z) >= gamma, ties broken by the mean log LR (below 1/|z|)."""
    log_lr = rel_x[:, None] - rel_z[None, :]
    share = (log_lr >= np.log(gamma)).mean(1)
    tiebreak = np.tanh(log_lr.mean(1) / 10.0) * 0.5 / (len(rel_z) + 1)
    return share + tiebreak


class Rmia(TrainsModels):
    """Offline RMIA: pairwise likelihood ratios against population points."""

    name = "rmia"
    requires = frozenset({"aux", "queries"})
    Settings = RmiaSettings
    fast_settings = {"references": 2, "population": 50}
    metrics = tuple(_replace(m, label=f"{m.label} by RMIA") for m in MEMBERSHIP_METRICS)
    audit = AuditRole("membership", strength=40)  # docs/privacy.md: 7.0x Shokri's TPR at 1% FPR

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        s = self.settings
        population = min(s.population, work.aux // 3)
        trained_on = offline_size(work, work.aux - population, s.in_fraction)
        return references_cost(work, s.references, trained_on, work.queries + population, chunk=chunk)

    def cheaper(self, work: Workload, memory: int, seconds: float | None) -> str:
        return cheaper_setting(self, work, memory, seconds, "references", [8, 4, 2, 1])

    def scores(self, adv: Adversary, gen: torch.Generator) -> Calibrated:
        s, target, queries = self.settings, adv.view.target, adv.knowledge.queries
        seed = int(torch.randint(2**62, (1,), generator=gen))
        aux = self.labelled(adv, adv.knowledge.aux)
        population, pool = split_population(aux, s.population, seed)
        plan = offline_plan(pool, victim_counts(adv, pool, s.in_fraction), s.references, s.in_fraction,
                            seed, len(queries))
        models = train_references(adv, plan, seed)
        q_logp = self.query_log_probs(adv)
        qy, zy = self.query_labels(adv, q_logp), population.y.numpy()
        rel_x = relative_log_prob(true_class_log_prob(q_logp, qy), np.stack(
            [true_class_log_prob(lp, qy) for lp in reference_log_probs(adv, models, queries.x)]), s.a)
        z_target = true_class_log_prob(log_probs(target, adv.model.params, population.x), zy)
        rel_z = relative_log_prob(z_target, np.stack(
            [true_class_log_prob(lp, zy) for lp in reference_log_probs(adv, models, population.x)]), s.a)
        return Calibrated(pairwise_scores(rel_x, rel_z, s.gamma),
                          info={**plan_info(plan), "population": len(population), "a": s.a, "gamma": s.gamma})
