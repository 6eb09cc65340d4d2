"""`fedmia`: the server's own signal, other clients as free reference models (Zhu et al. 2024,
"FedMIA: an effective membership inference attack exploiting 'all for one' in federated
learning", arXiv 2402.06289).

The server receives every client's update every round. In a round where the victim took part,
the other clients started from the same downlink and trained the same recipe on data that is not
the victim's, so their models are "out" models for the victim's members, and for the
non-members too: a reference population the server never had to train. Per query and round r,
the logit-scaled confidence phi of the query's class under each other client's model is fitted
with a Gaussian; the victim's phi_r is scored by the one-sided test of "larger than an other
client's model gives", -log P[N(mu_r, sigma_r^2) >= phi_r] (as in `lira-offline`, whose
reference models the server gets here for free), and the evidence is summed over the rounds
(Fisher's combination in log space), as FedMIA combines its per-round tests.

Needs a threat model that may read every client's messages (`Knows(every_client=True)`: the
server, and the oracle that contains it) and models that decode whole from the wire; otherwise
"not applicable" with the reason. Deviations, stated: phi instead of FedMIA's loss (phi is what
the LiRA family fits, near-Gaussian across models; for one model it orders queries as the loss
does); other clients' non-IID data makes them "out" models of a different distribution, which
only weakens the test. Settings: `max_rounds` (the latest rounds of the victim used, default
every one up to 50), `variance` (per-example or global, as LiRA's), `min_others` (rounds with
fewer other clients are skipped).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import replace as _replace
from typing import ClassVar

import numpy as np
import torch
from scipy import stats

from fedattack import progress
from fedattack.attacks.base import Adversary, AuditRole, NotApplicable
from fedattack.attacks.hidden_parts.base import decoded, log_probs
from fedattack.attacks.hidden_parts.generic import decodes_whole_model
from fedattack.attacks.membership.family import (
    MEMBERSHIP_METRICS,
    SCORE_SECONDS_PER_QUERY,
    Calibrated,
    MembershipAttack,
)
from fedattack.attacks.membership.lira import VARIANCES, fit_sigma
from fedattack.attacks.membership.reference_models import logit_confidence
from fedattack.attacks.planning.cost import Cost, Workload, cheaper_setting
from fedattack.attacks.view import Observation, View
from fedattack.options import one_of
from fedattack.registry import UserError
from fedattack.target import State


@dataclass(frozen=True, kw_only=True)
class FedMiaSettings:
    """max_rounds: the latest rounds of the victim used. variance: per-example or global.
    min_others: the fewest other clients a round needs to be used."""

    max_rounds: int = 50
    variance: str = "per-example"
    min_others: int = 2

    def __post_init__(self) -> None:
        if self.max_rounds < 1:
            raise UserError(f"fedmia max_rounds={self.max_rounds} must be at least 1")
        one_of(self.variance, VARIANCES, "fedmia variance")
        if self.min_others < 2:
            raise UserError(f"fedmia min_others={self.min_others}: at least 2 are needed for a variance")


def server_cost(work: Workload, max_rounds: int, scored: int) -> Cost:
    """Per round used: every client's model read from disk and decoded, and scoring `scored`
    images (one round's models held at a time)."""
    p, rounds = work.probe, min(max_rounds, work.rounds)
    models = rounds * work.clients
    seconds = (models * (scored * p.forward_seconds + p.param_bytes / READ_BYTES_PER_SECOND)
               + work.queries * SCORE_SECONDS_PER_QUERY)
    memory = 3 * work.clients * p.param_bytes + 2 * work.clients * scored * work.classes * 8
    return Cost(seconds, memory, f"{rounds} rounds x {work.clients} clients' models, no training")


READ_BYTES_PER_SECOND = 200e6  # a transcript message read, checked and decoded (torch.load, checksum)


def sees_every_client(view: View) -> bool:
    return any(ch.client is None and ch.kind == "uplink" for ch in view.channels)


def require_every_client_model(name: str, view: View) -> None:
    """Refuse (not applicable) a view in which the victim cannot be compared with the other
    clients of its rounds: the server-side tests need every client's whole model from the wire."""
    if not sees_every_client(view):
        raise NotApplicable(f"{name} compares the victim with the other clients of its rounds; the "
                            f"{view.threat_model} does not see other clients' messages")
    why = decodes_whole_model(view.target)
    if why is not None:
        raise NotApplicable(f"{name} needs every client's model from the wire, and {why}")


def round_models(view: View, rnd: int) -> dict[int, State]:
    """Every client's model of round `rnd` decoded from its (downlink, uplink) pair."""
    msgs = view.messages(rounds={rnd})
    down = {m.receiver: m.payload for m in msgs if m.kind == "downlink"}
    return {m.sender: decoded(view.target, Observation(rnd, down.get(m.sender), m.payload))
            for m in msgs if m.kind == "uplink"}


def rounds_with_others(view: View, max_rounds: int, min_others: int) -> Iterator[tuple[int, State, list[State]]]:
    """(round, the victim's model, the other clients' models) for each visible round of the victim
    with at least `min_others` other clients, decoded one round at a time (all rounds' models
    together would not fit in memory); not applicable when no round qualifies."""
    found = False
    rounds = victim_rounds(view, max_rounds)
    for rnd in progress.steps(rounds, "rounds (every client's model)"):
        models = round_models(view, rnd)
        rest = [p for c, p in models.items() if c != view.victim]
        if view.victim in models and len(rest) >= min_others:
            found = True
            yield rnd, models[view.victim], rest
    if not found:
        raise NotApplicable(f"no visible round of client {view.victim} had {min_others} other clients")


def victim_rounds(view: View, most: int) -> list[int]:
    return sorted({e["round"] for e in view.entries()
                   if e["kind"] == "uplink" and e["sender"] == view.victim})[-most:]


class FedMia(MembershipAttack):
    """The server's test of the victim's confidence against the other clients' of the same rounds."""

    name = "fedmia"
    requires = frozenset({"queries"})
    Settings = FedMiaSettings
    fast_settings = {"max_rounds": 2}
    reads_every_client: ClassVar[bool] = True  # only a threat model that sees every client can run it
    metrics = tuple(_replace(m, label=f"{m.label} by FedMIA") for m in MEMBERSHIP_METRICS)
    audit = AuditRole("server membership", strength=20)  # docs/privacy.md: TPR at 1% FPR 4.9% vs 3.4%

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        return server_cost(work, self.settings.max_rounds, work.queries)

    def cheaper(self, work: Workload, memory: int, seconds: float | None) -> str:
        return cheaper_setting(self, work, memory, seconds, "max_rounds", [20, 10, 5, 2, 1])

    def scores(self, adv: Adversary, gen: torch.Generator) -> Calibrated:
        s, view, x = self.settings, adv.view, adv.knowledge.queries.x
        require_every_client_model(self.name, view)
        labels = self.query_labels(adv, self.query_log_probs(adv))
        total, used, others = np.zeros(len(x)), [], []
        for rnd, victim, rest in rounds_with_others(view, s.max_rounds, s.min_others):
            out = np.stack([logit_confidence(log_probs(view.target, p, x), labels) for p in rest])
            phi = logit_confidence(log_probs(view.target, victim, x), labels)
            total += -stats.norm.logsf(phi, out.mean(0), fit_sigma(out, s.variance))
            used.append(rnd)
            others.append(len(rest))
        return Calibrated(total, info={"rounds": used, "other_clients_per_round": others,
                                       "variance": s.variance})
