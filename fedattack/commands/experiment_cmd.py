"""`fedattack experiment list|show|run`: named experiments, end to end and resumable.

This command is where the core's experiment runner meets the attacks (`evaluate_run`) and the
reports (`build_report`): the runner itself imports neither, as DESIGN.md's layering asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from fedattack.commands.options import data_root_option, plugin_option

if TYPE_CHECKING:
    from fedattack.experiments.plan import EvalJob
    from fedattack.experiments.spec import Experiment


@dataclass(frozen=True)
class RunEvaluator:
    """The runner's evaluate step, backed by `fedattack.attacks.evaluation.evaluate.evaluate_run`; a class at
    module level so that a backend can send it to a worker process or a Ray node."""

    data_root: str | None
    progress: bool
    memory: int | None = None  # each cell's share of the memory budget (None: its own default)
    seconds: float | None = None  # each cell's time budget

    def __call__(self, job: EvalJob, run_dir: Path, out: Path) -> None:
        from fedattack.attacks.evaluation.evaluate import evaluate_run
        from fedattack.attacks.planning.planner import budget_of, is_default
        evaluate_run(run_dir, job.spec, out, data_root=self.data_root, progress=self.progress,
                     diverged="not-applicable",  # a diverged cell is recorded, the sweep goes on
                     budget=budget_of(self.memory, self.seconds, is_default(job.spec)))


def make_evaluator(data_root: str | None, progress: bool, memory: int | None = None, seconds: float | None = None,
                   workers: int = 1) -> RunEvaluator:
    """The evaluate step; cells side by side share the memory budget (by default half the memory
    available now, as one `evaluate` takes)."""
    if memory is None and workers > 1:
        from fedattack.resources import SAFE_SHARE, available
        free = available()
        memory = None if free is None else int(SAFE_SHARE * free)
    return RunEvaluator(data_root, progress, None if memory is None else memory // max(1, workers), seconds)


def reporter(inputs: Sequence[Path], out: Path, exp: Experiment) -> Path:
    from fedattack.reports.build import build_report
    existing = [p for p in inputs if p.exists()]
    return build_report(existing, out, exp.reproduces, title=f"fedattack report: experiment {exp.name}",
                        intro=exp.description, caveat=exp.caveat)


def run_named(name_or_file: str, out: str | None, data_root: str | None, download: bool, quiet: bool,
              report: bool = True, backend: str = "local", workers: int | None = None,
              address: str | None = None, plugins: Sequence[str] = (), max_cells: int | None = None,
              memory: int | None = None, seconds: float | None = None) -> Any:
    """Resolve, run and summarise an experiment (shared with `fedattack quickstart`)."""
    import torch

    from fedattack.experiments import resolve
    from fedattack.experiments.backends import make_backend
    from fedattack.experiments.grid import MAX_CELLS
    from fedattack.experiments.runner import check_out, run_experiment

    # The papers' models are small: one intra-op thread is faster than several, and on a shared
    # 2-core machine several threads per process thrash (measured: 10x slower under load).
    torch.set_num_threads(1)
    exp = check_attacks_and_papers(resolve(name_or_file, max_cells or MAX_CELLS))
    folder = Path(out or Path("experiments") / exp.name)
    check_out(folder)  # before a backend starts: a refused --out leaves nothing behind
    runner = make_backend(backend, workers, address)
    click.echo(f"experiment {exp.name}: {exp.description}".rstrip(": "))
    # cells side by side share the budget: sequential runs one at a time, a Ray node budgets itself
    evaluator = make_evaluator(data_root, not quiet and runner.in_process, memory, seconds,
                               runner.workers if backend == "local" else 1)
    summary = run_experiment(exp, folder, evaluate=evaluator,
                             report=reporter if report else None, data_root=data_root, download=download,
                             echo=click.echo, progress=not quiet, backend=runner,
                             plugins=tuple(str(Path(p).resolve()) for p in plugins))
    click.echo(f"done in {summary.seconds:.0f}s: trained {summary.trained} federation(s) "
               f"(reused {summary.reused_runs}), ran {summary.evaluated} evaluation(s) "
               f"(reused {summary.reused_results})")
    if summary.other_software:
        from fedattack.provenance import describe, software

        click.echo(f"warning: {summary.other_software} reused cell(s) were made by other software than this "
                   f"({describe(software())}); remove them, or use a new --out, to recompute them")
    return summary


def check_attacks_and_papers(exp: Any) -> Any:
    """Refuse unknown attacks, threat models, attack settings and paper tables before anything
    trains (the runner, which imports neither attacks nor reports, found them only afterwards);
    returns the experiment with each attack setting as the attacks type it (`shadows = 1.0` is
    `shadows = 1`), so that equal evaluations have one address and run once."""
    import dataclasses

    from fedattack.attacks.evaluation.request import build_attacks, names
    from fedattack.attacks.planning.default_audit import check_options
    from fedattack.attacks.planning.planner import is_default
    from fedattack.registry import ATTACKS, THREAT_MODELS
    from fedattack.reports.paper_numbers import lookup

    evaluations = []
    for ev in exp.evaluations:
        typed: dict[str, Any] = {}
        for spec in ev.specs():
            for name in names(spec.threat_models, THREAT_MODELS.names()):
                THREAT_MODELS.get(name)
            if is_default(spec):
                check_options(spec.settings)
                continue
            for attack in build_attacks(names(spec.attacks, ATTACKS.names()), spec.settings):
                for key in spec.settings:
                    if hasattr(attack.settings, key.replace("-", "_")):
                        typed.setdefault(key, getattr(attack.settings, key.replace("-", "_")))
        evaluations.append(dataclasses.replace(ev, settings={**ev.settings, **typed}))
    for key in exp.reproduces:
        lookup(key)
    return dataclasses.replace(exp, evaluations=tuple(evaluations))


@click.group("experiment")
def experiment_group() -> None:
    """Named experiments: train every federation, attack them, report (resumable)."""


@experiment_group.command("list")
def list_command() -> None:
    """The experiments shipped with fedattack (run one by name, or pass your own .toml)."""
    from fedattack.experiments import load, shipped

    for name, path in shipped().items():
        exp = load(path)
        paper = f" [reproduces {', '.join(exp.reproduces)}]" if exp.reproduces else ""
        click.echo(f"  {name:<22} {exp.description}{paper}")


@experiment_group.command("show")
@click.argument("name_or_file")
def show_command(name_or_file: str) -> None:
    """Print an experiment's file, e.g. to copy it as the start of your own."""
    from fedattack.experiments import resolve

    exp = resolve(name_or_file)
    assert exp.source is not None
    click.echo(exp.source.read_text(encoding="utf-8"), nl=False)


@experiment_group.command("run")
@click.argument("name_or_file")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Output folder [default: experiments/<name>]; run again with the same --out to resume.")
@data_root_option
@click.option("--download", is_flag=True, help="Download missing datasets.")
@click.option("--no-report", is_flag=True, help="Train and evaluate only.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@click.option("--backend", default="local", show_default=True, metavar="NAME",
              help="Where cells run: local = worker processes on this machine, sequential = one after "
                   "another in this process, ray = Ray tasks (see docs/sweeps.md).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Cells at once [default: this machine's cores; ray: the cluster's CPUs].")
@click.option("--address", default=None, help="--backend ray: the cluster to join (e.g. auto, or HOST:6379); "
              "without it a local Ray instance is started.")
@click.option("--max-cells", type=click.IntRange(min=1), default=None,
              help="The most federations, or evaluations, the experiment may have [default: 10,000]; "
                   "a larger grid is refused before anything is made.")
@click.option("--memory", default=None, metavar="SIZE",
              help="Resident memory the evaluations may use together, e.g. 8G, shared by the cells that run at "
                   "once [default: half the memory available]; see `fedattack evaluate --help`.")
@click.option("--time", "time_limit", default=None, metavar="DURATION",
              help="Each evaluation cell's time budget, e.g. 30m [default: none; the default audit plans for 30m].")
@plugin_option("a defence, method, model, attack or threat model the experiment names (every worker loads it)")
def run_command(name_or_file: str, out: str | None, data_root: str | None, download: bool,
                no_report: bool, quiet: bool, backend: str, workers: int | None, address: str | None,
                max_cells: int | None, plugins: tuple[str, ...], memory: str | None,
                time_limit: str | None) -> None:
    """Run NAME_OR_FILE end to end, skipping cells whose outputs already exist."""
    from fedattack.resources import parse_duration, parse_size

    summary = run_named(name_or_file, out, data_root, download, quiet, report=not no_report, backend=backend,
                        workers=workers, address=address, plugins=plugins, max_cells=max_cells,
                        memory=None if memory is None else parse_size(memory, "--memory"),
                        seconds=None if time_limit is None else parse_duration(time_limit, "--time"))
    if summary.report is not None:
        click.echo(f"report: {summary.report.with_name('report.html')}  (and {summary.report.name} beside it)")


COMMAND = experiment_group
