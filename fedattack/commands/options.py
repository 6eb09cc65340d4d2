"""Option helpers shared by commands: `key=value` lists and registry-backed choices."""

from __future__ import annotations

from typing import Any

import click

from fedattack.registry import Registry, UserError

# The papers' per-dataset choices (WAFFLe appendix C). `digits` is not in the papers: its 1,437
# training images over 10 clients need more clients per round and a larger step to learn in
# the few seconds a first run should take.
DATASET_DEFAULTS: dict[str, dict[str, Any]] = {
    "digits": {"model": "digits-mlp", "lr": 0.1, "fraction": 0.3},
    "mnist": {"model": "mnist-mlp", "lr": 0.04},
    "fmnist": {"model": "fmnist-cnn", "lr": 0.02},
    "cifar10": {"model": "cifar-cnn", "lr": 0.02},
}
GLOBAL_DEFAULTS: dict[str, Any] = {"model": "lenet5", "lr": 0.04, "fraction": 0.1}


def dataset_default(dataset: str, key: str, given: Any) -> Any:
    """The user's value if given, else the papers' choice for this dataset, else the global one."""
    if given is not None:
        return given
    return DATASET_DEFAULTS.get(dataset, {}).get(key, GLOBAL_DEFAULTS[key])


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
