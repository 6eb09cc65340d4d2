"""The membership-inference family: what every membership attack shares.

A membership attack judges the adversary's query set (`Knowledge.queries`: the victim's
training records and at least as many non-members of the same class mix, by default 1,000,
shuffled) and writes one number per query, higher meaning "more likely a member":
`scores(adv, gen)`. This base turns the scores into 0/1 guesses (`decide`; by default the top
`member_share` of the scores, the protocol's public share of members), computes the family's
metrics (balanced accuracy, which is the accuracy on a balanced set,
precision, recall, F1, ROC AUC, TPR at 1% and 0.1% FPR where the non-members resolve them,
the full-resolution ROC curve), their bootstrap confidence intervals and a test against
chance (`membership_metrics`), keeps every query's score in the result, and runs the
loss-threshold baseline (Yeom et al. 2018) beside every membership attack.

When the threat model does not know labels, the queries' and auxiliary data's labels are not
handed over; wherever a class is needed (the baseline's loss, an attack's per-class model),
the family uses the label the attacked model predicts, and every result says so.

An attack that learns more than a score (e.g. shadow models, which also calibrate the baseline's
threshold) returns `Calibrated` from `scores` instead of a bare array.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np
import torch

from fedattack.attacks.base import Adversary, Attack, Scored
from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.evaluation.truth import GroundTruth
from fedattack.attacks.hidden_parts.base import log_probs
from fedattack.attacks.membership.metrics import all_metrics, statistics
from fedattack.attacks.planning.cost import Cost, Workload
from fedattack.results import Metric

RATE = (0.0, 1.0)
MEMBERSHIP_METRICS = (
    Metric(key="accuracy", label="accuracy", unit="%", scale=100.0, bounds=RATE),
    Metric(key="f1", label="F1", unit="%", scale=100.0, bounds=RATE),
    Metric(key="auc", label="AUC", bounds=RATE, digits=3, primary=True, chance=0.5),
    Metric(key="tpr_at_1fpr", label="TPR @ 1% FPR", unit="%", scale=100.0, bounds=RATE, chance=0.01),
    Metric(key="tpr_at_01fpr", label="TPR @ 0.1% FPR", unit="%", scale=100.0, bounds=RATE, chance=0.001),
    Metric(key="precision", label="precision", unit="%", scale=100.0, bounds=RATE, headline=False),
    Metric(key="recall", label="recall", unit="%", scale=100.0, bounds=RATE, headline=False),
)
PREDICTED = "predicted by the attacked model (the threat model does not know labels)"
# Scoring a membership result (its metrics, the baseline's, bootstrap intervals): seconds per
# query, measured on 2,000-3,000 queries (0.25-0.36 s).
SCORE_SECONDS_PER_QUERY = 1.3e-4


@dataclass
class Calibrated:
    """Scores with what the attack learnt beside them: the baseline's threshold on -loss (None:
    the family's default) and notes for the result."""

    scores: np.ndarray
    loss_threshold: float | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class MembershipGuesses:
    """Per query: the attack's membership score and 0/1 guess, and the baseline's."""

    scores: np.ndarray
    predicted: np.ndarray
    loss_scores: np.ndarray
    loss_predicted: np.ndarray
    info: dict[str, Any]


class MembershipAttack(Attack):
    """Base of membership attacks: write `scores` (and optionally `decide`)."""

    requires: ClassVar[frozenset[str]] = frozenset({"queries"})
    metrics: ClassVar[tuple[Metric, ...]] = MEMBERSHIP_METRICS
    # The attack claims to find members at low FPR (Carlini et al. 2022); the calibration tests
    # hold every attack that claims it to TPR >= 10% at 1% FPR on a model that memorised.
    low_fpr: ClassVar[bool] = True

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        """A score-only attack's (its `scores` reads the attacked model on the queries, as the
        README's `Confidence` does): the queries through the model, for the score and the
        loss-threshold baseline, and the family's scoring. An attack that trains shadow or
        reference models declares its own."""
        p, q = work.probe, work.queries
        memory = 2 * q * work.classes * 8 + 4 * min(q, 1024) * p.input_numel
        return Cost(q * (2 * p.forward_seconds + SCORE_SECONDS_PER_QUERY), memory, f"{q:,} queries scored")

    def scores(self, adv: Adversary, gen: torch.Generator) -> np.ndarray | Calibrated:
        """One number per query of `adv.knowledge.queries`, higher = more likely a member."""
        raise NotImplementedError

    def decide(self, scores: np.ndarray, member_share: float = 0.5) -> np.ndarray:
        """The 0/1 guesses: by default the top `member_share` of the scores (the protocol says how
        many queries are members, as a balanced protocol says "half")."""
        return (scores >= np.quantile(scores, 1.0 - member_share)).astype(int)

    def run(self, adv: Adversary, gen: torch.Generator) -> MembershipGuesses:
        out = self.scores(adv, gen)
        cal = out if isinstance(out, Calibrated) else Calibrated(np.asarray(out))
        scores = np.asarray(cal.scores, dtype=np.float64)
        logp = self.query_log_probs(adv)
        labels = self.query_labels(adv, logp)
        neg_loss = logp[torch.arange(len(labels)), torch.as_tensor(labels)].numpy()
        labels_note = "known" if adv.knowledge.labels_known else PREDICTED
        info = {**cal.info, "labels": labels_note, "queries": len(labels)}
        share = adv.knowledge.member_share
        threshold = (float(np.quantile(neg_loss, 1.0 - share)) if cal.loss_threshold is None
                     else cal.loss_threshold)
        return MembershipGuesses(scores, self.decide(scores, share), neg_loss,
                                 (neg_loss >= threshold).astype(int), info)

    @staticmethod
    def query_log_probs(adv: Adversary) -> torch.Tensor:
        """The attacked (rebuilt) model's log-probabilities on the queries."""
        return log_probs(adv.view.target, adv.model.params, adv.knowledge.queries.x)

    @staticmethod
    def query_labels(adv: Adversary, logp: torch.Tensor) -> np.ndarray:
        """The queries' classes: known, or the attacked model's predictions."""
        if adv.knowledge.labels_known:
            return adv.knowledge.queries.y.numpy()
        return logp.argmax(1).numpy()

    @staticmethod
    def labelled(adv: Adversary, samples: Samples) -> Samples:
        """`samples` with their labels, or with the attacked model's predicted labels if unknown."""
        if adv.knowledge.labels_known or len(samples) == 0:
            return samples
        predicted = log_probs(adv.view.target, adv.model.params, samples.x).argmax(1)
        return replace(samples, y=predicted)

    def score(self, guesses: MembershipGuesses, truth: GroundTruth) -> Scored:
        is_member = truth.is_member.astype(int)
        metrics, curves = all_metrics(is_member, guesses.predicted, guesses.scores)
        baseline, _ = all_metrics(is_member, guesses.loss_predicted, guesses.loss_scores)
        nonmembers = int((1 - is_member).sum())
        extra = {"membership": {**guesses.info, "members": int(is_member.sum()), "nonmembers": nonmembers,
                                "fpr_resolution": 1.0 / max(1, nonmembers),
                                **statistics(is_member, guesses.scores),
                                "per_query": per_query(guesses.scores, is_member)}}
        return Scored(metrics=metrics, curves=curves, baselines={"loss-threshold": baseline}, extra=extra)


def per_query(scores: np.ndarray, is_member: np.ndarray) -> dict[str, list]:
    """Each query's score (10 significant digits: RMIA's strongest members differ from the top
    non-members in the 5th-7th digit, and a TPR at 0.1% FPR recomputed from rounded scores
    must not turn them into ties) and membership, in query order: what a report of
    per-example vulnerability reads. Non-finite scores are stored as None (JSON has no inf)."""
    rounded = [float(f"{s:.10g}") if np.isfinite(s) else None for s in scores.tolist()]
    return {"score": rounded, "member": [int(m) for m in is_member.tolist()]}
