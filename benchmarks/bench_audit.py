"""The default audit on ordinary federations: planned against measured, per attack.

    flock -x /work/locks/quiet.lock .venv/bin/python benchmarks/bench_audit.py
    .venv/bin/python benchmarks/bench_audit.py --threat-model eavesdropper --executor sequential --tag -seq

Four federations, trained once and cached under `runs/bench-audit/` (gitignored; the training is
not timed): FedAvg, IID, 20 rounds, the dataset's defaults otherwise (C = 0.1, E = 5, B = 10,
the papers' rates), every message recorded:

- `mnist-20`: MNIST, mnist-mlp, 20 clients (about 2,400 training images each);
- `mnist-100`: MNIST, mnist-mlp, 100 clients (about 480 each);
- `fmnist-cnn`: Fashion-MNIST, the WAFFLe paper's CNN (fmnist-cnn), 10 clients (about 4,800 each);
- `cifar10-cnn`: CIFAR-10, the paper's CNN (cifar-cnn), 10 clients (about 4,000 each);
- `mnist-1000`: MNIST, mnist-mlp, 1,000 clients of 60 images (FedMIA's and pfl-research's
  scale), audited on 100 victims (`--only mnist-1000`; not run by default).

Each is then audited as `fedattack evaluate RUN` does with no `--attack` (the default audit:
the threat models it picks, 5 random victims, the default budget), in a fresh process per
federation so each peak is its own, with `--threads` torch threads (evaluate's default, 1,
unless given); `--executor` and `--threat-model` are passed to `evaluate` as they are, so the
same federations can be audited with reference models one at a time (`sequential`) and together
(`batched`, the default). The script prints, per attack, the plan's
estimate of the time and the peak memory against what each call measured (`extra.cost` of its
results: wall seconds, the process's peak resident memory during the call), the ratio of the two,
the whole evaluation's wall time against its plan, and the budget; and, with `--json`, all of it.
`--only NAME` runs some federations; `--victims` shrinks the audit for a quick check (a
setting's own victims, `mnist-1000`'s 100, otherwise). Each table also says what the plan comes
to spread over N workers (`--backend ray`, one victim a task, the longest victims first onto the
least loaded worker: `spread.on_workers`'s rule, from `plan.json`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "runs" / "bench-audit"
TIME = "/usr/bin/time"
SETTINGS: dict[str, dict[str, Any]] = {
    "mnist-20": {"dataset": "mnist", "model": "mnist-mlp", "num_clients": 20},
    "mnist-100": {"dataset": "mnist", "model": "mnist-mlp", "num_clients": 100},
    "fmnist-cnn": {"dataset": "fmnist", "model": "fmnist-cnn", "num_clients": 10},
    "cifar10-cnn": {"dataset": "cifar10", "model": "cifar-cnn", "num_clients": 10},
    "mnist-1000": {"dataset": "mnist", "model": "mnist-mlp", "num_clients": 1000, "victims": 100},
}
DEFAULT = [name for name in SETTINGS if "victims" not in SETTINGS[name]]
WORKERS = (1, 2, 4, 8, 16, 32)


def federation(name: str) -> Path:
    """The cached run directory of setting `name`, trained on first use (untimed)."""
    from fedattack.federation.spec import FederationSpec
    from fedattack.federation.train import train_federation

    path = CACHE / name
    if (path / "federation.json").is_file():
        return path
    cfg = SETTINGS[name]
    spec = FederationSpec.for_dataset(cfg["dataset"], method="fedavg", model=cfg["model"], partition="iid",
                                      num_clients=cfg["num_clients"], rounds=20, record="all",
                                      executor="batched", seed=0)
    started = time.perf_counter()
    train_federation(spec, path, progress=False)
    print(f"trained {name} in {time.perf_counter() - started:.0f}s (cached in {path})", flush=True)
    return path


def audit(name: str, run: Path, args: argparse.Namespace) -> dict[str, Any]:
    """`fedattack evaluate RUN` in its own process; the plan and every result's measured cost."""
    out = CACHE / "results" / (name + args.tag)
    if out.exists():
        import shutil
        shutil.rmtree(out)
    victims = args.victims or SETTINGS[name].get("victims", 5)
    command = [str(Path(sys.executable).parent / "fedattack"), "evaluate", str(run), "--out", str(out),
               "--victim", f"random:{victims}", "--threads", str(args.threads), "--quiet"]
    if args.executor:
        command += ["--executor", args.executor]
    for threat in args.threat_model or []:
        command += ["--threat-model", threat]
    if Path(TIME).is_file():  # the whole process's peak, as a user would measure it
        command = [TIME, "-v", *command]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "PYTHONUNBUFFERED": "1"}  # the plan in the log at once
    load = os.getloadavg()[0]
    started = time.perf_counter()
    log = CACHE / "results" / f"{name}{args.tag}.log"  # the plan as soon as it is printed (a long audit may be stopped)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as stdout:
        done = subprocess.run(command, env=env, stdout=stdout, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{name}: evaluate failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    plan = json.loads((out / "plan.json").read_text())
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    return {"name": name, "wall": wall, "plan": plan, "stdout": log.read_text(), "load_before": load,
            "load_after": os.getloadavg()[0], "process_peak": int(peak.group(1)) * 1024 if peak else None}


def rows(found: dict[str, Any]) -> list[dict[str, Any]]:
    """Per attack: planned and measured seconds (summed over its calls) and peak memory (the
    largest of its calls)."""
    out: dict[str, dict[str, Any]] = {}
    for call in found["plan"]["calls"]:
        if call.get("refused"):
            out.setdefault(call["attack"], {"attack": call["attack"], "refused": call["refused"]})
            continue
        row = out.setdefault(call["attack"], {"attack": call["attack"], "calls": 0, "planned_s": 0.0,
                                              "measured_s": 0.0, "cpu_s": 0.0, "planned_peak": 0, "measured_peak": 0})
        row["calls"] += 1
        row["planned_s"] += call["planned_seconds"]
        row["measured_s"] += call.get("measured_seconds") or 0.0
        row["cpu_s"] += call.get("measured_cpu_seconds") or 0.0
        row["planned_peak"] = max(row["planned_peak"], call["planned_peak_bytes"])
        row["measured_peak"] = max(row["measured_peak"], call.get("measured_peak_bytes") or 0)
    return list(out.values())


def on_workers(plan: dict[str, Any], n: int) -> float:
    """The plan's seconds over `n` workers, one victim a task (a victim never splits)."""
    per: dict[int, float] = {}
    for call in plan["calls"]:
        if not call.get("refused"):
            per[call["victim"]] = per.get(call["victim"], 0.0) + call["planned_seconds"]
    loads = [0.0] * n
    for seconds in sorted(per.values(), reverse=True):
        loads[loads.index(min(loads))] += seconds
    return max(loads)


def ratio(planned: float, measured: float) -> str:
    return f"{planned / measured:.2f}" if measured else "-"


def table(found: dict[str, Any]) -> list[str]:
    gib = 2**30
    budget = found["plan"]["budget"]
    peak = found["process_peak"]
    whole = f", the process's peak {peak / gib:.2f} GiB (/usr/bin/time -v)" if peak else ""
    lines = [f"## {found['name']}: {found['wall']:.0f}s wall (plan {found['plan']['total_seconds']:.0f}s){whole}, "
             f"budget {budget['memory'] / gib:.1f} GiB ({budget['source']}), load {found['load_before']:.2f} before, "
             f"{found['load_after']:.2f} after",
             "| attack | calls | planned s | measured s (CPU s) | planned/measured | planned peak GiB |"
             " measured peak GiB | planned/measured | within budget |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows(found):
        if "refused" in r:
            lines.append(f"| {r['attack']} | refused: {r['refused']} |  |  |  |  |  |  |  |")
            continue
        inside = "yes" if r["measured_peak"] <= budget["memory"] else "NO"
        lines.append(f"| {r['attack']} | {r['calls']} | {r['planned_s']:.1f} | {r['measured_s']:.1f} ({r['cpu_s']:.1f}) | "
                     f"{ratio(r['planned_s'], r['measured_s'])} | {r['planned_peak'] / gib:.2f} | "
                     f"{r['measured_peak'] / gib:.2f} | {ratio(r['planned_peak'], r['measured_peak'])} | {inside} |")
    spread = ", ".join(f"{n}: {on_workers(found['plan'], n):.0f}s" for n in WORKERS)
    lines.append(f"\nThe plan over N workers, one victim a task (N: seconds): {spread}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", choices=list(SETTINGS), default=DEFAULT)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (evaluate's default: 1)")
    parser.add_argument("--executor", choices=["batched", "sequential"], default=None,
                        help="evaluate's --executor (default: evaluate's own, batched)")
    parser.add_argument("--threat-model", action="append", default=None,
                        help="evaluate's --threat-model, repeatable (default: the default audit's)")
    parser.add_argument("--tag", default="", help="a suffix for the results folder and log, to keep runs apart")
    parser.add_argument("--victims", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    os.environ.setdefault("MPLBACKEND", "Agg")
    runs = {name: federation(name) for name in args.only}
    found = []
    for name, run in runs.items():
        result = audit(name, run, args)
        found.append(result)
        print("\n".join(table(result)), flush=True)
        shown = [line for line in result["stdout"].splitlines() if line.startswith(("plan:", "  "))]
        print("\n".join(["", "The plan `evaluate` printed:", "", *(f"    {line}" for line in shown)]), flush=True)
        print(flush=True)
    if args.json:
        args.json.write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
