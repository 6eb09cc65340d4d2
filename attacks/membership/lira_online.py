"""`lira-online`: the Likelihood Ratio Attack, online (Carlini et al., S&P 2022).

Each reference model trains on a set that holds each query with probability 1/2 (topped up
with auxiliary data to the victim's class counts), so for every query there are "in" models
and "out" models. The logit-scaled confidence phi of the query's class is fitted with one
Gaussian over the in models and one over the out models; the score is the log likelihood
ratio log N(phi; mu_in, sigma_in^2) - log N(phi; mu_out, sigma_out^2) at the victim's phi.

A query that landed on one side only (rare with 16 models: 2^-15 each) borrows the other side
from the mean in/out shift over the queries that have both. Settings as `lira-offline`
(`references`, `variance`, `in_fraction`); the paper's default variance online is per-example.
"""

from __future__ import annotations

from dataclasses import replace as _replace

import numpy as np
import torch
from scipy import stats

from fedattack.attacks.base import Adversary, AuditRole
from fedattack.attacks.membership.family import MEMBERSHIP_METRICS, Calibrated, MembershipAttack
from fedattack.attacks.membership.lira import MIN_SIGMA, LiraSettings
from fedattack.attacks.membership.reference_models import (
    logit_confidence,
    online_plan,
    plan_info,
    reference_confidences,
    references_cost,
    train_references,
    victim_counts,
)
from fedattack.attacks.planning.cost import Cost, Workload, cheaper_setting


def side_fit(phis: np.ndarray, mask: np.ndarray, variance: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per query, the mean and sigma of phi over the models where `mask` holds, and where it can."""
    n = mask.sum(0)
    mean = np.where(n > 0, (phis * mask).sum(0) / np.maximum(n, 1), np.nan)
    sq = ((phis - np.nan_to_num(mean)) ** 2 * mask).sum(0)
    var = np.where(n > 1, sq / np.maximum(n - 1, 1), np.nan)
    pooled = np.nanmean(var) if np.isfinite(var).any() else MIN_SIGMA**2
    var = np.full(var.shape, pooled) if variance == "global" else np.where(np.isfinite(var), var, pooled)
    return mean, np.maximum(np.sqrt(var), MIN_SIGMA), n > 0


def likelihood_ratio(phi: np.ndarray, phis: np.ndarray, included: np.ndarray, variance: str) -> np.ndarray:
    mu_in, sd_in, has_in = side_fit(phis, included, variance)
    mu_out, sd_out, has_out = side_fit(phis, ~included, variance)
    both = has_in & has_out
    shift = float(np.mean(mu_in[both] - mu_out[both])) if both.any() else 0.0
    mu_in = np.where(has_in, mu_in, mu_out + shift)
    mu_out = np.where(has_out, mu_out, mu_in - shift)
    return stats.norm.logpdf(phi, mu_in, sd_in) - stats.norm.logpdf(phi, mu_out, sd_out)


class LiraOnline(MembershipAttack):
    """Online LiRA: in and out Gaussians per query from reference models trained with and without it."""

    name = "lira-online"
    requires = frozenset({"aux", "queries"})
    Settings = LiraSettings
    fast_settings = {"references": 4, "variance": "global"}
    metrics = tuple(_replace(m, label=f"{m.label} by online LiRA") for m in MEMBERSHIP_METRICS)
    audit = AuditRole("membership", strength=30)

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        s = self.settings  # half the queries in each model, topped up to the victim's size
        trained_on = max(1, min(work.samples, work.queries // 2 + int(s.in_fraction * work.aux)))
        return references_cost(work, s.references, trained_on, work.queries)

    def cheaper(self, work: Workload, memory: int, seconds: float | None) -> str:
        return cheaper_setting(self, work, memory, seconds, "references", [8, 4, 2])

    def scores(self, adv: Adversary, gen: torch.Generator) -> Calibrated:
        s = self.settings
        seed = int(torch.randint(2**62, (1,), generator=gen))
        aux = self.labelled(adv, adv.knowledge.aux)
        q_logp = self.query_log_probs(adv)
        labels = self.query_labels(adv, q_logp)
        queries = _replace(adv.knowledge.queries, y=torch.as_tensor(labels, dtype=torch.long))
        plan = online_plan(aux, queries, victim_counts(adv, aux, s.in_fraction), s.references,
                           s.in_fraction, seed)
        models = train_references(adv, plan, seed)
        phis = reference_confidences(adv, models, queries.x, labels)
        scores = likelihood_ratio(logit_confidence(q_logp, labels), phis, plan.included, s.variance)
        in_counts = plan.included.sum(0)
        return Calibrated(scores, info={**plan_info(plan), "variance": s.variance,
                                        "in_models_per_query": {"min": int(in_counts.min()),
                                                                "max": int(in_counts.max())}})
