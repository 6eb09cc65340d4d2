"""One audited training run: plant canaries, train the federation once, bound epsilon from below.

The audit trains its *own* run (the spec of a federation, plus m canaries), because a canary
must be included by a fair coin before training: a federation trained without canaries cannot
be audited after the fact. Everything else (method, defences, executor, seed) is the spec's, so
the canary run is what that federation would have been with the canaries in it. The claimed
epsilon beside the audited one is the canary run's own accountant (its population counts the
canary clients), read from the defences' `accounting()`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from sklearn.metrics import roc_auc_score

from fedattack.audit import canaries as cn
from fedattack.audit.bound import audit
from fedattack.data import load_dataset
from fedattack.data.partition import make_partition
from fedattack.defences import defence_entries
from fedattack.federation.executors import make_executor
from fedattack.federation.loop import RoundLoop, client_data
from fedattack.federation.spec import FederationSpec
from fedattack.federation.train import build_target, nonfinite
from fedattack.registry import UserError
from fedattack.target import State, Target

AUDIT_SCHEMA = "fedattack.audit/1"
LEVELS = ("client", "example")
CANARY_OVER_CLIP = 100.0  # a canary far beyond the bound: only a working clip makes it count as C


@dataclass(frozen=True, kw_only=True)
class AuditSpec:
    """level: client (canary clients) or example (canary samples). canaries: m. confidence: of
    the lower bound. norm: a canary client's update norm (default: 100 x the defence's clipping bound)."""

    level: str = "client"
    canaries: int = 100
    confidence: float = 0.95
    norm: float | None = None

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise UserError(f"audit level {self.level!r}: choose one of {', '.join(LEVELS)}")
        if self.canaries < 2:
            raise UserError(f"an audit needs at least 2 canaries, got {self.canaries}")
        if not 0 < self.confidence < 1:
            raise UserError(f"audit confidence {self.confidence} must be in (0, 1)")


def claimed(target: Target) -> dict[str, Any]:
    """The first defence that states an epsilon: its name and accounting (or 'no guarantee')."""
    for entry in defence_entries(target):
        if "epsilon" in entry.get("accounting", {}):
            return {"defence": entry["name"], **entry["accounting"]}
    return {"defence": None, "epsilon": None, "delta": 1e-5, "note": "no defence claims an epsilon"}


def clip_bound(target: Target) -> float | None:
    for d in target.defences:
        for key in ("clip_norm", "max_norm"):
            if hasattr(d.settings, key):
                return float(getattr(d.settings, key))
    return None


def audit_federation(spec: FederationSpec, audit_spec: AuditSpec, data_root: str | Path | None = None,
                     download: bool = False, device: str = "cpu") -> dict[str, Any]:
    """Train `spec` once with canaries and return the audit (JSON-ready)."""
    started = time.perf_counter()
    dataset = load_dataset(spec.dataset, data_root, download)
    partition = make_partition(spec.partition, dataset, spec.num_clients, spec.seed, **spec.partition_options)
    n, m = partition.num_clients, audit_spec.canaries
    datas = [client_data(dataset, partition, k) for k in range(n)]
    included = cn.membership(spec.seed, m)
    if audit_spec.level == "client":
        target = build_target(spec, dataset, n + m, data_root)
        norm = audit_spec.norm or CANARY_OVER_CLIP * (clip_bound(target) or 1.0)
        dirs = cn.directions(target.wire_schema().uplink, m, norm, spec.seed)
        cn.plant_clients(target, {n + i: d if inside else {k: torch.zeros_like(t) for k, t in d.items()}
                                  for i, (d, inside) in enumerate(zip(dirs, included))})
        datas += cn.canary_client_data(datas, m)
    else:
        target, norm = build_target(spec, dataset, n, data_root), None
        x, y = cn.example_canaries(dataset, m, spec.seed)
        cn.add_examples(datas, x, y, included)
    states, initial = train_keeping_states(spec, target, datas, device)
    diverged = nonfinite(states[-1])
    if diverged:  # NaN scores would make the bound meaningless (and crash the AUC): say so in one line
        raise UserError(f"the canary run diverged (NaN or infinite weights in {', '.join(diverged[:3])}); "
                        "a diverged federation has nothing to audit, train it with a smaller lr or noise")
    if audit_spec.level == "client":
        scores = cn.client_scores(states, dirs)
    else:
        scores = cn.example_scores(target, states, initial[:n], x, y)
    claim = claimed(target)
    views = {view: view_result(s, included, claim["delta"], audit_spec.confidence)
             for view, s in scores.items()}
    return {"schema": AUDIT_SCHEMA, "paper": "Steinke, Nasr and Jagielski 2023 (one training run)",
            "audit": asdict(audit_spec), "canaries": cn.describe_canaries(audit_spec.level, m, norm),
            "spec": spec.to_json(), "claimed": claim, "views": views, "included": sum(included),
            "seconds": round(time.perf_counter() - started, 3)}


def train_keeping_states(spec: FederationSpec, target: Target, datas: list,
                         device: str) -> tuple[list[State], list[State]]:
    """Every server state, from the initial one to the final one, and the initial private states."""
    loop = RoundLoop(spec, target, datas, make_executor(spec.executor, device), lambda message: None)
    state = loop.start()
    initial = [dict(p) for p in state.private]
    states = [{k: v.clone() for k, v in state.server.items()}]
    for rnd in range(1, spec.rounds + 1):
        loop.run_round(state, rnd)
        states.append({k: v.clone() for k, v in state.server.items()})
    return states, initial


def view_result(scores: list[float], included: list[bool], delta: float, confidence: float) -> dict[str, Any]:
    bound = audit(scores, included, delta, confidence)
    auc = roc_auc_score(included, scores) if 0 < sum(included) < len(included) else None
    return {**bound.to_json(), "auc": auc}
