"""An interrupt that third-party code swallows still stops the command (issue #13)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.neural_network import MLPClassifier

from fedattack.interrupts import honour_interrupts
from tests.hostile._cli import working


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


def test_ctrl_c_during_evaluate_exits_130_and_adds_nothing(fedavg_run: Path, tmp_path: Path) -> None:
    """The whole command: results are staged, so an interrupted evaluation leaves `--out` as it was."""
    out = tmp_path / "results"
    code = "import sys; from fedattack.cli import main; sys.argv = ['fedattack', *sys.argv[1:]]; main()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "evaluate", str(fedavg_run), "--attack", "membership",
         "--victim", "all", "--set", "shadows=32", "--out", str(out), "--quiet"],
        stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120  # a fixed sleep raced a fast CPU: the work was done first
    while not working(proc, tmp_path, ".results.partial-*"):  # wait until it has begun staging
        assert time.monotonic() < deadline, "the evaluation never began staging"
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert len(err.strip().splitlines()) == 1 and "interrupted" in err
    assert not out.exists() or not list(out.glob("*.json"))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging, no lock

