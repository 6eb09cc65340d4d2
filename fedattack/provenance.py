"""Which software made a run or a result, recorded in each and compared when work is reused.

An experiment's cells are addressed by their settings, not by the code that computed them
(`experiments/plan.py`), so a rerun after an upgrade reuses cells made by the old code, and a
report can mix both. Every manifest and result therefore records `software()`, the runner says
when it reuses cells made by other software, and the report names what made its numbers.

fedattack's version string alone does not change between commits of a checkout, so where the
package runs from a git work tree (an editable install) the commit is recorded too, read from
`.git` without running git. Uncommitted edits are not visible this way.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import torch

import fedattack

FIELDS = ("fedattack", "commit", "torch", "python")


@cache
def software() -> dict[str, str]:
    """fedattack's version (and its commit, in a git checkout), torch's and Python's."""
    out = {"fedattack": fedattack.__version__, "torch": torch.__version__,
           "python": platform.python_version()}
    commit = source_commit(Path(fedattack.__file__).resolve().parent.parent)
    return {**out, "commit": commit} if commit else out


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
    """One line, e.g. "fedattack 0.1.0 (commit 2540808a1b2c), torch 2.14.1, Python 3.11.7"."""
    if not versions:
        return "unrecorded software"
    parts = [f"fedattack {versions.get('fedattack', '?')}"
             + (f" (commit {versions['commit']})" if versions.get("commit") else "")]
    parts += [f"{name} {versions[key]}" for key, name in (("torch", "torch"), ("python", "Python"))
              if versions.get(key)]
    return ", ".join(parts)


def comparable(versions: Mapping[str, Any] | None) -> tuple[str, ...]:
    """What must match for two cells to count as made by the same software."""
    versions = versions or {}
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
