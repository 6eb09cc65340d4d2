"""Safe tensor and JSON files: atomic writes, checksums, and loads that never run code."""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import Any

import torch

from fedattack import atomic, jsonfile
from fedattack.registry import UserError


def save_tensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Save a flat dict of tensors (contiguous clones, so views do not drag their bases), atomically."""
    atomic.save_tensors(path, {k: v.detach().contiguous().clone() for k, v in tensors.items()})


ZIP_MAGIC = b"PK\x03\x04"  # what `torch.save` writes (a zip archive); a bare pickle is not one


def load_tensors(path: Path) -> dict[str, torch.Tensor]:
    """Load tensors with `weights_only=True`: a file carrying a pickled object is refused.

    A file that is not the zip archive `torch.save` writes (a raw pickle) is refused before
    torch reads it, and torch's own warnings about what it reads (a pickle protocol it did not
    expect) are kept off the user's terminal: the refusal is the one line they see."""
    try:
        with path.open("rb") as fh:
            magic = fh.read(len(ZIP_MAGIC))
        if magic != ZIP_MAGIC:
            raise UserError(f"refusing to load {path}: it is not a tensor file torch.save wrote (a raw pickle, "
                            "or another format); re-create the run directory")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise UserError(f"{path} is missing; the run directory is incomplete, train it again") from None
    except UserError:
        raise
    except Exception as exc:  # torch raises many types for corrupt or unsafe files
        reason = "it holds objects other than tensors" if "weights_only" in str(exc) else "it is corrupt or truncated"
        raise UserError(f"refusing to load {path}: {reason}; re-create the run directory") from None
    if not isinstance(data, dict) or not all(isinstance(v, torch.Tensor) for v in data.values()):
        raise UserError(f"refusing to load {path}: it is not a dict of tensors")
    return data


def write_json(path: Path, data: Any) -> None:
    atomic.write_json(path, data, indent=1)


def read_json(path: Path, max_bytes: int | None = None) -> Any:
    """A run directory's JSON file (bounded and checked: `fedattack.jsonfile`)."""
    return jsonfile.read_json(path, "is this a fedattack run directory?",
                              "the run directory is corrupt, train it again", max_bytes)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def checksums(root: Path) -> dict[str, dict[str, Any]]:
    """Size and SHA-256 of every file under `root` (the manifest's integrity record)."""
    out = {}
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        out[f.relative_to(root).as_posix()] = {"bytes": f.stat().st_size, "sha256": sha256(f)}
    return out


def verify(root: Path, files: dict[str, dict[str, Any]], deep: bool = True) -> None:
    """Refuse a run directory whose files are missing, truncated or altered."""
    for rel, info in files.items():
        f = root / rel
        if not f.is_file():
            raise UserError(f"{f} is missing; the run directory is incomplete, train it again")
        if f.stat().st_size != info["bytes"]:
            raise UserError(f"{f} has the wrong size (truncated or altered); train the run again")
        if deep and sha256(f) != info["sha256"]:
            raise UserError(f"{f} does not match its checksum (corrupt or altered); train the run again")

