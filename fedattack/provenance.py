"""Which software made a run or a result, recorded in each and compared when work is reused.

An experiment's cells are addressed by their settings, not by the code that computed them
(`experiments/plan.py`), so a rerun after an upgrade reuses cells made by the old code, and a
report can mix both. Every manifest and result therefore records `software()`, the runner says
when it reuses cells made by other software, and the report names what made its numbers.

fedattack's version string alone does not change between commits of a checkout, so two things
are recorded beside it: the commit, where the package runs from a git work tree (an editable
install; read from `.git` without running git), and `code`, a digest of the package's own code
files (Python, C, bundled experiment files), which sees uncommitted edits too. Reuse is judged
by the digest where both records have one: a commit that changed only documentation does not
make a rerun warn, an uncommitted edit to the code does.
"""

from __future__ import annotations

import hashlib
import importlib.util
import platform
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import torch

import fedattack

FIELDS = ("fedattack", "commit", "torch", "python")
CODE_FILES = ("*.py", "*.c", "*.toml")  # what computes results; documentation does not
# packages installed from their own folders (pyproject's package-dir), besides fedattack's own
MAPPED_PACKAGES = ("fedattack.targets", "fedattack.attacks", "fedattack.reports")


@cache
def software() -> dict[str, str]:
    """fedattack's version, the digest of its code (and its commit, in a git checkout), torch's
    and Python's."""
    out = {"fedattack": fedattack.__version__, "code": code_digest(_package_folders()),
           "torch": torch.__version__, "python": platform.python_version()}
    commit = source_commit(Path(fedattack.__file__).resolve().parent.parent)
    return {**out, "commit": commit} if commit else out


def _package_folders() -> list[Path]:
    """fedattack's folder, and those of its packages installed from elsewhere in the source tree
    (in a wheel they sit inside it and are read once)."""
    main = Path(fedattack.__file__).resolve().parent
    folders = [main]
    for name in MAPPED_PACKAGES:
        found = importlib.util.find_spec(name)
        for place in (found.submodule_search_locations or []) if found else []:
            folder = Path(place).resolve()
            if not folder.is_relative_to(main):
                folders.append(folder)
    return folders


def code_digest(folders: Iterable[Path]) -> str:
    """The first 12 hex digits of SHA-256 over every code file under `folders` (path relative to
    its folder, then content), in sorted order, so it changes exactly when the code does."""
    digest = hashlib.sha256()
    for folder in folders:
        files = sorted({f for pattern in CODE_FILES for f in folder.rglob(pattern) if "__pycache__" not in f.parts})
        for path in files:
            digest.update(f"{folder.name}/{path.relative_to(folder).as_posix()}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def source_commit(root: Path) -> str | None:
    """The commit checked out at `root` (first 12 hex digits), or None where it is not a git
    work tree or its HEAD cannot be read."""
    git = root / ".git"
    try:
        if git.is_file():  # a linked worktree or submodule: "gitdir: <path>"
            text = git.read_text().strip()
            git = (root / text.removeprefix("gitdir:").strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return _hex(head)
        ref = head.removeprefix("ref:").strip()
        for base in (git, _common_dir(git)):
            if (base / ref).is_file():
                return _hex((base / ref).read_text().strip())
            packed = base / "packed-refs"
            if packed.is_file():
                for line in packed.read_text().splitlines():
                    if line.endswith(f" {ref}"):
                        return _hex(line.split()[0])
    except (OSError, UnicodeDecodeError):
        return None
    return None


def _common_dir(git: Path) -> Path:
    """A linked worktree keeps its branches in the main repository's folder."""
    pointer = git / "commondir"
    return (git / pointer.read_text().strip()).resolve() if pointer.is_file() else git


def _hex(text: str) -> str | None:
    return text[:12] if len(text) >= 12 and all(c in "0123456789abcdef" for c in text.lower()) else None


def describe(versions: Mapping[str, Any] | None) -> str:
    """One line, e.g. "fedattack 0.1.0 (commit 2540808a1b2c, code 9f86d081884c), torch 2.14.1,
    Python 3.11.7"."""
    if not versions:
        return "unrecorded software"
    marks = [f"{key} {versions[key]}" for key in ("commit", "code") if versions.get(key)]
    parts = [f"fedattack {versions.get('fedattack', '?')}" + (f" ({', '.join(marks)})" if marks else "")]
    parts += [f"{name} {versions[key]}" for key, name in (("torch", "torch"), ("python", "Python"))
              if versions.get(key)]
    return ", ".join(parts)


def comparable(versions: Mapping[str, Any] | None) -> tuple[str, ...]:
    """What must match for two cells to count as made by the same software: the code's digest
    where it was recorded (else the commit), and the versions."""
    versions = versions or {}
    if versions.get("code"):
        versions = {**versions, "commit": f"code {versions['code']}"}
    return tuple(str(versions.get(k, "")) for k in FIELDS)


Versions = Mapping[str, Any] | None


def recorded(value: object) -> Versions:
    """What a manifest's `versions` or a result's `extra.software` says, read from JSON: None
    where it is missing or not a mapping (files written before software was recorded)."""
    return value if isinstance(value, Mapping) else None


def made_elsewhere(value: object) -> bool:
    """Whether a recorded `software()` (as read from a file) is not this software's."""
    return comparable(recorded(value)) != comparable(software())


def distinct(records: Iterable[Versions]) -> dict[tuple[str, ...], tuple[Versions, int]]:
    """The different software among `records`, each with one example and how many made it."""
    seen: dict[tuple[str, ...], tuple[Versions, int]] = {}
    for versions in records:
        key = comparable(versions)
        example, count = seen.get(key, (versions, 0))
        seen[key] = (example, count + 1)
    return seen
