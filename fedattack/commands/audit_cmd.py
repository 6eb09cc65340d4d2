"""`fedattack audit RUN`: the audited epsilon of a run's federation beside its accountant's.

The audit trains one new run with the spec of RUN plus canaries (a federation trained without
canaries cannot be audited after the fact) and writes `audit-<level>.json` beside nothing else:
the run directory itself is never modified.
"""

from __future__ import annotations

import dataclasses

import click

from fedattack.commands.options import Choice, data_root_option


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
@data_root_option
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="JSON file to write. Default: audit-<level>.json beside RUN_DIR.")
def audit_command(run_dir: str, level: str, canaries: int, confidence: float, executor: str | None,
                  data_root: str | None, out: str | None) -> None:
    """Plant canaries in one training run with RUN_DIR's spec; print the audited epsilon (Steinke,
    Nasr and Jagielski 2023) of the final model and of every round's model beside the claimed one."""
    from pathlib import Path

    from fedattack.atomic import write_json
    from fedattack.audit import AuditSpec, audit_federation
    from fedattack.federation.rundir import Federation

    spec = Federation(run_dir, deep_verify=False).spec
    if executor:
        spec = dataclasses.replace(spec, executor=executor)
    result = audit_federation(spec, AuditSpec(level=level, canaries=canaries, confidence=confidence), data_root)
    path = Path(out) if out else Path(run_dir).resolve().parent / f"{Path(run_dir).name}.audit-{level}.json"
    write_json(path, result)
    claim = result["claimed"]
    stated = "no claim" if claim["epsilon"] is None else f"{claim['epsilon']:.3g} ({claim['defence']})"
    for view, v in result["views"].items():
        click.echo(f"{level}-level, {view}: audited epsilon >= {v['epsilon']:.3g} at {confidence:.0%} "
                   f"confidence (delta {v['delta']:g}; {v['correct']}/{v['guesses']} guesses right, "
                   f"m={v['canaries']}, AUC {v['auc']:.2f}); claimed epsilon {stated}")
    click.echo(f"wrote {path} ({result['seconds']:.1f}s)")


COMMAND = audit_command
