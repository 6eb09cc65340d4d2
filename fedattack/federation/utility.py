"""What a trained federation's utility is measured on, when its clients hold no test images.

Utility is each client's deployed model on its own local test images (the WAFFLe paper's
tables). A partition with `test_fraction=0` (the update-inversion recipes of docs/privacy.md,
whose clients hold exactly N training images) leaves nothing to measure; the mean then was NaN,
printed as "nan%" beside five numpy warnings. Instead the federation is measured on the
dataset's test split, which no client holds (the attacks draw their auxiliary data from it):
the split is dealt out evenly among the clients (a seeded permutation, relabelled by a client's
label map where its partition shifts concepts), each share is classified by that client's
deployed model, and the figure is the share of all test images classified correctly. For a method
whose clients all deploy the global model (FedAvg) that is the global model's test accuracy; for
a personalising one it weighs every client alike, on data of the population's distribution, not
the client's. It costs one pass over the test split, whatever the number of clients.
"""

from __future__ import annotations

import numpy as np
import torch

from fedattack.data.types import Dataset, Partition
from fedattack.federation.loop import FederationState, RoundLoop
from fedattack.metrics import utility_summary
from fedattack.rng import numpy_rng
from fedattack.target import LocalData


def final_utility(loop: RoundLoop, state: FederationState, accs: list[float], dataset: Dataset,
                  partition: Partition, seed: int) -> dict[str, float]:
    """The utility summary of the last evaluation, and the test split's accuracy where no client
    holds local test images."""
    final = utility_summary(accs, partition.groups())
    if final["clients_measured"] == 0 and len(dataset.y_test):
        shares = test_split_shares(dataset, partition, seed)
        shares_accs = loop.evaluate(state, shares)
        correct = sum(round(a * len(d.y_test)) for a, d in zip(shares_accs, shares) if len(d.y_test))
        final["test_split"] = 100.0 * correct / len(dataset.y_test)
        final["test_split_images"] = int(len(dataset.y_test))
    return final


def test_split_shares(dataset: Dataset, partition: Partition, seed: int) -> list[LocalData]:
    """The dataset's test split dealt evenly among the clients, as each client's test set."""
    order = numpy_rng(seed, "test-split-shares").permutation(len(dataset.y_test))
    maps = partition.stats.get("label_maps")
    none = dataset.x_train[:0], dataset.y_train[:0]
    shares = []
    for k, idx in enumerate(np.array_split(order, partition.num_clients)):
        rows = torch.as_tensor(idx, dtype=torch.long)
        labels = dataset.y_test[rows]
        if maps is not None:
            labels = torch.as_tensor(maps[k], dtype=torch.long)[labels]
        shares.append(LocalData(*none, dataset.x_test[rows], labels))
    return shares
