"""Speed of the WAFFLe paper's MNIST setting: plain PyTorch, Flower, fedattack's executors.

    FEDATTACK_DATA=/work/shared/datasets nice -n 10 .venv/bin/python benchmarks/bench_mnist.py

MNIST MLP 784-200-10, 100 clients (shards, 2 classes each), E=5, B=10, lr 0.04, at 10, 20 and
50 clients a round, for FedAvg and WAFFLe (`waffle-ibp`, whenever that method is registered).
Every measurement runs in its own process (so peak memory is its own) and times rounds after
one untimed warm-up round; ratios are only meaningful within one run, on one machine state.
Flower runs when `--flower-python` names a Python that can `import flwr` (a separate venv:
Flower is not a fedattack dependency), and is skipped otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from fedattack.registry import TARGETS  # noqa: E402


def child(cfg: dict[str, Any]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, str(HERE / "_measure.py"), json.dumps(cfg)],
                         capture_output=True, text=True, cwd=HERE.parent)
    if out.returncode != 0:
        raise SystemExit(f"measurement {cfg} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def flower(python: str, clients: int, rounds: int, data_file: Path) -> dict[str, Any] | None:
    """Flower's simulation (Ray, one worker per core) on the same client code, or None."""
    cmd = [python, str(HERE / "_flower_app.py"), "--data", str(data_file), "--clients-per-round",
           str(clients), "--num-clients", "100", "--rounds", str(rounds + 1), "--epochs", "5",
           "--batch-size", "10", "--lr", "0.04"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        print(f"  flower failed:\n{out.stderr[-2000:]}", flush=True)
        return None
    res = json.loads(out.stdout.strip().splitlines()[-1])
    steady = res["round_s"][1:]  # round 1 includes starting the Ray workers
    res["seconds"], res["steps"] = sum(steady), sum(res["steps"][1:])
    res["rounds"] = len(steady)
    return res


def has_flower(python: str | None) -> bool:
    if not python or not Path(python).exists():
        return False
    return subprocess.run([python, "-c", "import flwr, torch"], capture_output=True).returncode == 0


def write_flower_data(path: Path, data_root: str | None) -> None:
    """Every client's training tensors, so the Flower workers need no fedattack import."""
    from fedattack.data import load_dataset
    from fedattack.data.partition import make_partition
    from fedattack.federation.loop import client_data

    dataset = load_dataset("mnist", data_root)
    part = make_partition("shards", dataset.y_train.numpy(), 100, 0, "mnist")
    datas = [client_data(dataset, part, k) for k in range(100)]
    torch.save({"x": [d.x_train for d in datas], "y": [d.y_train for d in datas]}, path)


def bmm_gflops(clients: int, seconds: float = 0.5) -> float:
    """torch.bmm throughput at the clients' two dominant shapes (fc1 forward and its weight grad)."""
    shapes = [((clients, 10, 784), (clients, 784, 200)), ((clients, 200, 10), (clients, 10, 784))]
    flops, spent = 0.0, 0.0
    for sa, sb in shapes:
        a, b = torch.randn(sa), torch.randn(sb)
        best = float("inf")
        for _ in range(3):
            n, started = 0, time.perf_counter()
            while time.perf_counter() - started < seconds / 3:
                torch.bmm(a, b)
                n += 1
            best = min(best, (time.perf_counter() - started) / n)
        flops += 2 * sa[0] * sa[1] * sa[2] * sb[2]
        spent += best
    return flops / spent / 1e9


def row(method: str, m: int, runner: str, res: dict[str, Any], base: dict[str, float],
        bmm: float) -> str:
    rate = res["steps"] / res["seconds"]
    per_round = res["seconds"] / res["rounds"]
    vs = "  ".join(f"{rate / base[k]:5.2f}x" if k in base and k != runner else "     -"
                   for k in ("plain", "flower"))
    frac = rate * res["flops_per_step"] / 1e9 / bmm if res.get("flops_per_step") else None
    wire = res.get("wire_bytes_per_round")
    peak = res.get("rss_peak") or res.get("rss_end")
    cpu = f"{res['steps'] / res['cpu_seconds']:11.0f}" if res.get("cpu_seconds") else "          -"
    return (f"{method:11s} {m:4d}  {runner:12s} {rate:9.0f} {per_round:8.2f} {cpu}  {vs}  "
            f"{f'{100 * frac:5.1f}%' if frac else '    -'}  "
            f"{f'{wire / 2**20:7.2f}' if wire else '      -'}  {f'{peak / 2**20:7.0f}' if peak else '      -'}")


def measure_method(method: str, m: int, bmm: float, args: argparse.Namespace, common: dict,
                   use_flower: bool, flower_data: Path, results: dict[str, Any]) -> None:
    """Plain loop, Flower (FedAvg only), then our executors, each printed as it finishes."""
    base: dict[str, float] = {}
    flops = None
    for runner in ("plain", "flower", "sequential", "batched-vmap", "batched"):
        if runner == "batched-vmap" and method != "fedavg":
            continue  # vmap is already what every other method's batched row runs
        if runner == "flower":
            if not (use_flower and method == "fedavg"):
                continue
            res = flower(args.flower_python, m, args.rounds, flower_data)
            if res is None:
                continue
            res["flops_per_step"] = flops
            extra = f"   (start-up {res['startup_s']:.1f} s, first round {res['round_s'][0]:.1f} s)"
        else:
            res = child({**common, "runner": runner, "method": method, "clients": m,
                         "rounds": args.rounds, "executor": runner})
            flops, extra = res["flops_per_step"], ""
        base[runner] = res["steps"] / res["seconds"]
        results["rows"].append({"method": method, "clients": m, "runner": runner, **res})
        print(row(method, m, runner, res, base, bmm) + extra, flush=True)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, nargs="+", default=[10, 20, 50], help="clients per round")
    p.add_argument("--rounds", type=int, default=2, help="timed rounds per measurement")
    p.add_argument("--methods", nargs="+", default=None, help="default: fedavg and waffle-ibp if registered")
    p.add_argument("--flower-python", default="/work/bench-venv/bin/python")
    p.add_argument("--full-rounds", type=int, default=100, help="rounds of the full setting (0: skip)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--data-root", default=os.environ.get("FEDATTACK_DATA"))
    p.add_argument("--json", type=Path, default=None, help="also write all results here")
    args = p.parse_args()
    methods = args.methods or [m for m in ("fedavg", "waffle-ibp") if m in TARGETS]
    if "waffle-ibp" not in methods and args.methods is None:
        print("waffle-ibp is not registered yet: benchmarking FedAvg only")
    if args.threads:
        torch.set_num_threads(args.threads)
    common = {"threads": args.threads, "device": args.device, "data_root": args.data_root}
    use_flower = has_flower(args.flower_python)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cores; "
          f"load average {load()}; Flower: {'yes' if use_flower else 'not importable, skipped'}")
    results: dict[str, Any] = {"load_start": load(), "bmm_gflops": {}, "rows": [], "full": []}
    header = (f"{'method':11s} {'m':>4s}  {'runner':12s} {'steps/s':>9s} {'s/round':>8s} {'steps/cpu-s':>11s}  "
              f"{'/plain':>6s}  {'/flwr':>6s}  {'%bmm':>6s}  {'wireMB/r':>8s}  {'peakMB':>7s}")
    with tempfile.TemporaryDirectory() as tmp:
        flower_data = Path(tmp) / "clients.pt"
        if use_flower:
            write_flower_data(flower_data, args.data_root)
        for m in args.clients:
            bmm = bmm_gflops(m)
            results["bmm_gflops"][m] = bmm
            print(f"\n{m} clients a round; torch.bmm at their shapes: {bmm:.1f} GFLOP/s; load {load()}")
            print(header, flush=True)
            for method in methods:
                measure_method(method, m, bmm, args, common, use_flower, flower_data, results)
    if args.full_rounds:
        print(f"\nFull setting: 100 clients, 10 a round, {args.full_rounds} rounds, every client "
              f"evaluated every round, run directory written (batched executor)")
        for method in methods:
            res = child({**common, "runner": "full", "method": method, "clients": 10,
                         "full_rounds": args.full_rounds, "executor": "batched"})
            results["full"].append({"method": method, **res})
            print(f"  {method:11s} {res['seconds']:7.1f} s wall, {res['cpu_seconds']:7.1f} s CPU  "
                  f"(of which the manifest's heterogeneity Gamma {res['manifest_extras_seconds'] or 0:.1f} s; "
                  f"accuracy {res['accuracy']:.2f}%, "
                  f"peak {res['rss_peak'] / 2**20:.0f} MB, load {load()})", flush=True)
    results["load_end"] = load()
    print(f"\nload average at the end: {load()}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
