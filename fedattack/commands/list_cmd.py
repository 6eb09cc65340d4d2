"""`fedattack list`: everything that can be named, read from the registries.

The registries are read from the plugins' source (`fedattack.catalog`), so listing does not
import torch; a section whose source the scan cannot read is imported instead.
"""

from __future__ import annotations

import click

from fedattack.catalog import RegistryRef, entries, imported
from fedattack.commands.options import Choice, plugin_option

SECTIONS = {
    "methods": RegistryRef("fedattack.registry", "TARGETS"),
    "attacks": RegistryRef("fedattack.registry", "ATTACKS"),
    "threat-models": RegistryRef("fedattack.registry", "THREAT_MODELS"),
    "reconstructions": RegistryRef("fedattack.attacks.hidden_parts.base", "RECONSTRUCTIONS"),
    "datasets": RegistryRef("fedattack.registry", "DATASETS"),
    "partitions": RegistryRef("fedattack.registry", "PARTITIONS"),
    "models": RegistryRef("fedattack.registry", "MODELS"),
    "executors": RegistryRef("fedattack.federation.executors", "EXECUTORS"),
    "defences": RegistryRef("fedattack.defences.base", "DEFENCES"),
    "active-threat-models": RegistryRef("fedattack.registry", "ACTIVE"),
    "backends": RegistryRef("fedattack.experiments.backends.base", "BACKENDS"),
    "dp-bugs": RegistryRef("fedattack.audit.zoo", "BUGS"),  # not defences: planted by `fedattack audit --plant`
}


@click.command("list")
@click.argument("what", required=False, type=Choice(sorted(SECTIONS)))
@plugin_option("plugins of any kind, listed beside the built-ins")
def list_command(what: str | None, plugins: tuple[str, ...]) -> None:
    """List methods, attacks, threat models, reconstruction strategies, datasets, partitions, models,
    executors, defences, experiment backends and the audit's DP bugs (for `fedattack audit --plant`)."""
    read = imported if plugins else entries  # a plugin file is not in the source scan: import
    for section, ref in SECTIONS.items():
        if what and section != what:
            continue
        click.echo(click.style(section, bold=True))
        for entry in read(ref):
            click.echo(f"  {entry.name:<22} {entry.summary()}")


COMMAND = list_command
