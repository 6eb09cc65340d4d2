"""The multi-run audit: many small federations, each with one white-box canary client that a fair
coin puts "in" (+C along its coordinate) or "out" (-C), run on a sweep backend (local cores or Ray).

One run's bound (`gdp.py`, `bound.py`) must hold against any dependence between canaries, which
caps it below the claim. Independent runs need no such care: the "in" and "out" score
distributions are samples of the mechanism's two outputs, so at a threshold t the false-positive
and false-negative rates have Clopper-Pearson intervals, and

    epsilon >= log((1 - delta - FNR_hi) / FPR_hi)   (and with the roles swapped)   (Nasr et al.)
    mu      >= Phi^-1(1 - FNR_hi) - Phi^-1(FPR_hi)   (a mu-GDP mechanism allows no better pair)

at the stated confidence. The thresholds tried are the 5%, 10%, ..., 95% quantiles of the pooled
scores (which do not look at the coins), each tested at (1 - confidence) / (2 x 19), so picking
the best is not a multiple-testing gain. Beside these bounds, the Gaussian estimate of mu
((mean_in - mean_out) / pooled standard deviation, what Nasr et al. 2023 fit in the white-box
setting) with its normal-theory interval: an estimate, not a bound.
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
from scipy.stats import beta, norm

from fedattack.atomic import write_json
from fedattack.audit import canaries as cn
from fedattack.audit.gdp import epsilon_of_mu, mu_of_epsilon
from fedattack.audit.run import AUDIT_SCHEMA
from fedattack.audit.whitebox import whitebox_scores
from fedattack.federation.spec import FederationSpec
from fedattack.jsonfile import read_json
from fedattack.registry import UserError

QUANTILES = tuple(q / 20 for q in range(1, 20))


def upper(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper-Pearson upper bound of a rate, k of n, at level alpha."""
    return 1.0 if k >= n else float(beta.ppf(1 - alpha, k + 1, n - k))


def threshold_bounds(s_in: np.ndarray, s_out: np.ndarray, delta: float, confidence: float) -> dict[str, Any]:
    """The best epsilon and mu lower bounds over the pooled-quantile thresholds."""
    thresholds = np.quantile(np.concatenate([s_in, s_out]), QUANTILES)
    alpha = (1 - confidence) / (2 * len(thresholds))
    best: dict[str, Any] = {"epsilon": 0.0, "mu": 0.0, "threshold": None, "fpr_hi": None, "fnr_hi": None}
    for t in thresholds:
        fpr = upper(int((s_out >= t).sum()), len(s_out), alpha)
        fnr = upper(int((s_in < t).sum()), len(s_in), alpha)
        eps = max(_log_ratio(1 - delta - fnr, fpr), _log_ratio(1 - delta - fpr, fnr))
        mu = max(0.0, float(norm.ppf(1 - fnr) - norm.ppf(fpr))) if fpr < 1 and fnr < 1 else 0.0
        if mu > best["mu"] or (mu == best["mu"] and eps > best["epsilon"]):
            best = {"epsilon": eps, "mu": mu, "threshold": float(t), "fpr_hi": fpr, "fnr_hi": fnr}
    best["epsilon_of_mu"] = epsilon_of_mu(float(best["mu"]), delta)
    return best


def _log_ratio(a: float, b: float) -> float:
    return max(0.0, math.log(a / b)) if a > 0 and b > 0 else 0.0


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


def one_run(spec: FederationSpec, inside: bool, out: Path, data_root: str | None) -> None:
    """A backend task: one federation with one canary; its score and claim into `out`/score.json."""
    result = whitebox_scores(spec, 1, [inside], data_root)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "score.json", {"score": result["scores"][0], "inside": inside, "claimed": result["claimed"]})


def multirun_audit(spec: FederationSpec, runs: int, backend: str = "local", workers: int | None = None,
                   confidence: float = 0.95, data_root: str | None = None,
                   address: str | None = None) -> dict[str, Any]:
    """`runs` federations (seeds spec.seed, spec.seed + 1, ...) each with one canary; both bounds."""
    from fedattack.experiments.backends import make_backend
    from fedattack.experiments.backends.base import Task, run_tasks

    if runs < 10:
        raise UserError(f"a multi-run audit needs at least 10 runs, got {runs}")
    started = time.perf_counter()
    coins = cn.membership(spec.seed + 7919, runs)
    with tempfile.TemporaryDirectory(prefix="fedattack-multirun-") as tmp:
        folders = [Path(tmp) / f"run-{r}" for r in range(runs)]
        tasks = [Task(f"audit run {r}", folders[r],
                      functools.partial(one_run, dataclasses.replace(spec, seed=spec.seed + r), coins[r],
                                        folders[r], data_root)) for r in range(runs)]
        with make_backend(backend, workers, address) as chosen:
            run_tasks(chosen, tasks, lambda task, outcome: None)
        rows = [read_json(f / "score.json", "a run left no score", "a run's score is corrupt") for f in folders]
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
            "bound": threshold_bounds(s_in, s_out, delta, confidence),
            "estimate": gaussian_estimate(s_in, s_out, delta, confidence),
            "backend": backend, "seconds": round(seconds, 3)}
