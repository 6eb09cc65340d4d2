"""The `fedattack` command line: the one composition root.

Each command lives in its own module under `fedattack/commands/` and exposes `COMMAND`; this
file only collects them, refuses to start when fedattack's parts come from different checkouts
(`mixed_checkouts`), and turns every failure into one line on stderr and a non-zero exit:
a user mistake says what is wrong and how to fix it, a file-system failure (no space, no
permission, a read-only disk) names the file, and anything unexpected says so and points at
`--debug`, which shows the traceback instead.
"""

from __future__ import annotations

import errno
import importlib
import importlib.util
import pkgutil
import signal
import sys
from pathlib import Path

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


PARTS = ("targets", "attacks", "reports")  # installed as fedattack.<part> from the checkout's <part>/


def mixed_checkouts() -> str:
    """Why fedattack must not start ("" if it may): its core from one checkout and a part from
    another, as when a second checkout runs with the first one's environment (the core is found
    in the working folder, the parts through the environment's install), which mixes two
    versions of the code silently."""
    core = Path(fedattack.__file__).resolve().parent
    for part in PARTS:
        spec = importlib.util.find_spec(f"fedattack.{part}")
        if spec is None or spec.origin is None:
            return f"fedattack's {part} cannot be found beside its core ({core}); reinstall it (`pip install -e .`)"
        home = Path(spec.origin).resolve().parent.parent
        if home not in (core, core.parent):  # inside the installed package, or beside it in one checkout
            return (f"fedattack's core comes from {core.parent} but its {part} from {home}: two checkouts are "
                    f"mixed; run each checkout with its own environment (`pip install -e .` in {core.parent})")
    return ""


def main() -> None:
    problem = mixed_checkouts()
    if problem:
        click.echo(f"error: {problem}", err=True)
        sys.exit(2)
    signal.signal(signal.SIGTERM, raise_interrupt)  # clean up like Ctrl-C, not leave a partial run
    try:
        cli.main(standalone_mode=False)
    except UserError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except click.exceptions.Abort as exc:
        click.echo(f"error: interrupted; {interrupted(exc.__cause__)}", err=True)
        sys.exit(130)
    except click.UsageError as exc:
        where = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
        click.echo(f"error: {exc.format_message()}{where}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt as exc:
        click.echo(f"error: interrupted; {interrupted(exc)}", err=True)
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


def interrupted(exc: BaseException | None) -> str:
    """What an interrupt left: what the interrupted work says it kept, else nothing."""
    kept = str(exc) if isinstance(exc, KeyboardInterrupt) else ""
    return kept or "nothing was left half-written"


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
