"""Reports: tables, figures, report.md and a self-contained report.html from result files only.

`build_report(paths, out, papers=...)` is the entry point (`fedattack report` calls it). Reports
never re-run an attack and never import one: they read `AttackResult` JSON files and, for
utility, the run directories' `federation.json` / `metrics.json`.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # Lazy, so importing the package (e.g. for the CLI's help) does not load matplotlib.
    if name == "build_report":
        from fedattack.reports.build import build_report
        return build_report
    raise AttributeError(name)


__all__ = ["build_report"]
