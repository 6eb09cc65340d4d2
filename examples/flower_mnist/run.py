"""Train the MNIST Flower app with Flower's simulation engine, recorded into a fedattack run directory.

    python examples/flower_mnist/run.py --data-root /path/to/datasets --out runs/flower-mnist
    PYTHONPATH=examples/flower_mnist fedattack evaluate runs/flower-mnist \
        --model mnist_task:Net --dataset mnist_task:load --data-root /path/to/datasets

The setting (10 clients, all of them every round, 15 rounds, E=5, B=10, lr=0.04, seed 0) is
mnist_task.py's; the README gives the `fedattack train` command that trains the same federation.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def simulate(out: Path, data_root: Path | None = None, overwrite: bool = False, mimic: bool = False,
             rounds: int | None = None) -> Path:
    """Run the app on one simulated node per client; the recorder writes `out` when training ends."""
    if data_root is not None:
        os.environ["FEDATTACK_DATA"] = str(data_root)  # the simulated clients read it from there
    os.environ["FLOWER_MNIST_MIMIC"] = "1" if mimic else "0"
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    import mnist_app
    import mnist_task
    from flwr.simulation import run_simulation

    backend: Any = {"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                    "init_args": {"num_cpus": 1, "include_dashboard": False}}  # one client at a time
    server = mnist_app.server_app(out, overwrite, rounds or mnist_task.ROUNDS)
    run_simulation(server_app=server, client_app=mnist_app.client_app,
                   num_supernodes=mnist_task.CLIENTS, backend_config=backend)
    if not (out / "federation.json").is_file():
        raise SystemExit(f"the Flower run did not finish; {out} was not written (see Flower's log above)")
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/flower-mnist"))
    parser.add_argument("--data-root", type=Path, default=None, help="default: $FEDATTACK_DATA")
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--mimic", action="store_true",
                        help="fedattack's initial weights and batch order (to compare bit for bit)")
    parser.add_argument("--rounds", type=int, default=None, help="default: mnist_task.ROUNDS (15)")
    args = parser.parse_args()
    started = time.perf_counter()
    print(simulate(args.out, args.data_root, args.overwrite, args.mimic, args.rounds))
    print(f"wall time {time.perf_counter() - started:.1f} s")
