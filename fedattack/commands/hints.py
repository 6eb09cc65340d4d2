"""What to run next, where a command was given the other command's folder.

`evaluate` takes a run directory (what `train` wrote) and `report` reads what `evaluate` wrote.
Handing `evaluate` a results folder got "federation.json is missing"; handing `report` a run
directory that no one evaluated got a report with a utility table and no word on why it held no
attack. Both now say which command the folder is for. A utility-only report stays legal (the
reproduction pages report utility tables from run directories alone, e.g.
`fedattack report runs/issue6 --paper waffle-wavg:table1`), so `report` hints and still writes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from fedattack.registry import UserError

if TYPE_CHECKING:
    from fedattack.reports.collect import Inputs, RunInfo

SHOWN = 3  # run directories named in a hint before "and N more"


def refuse_results_folder(run_dir: Path) -> None:
    """A folder of attack results given to `evaluate`: point at `report`, and at the run the
    results came from."""
    from fedattack.attacks.evaluation.results_folder import result_files

    if (run_dir / "federation.json").exists() or not run_dir.is_dir():
        return
    results = result_files(run_dir)
    if not results:
        return
    runs = sorted({str(p) for p in (_attacked_run(r) for r in results) if p})
    origin = f"; to attack its federation again, evaluate {' or '.join(runs[:SHOWN])}" if runs else ""
    raise UserError(f"{run_dir} holds {len(results)} attack result(s), not a trained federation: report on "
                    f"them with `fedattack report {run_dir} -o report-{run_dir.resolve().name}`{origin}")


def _attacked_run(result: Path) -> str | None:
    try:
        path = (json.loads(result.read_text(encoding="utf-8")).get("run") or {}).get("path")
    except (OSError, ValueError, AttributeError):
        return None
    return str(path) if isinstance(path, str) and path else None


def unevaluated_hint(inputs: Inputs, out: Path) -> str | None:
    """The report's runs that no result attacks: a utility-only report, or runs missing from the
    attack tables, and the commands that fill them."""
    attacked = {r.run.ident for r in inputs.results}
    bare = [run for run in inputs.runs if run.ident not in attacked]
    if not bare:
        return None
    first = bare[0].path
    folder = f"results/{first.name}" if first is not None else "results/NAME"
    evaluate = f"fedattack evaluate {first if first is not None else 'RUN_DIR'} --out {folder}"
    if not inputs.results:
        return (f"note: no attack results among these inputs, so this report shows utility only; to see "
                f"what an attacker learns, evaluate first: `{evaluate}`, then `fedattack report {folder} -o {out}`")
    them, others = ("them", " (and the others alike)") if len(bare) > 1 else ("it", "")
    return (f"note: {_named(bare)} no attack results, so the attack tables leave {them} out; to include "
            f"{them}: `{evaluate}`{others}, and pass {folder} to `report` as well")


def _named(runs: Iterable[RunInfo]) -> str:
    listed = list(runs)
    names = [str(r.path or r.label) for r in listed[:SHOWN]]
    more = f" and {len(listed) - SHOWN} more" if len(listed) > SHOWN else ""
    verb = "has" if len(listed) == 1 else "have"
    return f"{', '.join(names)}{more} {verb}"


def incomplete_notes(paths: Iterable[Path]) -> list[str]:
    """One line per results folder among `paths` whose evaluation has not finished (it was
    interrupted, failed, or is running): which victims are missing, and what finishes them."""
    from fedattack.attacks.evaluation.results_folder import INCOMPLETE, incomplete

    folders = {m.parent for p in paths if Path(p).is_dir() for m in [Path(p) / INCOMPLETE, *Path(p).rglob(INCOMPLETE)]
               if m.is_file()}
    notes = []
    for folder in sorted(folders):
        marker = incomplete(folder)
        if marker is None:
            continue
        status, missing = str(marker.get("status", "unfinished")), marker.get("missing") or []
        done, victims = len(marker.get("done") or []), len(marker.get("victims") or [])
        notes.append(f"note: {folder} is incomplete ({status}; {done} of {victims} victim(s) done, missing "
                     f"victim(s) {', '.join(map(str, missing)) or 'none'}); `{marker.get('resume')}` finishes it")
    return notes
