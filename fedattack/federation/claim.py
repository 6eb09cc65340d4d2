"""Claiming an output folder: one writer at a time, and `--overwrite` only over fedattack's own.

A user's `--out` may be mistyped (`.`, a home folder, a folder of theses) or shared by two jobs
started at once. Before anything is written, a claim refuses, in one line: an output that is the
current directory or one of its parents; an existing output without `--overwrite`; an existing
output that fedattack did not write (it must be recognised, e.g. by its manifest); and an output
another live fedattack process is writing (a lock file beside it holds that process's pid; a
lock left by a dead process is taken over). Two writers in one process (two `Recorder`s on one
folder in a notebook) are refused alike: the process remembers the locks it holds. When the
writer finishes, `confirm` refuses to replace a folder that appeared at `--out` while it worked.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from fedattack.registry import UserError

_HELD: set[Path] = set()  # lock files this process holds (a second writer here is refused too)


class OutputClaim:
    """Held while a run or a result set is written to `out` (a context manager)."""

    def __init__(self, out: Path, overwrite: bool, kind: str, recognise: Callable[[Path], bool]) -> None:
        self.out, self.kind, self.recognise = Path(out), kind, recognise
        refuse_dangerous(self.out)
        self.existed = self.out.exists()
        if self.existed and not overwrite:
            raise UserError(f"{self.out} already exists; choose another --out or pass --overwrite")
        if self.existed and not recognise(self.out):
            raise UserError(f"{self.out} is not a {kind}; --overwrite replaces only a {kind} fedattack "
                            "wrote, so nothing was touched (choose another --out)")
        self.lock = PidLock(self.out.parent / f".{self.out.name}.lock", f"writing {self.out}")
        self.lock.acquire()

    def __enter__(self) -> OutputClaim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def confirm(self) -> None:
        """Refuse to replace something that appeared at `out` after the claim was made."""
        if self.out.exists() and not (self.existed and self.recognise(self.out)):
            raise UserError(f"{self.out} appeared while fedattack was writing it; nothing there was "
                            "replaced (choose another --out)")

    def release(self) -> None:
        self.lock.release()


class PidLock:
    """A lock file created exclusively, holding the owner's pid; a dead owner's lock is taken over."""

    def __init__(self, path: Path, doing: str) -> None:
        self.path, self.doing = path, doing

    def __enter__(self) -> PidLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.resolve() in _HELD:
            raise UserError(f"this process (pid {os.getpid()}) is already {self.doing}; finish or close that "
                            "writer first, or choose another --out")
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                other = _pid_in(self.path)
                if other is not None and other != os.getpid() and _alive(other):
                    raise UserError(f"another fedattack process (pid {other}) is {self.doing}; "
                                    "wait for it or choose another --out") from None
                self.path.unlink(missing_ok=True)  # left by a process that died
                continue
            with os.fdopen(fd, "w") as fh:
                fh.write(str(os.getpid()))
            _HELD.add(self.path.resolve())
            return
        raise UserError(f"cannot take the lock {self.path} (it keeps reappearing)")

    def release(self) -> None:
        try:
            held = self.path.resolve()
            if held not in _HELD:
                return  # not taken (refused), or released already
            _HELD.discard(held)
            if self.path.read_text().strip() == str(os.getpid()):
                self.path.unlink()
        except OSError:
            pass


def writer_of(lock: Path) -> int | None:
    """The pid of another live process holding `lock` (a PidLock's file), or None."""
    other = _pid_in(lock) if lock.exists() else None
    return other if other is not None and other != os.getpid() and _alive(other) else None


def refuse_dangerous(out: Path) -> None:
    """An output must not be the current directory, one of its parents, or a filesystem root."""
    target, here = out.resolve(), Path.cwd().resolve()
    if target == here or target in here.parents or target.parent == target:
        raise UserError(f"--out {out} is the current directory or one of its parents; "
                        "name a new folder, e.g. --out runs/my-run")


def _pid_in(lock: Path) -> int | None:
    try:
        return int(lock.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
