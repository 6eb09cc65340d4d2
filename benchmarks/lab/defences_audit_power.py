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

    python benchmarks/lab/defences_audit_power.py [--real] > table.md
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from fedattack.audit import AuditSpec, audit, audit_federation
from fedattack.defences import _accountant

SIGMA, ROUNDS, DELTA = 8.0, 2, 1e-5
BUGS = Path(__file__).resolve().parents[2] / "tests" / "defences" / "planted_dp_bugs.py"


def idealised(k: float, m: int, seeds: int) -> list[float]:
    mu = math.sqrt(ROUNDS) / (SIGMA / k)
    found = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        included = rng.random(m) < 0.5
        found.append(audit(rng.normal(size=m) + mu * included, included, DELTA).epsilon)
    return found


def real(k: float, m: int, seed: int) -> dict:
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
    args = parser.parse_args()
    claim = _accountant.epsilon_fixed_size(SIGMA, 4, 4, ROUNDS, DELTA)
    print(f"claimed epsilon (sigma {SIGMA:g}, {ROUNDS} rounds, every client sampled): {claim:.3f}\n")
    print("Idealised scores: median audited epsilon over seeds (\"caught\": above the claim)\n")
    print(header(COUNTS))
    for k in WEAKNESS:
        cells = [idealised(k, m, args.seeds if m <= 16384 else 3) for m in COUNTS]
        print(row(k, cells, claim), flush=True)
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
        print(row(k, cells, claim) + f" {min(seconds):.0f}-{max(seconds):.0f} s", flush=True)


def header(counts: tuple[int, ...]) -> str:
    return ("| noise too small by | true epsilon of the noise added | " + " | ".join(f"m = {m:,}" for m in counts)
            + " |\n|---|---|" + "---|" * len(counts))


def row(k: float, cells: list[list[float]], claim: float) -> str:
    true = _accountant.epsilon_fixed_size(SIGMA / k, 4, 4, ROUNDS, DELTA)
    shown = []
    for found in cells:
        med = float(np.median(found))
        spread = f" [{min(found):.2f}, {max(found):.2f}]" if len(found) > 1 else ""
        shown.append(f"{med:.2f}{spread}{' **caught**' if med > claim else ''}")
    return f"| {k:g}x | {true:.2f} | " + " | ".join(shown) + " |"


WEAKNESS = (2.0, 5.0, 10.0)
COUNTS = (64, 256, 1024, 4096, 16384, 65536)
REAL_COUNTS = (64, 1024, 4096, 16384)

if __name__ == "__main__":
    main()
