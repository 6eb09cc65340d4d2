"""Sweeps (issue #39): grids too large, duplicate cells, an output folder of the user's own,
a Ray address where nothing listens, a damaged finished cell, and a killed command's workers.

Each refusal is one line through the real `fedattack` entry point, before anything is written;
the positive cases check what the sweep did (one folder per distinct cell, the damaged cell set
aside and trained again, no worker left running).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from tests.hostile._cli import Outcome, Workspace, log, refused, spawn, working

FEDERATION = '[[federation]]\nmethod = "fedavg"\ndataset = "digits"\nrounds = 1\nclients = 4\nepochs = 1\n'
EVALUATION = ('[[evaluation]]\nthreat-models = ["eavesdropper"]\nattacks = ["membership"]\nvictims = [0]\n'
              'max-queries = 20\naux-size = 100\neval-size = 0\n[evaluation.settings]\nclassifier = "logreg"\n')
TEN = ", ".join(str(v) for v in range(1, 11))
BILLION = (FEDERATION.replace("method = \"fedavg\"", "method = \"fedprox\"").replace("rounds = 1\n", "")
           .replace("clients = 4\n", "").replace("epochs = 1\n", "")
           + "[federation.grid]\n" + "".join(f"{key} = [{TEN}]\n" for key in
                                             ("rounds", "clients", "epochs", "batch-size", "eval-every", "seeds"))
           + "lr = [" + ", ".join(f"0.0{v}" for v in range(1, 10)) + ", 0.1]\n"
           + "fraction = [" + ", ".join(f"0.{v}" for v in range(1, 10)) + ", 1.0]\n"
           + "\"hyper.mu\" = [" + ", ".join(f"{v}.5" for v in range(10)) + "]\n")

TOO_MANY = {
    "grid-of-a-billion-cells": (BILLION, [], "1,000,000,000 cells"),
    "federations-above-max-cells": (FEDERATION.replace("clients = 4\n", "clients = 4\nseeds = [0, 1, 2, 3]\n"),
                                    ["--max-cells", "3"], "--max-cells 4"),
    "grid-above-max-cells": (FEDERATION + '[federation.grid]\nlr = [0.1, 0.2]\nbatch-size = [8, 16]\n',
                             ["--max-cells", "3"], "--max-cells 4"),
    "evaluations-above-max-cells": (FEDERATION + EVALUATION.replace("max-queries = 20\n", "seeds = [0, 1, 2, 3]\n"),
                                    ["--max-cells", "3"], "--max-cells 4"),
}


@pytest.mark.parametrize("content, extra, words", TOO_MANY.values(), ids=TOO_MANY.keys())
def test_a_sweep_too_large_is_refused_before_anything_is_made(ws: Workspace, content: str, extra: list[str],
                                                               words: str) -> None:
    (ws.root / "mine.toml").write_text(content)
    ws.seal()
    started = time.perf_counter()
    refused(ws.fedattack("experiment", "run", "mine.toml", "--out", "exp", "--quiet", "--no-report", *extra),
            words, "--max-cells")
    assert time.perf_counter() - started < 60  # counted, not materialised (it grew to 6 GB before)
    ws.unchanged()


def _users_experiment_folder(ws: Workspace) -> None:
    mine = ws.root / "mine"
    (mine / "report").mkdir(parents=True)
    (mine / "experiment.toml").write_text("# my own notes on an experiment\n")
    (mine / "sweep.json").write_text('{"my": "sweep of a parameter, by hand"}')
    (mine / "report" / "report.md").write_text("# my report\n")


BAD_OUT = {
    "out-users-folder-with-experiment-toml-sweep-json-report": (["--out", "mine"], "did not write", 2),
    "out-users-folder-of-theses": (["--out", "thesis"], "did not write", 2),
    "out-current-directory": (["--out", "."], "current directory", 2),
    "out-parent-directory": (["--out", ".."], "current directory", 2),
    "out-is-a-file": (["--out", "notes.txt"], "notes.txt", 2),
}


@pytest.mark.parametrize("extra, words, code", BAD_OUT.values(), ids=BAD_OUT.keys())
def test_experiment_run_never_writes_into_a_users_folder(ws: Workspace, extra: list[str], words: str,
                                                         code: int) -> None:
    (ws.root / "exp.toml").write_text(FEDERATION)
    _users_experiment_folder(ws)
    ws.seal()
    refused(ws.fedattack("experiment", "run", "exp.toml", "--quiet", *extra), words, code=code)
    ws.unchanged()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_ray_address_where_nothing_listens_fails_fast_and_leaves_nothing(ws: Workspace) -> None:
    pytest.importorskip("ray")
    (ws.root / "exp.toml").write_text(FEDERATION)
    ws.seal()
    started = time.perf_counter()
    refused(ws.fedattack("experiment", "run", "exp.toml", "--out", "exp", "--backend", "ray", "--address",
                         f"127.0.0.1:{_free_port()}", "--quiet"), "no Ray cluster answers")
    assert time.perf_counter() - started < 60  # it hung past two minutes
    ws.unchanged()  # no lock, no experiment.toml copy


def test_an_integer_setting_written_as_a_float_is_refused(ws: Workspace) -> None:
    """shadows = [1, 1.0] ran twice: 1.0 is not a count of shadow models, so it is refused by name."""
    evaluation = EVALUATION.replace("[evaluation.settings]\n", "[evaluation.grid]\n\"settings.shadows\" = [1, 1.0]\n"
                                    "[evaluation.settings]\n")
    (ws.root / "exp.toml").write_text(FEDERATION + evaluation)
    ws.seal()
    refused(ws.fedattack("experiment", "run", "exp.toml", "--out", "exp", "--quiet"), "shadows", "1.0")
    ws.unchanged()


def test_duplicate_cells_run_once(ws: Workspace) -> None:
    """mu = [1, 1.0] and two identical [[evaluation]] entries: one federation, one evaluation (they
    trained one federation into two folders, or collided on one folder under two workers)."""
    fedprox = FEDERATION.replace('"fedavg"', '"fedprox"') + '[federation.grid]\n"hyper.mu" = [1, 1.0]\n'
    evaluation = EVALUATION.replace("[evaluation.settings]\n", "[evaluation.settings]\nshadows = 1\n")
    (ws.root / "exp.toml").write_text(fedprox + evaluation + evaluation)
    done = ws.fedattack("experiment", "run", "exp.toml", "--out", "exp", "--quiet", "--no-report",
                        "--backend", "sequential")
    assert done.code == 0, done.err
    assert len(list((ws.root / "exp" / "runs").iterdir())) == 1
    assert len(list((ws.root / "exp" / "results").glob("*/*"))) == 1
    assert "trained 1 federation(s)" in done.out and "ran 1 evaluation(s)" in done.out
    cells = json.loads((ws.root / "exp" / "sweep.json").read_text())["cells"]
    assert len(cells) == 2


def test_a_finished_cell_damaged_on_disk_is_set_aside_and_trained_again(ws: Workspace) -> None:
    (ws.root / "exp.toml").write_text(FEDERATION)
    args = ("experiment", "run", "exp.toml", "--out", "exp", "--quiet", "--no-report", "--backend", "sequential")
    assert ws.fedattack(*args).code == 0
    (run,) = (ws.root / "exp" / "runs").iterdir()
    server = run / "server.pt"
    raw = bytearray(server.read_bytes())
    raw[len(raw) // 2] ^= 1
    server.write_bytes(bytes(raw))  # one flipped byte: same size, another checksum
    done = ws.fedattack(*args)
    assert done.code == 0 and "trained 1 federation(s) (reused 0)" in done.out, done.out + done.err
    assert "does not match its checksums" in done.out and "damaged" in done.out
    assert (ws.root / "exp" / "damaged" / run.name / "server.pt").read_bytes() == bytes(raw)  # kept to look at
    again = ws.fedattack(*args)  # and the retrained cell is reused from now on
    assert again.code == 0 and "reused 1" in again.out, again.out


def _children(pid: int) -> set[int]:
    """Processes whose parent is `pid` (from /proc/*/stat: field 4 is the parent's pid)."""
    found: set[int] = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


def test_a_killed_experiment_leaves_no_worker_running(ws: Workspace) -> None:
    """`experiment run` killed with SIGKILL: its spawned workers exit by themselves (they went on)."""
    if not Path("/proc/self/task").is_dir():
        pytest.skip("needs Linux's /proc to find the workers")
    long = FEDERATION.replace("rounds = 1\n", "rounds = 100000\nseeds = [0, 1]\n")
    (ws.root / "exp.toml").write_text(long)
    proc = spawn("experiment", "run", "exp.toml", "--out", "exp", "--quiet", "--workers", "2", cwd=ws.root)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 240
        while len(list((ws.root / "exp" / "runs").glob(".*partial*"))) < 2:
            assert time.monotonic() < deadline, "the two cells never started"
            working(proc, ws.root, "exp*")
            time.sleep(0.1)
        deadline = time.monotonic() + 30
        while not (workers := _children(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert workers, "no worker process found"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [p for p in workers if _alive(p)]
    finally:  # whatever happened, nothing of this test keeps running
        for pid in [proc.pid, *workers]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
    assert not left, f"worker(s) {left} outlived the killed command by 30 s"
    log(Outcome(("experiment", "run", "exp.toml", "--out", "exp", "--quiet", "--workers", "2", "(then SIGKILL)"),
                -9, "", ""), f"its {len(workers)} worker process(es) exited by themselves within 30 s")
