"""Secure aggregation (Bonawitz et al., CCS 2017): the server learns the sum of the uplinks only.

Each client encodes its uplink in fixed point in the ring Z_2^62 (held in int64), pre-weighted
by its sample count n_k, and adds a pairwise mask for every other client sampled this round:
+PRG(i, j) if i < j, -PRG(j, i) otherwise, from a generator keyed by (seed, round, i, j) that
stands for the key the pair agreed. The masks are uniform over the ring (full-entropy), so a
recorded uplink is independent of the client's update; in the sum they cancel exactly (integer
arithmetic modulo 2^62). The server decodes sum_k n_k u_k, divides by sum_k n_k, and hands the
method m messages that all carry this weighted mean.

So this defence composes with every method whose server reads the uplinks only through their
n_k-weighted mean (`Target.reads_weighted_mean`: the contract's default aggregate, and a server
that steps from that mean, FedAvgM's momentum) and refuses, in one line, a method that does
not declare it: a server that weighs, compares or divides individual uplinks (SCAFFOLD's
unweighted mean with its own c step, q-FFL, WAFFLE, Weight Erosion) needs what this hides.
Inside a defence whose server side uses the plain sum (`sums_unweighted`: DP-FedAvg, whose
noise is calibrated to it), clients send weight 1 and any method is accepted, since that
defence's own `on_receive` already hands the method m equal uplinks. What stays in the clear:
the sample counts n_k (recorded with each message by the loop) and who took part. Recorded
uplinks are int64 ring elements: they decode to nothing (`hides_uplinks`).
The sum itself tells a round's participants about each other, so fewer than `MIN_CLIENTS` (3)
a round are refused when the method is built: with one client the server decodes that client's
update exactly (the "sum" is its update), with two each client subtracts its own update from
the sum and reads the other's. A warning in the manifest was the alternative; refusing was
chosen because a run labelled secure-aggregation that hides nothing would be reported as
defended by every table built from it. (With three or more, m - 1 colluding clients still
learn the last one's update: no protocol that reveals the sum can prevent that.)
Dropouts do not happen in this simulation, so the protocol's secret sharing is not simulated.
The masks derive from the run's seed, as everything does; an attack that regenerated them from
the manifest would be breaking the simulation, not the protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from fedattack.defences.base import Defence
from fedattack.registry import UserError
from fedattack.rng import generator
from fedattack.target import ClientContext, Target, WireSchema
from fedattack.wire import Message, Payload

RING = 2**62
MIN_CLIENTS = 3  # the fewest clients a round for which the sum hides each single update


@dataclass(frozen=True, kw_only=True)
class SecAggSettings:
    """fraction_bits: fixed-point precision (2^-bits); sum_k n_k |u_k| must stay below 2^(61-bits)."""

    fraction_bits: int = 24

    def __post_init__(self) -> None:
        if not 8 <= self.fraction_bits <= 40:
            raise UserError(f"secure-aggregation fraction_bits={self.fraction_bits} must be in 8..40")


class SecureAggregation(Defence):
    """Pairwise-masked uplinks on the wire; the server sees only the n_k-weighted sum."""

    name = "secure-aggregation"
    Settings = SecAggSettings
    hides_uplinks = True

    @property
    def weighted(self) -> bool:
        """Clients pre-weight by n_k, unless an inner defence reduces to the plain sum (DP-FedAvg)."""
        return not any(d.sums_unweighted for d in self.wraps.defences)

    def bind(self, target: Target) -> None:
        if (target.defences or [self])[-1] is not self:
            raise UserError("secure-aggregation must be the last (outermost) --defence: what wraps "
                            "it would see masked ring elements")
        m = target.ctx.clients_per_round
        if m < MIN_CLIENTS:
            raise UserError(f"secure-aggregation needs at least {MIN_CLIENTS} clients a round, this federation "
                            f"samples {m}: with 1 the server reads that client's update in the clear, with 2 "
                            "each client subtracts its own from the sum and reads the other's; raise "
                            "--fraction or --clients")
        if not self.weighted:
            return  # an inner defence (DP-FedAvg) reduces to the plain sum: clients send weight 1
        if not target.reads_weighted_mean:
            raise UserError(f"secure-aggregation cannot wrap {target.name}: its server combines "
                            "individual uplinks (its own aggregate), not their n_k-weighted mean; a method "
                            "whose aggregate reads only that mean declares reads_weighted_mean = True")

    def wire(self, schema: WireSchema) -> WireSchema:
        """Every floating-point uplink tensor goes out as int64 ring elements."""
        masked = {n: torch.int64 for n in schema.uplink if schema.dtype("uplink", n).is_floating_point}
        return replace(schema, dtypes={**schema.dtypes, "uplink": {**schema.dtypes.get("uplink", {}), **masked}})

    def on_uplink(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        weight = float(ctx.samples if ctx.samples is not None and self.weighted else 1)
        masked = {}
        for n, t in up.items():
            masked[n] = self._encode(t.double() * weight) if t.is_floating_point() else t
        for peer in ctx.peers:
            if peer == ctx.client:
                continue
            gen = self._pair_generator(ctx.round, ctx.client, peer)
            sign = 1 if ctx.client < peer else -1
            for n, t in up.items():
                if t.is_floating_point():
                    mask = torch.randint(0, RING, t.shape, generator=gen, dtype=torch.int64)
                    masked[n] = torch.remainder(masked[n] + sign * mask, RING)
        return masked

    def on_receive(self, uplinks: list[Message], rnd: int, gen: torch.Generator) -> list[Message]:
        if not uplinks or not uplinks[0].payload:
            return uplinks
        total_n = float(sum(m.samples if m.samples is not None and self.weighted else 1
                            for m in uplinks))
        mean = {}
        for n, t in uplinks[0].payload.items():
            if t.dtype != torch.int64:
                continue
            ring_sum = torch.zeros_like(t)
            for m in uplinks:
                ring_sum = torch.remainder(ring_sum + m.payload[n], RING)
            mean[n] = (self._decode(ring_sum) / total_n).to(torch.float32)
        return [Message(m.round, m.sender, m.receiver, m.kind, {**m.payload, **mean}, m.samples)
                for m in uplinks]

    def _pair_generator(self, rnd: int, a: int, b: int) -> torch.Generator:
        return generator(self.ctx.seed, f"defence:{self.name}:pair", rnd, min(a, b), max(a, b))

    def _encode(self, x: torch.Tensor) -> torch.Tensor:
        return torch.remainder(torch.round(x * 2.0 ** self.settings.fraction_bits).to(torch.int64), RING)

    def _decode(self, ring: torch.Tensor) -> torch.Tensor:
        signed = torch.where(ring >= RING // 2, ring - RING, ring)
        return signed.double() / 2.0 ** self.settings.fraction_bits
