"""docs/lab/reproduction-waffle-cgau.md, "WAFFLE on held-out seeds": Alice's (agent 0's) best and
round-100 local test accuracy per seed, for each distribution and reading of
`fedattack/experiments/waffle-wavg-heldout.toml`, with the mean and a 95% Student t interval over
the seeds run.

    fedattack experiment run fedattack/experiments/waffle-wavg-heldout.toml --backend sequential \
        --out runs/waffle-wavg-heldout --no-report          # resumable: run it again to finish
    python benchmarks/lab/waffle_heldout.py --out runs/waffle-wavg-heldout   # the evidence
    python -m benchmarks.lab.evidence --write                                # the page's table

The evidence holds one row per finished federation (read from its own federation.json and
metrics.json) and the experiment's full plan, so the table names the seeds not run yet rather
than leaving them out silently. A cell's reading is named from its three settings by the
method's own `READINGS`; a cell matching neither is refused (it would be neither column).
Run folders are big and git-ignored, so a federation run in another session lives on only as its
committed row: the rows already in the evidence are kept, a new run adds its row, and a rerun of
a committed federation must give the committed figures (else this refuses, naming both).
The interval is mean +- t(0.975, n - 1) s / sqrt(n) over the seeds (s with n - 1), clipped to
[0, 100]; with one seed there is none. Only standard-library imports at the top: rendering runs
in the docs check.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
KEY = "lab/reproduction-waffle-cgau/waffle-heldout"
EXPERIMENT = ROOT / "fedattack" / "experiments" / "waffle-wavg-heldout.toml"
RENDER = "benchmarks/lab/waffle_heldout.py:table"
# t(0.975, df) for df = 1..10, Student's t quantiles (tests/docs check them against scipy)
T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281)


def t_interval(values: list[float]) -> tuple[float, float, float] | None:
    """(mean, low, high): the 95% Student t interval of the mean, clipped to [0, 100]; None if n < 2."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    half = T975[len(values) - 2] * statistics.stdev(values) / math.sqrt(len(values))
    return mean, max(0.0, mean - half), min(100.0, mean + half)


def _interval_cell(values: list[float]) -> str:
    got = t_interval(values)
    if got is None:
        return f"{values[0]:.1f} (n = 1, no interval)" if values else "not run"
    return f"{got[0]:.1f} [{got[1]:.1f}, {got[2]:.1f}]"


def table(data: dict[str, Any]) -> str:
    """One line per distribution and reading: per seed best (round) / round 100, then both summaries."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.lab.evidence import markdown

    lines = []
    for cell in data["cells"]:
        mine = sorted((r for r in data["rows"] if (r["distribution"], r["reading"]) ==
                       (cell["distribution"], cell["reading"])), key=lambda r: r["seed"])
        done = {r["seed"] for r in mine}
        per_seed = [f"s{r['seed']}: {r['best']:.1f} ({r['best_round']}) / {r['round100']:.1f}"
                    + (" NaN" if r["diverged"] else "") for r in mine]
        per_seed += [f"s{s}: not run" for s in cell["seeds"] if s not in done]
        lines.append([cell["distribution"], cell["reading"], f"{len(mine)} of {len(cell['seeds'])}",
                      "; ".join(per_seed), _interval_cell([r["best"] for r in mine]),
                      _interval_cell([r["round100"] for r in mine])])
    return markdown(["distr.", "reading", "seeds run", "per seed: best (round) / round 100",
                     "best: mean [95% t]", "round 100: mean [95% t]"], lines)


def reading_of(hyper: dict[str, Any]) -> str:
    """The reading whose three settings the cell spells out (the method's READINGS)."""
    from fedattack.targets.waffle_wavg import READINGS

    for name, settings in READINGS.items():
        if all(hyper.get(k) == v for k, v in settings.items()):
            return name
    raise SystemExit(f"a cell with hyper {hyper} is neither reading; the table has no column for it")


def row(run: Path) -> dict[str, Any]:
    """Alice's figures of one finished federation, from its own files."""
    manifest = json.loads((run / "federation.json").read_text())
    spec = manifest["spec"]
    rounds = json.loads((run / "metrics.json").read_text())["rounds"]
    alice = int(spec.get("hyper", {}).get("alice", 0))
    hist = [(r["round"], r["accuracy"][alice]) for r in rounds]
    last = dict(hist).get(spec["rounds"])
    if last is None or any(a is None for _, a in hist):
        raise SystemExit(f"{run}: no accuracy for Alice at round {spec['rounds']} (or a round without one)")
    best_round, best = max(hist, key=lambda h: (h[1], -h[0]))  # the first round of the best
    return {"distribution": spec["partition_options"]["distribution"], "reading": reading_of(spec["hyper"]),
            "seed": spec["seed"], "best": round(100 * best, 2), "best_round": best_round,
            "round100": round(100 * last, 2), "diverged": bool(manifest.get("diverged")),
            "seconds": round(manifest["seconds"]) if manifest.get("seconds") else None, "cell": run.name}


FIGURES = ("best", "best_round", "round100", "diverged")


def merged(committed: list[dict[str, Any]], fresh: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The committed rows with the fresh ones added; a fresh row of a committed federation must agree."""
    key = lambda r: (r["distribution"], r["reading"], r["seed"])  # noqa: E731
    rows = {key(r): r for r in committed}
    for r in fresh:
        old = rows.get(key(r))
        if old is not None and any(old[f] != r[f] for f in FIGURES):
            raise SystemExit(f"{r['cell']}: rerun gives {[r[f] for f in FIGURES]} where the evidence holds "
                             f"{[old[f] for f in FIGURES]} ({', '.join(FIGURES)}); same seed, same bits, so one "
                             "of them is wrong: find out which before writing")
        rows[key(r)] = old if old is not None and old.get("seconds") and not r.get("seconds") else r
    return sorted(rows.values(), key=lambda r: (r["distribution"], r["reading"], r["seed"]))


def committed_rows() -> list[dict[str, Any]]:
    from benchmarks.lab.evidence import EVIDENCE

    path = EVIDENCE / f"{KEY}.json"
    return list(json.loads(path.read_text())["rows"]) if path.exists() else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the experiment's output folder")
    parser.add_argument("--experiment", type=Path, default=EXPERIMENT)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from benchmarks.lab.evidence import save
    from fedattack.experiments.plan import plan
    from fedattack.experiments.runner import run_dir
    from fedattack.experiments.spec import load

    feds = plan(load(args.experiment)).federations
    cells: dict[tuple[str, str], list[int]] = {}
    for fed in feds:
        key = (fed.spec.partition_options["distribution"], reading_of(dict(fed.spec.hyper)))
        cells.setdefault(key, []).append(fed.spec.seed)
    runs = [run_dir(args.out, f) for f in feds]
    fresh = [row(r) for r in runs if (r / "federation.json").exists()]
    rows = merged(committed_rows(), fresh)
    path = save(KEY, RENDER, rows, experiment=args.experiment.resolve().relative_to(ROOT).as_posix(),
                interval="95% Student t over seeds, clipped to [0, 100]; none for one seed",
                cells=[{"distribution": d, "reading": r, "seeds": sorted(s)} for (d, r), s in cells.items()])
    print(f"{path}: {len(rows)} of {len(runs)} federations ({len(fresh)} read from {args.out})")


if __name__ == "__main__":
    main()
