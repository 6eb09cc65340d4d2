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

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from fedattack.attacks.base import AuditRole
from fedattack.attacks.data_reconstruction.cost import ASSIGN_SECONDS, first_layer_applies, scoring_cost, unmix_cost
from fedattack.attacks.data_reconstruction.fedavg import PRIORS, UpdateSettings, invert_update_jointly
from fedattack.attacks.data_reconstruction.inversion_family import POLISH_RATE, InversionSettings, UpdateInversionFamily
from fedattack.attacks.data_reconstruction.joint import Inverted
from fedattack.attacks.data_reconstruction.problem import VictimUpdate
from fedattack.attacks.data_reconstruction.units import SimulationUnits
from fedattack.attacks.planning.cost import GRAPH_PEAK, Cost, Workload, cheaper_setting
from fedattack.options import one_of
from fedattack.registry import UserError
from fedattack.resources import human_seconds


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
    audit = AuditRole("reconstruction", strength=20)
    chunk_unit = "local steps"

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        s = self.settings
        if s.start == "first-layer" and not first_layer_applies(work):
            return unmix_cost(work, s.programs) + scoring_cost(work)
        return run_cost(work, s, chunk) + scoring_cost(work)

    def chunks(self, work: Workload) -> int:
        return work.local_steps()

    def cheaper(self, work: Workload, memory: int, seconds: float | None) -> str:
        return cheaper_setting(self, work, memory, seconds, "iterations", [100, 30, 10, 3])

    def for_audit(self, work: Workload) -> dict[str, Any] | str:
        why = first_layer_applies(work)
        if not why:
            return {"start": "first-layer"}
        noise = run_cost(work, dataclasses.replace(self.settings, start="random"), None)
        return (f"{why}; the optimiser from noise would simulate {work.local_steps():,} local steps an iteration, "
                f"~{human_seconds(noise.seconds)} a victim (--attack update-inversion runs it)")

    def invert(self, update: VictimUpdate, labels: torch.Tensor, gen: torch.Generator,
               init: torch.Tensor | None = None) -> Inverted:
        s = self.settings
        steps, rate = (s.iterations, s.step_size) if init is None else (s.polish, s.step_size * POLISH_RATE)
        settings = UpdateSettings(steps=steps, lr=rate, tv=s.tv, distance=s.distance,
                                  restarts=s.restarts, epoch_prior=s.epoch_prior, prior=s.prior,
                                  realign_every=s.realign_every)
        recipe = dataclasses.replace(update.recipe, segment=self._chunk)
        return invert_update_jointly(update.forward, update.start, update.after, labels, update.shape,
                                     recipe, gen, settings, update.extras, init)


RECOMPUTE = 1.35  # time of a run recomputed segment by segment, against one kept whole (measured)


def run_cost(work: Workload, s: UpdateInversionSettings, chunk: int | None) -> Cost:
    """`iterations` x `restarts` simulated local runs, `chunk` steps' graph at once, and the
    epoch alignment's assignments every `realign_every` iterations."""
    p, u, steps, n = work.probe, work.probe.unit(SimulationUnits), work.local_steps(), work.samples
    c = min(chunk or steps, steps)
    per_iteration = steps * u.sim_step_seconds * (RECOMPUTE if c < steps else 1.0)
    aligns = math.ceil(s.iterations / s.realign_every) * max(0, work.epochs - 1) if s.prior == "matching" else 0
    seconds = s.restarts * (s.iterations * per_iteration + aligns * n**3 * ASSIGN_SECONDS)
    memory = (int(GRAPH_PEAK * c * u.sim_step_bytes) + 2 * math.ceil(steps / c) * p.param_bytes
              + 6 * work.epochs * n * p.input_numel * 4)
    return Cost(seconds, memory, f"{s.iterations} iterations x {steps:,} simulated local steps")
