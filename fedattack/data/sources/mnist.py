"""`mnist`: LeCun et al.'s handwritten digits through torchvision (28x28 grey, 60k/10k).

The WAFFLe paper's MNIST experiments (MLP 784-200-10) and WAFFLE's (LeNet-5) use it. The data root
must hold `MNIST/raw/` (the shared datasets folder does); it is downloaded only with `download`.
"""

from __future__ import annotations

from pathlib import Path

from fedattack.data.sources._torchvision import load_idx_dataset
from fedattack.data.types import Dataset
from fedattack.registry import DATASETS

CLASSES = tuple(str(d) for d in range(10))


@DATASETS.register("mnist")
def load(root: Path, download: bool) -> Dataset:
    """Load MNIST from `root/MNIST/raw`, through the tensor cache."""
    return load_idx_dataset("mnist", "MNIST", CLASSES, root, download)
