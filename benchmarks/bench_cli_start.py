"""CPU seconds of the command line's start: `import fedattack.cli` (under `-X importtime`, whose
report is written out) and `fedattack evaluate --help`, each in a fresh process, beside
`fedattack --help` for scale. Issue #42 (7) asks for the first two together under 1 s of CPU on
a quiet 2-core machine; `evaluate --help` used to import every attack (torchvision through
`attacks/base.py`, about 4.5 s of CPU).

    .venv/bin/python benchmarks/bench_cli_start.py --runs 10

Prints each command's median, min and max CPU seconds (user + system, the operating system's
accounting of the finished child) over `--runs` runs after one warm-up, and the sum of the
first two medians.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
COMMANDS = {
    "import fedattack.cli (-X importtime)": [sys.executable, "-X", "importtime", "-c", "import fedattack.cli"],
    "fedattack evaluate --help": [str(BIN / "fedattack"), "evaluate", "--help"],
    "fedattack --help": [str(BIN / "fedattack"), "--help"],
}


def cpu_of(command: list[str]) -> float:
    """The child's user + system seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    medians = {}
    for label, command in COMMANDS.items():
        cpu_of(command)  # warm-up: the file system's caches
        runs = [cpu_of(command) for _ in range(args.runs)]
        medians[label] = statistics.median(runs)
        spread = f"min {min(runs):.3f}, max {max(runs):.3f}, n={args.runs}"
        print(f"{label:40s} median {medians[label]:.3f} s CPU ({spread})")
    first, second = list(medians.values())[:2]
    print(f"import + evaluate --help: {first + second:.3f} s CPU (target: under 1 s on a quiet 2-core machine); "
          f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
