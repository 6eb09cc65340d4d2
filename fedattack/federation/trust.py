"""A run directory is untrusted input: checks made before anything in it is used.

A run directory may come from a colleague, a download or an attacker. Opening one never executes
code (JSON and `torch.load(weights_only=True)` only); beyond that, nothing it says is believed
until checked here: no path leaves the directory (no symbolic links, no `..`, no absolute
paths), every file is listed in the manifest with its size and checksum and nothing else is
there, the manifest has the structure this version writes (within `MANIFEST_BYTES`, no string
longer than `MAX_STRING`), each recorded tensor has the name, shape and dtype the manifest's
wire schema declares (a run directory of schema 1 declared shapes only, and its tensors were
floating point) and finite values, the server state's tensors those of the wire's
parameters, the dataset the facts the manifest states, and the partition's indices are in
range, disjoint and complete. Each refusal is one line that names the file and what is wrong.
The checksums are unkeyed SHA-256: they catch damage, not a forger who rewrites the manifest
and reseals it; so every transcript round is checked when a run is opened, not only the rounds
an attack reads (`Federation(deep_verify=True)`; on a 1 GB transcript this costs about what the
checksums cost, see docs/reliability/hostile-inputs.md).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import torch

from fedattack.registry import UserError

MANIFEST = "federation.json"
MANIFEST_BYTES = 64 * 2**20  # a manifest lists files and per-client facts: megabytes at most
MAX_STRING = 64 * 2**10      # names, paths and versions; a longer string is not one fedattack wrote
SHA256 = re.compile(r"^[0-9a-f]{64}$")
ROUND_FILE = re.compile(r"^round_\d{5,}\.pt$")


def refuse(path: Path | str, problem: str) -> UserError:
    return UserError(f"{path}: {problem}; it is not a run directory this fedattack wrote intact, "
                     "re-create it with `fedattack train`")


def check_tree(root: Path, files: Mapping[str, Any]) -> None:
    """No symbolic link anywhere; exactly the manifest's files, each a safe relative path."""
    for rel in files:
        if not _safe_relative(rel):
            raise refuse(root / MANIFEST, f"lists the unsafe path {rel!r}")
    found = set()
    for folder, dirs, names in os.walk(root, followlinks=False):
        for name in dirs + names:
            path = Path(folder) / name
            if path.is_symlink():
                raise refuse(path, "is a symbolic link (links could lead outside the run directory)")
        for name in names:
            found.add((Path(folder) / name).relative_to(root).as_posix())
    missing = sorted(set(files) - found)
    if missing:
        raise UserError(f"{root / missing[0]} is missing; the run directory is incomplete, train it again")
    extra = sorted(found - set(files) - {MANIFEST})
    if extra:
        raise refuse(root / extra[0], "is not listed in the manifest")


def _safe_relative(rel: object) -> bool:
    if not isinstance(rel, str) or not rel or "\\" in rel or "\0" in rel:
        return False
    path = PurePosixPath(rel)
    return not path.is_absolute() and all(part not in ("", ".", "..") for part in path.parts)


def check_manifest(path: Path, manifest: Any) -> None:
    """The manifest's structure: every field this version reads, with the type it reads."""
    if not isinstance(manifest, dict):
        raise refuse(path, "is not a JSON object")
    longest = _longest_string(manifest)
    if longest > MAX_STRING:
        raise refuse(path, f"holds a string of {longest:,} characters (fedattack writes none over {MAX_STRING:,})")
    _fields(path, manifest, {"spec": dict, "dataset": dict, "num_clients": int, "files": dict,
                             "wire_schema": dict, "recording": dict})
    if manifest["num_clients"] < 1:
        raise refuse(path, "says the federation has no clients")
    ds = manifest["dataset"]
    _fields(path, ds, {"name": str, "input_shape": list, "num_classes": int, "train_size": int})
    if len(ds["input_shape"]) != 3 or not all(_positive_int(v) for v in ds["input_shape"]):
        raise refuse(path, "has a dataset input_shape that is not three positive integers")
    if ds["num_classes"] < 1 or ds["train_size"] < 1:
        raise refuse(path, "has a dataset without classes or training samples")
    for rel, info in manifest["files"].items():
        if not (isinstance(info, dict) and _nonneg_int(info.get("bytes"))
                and isinstance(info.get("sha256"), str) and SHA256.match(info["sha256"])):
            raise refuse(path, f"has no valid size and checksum for {rel!r}")
    schema = manifest["wire_schema"]
    for kind in ("downlink", "uplink"):
        entries = schema.get(kind)
        if not isinstance(entries, dict) or not all(_tensor_entry(e) for e in entries.values()):
            raise refuse(path, f"has a malformed {kind} wire schema")


WIRE_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.uint8, torch.int8, torch.int16,
    torch.int32, torch.int64, torch.bool)}


def _tensor_entry(entry: object) -> bool:
    """A wire schema entry: {"shape": [...], "dtype": "float32"}, or (schema 1) a bare shape."""
    if isinstance(entry, dict) and set(entry) == {"shape", "dtype"}:
        return _tensor_entry(entry["shape"]) and entry["dtype"] in WIRE_DTYPES
    return isinstance(entry, list) and all(_nonneg_int(v) for v in entry)


def declared_tensor(entry: Any) -> tuple[list[int], torch.dtype | None]:
    """(shape, dtype) of a checked wire schema entry; dtype None: any floating point (schema 1)."""
    if isinstance(entry, dict):
        return entry["shape"], WIRE_DTYPES[entry["dtype"]]
    return entry, None


def _longest_string(value: Any) -> int:
    """The longest string (key or value) anywhere in a JSON value, without recursion."""
    longest, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            longest = max(longest, len(item))
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return longest


def _fields(path: Path, table: dict[str, Any], types: dict[str, type]) -> None:
    for key, kind in types.items():
        value = table.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise refuse(path, f"has no valid {key!r} ({kind.__name__} expected)")


def _positive_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _nonneg_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def check_index(path: Path, index: Any, files: Mapping[str, Any], num_clients: int) -> None:
    """Transcript index entries: types, a known client, and a listed round file."""
    if not isinstance(index, list):
        raise refuse(path, "is not a list of messages")
    for i, e in enumerate(index):
        ok = (isinstance(e, dict) and _nonneg_int(e.get("round")) and e.get("kind") in ("downlink", "uplink")
              and isinstance(e.get("file"), str) and ROUND_FILE.match(e["file"])
              and f"transcript/{e['file']}" in files and isinstance(e.get("tensors"), dict)
              and (e.get("samples") is None or _nonneg_int(e.get("samples"))))
        if not ok:
            raise refuse(path, f"has a malformed message entry #{i}")
        client = e.get("receiver") if e["kind"] == "downlink" else e.get("sender")
        if not (isinstance(client, int) and 0 <= client < num_clients):
            raise refuse(path, f"message #{i} names client {client!r}, not one of 0..{num_clients - 1}")


def check_payload(where: str, kind: str, payload: Mapping[str, torch.Tensor],
                  schema: Mapping[str, Any], finite: bool = True) -> None:
    """A recorded payload against the manifest's wire schema: names, shapes, dtypes, and
    (`finite`: unless the run says it diverged) finite values."""
    declared = schema.get(kind, {})
    for name, t in payload.items():
        if name not in declared:
            raise refuse(where, f"carries {name!r}, which the {kind} wire schema does not declare")
        shape, dtype = declared_tensor(declared[name])
        if list(t.shape) != list(shape):
            raise refuse(where, f"has {name!r} of shape {list(t.shape)}, the schema says {shape}")
        if dtype is None and not t.is_floating_point():
            raise refuse(where, f"has {name!r} of dtype {t.dtype}, not a floating-point tensor")
        if dtype is not None and t.dtype != dtype:
            raise refuse(where, f"has {name!r} of dtype {t.dtype}, the schema says {dtype}")
        if finite:
            check_finite(where, name, t)


def check_state(where: Path | str, state: Mapping[str, torch.Tensor], schema: Mapping[str, Any],
                finite: bool = True) -> None:
    """The server state against the wire schema: every tensor the downlink or uplink also
    carries has the shape declared there and, where the schema declares a floating-point dtype
    (the model's; secure aggregation's ring elements are the uplink's, never the server's), that
    dtype; every tensor is floating point and finite (a forged state would otherwise fail deep
    inside the model: a float64 state met the float32 inputs as "mat1 and mat2 must have the
    same dtype")."""
    declared = {**dict(schema.get("uplink", {})), **dict(schema.get("downlink", {}))}
    if declared and state and not set(state) & set(declared):
        raise refuse(where, "holds none of the tensors the wire schema declares")
    for name, t in state.items():
        shape, dtype = declared_tensor(declared[name]) if name in declared else (None, None)
        if shape is not None and list(t.shape) != list(shape):
            raise refuse(where, f"has {name!r} of shape {list(t.shape)}, the wire schema says {shape}")
        if not t.is_floating_point():
            raise refuse(where, f"has {name!r} of dtype {t.dtype}, not a floating-point tensor")
        if dtype is not None and dtype.is_floating_point and t.dtype != dtype:
            raise refuse(where, f"has {name!r} of dtype {t.dtype}, the wire schema says {dtype}")
        if finite:
            check_finite(where, name, t)


def check_dataset(path: Path, manifest: Mapping[str, Any], dataset: Any) -> None:
    """The dataset found on this machine is the one the run was trained on, as far as the
    manifest says: its input shape, classes and the size of its train split."""
    facts = manifest["dataset"]
    found = {"input_shape": list(dataset.input_shape), "num_classes": int(dataset.num_classes),
             "train_size": int(dataset.y_train.shape[0])}
    for key, value in found.items():
        if facts.get(key) != value:
            raise refuse(path, f"says dataset {facts.get('name')!r} has {key} {facts.get(key)}, but the dataset "
                               f"loaded here has {value}")


def check_finite(where: Path | str, name: str, t: torch.Tensor) -> None:
    """NaN or infinite weights: an attack on them measures nothing (a diverged run is refused
    from its manifest's flag; this catches one whose files say otherwise)."""
    if not t.is_floating_point() or bool(torch.isfinite(t.sum())):
        return  # a finite sum has no NaN or infinity in it (one sum: far cheaper than isfinite)
    if not bool(torch.isfinite(t).all()):  # the sum may overflow where every value is finite
        raise refuse(where, f"has {name!r} holding NaN or infinite values")


def check_partition(path: Path, parts: list[tuple[np.ndarray, np.ndarray]], discarded: np.ndarray,
                    train_size: int) -> None:
    """Every train-split index exactly once among the clients' train/test sets and the discarded."""
    arrays = [a for pair in parts for a in pair] + [discarded]
    if any(a.dtype.kind not in "iu" or a.ndim != 1 for a in arrays):
        raise refuse(path, "holds indices that are not 1-D integer arrays")
    every = np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
    if every.size and (every.min() < 0 or every.max() >= train_size):
        raise refuse(path, f"holds an index outside the training split 0..{train_size - 1}")
    counts = np.bincount(every, minlength=train_size)
    if (counts > 1).any():
        raise refuse(path, f"gives training sample {int(np.argmax(counts > 1))} to more than one place")
    if (counts == 0).any():
        raise refuse(path, f"leaves training sample {int(np.argmax(counts == 0))} unaccounted for")
