"""Registering the data sources must not import torchvision or scikit-learn.

The registry imports every source module to learn the names (`fedattack list`, any
`load_dataset`), so a module-level import there costs every run seconds, even one reading MNIST
from the tensor cache. Checked in a fresh interpreter: this test process has them loaded already.
"""

from __future__ import annotations

import json
import subprocess
import sys

from fedattack.data.sources import _torchvision, fmnist

PROBE = """
import json, sys
from fedattack.registry import DATASETS
names = DATASETS.names()
print(json.dumps({"names": names, "loaded": [m for m in ("torchvision", "sklearn") if m in sys.modules]}))
"""


def test_listing_the_sources_imports_neither_torchvision_nor_sklearn() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert {"mnist", "fmnist", "cifar10", "digits", "image-folder"} <= set(found["names"])
    assert found["loaded"] == []


def test_spelled_out_idx_names_match_torchvision() -> None:
    from torchvision.datasets import MNIST, FashionMNIST

    for kind in (MNIST, FashionMNIST):
        unpacked = [url.rsplit("/", 1)[-1].removesuffix(".gz") for url, _ in kind.resources]
        assert [p.name for p in _torchvision.raw_files(kind.__name__, _torchvision.Path("r"))] == unpacked
    assert fmnist.CLASSES == tuple(FashionMNIST.classes)
