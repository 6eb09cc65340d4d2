"""A confidence-threshold membership attack (Salem et al. 2019), as a plugin: one file, no edits."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from fedattack.attacks.base import Adversary
from fedattack.attacks.membership.family import MEMBERSHIP_METRICS, MembershipAttack


class Confidence(MembershipAttack):
    """Members are the queries the attacked model is most confident on (Salem et al. 2019)."""

    name = "confidence"
    metrics = tuple(replace(m, label=f"{m.label} by confidence") for m in MEMBERSHIP_METRICS)

    def scores(self, adv: Adversary, gen: torch.Generator) -> np.ndarray:
        return self.query_log_probs(adv).max(1).values.numpy()
