"""Run an experiment end to end, resumably: train, evaluate, report.

Output folder:
  experiment.toml      the experiment as run (provenance)
  sweep.json           every cell: its folder, content address and fully resolved spec
  runs/<ident>/        one run directory per federation (written atomically by train_federation)
  results/<run>/<job>/ one folder per evaluation job with its result files, artifacts and
                       cell.json, written into a hidden temporary folder and renamed when complete
  failures/            the traceback of a cell that failed with an error that is not the user's
  report/              report.md, report.html, tables/, figures/

Resuming is deciding what is done by looking at the disk: a run directory whose manifest is
complete, holds the cell's spec and whose files match their checksums, or a renamed result
folder, is done; anything hidden (`.…partial…`, a dead writer's lock) is a leftover of an
interruption and is removed before its cell runs again. A finished run whose files no longer
match their checksums (a flipped byte on disk) is moved to `damaged/` and trained again, said
in one line: reusing it would fail every evaluation of it, on every rerun.

The output folder is a user's: `--out` may not be the current directory or a parent, and an
existing folder is used only if it is empty or an experiment folder (its `sweep.json` says so),
so a folder of the user's own that happens to hold an `experiment.toml`, a `sweep.json` or a
`report/` is refused before anything is written. Cells run on a backend (`experiments.backends`):
the parent decides and gathers, workers fill cells. The evaluator and the reporter are passed
in by the caller (the CLI), so this core module imports neither attacks nor reports.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from fedattack import provenance
from fedattack.atomic import staged_dir, write_json, write_text
from fedattack.experiments.backends import Backend, CellFailed, Outcome, Task, make_backend, run_tasks
from fedattack.experiments.plan import EvalJob, FederationJob, Plan, canonical, plan
from fedattack.experiments.spec import Experiment
from fedattack.federation.claim import PidLock, refuse_dangerous
from fedattack.federation.spec import FederationSpec
from fedattack.federation.storage import read_json, verify
from fedattack.federation.train import train_federation
from fedattack.provenance import software
from fedattack.registry import UserError

Trainer = Callable[..., Path]                                  # train_federation's signature
Evaluator = Callable[[EvalJob, Path, Path], None]              # (job, run dir, folder to fill)
Reporter = Callable[[Sequence[Path], Path, Experiment], Path]     # (inputs, out, experiment)
SWEEP_SCHEMA = "fedattack.sweep/1"


@dataclass
class Summary:
    trained: int = 0
    reused_runs: int = 0
    evaluated: int = 0
    reused_results: int = 0
    other_software: int = 0  # reused cells made by another version of fedattack, torch or Python
    seconds: float = 0.0
    report: Path | None = None
    notes: list[str] = field(default_factory=list)


def run_experiment(exp: Experiment, out: str | Path, *, evaluate: Evaluator | None, report: Reporter | None,
                   train: Trainer = train_federation, data_root: str | None = None, download: bool = False,
                   echo: Callable[[str], None] = print, progress: bool = True,
                   backend: Backend | None = None, plugins: Sequence[str] = ()) -> Summary:
    """`backend` (default: sequential, in this process) runs the cells; `train` and `evaluate`
    must then be picklable (module-level functions or instances of module-level classes).
    `plugins`: plugin files (absolute paths) every worker loads before its first cell."""
    started = time.perf_counter()
    out = Path(out)
    check_out(out)
    jobs = plan(exp)
    backend = backend or make_backend("sequential")
    summary = Summary(notes=list(jobs.notes))
    for note in jobs.notes:
        echo(f"note: {note}")
    with PidLock(out / ".lock", f"running an experiment in {out}"):
        _record(exp, out, jobs)
        if jobs.evaluations and evaluate is None:
            raise UserError("this experiment has [[evaluation]] entries but no evaluator is available")
        bars = progress and backend.in_process
        trains = _train_tasks(jobs, out, train, data_root, download, bars, summary, echo, tuple(plugins))
        evals = [] if evaluate is None else _eval_tasks(jobs, out, evaluate, summary, echo, tuple(plugins))
        try:
            with backend:
                run_tasks(backend, trains, _counted(summary, "trained", echo))
                run_tasks(backend, evals, _counted(summary, "evaluated", echo))
        except BaseException as exc:
            for task in trains + evals:  # the workers are stopped: what they staged goes
                clear_cell(task.final)
            if isinstance(exc, CellFailed) and exc.outcome.detail:
                _keep_traceback(out, exc)
            raise
        if report is not None:
            inputs = [run_dir(out, f) for f in jobs.federations] + [result_dir(out, j) for j in jobs.evaluations]
            summary.report = report(inputs, out / "report", exp)
    summary.seconds = time.perf_counter() - started
    return summary


def run_dir(out: Path, fed: FederationJob) -> Path:
    return out / "runs" / fed.ident


def result_dir(out: Path, job: EvalJob) -> Path:
    return out / "results" / job.federation.ident / job.ident


def check_out(out: Path) -> None:
    """Refuse an output folder that is the current directory, a parent, or a folder of the
    user's own (non-empty, without an experiment's sweep.json), before anything is written."""
    refuse_dangerous(out)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise UserError(f"--out {out} is not a folder; choose a new folder")
    if out.is_dir() and any(not p.name.startswith(".") for p in out.iterdir()) and not is_experiment_folder(out):
        raise UserError(f"--out {out} holds files fedattack did not write (no experiment sweep.json); "
                        "nothing was touched: choose a new or empty folder")


def is_experiment_folder(path: Path) -> bool:
    """Whether `path` holds the sweep index an experiment run writes first (`_record`)."""
    try:
        sweep = read_json(path / "sweep.json")
    except UserError:
        return False
    if not isinstance(sweep, dict) or not isinstance(sweep.get("cells"), list):
        return False
    if sweep.get("schema") == SWEEP_SCHEMA:
        return True
    return all(isinstance(c, dict) and c.get("kind") in ("federation", "evaluation") and "address" in c
               for c in sweep["cells"])  # written before the schema was: the cells' own shape


def is_complete_run(path: Path, spec: FederationSpec | None = None, deep: bool = False) -> bool:
    """A run counts only once its manifest says complete (it is written last, then renamed),
    holds the spec the cell's address stands for, and every file it lists has its size (and,
    `deep`, its checksum)."""
    try:
        manifest = json.loads((path / "federation.json").read_text())
        if manifest.get("complete") is not True:
            return False
        if spec is not None and manifest.get("spec") != json.loads(canonical(spec.to_json())):
            return False
        verify(path, manifest.get("files", {}), deep=deep)
        return True
    except (OSError, ValueError, AttributeError, TypeError, KeyError, UserError):
        return False


def set_aside(out: Path, path: Path, echo: Callable[[str], None]) -> None:
    """Move a finished run that fails its checksums to `damaged/` (replacing an older copy there)."""
    aside = out / "damaged" / path.name
    if aside.exists():
        shutil.rmtree(aside)
    aside.parent.mkdir(parents=True, exist_ok=True)
    path.rename(aside)
    echo(f"warning: {path} does not match its checksums (damaged on disk); moved to {aside}, training it again")


def clear_cell(final: Path) -> None:
    """Remove what an interrupted or killed writer of `final` left beside it: staging folders
    (nested ones too: an evaluation stages inside the cell's staging name) and pid locks."""
    if final.parent.is_dir():
        for stale in final.parent.iterdir():
            if stale.name.startswith((f".{final.name}.", f"..{final.name}.")):
                shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)


def train_cell(train: Trainer, spec: FederationSpec, path: Path, data_root: str | None, download: bool,
               progress: bool) -> None:
    """A worker's part of a federation cell. It clears the cell's leftovers first: a task Ray
    retries after its node died finds that attempt's staging folder and lock (whose pid means
    nothing on this node); the experiment's lock guarantees no other writer of this cell."""
    clear_cell(path)
    train(spec, path, data_root, download, path.exists(), "cpu", progress)


def evaluate_cell(evaluate: Evaluator, job: EvalJob, run: Path, final: Path) -> None:
    clear_cell(final)
    with staged_dir(final) as tmp:
        evaluate(job, run, tmp)
        write_json(tmp / "cell.json", {**job.record(), "software": software()})


def _made_by_other(record: Path, key: str, summary: Summary) -> str:
    """'' when the reused cell was made by this software; else what made it, for its line (and
    counted for the summary): a cell's address does not change with the code."""
    try:
        made = provenance.recorded(json.loads(record.read_text()).get(key))
    except (OSError, ValueError, AttributeError):
        made = None
    if not provenance.made_elsewhere(made):
        return ""
    summary.other_software += 1
    return f" (made by {provenance.describe(made)})"


def _train_tasks(jobs: Plan, out: Path, train: Trainer, data_root: str | None, download: bool, bars: bool,
                 summary: Summary, echo: Callable[[str], None], plugins: tuple[str, ...] = ()) -> list[Task]:
    tasks, total = [], len(jobs.federations)
    for i, fed in enumerate(jobs.federations, 1):
        path = run_dir(out, fed)
        label = (f"[train {i}/{total}] {fed.spec.method} on {fed.spec.dataset} "
                 f"({fed.partition_label}, seed {fed.spec.seed}) {fed.ident}")
        if is_complete_run(path, fed.spec, deep=True):
            summary.reused_runs += 1
            echo(f"{label}: done before, reusing {path}{_made_by_other(path / 'federation.json', 'versions', summary)}")
            continue
        if is_complete_run(path, fed.spec):  # finished, but its bytes changed since
            set_aside(out, path, echo)
        clear_cell(path)
        work = partial(train_cell, train, fed.spec, path, data_root, download, bars)
        tasks.append(Task(label, path, work, _imports(fed.spec, plugins)))
    return tasks


def _eval_tasks(jobs: Plan, out: Path, evaluate: Evaluator, summary: Summary,
                echo: Callable[[str], None], plugins: tuple[str, ...] = ()) -> list[Task]:
    tasks, total = [], len(jobs.evaluations)
    for i, job in enumerate(jobs.evaluations, 1):
        final = result_dir(out, job)
        spec, ev = job.federation.spec, job.evaluation
        label = (f"[attack {i}/{total}] {'+'.join(ev.attacks)} by {'+'.join(ev.threat_models)} on "
                 f"{spec.method}/{spec.dataset} (run seed {spec.seed}, attack seed {job.seed}) {job.ident}")
        if final.is_dir():
            summary.reused_results += 1
            echo(f"{label}: done before{_made_by_other(final / 'cell.json', 'software', summary)}")
            continue
        clear_cell(final)
        work = partial(evaluate_cell, evaluate, job, run_dir(out, job.federation), final)
        tasks.append(Task(label, final, work, _imports(spec, plugins)))
    return tasks


def _imports(spec: FederationSpec, plugins: tuple[str, ...] = ()) -> tuple[tuple[str, str], ...]:
    """User code a worker must register before it can build this spec: the plugin files the
    command was given, and the import paths the spec names."""
    paths = tuple((kind, name) for kind, name in (("model", spec.model), ("dataset", spec.dataset)) if ":" in name)
    return tuple(("plugin", p) for p in plugins) + paths


def _counted(summary: Summary, what: str, echo: Callable[[str], None]) -> Callable[[Task, Outcome], None]:
    def done(task: Task, outcome: Outcome) -> None:
        setattr(summary, what, getattr(summary, what) + 1)
        echo(f"{task.label}: {outcome.seconds:.1f}s")

    return done


def _keep_traceback(out: Path, exc: CellFailed) -> None:
    where = out / "failures" / f"{exc.task.final.name}.txt"
    write_text(where, exc.outcome.detail or "")
    exc.args = (f"{exc.args[0]} (traceback in {where})",)


def _record(exp: Experiment, out: Path, jobs: Plan) -> None:
    """The experiment as run, and the sweep index: every cell's folder, address and spec."""
    out.mkdir(parents=True, exist_ok=True)
    cells = [f.record() for f in jobs.federations] + [j.record() for j in jobs.evaluations]
    write_json(out / "sweep.json", {"schema": SWEEP_SCHEMA, "cells": cells})
    if exp.source is not None:
        text = exp.source.read_text(encoding="utf-8")
        target = out / "experiment.toml"
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            write_text(target, text)
