"""Client-level differential privacy, DP-FedAvg (McMahan, Ramage, Talwar, Zhang, ICLR 2018).

Each client clips its update (the uplink relative to the downlink, `_update`) to L2 norm C;
the round's aggregate is the *unweighted* mean of the m clipped updates plus Gaussian noise of
std sigma * C on their sum, so one client moves it by at most C / m before noise. The method
then aggregates as usual, but every received message carries that same noisy mean: a server
bound by DP may use the noisy sum only, so a method that weighs clients by their own updates
(WAFFLE, Weight Erosion) or by n_k (FedAvg) sees m equal uplinks, and the guarantee holds for
any method as post-processing.

Where the noise is added (`noise`):
  server  a trusted server adds N(0, (sigma C)^2) to the sum in `on_receive`: the recorded
          uplinks are clipped, not noised; the guarantee covers what the server releases (every
          broadcast model and the final one), not the server's own view of the uplinks.
  client  an untrusted server: each client adds N(0, (sigma C)^2 / m) before sending, so the
          sum carries sigma C. Each recorded uplink is clipped and noised with multiplier
          sigma / sqrt(m) only: against anyone who sees one client's uplinks (the server,
          an eavesdropper) the guarantee is `epsilon_every_message`; `epsilon` holds for what
          the sum alone reveals (the models, or a server behind secure aggregation).
The accounting (`_accountant`) is recorded in the manifest and printed by `fedattack train`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from fedattack.defences import _accountant
from fedattack.defences._update import (
    clipped,
    gaussian,
    l2_norm,
    summed,
)
from fedattack.defences.base import Defence
from fedattack.options import one_of
from fedattack.registry import UserError
from fedattack.target import ClientContext, Target
from fedattack.wire import Message, Payload

ACCOUNTANTS = ("rdp", "pld")


@dataclass(frozen=True, kw_only=True)
class DPSettings:
    """clip_norm: C. noise_multiplier: sigma (noise std sigma*C on the sum). noise: server
    (trusted server) or client (each client adds sigma*C/sqrt(m)). delta: the accountant's.
    accountant: rdp (any sampling) or pld (exact, for a federation where every client takes part in
    every round: `_accountant.epsilon_full_pld`)."""

    clip_norm: float = 1.0
    noise_multiplier: float = 1.0
    noise: str = "server"
    delta: float = 1e-5
    accountant: str = "rdp"

    def __post_init__(self) -> None:
        _accountant.check_gaussian("dp-fedavg", self.clip_norm, self.noise_multiplier, self.delta)
        one_of(self.noise, ("server", "client"), "dp-fedavg noise")
        one_of(self.accountant, ACCOUNTANTS, "dp-fedavg accountant")


class DPFedAvg(Defence):
    """Clip each update to C, Gaussian noise sigma*C on the unweighted sum (server or client side)."""

    name = "dp-fedavg"
    Settings = DPSettings
    sums_unweighted = True

    def bind(self, target: Target) -> None:
        ctx = self.ctx
        if self.settings.accountant == "pld" and ctx.clients_per_round < ctx.num_clients:
            raise UserError(f"dp-fedavg accountant=pld is exact only when every client takes part in every "
                            f"round, and this federation samples {ctx.clients_per_round} of {ctx.num_clients}; "
                            "use accountant=rdp (the default) or fraction 1")
        if not target.linear_uplink:
            raise UserError(f"dp-fedavg averages the uplinks as they are sent, and {target.name}'s uplink is "
                            "not linear in its update (it declares linear_uplink False); use clip instead")

    def on_uplink(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        s = self.settings
        update = self.update_of(up, down)
        if not update:
            return up
        if l2_norm(update) > s.clip_norm:
            update = clipped(update, s.clip_norm)
        if s.noise == "client" and s.noise_multiplier > 0:
            std = s.noise_multiplier * s.clip_norm / math.sqrt(self.ctx.clients_per_round)
            noise = gaussian(update, std, self.client_generator(ctx))
            update = {n: t + noise[n] for n, t in update.items()}
        return self.with_update(up, down, update)

    def on_receive(self, uplinks: list[Message], rnd: int, gen: torch.Generator) -> list[Message]:
        names = [n for n, t in uplinks[0].payload.items() if t.is_floating_point()] if uplinks else []
        if not names:
            return uplinks
        total = {n: summed([m.payload[n] for m in uplinks]) for n in names}
        s = self.settings
        if s.noise == "server" and s.noise_multiplier > 0:
            noise = gaussian(total, s.noise_multiplier * s.clip_norm, gen)
            total = {n: t + noise[n] for n, t in total.items()}
        mean = {n: t / len(uplinks) for n, t in total.items()}
        return [Message(m.round, m.sender, m.receiver, m.kind, {**m.payload, **mean}, m.samples)
                for m in uplinks]

    def accounting(self) -> dict[str, Any]:
        s, ctx = self.settings, self.ctx
        m, n, rounds = ctx.clients_per_round, ctx.num_clients, ctx.rounds
        out: dict[str, Any] = {
            "delta": s.delta, "rounds": rounds, "clients_per_round": m, "clients": n,
            "accountant": ("PLD (dp-accounting), every client every round, replace-one neighbours: exact"
                           if s.accountant == "pld" else "RDP (dp-accounting); fixed-size sampling without "
                           "replacement, replace-one neighbours"),
        }
        if s.noise_multiplier == 0:
            return {**out, "epsilon": None, "note": "no noise: no privacy guarantee"}
        sigma = s.noise_multiplier
        try:
            out["epsilon"] = _accountant.finite(
                _accountant.epsilon_full_pld(sigma, rounds, s.delta) if s.accountant == "pld"
                else _accountant.epsilon_fixed_size(sigma, m, n, rounds, s.delta))
            out["epsilon_poisson"] = _accountant.finite(
                _accountant.epsilon_poisson(sigma, m / n, rounds, s.delta))
            if s.noise == "client":
                out["epsilon_every_message"] = _accountant.finite(
                    _accountant.epsilon_every_message(sigma / math.sqrt(m), rounds, s.delta))
        except UserError as missing:
            return {**out, "epsilon": None, "note": str(missing)}
        return out
