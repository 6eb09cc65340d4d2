"""WAFFLe's Tables 2 and 1 (as docs/lab/reproduction.md prints them) from run directories, ours
beside the paper's numbers (`fedattack.reports.paper_numbers`), so no cell is copied by hand:

    python benchmarks/lab/paper_tables.py runs/fmnist/runs/*

Table 2: mean local test accuracy at the last round per (partition, method), mean ± std over
the seeds (ddof = 0) and each seed's value; Table 1: the multimodal subpopulations. Runs are
pooled by setting (`tabulate_runs.setting`: everything but the seed), so two recipes of one
method are two rows. Rows follow the paper's order of methods.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tabulate_runs import _pm, load  # noqa: E402

from fedattack.reports.paper_numbers import PaperNumber, lookup  # noqa: E402

ORDER = ("fedavg", "fedprox", "qffl", "waffle-ibp")
NAMES = {"shards": "unimodal", "multimodal": "multimodal"}


def pooled(runs: list[Path]) -> dict[str, list[dict[str, Any]]]:
    """Rows of each setting, seeds in order, settings in the paper's order of methods."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        row = load(run)
        groups.setdefault(row["setting"], []).append(row)
    def order(item: tuple[str, list[dict[str, Any]]]) -> tuple[str, int, int, str]:
        method, dataset, partition = (c.strip() for c in item[0].split("|")[:3])
        return (dataset, list(NAMES).index(partition) if partition in NAMES else 9,
                ORDER.index(method) if method in ORDER else 9, item[0])
    return {k: sorted(v, key=lambda r: r["seed"]) for k, v in sorted(groups.items(), key=order)}


def paper(key: str, dataset: str, partition: str, method: str, metric: str) -> str:
    found: list[PaperNumber] = [n for n in lookup(key)[1] if (n.dataset, n.partition, n.method, n.metric)
                                == (dataset, partition, method, metric)]
    if not found:
        return ""
    n = found[0]
    return f"{n.mean:.0f} ± {n.std:.0f}" if metric == "variance" and n.std is not None else n.text()


def several_datasets(groups: dict[str, list[dict[str, Any]]]) -> bool:
    """Whether the runs span datasets: then each row starts with its dataset."""
    return len({setting.split("|")[1].strip() for setting in groups}) > 1


def table2(groups: dict[str, list[dict[str, Any]]]) -> str:
    named = several_datasets(groups)
    lines = ["| dataset " * named + "| setting | method | hyperparameters | seeds | per seed | ours | paper | wall s |",
             "|---" * named + "|---|---|---|---|---|---|---|---|"]
    for setting, rows in groups.items():
        method, dataset, partition, _, _, hyper = (c.strip() for c in setting.split("|"))
        seeds = ",".join(str(r["seed"]) for r in rows)
        each = ", ".join(f"{r['mean']:.2f}" for r in rows)
        wall = ", ".join(f"{r['seconds']:.0f}" for r in rows if r.get("seconds"))
        lines.append(f"| {dataset} " * named
                     + f"| {NAMES.get(partition, partition)} | {method} | {hyper} | {seeds} | {each} | "
                     f"{_pm([r['mean'] for r in rows])} | "
                     f"{paper('waffle-ibp:table2', dataset, partition, method, 'mean')} | {wall} |")
    return "\n".join(lines)


def table1(groups: dict[str, list[dict[str, Any]]]) -> str:
    named = several_datasets(groups)
    lines = ["| dataset " * named + "| method | hyperparameters | seeds | majority | minority | gap | variance |",
             "|---" * named + "|---|---|---|---|---|---|---|"]
    for setting, rows in groups.items():
        method, dataset, partition, _, _, hyper = (c.strip() for c in setting.split("|"))
        if partition != "multimodal":
            continue
        cells = [f"{_pm([r.get(k) for r in rows], 0 if k == 'variance' else 2)} "
                 f"({paper('waffle-ibp:table1', dataset, partition, method, k)})"
                 for k in ("majority", "minority", "gap", "variance")]
        seeds = ",".join(str(r["seed"]) for r in rows)
        lines.append(f"| {dataset} " * named + f"| {method} | {hyper} | {seeds} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    groups = pooled([r for r in args.runs if (r / "federation.json").exists()])
    print("Table 2: mean local test accuracy (%), last round, mean ± std over seeds (ddof = 0)\n")
    print(table2(groups))
    print("\nTable 1: multimodal subpopulations (%), ours (paper); variance in percent squared\n")
    print(table1(groups))


if __name__ == "__main__":
    main()
