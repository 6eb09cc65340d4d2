"""Dimitrov et al.'s setting (docs/privacy.md, "Through convolutional networks"), re-measured
after #43: trained, attacked, written as per-victim evidence, and rendered as the page's table.

    FEDATTACK_DATA=../shared/datasets nice -n 15 .venv/bin/python benchmarks/lab/dimitrov_setting.py \\
        --work /work/scratch/dimitrov --evidence docs/evidence/privacy/dimitrov-setting.json

The federations and attacks are `inversion_cnn.py`'s `dimitrov-mnist` and `dimitrov-fmnist`
experiments (their CNN, 16 clients of 50 images, 10 epochs of 10 batches of 5, lr 0.004, one
round from the seeded initialisation; the eavesdropper's `update-inversion` from the first
dense layer, labels unknown): victim 0 of each is the one the settings were fixed on, 1-10 are
held out, and the table reports the held-out ones. Before #43 the federations were trained by
the batched executor's `conv` kernel, which max-pooled where this CNN average-pools; the
evidence records the executor and the commit that trained them. Each victim is evaluated on
its own (held-out victims first, the two datasets in turn), so an interrupted run keeps what it
finished: work folders already holding a federation or a victim's result are reused, and
`--victims` bounds how many held-out victims a dataset gets (the evidence says how many).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # the scripts it builds on, beside it or in benchmarks/
from inversion_cnn import EXPERIMENTS, attack, federation  # noqa: E402  (sibling scripts)
from update_inversion_curve import bootstrap, share  # noqa: E402

SETTINGS = {"dimitrov-mnist": "MNIST", "dimitrov-fmnist": "Fashion-MNIST"}
TUNING, HELD_OUT = (0,), tuple(range(1, 11))


def victim_rows(out: Path, experiment: str, dataset: str) -> list[dict[str, Any]]:
    """One row per victim result: the PSNR of each of its matched images, labels, seconds."""
    rows = []
    for path in sorted(out.glob("*victim*.json")):
        result = json.loads(path.read_text())
        match = result["extra"].get("reconstruction_match", {})
        rows.append({"experiment": experiment, "dataset": dataset, "victim": result["victim"],
                     "tuning": result["victim"] in TUNING, "applicable": bool(result.get("applicable", True)),
                     "psnr": [round(float(v), 3) for v in match.get("psnr", [])],
                     "label_accuracy": result["metrics"].get("label_accuracy"),
                     "seconds": round(float(result.get("seconds", 0.0)), 1)})
    return sorted(rows, key=lambda r: r["victim"])


def render(evidence: dict[str, Any], tuning: bool = False) -> str:
    """The page's table from the evidence: per dataset, the held-out victims' share of images
    above 20 dB with its 95% percentile bootstrap interval over victims, each victim's share,
    the mean PSNR of the matched images and the share of labels counted right."""
    lines = ["| dataset | victims | recovered > 20 dB (95% CI over victims) | per victim (%) | PSNR mean | labels |",
             "|---|---|---|---|---|---|"]
    for dataset in dict.fromkeys(r["dataset"] for r in evidence["rows"]):
        rows = [r for r in evidence["rows"] if r["dataset"] == dataset and r["tuning"] == tuning]
        if not rows:
            continue
        groups = [np.asarray(r["psnr"], dtype=float) for r in rows]
        pooled = np.concatenate(groups)
        low, high, _ = bootstrap(groups, share, over="victims")
        labels = np.mean([r["label_accuracy"] for r in rows])
        lines.append(f"| {dataset} | {len(rows)} | **{100 * share(pooled):.1f}% ({100 * low:.1f}-{100 * high:.1f})** | "
                     f"{', '.join(f'{100 * share(g):.0f}' for g in groups)} | {pooled.mean():.1f} | "
                     f"{100 * labels:.0f}% |")
    return "\n".join(lines) + "\n"


def commit() -> str:
    here = Path(__file__).resolve().parents[2]
    return subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("results/dimitrov-setting"))
    parser.add_argument("--evidence", type=Path, default=Path("docs/evidence/privacy/dimitrov-setting.json"))
    parser.add_argument("--victims", type=int, default=len(HELD_OUT), help="held-out victims a dataset (1-10)")
    parser.add_argument("--only", choices=list(SETTINGS), help="attack this experiment's victims only (to run the "
                        "two side by side, one process each); the evidence is written from every result found")
    args = parser.parse_args()
    runs = {name: federation(args.work, name, EXPERIMENTS[name]) for name in SETTINGS if args.only in (None, name)}
    held_out = HELD_OUT[:args.victims]
    for victim in held_out + TUNING:
        for name, run in runs.items():
            attack(run, args.work / "results" / name / f"victim{victim}", EXPERIMENTS[name], (victim,))
    rows = [row for name, dataset in SETTINGS.items()
            for folder in sorted((args.work / "results" / name).glob("victim*"), key=lambda f: int(f.name[6:]))
            for row in victim_rows(folder, name, dataset)]
    executors = sorted({json.loads((args.work / "runs" / name / "federation.json").read_text())["spec"]["executor"]
                        for name in SETTINGS if (args.work / "runs" / name).is_dir()})
    evidence = {"render": "benchmarks/lab/dimitrov_setting.py:render", "commit": commit(), "executor": executors,
                "command": f"python benchmarks/lab/dimitrov_setting.py --victims {args.victims}",
                "victims": {"tuning": list(TUNING), "held_out": list(held_out)},
                "rows": sorted(rows, key=lambda r: (list(SETTINGS).index(r["experiment"]), r["victim"]))}
    args.evidence.parent.mkdir(parents=True, exist_ok=True)
    args.evidence.write_text(json.dumps(evidence, indent=1) + "\n")
    print(render(evidence))
    print("tuning victims:\n" + render(evidence, tuning=True))


if __name__ == "__main__":
    main()
