"""Issue #42 (9): `fedattack` refuses, in one line, to start with its core from one checkout and
its targets/attacks/reports from another (a second checkout run with the first one's environment
found its core in the working folder and the rest through the environment's install)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import fedattack

CODE = "import sys; from fedattack.cli import main; sys.argv = ['fedattack', '--version']; main()"


def run_in(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CODE], cwd=folder, capture_output=True, text=True, timeout=120)


def test_a_core_from_another_checkout_is_refused_in_one_line(tmp_path: Path) -> None:
    other = tmp_path / "second-checkout"
    shutil.copytree(Path(fedattack.__file__).parent, other / "fedattack", ignore=shutil.ignore_patterns("__pycache__"))
    mixed = run_in(other)  # `python -c` puts the working folder first: its fedattack/ is the core
    assert mixed.returncode == 2, mixed.stderr
    line = mixed.stderr.strip()
    assert len(line.splitlines()) == 1 and "two checkouts are mixed" in line
    assert str(other) in line and str(Path(fedattack.__file__).parents[1]) in line
    alone = run_in(tmp_path)  # nothing shadows the installed one
    assert alone.returncode == 0 and "version" in alone.stdout, alone.stderr
