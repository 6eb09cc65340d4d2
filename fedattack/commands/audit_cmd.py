"""`fedattack audit RUN`: the audited epsilon of a run's federation beside its accountant's.

The audit trains one new run with the spec of RUN plus canaries (a federation trained without
canaries cannot be audited after the fact) and writes `RUN.audit-<level>.json` beside RUN and
nothing else: the run directory itself is never modified, and an existing file at --out is
replaced only with --overwrite and only when it is an earlier audit. `--plugin` loads the file
that registered the run's own defence (or method, or model), as `fedattack train` did.

`--white-box` audits with canary clients on distinct coordinates, scored over every round's
model, and reports both one-run bounds (epsilon-delta and Gaussian DP); `--runs N` trains N small
federations with one such canary each on a sweep backend (`--backend`, `--workers`); `--plant BUG`
audits the run's spec with its dp-fedavg replaced by a bug of the zoo (`fedattack.audit.zoo`).
The file records the run it audited and the bug planted, so `fedattack report` states the audit
in that run's verdict wherever the file is (`reports/audits.py`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from fedattack.commands.options import Choice, data_root_option, plugin_option


@click.command("audit")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--level", type=Choice(["client", "example"]), default="client", show_default=True,
              help="Canary clients sending a random direction (Andrew et al. 2024) or mislabelled "
                   "canary images in the clients' data.")
@click.option("--canaries", type=click.IntRange(min=2), default=100, show_default=True,
              help="m: canaries, each included with probability 1/2.")
@click.option("--confidence", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95,
              show_default=True, help="Confidence of the lower bound.")
@click.option("--executor", default=None, help="Executor of the canary run. Default: the run's.")
@click.option("--white-box", "white_box", is_flag=True,
              help="Canary clients on distinct coordinates scored over every round's model (the server's "
                   "view): both one-run bounds, epsilon-delta (Steinke et al.) and Gaussian DP (Mahloujifar et al.).")
@click.option("--per-coordinate", type=click.IntRange(min=1), default=1, show_default=True,
              help="--white-box: at most this many canaries share a coordinate (more canaries than the model "
                   "has coordinates; they cost separation, never validity).")
@click.option("--runs", type=click.IntRange(min=10), default=None,
              help="Multi-run audit: this many small federations with one white-box canary each; a tenth "
                   "choose the threshold, the rest test it (thousands for a bound near the claim).")
@click.option("--backend", default=None, help="Where --runs run: a sweep backend [default: local].")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Workers of --backend.")
@click.option("--plant", "plants", multiple=True, metavar="BUG",
              help="Audit the run's spec with its dp-fedavg replaced by a zoo bug (`fedattack list dp-bugs`). Once.")
@data_root_option
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="JSON file to write. Default: RUN_DIR.audit-<level>.json beside RUN_DIR.")
@click.option("--overwrite", is_flag=True,
              help="Replace --out if it holds an earlier audit (nothing else is replaced).")
@plugin_option("the run's own defence, method or model (as passed to `fedattack train`)")
def audit_command(run_dir: str, level: str, canaries: int, confidence: float, executor: str | None,
                  white_box: bool, per_coordinate: int, runs: int | None, backend: str | None,
                  workers: int | None, plants: tuple[str, ...], data_root: str | None, out: str | None,
                  overwrite: bool,
                  plugins: tuple[str, ...]) -> None:
    """Plant canaries in one training run with RUN_DIR's spec; print the audited epsilon (Steinke,
    Nasr and Jagielski 2023) of the final model and of every round's model beside the claimed one."""
    from fedattack.atomic import write_json
    from fedattack.audit import AuditSpec, audit_federation
    from fedattack.audit.whitebox import WhiteBoxSpec
    from fedattack.federation.claim import PidLock
    from fedattack.federation.rundir import Federation
    from fedattack.registry import UserError

    mode = "multirun" if runs else "whitebox" if white_box else level
    if mode != level and level != "client":
        raise UserError("--white-box and --runs audit canary clients; drop --level example")
    backend, plant = spread_of(runs, backend, workers), one_plant(plants)
    path = Path(out) if out else Path(run_dir).resolve().parent / f"{Path(run_dir).name}.audit-{mode}.json"
    claim_file(path, overwrite)  # before the canary run, which takes minutes
    spec = Federation(run_dir, deep_verify=False).spec
    if plant:
        spec = dataclasses.replace(spec, defences=planted_defences(spec.defences, plant))
    require_defences(spec)
    if executor:
        spec = dataclasses.replace(spec, executor=executor)
    if mode != level:
        with PidLock(path.parent / f".{path.name}.lock", f"writing {path}"):
            result = {**white_box_result(spec, WhiteBoxSpec(canaries=canaries, confidence=confidence,
                                                            per_coordinate=per_coordinate),
                                        runs, backend, workers, data_root),
                      **of_run(run_dir, plant)}
            claim_file(path, overwrite)
            write_json(path, result)
        click.echo(f"{say(result)}\nwrote {path} ({result['seconds']:.1f}s)")
        return
    with PidLock(path.parent / f".{path.name}.lock", f"writing {path}"):
        result = {**audit_federation(spec, AuditSpec(level=level, canaries=canaries, confidence=confidence),
                                     data_root), **of_run(run_dir, plant)}
        claim_file(path, overwrite)  # and again: a file may have appeared meanwhile
        write_json(path, result)
    claim = result["claimed"]
    stated = "no claim" if claim["epsilon"] is None else f"{claim['epsilon']:.3g} ({claim['defence']})"
    for view, v in result["views"].items():
        click.echo(f"{level}-level, {view}: audited epsilon >= {v['epsilon']:.3g} at {confidence:.0%} "
                   f"confidence (delta {v['delta']:g}; {v['correct']}/{v['guesses']} guesses right, "
                   f"m={v['canaries']}, AUC {v['auc']:.2f}); claimed epsilon {stated}")
    click.echo(f"wrote {path} ({result['seconds']:.1f}s)")


def of_run(run_dir: str, plant: str | None) -> dict[str, Any]:
    """Which run the audit is of (so that `fedattack report` states it in that run's verdict,
    wherever --out put the file) and the zoo bug planted in its spec, if any."""
    return {"run": str(Path(run_dir).resolve()), "planted": plant}


def spread_of(runs: int | None, backend: str | None, workers: int | None) -> str:
    """The backend of --runs' federations; --backend or --workers without --runs would be ignored
    (the one-run audits train one federation here), so they are refused, as is a worker count the
    sequential backend cannot use."""
    from fedattack.experiments.backends import BACKENDS
    from fedattack.registry import UserError

    if runs is None and (backend is not None or workers is not None):
        given = "--backend" if backend is not None else "--workers"
        raise UserError(f"{given} spreads a multi-run audit's federations; pass --runs N (at least 10) too, "
                        "or drop it (a one-run audit trains one federation in this process)")
    chosen = backend or "local"
    BACKENDS.get(chosen)  # an unknown name is refused here, before anything is written
    if chosen == "sequential" and workers is not None:
        raise UserError(f"--workers {workers}: the sequential backend runs one federation at a time in this "
                        "process; pass --backend local for workers")
    return chosen


def one_plant(plants: tuple[str, ...]) -> str | None:
    from fedattack.registry import UserError

    if len(plants) > 1:
        raise UserError(f"--plant given {len(plants)} times ({', '.join(plants)}): a bug replaces the run's one "
                        "dp-fedavg, so plant one per audit")
    return plants[0] if plants else None


def planted_defences(defences: Any, bug: str) -> Any:
    from fedattack.audit.zoo import with_bug
    from fedattack.registry import UserError

    try:
        return with_bug(tuple(defences), bug)
    except ValueError:
        raise UserError(f"--plant {bug} replaces the run's dp-fedavg, and the run has none; audit a run "
                        "trained with --defence dp-fedavg") from None


def white_box_result(spec: Any, wb: Any, runs: int | None, backend: str, workers: int | None,
                     data_root: str | None) -> dict[str, Any]:
    from fedattack.audit.multirun import multirun_audit
    from fedattack.audit.whitebox import whitebox_audit

    if runs:
        return multirun_audit(spec, runs, backend, workers, wb.confidence, data_root)
    return whitebox_audit(spec, wb, data_root)


def say(result: dict[str, Any]) -> str:
    """The audit in one or two lines, beside the claim."""
    claim = result["claimed"]
    stated = "no claim" if claim["epsilon"] is None else f"{claim['epsilon']:.3g} ({claim['defence']})"
    if "bounds" in result:
        st, g = result["bounds"]["steinke"], result["bounds"]["gdp"]
        return (f"white-box, one run, m={g['canaries']}: audited epsilon >= {g['epsilon']:.3g} (Gaussian DP, "
                f"mu >= {g['mu']:.3g}) and >= {st['epsilon']:.3g} (epsilon-delta) at {g['confidence']:.0%} "
                f"confidence (delta {g['delta']:g}); claimed epsilon {stated}")
    b, e = result["bound"], result["estimate"]
    est = "none (the scores do not vary)" if e["mu"] is None else \
        f"{e['epsilon']:.3g} [{e['epsilon_low']:.3g}, {e['epsilon_high']:.3g}] (mu {e['mu']:.3g})"
    return (f"white-box, {result['runs']} runs: audited epsilon >= {b['epsilon_of_mu']:.3g} (Gaussian DP, mu >= "
            f"{b['mu']:.3g}: a bound for a mechanism of Gaussian shape) and >= {b['epsilon']:.3g} (epsilon-delta, "
            f"assuming nothing) at {result['confidence']:.0%} confidence (Clopper-Pearson, one threshold chosen on "
            f"{b.get('choosing_runs', 0)} held-out runs); Gaussian estimate {est}; claimed epsilon {stated}")


def require_defences(spec: Any) -> None:
    """A run trained with a plugin's defence needs that plugin again: say so, naming both."""
    from fedattack.audit.zoo import BUGS
    from fedattack.defences import DEFENCES
    from fedattack.registry import UserError

    for entry in spec.defences:
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name not in DEFENCES and name not in BUGS:
            raise UserError(f"the run was trained with the defence {name!r}, which nothing installed registers; "
                            "pass --plugin FILE, the file `fedattack train --plugin` was given")


def claim_file(path: Path, overwrite: bool, schema: str = "", what: str = "audit") -> None:
    """An existing --out is replaced only with --overwrite, and only if it is an earlier `what`
    (a JSON file of `schema`, default the audit's): never a user's own file."""
    from fedattack.audit import AUDIT_SCHEMA
    from fedattack.jsonfile import read_json
    from fedattack.registry import UserError

    if not path.exists() and not path.is_symlink():
        return
    if not overwrite:
        raise UserError(f"{path} already exists; choose another --out, or pass --overwrite to replace an "
                        f"earlier {what} there")
    try:
        ours = path.is_file() and not path.is_symlink() and \
            read_json(path, "", "").get("schema") == (schema or AUDIT_SCHEMA)
    except (UserError, AttributeError):
        ours = False
    if not ours:
        raise UserError(f"{path} is not a fedattack {what}; --overwrite replaces only an earlier {what}, so "
                        "nothing was touched (choose another --out)")


COMMAND = audit_command
