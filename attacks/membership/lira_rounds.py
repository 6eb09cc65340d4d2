"""`lira-rounds`: offline LiRA over every round of the victim the adversary saw (an FL signal).

A federation shows the eavesdropper and the server the victim's model after every round it took
part in, not once. Each visible round r is one offline LiRA test (`lira-offline`): reference
models start from that round's downlink and repeat the local training on auxiliary data, and
the victim's model of round r is rebuilt from that round's messages. A member keeps pulling
its own confidence up round after round, so the per-round evidence adds up: the score is the
sum over rounds of -log P[out >= phi_r] (Fisher's combination of the one-sided p-values, in
log space). With one visible round it is `lira-offline`.

Settings as `lira-offline`, plus `max_rounds` (the latest rounds used; reference models cost
`references` x rounds trainings).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace as _replace

import numpy as np
import torch
from scipy import stats

from fedattack import progress
from fedattack.attacks.base import Adversary, AuditRole
from fedattack.attacks.membership.family import MEMBERSHIP_METRICS, Calibrated, MembershipAttack
from fedattack.attacks.membership.lira import LiraSettings, fit_sigma
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
from fedattack.attacks.view import Observation
from fedattack.registry import UserError


@dataclass(frozen=True, kw_only=True)
class LiraRoundsSettings(LiraSettings):
    """As lira-offline's; max_rounds: the latest visible rounds of the victim used."""

    max_rounds: int = 5

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_rounds < 1:
            raise UserError(f"lira-rounds max_rounds={self.max_rounds} must be at least 1")


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


class LiraRounds(MembershipAttack):
    """Offline LiRA on each visible round of the victim, evidence summed over rounds."""

    name = "lira-rounds"
    requires = frozenset({"aux", "queries"})
    Settings = LiraRoundsSettings
    fast_settings = {"references": 4, "variance": "global", "max_rounds": 2}
    metrics = tuple(_replace(m, label=f"{m.label} by LiRA over rounds") for m in MEMBERSHIP_METRICS)
    audit = AuditRole("membership", strength=10)

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        s = self.settings
        return references_cost(work, s.references, offline_size(work, work.aux, s.in_fraction), work.queries,
                               rounds=min(s.max_rounds, work.rounds))

    def cheaper(self, work: Workload, memory: int, seconds: float | None) -> str:
        return (cheaper_setting(self, work, memory, seconds, "max_rounds", [3, 2, 1])
                or cheaper_setting(self, work, memory, seconds, "references", [8, 4, 2]))

    def scores(self, adv: Adversary, gen: torch.Generator) -> Calibrated:
        s, queries = self.settings, adv.knowledge.queries
        seed = int(torch.randint(2**62, (1,), generator=gen))
        aux = self.labelled(adv, adv.knowledge.aux)
        labels = self.query_labels(adv, self.query_log_probs(adv))
        plan = offline_plan(aux, victim_counts(adv, aux, s.in_fraction), s.references, s.in_fraction,
                            seed, len(queries))
        total = np.zeros(len(queries))
        observations = round_observations(adv, s.max_rounds)
        for k, obs in progress.steps(enumerate(observations), "rounds", len(observations)):
            at_round = _replace(adv, obs=obs, model=adv.reconstructor(obs, key=10_000 + k))
            models = train_references(at_round, plan, seed + k)
            out = reference_confidences(at_round, models, queries.x, labels)
            phi = logit_confidence(self.query_log_probs(at_round), labels)
            total += -stats.norm.logsf(phi, out.mean(0), fit_sigma(out, s.variance))
        return Calibrated(total, info={**plan_info(plan), "variance": s.variance,
                                       "rounds": [o.round for o in observations]})
