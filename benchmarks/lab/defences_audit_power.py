"""What `fedattack audit` can detect: noise k times smaller than the accountant assumes.

The setting is the audit tests' (tests/defences/test_audit.py): FedAvg on digits, 4 clients all
sampled in each of 2 rounds, dp-fedavg with C = 0.5 and server noise, claimed sigma = 8, whose
accountant states epsilon 1.48 at delta 1e-5 (every client sampled: the claim does not depend
on the canary count). The planted bug (`tests/defences/planted_dp_bugs.py`,
`planted-weak-noise-dp`) adds sigma / k instead, and still claims sigma's epsilon.

Two measurements:
- idealised: each canary's score is its exact Gaussian statistic, N(mu * included, 1) with
  mu = sqrt(rounds) / (sigma / k) (a canary's clipped update C in each round against noise
  sigma C / k; the best score any auditor of this view can have), audited by the same bound
  (`fedattack.audit.audit`): median over seeds, for many canary counts m;
- real: `audit_federation` with the planted bug, at the counts the idealised run points at.

    python benchmarks/lab/defences_audit_power.py [--real-seeds 0] [--evidence FILE] > table.md

`--evidence docs/evidence/defences/audit-power-idealised.json` writes the idealised table's
per-seed audited epsilons (kilobytes), from which `render` rebuilds the page's table
(`python -m benchmarks.lab.evidence`). numpy and fedattack are imported where used, so this
module's top stays standard library (benchmarks/lab/evidence.py's rule for render modules).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

SIGMA, ROUNDS, DELTA = 8.0, 2, 1e-5
ROOT = Path(__file__).resolve().parents[2]
BUGS = ROOT / "tests" / "defences" / "planted_dp_bugs.py"
KEY = "defences/audit-power-idealised"


def idealised(k: float, m: int, seeds: int) -> list[float]:
    import numpy as np

    from fedattack.audit import audit

    mu = math.sqrt(ROUNDS) / (SIGMA / k)
    found = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        included = rng.random(m) < 0.5
        found.append(audit(rng.normal(size=m) + mu * included, included, DELTA).epsilon)
    return found


def real(k: float, m: int, seed: int) -> dict:
    from fedattack.audit import AuditSpec, audit_federation
    from fedattack.federation.spec import FederationSpec
    from fedattack.registry import load_plugin_file
    from fedattack.target import Recipe

    load_plugin_file(str(BUGS))
    dp = {"name": "planted-weak-noise-dp", "settings": {"clip_norm": 0.5, "noise_multiplier": SIGMA,
                                                        "weakness": k}}
    spec = FederationSpec(method="fedavg", dataset="digits", partition="shards", num_clients=4,
                          model="digits-mlp", rounds=ROUNDS, fraction=1.0, seed=seed, record="all",
                          executor="batched", recipe=Recipe(epochs=1, batch_size=16, lr=0.1), defences=(dp,))
    return audit_federation(spec, AuditSpec(level="client", canaries=m))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5, help="seeds of the idealised audits")
    parser.add_argument("--real-seeds", type=int, default=3, help="seeds of the real audits (0: none)")
    parser.add_argument("--evidence", type=Path, help=f"write the idealised table's evidence here "
                        f"(docs/evidence/{KEY}.json)")
    args = parser.parse_args()
    claim = epsilon(SIGMA)
    print(f"claimed epsilon (sigma {SIGMA:g}, {ROUNDS} rounds, every client sampled): {claim:.3f}\n")
    print("Idealised scores: median audited epsilon over seeds (\"caught\": above the claim)\n")
    evidence = idealised_evidence(args.seeds)
    print(render(evidence), flush=True)
    if args.evidence:
        args.evidence.parent.mkdir(parents=True, exist_ok=True)
        args.evidence.write_text(json.dumps(evidence, indent=1) + "\n", encoding="utf-8")
    if not args.real_seeds:
        return
    print(f"\nReal audits (`fedattack.audit.audit_federation`, the better of the final and every-round "
          f"views): median [min, max] over seeds 0-{args.real_seeds - 1}, seconds per audit\n")
    print(header(REAL_COUNTS))
    for k in WEAKNESS:
        cells, seconds = [], []
        for m in REAL_COUNTS:
            found = []
            for seed in range(args.real_seeds):
                started = time.perf_counter()
                views = real(k, m, seed)["views"]
                seconds.append(time.perf_counter() - started)
                found.append(max(v["epsilon"] for v in views.values()))
            cells.append(found)
        print(row(k, epsilon(SIGMA / k), cells, claim) + f" {min(seconds):.0f}-{max(seconds):.0f} s", flush=True)


def epsilon(sigma: float) -> float:
    """The accountant's epsilon of this setting at noise multiplier sigma (every client sampled)."""
    from fedattack.defences import _accountant

    return float(_accountant.epsilon_fixed_size(sigma, 4, 4, ROUNDS, DELTA))


def idealised_evidence(seeds: int) -> dict[str, Any]:
    """Every idealised cell's audited epsilon per seed: what the page's first table is computed from."""
    rows = [{"weakness": k, "true_epsilon": epsilon(SIGMA / k),
             "cells": [{"canaries": m, "epsilons": idealised(k, m, seeds if m <= 16384 else 3)} for m in COUNTS]}
            for k in WEAKNESS]
    return {"render": f"benchmarks/lab/{Path(__file__).name}:render",
            "command": "python benchmarks/lab/defences_audit_power.py --real-seeds 0 "
                       f"--evidence docs/evidence/{KEY}.json",
            "setting": {"sigma": SIGMA, "rounds": ROUNDS, "delta": DELTA, "clients": 4, "seeds": seeds,
                        "seeds_at_65536": 3},
            "claimed_epsilon": epsilon(SIGMA), "rows": rows}


def render(evidence: dict[str, Any]) -> str:
    """The idealised table from its evidence: per cell the median audited epsilon over seeds, its
    [min, max], and "caught" where the median is above the claimed epsilon."""
    counts = tuple(c["canaries"] for c in evidence["rows"][0]["cells"])
    claim = evidence["claimed_epsilon"]
    lines = [header(counts)]
    for r in evidence["rows"]:
        lines.append(row(r["weakness"], r["true_epsilon"], [c["epsilons"] for c in r["cells"]], claim))
    return "\n".join(lines)


def header(counts: tuple[int, ...]) -> str:
    return ("| noise too small by | true epsilon of the noise added | " + " | ".join(f"m = {m:,}" for m in counts)
            + " |\n|---|---|" + "---|" * len(counts))


def row(k: float, true: float, cells: list[list[float]], claim: float) -> str:
    shown = []
    for found in cells:
        med = float(statistics.median(found))  # the seeds are odd in number: numpy's median, the same
        spread = f" [{min(found):.2f}, {max(found):.2f}]" if len(found) > 1 else ""
        shown.append(f"{med:.2f}{spread}{' **caught**' if med > claim else ''}")
    return f"| {k:g}x | {true:.2f} | " + " | ".join(shown) + " |"


WEAKNESS = (2.0, 5.0, 10.0)
COUNTS = (64, 256, 1024, 4096, 16384, 65536)
REAL_COUNTS = (64, 1024, 4096, 16384)

if __name__ == "__main__":
    main()
