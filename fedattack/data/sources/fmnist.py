"""`fmnist`: Xiao et al.'s Fashion-MNIST through torchvision (28x28 grey, 60k/10k).

The WAFFLe paper's Fashion-MNIST experiments use it (CNN, multimodal split: footwear and shirts
form the minority). The data root must hold `FashionMNIST/raw/`; it is downloaded only with
`download`.
"""

from __future__ import annotations

from pathlib import Path

from fedattack.data.sources._torchvision import load_idx_dataset
from fedattack.data.types import Dataset
from fedattack.registry import DATASETS

CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")  # torchvision's FashionMNIST.classes


@DATASETS.register("fmnist")
def load(root: Path, download: bool) -> Dataset:
    """Load Fashion-MNIST from `root/FashionMNIST/raw`, through the tensor cache."""
    return load_idx_dataset("fmnist", "FashionMNIST", CLASSES, root, download)
