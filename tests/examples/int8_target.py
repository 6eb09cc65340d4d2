"""An example method, written as a new contributor would: FedAvg whose uplink is int8-quantised.

Each client sends its update y - x quantised per tensor to int8 (`q.<param>`, symmetric, rounded
to nearest) with its scale (`s.<param>`, float32): about a quarter of FedAvg's bytes. It says
what its wire is (`wire_schema`, with the dtypes), what it means (`decode`: x + q s) and what
its update is (`uplink_update`, and the inverse `with_uplink_update`), so the eavesdropper
rebuilds the client's model and a defence clips or noises the decoded update, not the scales.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from fedattack.target import LocalData, LocalProblem, State, Target, WireSchema, weighted_mean
from fedattack.wire import Message, Payload


def quantised(update: Payload) -> Payload:
    """Each tensor as int8 codes and one float32 scale (max |u| / 127)."""
    out: Payload = {}
    for n, u in update.items():
        scale = u.abs().max().clamp_min(1e-12) / 127
        out[f"q.{n}"] = torch.round(u / scale).clamp(-127, 127).to(torch.int8)
        out[f"s.{n}"] = scale.reshape(()).float()
    return out


class Int8Avg(Target):
    """FedAvg whose clients send their update as int8 codes and a scale per tensor."""

    name = "int8-avg"
    paper = "example for contributors"
    decode_needs = frozenset({"up", "down"})

    def finish_local(self, params: State, problem: LocalProblem, down: Payload, private: State,
                     data: LocalData) -> tuple[Payload, State]:
        return quantised({n: params[n] - down[n] for n in self.param_names}), private

    def uplink_update(self, down: Payload, up: Payload) -> Payload:
        return {n: up[f"q.{n}"].float() * up[f"s.{n}"] for n in self.param_names}

    def with_uplink_update(self, down: Payload, up: Payload, update: Payload) -> Payload:
        return quantised(update)

    def aggregate(self, server: State, uplinks: list[Message], rnd: int) -> State:
        mean = weighted_mean([replace(m, payload=self.uplink_update(server, m.payload)) for m in uplinks])
        return {**server, **{n: server[n] + mean[n] for n in self.param_names}}

    def wire_schema(self) -> WireSchema:
        shapes = self.param_shapes()
        up = {**{f"q.{n}": s for n, s in shapes.items()}, **{f"s.{n}": () for n in shapes}}
        return WireSchema(downlink=shapes, uplink=up, dtypes={"uplink": {f"q.{n}": torch.int8 for n in shapes}})

    def decode(self, down: Payload | None, up: Payload) -> State | None:
        if down is None:
            return None
        update = self.uplink_update(down, up)
        return {n: down[n] + update[n] for n in self.param_names}
