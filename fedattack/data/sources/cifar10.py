"""`cifar10`: Krizhevsky's CIFAR-10 (32x32 RGB, 50k/10k), from whichever copy the data root holds.

Looked for in this order under the data root:

1. `cifar-10-batches-py/`: torchvision's canonical pickles (what `download` fetches);
2. `cifar10-jpeg/{train,test}/<class>/*.jpg`: an unpacked JPEG copy in ImageFolder layout;
3. `cifar10-jpeg.tar.gz`: the same JPEG copy still packed (the shared datasets folder has this);
   it is decoded straight from the archive, without unpacking 60,000 files.

Labels always follow CIFAR-10's canonical class order, whatever the folder order, so a model
trained on one copy reads the same label indices as one trained on another. The JPEG copy is
lossy (quality 75): pixel values differ slightly from the pickles.
"""

from __future__ import annotations

from pathlib import Path

import torch

from fedattack.data.cache import RawImages, cached
from fedattack.data.images import cached_folder, read_tar
from fedattack.data.sources._torchvision import fetch, open_splits
from fedattack.data.types import Dataset, DatasetMissing
from fedattack.registry import DATASETS, UserError

CLASSES = (
    "airplane", "automobile", "bird", "cat", "deer",
    "dog", "frog", "horse", "ship", "truck",
)  # fmt: skip
PICKLES = "cifar-10-batches-py"
JPEG_DIR = "cifar10-jpeg"
JPEG_TAR = "cifar10-jpeg.tar.gz"


@DATASETS.register("cifar10")
def load(root: Path, download: bool) -> Dataset:
    """Load CIFAR-10 through the tensor cache from the first copy found (see module docstring)."""
    if (root / PICKLES).is_dir():
        return _from_pickles(root)
    if (root / JPEG_DIR / "train").is_dir() and (root / JPEG_DIR / "test").is_dir():
        return cached_folder("cifar10", root / JPEG_DIR, CLASSES)
    if (root / JPEG_TAR).is_file():
        return cached("cifar10", [root / JPEG_TAR], lambda: read_tar(root / JPEG_TAR, CLASSES))
    if download:
        fetch("cifar10", "CIFAR10", root)
        return _from_pickles(root)
    raise DatasetMissing("cifar10", root, f"looked for {PICKLES}/, {JPEG_DIR}/ and {JPEG_TAR}")


def _from_pickles(root: Path) -> Dataset:
    files = sorted(p for p in (root / PICKLES).iterdir() if p.is_file())
    return cached("cifar10", files, lambda: _decode_pickles(root))


def _decode_pickles(root: Path) -> RawImages:
    """Read torchvision's pickled batches; its HWC uint8 arrays become CHW tensors."""
    train, test = open_splits("cifar10", "CIFAR10", root, root / PICKLES)
    if tuple(train.classes) != CLASSES:
        raise UserError(f"{root / PICKLES} has unexpected classes {train.classes}; re-download it")
    return RawImages(
        x_train=torch.from_numpy(train.data).permute(0, 3, 1, 2).contiguous(),
        y_train=torch.tensor(train.targets, dtype=torch.int64),
        x_test=torch.from_numpy(test.data).permute(0, 3, 1, 2).contiguous(),
        y_test=torch.tensor(test.targets, dtype=torch.int64),
        classes=CLASSES,
    )
