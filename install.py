"""Install fedattack into the virtual environment that runs this script, and say which PyTorch it got.

    .venv/bin/python install.py [EXTRAS] [-q]        e.g. install.py test,dp,flower,ray -q

fedattack runs on the CPU unless told otherwise, but PyPI's torch for Linux x86_64 is the CUDA
build (about 5 GB more). So first the CPU-only pair, torch and torchvision together, from PyTorch's
own index; the pair is kept only if it is a CPU build and torchvision imports beside it (each
torchvision release is built for one torch release; pip, given other indexes too, can mix a CPU
torch with a torchvision built for another). Otherwise both are removed, the reason is printed,
and `pip install -e .` takes torch from your own index. At the end: which torch was installed, from
where and why, and how large the environment is.

Plain Python and pip only: this runs before anything else is installed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PAIR = ("torch", "torchvision")
CHECK = ("import json, torch, torchvision; print(json.dumps([torch.__version__, torchvision.__version__, "
         "torch.version.cuda]))")
TAG = "fedattack install:"


def pip(*args: str, quiet: bool, capture: bool = False) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pip", *args, *(["-q"] if quiet else [])]
    return subprocess.run(cmd, text=True, capture_output=capture, check=False)


def installed() -> tuple[list[str | None] | None, str]:
    """([torch, torchvision, cuda] versions, '') if the pair imports, else (None, the error's last line)."""
    done = subprocess.run([sys.executable, "-c", CHECK], text=True, capture_output=True, check=False)
    if done.returncode != 0:
        lines = [x for x in done.stderr.strip().splitlines() if x.strip()]
        return None, lines[-1].strip() if lines else f"exit status {done.returncode}"
    import json

    return json.loads(done.stdout.strip().splitlines()[-1]), ""


def pip_reason(output: str) -> str:
    """pip's own words for why the install failed: its first error line (the unreachable host, the
    missing wheel), else its last line."""
    lines = [x.strip() for x in output.splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("ERROR:")]
    return (errors[0] if errors else lines[-1] if lines else "no output").removeprefix("ERROR: ")[:300]


def cpu_pair(quiet: bool) -> str:
    """Install the CPU-only pair from PyTorch's index; '' if kept, else why it was not."""
    print(f"{TAG} trying PyTorch's CPU-only build, torch and torchvision together, from {CPU_INDEX}", flush=True)
    done = pip("install", "--retries", "1", "--timeout", "20", *PAIR, "--index-url", CPU_INDEX, quiet=quiet,
               capture=True)
    versions, error = installed() if done.returncode == 0 else (None, "")
    if done.returncode != 0:
        why = f"pip could not install the pair from it ({pip_reason(done.stdout + done.stderr)})"
    elif versions is None:
        why = f"the pair pip installed does not import together ({error})"
    elif versions[2] is not None:
        why = f"pip installed torch {versions[0]}, a CUDA {versions[2]} build, not the CPU-only one"
    else:
        return ""
    pip("uninstall", "-y", *PAIR, quiet=True, capture=True)  # together or not at all
    return why


def size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += (Path(root) / name).lstat().st_size
            except OSError:
                pass
    return total


def summary(not_cpu: str) -> str:
    versions, error = installed()
    if versions is None:
        return f"{TAG} torch and torchvision do not import after the install: {error}"
    torch, vision, cuda = versions
    build = "the CPU-only build" if cuda is None else f"a CUDA {cuda} build, which runs on the CPU too"
    where = ("from PyTorch's CPU index" if not not_cpu else
             f"from your own package index, because PyTorch's CPU index was not used: {not_cpu}")
    env = Path(sys.prefix)
    if env.is_relative_to(Path.cwd()):
        env = env.relative_to(Path.cwd())
    return (f"{TAG} torch {torch} ({build}) and torchvision {vision}, {where}. The environment {env} takes "
            f"{size(env) / 1e9:.1f} GB.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("extras", nargs="?", default="", help="fedattack's extras, comma-separated (test,dp,...)")
    parser.add_argument("-q", "--quiet", action="store_true", help="pip's quiet output")
    args = parser.parse_args()
    if sys.prefix == sys.base_prefix:
        print(f"{TAG} run this with a virtual environment's python (python3 -m venv .venv && .venv/bin/python "
              "install.py), not the system's", file=sys.stderr)
        return 2
    not_cpu = cpu_pair(args.quiet)
    if not_cpu:
        print(f"{TAG} not using PyTorch's CPU index: {not_cpu}; the install goes on with your own index (on "
              "Linux x86_64 PyPI's CUDA build, about 5 GB more)", flush=True)
    here = Path(__file__).resolve().parent
    target = f"{here}[{args.extras}]" if args.extras else str(here)
    done = pip("install", "-e", target, quiet=args.quiet)
    print(summary(not_cpu), flush=True)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
