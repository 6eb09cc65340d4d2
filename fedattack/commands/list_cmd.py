"""`fedattack list`: everything that can be named, read from the registries."""

from __future__ import annotations

import dataclasses

import click

from fedattack.federation.executors import EXECUTORS
from fedattack.registry import ATTACKS, DATASETS, MODELS, PARTITIONS, TARGETS, THREAT_MODELS

SECTIONS = {"methods": TARGETS, "attacks": ATTACKS, "threat-models": THREAT_MODELS,
            "datasets": DATASETS, "partitions": PARTITIONS, "models": MODELS, "executors": EXECUTORS}


def summary(item: object) -> str:
    """The first line of an item's docstring, and its settings with defaults if it has any."""
    doc = (getattr(item, "__doc__", None) or "").strip().splitlines()
    line = doc[0] if doc else ""
    hyper = getattr(item, "Hyper", None) or getattr(item, "Options", None) or getattr(item, "Settings", None)
    if hyper is not None and dataclasses.is_dataclass(hyper):
        fields = ", ".join(f"{f.name}={f.default}" for f in dataclasses.fields(hyper)
                           if f.default is not dataclasses.MISSING)
        if fields:
            line += f" [{fields}]"
    return line


@click.command("list")
@click.argument("what", required=False, type=click.Choice(sorted(SECTIONS)))
def list_command(what: str | None) -> None:
    """List methods, attacks, threat models, datasets, partitions, models and executors."""
    for section, registry in SECTIONS.items():
        if what and section != what:
            continue
        click.echo(click.style(section, bold=True))
        for name, item in registry.items():
            click.echo(f"  {name:<22} {summary(item)}")


COMMAND = list_command
