"""What the commands write by default, run in the checkout as the README runs them, is ignored
by git: the quickstart's 80 MB folder showed up as untracked files to commit."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import click
import pytest

from fedattack.commands.quickstart_cmd import quickstart_command
from fedattack.commands.report_cmd import report_command

ROOT = Path(__file__).resolve().parents[2]


def default_out(command: click.Command) -> str:
    return str(next(p for p in command.params if p.name == "out").default)


def ignored(path: str) -> bool:
    done = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT, capture_output=True)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
@pytest.mark.parametrize("path", [
    default_out(quickstart_command) + "/report/report.html",                 # `fedattack quickstart`
    default_out(report_command) + "/report.html",                            # `fedattack report`
    "experiments/quick-digits/report/report.html",                          # `fedattack experiment run`
    "runs/fedavg-digits-shards-s0/federation.json",                         # `fedattack train`
    "results/fedavg-digits-shards-s0/summary.json",                          # `fedattack evaluate`
    "report-sniffer/report.md",                                             # the README's examples
])
def test_default_outputs_are_ignored(path: str) -> None:
    assert ignored(path), f"{path} would show up in git status"


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
@pytest.mark.parametrize("path", ["fedattack/experiments/quick-digits.toml", "reports/build.py", "README.md"])
def test_the_sources_beside_them_are_not(path: str) -> None:
    assert not ignored(path)
