"""`fedattack evaluate RUN_DIR`: attack what a threat model sees of a trained federation."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from fedattack.commands.hints import refuse_results_folder
from fedattack.commands.options import RegistryName, data_root_option, parse_pairs, plugin_option
from fedattack.evaluation import EvaluationSpec
from fedattack.registry import UserError


class RegistryHelp(click.Option):
    """An option whose help is written from a registry's catalogue when help is shown (plugins
    loaded by then count), so no list of names is kept here and neither building the CLI nor
    its help imports an attack."""

    def __init__(self, *args: Any, help: Callable[[], str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.make_help = help

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = self.make_help()
        return super().get_help_record(ctx)


def catalogued(variable: str) -> tuple[list[str], dict[str, Any]]:
    """The names a registry holds, read from the plugins' source (`fedattack.catalog`, no import),
    and the classes `--plugin` files registered in this process (imported already)."""
    from fedattack import registry
    from fedattack.catalog import RegistryRef, names

    loaded = dict(getattr(registry, variable).loaded())
    return sorted({*names(RegistryRef("fedattack.registry", variable)), *loaded}), loaded


def attack_help() -> str:
    """Each attack; a plugin's with the headline metrics it declares (`fedattack list attacks`
    says what every attack measures)."""
    known, loaded = catalogued("ATTACKS")
    parts = [f"{n} ({', '.join(m.title for m in loaded[n].metrics if m.headline)})" if n in loaded else n
             for n in known]
    return (f"{', '.join(parts)}; or all (repeatable). Default: the default audit, per threat model the "
            "strongest attacks that fit --memory and --time (docs/architecture.md, 'The default audit'). "
            "`fedattack list attacks` says what each measures.")


def threat_model_help() -> str:
    known, loaded = catalogued("THREAT_MODELS")
    parts = [n + (" (upper bound)" if n in loaded and loaded[n].upper_bound else "") for n in known]
    return (f"{', '.join(parts)}, a plugin's, or all (repeatable); `fedattack list threat-models` says what each "
            "sees. Default: the eavesdropper, and in the default audit every threat model that joins it "
            "where it fits the budget (the malicious server); a threat model named is audited alone.")


@click.command("evaluate")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--threat-model", "threat_models", multiple=True, default=("default",), show_default=True,
              cls=RegistryHelp, help=threat_model_help)
@click.option("--attack", "attacks", multiple=True, default=("default",), show_default=True,
              cls=RegistryHelp, help=attack_help)
@click.option("--victim", "victims", multiple=True, default=("random:5",), show_default=True,
              help="Client id (repeatable), all, or random:N. Intervals need several victims.")
@click.option("--reconstruction", default="strongest", show_default=True,
              help="How hidden parts are guessed: strongest (every applicable strategy; the strongest chosen "
                   "on the other victims, as a 'selected' result), auto (one), all, or strategy names "
                   "(comma-separated).")
@click.option("--memory", default=None, metavar="SIZE",
              help="Most resident memory the evaluation may use, e.g. 8G [default: half the memory available]. "
                   "Attacks work in chunks to fit it, or are refused before they start.")
@click.option("--time", "time_limit", default=None, metavar="DURATION",
              help="Most time the plan may take, e.g. 45m or 2h [default: none for named attacks; 30m for "
                   "the default audit's choice of attacks].")
@click.option("--aux-size", type=click.IntRange(min=0), default=None,
              help="Auxiliary samples from the test split [default: 40% of it].")
@click.option("--eval-size", type=click.IntRange(min=0), default=None,
              help="Evaluation-classifier samples from the test split [default: 30% of it].")
@click.option("--max-queries", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Most members judged per victim.")
@click.option("--nonmembers", type=click.IntRange(min=0), default=1000, show_default=True,
              help="Non-members judged per victim, in the members' class mix (at least as many as "
                   "members; fewer where the test split cannot supply them). TPR at 0.1% FPR needs 1,000.")
@click.option("--set", "options", multiple=True, metavar="KEY=VALUE",
              help="Attack setting, e.g. shadows=5 or steps=2000 (repeatable).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Folder for the results [default: results/<run name>].")
@click.option("--resume", is_flag=True, help="Add to a non-empty --out, skipping victims whose results are there.")
@click.option("--force", is_flag=True, help="Replace the results in a non-empty --out.")
@plugin_option("a threat model, attack or strategy (before --help, it shows there)")
@click.option("--executor", default="batched", show_default=True,
              help="Executor for shadow and reference models: batched trains each victim's together (and "
                   "inverts every victim's model at once); sequential, one at a time (the reference).")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="Torch CPU threads (1 is fastest for these small models on a shared machine).")
@click.option("--model", "models", multiple=True, metavar="MODULE:FACTORY",
              help="The import path of the user model the run was trained on (the run names it; "
                   "it is imported only when you pass it).")
@click.option("--dataset", "datasets", multiple=True, metavar="MODULE:FACTORY",
              help="The import path of the user dataset the run was trained on (likewise).")
@click.option("--backend", type=RegistryName("BACKENDS", "backends", "fedattack.experiments.backends.base"),
              default=None, help="Spread the victims over a sweep backend, each victim one task: local (processes "
                   "on this machine), ray (a Ray cluster), sequential (one after another here); the same "
                   "results as in one process [default: every victim in this process].")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="--backend local or ray: victims at once [default: the cores; ray: the cluster's CPUs]. "
                   "The memory budget is shared by the workers of this machine.")
@click.option("--address", default=None, help="--backend ray: the cluster to join (auto, or HOST:6379); "
              "without it a local Ray instance is started.")
@data_root_option
@click.option("--quiet", is_flag=True, help="No progress bar.")
def evaluate_command(run_dir: str, threat_models: tuple[str, ...], attacks: tuple[str, ...],
                     victims: tuple[str, ...], reconstruction: str, memory: str | None, time_limit: str | None,
                     aux_size: int | None,
                     eval_size: int | None, max_queries: int, nonmembers: int, options: tuple[str, ...], seed: int,
                     out: str | None, resume: bool, force: bool, executor: str, threads: int,
                     models: tuple[str, ...], datasets: tuple[str, ...], data_root: str | None,
                     quiet: bool, plugins: tuple[str, ...], backend: str | None, workers: int | None,
                     address: str | None) -> None:
    """Run attacks on RUN_DIR as a threat model sees it; one JSON result per victim plus a summary."""
    spec = EvaluationSpec(threat_models=threat_models, attacks=attacks, victims=victims,
                          reconstruction=reconstruction, aux_size=aux_size, eval_size=eval_size,
                          max_queries=max_queries, nonmembers=nonmembers, seed=seed, executor=executor,
                          settings=parse_pairs(options, "--set"))  # its mistakes answer before torch loads
    from fedattack.attacks.evaluation.results_folder import ResultsFolder, existing_mode
    from fedattack.resources import parse_duration, parse_size

    memory_bytes = None if memory is None else parse_size(memory, "--memory")
    seconds = None if time_limit is None else parse_duration(time_limit, "--time")
    runner = backend_of(backend, workers, address)  # refused in one line before the folder is touched
    refuse_results_folder(Path(run_dir))  # a results folder: say `report` reads it
    out_dir = Path(out) if out else Path("results") / Path(run_dir).name
    existing = existing_mode(resume, force)
    found = ResultsFolder(out_dir, existing).check()  # refused in one line before torch loads
    before = {p.name for p in found} if existing == "resume" else set()
    import torch  # here, not at the top: `fedattack --help` must not wait for torch

    from fedattack.attacks.evaluation.evaluate import evaluate_run
    from fedattack.attacks.planning.planner import budget_of, is_default

    torch.set_num_threads(threads)
    require_user_plugins(Path(run_dir), models, datasets)
    from fedattack.federation.rundir import Federation

    fed = Federation(run_dir)  # opened (and every file checked) once
    budget = shared_budget(budget_of(memory_bytes, seconds, is_default(spec)), runner)
    every = evaluate_run(fed, spec, out_dir, data_root=data_root, progress=not quiet, budget=budget,
                         echo=click.echo, existing=existing, resume_hint=resume_command(out_dir),
                         backend=runner, imports=worker_imports(plugins, models, datasets))
    print_summary(out_dir / "summary.json")
    victims_seen = {json.loads(p.read_text()).get("victim") for p in every}
    if len(victims_seen) == 1:
        click.secho("warning: one victim (n=1): no interval, the spread is not measured; "
                    "pass --victim random:5 or more", fg="yellow", bold=True, err=True)
    new = [p for p in every if p.name not in before]
    click.echo(f"{len(new)} new result(s), {len(every)} in all, and summary.json in {out_dir}")


def backend_of(name: str | None, workers: int | None, address: str | None) -> Any:
    """The sweep backend the victims are spread over, or None (this process); a bad combination
    (--address without ray, an address where nothing listens, Ray missing) is one line, and
    nothing is started yet (a backend starts workers when the evaluation enters it)."""
    if name is None:
        if workers is not None or address is not None:
            given = "--workers" if workers is not None else "--address"
            raise UserError(f"{given} spreads the victims over workers: pass --backend local or --backend ray too")
        return None
    from fedattack.experiments.backends import make_backend

    if name == "sequential" and workers is not None:
        raise UserError(f"--workers {workers}: the sequential backend runs one victim at a time in this process; "
                        "pass --backend local or --backend ray for workers")
    return make_backend(name, workers, address)


def shared_budget(budget: Any, runner: Any) -> Any:
    """The memory budget of one task: the whole budget shared by the workers that run on this
    machine at once (a cluster's nodes, joined by --address, each have their own memory)."""
    from dataclasses import replace

    if runner is None or runner.workers <= 1 or getattr(runner, "address", None) is not None:
        return budget
    return replace(budget, memory=budget.memory // runner.workers,
                   source=f"{budget.source}, shared by {runner.workers} {runner.name} workers")


def worker_imports(plugins: tuple[str, ...], models: tuple[str, ...],
                   datasets: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """What every worker registers before its first victim: the plugin files (by absolute path:
    a worker may start elsewhere) and the user's model and dataset import paths."""
    return (tuple(("plugin", str(Path(p).resolve())) for p in plugins)
            + tuple(("model", m) for m in models) + tuple(("dataset", d) for d in datasets))


def resume_command(out: Path) -> str:
    """This command line as the user typed it, with --resume instead of --force: what finishes an
    interrupted evaluation."""
    args = [a for a in sys.argv[1:] if a != "--force"]
    if "--out" not in args and not any(a.startswith("--out=") for a in args):
        args += ["--out", str(out)]
    return shlex.join(["fedattack", *args, *([] if "--resume" in args else ["--resume"])])


def require_user_plugins(run_dir: Path, models: tuple[str, ...], datasets: tuple[str, ...]) -> None:
    """Register the import paths the user passed; refuse in one line if the run needs another."""
    from fedattack.federation.storage import read_json
    from fedattack.interop.plugins import import_path_or_refuse, missing_plugins, register_dataset, register_model

    for path in models:
        register_model(import_path_or_refuse(path, "--model"))
    for path in datasets:
        register_dataset(import_path_or_refuse(path, "--dataset"))
    manifest = read_json(run_dir / "federation.json") if (run_dir / "federation.json").is_file() else None
    problem = missing_plugins(manifest) if isinstance(manifest, dict) else None
    if problem:
        raise UserError(f"{run_dir}: {problem}")


def print_summary(path: Path) -> None:
    """One line per (attack, threat model, reconstruction): the headline metrics' means over the
    victims, each with its 95% interval in brackets (as every table and report prints spread)."""
    for g in json.loads(path.read_text())["groups"]:
        label = f"{g['attack']:<11} {g['threat_model']:<13} {g['reconstruction']:<20}"
        if not g["applicable"]:
            more = f" (and {len(g['notes']) - 1} more)" if len(g["notes"]) > 1 else ""
            click.echo(f"{label} not applicable to {len(g['victims'])} victim(s): {g['notes'][0]}{more}")
            continue
        keys = g.get("headline") or tuple(g["metrics"])[:4]  # as the attack declared them
        parts = [f"{k} {spread(g['metrics'][k])}" for k in keys if k in g["metrics"]]
        bound = " (upper bound)" if g["upper_bound"] else ""
        click.echo(f"{label} {', '.join(parts)} [n={g['applicable']}]{bound}")



def spread(metric: dict[str, Any]) -> str:
    """`0.988 [0.975, 0.996]`: a mean and its 95% interval over victims (`summary.json`), or the
    mean alone where there is none (one victim)."""
    bounds = metric.get("interval", {})
    low, high = bounds.get("low"), bounds.get("high")
    return f"{metric['mean']:.3f}" + ("" if low is None or high is None else f" [{low:.3f}, {high:.3f}]")


COMMAND = evaluate_command
