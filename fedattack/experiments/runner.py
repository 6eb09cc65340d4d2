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
complete, holds the cell's spec and lists files of the right sizes, or a renamed result folder,
is done; anything hidden (`.…partial…`, a dead writer's lock) is a leftover of an interruption
and is removed before its cell runs again. Cells run on a backend (`experiments.backends`):
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
from fedattack.federation.claim import PidLock
from fedattack.federation.spec import FederationSpec
from fedattack.federation.storage import verify
from fedattack.federation.train import train_federation
from fedattack.provenance import software
from fedattack.registry import UserError

Trainer = Callable[..., Path]                                  # train_federation's signature
Evaluator = Callable[[EvalJob, Path, Path], None]              # (job, run dir, folder to fill)
Reporter = Callable[[Sequence[Path], Path, Experiment], Path]     # (inputs, out, experiment)


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
                   backend: Backend | None = None) -> Summary:
    """`backend` (default: sequential, in this process) runs the cells; `train` and `evaluate`
    must then be picklable (module-level functions or instances of module-level classes)."""
    started = time.perf_counter()
    out = Path(out)
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
        trains = _train_tasks(jobs, out, train, data_root, download, bars, summary, echo)
        evals = [] if evaluate is None else _eval_tasks(jobs, out, evaluate, summary, echo)
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


def is_complete_run(path: Path, spec: FederationSpec | None = None) -> bool:
    """A run counts only once its manifest says complete (it is written last, then renamed),
    holds the spec the cell's address stands for, and every file it lists has its size."""
    try:
        manifest = json.loads((path / "federation.json").read_text())
        if manifest.get("complete") is not True:
            return False
        if spec is not None and manifest.get("spec") != json.loads(canonical(spec.to_json())):
            return False
        verify(path, manifest.get("files", {}), deep=False)
        return True
    except (OSError, ValueError, AttributeError, TypeError, KeyError, UserError):
        return False


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
                 summary: Summary, echo: Callable[[str], None]) -> list[Task]:
    tasks, total = [], len(jobs.federations)
    for i, fed in enumerate(jobs.federations, 1):
        path = run_dir(out, fed)
        label = (f"[train {i}/{total}] {fed.spec.method} on {fed.spec.dataset} "
                 f"({fed.partition_label}, seed {fed.spec.seed}) {fed.ident}")
        if is_complete_run(path, fed.spec):
            summary.reused_runs += 1
            echo(f"{label}: done before, reusing {path}{_made_by_other(path / 'federation.json', 'versions', summary)}")
            continue
        clear_cell(path)
        work = partial(train_cell, train, fed.spec, path, data_root, download, bars)
        tasks.append(Task(label, path, work, _imports(fed.spec)))
    return tasks


def _eval_tasks(jobs: Plan, out: Path, evaluate: Evaluator, summary: Summary,
                echo: Callable[[str], None]) -> list[Task]:
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
        tasks.append(Task(label, final, work, _imports(spec)))
    return tasks


def _imports(spec: FederationSpec) -> tuple[tuple[str, str], ...]:
    """User code a worker must register before it can build this spec (an import path)."""
    return tuple((kind, name) for kind, name in (("model", spec.model), ("dataset", spec.dataset)) if ":" in name)


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
    write_json(out / "sweep.json", {"cells": cells})
    if exp.source is not None:
        text = exp.source.read_text(encoding="utf-8")
        target = out / "experiment.toml"
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            write_text(target, text)
