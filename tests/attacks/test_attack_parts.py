"""Pieces of the attacks on hand-made inputs: inversion, shadow data, pools, membership queries."""

from __future__ import annotations

import numpy as np
import torch

from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.evaluation.truth import membership_queries
from fedattack.attacks.membership.shadow import shadow_splits
from fedattack.attacks.model_inversion.inversion import InversionSettings, invert


class RegionModel:
    """Class c's logit is 10 x the mean of image row c: inverting c must light up row c."""

    num_classes = 4
    name = "region"

    def forward(self, params: dict, x: torch.Tensor) -> torch.Tensor:
        return 10.0 * x[:, 0, :4, :].mean(-1)


def test_inversion_lights_up_what_the_class_reads() -> None:
    guesses = invert(RegionModel(), {}, torch.zeros(4, 1, 4, 4), InversionSettings(steps=300, lr=1.0))
    rows = guesses.images[:, 0].mean(-1)  # (class, row)
    assert torch.equal(rows.argmax(1), torch.arange(4))
    assert min(guesses.confidence) > 0.9
    assert float(guesses.images.min()) >= 0.0 and float(guesses.images.max()) <= 1.0


def samples(counts: dict[int, int]) -> Samples:
    y = torch.tensor([c for c, n in counts.items() for _ in range(n)])
    return Samples(torch.arange(len(y), dtype=torch.float32).view(-1, 1, 1, 1), y)


def test_shadows_copy_the_class_mix_and_keep_in_and_out_apart() -> None:
    aux = samples({0: 40, 1: 40, 2: 40})
    for split in shadow_splits(aux, [10, 0, 20], count=3, in_fraction=0.75, seed=0):
        assert split.trained.class_counts(3) == [10, 0, 20]
        assert split.held_out.class_counts(3) == [30, 0, 20]
        assert not set(split.trained.x.flatten().tolist()) & set(split.held_out.x.flatten().tolist())


def test_membership_queries_are_balanced_per_class() -> None:
    members, pool = samples({0: 30, 3: 10}), samples({0: 8, 3: 50, 5: 9})
    queries, is_member = membership_queries(members, pool, seed=0, victim=0, max_queries=1000)
    labels = queries.y.numpy()
    for c, k in ((0, 8), (3, 10)):
        assert (labels[is_member] == c).sum() == k and (labels[~is_member] == c).sum() == k
    assert not (labels == 5).any() and is_member.sum() == (~is_member).sum()
    capped, flags = membership_queries(members, pool, seed=0, victim=0, max_queries=9)
    assert flags.sum() <= 9 and np.isin(capped.y.numpy(), [0, 3]).all()
