"""Could the Flower app and `fedattack train` give the same federation bit for bit?

    python examples/flower_mnist/bitwise.py runs/fedavg-own --data-root /path/to/datasets

Step by step on a run fedattack trained with this folder's setting, without Flower's
simulation engine: (1) the app's initial weights with `mimic` against the round-1 downlink
fedattack sent; (2) the ClientApp's local training (`mnist_task.train_locally`, `mimic`: the
same batch order) from that downlink against each client's recorded round-1 uplink; (3) Flower's
own FedAvg aggregation (`aggregate_arrayrecords`) of those uplinks, in client order and in a
shuffled order (replies reach a Flower server in the order they finish), against the round-2
downlink. Prints the largest absolute difference and whether each step is bit-identical.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mnist_task as task  # noqa: E402


def largest_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> tuple[float, bool]:
    diff = max(float((a[n] - torch.as_tensor(b[n])).abs().max()) for n in a)
    return diff, all(torch.equal(a[n], torch.as_tensor(b[n])) for n in a)


def flower_fedavg(uplinks: list[tuple[int, dict[str, torch.Tensor]]]) -> dict[str, torch.Tensor]:
    """Flower's FedAvg aggregation of (samples, state) replies, in the order given."""
    from flwr.app import ArrayRecord, MetricRecord, RecordDict
    from flwr.serverapp.strategy.strategy_utils import aggregate_arrayrecords
    records = [RecordDict({"arrays": ArrayRecord(s), "metrics": MetricRecord({"num-examples": n})})
               for n, s in uplinks]
    return aggregate_arrayrecords(records, "num-examples").to_torch_state_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path)
    parser.add_argument("--data-root", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from fedattack.federation.rundir import Federation
    root = str(args.data_root or os.environ.get("FEDATTACK_DATA", ""))
    msgs = {(m.round, m.kind, m.client): m for m in Federation(args.run).transcript().load() if m.round <= 2}
    down = msgs[(1, "downlink", 0)].payload
    diff, same = largest_difference(task.initial_state(True), down)
    print(f"initial weights: max |diff| {diff:.3g}, bit-identical {same}")
    x, y, _, _ = task.load(root)
    uplinks = []
    for k, idx in enumerate(task.partition(root)[0]):
        model = task.Net()
        model.load_state_dict(msgs[(1, "downlink", k)].payload)
        t = torch.as_tensor(idx)
        task.train_locally(model, x[t], y[t], 1, k, mimic=True)
        recorded = msgs[(1, "uplink", k)]
        diff, same = largest_difference(model.state_dict(), recorded.payload)
        print(f"client {k} round-1 uplink: max |diff| {diff:.3g}, bit-identical {same}")
        uplinks.append((recorded.samples or 0, recorded.payload))
    server = msgs[(2, "downlink", 0)].payload
    for name, order in (("client order", np.arange(len(uplinks))),
                        ("a shuffled order", np.random.default_rng(1).permutation(len(uplinks)))):
        diff, same = largest_difference(flower_fedavg([uplinks[i] for i in order]), server)
        print(f"Flower's FedAvg of fedattack's round-1 uplinks, {name}: max |diff| {diff:.3g}, bit-identical {same}")


if __name__ == "__main__":
    main()
