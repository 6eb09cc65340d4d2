"""The white-box audit of client-level DP: canary clients on distinct coordinates, scored by the
Gaussian likelihood ratio over every round's aggregate (the server's view of DP-FedAvg).

Why it can be tight where `run.py`'s audit is loose: there a canary is a random direction, so
m canaries crowd each other, and it is scored by one cosine. Here canary i owns coordinate c_i
of the flattened uplink (distinct coordinates are exactly orthogonal, so canaries never add to
each other's score) and sends 100 x C along it, +e_{c_i} when its coin says "in" and -e_{c_i}
when "out": a working clip makes that +-C, so flipping one coin replaces one client's update by
another of the same norm, the replace-one neighbour dp-fedavg's accountant states (a change of
2C in the sum). The auditor sees every round's aggregate, i.e. every server model (dp-fedavg's
guarantee covers exactly those). In round t the change of the model along c_i, times the
round's cohort size over C, is z_t = +-1 + (the noise, std sigma) + what real clients add there.
The canary's score is the log-likelihood ratio of "in" against "out" for the claimed mechanism
(noise sigma, each client in a round with probability q = cohort / population, who was sampled
being hidden):

    sum_t log[(1 - q + q exp(s z_t - s^2/2)) / (1 - q + q exp(-s z_t - s^2/2))],  s = 1/sigma,

which for full participation is a multiple of sum_t z_t: N(+-sqrt(T)/sigma, 1) once normalised,
so separation mu = 2 sqrt(T) / sigma, the claim itself. The scores go to both one-run bounds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from fedattack.audit import canaries as cn
from fedattack.audit.bound import audit
from fedattack.audit.gdp import audit_gdp, mu_of_epsilon
from fedattack.audit.run import AUDIT_SCHEMA, CANARY_OVER_CLIP, claimed, clip_bound, train_keeping_states
from fedattack.audit.zoo import bug_names, planted
from fedattack.data import load_dataset
from fedattack.data.partition import make_partition
from fedattack.data.types import Dataset
from fedattack.federation.loop import client_data
from fedattack.federation.spec import FederationSpec
from fedattack.federation.train import build_target, nonfinite
from fedattack.registry import UserError
from fedattack.rng import generator
from fedattack.target import State, Target
from fedattack.wire import Payload


@dataclass(frozen=True, kw_only=True)
class WhiteBoxSpec:
    """canaries: m canary clients, one coordinate each. confidence: of both bounds. per_coordinate:
    at most this many canaries share a coordinate (1: none do; see `coordinates`)."""

    canaries: int = 256
    confidence: float = 0.95
    per_coordinate: int = 1

    def __post_init__(self) -> None:
        if self.canaries < 2:
            raise UserError(f"an audit needs at least 2 canaries, got {self.canaries}")
        if self.per_coordinate < 1:
            raise UserError(f"per_coordinate must be at least 1, got {self.per_coordinate}")
        if not 0 < self.confidence < 1:
            raise UserError(f"audit confidence {self.confidence} must be in (0, 1)")


def float_shapes(target: Target) -> dict[str, tuple[int, ...]]:
    return {n: tuple(s) for n, s in sorted(target.wire_schema().uplink.items())}


def coordinates(shapes: dict[str, tuple[int, ...]], m: int, seed: int,
                per_coordinate: int = 1) -> list[tuple[str, int]]:
    """m (tensor, flat index) coordinates of the uplink: distinct while m fits the model, else
    each coordinate shared by at most `per_coordinate` canaries (fresh permutations of all slots,
    one after another, so the first len(slots) canaries are those of the unshared draw).

    Sharing is the price of more canaries than coordinates: a canary's score then also carries
    its k - 1 neighbours' +-C in every round, so its separation falls from 2 sqrt(T) / sigma to
    2 sqrt(T) / sqrt(sigma^2 + (k - 1) T), little where sigma is large (a small claimed epsilon,
    which is where one run needs the most canaries). The one-run bounds hold whatever the
    canaries' dependence, so sharing costs power, never validity."""
    slots = [(n, i) for n, s in shapes.items() for i in range(math.prod(s))]
    if m > len(slots) * per_coordinate:
        raise UserError(f"{m} white-box canaries need {math.ceil(m / per_coordinate)} coordinates at "
                        f"{per_coordinate} a coordinate, but the model's update has {len(slots)}; use at most "
                        f"{len(slots) * per_coordinate} canaries, more a coordinate, or a larger model")
    gen = generator(seed, "audit:coordinates")
    pick = torch.cat([torch.randperm(len(slots), generator=gen) for _ in range(math.ceil(m / len(slots)))])[:m]
    return [slots[int(i)] for i in pick]


def canary_update(shapes: dict[str, tuple[int, ...]], where: tuple[str, int], value: float) -> Payload:
    out = {n: torch.zeros(s) for n, s in shapes.items()}
    out[where[0]].view(-1)[where[1]] = value
    return out


class Canaries(Mapping[int, Payload]):
    """Client id -> its canary's update, built when the client seals it: tens of thousands of
    canaries stored as dense model-sized updates would hold one copy of the model per canary."""

    def __init__(self, shapes: dict[str, tuple[int, ...]], first: int, coords: list[tuple[str, int]],
                 values: list[float]) -> None:
        self.shapes, self.first, self.coords, self.signed = shapes, first, coords, values

    def __getitem__(self, client: int) -> Payload:
        i = client - self.first
        if not 0 <= i < len(self.coords):
            raise KeyError(client)
        return canary_update(self.shapes, self.coords[i], self.signed[i])

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.first, self.first + len(self.coords)))

    def __len__(self) -> int:
        return len(self.coords)


def round_projections(states: list[State], coords: list[tuple[str, int]], cohort: int,
                      clip: float) -> np.ndarray:
    """z[t, i]: round t's model change at canary i's coordinate, times cohort / C (T x m)."""
    rows = []
    for a, b in zip(states, states[1:]):
        rows.append([float(b[n].reshape(-1)[i] - a[n].reshape(-1)[i]) for n, i in coords])
    return np.asarray(rows, dtype=np.float64) * cohort / clip


def likelihood_ratio(z: np.ndarray, sigma: float | None, q: float) -> np.ndarray:
    """Each canary's log-likelihood ratio, in against out, summed over the rounds (rows of z)."""
    if q >= 1 or not sigma:
        return z.sum(0)  # full participation: the ratio is a multiple of the plain sum
    s = 1.0 / sigma
    zs = z / sigma
    log_in = np.logaddexp(math.log1p(-q), math.log(q) + s * zs - s * s / 2)
    log_out = np.logaddexp(math.log1p(-q), math.log(q) - s * zs - s * s / 2)
    return (log_in - log_out).sum(0)


def claimed_sigma(target: Target) -> float | None:
    for d in target.defences:
        if hasattr(d.settings, "noise_multiplier"):
            return float(d.settings.noise_multiplier)
    return None


def whitebox_audit(spec: FederationSpec, wb: WhiteBoxSpec, data_root: str | None = None,
                   download: bool = False, device: str = "cpu") -> dict[str, Any]:
    """Train `spec` once with m coordinate canaries; both one-run bounds of the scores (JSON-ready)."""
    started = time.perf_counter()
    result = whitebox_scores(spec, wb.canaries, cn.membership(spec.seed, wb.canaries), data_root, download,
                             device, wb.per_coordinate)
    claim, included, scores = result["claimed"], result["included"], result["scores"]
    return {"schema": AUDIT_SCHEMA, "kind": "white-box canary clients", "audit": asdict(wb),
            "spec": spec.to_json(), "claimed": claim, "included": sum(included),
            "bounds": bounds(scores, included, claim, wb.confidence),
            "seconds": round(time.perf_counter() - started, 3)}


def bounds(scores: list[float], included: list[bool], claim: dict[str, Any],
           confidence: float) -> dict[str, Any]:
    """Steinke et al.'s epsilon-delta bound and the Gaussian-DP bound, with the claim as GDP."""
    delta = float(claim.get("delta") or 1e-5)
    eps = claim.get("epsilon")
    return {"steinke": audit(scores, included, delta, confidence).to_json(),
            "gdp": audit_gdp(scores, included, delta, confidence).to_json(),
            "claimed_mu": None if eps is None else mu_of_epsilon(float(eps), delta)}


def whitebox_scores(spec: FederationSpec, m: int, included: list[bool], data_root: str | None = None,
                    download: bool = False, device: str = "cpu", per_coordinate: int = 1,
                    dataset: Dataset | None = None) -> dict[str, Any]:
    """One canary run: the claim, and each canary's score (higher: more likely "in"). `dataset`:
    spec.dataset already loaded (the multi-run audit trains thousands of federations on one)."""
    with planted(*bug_names(spec.defences)):
        return _scores(spec, m, included, data_root, download, device, per_coordinate, dataset)


def _scores(spec: FederationSpec, m: int, included: list[bool], data_root: str | None, download: bool,
            device: str, per_coordinate: int, dataset: Dataset | None) -> dict[str, Any]:
    if dataset is None:
        dataset = load_dataset(spec.dataset, data_root, download)
    partition = make_partition(spec.partition, dataset, spec.num_clients, spec.seed, **spec.partition_options)
    n = partition.num_clients
    datas = [client_data(dataset, partition, k) for k in range(n)]
    target = build_target(spec, dataset, n + m, data_root)
    clip = clip_bound(target) or 1.0
    shapes = float_shapes(target)
    coords = coordinates(shapes, m, spec.seed, per_coordinate)
    cn.plant_clients(target, Canaries(shapes, n, coords, [CANARY_OVER_CLIP * clip * (1 if inside else -1)
                                                          for inside in included]))
    datas += cn.canary_client_data(datas, m)
    states, _ = train_keeping_states(spec, target, datas, device)
    diverged = nonfinite(states[-1])
    if diverged:
        raise UserError(f"the canary run diverged (NaN or infinite weights in {', '.join(diverged[:3])}); "
                        "a diverged federation has nothing to audit, train it with a smaller lr or noise")
    cohort = spec.clients_per_round(n + m)
    z = round_projections(states, coords, cohort, clip)
    scores = likelihood_ratio(z, claimed_sigma(target), cohort / (n + m))
    return {"claimed": claimed(target), "included": included, "scores": [float(s) for s in scores],
            "rounds": len(states) - 1}

