"""What made a run is recorded, read back without running git, and compared on reuse."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import fedattack
from fedattack.provenance import (
    _package_folders,
    code_digest,
    comparable,
    describe,
    distinct,
    software,
    source_commit,
)

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_commit_of_a_branch_a_packed_ref_and_a_detached_head(tmp_path: Path) -> None:
    git = tmp_path / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    assert source_commit(tmp_path) is None  # the branch has no commit yet
    (git / "packed-refs").write_text(f"# pack-refs with: peeled\n{COMMIT} refs/heads/main\n")
    assert source_commit(tmp_path) == COMMIT[:12]
    (git / "refs" / "heads" / "main").write_text("f" * 40 + "\n")  # a loose ref wins over the pack
    assert source_commit(tmp_path) == "f" * 12
    (git / "HEAD").write_text(COMMIT + "\n")
    assert source_commit(tmp_path) == COMMIT[:12]
    (git / "HEAD").write_text("not a commit\n")
    assert source_commit(tmp_path) is None


def test_commit_of_a_linked_worktree(tmp_path: Path) -> None:
    main = tmp_path / "repo" / ".git"
    (main / "refs" / "heads").mkdir(parents=True)
    (main / "refs" / "heads" / "topic").write_text(COMMIT)
    linked = main / "worktrees" / "wt"
    linked.mkdir(parents=True)
    (linked / "HEAD").write_text("ref: refs/heads/topic\n")
    (linked / "commondir").write_text("../..\n")
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / ".git").write_text(f"gitdir: {linked}\n")
    assert source_commit(tree) == COMMIT[:12]


def test_no_git_no_commit(tmp_path: Path) -> None:
    assert source_commit(tmp_path) is None


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_this_checkout_is_what_git_says() -> None:
    root = Path(fedattack.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        pytest.skip("fedattack is not running from a git checkout")
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert software()["commit"] == head[:12]


def test_describe_and_group() -> None:
    a = {"fedattack": "0.1.0", "commit": "abc123abc123", "torch": "2.5.0", "python": "3.11.7"}
    b = {**a, "commit": "def456def456"}
    assert describe(a) == "fedattack 0.1.0 (commit abc123abc123), torch 2.5.0, Python 3.11.7"
    assert describe({**a, "code": "0f0f0f0f0f0f"}) == \
        "fedattack 0.1.0 (commit abc123abc123, code 0f0f0f0f0f0f), torch 2.5.0, Python 3.11.7"
    assert describe(None) == "unrecorded software"
    assert comparable(a) != comparable(b)
    groups = distinct([a, b, dict(a), None])
    assert [count for _, count in groups.values()] == [2, 1, 1]


def test_reuse_is_judged_by_the_code_not_the_commit() -> None:
    """A commit that changed only documentation leaves the code's digest, and so reuse, alone;
    a record without a digest (older files) counts as other software."""
    a = {"fedattack": "0.1.0", "commit": "abc123abc123", "code": "0f0f0f0f0f0f", "torch": "2.5.0", "python": "3.11.7"}
    assert comparable(a) == comparable({**a, "commit": "def456def456"})
    assert comparable(a) != comparable({**a, "code": "1e1e1e1e1e1e"})
    assert comparable(a) != comparable({k: v for k, v in a.items() if k != "code"})
    assert comparable(a) != comparable({**a, "torch": "2.6.0"})


def test_code_digest_follows_code_files_only(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "step.c").write_text("void f(void) {}\n")
    first = code_digest([pkg])
    (pkg / "README.md").write_text("notes\n")
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "a.py").write_text("compiled\n")
    assert code_digest([pkg]) == first  # documentation and caches are not code
    (pkg / "sub" / "step.c").write_text("void f(void) { }\n")
    assert code_digest([pkg]) != first
    (pkg / "sub" / "step.c").write_text("void f(void) {}\n")
    (pkg / "sub" / "a.py").write_text("x = 1\n")  # the same content elsewhere is another file
    assert code_digest([pkg]) != first
    assert software()["code"] == code_digest(_package_folders())
