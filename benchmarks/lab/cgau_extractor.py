"""docs/lab/reproduction-waffle-cgau.md, "CGAU with an extractor not trained on the data at hand":
Fashion-MNIST clients whose embeddings (and classifier features) come from one frozen extractor
trained on Fashion-MNIST's test split (the data at hand) or on MNIST's (not: the paper's
condition), CGAU against the same classifier without conditioning, by shuffle proportion.

    fedattack experiment run fedattack/experiments/cgau-extractor.toml --backend sequential \
        --out runs/cgau-extractor --no-report            # resumable: run it again to finish
    python benchmarks/lab/cgau_extractor.py --out runs/cgau-extractor   # the evidence
    python -m benchmarks.lab.evidence --write                           # the page's table

One row per finished federation, read from its own federation.json (settings, Gamma, seconds)
and metrics.json (the clients' mean local test accuracy at round 500 and at the best evaluated
round); the experiment's 12 cells are listed whether run or not, so a cell not run says so.
Only standard-library imports: rendering runs in the docs check.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
KEY = "lab/reproduction-waffle-cgau/cgau-extractor"
RENDER = "benchmarks/lab/cgau_extractor.py:table"
SHUFFLES = (0.0, 0.4, 1.0)
EXTRACTORS = ("fmnist", "mnist")  # the data each extractor was trained on


def row_of(run: Path) -> dict[str, Any] | None:
    fed = json.loads((run / "federation.json").read_text())
    if not fed.get("complete"):
        return None
    spec, metrics = fed["spec"], json.loads((run / "metrics.json").read_text())
    means = [sum(r["accuracy"]) / len(r["accuracy"]) * 100 for r in metrics["rounds"] if r.get("accuracy")]
    return {"extractor_data": spec["hyper"]["extractor_data"], "conditioning": bool(spec["hyper"]["conditioning"]),
            "shuffle": float(fed["partition"]["options"]["shuffle"]), "seed": spec["seed"],
            "gamma_embedding": fed["heterogeneity"].get("gamma_embedding"), "gamma_pixels": fed["heterogeneity"]["gamma"],
            "final": metrics["final"]["mean"], "best": max(means), "seconds": fed["seconds"], "run": run.name}


def collect(out: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks.lab.evidence import save

    rows = [r for run in sorted((out / "runs").glob("*")) if (run / "federation.json").is_file()
            for r in [row_of(run)] if r is not None]
    save(KEY, RENDER, sorted(rows, key=lambda r: (r["extractor_data"], r["shuffle"], not r["conditioning"])),
         script="benchmarks/lab/cgau_extractor.py", experiment="fedattack/experiments/cgau-extractor.toml",
         date=time.strftime("%Y-%m-%d"), machine="shared 2-core machine, one thread, nice 10")


def _cell(row: dict[str, Any] | None, key: str) -> str:
    return "not run" if row is None else f"{row[key]:.2f}"


def table(data: dict[str, Any]) -> str:
    """One line per extractor and shuffle: Gamma, CGAU and no conditioning at round 500 and best."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.lab.evidence import markdown

    at = {(r["extractor_data"], r["shuffle"], r["conditioning"]): r for r in data["rows"]}
    lines = []
    for ext in EXTRACTORS:
        for shuffle in SHUFFLES:
            on, off = at.get((ext, shuffle, True)), at.get((ext, shuffle, False))
            any_run = on or off
            gap = f"{on['final'] - off['final']:+.2f}" if on and off else "-"
            lines.append([f"{ext} ({'the data at hand' if ext == 'fmnist' else 'not the data at hand'})",
                          f"{shuffle:.1f}", "-" if any_run is None else f"{any_run['gamma_embedding']:.2f}",
                          "-" if any_run is None else f"{any_run['gamma_pixels']:.2f}",
                          _cell(on, "final"), _cell(on, "best"), _cell(off, "final"), _cell(off, "best"), gap,
                          " / ".join(f"{r['seconds']:.0f}" for r in (on, off) if r) or "-"])
    return markdown(["extractor trained on", "shuffle", "Gamma (embeddings)", "Gamma (pixels)", "CGAU, round 500",
                     "CGAU, best", "no conditioning, round 500", "no conditioning, best",
                     "CGAU minus no conditioning (round 500)", "seconds (CGAU / none)"], lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the experiment's --out folder")
    collect(parser.parse_args().out)


if __name__ == "__main__":
    main()
