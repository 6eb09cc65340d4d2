"""The README's two commands for a fresh machine, and `install.py`, which both run first.

The traps this guards against: a CPU-only torch installed alone is replaced by PyPI's CUDA build
(about 5 GB more) when pip then installs PyPI's newest torchvision; and pip, given several
indexes, pairs a CPU torch with a torchvision built for another, which fails on import. So the
pair comes from PyTorch's CPU index together and is kept only if it is a CPU build that imports;
otherwise both go, the reason is printed, and the install says at the end which torch it got.
`install.py`'s decisions are checked here with pip and the import check replaced by fakes (a
test never downloads).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Two commands for a fresh machine")
    return text[start:text.index("\n## ", start + 1)]


def commands() -> list[str]:
    return [line.strip() for line in section().splitlines() if line.startswith("    python3 -m venv")]


def test_exactly_two_commands_and_the_test_command_where_ci_reads_it() -> None:
    main_job, tests = commands()
    assert main_job.endswith("fedattack quickstart")
    lines = README.read_text(encoding="utf-8").splitlines()
    marker = lines.index("<!-- test-command -->")
    assert lines[marker + 2].strip() == tests and tests.endswith("python -m pytest -q")  # .ci/run's awk


def test_both_commands_install_through_install_py_in_the_new_environment() -> None:
    for command in commands():
        assert re.match(r"python3 -m venv \.venv && \.venv/bin/python install\.py( [a-z,]+)?( -q)? && ", command), \
            command
    extras = re.search(r"install\.py ([a-z,]+)", commands()[1])
    assert extras is not None
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for extra in extras.group(1).split(","):
        assert re.search(rf"^{extra} = \[", pyproject, re.M), f"no extra {extra!r} in pyproject.toml"


def test_the_size_of_each_choice_is_stated() -> None:
    table = [line for line in section().splitlines() if line.startswith("| CPU-only") or line.startswith("| CUDA")]
    assert len(table) == 2
    for row in table:
        sizes = re.findall(r"\d+(?:\.\d+)? GB", row.split("|", 2)[2])
        assert len(sizes) == 2, row  # the main job's environment and the tests'


@pytest.fixture
def install() -> ModuleType:
    spec = importlib.util.spec_from_file_location("install_script", ROOT / "install.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakePython:
    """Stands in for `subprocess.run`: pip answers `pip_rc` with `pip_out`; the import check prints
    `versions` or fails with `import_error`. Every command is kept."""

    def __init__(self, pip_rc: int = 0, pip_out: str = "", versions: str = '["2.13.0+cpu", "0.28.0+cpu", null]',
                 import_error: str = "") -> None:
        self.pip_rc, self.pip_out, self.versions, self.import_error = pip_rc, pip_out, versions, import_error
        self.calls: list[list[str]] = []

    def __call__(self, cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(cmd)
        if cmd[1] == "-c":
            if self.import_error:
                return subprocess.CompletedProcess(cmd, 1, "", f"Traceback ...\n{self.import_error}\n")
            return subprocess.CompletedProcess(cmd, 0, self.versions + "\n", "")
        rc = self.pip_rc if "install" in cmd and "--index-url" in cmd else 0
        return subprocess.CompletedProcess(cmd, rc, self.pip_out, "")

    def uninstalled(self) -> bool:
        return any("uninstall" in c and "torch" in c and "torchvision" in c for c in self.calls)


def run_pair(install: ModuleType, monkeypatch: pytest.MonkeyPatch, fake: FakePython) -> str:
    monkeypatch.setattr(install.subprocess, "run", fake)
    return str(install.cpu_pair(quiet=True))


def test_a_cpu_pair_that_imports_is_kept(install: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePython()
    assert run_pair(install, monkeypatch, fake) == ""
    first = fake.calls[0]
    assert first[:4] == [sys.executable, "-m", "pip", "install"] and "torch" in first and "torchvision" in first
    assert first[first.index("--index-url") + 1] == install.CPU_INDEX and not fake.uninstalled()


def test_an_unreachable_index_is_said_in_pips_words(install: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    out = "Looking in indexes: ...\nERROR: Could not find a version that satisfies the requirement torchvision\n"
    fake = FakePython(pip_rc=1, pip_out=out)
    why = run_pair(install, monkeypatch, fake)
    assert "Could not find a version that satisfies the requirement torchvision" in why and fake.uninstalled()


def test_a_pair_that_does_not_import_together_is_removed_with_its_error(
        install: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePython(import_error="RuntimeError: operator torchvision::nms does not exist")
    why = run_pair(install, monkeypatch, fake)
    assert "does not import together (RuntimeError: operator torchvision::nms does not exist)" in why
    assert fake.uninstalled()


def test_a_cuda_build_is_not_kept_as_the_cpu_one(install: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePython(versions='["2.14.1+cu130", "0.29.1+cu130", "13.0"]')
    assert "a CUDA 13.0 build" in run_pair(install, monkeypatch, fake) and fake.uninstalled()


def test_the_last_line_says_which_torch_and_why(install: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install.subprocess, "run", FakePython(versions='["2.14.1+cu130", "0.29.1+cu130", "13.0"]'))
    line = install.summary("pip could not install the pair from it (no wheel)")
    assert line.startswith("fedattack install: torch 2.14.1+cu130 (a CUDA 13.0 build") and "torchvision 0.29.1" in line
    assert "because PyTorch's CPU index was not used: pip could not install the pair from it (no wheel)" in line
    assert re.search(r"takes \d+\.\d GB\.$", line)
    monkeypatch.setattr(install.subprocess, "run", FakePython())
    assert "(the CPU-only build) and torchvision 0.28.0+cpu, from PyTorch's CPU index." in install.summary("")
