"""The server's own signal, other clients as free reference models (Zhu et al. 2024, "FedMIA:
an effective membership inference attack exploiting 'all for one' in federated learning",
arXiv 2402.06289): `fedmia`, and `fedmia-rmia`, the same reference models judged by RMIA's test.

The server receives every client's update every round. In a round where the victim took part,
the other clients started from the same downlink and trained the same recipe on data that is not
the victim's, so their models are "out" models for the victim's members, and for the
non-members too: a reference population the server never had to train. Per query and round r:

- `fedmia`: the logit-scaled confidence phi of the query's class under each other client's model
  is fitted with a Gaussian; the victim's phi_r is scored by the one-sided test of "larger than
  an other client's model gives", -log P[N(mu_r, sigma_r^2) >= phi_r] (as in `lira-offline`,
  whose reference models the server gets here for free), and the evidence is summed over the
  rounds (Fisher's combination in log space), as FedMIA combines its per-round tests.
- `fedmia-rmia`: with 9-ish other clients a per-query variance is noisy (which is why LiRA needs
  many reference models); RMIA (Zarifzadeh et al. 2024) was built for few: it needs only each
  query's mean probability under them, calibrated against population points z (drawn from the
  auxiliary data, which no client trained on) that the attacked model never saw:
      rel(x) = log p(x | victim_r) - log Pr_r(x),  Pr_r(x) = ((1 + a) mean_other p(x) + 1 - a) / 2
      score_r(x) = the share of z with rel(x) - rel(z) >= log gamma   (`rmia.pairwise_scores`)
  averaged over the rounds (each round's test has the same scale).

Both need a threat model that may read every client's messages (`reads_every_client`: the
server, and the oracle that contains it) and models that decode whole from the wire; otherwise
"not applicable" with the reason. Deviations, stated: phi instead of FedMIA's loss (phi is what
the LiRA family fits, near-Gaussian across models; for one model it orders queries as the loss
does). The other clients are not quite "out" models: after the first round every downlink
carries the victim's earlier updates (partly "in" for its members), and their non-IID data is of
another distribution; both only weaken the tests. Settings: `max_rounds` (the latest rounds of
the victim used, default every one up to 50), `min_others` (rounds with fewer other clients are
skipped); `fedmia`'s `variance` as LiRA's, `fedmia-rmia`'s `population`, `a` and `gamma` as RMIA's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import replace as _replace

import numpy as np
import torch
from scipy import stats

from fedattack import progress
from fedattack.attacks.base import Adversary, AuditRole, NotApplicable, sees_every_uplink
from fedattack.attacks.hidden_parts.base import decoded, log_probs
from fedattack.attacks.hidden_parts.generic import decodes_whole_model
from fedattack.attacks.membership.family import (
    MEMBERSHIP_METRICS,
    SCORE_SECONDS_PER_QUERY,
    Calibrated,
    MembershipAttack,
)
from fedattack.attacks.membership.lira import VARIANCES, fit_sigma
from fedattack.attacks.membership.reference_models import logit_confidence, true_class_log_prob
from fedattack.attacks.membership.rmia import check_pairwise_test, pairwise_scores, relative_log_prob
from fedattack.attacks.planning.cost import Cost, Workload, cheaper_setting
from fedattack.attacks.view import Observation, View
from fedattack.options import one_of
from fedattack.registry import UserError
from fedattack.rng import numpy_rng
from fedattack.target import State

READ_BYTES_PER_SECOND = 200e6  # a transcript message read, checked and decoded (torch.load, checksum)


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


@dataclass(frozen=True, kw_only=True)
class FedMiaRmiaSettings:
    """max_rounds / min_others: as fedmia's. population / a / gamma: as rmia's."""

    max_rounds: int = 50
    min_others: int = 1
    population: int = 1000
    a: float = 0.3
    gamma: float = 1.0

    def __post_init__(self) -> None:
        if self.max_rounds < 1 or self.min_others < 1 or self.population < 1:
            raise UserError("fedmia-rmia max_rounds, min_others and population must be at least 1")
        check_pairwise_test("fedmia-rmia", self.a, self.gamma)


def server_cost(work: Workload, max_rounds: int, scored: int) -> Cost:
    """Per round used: every client's model read from disk and decoded, and scoring `scored`
    images (one round's models held at a time)."""
    p, rounds = work.probe, min(max_rounds, work.rounds)
    models = rounds * work.clients
    seconds = (models * (scored * p.forward_seconds + p.param_bytes / READ_BYTES_PER_SECOND)
               + work.queries * SCORE_SECONDS_PER_QUERY)
    memory = 3 * work.clients * p.param_bytes + 2 * work.clients * scored * work.classes * 8
    return Cost(seconds, memory, f"{rounds} rounds x {work.clients} clients' models, no training")


def require_every_client_model(name: str, view: View) -> None:
    """Refuse (not applicable) a view in which the victim cannot be compared with the other
    clients of its rounds: the server-side tests need every client's whole model from the wire."""
    if not sees_every_uplink(view):
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
    rounds = sorted({e["round"] for e in view.entries()
                     if e["kind"] == "uplink" and e["sender"] == view.victim})[-max_rounds:]
    for rnd in progress.steps(rounds, "rounds (every client's model)"):
        models = round_models(view, rnd)
        rest = [p for c, p in models.items() if c != view.victim]
        if view.victim in models and len(rest) >= min_others:
            found = True
            yield rnd, models[view.victim], rest
    if not found:
        raise NotApplicable(f"no visible round of client {view.victim} had {min_others} other clients")


class _ServerMembership(MembershipAttack):
    """What both share: the other clients of the victim's rounds as the reference models."""

    reads_every_client = True  # only a threat model that sees every client can run it

    def cheaper(self, work: Workload, memory: int, seconds: float | None) -> str:
        return cheaper_setting(self, work, memory, seconds, "max_rounds", [20, 10, 5, 2, 1])

    def rounds(self, adv: Adversary) -> Iterator[tuple[int, State, list[State]]]:
        require_every_client_model(self.name, adv.view)
        s = self.settings
        return rounds_with_others(adv.view, s.max_rounds, s.min_others)


class FedMia(_ServerMembership):
    """The server's test of the victim's confidence against the other clients' of the same rounds."""

    name = "fedmia"
    requires = frozenset({"queries"})
    Settings = FedMiaSettings
    fast_settings = {"max_rounds": 2}
    metrics = tuple(_replace(m, label=f"{m.label} by FedMIA") for m in MEMBERSHIP_METRICS)
    audit = AuditRole("server membership", strength=20)  # docs/privacy.md: TPR at 1% FPR 4.9% vs 3.4%

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        return server_cost(work, self.settings.max_rounds, work.queries)

    def scores(self, adv: Adversary, gen: torch.Generator) -> Calibrated:
        view, x = adv.view, adv.knowledge.queries.x
        rounds = self.rounds(adv)
        labels = self.query_labels(adv, self.query_log_probs(adv))
        total, used, others = np.zeros(len(x)), [], []
        for rnd, victim, rest in rounds:
            out = np.stack([logit_confidence(log_probs(view.target, p, x), labels) for p in rest])
            phi = logit_confidence(log_probs(view.target, victim, x), labels)
            total += -stats.norm.logsf(phi, out.mean(0), fit_sigma(out, self.settings.variance))
            used.append(rnd)
            others.append(len(rest))
        return Calibrated(total, info={"rounds": used, "other_clients_per_round": others,
                                       "variance": self.settings.variance})


class FedMiaRmia(_ServerMembership):
    """The server's pairwise likelihood-ratio test against the other clients of the same rounds."""

    name = "fedmia-rmia"
    requires = frozenset({"aux", "queries"})
    Settings = FedMiaRmiaSettings
    fast_settings = {"max_rounds": 2, "population": 100}
    metrics = tuple(_replace(m, label=f"{m.label} by FedMIA-RMIA") for m in MEMBERSHIP_METRICS)
    audit = AuditRole("server membership", strength=10)

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        return server_cost(work, self.settings.max_rounds, work.queries + min(self.settings.population, work.aux))

    def scores(self, adv: Adversary, gen: torch.Generator) -> Calibrated:
        s, x = self.settings, adv.knowledge.queries.x
        rounds = self.rounds(adv)
        seed = int(torch.randint(2**62, (1,), generator=gen))
        aux = self.labelled(adv, adv.knowledge.aux)
        population = aux.take(numpy_rng(seed, "fedmia-population").permutation(len(aux))[:s.population])
        qy = self.query_labels(adv, self.query_log_probs(adv))
        total, used = np.zeros(len(x)), []
        for rnd, victim, rest in rounds:
            rel_x = self._relative(adv, victim, rest, x, qy)
            rel_z = self._relative(adv, victim, rest, population.x, population.y.numpy())
            total += pairwise_scores(rel_x, rel_z, s.gamma)
            used.append(rnd)
        return Calibrated(total / len(used), info={"rounds": used, "population": len(population), "a": s.a,
                                                   "gamma": s.gamma})

    def _relative(self, adv: Adversary, victim: State, rest: list[State], x: torch.Tensor,
                  y: np.ndarray) -> np.ndarray:
        target = adv.view.target
        refs = np.stack([true_class_log_prob(log_probs(target, p, x), y) for p in rest])
        return relative_log_prob(true_class_log_prob(log_probs(target, victim, x), y), refs, self.settings.a)
