"""The `fedattack` command line: the one composition root.

Each command lives in its own module under `fedattack/commands/` and exposes `COMMAND`; this
file only collects them, and turns every failure into one line on stderr and a non-zero exit:
a user mistake says what is wrong and how to fix it, a file-system failure (no space, no
permission, a read-only disk) names the file, and anything unexpected says so and points at
`--debug`, which shows the traceback instead.
"""

from __future__ import annotations

import errno
import importlib
import pkgutil
import signal
import sys

import click

import fedattack.commands
from fedattack.interrupts import raise_interrupt
from fedattack.registry import UserError

DEBUG = "--debug"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="fedattack")
@click.option(DEBUG, is_flag=True, help="Show the Python traceback of an unexpected error.")
def cli(debug: bool) -> None:
    """Train federations, attack what crosses their wire, and report privacy beside utility."""


def _add_commands() -> None:
    for info in sorted(pkgutil.iter_modules(fedattack.commands.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"fedattack.commands.{info.name}")
        command = getattr(module, "COMMAND", None)
        if command is not None:
            cli.add_command(command)


_add_commands()


def main() -> None:
    signal.signal(signal.SIGTERM, raise_interrupt)  # clean up like Ctrl-C, not leave a partial run
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
    except OSError as exc:
        if DEBUG in sys.argv:
            raise
        click.echo(f"error: {describe_os_error(exc)}", err=True)
        sys.exit(1)
    except Exception as exc:  # noqa: BLE001 - the last resort: one line, the traceback on request
        if DEBUG in sys.argv:
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        click.echo(f"error: unexpected {type(exc).__name__}: {first}; this is a fedattack bug: "
                   f"run again with `fedattack {DEBUG} ...` for the traceback and report it", err=True)
        sys.exit(1)


def describe_os_error(exc: OSError) -> str:
    """What the file system refused, on which file, and what to do about it."""
    where = f" ({exc.filename})" if exc.filename else ""
    fixes = {errno.ENOSPC: "the disk is full; free some space or write somewhere else",
             errno.EDQUOT: "the disk quota is used up; free some space or write somewhere else",
             errno.EROFS: "the file system is read-only; write somewhere else",
             errno.EACCES: "permission denied; choose a folder you may write to",
             errno.EPERM: "operation not permitted; choose a folder you may write to",
             errno.ENOTDIR: "a part of the path is a file, not a folder; choose another path",
             errno.EEXIST: "something is already there (a file where a folder is needed?); choose another path"}
    reason = fixes.get(exc.errno or -1, f"{exc.strerror or exc}; check the path and try again")
    return f"{reason}{where}"
