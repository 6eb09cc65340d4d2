"""docs/defences.md, "Many runs": the multi-run white-box audit of dp-fedavg at claimed epsilon 1,
3.44 and 8 (delta 1e-5), thousands of one-canary federations, bounded on held-out runs.

    python benchmarks/lab/defences_multirun_audit.py --generate 8 3000     # scores, chunk by chunk
    python benchmarks/lab/defences_multirun_audit.py --write               # bounds -> evidence

The setting: that of `defences_whitebox_audit.py` (FedAvg on the digits, 4 clients plus the
canary, all sampled every round, 2 rounds, digits-mlp, lr 0.1, dp-fedavg with C = 0.5, sigma
solved so that the accountant states the claim) with one batch of all a client's data per round
(one local step: the canary's score reads only the rounds' aggregates, so the smallest honest
federation). Seeds from SEED on, never used by the tests. --generate runs the library's own
backend task (`multirun.run_chunk`) one chunk at a time in this process and keeps every chunk
under results/multirun/ (resumable); --write bounds the scores with `multirun.summarise` and
writes docs/evidence/defences/multirun-audit.json with every run's score (4 significant digits)
and coin, so the table is rebuilt from what was measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.lab.evidence import markdown, save  # noqa: E402

HERE = "benchmarks/lab/defences_multirun_audit.py"
ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "results" / "multirun"
SEED = 100_000
CHUNK = 50


def spec(claim: float) -> Any:
    import dataclasses

    from benchmarks.lab.defences_whitebox_audit import dp, sigma_for
    from benchmarks.lab.defences_whitebox_audit import spec as base
    from fedattack.target import Recipe

    return dataclasses.replace(base(dp(sigma_for(claim)), seed=SEED),
                               recipe=Recipe(epochs=1, batch_size=1024, lr=0.1))


def folder(claim: float) -> Path:
    return RAW / f"claim-{claim:g}"


def generate(claim: float, runs: int) -> None:
    """Every chunk of `runs` federations not yet on disk, with its wall time."""
    import resource

    import torch

    from fedattack.audit import canaries as cn
    from fedattack.audit.multirun import run_chunk

    torch.set_num_threads(1)
    sp, out = spec(claim), folder(claim)
    coins = cn.membership(sp.seed + 7919, runs)
    for a in range(0, runs, CHUNK):
        done = out / f"runs-{a}"
        if (done / "scores.json").is_file():
            continue
        started = time.perf_counter()
        run_chunk(sp, a, coins[a:a + CHUNK], done, None)
        seconds = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        (done / "time.json").write_text(json.dumps({"seconds": seconds, "peak_mib": peak}))
        print(f"claim {claim:g}: runs {a}-{a + CHUNK - 1} in {seconds:.1f} s, peak {peak:.0f} MiB", flush=True)


LOOKS = {8.0: (3000, 6000), 3.44: (9000, 18000)}  # runs at the first look and at the second
CONFIDENCE = 0.975  # each look: two looks at the same seeds hold together at 95% (Bonferroni)
NOT_RUN = {1.0: "needs the runs computed below; not measured in this session"}


def chunks(claim: float) -> tuple[list[dict[str, Any]], list[float], float]:
    """Every measured run in seed order, each run's share of its chunk's seconds, the peak memory (MiB)."""
    found = sorted(folder(claim).glob("runs-*/scores.json"), key=lambda f: int(f.parent.name[5:]))
    rows, seconds, peak = [], [], 0.0
    for f in found:
        chunk = json.loads(f.read_text())
        rows += [{**r, "claimed": chunk["claimed"]} for r in chunk["rows"]]
        took = json.loads((f.parent / "time.json").read_text())
        seconds += [took["seconds"] / len(chunk["rows"])] * len(chunk["rows"])
        peak = max(peak, took["peak_mib"])
    return rows, seconds, peak


def runs_needed(mu: float, target_mu: float, share: float = 0.75) -> int:
    """Runs for a median bound of target_mu at true mu (delta method at the midpoint threshold,
    each rate at (1 - 0.95) / 2, a quarter of the runs choosing): an order of magnitude."""
    from scipy.stats import norm

    p = float(norm.cdf(-mu / 2))
    spread = (p * (1 - p)) ** 0.5 / float(norm.pdf(norm.ppf(p)))
    per_side = (float(norm.ppf(0.975)) * spread * 2 / (mu - target_mu)) ** 2
    return int(round(2 * per_side / share, -2))


def write() -> None:
    from benchmarks.lab.defences_whitebox_audit import sigma_for
    from fedattack.audit.gdp import mu_of_epsilon
    from fedattack.audit.multirun import summarise

    out = []
    for claim in (1.0, 3.44, 8.0):
        sigma = sigma_for(claim)
        true_mu = 2 * 2 ** 0.5 / sigma
        row: dict[str, Any] = {"target_claim": claim, "sigma": sigma, "mechanism_mu": true_mu,
                               "runs_for_0.8x": runs_needed(true_mu, mu_of_epsilon(0.8 * claim, 1e-5))}
        rows, seconds, peak = chunks(claim)
        row["looks"] = []
        for runs in LOOKS.get(claim, ()):
            if len(rows) < runs:
                continue
            r = summarise(spec(claim), rows[:runs], CONFIDENCE, sum(seconds[:runs]), "sequential")
            row["looks"].append({"runs": runs, "claimed": r["claimed"]["epsilon"], "claimed_mu": r["claimed_mu"],
                                 "bound": r["bound"], "estimate": r["estimate"], "seconds": round(r["seconds"], 1)})
        row["peak_mib"] = round(peak)
        row["scores"] = " ".join(f"{x['score']:.4g}" for x in rows)  # seed order, from SEED
        row["inside"] = "".join("1" if x["inside"] else "0" for x in rows)
        row["note"] = NOT_RUN.get(claim, "")
        out.append(row)
    about = {"script": HERE, "date": time.strftime("%Y-%m-%d"), "delta": 1e-5, "confidence_each_look": CONFIDENCE,
             "seed": SEED, "setting": "fedavg, digits, 4 clients + 1 canary all sampled, 2 rounds, digits-mlp, "
             "one local batch, C 0.5, server noise; one core, niced, shared machine"}
    save("defences/multirun-audit", f"{HERE}:render", out, **about)


def render(data: dict[str, Any]) -> str:
    """One line per look at the runs (the claim 1 row: the runs it would need)."""
    header = ["claimed epsilon", "sigma", "runs (choosing / tested in / out)",
              "Gaussian-DP bound (97.5%): epsilon (x claim), mu of claimed mu", "epsilon-delta bound (97.5%)",
              "Gaussian estimate [97.5%]", "time, 1 core", "runs 0.8x needs (computed)"]
    lines = []
    for row in data["rows"]:
        need = f"{row['runs_for_0.8x']:,}"
        if not row["looks"]:
            lines.append([f"{row['target_claim']:.2f}", f"{row['sigma']:.2f}", "not run", "-", "-", "-", "-", need])
        for look in row["looks"]:
            b, e = look["bound"], look["estimate"]
            lines.append([f"{look['claimed']:.2f}", f"{row['sigma']:.2f}",
                          f"{look['runs']:,} ({b['choosing_runs']:,} / {b['tested_in']:,} / {b['tested_out']:,})",
                          f"{b['epsilon_of_mu']:.2f} ({b['epsilon_of_mu'] / look['claimed']:.2f}x), mu {b['mu']:.3f} "
                          f"of {look['claimed_mu']:.3f}", f"{b['epsilon']:.2f}",
                          f"{e['epsilon']:.2f} [{e['epsilon_low']:.2f}, {e['epsilon_high']:.2f}]",
                          f"{look['seconds']:.0f} s, {row['peak_mib']} MiB", need])
    return markdown(header, lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generate", nargs=2, metavar=("CLAIM", "RUNS"))
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    if args.generate:
        generate(float(args.generate[0]), int(args.generate[1]))
    if args.write:
        write()


if __name__ == "__main__":
    main()
