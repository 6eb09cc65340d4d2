"""Run the real `fedattack` command in this process, and check what a user would see.

`fedattack(...)` calls the console script's own entry point, `fedattack.cli.main`, with
`sys.argv` set as the shell would set it, so every input goes through the same top-level error
handler as `fedattack` on a terminal; only stdout/stderr are captured (click's `CliRunner`
isolation) and the exit code read from `SystemExit`. Python's default warning display is
restored for the call, so a warning printed to a real terminal counts as a line here too.

`refused` holds the promise of issue #13 for one input: a non-zero exit, exactly one non-empty
line on stderr, no traceback, and (with `Workspace`) nothing the user had changed or half-written.
When `HOSTILE_LOG` names a file, every call appends its outcome there (`tests/hostile/inputs_table.py`
turns that log into the table of inputs tried).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from fedattack.cli import main

HALF_WRITTEN = (".partial-", ".lock", ".old-")
MARKER = "code-ran.txt"


class Planted:
    """Unpickling this calls `open(marker, "w")`: a file that appears proves that loading ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.marker), "w"))


@dataclass(frozen=True)
class Outcome:
    args: tuple[str, ...]
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def fedattack(*args: str, cwd: Path | None = None, record: bool = True) -> Outcome:
    """`fedattack ARGS...` as the console script runs it, in this process."""
    saved_argv, saved_term = sys.argv, signal.getsignal(signal.SIGTERM)
    code = 0
    with CliRunner().isolation() as (out, err, _), _terminal_warnings(), \
            (contextlib.chdir(cwd) if cwd else contextlib.nullcontext()):
        sys.argv = ["fedattack", *args]
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            sys.argv = saved_argv
            signal.signal(signal.SIGTERM, saved_term)
            sys.stdout.flush()
            sys.stderr.flush()
        outcome = Outcome(tuple(args), code, out.getvalue().decode(errors="replace"),
                          err.getvalue().decode(errors="replace"))
    if record:
        log(outcome)
    return outcome


@contextlib.contextmanager
def _terminal_warnings():  # type: ignore[no-untyped-def]
    """Warnings shown on stderr as a plain `python` shows them (pytest would record them instead)."""
    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.simplefilter("default")
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", category)  # Python's own defaults
        warnings.showwarning = warnings._showwarning_orig  # type: ignore[attr-defined]
        yield


def log(outcome: Outcome | None, check: str = "") -> None:
    """Append an outcome, or a passed check of the user's files, to `$HOSTILE_LOG` (JSON lines)
    for the inputs table (tests/hostile/inputs_table.py)."""
    target = os.environ.get("HOSTILE_LOG")
    if not target:
        return
    entry: dict[str, Any] = {"test": os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]}
    if outcome is not None:
        entry.update(args=list(outcome.args), code=outcome.code,
                     line=outcome.lines[0] if len(outcome.lines) == 1 else " | ".join(outcome.lines)[:400])
    if check:
        entry["check"] = check
    with open(target, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")


def refused(outcome: Outcome, *words: str, code: int = 2) -> str:
    """One input refused as promised: the exit code, one line starting `error:`, no traceback."""
    assert outcome.code == code, (outcome.code, outcome.err, outcome.out)
    assert "Traceback" not in outcome.err + outcome.out, outcome.err
    assert len(outcome.lines) == 1, outcome.err
    line = outcome.lines[0]
    assert line.startswith("error: "), line
    assert "unexpected" not in line, f"a fedattack bug, not a refusal: {line}"
    for word in words:
        assert word in line, (word, line)
    return line


def api_refused(call: Callable[[], object], described: str, *words: str) -> str:
    """A public-API call (e.g. `Recorder.record`) refused as a command would be: a `UserError`
    of one line naming the input, nothing else raised. Logged like a command, as `python: ...`."""
    from fedattack.registry import UserError

    try:
        call()
    except UserError as exc:
        line = f"error: {exc}"
    else:
        raise AssertionError(f"{described} was accepted")
    log(Outcome(("python:", described), 2, "", line + "\n"))
    return refused(Outcome(("python:", described), 2, "", line + "\n"), *words)


def snapshot(root: Path) -> dict[str, str]:
    """Every file (its SHA-256), folder and link under `root`, by relative path."""
    found: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in dirs + files:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[rel] = f"link -> {os.readlink(path)}"
            elif path.is_dir():
                found[rel] = "folder"
            else:
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


class Workspace:
    """A user's folder: the test adds what it needs, then `unchanged()` after a refused command."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        (root / "notes.txt").write_text("the user's own notes\n")
        (root / "thesis").mkdir(exist_ok=True)
        (root / "thesis" / "chapter1.tex").write_text("\\chapter{Mine}\n")
        self.before: dict[str, str] = {}

    def fedattack(self, *args: str) -> Outcome:
        """Run a command from this folder."""
        return fedattack(*args, cwd=self.root)

    def seal(self) -> None:
        """Remember everything as it is now (call after setting up, before the command)."""
        self.before = snapshot(self.root)

    def unchanged(self) -> None:
        """Nothing the user had is gone or altered, and nothing new (half-written or not) appeared."""
        after = snapshot(self.root)
        lost = {k: v for k, v in self.before.items() if after.get(k) != v}
        assert not lost, f"changed or lost: {sorted(lost)}"
        added = sorted(set(after) - set(self.before))
        assert not added, f"left behind: {added}"
        log(None, f"the user's folder byte-identical ({len(self.before)} entries)")

    def kept_finished_victims(self, results: str = "results") -> None:
        """An interrupted evaluation (issue #49): nothing the user had is gone or altered; what is
        new is only `results` itself, whole result files of the victims that finished, and the
        marker that says the folder is incomplete (no staging folder, lock or half-written file)."""
        after = snapshot(self.root)
        lost = {k: v for k, v in self.before.items() if after.get(k) != v}
        assert not lost, f"changed or lost: {sorted(lost)}"
        added = sorted(set(after) - set(self.before) - {results})
        strays = [a for a in added if not re.fullmatch(rf"{re.escape(results)}/[^/.][^/]*\.json", a)]
        assert not strays, f"left behind: {strays}"
        for name in added:
            json.loads((self.root / name).read_text(encoding="utf-8"))  # whole, not half-written
        kept = [a for a in added if not a.endswith("/incomplete.json")]
        assert not kept or f"{results}/incomplete.json" in after, f"{kept} kept without the incomplete marker"
        log(None, f"nothing lost ({len(self.before)} entries); kept {len(kept)} finished result(s), marked incomplete")

    def nothing_half_written(self) -> None:
        """What the user had is there; anything new is complete (no staging, lock or aside folder)."""
        after = snapshot(self.root)
        lost = {k: v for k, v in self.before.items() if after.get(k) != v}
        assert not lost, f"changed or lost: {sorted(lost)}"
        assert not [k for k in after if any(mark in k for mark in HALF_WRITTEN)], sorted(after)
        log(None, f"the user's {len(self.before)} entries unchanged, nothing half-written")


ENTRY = "import sys; from fedattack.cli import main; sys.argv = ['fedattack', *sys.argv[1:]]; main()"


def spawn(*args: str, cwd: Path) -> subprocess.Popen[str]:
    """`fedattack ARGS...` in its own process (for signals, and for a second, concurrent writer)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": ""}
    return subprocess.Popen([sys.executable, "-c", ENTRY, *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def working(proc: subprocess.Popen[str], folder: Path, pattern: str) -> bool:
    """Whether `pattern` has appeared in `folder` (the command got that far); fails if it ended first."""
    if list(folder.glob(pattern)):
        return True
    if proc.poll() is not None:
        raise AssertionError(f"{pattern} never appeared: {proc.communicate()[1]}")
    return False


def finish(proc: subprocess.Popen[str], args: tuple[str, ...]) -> Outcome:
    """Its outcome (not logged here: the test that checks it logs it under its own id)."""
    out, err = proc.communicate(timeout=240)
    return Outcome(args, proc.returncode, out, err)


def old_result(folder: Path, victim: int = 0) -> Path:
    """A result file as an earlier evaluation left it (what --resume and --force find)."""
    from fedattack.results import AttackResult

    folder.mkdir(exist_ok=True)
    return AttackResult(attack="membership", threat_model="eavesdropper", run={"method": "fedavg"}, victim=victim,
                        metrics={"auc": 0.6}).save(folder / f"membership-eavesdropper-decoded-victim{victim}.json")


@dataclass
class Scene:
    """One command interrupted while it worked (conftest's `busy`), and the second writers tried meanwhile."""

    ws: Workspace
    interrupted: Outcome | None = None
    second: dict[str, Outcome] = field(default_factory=dict)
