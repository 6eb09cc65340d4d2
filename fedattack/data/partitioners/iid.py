"""`iid`: every client gets a uniformly random, equally sized slice of the train split.

The baseline against which the non-i.i.d. partitions are measured (WAFFLE's distribution A is
the same idea with ten agents).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedattack.data.partitioners._common import (
    build_partition,
    check_fraction,
    check_num_clients,
    default_num_clients,
)
from fedattack.data.types import Partition, PartitionInput
from fedattack.registry import PARTITIONS, UserError


@dataclass(frozen=True)
class IIDOptions:
    """test_fraction: share of each client's data held out as its local test set. client_size:
    samples per client (before the test split), drawn without replacement from the train split
    and the rest left unused; 0 (the default) shares the whole split out. Ordinary clients of a
    given size without thousands of clients (an eavesdropper's victim seen every round)."""

    test_fraction: float = 0.2
    client_size: int = 0


@PARTITIONS.register("iid")
class IID:
    """Shuffle the train split and cut it into `num_clients` near-equal parts (group "all").

    `num_clients` None means 100 (10 for `digits`).
    """

    Options = IIDOptions

    @staticmethod
    def split(data: PartitionInput, num_clients: int | None, seed: int,
              options: IIDOptions) -> Partition:
        labels, dataset_name = data.labels, data.name
        check_fraction("test_fraction", options.test_fraction)
        n = num_clients if num_clients is not None else default_num_clients(dataset_name)
        check_num_clients(n, len(labels))
        size = options.client_size
        if size < 0 or size * n > len(labels):
            raise UserError(f"client_size={size} for {n} clients needs {size * n} samples; the train split "
                            f"has {len(labels)}: use fewer clients or a smaller client_size (0: share it all)")
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(labels)).astype(np.int64)
        holdings = list(order[:size * n].reshape(n, size)) if size else np.array_split(order, n)
        return build_partition("iid", seed, options, labels, holdings, ["all"] * n, rng)
