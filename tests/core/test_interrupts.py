"""An interrupt that third-party code swallows still stops the command (issue #13)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.neural_network import MLPClassifier

from fedattack.interrupts import honour_interrupts


def _soon(signum: int, delay: float = 0.3) -> threading.Timer:
    timer = threading.Timer(delay, os.kill, (os.getpid(), signum))
    timer.start()
    return timer


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_swallowed_interrupt_is_raised_when_the_block_ends(signum: int) -> None:
    with pytest.raises(KeyboardInterrupt):
        with honour_interrupts():
            try:
                os.kill(os.getpid(), signum)
            except KeyboardInterrupt:
                pass  # what scikit-learn's MLP does
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_scikit_learns_mlp_fit_no_longer_hides_ctrl_c() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(4000, 50)), rng.integers(0, 2, 4000)
    clf = MLPClassifier((256, 256), max_iter=10_000, tol=0.0, n_iter_no_change=10_000, random_state=0)
    timer = _soon(signal.SIGINT)
    try:
        with warnings.catch_warnings(record=True) as caught, pytest.raises(KeyboardInterrupt):
            warnings.simplefilter("always")
            with honour_interrupts():
                clf.fit(x, y)
    finally:
        timer.cancel()
    assert any("interrupted" in str(w.message) for w in caught)  # scikit-learn did swallow it


def test_no_interrupt_no_exception() -> None:
    with honour_interrupts():
        total = sum(range(10))
    assert total == 45


EVALUATE = ["--attack", "membership", "--set", "shadows=4", "--set", "classifier=logreg", "--aux-size", "200",
            "--eval-size", "0", "--max-queries", "60", "--quiet"]
CODE = "import sys; from fedattack.cli import main; sys.argv = ['fedattack', *sys.argv[1:]]; main()"


def _evaluate(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CODE, "evaluate", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _marker(out: Path) -> dict[str, Any]:
    try:
        return json.loads((out / "incomplete.json").read_text())
    except (OSError, ValueError):
        return {}


def _kept(folder: Path) -> dict[str, dict[str, Any]]:
    """Each result's numbers (what does not depend on the clock or the folder)."""
    out = {}
    for path in folder.glob("*-victim*.json"):
        r = json.loads(path.read_text())
        out[path.name] = {"metrics": r["metrics"], "per_query": r["extra"].get("membership", {}).get("per_query")}
    return out


def test_ctrl_c_after_the_first_victim_keeps_it_and_resume_finishes_the_rest(fedavg_run: Path, tmp_path: Path) -> None:
    """Issue #49: a real SIGINT once the first victim's results are published; they stay, the
    folder says it is incomplete, `report` says what is missing, and --resume finishes the
    rest without rewriting the first victim's result."""
    out = tmp_path / "results"
    victims = ["--victim", "1", "--victim", "2", "--victim", "4", "--victim", "5"]
    proc = _evaluate(str(fedavg_run), *victims, *EVALUATE, "--out", str(out))
    deadline = time.monotonic() + 900  # a bound, not a wait: a loaded CI machine is slow to its first victim
    while not _marker(out).get("done"):
        assert proc.poll() is None, "the evaluation ended before its first victim was published"
        assert time.monotonic() < deadline, "no victim was published"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    line = err.strip()
    assert len(line.splitlines()) == 1 and "interrupted" in line and "kept" in line and "--resume" in line, line
    marker = _marker(out)
    assert marker["status"] == "interrupted" and marker["done"] and marker["missing"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging, no lock
    first = {p.name: p.read_bytes() for p in out.glob("*-victim*.json")}
    assert first and not (out / "summary.json").exists()

    from click.testing import CliRunner

    from fedattack.cli import cli
    reported = CliRunner().invoke(cli, ["report", str(out), "-o", str(tmp_path / "report"), "--no-figures"])
    assert reported.exit_code == 0, reported.output
    missing = ", ".join(map(str, marker["missing"]))
    assert f"missing victim(s) {missing}" in " ".join(reported.output.split())

    resumed = _evaluate(str(fedavg_run), *victims, *EVALUATE, "--out", str(out), "--resume")
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    assert {p.name: p.read_bytes() for p in out.glob("*-victim*.json") if p.name in first} == first
    assert not (out / "incomplete.json").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(summary["results"]) == sorted(p.name for p in out.glob("*-victim*.json"))
    assert {r.split("victim")[1] for r in summary["results"]} == {"1.json", "2.json", "4.json", "5.json"}

    whole = _evaluate(str(fedavg_run), *victims, *EVALUATE, "--out", str(tmp_path / "whole"))
    _, err = whole.communicate(timeout=300)
    assert whole.returncode == 0, err
    assert _kept(out) == _kept(tmp_path / "whole")  # the same numbers as an evaluation never interrupted
