"""The multi-run audit: many small federations, each with one white-box canary client that a fair
coin puts "in" (+C along its coordinate) or "out" (-C), run on a sweep backend (local cores or Ray).

One run's bound (`gdp.py`, `bound.py`) must hold against any dependence between canaries, which
caps it below the claim. Independent runs need no such care: the "in" and "out" score
distributions are samples of the mechanism's two outputs, so the error rates at a threshold have
Clopper-Pearson intervals, which bound epsilon (assuming nothing) and the Gaussian-DP mu (and the
epsilon mu implies, for a mechanism of Gaussian shape): `heldout.py`, one threshold chosen on a
seeded tenth of the runs and tested on the rest. Beside these bounds, the Gaussian estimate of mu
((mean_in - mean_out) / pooled standard deviation, what Nasr et al. 2023 fit in the white-box
setting) with its normal-theory interval: an estimate, not a bound.

A run costs a federation (about 0.15 s for 4 clients, 2 rounds, one local batch on one core), so
thousands are cheap only if process starts and dataset loads are not paid per run: a backend task
trains PER_TASK federations on one loaded dataset.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import norm

from fedattack.atomic import write_json
from fedattack.audit import canaries as cn
from fedattack.audit.gdp import epsilon_of_mu, mu_of_epsilon
from fedattack.audit.heldout import heldout_bounds
from fedattack.audit.run import AUDIT_SCHEMA
from fedattack.audit.whitebox import whitebox_scores
from fedattack.data import load_dataset
from fedattack.federation.spec import FederationSpec
from fedattack.jsonfile import read_json
from fedattack.registry import UserError


def gaussian_estimate(s_in: np.ndarray, s_out: np.ndarray, delta: float, confidence: float) -> dict[str, Any]:
    """mu estimated as the standardised mean difference, with a normal-theory interval."""
    n1, n0 = len(s_in), len(s_out)
    pooled = math.sqrt(((n1 - 1) * s_in.var(ddof=1) + (n0 - 1) * s_out.var(ddof=1)) / (n1 + n0 - 2))
    mu = float((s_in.mean() - s_out.mean()) / pooled) if pooled > 0 else math.inf
    if not math.isfinite(mu):
        return {"mu": None, "low": None, "high": None, "epsilon": None, "note": "the scores do not vary"}
    se = math.sqrt(1 / n1 + 1 / n0 + mu * mu / (2 * (n1 + n0)))
    z = float(norm.ppf(1 - (1 - confidence) / 2))
    lo, hi = max(0.0, mu - z * se), max(0.0, mu + z * se)
    return {"mu": mu, "low": lo, "high": hi, "epsilon": epsilon_of_mu(max(mu, 0.0), delta),
            "epsilon_low": epsilon_of_mu(lo, delta), "epsilon_high": epsilon_of_mu(hi, delta)}


PER_TASK = 50  # federations per backend task: one task start and one dataset load serve them all


def run_chunk(spec: FederationSpec, first: int, coins: list[bool], out: Path, data_root: str | None) -> None:
    """A backend task: the federations of seeds spec.seed + first, + first + 1, ..., one canary each
    (coin `coins[i]`), in this process on one loaded dataset; their scores and the claim in
    `out`/scores.json. Each federation is its seed's alone, so how runs are chunked changes no bit."""
    dataset = load_dataset(spec.dataset, data_root)
    rows, claim = [], None
    for i, inside in enumerate(coins):
        seed = spec.seed + first + i
        result = whitebox_scores(dataclasses.replace(spec, seed=seed), 1, [inside], data_root, dataset=dataset)
        rows.append({"seed": seed, "score": result["scores"][0], "inside": inside})
        claim = result["claimed"]
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "scores.json", {"claimed": claim, "rows": rows})


def multirun_audit(spec: FederationSpec, runs: int, backend: str = "local", workers: int | None = None,
                   confidence: float = 0.95, data_root: str | None = None,
                   address: str | None = None, per_task: int = PER_TASK) -> dict[str, Any]:
    """`runs` federations (seeds spec.seed, spec.seed + 1, ...) each with one canary; both bounds."""
    from fedattack.experiments.backends import make_backend
    from fedattack.experiments.backends.base import Task, run_tasks

    if runs < 10:
        raise UserError(f"a multi-run audit needs at least 10 runs, got {runs}")
    started = time.perf_counter()
    coins = cn.membership(spec.seed + 7919, runs)
    with tempfile.TemporaryDirectory(prefix="fedattack-multirun-") as tmp:
        starts = range(0, runs, per_task)
        folders = [Path(tmp) / f"runs-{a}" for a in starts]
        tasks = [Task(f"audit runs {a}-{min(a + per_task, runs) - 1}", f,
                      functools.partial(run_chunk, spec, a, coins[a:a + per_task], f, data_root))
                 for a, f in zip(starts, folders)]
        with make_backend(backend, workers, address) as chosen:
            run_tasks(chosen, tasks, lambda task, outcome: None)
        chunks = [read_json(f / "scores.json", "a run left no score", "a run's score is corrupt") for f in folders]
    rows = [{**row, "claimed": c["claimed"]} for c in chunks for row in c["rows"]]
    return summarise(spec, rows, confidence, time.perf_counter() - started, backend)


def summarise(spec: FederationSpec, rows: list[dict[str, Any]], confidence: float, seconds: float,
              backend: str) -> dict[str, Any]:
    claim = rows[0]["claimed"]
    delta = float(claim.get("delta") or 1e-5)
    s_in = np.array([r["score"] for r in rows if r["inside"]], dtype=np.float64)
    s_out = np.array([r["score"] for r in rows if not r["inside"]], dtype=np.float64)
    if len(s_in) < 2 or len(s_out) < 2:
        raise UserError(f"the coins put {len(s_in)} runs in and {len(s_out)} out; run more federations")
    eps = claim.get("epsilon")
    return {"schema": AUDIT_SCHEMA, "kind": "multi-run white-box canary", "spec": spec.to_json(),
            "claimed": claim, "claimed_mu": None if eps is None else mu_of_epsilon(float(eps), delta),
            "runs": len(rows), "in": len(s_in), "out": len(s_out), "confidence": confidence,
            "bound": heldout_bounds(np.array([r["score"] for r in rows], dtype=np.float64),
                                    np.array([bool(r["inside"]) for r in rows]), spec.seed, delta, confidence),
            "estimate": gaussian_estimate(s_in, s_out, delta, confidence),
            "backend": backend, "seconds": round(seconds, 3)}
