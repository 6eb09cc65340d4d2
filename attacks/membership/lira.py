"""`lira-offline`: the Likelihood Ratio Attack, offline (Carlini et al., S&P 2022).

Reference models repeat the victim's local training on auxiliary data only, so every query is
"out" of every one of them. Per query, the logit-scaled confidence of its class,
phi = log(p / (1 - p)) (near-Gaussian across models, unlike p), is fitted with a Gaussian over
the reference models; the victim's phi is scored by the one-sided test of "larger than an out
model gives": score = -log P[N(mu_out, sigma_out^2) >= phi] (computed as a log survival
function, so it never saturates at p-values below 1e-16).

Settings: `references` (16), `variance` ("per-example": each query's own sigma, the paper's
choice with many models; "global": one sigma, the mean of the per-query variances, the paper's
advice for few models), `in_fraction` (the largest share of an auxiliary class one reference
model trains on). Deviation, stated: no augmentation queries (the victim's recipe has none).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace as _replace

import numpy as np
import torch
from scipy import stats

from fedattack.attacks.base import Adversary, AuditRole
from fedattack.attacks.membership.family import MEMBERSHIP_METRICS, Calibrated, MembershipAttack
from fedattack.attacks.membership.reference_models import (
    logit_confidence,
    offline_plan,
    offline_size,
    plan_info,
    reference_confidences,
    references_cost,
    train_references,
    victim_counts,
)
from fedattack.attacks.planning.cost import Cost, Workload, cheaper_setting
from fedattack.options import one_of
from fedattack.registry import UserError

VARIANCES = ("per-example", "global")
MIN_SIGMA = 1e-3  # phi's spread is never taken below this (identical reference models)


@dataclass(frozen=True, kw_only=True)
class LiraSettings:
    """references: reference models. variance: per-example or global. in_fraction: the largest
    share of an auxiliary class one reference model trains on."""

    references: int = 16
    variance: str = "per-example"
    in_fraction: float = 0.5

    def __post_init__(self) -> None:
        if self.references < 2:
            raise UserError(f"LiRA references={self.references}: at least 2 are needed for a variance")
        one_of(self.variance, VARIANCES, "LiRA variance")
        if not 0.0 < self.in_fraction < 1.0:
            raise UserError("LiRA in_fraction must be between 0 and 1")


def fit_sigma(phis: np.ndarray, variance: str) -> np.ndarray:
    """Per-query sigma over models (axis 0), or one pooled sigma for every query."""
    var = phis.var(axis=0, ddof=1) if len(phis) > 1 else np.zeros(phis.shape[1])
    sigma = np.sqrt(var) if variance == "per-example" else np.full(var.shape, np.sqrt(var.mean()))
    return np.maximum(sigma, MIN_SIGMA)


class LiraOffline(MembershipAttack):
    """Offline LiRA: a one-sided Gaussian test against reference models that never saw the query."""

    name = "lira-offline"
    requires = frozenset({"aux", "queries"})
    Settings = LiraSettings
    fast_settings = {"references": 4, "variance": "global"}
    metrics = tuple(_replace(m, label=f"{m.label} by offline LiRA") for m in MEMBERSHIP_METRICS)
    audit = AuditRole("membership", strength=20)

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        s = self.settings
        return references_cost(work, s.references, offline_size(work, work.aux, s.in_fraction), work.queries)

    def cheaper(self, work: Workload, memory: int, seconds: float | None) -> str:
        return cheaper_setting(self, work, memory, seconds, "references", [8, 4, 2])

    def scores(self, adv: Adversary, gen: torch.Generator) -> Calibrated:
        s, queries = self.settings, adv.knowledge.queries
        seed = int(torch.randint(2**62, (1,), generator=gen))
        aux = self.labelled(adv, adv.knowledge.aux)
        plan = offline_plan(aux, victim_counts(adv, aux, s.in_fraction), s.references, s.in_fraction,
                            seed, len(queries))
        models = train_references(adv, plan, seed)
        q_logp = self.query_log_probs(adv)
        labels = self.query_labels(adv, q_logp)
        out = reference_confidences(adv, models, queries.x, labels)
        phi = logit_confidence(q_logp, labels)
        scores = -stats.norm.logsf(phi, out.mean(0), fit_sigma(out, s.variance))
        return Calibrated(scores, info={**plan_info(plan), "variance": s.variance})
