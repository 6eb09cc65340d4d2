"""The README's two commands for a fresh machine: the CPU-only PyTorch where PyTorch's index has
it, a fallback where it does not, and the size of each choice stated.

The trap this guards against: a CPU-only torch installed alone is replaced by PyPI's CUDA build
(about 4.5 GB more) when pip then installs PyPI's newest torchvision, which pins PyPI's newest
torch; torch and torchvision must come from the CPU index together."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


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


def test_both_commands_try_the_cpu_only_pair_first_and_fall_back() -> None:
    """The pair from the CPU index, checked by importing torchvision; on any failure what it
    installed is removed (a CPU torch beside a CUDA torchvision, as pip made on a machine whose
    own index offered both, fails every test), and fedattack's install goes on either way."""
    step = (r"\(\.venv/bin/pip install (?:-q )?(?:--retries \d )?torch torchvision " + re.escape(CPU_INDEX)
            + r" && \.venv/bin/python -c 'import torchvision' 2>/dev/null"
            + r" \|\| \.venv/bin/pip uninstall -q -y torch torchvision\) && \.venv/bin/pip install (?:-q )?-e ")
    for command in commands():
        assert re.search(step, command), f"no CPU-only torch + torchvision step with a fallback in: {command}"


def test_the_size_of_each_choice_is_stated() -> None:
    table = [line for line in section().splitlines() if line.startswith("| CPU-only") or line.startswith("| CUDA")]
    assert len(table) == 2
    for row in table:
        sizes = re.findall(r"\d+(?:\.\d+)? GB", row.split("|", 2)[2])
        assert len(sizes) == 2, row  # the main job's environment and the tests'
