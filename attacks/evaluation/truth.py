"""Ground truth: who is a member, the victim's real images, its private state. Scorers only.

Nothing in here is ever passed to an attack's `run`. `build` returns two objects of different
types: the adversary's `Knowledge` (auxiliary data, the unlabelled membership queries, the
assumed size and class mix) and the scorer's `GroundTruth` (which queries are members, the
victim's training images and class means, its private state and deployed model).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from fedattack.attacks.evaluation.data import Pools, Samples, sample_class_mix
from fedattack.attacks.view import Knowledge
from fedattack.federation.loop import client_data
from fedattack.registry import UserError
from fedattack.rng import numpy_rng
from fedattack.target import State, Target

DEFAULT_NONMEMBERS = 1000  # the smallest set that resolves TPR at 0.1% FPR


@dataclass
class SharedTruth:
    """Scorer resources shared by every victim of one evaluation (built lazily, once)."""

    evaluation: Samples
    train_class_means: torch.Tensor  # (classes, C, H, W): the train split's class means
    make_classifier: Callable[[], Any]
    _classifier: Any = field(default=None, repr=False)

    def classifier(self) -> Any:
        if self._classifier is None:
            self._classifier = self.make_classifier()
        return self._classifier


@dataclass(frozen=True)
class GroundTruth:
    """What the scorer compares the attack's guesses with."""

    victim: int
    members: Samples
    is_member: np.ndarray  # aligned with Knowledge.queries
    private: State
    deployed: State
    shared: SharedTruth

    def class_means(self) -> dict[int, torch.Tensor]:
        """The victim's mean training image of each class it holds."""
        return {c: self.members.x[idx].mean(0) for c, idx in self.members.by_class().items()}


def build(fed: Any, target: Target, dataset: Any, partition: Any, victim: int, pools: Pools,
          shared: SharedTruth, seed: int, max_queries: int,
          nonmembers: int = DEFAULT_NONMEMBERS) -> tuple[Knowledge, GroundTruth]:
    """The adversary's knowledge and the scorer's truth for one victim."""
    data = client_data(dataset, partition, victim)
    members = Samples(data.x_train, data.y_train)
    queries, is_member = membership_queries(members, pools.nonmember, seed, victim, max_queries, nonmembers)
    counts = members.class_counts(target.num_classes)
    knowledge = Knowledge(aux=pools.aux, queries=queries, victim_size=len(members),
                          victim_class_counts=counts, member_share=float(is_member.mean()))
    private = fed.private_state(victim)
    truth = GroundTruth(victim=victim, members=members, is_member=is_member, private=private,
                        deployed=target.deployed(fed.server_state(), private), shared=shared)
    return knowledge, truth


def membership_queries(members: Samples, pool: Samples, seed: int, victim: int, max_queries: int,
                       nonmembers: int = DEFAULT_NONMEMBERS) -> tuple[Samples, np.ndarray]:
    """A shuffled set of the victim's members and of non-members with the same class mix.

    Members: the victim's training records (scaled down per class to at most `max_queries`).
    Non-members: records of the held-out pool in the members' class proportions, so class alone
    tells nothing: at least as many as members, and `nonmembers` where the pool can supply every
    class's share (else as many as it can, every class scaled by the same factor). The set is
    unbalanced on purpose: a TPR at FPR alpha needs at least 1/alpha non-members (Carlini et al.
    2022), far more than a client has members. A pool short of a class's members gives the
    balanced draw of what both sides can supply.
    """
    rng = numpy_rng(seed, "queries", victim)
    mine, theirs = members.by_class(), pool.by_class()
    supply = {c: len(i) for c, i in theirs.items()}
    k = {c: len(idx) for c, idx in mine.items()}
    if any(supply.get(c, 0) < v for c, v in k.items()):
        k = {c: min(v, supply.get(c, 0)) for c, v in k.items()}
    total = sum(k.values())
    if total > max_queries > 0:
        k = {c: int(v * max_queries // total) for c, v in k.items()}
        if not any(k.values()):  # scaled per class, every class rounds down to no member
            raise UserError(f"--max-queries {max_queries} leaves victim {victim} no member to judge (its {total} "
                            f"members in {len(k)} classes are scaled per class); pass --max-queries {len(k)} or more")
    member_idx = sample_class_mix(members, k, rng)
    nonmember_idx = sample_class_mix(pool, nonmember_counts(k, supply, nonmembers), rng)
    both = Samples.concat([members.take(member_idx), pool.take(nonmember_idx)])
    labels = np.r_[np.ones(len(member_idx), bool), np.zeros(len(nonmember_idx), bool)]
    order = rng.permutation(len(labels))
    return both.take(order), labels[order]


def nonmember_counts(members: dict[int, int], pool: dict[int, int], wanted: int) -> dict[int, int]:
    """Per class, the non-members to draw: `wanted` in the members' proportions (at least the
    members' own counts), every class scaled by the one factor the pool can supply."""
    total = sum(members.values())
    if total == 0:
        return {}
    supply = min((pool.get(c, 0) / v for c, v in members.items() if v), default=1.0)
    ratio = max(1.0, min(wanted / total, supply))
    exact = {c: v * ratio for c, v in members.items()}
    counts = {c: int(e) for c, e in exact.items()}
    short = round(total * ratio) - sum(counts.values())  # largest remainders: the total is exact
    for c in sorted(exact, key=lambda c: counts[c] - exact[c])[:max(0, short)]:
        counts[c] += 1
    return {c: min(n, pool.get(c, 0)) for c, n in counts.items()}


def train_class_means(dataset: Any) -> torch.Tensor:
    """Each class's mean image over the whole train split (the "all classes" PSNR reference)."""
    x, y = dataset.x_train, dataset.y_train
    return torch.stack([x[y == c].mean(0) if (y == c).any() else torch.zeros_like(x[0])
                        for c in range(dataset.num_classes)])
