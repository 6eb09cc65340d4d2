"""Update inversion for multi-step FedAvg/FedProx clients (Dimitrov, Balunović, Konstantinov,
Vechev 2022, "Data Leakage in Federated Averaging").

A client that runs E epochs of SGD over N images in batches of B sends weights that no single
gradient explains. This attack simulates that run from the observed downlink (the recipe the
threat model knows, or fedattack's default one, said so; FedProx's pull when the method has
one), differentiably in one free copy of the unknown images per epoch, ties the copies together
with an order-invariant epoch prior (the true shuffle is unknown), and matches the simulated
update to the decoded uplink. With one step it reduces to gradient matching.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from fedattack.attacks.update_inversion.family import InversionSettings, UpdateInversionFamily
from fedattack.attacks.update_inversion.fedavg import PRIORS, UpdateSettings, invert_update_jointly
from fedattack.attacks.update_inversion.joint import Inverted
from fedattack.attacks.update_inversion.problem import VictimUpdate
from fedattack.options import one_of
from fedattack.registry import UserError


@dataclass(frozen=True, kw_only=True)
class UpdateInversionSettings(InversionSettings):
    """As gradient-inversion's, and: epoch_prior: weight of the prior tying the epoch copies;
    prior: matching (align copies by label-respecting assignment), moments, or none;
    realign_every: iterations between two alignments."""

    epoch_prior: float = 0.1
    prior: str = "matching"
    realign_every: int = 10

    def __post_init__(self) -> None:
        super().__post_init__()
        one_of(self.prior, PRIORS, "prior")
        if self.epoch_prior < 0 or self.realign_every < 1:
            raise UserError("epoch_prior must be >= 0 and realign_every >= 1")


class UpdateInversion(UpdateInversionFamily):
    """Multi-step update inversion: the victim's local run simulated from the downlink."""

    name = "update-inversion"
    Settings = UpdateInversionSettings
    fast_settings: ClassVar[dict[str, Any]] = {"iterations": 2}

    def invert(self, update: VictimUpdate, labels: torch.Tensor, gen: torch.Generator) -> Inverted:
        s = self.settings
        settings = UpdateSettings(steps=s.iterations, lr=s.step_size, tv=s.tv, distance=s.distance,
                                  restarts=s.restarts, epoch_prior=s.epoch_prior, prior=s.prior,
                                  realign_every=s.realign_every)
        return invert_update_jointly(update.forward, update.start, update.after, labels, update.shape,
                                     update.recipe, gen, settings, update.extras)
