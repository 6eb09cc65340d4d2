"""Are two finished runs the same federation, bit for bit?

A named recipe (`recipe=personal`) is only a name if it trains exactly what its spelled-out
settings train; the reproduction tables reuse runs made before the name existed on that claim.
This compares the final server and private states tensor by tensor (`torch.equal`) and the
accuracies of every evaluated round:

    python benchmarks/lab/waffle_same_runs.py RUN_A RUN_B      # exit status 1 when they differ
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch


def differing(a: Path, b: Path, name: str) -> tuple[int, list[str]]:
    """How many tensors the state file holds, and the names of those that differ."""
    sa, sb = (torch.load(p / name, weights_only=True) for p in (a, b))
    keys = sorted(set(sa) | set(sb))
    return len(keys), [k for k in keys if k not in sa or k not in sb or not torch.equal(sa[k], sb[k])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    args = parser.parse_args()
    same = True
    for name in ("server.pt", "private.pt"):
        count, diff = differing(args.run_a, args.run_b, name)
        same &= not diff
        print(f"{name}: {count} tensors, {len(diff)} differ {diff[:3]}")
    ma, mb = (json.loads((p / "metrics.json").read_text()) for p in (args.run_a, args.run_b))
    rounds_same = ma["rounds"] == mb["rounds"] and ma["final"] == mb["final"]
    print(f"evaluated rounds identical: {rounds_same}")
    sys.exit(0 if same and rounds_same else 1)


if __name__ == "__main__":
    main()
