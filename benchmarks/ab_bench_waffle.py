"""`bench_waffle.py` on two checkouts, alternating: did a change make WAFFLe's step slower?

    git archive BASE | tar -x -C /tmp/before   # the code before the change, beside this one
    ln -s ../targets /tmp/before/fedattack/targets; ln -s ../attacks /tmp/before/fedattack/attacks
    ln -s ../reports /tmp/before/fedattack/reports   # the package layout setuptools maps
    FEDATTACK_DATA=/work/shared/datasets flock -x /work/locks/quiet.lock .venv/bin/python \\
        benchmarks/ab_bench_waffle.py --before /tmp/before --pairs 5 -- --clients 10 50 \\
        --runners batched batched-native --rounds 4 --full-rounds 0

Each pair runs the before checkout's `bench_waffle.py` and this one's, in turn (which goes first
alternates), with the arguments after `--` and this venv's Python; the before checkout is put
first on PYTHONPATH, so its own fedattack is what it measures. The machine's speed drifts by a
third between runs minutes apart, so what is compared is each pair's ratio, after / before, of
client steps per second (wall) for every runner and client count: their median and range.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def rates(checkout: Path, bench_args: list[str]) -> dict[str, float]:
    """Client steps per second of wall time, by `runner@clients`, from one bench_waffle run."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "bench.json"
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        done = subprocess.run([sys.executable, str(checkout / "benchmarks" / "bench_waffle.py"), *bench_args,
                               "--json", str(out)], cwd=checkout, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{checkout}: bench_waffle failed:\n{done.stderr[-3000:]}")
        results = json.loads(out.read_text())
    found: dict[str, list[float]] = {}
    for row in results["rows"]:
        found.setdefault(f"{row['runner']}@{row['clients']}", []).append(row["steps"] / row["seconds"])
    return {k: statistics.median(v) for k, v in found.items()}  # one each unless --repeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the checkout before the change")
    parser.add_argument("--after", type=Path, default=HERE.parent, help="the checkout after it (this one)")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("bench_args", nargs=argparse.REMAINDER, help="after --: bench_waffle.py's arguments")
    args = parser.parse_args()
    bench_args = [a for a in args.bench_args if a != "--"]
    ratios: dict[str, list[float]] = {}
    for pair in range(args.pairs):
        order = [("before", args.before), ("after", args.after)]
        runs = dict((name, rates(path, bench_args)) for name, path in (order if pair % 2 == 0 else order[::-1]))
        for key in sorted(runs["after"]):
            if key in runs["before"]:
                ratios.setdefault(key, []).append(runs["after"][key] / runs["before"][key])
        print(f"pair {pair + 1}: " + ", ".join(f"{k} {runs['before'][k]:.0f} -> {runs['after'][k]:.0f}"
                                              for k in sorted(runs["after"]) if k in runs["before"]), flush=True)
    load = os.getloadavg()
    print(f"\nafter / before, client steps per second, {args.pairs} alternating pairs "
          f"(load at the end {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}):")
    for key, values in ratios.items():
        print(f"  {key:24s} median {statistics.median(values):.3f}  range {min(values):.3f}-{max(values):.3f}  "
              f"n={len(values)}")


if __name__ == "__main__":
    main()
