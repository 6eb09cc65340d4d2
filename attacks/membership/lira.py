"""The Likelihood Ratio Attack (Carlini et al., S&P 2022): `lira-offline`, `lira-online`, and
`lira-rounds`, its federated form over every round the adversary saw.

Reference models repeat the victim's local training on data the adversary chose
(`reference_models.py`). Per query, the logit-scaled confidence of its class,
phi = log(p / (1 - p)) (near-Gaussian across models, unlike p), is fitted with a Gaussian over
the reference models:

- `lira-offline`: reference models on auxiliary data only, so every query is "out" of every one
  of them; the victim's phi is scored by the one-sided test of "larger than an out model gives":
  score = -log P[N(mu_out, sigma_out^2) >= phi] (a log survival function, so it never saturates
  at p-values below 1e-16).
- `lira-online`: each reference model trains on a set that holds each query with probability
  1/2 (topped up with auxiliary data to the victim's class counts), so every query has "in" and
  "out" models; the score is log N(phi; mu_in, sigma_in^2) - log N(phi; mu_out, sigma_out^2). A
  query that landed on one side only (rare with 16 models: 2^-15 each) borrows the other side
  from the mean in/out shift over the queries that have both.
- `lira-rounds` (an FL signal): a federation shows the eavesdropper and the server the victim's
  model after every round it took part in, not once. Each visible round r is one offline test:
  reference models start from that round's downlink, the victim's model of round r is rebuilt
  from that round's messages. A member keeps pulling its own confidence up round after round,
  so the per-round evidence adds up: the sum over rounds of -log P[out >= phi_r] (Fisher's
  combination of the one-sided p-values, in log space). With one visible round it is offline.

Settings: `references` (16), `variance` ("per-example": each query's own sigma, the paper's
choice with many models; "global": one sigma, the mean of the per-query variances, the paper's
advice for few models), `in_fraction` (the largest share of an auxiliary class one reference
model trains on); `lira-rounds` adds `max_rounds` (the latest rounds used; reference models cost
`references` x rounds trainings). Deviation, stated: no augmentation queries (the victim's recipe
has none).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace as _replace

import numpy as np
import torch
from scipy import stats

from fedattack import progress
from fedattack.attacks.base import Adversary, AuditRole
from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.membership.family import MEMBERSHIP_METRICS, Calibrated
from fedattack.attacks.membership.reference_models import (
    Plan,
    TrainsModels,
    logit_confidence,
    offline_plan,
    offline_size,
    online_plan,
    plan_info,
    reference_confidences,
    references_cost,
    train_references,
    victim_counts,
)
from fedattack.attacks.planning.cost import Cost, Workload, cheaper_setting
from fedattack.attacks.view import Observation
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


@dataclass(frozen=True, kw_only=True)
class LiraRoundsSettings(LiraSettings):
    """As lira-offline's; max_rounds: the latest visible rounds of the victim used."""

    max_rounds: int = 5

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_rounds < 1:
            raise UserError(f"lira-rounds max_rounds={self.max_rounds} must be at least 1")


def fit_sigma(phis: np.ndarray, variance: str) -> np.ndarray:
    """Per-query sigma over models (axis 0), or one pooled sigma for every query."""
    var = phis.var(axis=0, ddof=1) if len(phis) > 1 else np.zeros(phis.shape[1])
    sigma = np.sqrt(var) if variance == "per-example" else np.full(var.shape, np.sqrt(var.mean()))
    return np.maximum(sigma, MIN_SIGMA)


class _Lira(TrainsModels):
    """What the three share: reference models on the adversary's (labelled) auxiliary data."""

    requires = frozenset({"aux", "queries"})
    Settings = LiraSettings
    fast_settings = {"references": 4, "variance": "global"}

    def cheaper(self, work: Workload, memory: int, seconds: float | None) -> str:
        return cheaper_setting(self, work, memory, seconds, "references", [8, 4, 2])

    def start(self, adv: Adversary, gen: torch.Generator) -> tuple[int, Samples, np.ndarray]:
        """The attack's seed, the auxiliary data labelled, and the queries' labels."""
        seed = int(torch.randint(2**62, (1,), generator=gen))
        aux = self.labelled(adv, adv.knowledge.aux)
        return seed, aux, self.query_labels(adv, self.query_log_probs(adv))

    def offline(self, adv: Adversary, aux: Samples, seed: int) -> Plan:
        s = self.settings
        return offline_plan(aux, victim_counts(adv, aux, s.in_fraction), s.references, s.in_fraction, seed,
                            len(adv.knowledge.queries))

    def one_sided(self, adv: Adversary, plan: Plan, seed: int, labels: np.ndarray) -> np.ndarray:
        """-log P[out >= phi] of each query, against reference models trained from `adv`'s round."""
        out = reference_confidences(adv, train_references(adv, plan, seed), adv.knowledge.queries.x, labels)
        phi = logit_confidence(self.query_log_probs(adv), labels)
        return -stats.norm.logsf(phi, out.mean(0), fit_sigma(out, self.settings.variance))


class LiraOffline(_Lira):
    """Offline LiRA: a one-sided Gaussian test against reference models that never saw the query."""

    name = "lira-offline"
    metrics = tuple(_replace(m, label=f"{m.label} by offline LiRA") for m in MEMBERSHIP_METRICS)
    audit = AuditRole("membership", strength=20)

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        s = self.settings
        return references_cost(work, s.references, offline_size(work, work.aux, s.in_fraction), work.queries,
                               chunk=chunk)

    def scores(self, adv: Adversary, gen: torch.Generator) -> Calibrated:
        seed, aux, labels = self.start(adv, gen)
        plan = self.offline(adv, aux, seed)
        return Calibrated(self.one_sided(adv, plan, seed, labels),
                          info={**plan_info(plan), "variance": self.settings.variance})


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


class LiraOnline(_Lira):
    """Online LiRA: in and out Gaussians per query from reference models trained with and without it."""

    name = "lira-online"
    metrics = tuple(_replace(m, label=f"{m.label} by online LiRA") for m in MEMBERSHIP_METRICS)
    audit = AuditRole("membership", strength=30)

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        s = self.settings  # half the queries in each model, topped up to the victim's size
        trained_on = max(1, min(work.samples, work.queries // 2 + int(s.in_fraction * work.aux)))
        return references_cost(work, s.references, trained_on, work.queries, chunk=chunk)

    def scores(self, adv: Adversary, gen: torch.Generator) -> Calibrated:
        s = self.settings
        seed, aux, labels = self.start(adv, gen)
        queries = _replace(adv.knowledge.queries, y=torch.as_tensor(labels, dtype=torch.long))
        plan = online_plan(aux, queries, victim_counts(adv, aux, s.in_fraction), s.references,
                           s.in_fraction, seed)
        phis = reference_confidences(adv, train_references(adv, plan, seed), queries.x, labels)
        scores = likelihood_ratio(logit_confidence(self.query_log_probs(adv), labels), phis, plan.included,
                                  s.variance)
        in_counts = plan.included.sum(0)
        return Calibrated(scores, info={**plan_info(plan), "variance": s.variance,
                                        "in_models_per_query": {"min": int(in_counts.min()),
                                                                "max": int(in_counts.max())}})


def round_observations(adv: Adversary, most: int) -> list[Observation]:
    """The victim's visible rounds with an uplink (latest `most`), each as an Observation."""
    view = adv.view
    rounds = sorted({e["round"] for e in view.entries()
                     if e["kind"] == "uplink" and e["sender"] == view.victim})[-most:]
    out = []
    for rnd in rounds:
        msgs = view.messages(client=view.victim, rounds={rnd})
        down = next((m.payload for m in msgs if m.kind == "downlink"), None)
        up = next((m.payload for m in msgs if m.kind == "uplink"), None)
        out.append(Observation(round=rnd, down=down, up=up, deployed=view.deployed))
    return out or [adv.obs]


class LiraRounds(_Lira):
    """Offline LiRA on each visible round of the victim, evidence summed over rounds."""

    name = "lira-rounds"
    Settings = LiraRoundsSettings
    fast_settings = {"references": 4, "variance": "global", "max_rounds": 2}
    metrics = tuple(_replace(m, label=f"{m.label} by LiRA over rounds") for m in MEMBERSHIP_METRICS)
    audit = AuditRole("membership", strength=10)

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        s = self.settings
        return references_cost(work, s.references, offline_size(work, work.aux, s.in_fraction), work.queries,
                               rounds=min(s.max_rounds, work.rounds), chunk=chunk)

    def cheaper(self, work: Workload, memory: int, seconds: float | None) -> str:
        return (cheaper_setting(self, work, memory, seconds, "max_rounds", [3, 2, 1])
                or super().cheaper(work, memory, seconds))

    def scores(self, adv: Adversary, gen: torch.Generator) -> Calibrated:
        seed, aux, labels = self.start(adv, gen)
        plan = self.offline(adv, aux, seed)
        total = np.zeros(len(adv.knowledge.queries))
        observations = round_observations(adv, self.settings.max_rounds)
        for k, obs in progress.steps(enumerate(observations), "rounds", len(observations)):
            at_round = _replace(adv, obs=obs, model=adv.reconstructor(obs, key=10_000 + k))
            total += self.one_sided(at_round, plan, seed + k, labels)
        return Calibrated(total, info={**plan_info(plan), "variance": self.settings.variance,
                                       "rounds": [o.round for o in observations]})
