"""An evaluation's results folder, and its one owner (`ResultsFolder`).

Whoever evaluates (the command, the Python API, an experiment's cell) writes results through
this object and nothing else: it claims the folder (a pid lock beside it; a folder of results
is refused unless told to resume or to replace them, in one line), removes what a killed
evaluation left beside it, stages each victim's results in a hidden sibling and publishes them
as that victim finishes, and at the end writes the strongest-strategy selection, `plan.json`
and `summary.json`, which covers every result in the folder.

While it works, `incomplete.json` in the folder says so: which victims are done and which are
missing, and the command that finishes them. An interrupt (Ctrl-C, SIGTERM) keeps the victims
already published and the marker (`Interrupted` says where); `resume` continues from them,
skipping every victim whose results are all there, and never rewrites a result it kept. With
`replace`, a victim's old results go when its new ones are in place, the rest once the
evaluation is complete, so an interrupted replacement loses nothing. An evaluation that stops
before its first victim leaves the folder as it found it.

Nothing here imports torch: the command checks the folder before it loads anything.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from fedattack.atomic import PARTIAL, staging_dir, write_json, write_text
from fedattack.federation.claim import PidLock, refuse_dangerous, writer_of
from fedattack.interrupts import held_interrupts
from fedattack.jsonfile import read_json
from fedattack.registry import UserError
from fedattack.results import RESULT_SCHEMA

Existing = Literal["refuse", "resume", "replace"]
SUMMARY = "summary.json"
SUMMARY_SCHEMA = "fedattack.summary/1"
PLAN = "plan.json"
INCOMPLETE = "incomplete.json"
INCOMPLETE_SCHEMA = "fedattack.incomplete/1"


def existing_mode(resume: bool, replace: bool, names: tuple[str, str] = ("--resume", "--force")) -> Existing:
    """What to do with results already in the folder, from the two flags (`names` as the user
    wrote them); both at once is refused in one line."""
    if resume and replace:
        raise UserError(f"{names[0]} keeps the results in the folder, {names[1]} replaces them: pass one")
    return "resume" if resume else "replace" if replace else "refuse"


class Interrupted(KeyboardInterrupt):
    """An interrupt that kept finished victims' results; its message says where and how to go on."""


def result_files(folder: Path) -> list[Path]:
    """The AttackResult files of a results folder: JSON files that say they are one (a folder
    may hold the user's own JSON files too; those are never counted, summarised or deleted)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith(".") and schema_of(p) == RESULT_SCHEMA)


def schema_of(path: Path) -> object:
    try:
        data = read_json(path, "", "")
    except UserError:
        return None
    return data.get("schema") if isinstance(data, dict) else None


def victim_of(path: Path) -> int | None:
    try:
        victim = json.loads(path.read_text(encoding="utf-8")).get("victim")
    except (OSError, ValueError, AttributeError):
        return None
    return victim if isinstance(victim, int) else None


def incomplete(folder: Path) -> dict[str, Any] | None:
    """The marker of an evaluation of `folder` that has not finished (None: none)."""
    marker = folder / INCOMPLETE
    if not marker.is_file() or schema_of(marker) != INCOMPLETE_SCHEMA:
        return None
    data = read_json(marker, "", "")
    return data if isinstance(data, dict) else None


class ResultsFolder:
    """The output folder of one evaluation (a context manager; see the module docstring)."""

    def __init__(self, path: str | Path, existing: Existing = "refuse", resume_hint: str = "") -> None:
        self.path = Path(path)
        self.existing = existing
        self.resume_hint = resume_hint  # the command that would finish an interrupted evaluation
        self.lock = PidLock(self.path.parent / f".{self.path.name}.lock", f"evaluating into {self.path}")
        self.previous: list[Path] = []  # results there before this evaluation
        self.published: list[Path] = []  # this evaluation's, in the folder
        self.victims: list[int] = []  # every victim the evaluation is asked for
        self.done: set[int] = set()
        self.stale: set[str] = set()  # results an interrupted replacement had still to replace
        self._created = False
        self._marker: str | None = None  # an unfinished evaluation's marker found here, as it was

    # -- before anything runs ------------------------------------------------------------------
    def check(self) -> list[Path]:
        """Refuse, in one line, a folder this evaluation may not write into; returns its results."""
        refuse_dangerous(self.path)
        other = writer_of(self.lock.path)
        if other is not None:
            raise UserError(f"another fedattack process (pid {other}) is evaluating into {self.path}; wait for it "
                            "or choose another --out")
        summary = self.path / SUMMARY
        if summary.exists() and schema_of(summary) != SUMMARY_SCHEMA:
            raise UserError(f"{summary} is not a fedattack summary and evaluate writes its summary there; "
                            "nothing was touched (choose another --out)")
        found = result_files(self.path)
        if found and self.existing == "refuse":
            state = " of an interrupted evaluation (incomplete.json)" if incomplete(self.path) else ""
            raise UserError(f"{self.path} already holds {len(found)} result(s){state}; pass --resume to add to them "
                            "(victims already evaluated are skipped) or --force to replace them")
        return found

    def __enter__(self) -> ResultsFolder:
        self.check()
        self.lock.acquire()
        try:
            self.previous = self.check()  # again under the lock: nobody else writes now
            marker = incomplete(self.path)
            self._marker = (self.path / INCOMPLETE).read_text(encoding="utf-8") if marker is not None else None
            self.stale = set((marker or {}).get("replacing") or []) if self.existing == "resume" else set()
            clear_leftovers(self.path)
            self._created = not self.path.exists()
        except BaseException:
            self.lock.release()
            raise
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is not None:
                self._stopped(exc)
        finally:
            self.lock.release()

    # -- what is already there ----------------------------------------------------------------
    def kept(self) -> list[Path]:
        """The results resume keeps (none unless resuming; not those an interrupted replacement
        had still to replace)."""
        return [p for p in self.previous if p.name not in self.stale] if self.existing == "resume" else []

    def begin(self, victims: Iterable[int], done: Iterable[int] = ()) -> None:
        """The evaluation's victims (the ones kept from before among them), marked as running."""
        self.victims = list(dict.fromkeys(victims))
        self.done = set(done)
        self._mark("running")

    # -- publishing ------------------------------------------------------------------------------
    def stage(self) -> Path:
        """A fresh hidden staging folder beside the results (`.NAME.partial-*`)."""
        return staging_dir(self.path)

    def publish(self, stage: Path, written: list[Path], *victims: int | None) -> list[Path]:
        """Move the staged results (and their artifact folders) into the folder, an interrupt
        held off until they are all in; `victims` are then done. Under `resume` a result that was
        there before is kept as it was; under `replace` a done victim's old results go once its
        new ones are in."""
        with held_interrupts():
            moved = self._move(stage, written)
            done = [v for v in victims if v is not None]
            if self.existing == "replace":
                names = {p.name for p in written}
                remove_results(p for p in self.previous if p.name not in names and victim_of(p) in done)
            shutil.rmtree(stage, ignore_errors=True)
            self.published += moved
            if done:
                self.done.update(done)
                self._mark("running")
        return [self.path / p.name for p in written]

    def _move(self, stage: Path, written: list[Path]) -> list[Path]:
        """Every staged entry into the folder (results, their artifact folders, an upper bound's
        per-model folders), but for what belongs to a result resume keeps."""
        self.path.mkdir(parents=True, exist_ok=True)
        kept = [p.stem for p in self.kept()]
        for entry in sorted(stage.iterdir()):
            if any(entry.stem == k or entry.name.startswith(f"{k}-") for k in kept):
                continue
            target = self.path / entry.name
            if target.is_dir() and entry.is_dir():
                shutil.rmtree(target)
            os.replace(entry, target)
        return [self.path / p.name for p in written if p.stem not in kept]

    # -- the end ---------------------------------------------------------------------------------
    def finish(self, plan: Any | None) -> list[Path]:
        """The selection over every victim, `plan.json` and `summary.json` (of every result in the
        folder); older results a replacement did not rewrite are removed. Returns the folder's results."""
        from fedattack.attacks.evaluation.selection import select_strongest
        from fedattack.attacks.evaluation.summary import write_summary

        mine = {p.name for p in self.published}
        if self.existing == "replace" or self.stale:
            remove_results(p for p in self.previous if p.name not in mine
                           and (self.existing == "replace" or p.name in self.stale))
        select_strongest(result_files(self.path), self.path)
        if plan is not None:
            write_json(self.path / PLAN, merged_plan(plan.to_json(), self.path / PLAN, self.existing == "resume"))
        every = result_files(self.path)
        write_summary(self.path / SUMMARY, every)
        (self.path / INCOMPLETE).unlink(missing_ok=True)
        return every

    def _stopped(self, exc: BaseException) -> None:
        """After an interrupt or an error: keep what was published, say so; else leave no trace."""
        if not self.published:  # as it was: an earlier evaluation's marker put back, or none
            if self._marker is not None:
                write_text(self.path / INCOMPLETE, self._marker)
            elif self.path.is_dir():
                (self.path / INCOMPLETE).unlink(missing_ok=True)
            if self._created and self.path.is_dir() and not any(self.path.iterdir()):
                self.path.rmdir()
            return
        interrupted = isinstance(exc, KeyboardInterrupt)
        self._mark("interrupted" if interrupted else f"failed: {type(exc).__name__}: {exc}")
        if interrupted and not isinstance(exc, Interrupted):
            raise Interrupted(self.kept_line()) from None

    def kept_line(self) -> str:
        missing = self.missing()
        finish = f"; `{self.resume_hint}` finishes the rest" if self.resume_hint else "; --resume finishes the rest"
        return (f"{len(self.done)} victim(s)' results kept in {self.path}, marked incomplete (missing victim(s) "
                f"{', '.join(map(str, missing)) or 'none'}){finish}")

    def missing(self) -> list[int]:
        return [v for v in self.victims if v not in self.done]

    def _mark(self, status: str) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_json(self.path / INCOMPLETE, {
            "schema": INCOMPLETE_SCHEMA, "status": status, "victims": self.victims, "done": sorted(self.done),
            "missing": self.missing(), "resume": self.resume_hint or "evaluate again into this folder with --resume",
            "replacing": sorted(p.name for p in self.previous if p.exists() and p not in self.published
                                and (self.existing == "replace" or p.name in self.stale))})


def clear_leftovers(out: Path) -> None:
    """Remove the staging folders an evaluation killed with SIGKILL left beside `out`, and say so."""
    stale = sorted(out.parent.glob(f".{out.name}{PARTIAL}*")) if out.parent.is_dir() else []
    for folder in stale:
        shutil.rmtree(folder, ignore_errors=True) if folder.is_dir() else folder.unlink(missing_ok=True)
    if stale:
        print(f"note: removed {len(stale)} staging folder(s) an earlier evaluation into {out} left when it was "
              f"killed ({stale[0].name})", file=sys.stderr)


def remove_results(paths: Iterable[Path]) -> None:
    """Delete results (and their artifact folders, an upper bound's per-model ones too)."""
    for path in paths:
        for artifacts in [path.with_suffix(""), *path.parent.glob(f"{path.stem}-*")]:
            if artifacts.is_dir():
                shutil.rmtree(artifacts)
        path.unlink(missing_ok=True)


def merged_plan(new: dict[str, Any], old: Path, resume: bool) -> dict[str, Any]:
    """The plan to write: this evaluation's, and, when resuming, the earlier plan's calls on the
    victims this one skipped (what they measured stays on record)."""
    if not resume or not old.is_file() or schema_of(old) != new.get("schema"):
        return new
    planned = {c["victim"] for c in new["calls"]}
    earlier = [c for c in read_json(old, "", "").get("calls", []) if c.get("victim") not in planned]
    return {**new, "calls": earlier + new["calls"]}
