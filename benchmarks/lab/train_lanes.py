"""Train an experiment's federations in parallel lanes, into the folders `experiment run` uses.

`fedattack experiment run` trains one federation at a time and locks its output folder. On a
2-core machine two single-threaded trainings side by side finish more runs an hour than one
two-threaded one, so the reproduction runs were trained with

    OMP_NUM_THREADS=1 python benchmarks/lab/train_lanes.py EXPERIMENT.toml --out DIR --lane 0 --lanes 2 &
    OMP_NUM_THREADS=1 python benchmarks/lab/train_lanes.py EXPERIMENT.toml --out DIR --lane 1 --lanes 2

Lane k trains the federations whose place in the plan is k modulo the number of lanes, into
`DIR/runs/<ident>`, skipping complete ones and re-reading the file after each run; a later
`fedattack experiment run EXPERIMENT.toml --out DIR` then finds them all done and only reports.
`--only` keeps the federations whose folder name contains one of the given strings (`-s2-`).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

import torch

from fedattack.experiments.plan import FederationJob, plan
from fedattack.experiments.runner import is_complete_run, run_dir
from fedattack.experiments.spec import load
from fedattack.federation.train import train_federation
from fedattack.interrupts import raise_interrupt


def next_job(args: argparse.Namespace) -> FederationJob | None:
    """This lane's first federation not yet complete; the file is read again every time, so
    entries appended to it while the lanes run are picked up (appending keeps earlier places)."""
    jobs = plan(load(args.experiment)).federations
    for i, fed in enumerate(jobs):
        if (i % args.lanes == args.lane and (not args.only or any(s in fed.ident for s in args.only))
                and not is_complete_run(run_dir(args.out, fed))):
            return fed
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--lane", type=int, default=0)
    parser.add_argument("--lanes", type=int, default=1)
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--data-root", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    # SIGTERM (a `kill`, a scheduler) cleans up the federation in training as Ctrl-C does
    signal.signal(signal.SIGTERM, raise_interrupt)
    while (fed := next_job(args)) is not None:
        path = run_dir(args.out, fed)
        t0 = time.perf_counter()
        train_federation(fed.spec, path, args.data_root, False, path.exists(), "cpu", False)
        print(f"{fed.ident}: {time.perf_counter() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted; the federation in training was cleaned up, finished ones are kept", file=sys.stderr)
        raise SystemExit(130) from None
