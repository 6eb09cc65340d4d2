"""Option helpers shared by commands: `key=value` lists and registry-backed names.

Nothing here imports torch: `fedattack <command> --help` and a usage error must answer at once,
so a registry-backed option checks its value against the registry's catalogue (read from source,
`fedattack.catalog`) only when a value is given, never to build the help.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from fedattack.catalog import RegistryRef, names
from fedattack.registry import UserError
from fedattack.suggest import did_you_mean

F = TypeVar("F", bound=Callable[..., Any])


def parse_pairs(pairs: tuple[str, ...], what: str) -> dict[str, Any]:
    """`("mu=1.0", "q=0.001")` -> {"mu": "1.0", "q": "0.001"}; values are typed later."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"{what} {pair!r} is not key=value; write e.g. {what} {pair or 'key'}=VALUE")
        out[key.strip().replace("-", "_")] = value.strip()
    return out


class RegistryName(click.ParamType):
    """A name from a registry, checked (case-insensitively) only when a value is converted."""

    def __init__(self, variable: str, section: str, module: str = "fedattack.registry") -> None:
        self.ref = RegistryRef(module, variable)
        self.section = section
        self.name = section.rstrip("s").replace("-", " ")

    def _from_plugins(self) -> list[str]:
        """Names that `--plugin` files registered in this process (the source scan cannot see them)."""
        module = sys.modules.get(self.ref.module)
        registry = getattr(module, self.ref.variable, None) if module is not None else None
        return registry.registered() if registry is not None else []

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return self.name.upper().replace(" ", "_")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        known = sorted({*names(self.ref), *self._from_plugins()})
        by_lower = {n.lower(): n for n in known}
        if str(value).lower() in by_lower:
            return by_lower[str(value).lower()]
        self.fail(f"unknown {self.name} {value!r}{did_you_mean(value, known)}; choose one of: {', '.join(known)} "
                  f"(`fedattack list {self.section}` describes them)", param, ctx)

    def shell_complete(self, ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
        from click.shell_completion import CompletionItem

        return [CompletionItem(n) for n in names(self.ref) if n.startswith(incomplete)]


class Choice(click.Choice):
    """click's `Choice`, whose refusal also says which choice was probably meant."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            allowed = ", ".join(repr(str(c)) for c in self.choices)
            self.fail(f"{value!r}{did_you_mean(value, self.choices)} is not one of {allowed}", param, ctx)


def registry_help(section: str, text: str = "") -> str:
    return f"{text} See `fedattack list {section}`.".strip()


def data_root_option(func: F) -> F:
    return click.option("--data-root", envvar="FEDATTACK_DATA", type=click.Path(file_okay=False),
                        default=None, show_envvar=True,
                        help="Folder with the datasets (torchvision layout).")(func)


def _load_plugin_files(ctx: click.Context, param: click.Parameter, files: tuple[str, ...]) -> tuple[str, ...]:
    """Eager, so a plugin registers its names before the rest of the command line (and --help)
    is read."""
    from fedattack.registry import load_plugin_file

    for path in files:
        load_plugin_file(path)
    return files


def plugin_option(what: str) -> Callable[[F], F]:
    """`--plugin FILE` (repeatable): a user's .py file that registers `what` (a defence, a method,
    ...); the one option every command that takes plugins uses."""
    return click.option("--plugin", "plugins", multiple=True, type=click.Path(dir_okay=False), is_eager=True,
                        callback=_load_plugin_files,
                        help=f"A .py file registering {what} (repeatable; loaded before the other options).")
