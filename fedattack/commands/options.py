"""Option helpers shared by commands: `key=value` lists and registry-backed choices."""

from __future__ import annotations

from typing import Any

import click

from fedattack.registry import Registry, UserError

DEFAULT_MODELS = {"digits": "digits-mlp", "mnist": "mnist-mlp", "fmnist": "fmnist-cnn",
                  "cifar10": "cifar-cnn"}


def parse_pairs(pairs: tuple[str, ...], what: str) -> dict[str, Any]:
    """`("mu=1.0", "q=0.001")` -> {"mu": "1.0", "q": "0.001"}; values are typed later."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"{what} {pair!r} is not key=value; write e.g. {what} mu=1.0")
        out[key.strip().replace("-", "_")] = value.strip()
    return out


def choice(registry: Registry) -> click.Choice:
    return click.Choice(registry.names(), case_sensitive=False)


def data_root_option(func):  # type: ignore[no-untyped-def]
    return click.option("--data-root", envvar="FEDATTACK_DATA", type=click.Path(file_okay=False),
                        default=None, show_envvar=True,
                        help="Folder with the datasets (torchvision layout).")(func)
