"""`fedattack evaluate RUN_DIR`: attack what a threat model sees of a trained federation."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from fedattack.commands.hints import refuse_results_folder
from fedattack.commands.options import data_root_option, parse_pairs
from fedattack.evaluation import EvaluationSpec
from fedattack.jsonfile import read_json
from fedattack.registry import UserError, load_plugin_file
from fedattack.results import RESULT_SCHEMA

SUMMARY_SCHEMA = "fedattack.summary/1"  # attacks.summary's; not imported here, it loads numpy

if TYPE_CHECKING:  # the command module imports no torch: `fedattack --help` stays fast
    from fedattack.federation.rundir import Federation


class RegistryHelp(click.Option):
    """An option whose help is written from a registry when help is shown (plugins loaded by then
    count), so no list of names is kept here and building the CLI imports no attack."""

    def __init__(self, *args: Any, help: Callable[[], str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.make_help = help

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = self.make_help()
        return super().get_help_record(ctx)


def load_plugins(ctx: click.Context, param: click.Parameter, plugins: tuple[str, ...]) -> None:
    """Eager, so plugins register before the rest of the command line (and --help) is read."""
    for plugin in plugins:
        load_plugin_file(plugin)


def attack_help() -> str:
    """Each registered attack with the headline metrics it declares."""
    from fedattack.registry import ATTACKS

    parts = [f"{name} ({', '.join(m.title for m in cls.metrics if m.headline)})" for name, cls in ATTACKS.items()]
    return (f"{'; '.join(parts)}; or all (repeatable). Default: the default audit, per threat model the "
            "strongest attacks that fit --memory and --time (docs/architecture.md, 'The default audit').")


def threat_model_help() -> str:
    from fedattack.registry import THREAT_MODELS

    parts = [name + (" (upper bound)" if cls.upper_bound else "") for name, cls in THREAT_MODELS.items()]
    return f"{', '.join(parts)}, a plugin's, or all (repeatable)."


@click.command("evaluate")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--threat-model", "threat_models", multiple=True, default=("eavesdropper",), show_default=True,
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
@click.option("--plugin", "plugins", multiple=True, type=click.Path(dir_okay=False), is_eager=True,
              callback=load_plugins, expose_value=False,
              help="A .py file registering a threat model, attack or strategy (repeatable; before "
                   "--help, it shows there).")
@click.option("--executor", default="sequential", show_default=True,
              help="Executor for shadow models; batched also inverts every victim's model at once.")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="Torch CPU threads (1 is fastest for these small models on a shared machine).")
@click.option("--model", "models", multiple=True, metavar="MODULE:FACTORY",
              help="The import path of the user model the run was trained on (the run names it; "
                   "it is imported only when you pass it).")
@click.option("--dataset", "datasets", multiple=True, metavar="MODULE:FACTORY",
              help="The import path of the user dataset the run was trained on (likewise).")
@data_root_option
@click.option("--quiet", is_flag=True, help="No progress bar.")
def evaluate_command(run_dir: str, threat_models: tuple[str, ...], attacks: tuple[str, ...],
                     victims: tuple[str, ...], reconstruction: str, memory: str | None, time_limit: str | None,
                     aux_size: int | None,
                     eval_size: int | None, max_queries: int, nonmembers: int, options: tuple[str, ...], seed: int,
                     out: str | None, resume: bool, force: bool, executor: str, threads: int,
                     models: tuple[str, ...], datasets: tuple[str, ...], data_root: str | None,
                     quiet: bool) -> None:
    """Run attacks on RUN_DIR as a threat model sees it; one JSON result per victim plus a summary."""
    spec = EvaluationSpec(threat_models=threat_models, attacks=attacks, victims=victims,
                          reconstruction=reconstruction, aux_size=aux_size, eval_size=eval_size,
                          max_queries=max_queries, nonmembers=nonmembers, seed=seed, executor=executor,
                          settings=parse_pairs(options, "--set"))  # its mistakes answer before torch loads
    from fedattack.resources import parse_duration, parse_size

    memory_bytes = None if memory is None else parse_size(memory, "--memory")
    seconds = None if time_limit is None else parse_duration(time_limit, "--time")
    refuse_results_folder(Path(run_dir))  # a results folder: say `report` reads it
    out_dir = Path(out) if out else Path("results") / Path(run_dir).name
    previous = claim_folder(out_dir, resume, force)
    replaced, previous = (previous, []) if force else ([], previous)
    import torch  # here, not at the top: `fedattack --help` must not wait for torch

    from fedattack.attacks.evaluation.evaluate import evaluate_run
    from fedattack.attacks.evaluation.summary import write_summary
    from fedattack.attacks.planning.planner import budget_of, is_default

    torch.set_num_threads(threads)
    require_user_plugins(Path(run_dir), models, datasets)
    from fedattack.federation.rundir import Federation

    fed = Federation(run_dir)  # opened (and every file checked) once, for the resume and the attacks
    spec = remaining(spec, fed, previous)
    budget = budget_of(memory_bytes, seconds, is_default(spec))
    with kept_intact(previous):  # --resume re-runs a victim whole: its results already there stay as they were
        written = (evaluate_run(fed, spec, out_dir, data_root=data_root, progress=not quiet, budget=budget,
                                echo=click.echo) if spec.victims else [])
    remove_results(p for p in replaced if p not in written)  # --force: only once the new ones are in
    if previous and written:  # --resume: the strongest strategy is chosen again over every victim
        from fedattack.attacks.evaluation.selection import select_strongest
        select_strongest(result_files(out_dir), out_dir)
    every = result_files(out_dir)  # the summary covers the whole folder, old results included
    write_summary(out_dir / "summary.json", every)
    print_summary(out_dir / "summary.json")
    victims_seen = {json.loads(p.read_text()).get("victim") for p in every}
    if len(victims_seen) == 1:
        click.secho("warning: one victim (n=1): no interval, the spread is not measured; "
                    "pass --victim random:5 or more", fg="yellow", bold=True, err=True)
    click.echo(f"{len(written)} new result(s), {len(every)} in all, and summary.json in {out_dir}")


def result_files(folder: Path) -> list[Path]:
    """The AttackResult files of an evaluation folder: JSON files that say they are one.

    A folder may hold the user's own JSON files too; those are not results, so they are never
    counted, summarised or deleted by --force."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.json")
                  if p.name != "summary.json" and not p.name.startswith(".") and _schema(p) == RESULT_SCHEMA)


def _schema(path: Path) -> object:
    try:
        data = read_json(path, "", "")
    except UserError:
        return None
    return data.get("schema") if isinstance(data, dict) else None


def claim_folder(folder: Path, resume: bool, force: bool) -> list[Path]:
    """Refuse to mix a new evaluation into old results unless asked; returns the results there.

    Mixing silently gave a summary of the new results and a report of all of them. --force
    replaces the old results only once the new ones are in place (`remove_results`), so a failed
    evaluation loses nothing."""
    if resume and force:
        raise UserError("--resume keeps the results in --out, --force replaces them: pass one")
    from fedattack.federation.claim import writer_of

    other = writer_of(folder.parent / f".{folder.name}.lock")  # checked again under the lock itself
    if other is not None:
        raise UserError(f"another fedattack process (pid {other}) is evaluating into {folder}; wait for it "
                        "or choose another --out")
    summary = folder / "summary.json"
    if summary.exists() and _schema(summary) != SUMMARY_SCHEMA:
        raise UserError(f"{summary} is not a fedattack summary and evaluate writes its summary there; "
                        "nothing was touched (choose another --out)")
    found = result_files(folder)
    if found and not (resume or force):
        raise UserError(f"{folder} already holds {len(found)} result(s); pass --resume to add to them "
                        "(victims already evaluated are skipped) or --force to replace them")
    return found


@contextlib.contextmanager
def kept_intact(previous: list[Path]) -> Iterator[None]:
    """The results (and artifact folders) in `previous` are put back as they were after the block:
    a victim evaluated again (one of its results was missing or truncated) must not rewrite its
    other results. Copies wait in a hidden folder beside them, removed afterwards."""
    if not previous:
        yield
        return
    folder = previous[0].parent
    aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.kept-", dir=folder.parent))
    try:
        for path in previous:
            shutil.copy2(path, aside / path.name)
            if path.with_suffix("").is_dir():
                shutil.copytree(path.with_suffix(""), aside / path.stem, symlinks=True)
        yield
        for path in previous:
            if path.read_bytes() != (aside / path.name).read_bytes():
                if path.with_suffix("").is_dir():
                    shutil.rmtree(path.with_suffix(""))
                if (aside / path.stem).is_dir():
                    os.replace(aside / path.stem, path.with_suffix(""))
                os.replace(aside / path.name, path)
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def remove_results(paths: Iterable[Path]) -> None:
    """Delete old results (and their artifact folders) that the new evaluation did not replace."""
    for path in paths:
        artifacts = path.with_suffix("")
        if artifacts.is_dir():
            shutil.rmtree(artifacts)
        path.unlink(missing_ok=True)


def remaining(spec: EvaluationSpec, fed: Federation, previous: list[Path]) -> EvaluationSpec:
    """The spec without the victims whose every (threat model, attack) result is already there."""
    if not previous:
        return spec
    from fedattack.attacks.evaluation.request import names, parse_victims
    from fedattack.attacks.planning.default_audit import DEFAULT
    from fedattack.registry import ATTACKS, THREAT_MODELS

    threats = names(spec.threat_models, THREAT_MODELS.names())
    if DEFAULT in spec.attacks:  # the default audit's attacks depend on the budget: a victim is
        wanted = {(tm, "*") for tm in threats}  # done once every threat model has its results
    else:
        wanted = {(tm, a) for tm in threats for a in names(spec.attacks, ATTACKS.names())}
    done: dict[int, set[tuple[str, str]]] = {}
    made: list[object] = []
    for path in previous:
        r = json.loads(path.read_text())
        done.setdefault(int(r["victim"]), set()).update({(r["threat_model"], r["attack"]), (r["threat_model"], "*")})
        made.append((r.get("extra") or {}).get("software"))
    chosen = parse_victims(spec.victims, fed, spec.seed)
    todo = tuple(str(v) for v in chosen if not wanted <= done.get(v, set()))
    skipped = len(chosen) - len(todo)
    if skipped:
        click.echo(f"resume: {skipped} victim(s) already evaluated in this folder, skipped{_other_software(made)}")
    return replace(spec, victims=todo)


def _other_software(made: list[object]) -> str:
    """A note when results kept by --resume were made by other software than this one."""
    from fedattack.provenance import describe, made_elsewhere, software

    other = [m for m in made if made_elsewhere(m)]
    if not other:
        return ""
    return (f"; {len(other)} of the results kept were made by other software than this "
            f"({describe(software())}): --force recomputes them")


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
