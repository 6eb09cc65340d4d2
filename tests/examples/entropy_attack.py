"""Prediction entropy as a membership score (Salem et al. 2019): members get confident outputs."""

import numpy as np
import torch

from fedattack.attacks.base import Adversary
from fedattack.attacks.membership.family import MembershipAttack


class Entropy(MembershipAttack):
    """Members are the queries on which the attacked model's prediction has the lowest entropy."""
    name = "entropy"

    def scores(self, adv: Adversary, gen: torch.Generator) -> np.ndarray:
        return ((log_p := self.query_log_probs(adv)).exp() * log_p).sum(1).numpy()  # minus the entropy
