"""Issue #45 item 4: Flower's DP wrappers, a planted bug and a noise-free filter, audited by
`fedattack audit-flower`, as docs/defences.md ("Auditing a Flower app's DP") shows them.

    FEDATTACK_DATA=... python -m benchmarks.lab.flower_dp_audit --seeds 0 1 2 \
        --evidence docs/evidence/defences/flower-dp-audit.json

Each configuration of examples/flower_dp/dp_app.py (4 partitions of 256 digits, 3 rounds, sigma 6,
C 0.5) is audited with 64 canary nodes per seed; the evidence keeps one compact row per
(configuration, seed), and `render` turns them into the page's table (standard library only).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

CONFIGS = ("server_side", "client_side", "accounted", "adaptive", "forgotten_mod", "noise_removed",
           "noise_free_filter")
CANARIES = 64


def measure(seeds: list[int]) -> list[dict[str, Any]]:
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "flower_dp"))
    import dp_app  # type: ignore[import-not-found]

    from fedattack.audit.flower import audit_flower_app

    torch.set_num_threads(1)
    rows = []
    for name in CONFIGS:
        for seed in seeds:
            r = audit_flower_app(getattr(dp_app, name)(), canaries=CANARIES, seed=seed)
            best = max(r["views"].values(), key=lambda v: v["epsilon"])
            rows.append({"config": name, "seed": seed, "claimed": r["claimed"]["epsilon"],
                         "lower": best["epsilon"], "estimate": best["estimate"], "upper": best["upper"],
                         "auc": round(best["auc"], 3), "fresh_std": max(r["noise"]["fresh_std"]),
                         "claimed_std": r["noise"]["claimed_std"], "verdict": r["verdict"].split(" (")[0],
                         "seconds": r["seconds"]})
            print(name, seed, r["verdict"], r["seconds"], flush=True)
    return rows


def _eps(x: float | None) -> str:
    return "none" if x is None else f"{x:.2f}"


def render(data: dict[str, Any]) -> str:
    """One line per configuration: its verdicts, the claim, the audited bound and the noise seen."""
    lines = ["| configuration | verdict (seeds) | claimed epsilon | audited lower bound, min-max | "
             "canary AUC, min-max | noise std per coordinate, measured / claimed | seconds |",
             "|---|---|---|---|---|---|---|"]
    for name in data["configs"]:
        rows = [r for r in data["rows"] if r["config"] == name]
        verdicts = sorted({r["verdict"] for r in rows})
        said = "; ".join(f"{v} ({sum(r['verdict'] == v for r in rows)}/{len(rows)})" for v in verdicts)
        lows, aucs = [r["lower"] for r in rows], [r["auc"] for r in rows]
        fresh = statistics.median(r["fresh_std"] for r in rows)
        claimed_std = rows[0]["claimed_std"]
        noise = f"{fresh:.4f} / " + ("adaptive" if claimed_std is None and rows[0]["claimed"] else
                                      "none" if claimed_std is None else f"{claimed_std:.4f}")
        secs = [r["seconds"] for r in rows]
        lines.append(f"| `{name}` | {said} | {_eps(rows[0]['claimed'])} | {min(lows):.2f}-{max(lows):.2f} | "
                     f"{min(aucs):.2f}-{max(aucs):.2f} | {noise} | {min(secs):.0f}-{max(secs):.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--evidence", type=Path, required=True)
    args = parser.parse_args()
    rows = measure(args.seeds)
    data = {"render": "benchmarks/lab/flower_dp_audit.py:render", "configs": list(CONFIGS),
            "canaries": CANARIES, "seeds": args.seeds, "rows": rows}
    args.evidence.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(render(data))


if __name__ == "__main__":
    main()
