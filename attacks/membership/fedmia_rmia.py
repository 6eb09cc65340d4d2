"""`fedmia-rmia`: the server's free reference models (FedMIA) judged by RMIA's pairwise test.

`fedmia` fits a Gaussian to 9-ish other clients' confidences per query and round; with so few
models a per-query variance is noisy, which is why LiRA needs many reference models. RMIA
(Zarifzadeh et al. 2024) was built for few reference models: it only needs each query's mean
probability under them, and calibrates it against population points z the attacked model
never saw. Here, per round r where the victim took part, the other clients' models of r are the
reference models (no training: the server already holds them, as in `fedmia`), and

    rel(x) = log p(x | victim_r) - log Pr_r(x),  Pr_r(x) = ((1 + a) mean_other p(x) + 1 - a) / 2
    score_r(x) = the share of z with rel(x) - rel(z) >= log gamma   (`rmia.pairwise_scores`)

averaged over the rounds (the mean of per-round shares: each round's test has the same scale).
The population z is drawn from the auxiliary data, which no client trained on.

The other clients are not quite "out" models: after the first round every downlink carries the
victim's earlier updates, so they are partly "in" for the victim's members, which only weakens
the test (as in `fedmia`). Settings: `max_rounds` and `min_others` as `fedmia`'s; `population`,
`a` and `gamma` as `rmia`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace as _replace
from typing import ClassVar

import numpy as np
import torch

from fedattack.attacks.base import Adversary, AuditRole
from fedattack.attacks.hidden_parts.base import log_probs
from fedattack.attacks.membership.family import MEMBERSHIP_METRICS, Calibrated, MembershipAttack
from fedattack.attacks.membership.fedmia import require_every_client_model, rounds_with_others, server_cost
from fedattack.attacks.membership.reference_models import true_class_log_prob
from fedattack.attacks.membership.rmia import check_pairwise_test, pairwise_scores, relative_log_prob
from fedattack.attacks.planning.cost import Cost, Workload, cheaper_setting
from fedattack.registry import UserError
from fedattack.rng import numpy_rng
from fedattack.target import State


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


class FedMiaRmia(MembershipAttack):
    """The server's pairwise likelihood-ratio test against the other clients of the same rounds."""

    name = "fedmia-rmia"
    requires = frozenset({"aux", "queries"})
    Settings = FedMiaRmiaSettings
    fast_settings = {"max_rounds": 2, "population": 100}
    reads_every_client: ClassVar[bool] = True
    metrics = tuple(_replace(m, label=f"{m.label} by FedMIA-RMIA") for m in MEMBERSHIP_METRICS)
    audit = AuditRole("server membership", strength=10)

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        return server_cost(work, self.settings.max_rounds, work.queries + min(self.settings.population, work.aux))

    def cheaper(self, work: Workload, memory: int, seconds: float | None) -> str:
        return cheaper_setting(self, work, memory, seconds, "max_rounds", [20, 10, 5, 2, 1])

    def scores(self, adv: Adversary, gen: torch.Generator) -> Calibrated:
        s, view, x = self.settings, adv.view, adv.knowledge.queries.x
        require_every_client_model(self.name, view)
        seed = int(torch.randint(2**62, (1,), generator=gen))
        aux = self.labelled(adv, adv.knowledge.aux)
        population = aux.take(numpy_rng(seed, "fedmia-population").permutation(len(aux))[:s.population])
        qy = self.query_labels(adv, self.query_log_probs(adv))
        total, used = np.zeros(len(x)), []
        for rnd, victim, rest in rounds_with_others(view, s.max_rounds, s.min_others):
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
