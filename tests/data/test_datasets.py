"""Dataset loading: the embedded digits, image folders, the tensor cache, and the real datasets.

Tests never download. The real MNIST / Fashion-MNIST / CIFAR-10 tests read the data root named by
`FEDATTACK_DATA` (the shared datasets folder in CI) and skip when it is unset or lacks the files.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import fedattack.data.images as images
import fedattack.data.sources._torchvision as tv_sources
from fedattack.data import data_root_from, load_dataset
from fedattack.data.cache import cache_root
from fedattack.registry import UserError

CIFAR_CLASSES = (
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"
)  # fmt: skip
REAL_ROOT = os.environ.get("FEDATTACK_DATA")


@pytest.fixture(autouse=True)
def tmp_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own empty tensor cache."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("FEDATTACK_CACHE", str(folder))
    return folder


def write_image_folder(root: Path, classes: list[str], per_split: dict[str, int]) -> None:
    """A tiny ImageFolder dataset: 4x4 RGB PNGs whose red channel encodes (class, index)."""
    for split, n in per_split.items():
        for c, name in enumerate(classes):
            (root / split / name).mkdir(parents=True)
            for i in range(n):
                pixels = np.full((4, 4, 3), 10 * c + i, dtype=np.uint8)
                Image.fromarray(pixels).save(root / split / name / f"{i:03d}.png")


def test_digits_is_embedded_and_split_80_20() -> None:
    ds = load_dataset("digits", data_root="/nonexistent")
    assert ds.x_train.shape == (1437, 1, 8, 8) and ds.x_test.shape == (360, 1, 8, 8)
    assert ds.x_train.dtype == torch.float32 and ds.y_train.dtype == torch.int64
    assert 0.0 <= float(ds.x_train.min()) and float(ds.x_train.max()) == 1.0
    assert ds.classes == tuple(str(d) for d in range(10))
    assert torch.bincount(ds.y_test).min() >= 35  # stratified: every class in the test split
    assert torch.equal(ds.y_train, load_dataset("digits").y_train)


def test_data_root_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FEDATTACK_DATA", str(tmp_path / "env"))
    assert data_root_from(tmp_path / "opt") == tmp_path / "opt"
    assert data_root_from(None) == tmp_path / "env"
    monkeypatch.delenv("FEDATTACK_DATA")
    assert data_root_from(None) == Path.home() / ".cache" / "fedattack" / "data"


def test_unknown_dataset_is_a_user_error() -> None:
    with pytest.raises(UserError, match="unknown dataset 'nope'"):
        load_dataset("nope")


def test_image_folder_loads_and_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_image_folder(tmp_path / "ds", ["cats", "dogs"], {"train": 3, "test": 2})
    first = load_dataset("image-folder", tmp_path / "ds")
    assert first.classes == ("cats", "dogs") and first.x_train.shape == (6, 3, 4, 4)
    assert first.y_train.tolist() == [0, 0, 0, 1, 1, 1] and first.y_test.tolist() == [0, 0, 1, 1]
    assert first.x_train[4, 0, 0, 0].item() == pytest.approx(11 / 255)
    assert len(list(cache_root().glob("image-folder-*.pt"))) == 1

    def no_decoding(*args: object) -> None:
        raise AssertionError("decoded again although the cache holds the dataset")

    monkeypatch.setattr(images, "decode_image", no_decoding)
    second = load_dataset("image-folder", tmp_path / "ds")
    assert torch.equal(first.x_train, second.x_train) and torch.equal(first.y_test, second.y_test)


def test_changed_source_invalidates_cache(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "ds", ["a", "b"], {"train": 2, "test": 1})
    load_dataset("image-folder", tmp_path / "ds")
    Image.fromarray(np.full((4, 4, 3), 200, np.uint8)).save(tmp_path / "ds/train/a/000.png")
    os.utime(tmp_path / "ds/train/a/000.png", ns=(1, 1))
    again = load_dataset("image-folder", tmp_path / "ds")
    assert again.x_train[0, 0, 0, 0].item() == pytest.approx(200 / 255)


def test_corrupt_cache_is_ignored_and_rebuilt(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "ds", ["a", "b"], {"train": 2, "test": 1})
    expected = load_dataset("image-folder", tmp_path / "ds")
    (cache_file,) = cache_root().glob("*.pt")
    cache_file.write_bytes(cache_file.read_bytes()[:100])  # truncated
    with pytest.warns(UserWarning, match="ignoring unreadable dataset cache"):
        rebuilt = load_dataset("image-folder", tmp_path / "ds")
    assert torch.equal(rebuilt.x_train, expected.x_train)
    assert torch.load(cache_file, weights_only=True)["x_train"].dtype == torch.uint8


class _Payload:
    """Pickled, this would create a file when unpickled by an unsafe loader."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.marker,))


def test_cache_file_carrying_pickle_code_is_not_executed(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "ds", ["a", "b"], {"train": 2, "test": 1})
    load_dataset("image-folder", tmp_path / "ds")
    (cache_file,) = cache_root().glob("*.pt")
    marker = tmp_path / "pwned"
    torch.save({"meta": "{}", "x_train": _Payload(marker)}, cache_file)
    with pytest.warns(UserWarning):
        ds = load_dataset("image-folder", tmp_path / "ds")
    assert not marker.exists() and ds.x_train.shape == (4, 3, 4, 4)


def test_image_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="train/<class>"):
        load_dataset("image-folder", tmp_path)
    write_image_folder(tmp_path / "ds", ["a"], {"train": 1, "test": 1})
    Image.fromarray(np.zeros((5, 5, 3), np.uint8)).save(tmp_path / "ds/test/a/big.png")
    with pytest.raises(UserError, match="differ in size"):
        load_dataset("image-folder", tmp_path / "ds")


@pytest.mark.parametrize("name", ["mnist", "fmnist", "cifar10"])
def test_missing_data_without_download_is_a_user_error(name: str, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--download"):
        load_dataset(name, tmp_path, download=False)
    assert list(tmp_path.iterdir()) == []  # nothing fetched, nothing created


def test_unreadable_cifar10_pickles_are_a_user_error(tmp_path: Path) -> None:
    (tmp_path / "cifar-10-batches-py").mkdir()
    (tmp_path / "cifar-10-batches-py" / "data_batch_1").write_bytes(b"not a pickle")
    with pytest.raises(UserError, match="cannot read cifar10"):
        load_dataset("cifar10", tmp_path)


def test_cifar10_jpeg_folder_and_tar_use_canonical_class_order(tmp_path: Path) -> None:
    jpeg_dir = tmp_path / "a" / "cifar10-jpeg"
    write_image_folder(jpeg_dir, list(CIFAR_CLASSES), {"train": 1, "test": 1})
    from_folder = load_dataset("cifar10", tmp_path / "a")
    assert from_folder.classes == CIFAR_CLASSES and from_folder.y_train.tolist() == list(range(10))
    (tmp_path / "b").mkdir()
    with tarfile.open(tmp_path / "b" / "cifar10-jpeg.tar.gz", "w:gz") as archive:
        for name in reversed(CIFAR_CLASSES):  # archive order must not matter
            for split in ("test", "train"):
                archive.add(jpeg_dir / split / name, arcname=f"cifar10-jpeg/{split}/{name}")
    from_tar = load_dataset("cifar10", tmp_path / "b")
    assert torch.equal(from_tar.x_train, from_folder.x_train)
    assert torch.equal(from_tar.y_test, from_folder.y_test)


def real_root(*required: str) -> Path:
    if not REAL_ROOT or not all((Path(REAL_ROOT) / r).exists() for r in required):
        pytest.skip(f"FEDATTACK_DATA does not hold {', '.join(required)}")
    return Path(REAL_ROOT)


@pytest.mark.parametrize(
    "name, folder, first_label", [("mnist", "MNIST", 5), ("fmnist", "FashionMNIST", 9)]
)
def test_real_idx_datasets(
    name: str, folder: str, first_label: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = real_root(f"{folder}/raw/train-images-idx3-ubyte")
    ds = load_dataset(name, root)
    assert ds.x_train.shape == (60000, 1, 28, 28) and ds.x_test.shape == (10000, 1, 28, 28)
    assert ds.y_train[0].item() == first_label and ds.num_classes == 10
    monkeypatch.setattr(tv_sources, "_decode", lambda *a: pytest.fail("decoded twice"))
    assert torch.equal(load_dataset(name, root).x_test, ds.x_test)


@pytest.mark.slow  # decoding 60,000 JPEGs: ~11 s of CPU, over 30 s wall on a busy machine
def test_real_cifar10(monkeypatch: pytest.MonkeyPatch) -> None:
    root = real_root()
    copies = ("cifar-10-batches-py", "cifar10-jpeg", "cifar10-jpeg.tar.gz")
    if not any((root / p).exists() for p in copies):
        pytest.skip("FEDATTACK_DATA holds no CIFAR-10 copy")
    ds = load_dataset("cifar10", root)
    assert ds.x_train.shape == (50000, 3, 32, 32) and ds.x_test.shape == (10000, 3, 32, 32)
    assert ds.classes == CIFAR_CLASSES
    assert torch.bincount(ds.y_train).tolist() == [5000] * 10
    monkeypatch.setattr(images, "decode_image", lambda *a: pytest.fail("decoded twice"))
    assert torch.equal(load_dataset("cifar10", root).y_test, ds.y_test)
