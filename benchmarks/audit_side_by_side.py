"""The side-by-side table of benchmarks/README.md: each federation's eavesdropper audit with
reference models one at a time and together, from the JSON files `bench_audit.py --json` wrote.

    python benchmarks/audit_side_by_side.py benchmarks/measured/bench_audit-2026-12-03-s8

reads FOLDER/<federation>-eav-seq.json and FOLDER/<federation>-eav-bat.json for every federation
that has both, and prints the markdown rows (so the page's table is the files', not a copy typed
by hand).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_audit import SETTINGS, ratio, rows  # noqa: E402

HEADER = ["| federation | reference models | whole audit: planned s | measured s | planned / measured |"
          " rmia: planned / measured s | membership: planned / measured s | peak GiB (process) | load before / after |",
          "|---|---|---|---|---|---|---|---|---|"]
SIDES = {"seq": "one at a time (`--executor sequential`)", "bat": "together (`batched`, the default)"}


def attack_seconds(found: dict[str, Any], attack: str) -> tuple[float, float]:
    for r in rows(found):
        if r["attack"] == attack and "refused" not in r:
            return r["planned_s"], r["measured_s"]
    return float("nan"), float("nan")


def row(name: str, side: str, found: dict[str, Any]) -> str:
    planned = found["plan"]["total_seconds"]
    cells = [name, SIDES[side], f"{planned:.0f}", f"{found['wall']:.0f}", ratio(planned, found["wall"])]
    for attack in ("rmia", "membership"):
        p, m = attack_seconds(found, attack)
        cells.append(f"{p:.1f} / {m:.1f}")
    cells += [f"{found['process_peak'] / 2**30:.2f}", f"{found['load_before']:.2f} / {found['load_after']:.2f}"]
    return "| " + " | ".join(cells) + " |"


def table(folder: Path) -> list[str]:
    lines = list(HEADER)
    for name in SETTINGS:
        files = {side: folder / f"{name}-eav-{side}.json" for side in SIDES}
        if not all(f.is_file() for f in files.values()):
            continue
        found = {side: json.loads(f.read_text())[0] for side, f in files.items()}
        lines += [row(name, side, found[side]) for side in SIDES]
        rm = [attack_seconds(found[s], "rmia")[1] for s in SIDES]
        lines.append(f"|  | **speed-up** | | **{found['seq']['wall'] / found['bat']['wall']:.2f}x** | | "
                     f"rmia {rm[0] / rm[1]:.2f}x | | | |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    print("\n".join(table(parser.parse_args().folder)))


if __name__ == "__main__":
    main()
