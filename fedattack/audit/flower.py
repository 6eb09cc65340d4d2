"""Audit a Flower app's differential privacy end to end: its claim against one canaried run.

The app's strategy (with Flower's DP wrappers) and ClientApp run on an in-process Grid
(fedattack/interop/flower_grid.py) with m canary nodes, each "in" by a fair coin; every model
the server releases is kept, each canary is scored on them as the one-run audit scores canary
clients (fedattack.audit.canaries.client_scores), and the scores are bounded by the audit's own
`fedattack.audit.audit` (Steinke, Nasr and Jagielski 2023), so a tighter bound there tightens
this audit too. The claim is Flower's: the wrapper's noise multiplier (the effective one, for
adaptive clipping), clipping norm and sampled clients, accounted by the app's own
`RdpAccountant` when it keeps one, else by Flower's `RdpAccountant` on the same parameters
(every node sampled every round, add-or-remove-one, no amplification: how Flower accounts).

The verdict is one line: "claim consistent (audited epsilon a [lo, hi] against claimed b)",
"claim refuted (...)", or "not differentially private (no noise reaches the aggregate)". lo is
the audit's lower bound at the stated confidence (its best guesses, Bonferroni-corrected); a and
hi read the same bound's test on a guess for every canary (the top half "in", the bottom half
"out"): a is the epsilon at which that many right guesses are the median outcome, hi the one at
which they are in the lower tail. Only lo is a bound on the app's epsilon (never above it for a
correct app, at the stated confidence); a and hi say how sharp the canaries' separation was.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from flwr.serverapp import GaussianPrivacyEvent, NeighboringRelation, PrivacyConfig, SamplingMethod
from flwr.serverapp.strategy import Strategy
from flwr.serverapp.strategy.dp_adaptive_clipping import DifferentialPrivacyAdaptiveBase
from sklearn.metrics import roc_auc_score

from fedattack.audit import canaries as cn
from fedattack.audit.bound import audit, epsilon_lower_bound
from fedattack.interop.flower_dp import (
    AuditingStrategy,
    DPWrapper,
    FlowerApp,
    arrays_of,
    canary_app,
    clip_of,
    dp_wrapper,
)
from fedattack.interop.flower_grid import FIRST_NODE, LocalGrid, serving
from fedattack.registry import UserError

SCHEMA = "fedattack.audit-flower/1"
OVER_CLIP = 100.0  # a canary's update norm, in clipping norms: only a working clip makes it count as C
OUT_SCALE = 1e-8  # an "out" canary sends its direction this much smaller: Flower's clip divides by the
#                   update's norm, so an exactly zero update crashes it (ZeroDivisionError, flwr 1.42)


def audit_flower_app(app: FlowerApp, canaries: int = 64, confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Run `app` once with `canaries` canary nodes and return the audit (JSON-ready)."""
    check(app, canaries, confidence)
    started, n = time.perf_counter(), app.partitions + canaries
    with quiet_flower():  # Flower warns at INFO and WARNING about settings the audit makes (no evaluation)
        strategy = flower_strategy(app, n)
    wrapper = dp_wrapper(strategy)
    initial = app.initial_arrays()
    shapes = {name: tuple(a.shape) for name, a in arrays_of(initial).items()}
    dirs = cn.directions(shapes, canaries, OVER_CLIP * (clip_of(wrapper) or 1.0), seed)
    included = cn.membership(seed, canaries)
    sent = [{k: t.numpy() * (1.0 if inside else OUT_SCALE) for k, t in d.items()} for d, inside in zip(dirs, included)]
    grid = LocalGrid(n, lambda k: app.client_app if k < app.partitions else
                     canary_app(sent[k - app.partitions], app.examples, app.mods),
                     lambda k: {"partition-id": k, "num-partitions": app.partitions})
    auditing = AuditingStrategy(strategy, {FIRST_NODE + k for k in range(app.partitions, n)})
    with quiet_flower(), seeded(seed), serving():
        auditing.start(grid=grid, initial_arrays=initial, num_rounds=app.rounds)
    states = [{k: torch.from_numpy(v) for k, v in s.items()} for s in auditing.states]
    claim = flower_claim(wrapper, n, app.rounds, app.delta)
    views = {view: view_result(s, included, claim["delta"], confidence)
             for view, s in cn.client_scores(states, dirs).items()}
    reaches = not any(auditing.deterministic)
    noise = {"fresh_std": auditing.fresh, "claimed_std": claimed_std(wrapper), "reaches_aggregate": reaches}
    best = max(views.values(), key=lambda v: v["epsilon"])
    return {"schema": SCHEMA, "paper": "Steinke, Nasr and Jagielski 2023 (one run); canaries as Andrew et al. 2024",
            "canaries": {"count": canaries, "included": sum(included), "norm": OVER_CLIP * (clip_of(wrapper) or 1.0)},
            "app": {"partitions": app.partitions, "rounds": app.rounds, "examples": app.examples},
            "claimed": claim, "noise": noise, "views": views,
            "verdict": verdict(claim["epsilon"], best, reaches),
            "seed": seed, "seconds": round(time.perf_counter() - started, 3)}


def check(app: FlowerApp, canaries: int, confidence: float) -> None:
    if not isinstance(app, FlowerApp):
        raise UserError(f"the app factory returned a {type(app).__name__}, not a fedattack.interop.flower_dp.FlowerApp")
    if canaries < 2 or not 0 < confidence < 1:
        raise UserError(f"an audit needs at least 2 canaries and a confidence in (0, 1), got {canaries} and "
                        f"{confidence}")
    for name in ("partitions", "rounds", "examples"):
        value = getattr(app, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserError(f"the app declares {name}={value!r}; it must be a positive integer")
    if not 0 < app.delta < 1:
        raise UserError(f"the app declares delta={app.delta}; it must be in (0, 1)")


def flower_strategy(app: FlowerApp, n: int) -> Strategy:
    """The app's strategy for n nodes; Flower's own refusal of a configuration becomes one line."""
    try:
        strategy = app.strategy(n)
    except ValueError as exc:
        raise UserError(f"Flower refused the app's DP configuration: {exc}") from None
    if not isinstance(strategy, Strategy):
        raise UserError(f"app.strategy({n}) returned a {type(strategy).__name__}, not a Flower Strategy")
    return strategy


def noise_multiplier(wrapper: DPWrapper) -> float:
    """The wrapper's noise multiplier; for adaptive clipping the effective one (Andrew et al. 2021),
    from the update noise and the clipped-count noise Flower split it into."""
    z = float(wrapper.noise_multiplier)
    if isinstance(wrapper, DifferentialPrivacyAdaptiveBase) and z > 0:
        return float((z ** -2 + (2 * wrapper.clipped_count_stddev) ** -2) ** -0.5)
    return z


def claimed_std(wrapper: DPWrapper | None) -> float | None:
    """The per-coordinate std of the noise Flower's fixed clipping adds (sigma C / m)."""
    if wrapper is None or isinstance(wrapper, DifferentialPrivacyAdaptiveBase):
        return None
    return float(wrapper.noise_multiplier * wrapper.clipping_norm
                 / wrapper.num_sampled_clients)


def flower_claim(wrapper: DPWrapper | None, population: int, rounds: int, delta: float) -> dict[str, Any]:
    """What the app claims: Flower's wrapper, its parameters and the epsilon they account for."""
    if wrapper is None:
        return {"wrapper": None, "epsilon": None, "delta": delta, "accountant": None,
                "note": "no Flower DP wrapper in the strategy: nothing claims an epsilon"}
    z, m = noise_multiplier(wrapper), int(wrapper.num_sampled_clients)
    facts = {"wrapper": type(wrapper).__name__, "noise_multiplier": z, "clipping_norm": clip_of(wrapper),
             "num_sampled_clients": m, "population": population, "rounds": rounds, "delta": delta}
    own = getattr(wrapper, "accountant", None)
    if z <= 0:
        return {**facts, "epsilon": None, "accountant": None, "note": "noise multiplier 0: no finite epsilon"}
    if own is not None:
        spent = own.get_privacy_spent()
        return {**facts, "epsilon": float(spent.epsilon), "delta": float(spent.delta),
                "accountant": f"the app's own Flower RdpAccountant ({spent.num_releases} releases)"}
    from flwr.serverapp import RdpAccountant

    accountant = RdpAccountant(PrivacyConfig(delta, population, NeighboringRelation.ADD_OR_REMOVE_ONE,
                                             SamplingMethod.NO_AMPLIFICATION))
    accountant.compose(GaussianPrivacyEvent(z, m, population), rounds)
    return {**facts, "epsilon": accountant.get_epsilon(delta),
            "accountant": "Flower's RdpAccountant on the wrapper's parameters (the app keeps none)"}


def view_result(scores: list[float], included: list[bool], delta: float, confidence: float) -> dict[str, Any]:
    bound = audit(scores, included, delta, confidence)
    auc = roc_auc_score(included, scores) if 0 < sum(included) < len(included) else None
    a, hi = estimate(scores, included, delta, confidence)
    return {**bound.to_json(), "estimate": max(a, bound.epsilon), "upper": max(hi, a, bound.epsilon), "auc": auc}


def estimate(scores: list[float], included: list[bool], delta: float, confidence: float) -> tuple[float, float]:
    """The median and upper end of the epsilon every canary's guess shows (the top half guessed
    "in", the bottom half "out", fixed before the scores are seen, so no choice is made on them):
    the epsilon at which that many right guesses are the median outcome, and the one at which
    they are in the lower (1 - confidence) / 2 tail."""
    m = len(scores)
    k = m // 2
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    truth = np.asarray(included, dtype=bool)[order]
    v = int(truth[:k].sum()) + int((~truth[m - k:]).sum())
    return (epsilon_lower_bound(m, 2 * k, v, delta, 0.5),
            epsilon_lower_bound(m, 2 * k, v, delta, 1 - (1 - confidence) / 2))


def verdict(claimed: float | None, best: dict[str, Any], noisy: bool) -> str:
    """The audit in words, from the claim, the best view's bound and the noise probe."""
    said = f"audited epsilon {_num(best['estimate'])} [{_num(best['epsilon'])}, {_num(best['upper'])}]"
    if not noisy:
        if claimed is None:
            return "not differentially private (no noise reaches the aggregate)"
        return f"claim refuted ({said} against claimed {_num(claimed)}; no noise reaches the aggregate)"
    if claimed is None:
        return f"no differential-privacy claim to audit ({said})"
    word = "refuted" if best["epsilon"] > claimed else "consistent"
    return f"claim {word} ({said} against claimed {_num(claimed)})"


def _num(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.3g}"


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Flower draws its DP noise from NumPy's global generator and samples nodes with Python's:
    both seeded for the run (and torch's, for the app's own code), then restored."""
    state, py_state = np.random.get_state(), random.getstate()
    np.random.seed(seed)
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)
        random.setstate(py_state)


@contextmanager
def quiet_flower() -> Iterator[None]:
    """Flower logs every round at INFO (and warns that evaluation is off); an audit prints its own summary."""
    log = logging.getLogger("flwr")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)
