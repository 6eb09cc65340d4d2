"""`digits`: scikit-learn's bundled 8x8 handwritten digits, the embedded default.

It ships inside scikit-learn, so it works on any machine with no data root and no download, which
makes it the dataset for quick runs and tests. The 1,797 images are split once into train (80%)
and test (20%), stratified by class with a fixed seed, so every run sees the same split.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from fedattack.data.types import Dataset
from fedattack.registry import DATASETS

TEST_FRACTION = 0.2
SPLIT_SEED = 0
MAX_PIXEL = 16.0  # scikit-learn's digits hold counts 0..16 per pixel


@DATASETS.register("digits")
def load(root: Path, download: bool) -> Dataset:
    """Load the digits; `root` and `download` are ignored (the data is bundled).

    scikit-learn is imported here, not at the top: the registry imports this module only to
    learn the name, and importing scikit-learn costs a second or more.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    images = (bunch.images / MAX_PIXEL).astype(np.float32)[:, None]  # (N, 1, 8, 8)
    labels = bunch.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=TEST_FRACTION, stratify=labels, random_state=SPLIT_SEED
    )
    return Dataset(
        name="digits",
        x_train=torch.from_numpy(np.ascontiguousarray(x_train)),
        y_train=torch.from_numpy(y_train),
        x_test=torch.from_numpy(np.ascontiguousarray(x_test)),
        y_test=torch.from_numpy(y_test),
        classes=tuple(str(int(c)) for c in bunch.target_names),
    )
