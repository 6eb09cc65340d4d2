"""The DP audits of the runs a report covers, found as a user leaves them (JSON only, never run).

`fedattack audit RUN` writes `RUN.audit-<mode>.json` beside the run directory by default, and
records in the file which run it audited (`"run"`, its resolved path). So a report finds a run's
audits in two ways, both without an option to remember: the files beside each run directory it
reads, and any audit file it is given or finds in a folder it searches (an audit written with
`--out` elsewhere), matched to its run by that recorded path. An audit named explicitly that
matches none of the report's runs is refused in one line (a report that silently dropped the
audit a user asked for would read as "not audited"); one found by a search is left out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedattack.audit.run import AUDIT_SCHEMA as SCHEMA
from fedattack.registry import UserError

SUFFIX = ".audit-"            # RUN.audit-<mode>.json, the audit command's default --out


@dataclass(frozen=True)
class AuditFile:
    """One audit: where it was read from, and its JSON (claim, bounds, canaries, runs)."""

    path: Path
    data: dict[str, Any]

    @property
    def run(self) -> str | None:
        """The resolved path of the audited run directory, where the audit recorded it."""
        run = self.data.get("run")
        return run if isinstance(run, str) and run else None


def is_audit(file: Path) -> bool:
    """Cheap check before a full read: an audit file's first key is its schema tag."""
    try:
        with file.open("r", encoding="utf-8") as fh:
            return SCHEMA in fh.read(200)
    except (OSError, UnicodeDecodeError):
        return False


def load_audit(file: Path) -> AuditFile:
    """An audit file's JSON, or one line saying the file is not an audit."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("claimed"), dict):
            raise ValueError("not an audit")
    except (OSError, UnicodeDecodeError, ValueError):
        raise UserError(f"{file} is not a readable fedattack audit (`fedattack audit RUN` writes one)") from None
    return AuditFile(file, data)


def read_audit(file: Path) -> AuditFile | None:
    """`load_audit`, or None for a file that is not an audit (found by a search, not named)."""
    try:
        return load_audit(file)
    except UserError:
        return None


def beside(run: Path) -> list[AuditFile]:
    """The audits the audit command wrote by default for the run directory `run`."""
    found = (read_audit(f) for f in sorted(run.parent.glob(f"{run.name}{SUFFIX}*.json")))
    return [a for a in found if a is not None and a.run in (None, str(run.resolve()))]


def attach(runs: list[Any], given: list[AuditFile], named: list[AuditFile]) -> None:
    """Give each run (a `collect.RunInfo` with a path) its audits: those beside it, and those found
    (`given`) or named explicitly (`named`) that recorded it; refuse a named one that fits none."""
    by_path: dict[str, list[AuditFile]] = {}
    for run in runs:
        if run.path is not None:
            key = str(Path(run.path).resolve())
            mine = {str(a.path.resolve()): a for a in beside(Path(run.path))}
            mine.update({str(a.path.resolve()): a for a in [*given, *named] if a.run == key})
            run.audits = sorted(mine.values(), key=lambda a: str(a.path))
            by_path[key] = run.audits
    for audit in named:
        if audit.run not in by_path:
            of = f"run {audit.run}" if audit.run else "a run it does not record"
            raise UserError(f"{audit.path} audits {of}, which none of the report's results or run directories "
                            "is; pass the results of that run (or its run directory) too")
