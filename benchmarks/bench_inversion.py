"""Seconds and peak memory per victim of update inversion in each setting docs/privacy.md reports
(#33 item 4, #36): one victim a setting, each evaluated in a fresh process.

    FEDATTACK_DATA=../shared/datasets flock -x /work/locks/quiet.lock \\
        .venv/bin/python benchmarks/bench_inversion.py --threads 2 --work WORK [--settings KEY ...] [--json out.json]

A setting is one of `inversion_cnn.py`'s experiments (Dimitrov et al.'s, breaching's case, the
seeds' CNN curve, WAFFLe's) or of `inversion_rounds_curve.py`'s (`rounds-n<N>-r<K>`: MNIST
clients of N images, the first-layer updates of K rounds, 0 for all), on the same federation
(trained into `--work` if missing, as those scripts do), attacking its first reported victim as
they do, through `fedattack.evaluate` in a fresh process on `--threads` torch threads. Printed per
setting: the attack's own seconds (the result's `seconds`: label counting and inversion, as the
docs' tables give them) and the whole evaluation's, the process's highest resident memory while
it evaluated (sampled every 20 ms) and what it was before (Python, torch, fedattack imported),
and the load (`uptime`) beside them. The share recovered is printed as a sanity check only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "lab"))  # its settings are the lab scripts'


def resident() -> int:
    """This process's resident memory now, in bytes (Linux's /proc)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Sampler(threading.Thread):
    """The highest resident memory seen every 20 ms until `done` is set."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.done = threading.Event()
        self.peak = 0

    def run(self) -> None:
        while not self.done.wait(0.02):
            self.peak = max(self.peak, resident())


def setting(key: str, work: Path) -> tuple[Path, int, dict[str, Any], str]:
    """The federation, victim, attack settings and reconstruction request of a setting key."""
    if key.startswith("rounds-"):
        import inversion_rounds_curve as rounds

        n, k = (int(part[1:]) for part in key.split("-")[1:3])
        args = argparse.Namespace(clients=5, fed_rounds=30)
        run = rounds.federation(work / "curve", n, args)
        settings = {"start": "first-layer", "labels": "recovered", "rounds": k, "round_window": "first",
                    "fallback": "none"}
        return run, 0, settings, "auto"
    import inversion_cnn as cnn

    exp = cnn.EXPERIMENTS[key]
    return cnn.federation(work, key, exp), exp.victims[0], dict(exp.settings), exp.reconstruction


def measure(key: str, work: Path, threads: int) -> dict[str, Any]:
    import torch

    import fedattack

    torch.set_num_threads(threads)
    run, victim, settings, reconstruction = setting(key, work)
    before = resident()
    sampler = Sampler()
    sampler.start()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        found = fedattack.evaluate(run, out=Path(tmp) / "out", threat_models="eavesdropper",
                                   attacks="update-inversion", victims=[victim], settings=settings,
                                   reconstruction=reconstruction)
    wall = time.perf_counter() - started
    sampler.done.set()
    sampler.join()
    results = [r for r in found.results if r.applicable] or found.results
    first = results[0]
    return {"setting": key, "victim": victim, "threads": threads, "attack_seconds": sum(r.seconds for r in results),
            "evaluate_seconds": round(wall, 1), "peak_bytes": max(sampler.peak, resident()), "before_bytes": before,
            "strategies": len(found.results), "share_recovered": first.metrics.get("share_recovered", 0.0),
            "load": os.getloadavg()[0]}


def main() -> None:
    import inversion_cnn as cnn

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="*",
                        default=[*cnn.EXPERIMENTS, "rounds-n50-r1", "rounds-n200-r0", "rounds-n2400-r0"],
                        help=f"keys: {', '.join(cnn.EXPERIMENTS)}, rounds-n<N>-r<K>")
    parser.add_argument("--work", type=Path, default=Path("results/inversion-cnn"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one setting, JSON out
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.work, args.threads)))
        return
    rows = []
    print(f"{args.threads} threads, load {os.getloadavg()[0]:.1f}", flush=True)
    for key in args.settings:
        out = subprocess.run([sys.executable, __file__, "--one", key, "--threads", str(args.threads),
                              "--work", str(args.work)], capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"{key:>32}  attack {row['attack_seconds']:7.1f} s  (evaluate {row['evaluate_seconds']:7.1f} s, "
              f"{row['strategies']} strategies)  peak {row['peak_bytes'] / 2**30:5.2f} GiB "
              f"(before {row['before_bytes'] / 2**30:4.2f})  recovered {100 * row['share_recovered']:3.0f}%  "
              f"load {row['load']:.1f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
