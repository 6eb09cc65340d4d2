"""Flower's simulation engine running the plain client code of `_plain.py` (FedAvg, MNIST MLP).

Run by bench_mnist.py with the Python of a separate virtual environment that has
`flwr[simulation]` (Flower is never a fedattack dependency). Reads the clients' data from a
tensor file, prints one JSON line: start-up seconds, seconds and client steps of each round.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

STARTED = time.perf_counter()
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from _plain import MnistMLP, train_client  # noqa: E402
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402
from flwr.simulation import run_simulation  # noqa: E402

ENV = "FEDATTACK_BENCH_FLOWER"  # settings reach the Ray worker processes through the environment
_DATA: dict[str, list[torch.Tensor]] = {}
STAMPS: list[float] = []
STEPS: list[int] = []


def settings() -> argparse.Namespace:
    return argparse.Namespace(**json.loads(os.environ[ENV]))


def client_data(k: int) -> tuple[torch.Tensor, torch.Tensor]:
    if not _DATA:
        _DATA.update(torch.load(settings().data, weights_only=True))
    return _DATA["x"][k], _DATA["y"][k]


client_app = ClientApp()


@client_app.train()
def train(msg: Message, context: Context) -> Message:
    torch.set_num_threads(1)  # one Ray worker per core
    k = int(context.node_config["partition-id"])
    x, y = client_data(k)
    args = settings()
    model = MnistMLP()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    steps = train_client(model, x, y, args.epochs, args.batch_size, args.lr, seed=k)
    reply = RecordDict({"arrays": ArrayRecord(model.state_dict()),
                        "metrics": MetricRecord({"num-examples": len(y), "steps": steps})})
    return Message(content=reply, reply_to=msg)


server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    args = settings()
    strategy = FedAvg(fraction_train=args.clients_per_round / args.num_clients, fraction_evaluate=0.0,
                      min_train_nodes=args.clients_per_round, min_available_nodes=args.num_clients,
                      train_metrics_aggr_fn=count_steps)

    def stamp(rnd: int, arrays: ArrayRecord) -> None:
        STAMPS.append(time.perf_counter())

    strategy.start(grid=grid, initial_arrays=ArrayRecord(MnistMLP().state_dict()),
                   num_rounds=args.rounds, evaluate_fn=stamp)


def count_steps(records: list[RecordDict], weight_key: str) -> MetricRecord:
    """Sum the local steps the clients report (the round's client steps)."""
    STEPS.append(sum(int(next(iter(r.metric_records.values()))["steps"]) for r in records))
    return MetricRecord({"steps": STEPS[-1]})


def rss_of_tree() -> int | None:
    try:
        import psutil
    except ImportError:
        return None
    me = psutil.Process()
    return sum(p.memory_info().rss for p in [me, *me.children(recursive=True)])


def run() -> None:
    parser = argparse.ArgumentParser()
    for name, kind in [("data", str), ("clients-per-round", int), ("num-clients", int), ("rounds", int),
                       ("epochs", int), ("batch-size", int), ("lr", float)]:
        parser.add_argument(f"--{name}", type=kind, required=True)
    args = parser.parse_args()
    os.environ[ENV] = json.dumps(vars(args))
    here = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    run_simulation(server_app=server_app, client_app=client_app, num_supernodes=args.num_clients,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}})
    rounds = [b - a for a, b in zip(STAMPS, STAMPS[1:])]
    print(json.dumps({"startup_s": STAMPS[0] - STARTED if STAMPS else None, "round_s": rounds,
                      "steps": STEPS, "total_s": time.perf_counter() - STARTED,
                      "rss_end": rss_of_tree(), "flwr": __import__("flwr").__version__}))


if __name__ == "__main__":
    run()
