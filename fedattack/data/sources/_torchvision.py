"""Shared loading through torchvision: the IDX-file datasets (MNIST, Fashion-MNIST), and the
download and open helpers `cifar10` uses too. Not a dataset itself (nothing registers here).

torchvision reads `<root>/<Folder>/raw/*-ubyte`; we check for those files ourselves first so that
a missing dataset gives the user one line on how to fix it instead of torchvision's generic
"Dataset not found" error, and we only ever let torchvision download when the user asked for it.

torchvision itself is imported only when files are decoded, opened or fetched: importing it
costs seconds (it pulls in torch._dynamo), and the registry imports every source module just to
learn the names, so a run reading MNIST from the tensor cache never needs it. The IDX file
names are therefore spelled out here (`IDX_FILES`, what torchvision's `resources` unpack to; a
test checks they agree).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from fedattack.data.cache import RawImages, cached
from fedattack.data.types import Dataset, DatasetMissing
from fedattack.registry import UserError

IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def torchvision_dataset(folder: str) -> Any:
    """torchvision's dataset class of that name (its folder under the root), imported now."""
    return getattr(importlib.import_module("torchvision.datasets"), folder)


def raw_files(folder: str, root: Path) -> list[Path]:
    """The decompressed IDX files torchvision needs, under `<root>/<folder>/raw/`."""
    return [root / folder / "raw" / name for name in IDX_FILES]


def load_idx_dataset(
    name: str, folder: str, classes: Sequence[str], root: Path, download: bool
) -> Dataset:
    """Load an MNIST-like dataset through the tensor cache, downloading only if asked to;
    `folder` is torchvision's class name (MNIST, FashionMNIST)."""
    files = raw_files(folder, root)
    if download and not all(f.is_file() for f in files):
        fetch(name, folder, root)
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise DatasetMissing(name, root, f"missing {missing[0]}; the folder must hold {folder}/raw/")
    return cached(name, files, lambda: _decode(name, folder, classes, root))


def fetch(name: str, folder: str, root: Path) -> None:
    """Let torchvision download (and unpack) a dataset; only called when the user asked to."""
    kind = torchvision_dataset(folder)
    try:
        root.mkdir(parents=True, exist_ok=True)
        kind(str(root), train=True, download=True)
    except Exception as exc:  # noqa: BLE001 - network and disk errors alike are the user's to fix
        raise UserError(f"could not download {name} into {root}: {exc}") from exc


def open_splits(name: str, folder: str, root: Path, where: Path) -> tuple[Any, Any]:
    """torchvision's train and test objects, with unreadable files turned into a UserError."""
    kind = torchvision_dataset(folder)
    try:
        return (
            kind(str(root), train=True, download=False),
            kind(str(root), train=False, download=False),
        )
    except (RuntimeError, OSError, ValueError) as exc:
        raise UserError(
            f"cannot read {name} from {where} ({exc}); "
            "replace the files or fetch them again with --download"
        ) from exc


def _decode(name: str, folder: str, classes: Sequence[str], root: Path) -> RawImages:
    """Read both splits with torchvision; images stay uint8, gaining a channel axis."""
    train, test = open_splits(name, folder, root, root / folder / "raw")
    return RawImages(
        x_train=train.data.to(torch.uint8).unsqueeze(1),
        y_train=train.targets.to(torch.int64),
        x_test=test.data.to(torch.uint8).unsqueeze(1),
        y_test=test.targets.to(torch.int64),
        classes=tuple(classes),
    )
