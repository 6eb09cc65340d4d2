"""What checking every file of a run directory costs when it is opened (issue #39).

`Federation(path)` verifies the checksums of every file (reading every byte), then the
partition, the transcript index and, since issue #39, every transcript round (each round file
loaded with `weights_only=True` and every message checked against the index, the wire schema
and for finite values) and the server state. This prints, for one run directory, the seconds
of each part, the share the round check adds, and the transcript's size:

    python benchmarks/bench_rundir_check.py RUN_DIR [--repeat 3]

Made for a run with a transcript of about 1 GB, e.g. (MNIST, 100 clients, every round recorded):
    fedattack train --dataset mnist --model mnist-mlp --clients 100 --fraction 1 --rounds 16 \\
        --epochs 1 --batch-size 50 --record all --executor batched --out run1g
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from fedattack.federation.rundir import Federation
from fedattack.federation.storage import verify


def timed(work) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    fed = Federation(args.run, deep_verify=False)
    files = fed.manifest["files"]
    size = sum(info["bytes"] for rel, info in files.items() if rel.startswith("transcript/"))
    parts: dict[str, list[float]] = {"checksums": [], "every round": [], "open, all checks": []}
    for _ in range(args.repeat):
        parts["checksums"].append(timed(lambda: verify(args.run, files, deep=True)))
        parts["every round"].append(timed(lambda: fed.transcript().verify_all()))
        parts["open, all checks"].append(timed(lambda: Federation(args.run)))
    print(f"transcript: {size / 2**30:.2f} GiB in {sum(r.startswith('transcript/round') for r in files)} round files")
    for name, seconds in parts.items():
        print(f"{name:>18}: median {statistics.median(seconds):.2f} s (min {min(seconds):.2f}, "
              f"max {max(seconds):.2f}, n={len(seconds)})")
    share = statistics.median(parts["every round"]) / statistics.median(parts["checksums"])
    print(f"the round check costs {share:.2f}x the checksums")


if __name__ == "__main__":
    main()
