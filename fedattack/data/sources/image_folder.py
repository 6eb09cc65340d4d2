"""`image-folder`: any dataset in torchvision's ImageFolder layout, split into train and test.

The data root *is* the dataset folder: `<root>/train/<class>/<image>` and
`<root>/test/<class>/<image>`. Classes are the sorted names of the train sub-folders (the order
ImageFolder uses); the test split may hold a subset of them. All images must have one size; a
folder of greyscale images gives one channel, otherwise three.
"""

from __future__ import annotations

from pathlib import Path

from fedattack.data.images import cached_folder, folder_classes
from fedattack.data.types import Dataset
from fedattack.registry import DATASETS, UserError


@DATASETS.register("image-folder")
def load(root: Path, download: bool) -> Dataset:
    """Load `root/{train,test}/<class>/*` through the tensor cache; there is nothing to download."""
    if not (root / "train").is_dir() or not (root / "test").is_dir():
        raise UserError(
            f"image-folder needs {root}/train/<class>/ and {root}/test/<class>/ folders; "
            "point --data-root / FEDATTACK_DATA at such a folder"
        )
    classes = folder_classes(root / "train")
    if not classes:
        raise UserError(f"{root / 'train'} has no class sub-folders; add train/<class>/<image>")
    return cached_folder("image-folder", root, classes)
