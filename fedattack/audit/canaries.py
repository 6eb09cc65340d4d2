"""What the auditor plants in its one training run, and how it scores each canary.

Client level (Andrew et al., ICLR 2024): m canary clients join the population; canary i sends
a fixed random direction u_i when it is "in" (of norm 100 times the clipping bound by default:
a correct defence clips it to exactly its bound, a missing or misplaced clip lets it through),
and the downlink unchanged (a zero update) when it is "out". In or out, the canary client is
sampled, clipped, noised and counted like any client, so flipping one canary is one
replace-one neighbour of the federation (the relation dp-fedavg accounts for). Its score is
the cosine between u_i and the server model's change: over the whole run (the final model) or
the largest over the rounds (every model the server holds).

Example level: m mislabelled test images (never in any client's training split), canary i
assigned to client i mod N and added to its local set when "in". Adding a sample changes one
client, so client-level DP bounds it too. Its score is minus its loss under the server model:
the final model's, or the largest one-round drop of that loss over the rounds. Personalising
methods are scored through each client's *initial* private state, which does not depend on
the canaries (a score must be a function of the audited view only).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from fedattack.data.types import Dataset
from fedattack.defences._update import update_of, with_update
from fedattack.rng import generator
from fedattack.target import ClientContext, LocalData, State, Target
from fedattack.wire import Payload


def membership(seed: int, m: int) -> list[bool]:
    """S: each canary included with probability 1/2, independently of everything else."""
    return [bool(b) for b in (torch.rand(m, generator=generator(seed, "audit:membership")) < 0.5)]


def directions(shapes: Mapping[str, tuple[int, ...]], m: int, norm: float, seed: int) -> list[Payload]:
    """m random directions over the uplink's tensors, each of L2 norm `norm` (all tensors together)."""
    out = []
    for i in range(m):
        gen = generator(seed, "audit:direction", i)
        d = {n: torch.randn(tuple(s), generator=gen) for n, s in sorted(shapes.items())}
        scale = norm / math.sqrt(sum(float((t.double() ** 2).sum()) for t in d.values()))
        out.append({n: t * scale for n, t in d.items()})
    return out


class _PlantsCanaries:
    """Mixed in before a (possibly defended) method's class: canary clients send their canary."""

    planted: Mapping[int, Payload]

    def seal(self, up: Payload, down: Payload, ctx: ClientContext) -> Payload:
        canary = self.planted.get(ctx.client)
        if canary is not None:
            update = update_of(up, down)
            up = with_update(up, down, {n: canary[n].to(t.dtype) if n in canary else torch.zeros_like(t)
                                        for n, t in update.items()})
        return super().seal(up, down, ctx)  # type: ignore[misc]  # the method's (and defences') seal


def plant_clients(target: Target, planted: Mapping[int, Payload]) -> None:
    """Make `target` send `planted[k]` as the update of client k (before any defence runs)."""
    cls = type(target)
    target.__class__ = type(f"Canaried{cls.__name__}", (_PlantsCanaries, cls), {"__module__": __name__})
    target.planted = planted  # type: ignore[attr-defined]  # set on the class made just above


def canary_client_data(datas: list[LocalData], m: int) -> list[LocalData]:
    """Each canary client holds one sample (its local training is discarded; its n_k is 1)."""
    n = len(datas)
    return [LocalData(datas[i % n].x_train[:1], datas[i % n].y_train[:1],
                      datas[i % n].x_test[:1], datas[i % n].y_test[:1]) for i in range(m)]


def cosine(change: State, direction: Payload) -> float:
    names = [n for n in direction if n in change]
    a = torch.cat([change[n].double().flatten() for n in names])
    b = torch.cat([direction[n].double().flatten() for n in names])
    return float(a @ b / (a.norm() * b.norm()).clamp_min(1e-300))


def client_scores(states: list[State], dirs: list[Payload]) -> dict[str, list[float]]:
    """Per canary: the final model's change along it, and the largest one-round change."""
    final = {n: states[-1][n] - states[0][n] for n in states[0]}
    steps = [{n: b[n] - a[n] for n in a} for a, b in zip(states, states[1:])]
    return {"final": [cosine(final, d) for d in dirs],
            "rounds": [max(cosine(s, d) for s in steps) for d in dirs]}


def example_canaries(dataset: Dataset, m: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """m test images with a wrong label drawn uniformly among the others."""
    if m > len(dataset.y_test):
        raise ValueError(f"{m} example canaries, but the test split has {len(dataset.y_test)} images")
    gen = generator(seed, "audit:examples")
    idx = torch.randperm(len(dataset.y_test), generator=gen)[:m]
    shift = torch.randint(1, dataset.num_classes, (m,), generator=gen)
    return dataset.x_test[idx], (dataset.y_test[idx] + shift) % dataset.num_classes


def add_examples(datas: list[LocalData], x: torch.Tensor, y: torch.Tensor, included: list[bool]) -> None:
    """Append canary i to client i mod N's training set when it is included."""
    for i, inside in enumerate(included):
        if inside:
            d = datas[i % len(datas)]
            d.x_train, d.y_train = torch.cat([d.x_train, x[i:i + 1]]), torch.cat([d.y_train, y[i:i + 1]])


def example_losses(target: Target, state: State, privates: list[State], x: torch.Tensor,
                   y: torch.Tensor) -> torch.Tensor:
    """Each canary's loss under the model its client deploys from `state` (initial private parts)."""
    n = len(privates)
    out = torch.empty(len(y))
    with torch.no_grad():
        for k in range(min(n, len(y))):
            rows = torch.arange(k, len(y), n)
            params = target.deployed(state, privates[k])
            out[rows] = F.cross_entropy(target.forward(params, x[rows]), y[rows], reduction="none")
    return out


def example_scores(target: Target, states: list[State], privates: list[State], x: torch.Tensor,
                   y: torch.Tensor) -> dict[str, list[float]]:
    losses = torch.stack([example_losses(target, s, privates, x, y) for s in states])
    drops = losses[:-1] - losses[1:]
    return {"final": (-losses[-1]).tolist(), "rounds": drops.max(0).values.tolist()}


def describe_canaries(level: str, m: int, norm: float | None) -> dict[str, Any]:
    if level == "client":
        return {"level": level, "canaries": m, "kind": "random-direction clients", "norm": norm}
    return {"level": level, "canaries": m, "kind": "mislabelled test images"}
