"""The `fedattack` command line: the one composition root.

Each command lives in its own module under `fedattack/commands/` and exposes `COMMAND`; this
file only collects them, and turns a user mistake into one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import importlib
import pkgutil
import signal
import sys
from types import FrameType

import click

import fedattack.commands
from fedattack.registry import UserError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="fedattack")
def cli() -> None:
    """Train federations, attack what crosses their wire, and report privacy beside utility."""


def _add_commands() -> None:
    for info in sorted(pkgutil.iter_modules(fedattack.commands.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"fedattack.commands.{info.name}")
        command = getattr(module, "COMMAND", None)
        if command is not None:
            cli.add_command(command)


_add_commands()


def _interrupt_on_terminate(signum: int, frame: FrameType | None) -> None:
    """A scheduler's or `kill`'s SIGTERM should clean up like Ctrl-C, not leave a partial run."""
    raise KeyboardInterrupt


def main() -> None:
    signal.signal(signal.SIGTERM, _interrupt_on_terminate)
    try:
        cli.main(standalone_mode=False)
    except UserError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("error: interrupted; nothing was left half-written", err=True)
        sys.exit(130)
    except click.UsageError as exc:
        where = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
        click.echo(f"error: {exc.format_message()}{where}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("error: interrupted; nothing was left half-written", err=True)
        sys.exit(130)
