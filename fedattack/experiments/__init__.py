"""Named experiments: TOML files that say what to train, how to attack it and what to report.

The shipped ones are the `*.toml` files in this folder, found by listing it (no list of names
is kept anywhere); `resolve` also accepts the path of a user's own file. The format is in
`fedattack.experiments.spec`; running one is `fedattack.experiments.runner.run_experiment`.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fedattack.experiments.grid import MAX_CELLS
from fedattack.experiments.spec import Experiment, load
from fedattack.registry import UserError
from fedattack.suggest import did_you_mean


def shipped() -> dict[str, Path]:
    """Name -> file of every experiment shipped with fedattack."""
    folder = resources.files(__name__)
    found = {}
    for item in folder.iterdir():
        if item.name.endswith(".toml") and item.is_file():
            found[item.name[: -len(".toml")]] = Path(str(item))
    return dict(sorted(found.items()))


def resolve(name_or_file: str, max_cells: int = MAX_CELLS) -> Experiment:
    """A shipped experiment by name, or a user's experiment file by path."""
    path = Path(name_or_file)
    if path.suffix == ".toml" or path.is_file():
        return load(path, max_cells)
    files = shipped()
    if name_or_file not in files:
        known = ", ".join(files) or "none"
        raise UserError(f"no experiment named {name_or_file!r}{did_you_mean(name_or_file, files)}; "
                        f"choose one of: {known}, or pass a .toml file")
    return load(files[name_or_file], max_cells)


__all__ = ["Experiment", "load", "resolve", "shipped"]
