"""`fedattack evaluate --backend/--workers/--address` (issue #47): every bad combination is one
line and a non-zero exit before anything is started or written, and the user's folder (a run
directory among their own files) is left as it was."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest

from tests.hostile._cli import Workspace, refused


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


CASES = [
    (("--backend", "nope"), ("unknown backend 'nope'", "local")),
    (("--backend", "local", "--address", "127.0.0.1:6379"), ("needs --backend ray",)),
    (("--backend", "local", "--workers", "0"), ("--workers", "0")),
    (("--backend", "ray", "--workers", "-1"), ("--workers",)),
    (("--workers", "2"), ("--backend local",)),
    (("--address", "auto"), ("--backend ray",)),
    (("--backend", "ray", "--address", "nowhere"), ("HOST:PORT",)),
]


@pytest.mark.parametrize(("extra", "words"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_bad_backend_option_is_one_line_and_changes_nothing(ws: Workspace, run: Path, extra: tuple[str, ...],
                                                              words: tuple[str, ...]) -> None:
    ws.seal()
    refused(ws.fedattack("evaluate", "run", "--out", "results", "--quiet", *extra), *words)
    ws.unchanged()


def test_ray_missing_is_one_line_naming_the_extra(ws: Workspace, run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as where it is not installed
    ws.seal()
    refused(ws.fedattack("evaluate", "run", "--out", "results", "--backend", "ray"), "needs Ray", "fedattack[ray]")
    ws.unchanged()


def test_a_ray_address_where_nothing_listens_fails_fast(ws: Workspace, run: Path) -> None:
    pytest.importorskip("ray")
    ws.seal()
    started = time.perf_counter()
    refused(ws.fedattack("evaluate", "run", "--out", "results", "--backend", "ray", "--address",
                         f"127.0.0.1:{_free_port()}", "--quiet"), "no Ray cluster answers")
    assert time.perf_counter() - started < 60
    ws.unchanged()


def test_workers_on_the_sequential_backend_are_refused_not_ignored(ws: Workspace, run: Path) -> None:
    """`--backend sequential --workers 3` ran one victim at a time and said nothing of the 3 (#43)."""
    ws.seal()
    refused(ws.fedattack("evaluate", "run", "--out", "results", "--quiet", "--backend", "sequential",
                         "--workers", "3"), "--workers 3", "sequential backend")
    ws.unchanged()
