"""Datasets and partitions: what the clients of a federation hold.

`load_dataset(name, data_root, download)` returns a `Dataset` from the registered loaders in
`fedattack.data.sources` (one module per source); `fedattack.data.partition.make_partition`
splits its train split among clients.
"""

from __future__ import annotations

import os
from pathlib import Path

from fedattack.data.partition import make_partition, parse_options, partition_from_spec
from fedattack.data.types import ClientData, Dataset, Partition
from fedattack.registry import DATASETS

__all__ = [
    "ClientData",
    "Dataset",
    "Partition",
    "data_root_from",
    "load_dataset",
    "make_partition",
    "parse_options",
    "partition_from_spec",
]

DATA_ENV = "FEDATTACK_DATA"


def data_root_from(option: str | Path | None) -> Path:
    """Resolve the data root: the explicit option, else `$FEDATTACK_DATA`, else a user cache dir.

    The default lives under `~/.cache` so that `--download` without a data root still has a
    sensible, writable place to put files.
    """
    if option is not None and str(option) != "":
        return Path(option).expanduser()
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "fedattack" / "data"


def load_dataset(name: str, data_root: str | Path | None = None, download: bool = False) -> Dataset:
    """Load a registered dataset by name; raises `UserError` for unknown names or missing files.

    Nothing is downloaded unless `download` is true: tests and offline machines must never hit
    the network by accident.
    """
    loader = DATASETS.get(name)
    return loader(data_root_from(data_root), download)
