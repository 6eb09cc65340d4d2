"""Grids: one experiment entry that stands for every combination of a few settings.

An audit compares methods x seeds x defences x settings; writing each combination as its own
entry is how such files go wrong. A `grid` table inside a [[federation]] or [[evaluation]] entry
names settings and the values each takes; the entry stands for the cartesian product (the
*cells*), each an ordinary entry with those values filled in:

    [[federation]]
    method = "fedavg"
    [federation.grid]
    lr = [0.05, 0.1]                         # any key of the entry
    seeds = [0, 1, 2]                        # methods / seeds / partitions too
    "hyper.mu" = [0.1, 1.0]                  # one key of an option table
    "partition-options.classes-per-client" = [2, 3]
    defences = [[], ["clip:max_norm=0.5"]]   # a whole defence stack per cell
    "defence.clip.max-norm" = [0.5, 1.0]     # one setting of a defence the cell has

    [evaluation.grid]
    "settings.shadows" = [2, 4]
    aux-size = [100, 200]

Keys are checked here against the entry's format, and a setting given both in the entry and in
its grid is refused: which one wins would be a guess. Values are checked when the cells become
specs (`plan`), and an error there names the cell by the grid values the user wrote. The cells
are counted before any is made: a grid of more than `limit` cells (nine axes of ten values are a
billion) is refused in one line that says how to raise the limit, instead of filling memory.
"""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

from fedattack.registry import UserError
from fedattack.suggest import did_you_mean

SINGULAR = {"methods": "method", "seeds": "seed", "partitions": "partition"}
TABLES = {"hyper", "partition_options", "settings"}  # option tables a dotted key reaches into
POINT = "grid_point"          # internal entry key: the cell's grid values, for messages
DEFENCE_SETTINGS = "defence_settings"  # internal entry key: {defence name: {setting: value}}
MAX_CELLS = 10_000  # cells of one experiment before `--max-cells` must be raised


def expand(entry: dict[str, Any], allowed: set[str], where: str, limit: int = MAX_CELLS) -> list[dict[str, Any]]:
    """The cells of `entry` (itself alone if it has no grid), each with its grid point."""
    grid = entry.get("grid")
    if grid is None:
        return [{k: v for k, v in entry.items() if k != "grid"}]
    if not isinstance(grid, dict) or not grid:
        raise UserError(f"{where}: grid must be a table of setting = [values], e.g. lr = [0.05, 0.1]")
    axes = [_axis(written, values, entry, allowed, where) for written, values in grid.items()]
    require_cells(math.prod(len(values) for _, _, values in axes), limit, f"{where}'s grid")
    base = {k: v for k, v in entry.items() if k != "grid"}
    cells = []
    for combo in itertools.product(*(values for _, _, values in axes)):
        cell = dict(base)
        for (_, path, _), value in zip(axes, combo):
            _assign(cell, path, value)
        cell[POINT] = ", ".join(f"{written}={_show(v)}" for (written, _, _), v in zip(axes, combo))
        cells.append(cell)
    return cells


def require_cells(count: int, limit: int, what: str) -> None:
    """Refuse `count` cells above `limit`, before any of them exists."""
    if count > limit:
        raise UserError(f"{what} has {count:,} cells, more than the limit of {limit:,}; remove values, or "
                        f"pass --max-cells {count} if you mean it")


def _axis(written: str, values: Any, entry: dict[str, Any], allowed: set[str],
          where: str) -> tuple[str, tuple[str, ...], list[Any]]:
    """(what the user wrote, where the value goes, the values), or a one-line refusal."""
    path = _path(written, allowed, where)
    if not isinstance(values, list) or not values:
        raise UserError(f"{where}: grid key {written!r} must list its values, e.g. {written} = [1, 2]")
    seen = [json.dumps(v, sort_keys=True) for v in values]
    if len(set(seen)) != len(seen):
        raise UserError(f"{where}: grid key {written!r} lists a value twice ({values!r})")
    if any(isinstance(v, dict) for v in values) and path[0] != "defences":
        raise UserError(f"{where}: grid key {written!r} takes plain values, not tables")
    if path[0] in SINGULAR.values() and any(isinstance(v, list) for v in values):
        raise UserError(f"{where}: grid key {written!r} takes one value per cell, not lists")
    _refuse_duplicate(written, path, entry, where)
    return written, path, values


def _path(written: str, allowed: set[str], where: str) -> tuple[str, ...]:
    head, *rest = [part.replace("-", "_") for part in str(written).split(".")]
    if SINGULAR.get(head) in allowed:  # a grid axis is one value per cell: `seeds` means `seed`
        head = SINGULAR[head]
    if head == "defence" and len(rest) == 2 and "defences" in allowed:
        return ("defence", rest[0].replace("_", "-"), rest[1])
    if rest and (head not in TABLES or head not in allowed or len(rest) != 1):
        raise UserError(f"{where}: unknown grid key {written!r}; a dotted key is one of "
                        f"{_dotted(allowed)}")
    if not rest and (head not in allowed or head in ("grid", "by_method")):
        known = ", ".join(sorted(k.replace("_", "-") for k in allowed - {"grid", "by_method"}))
        raise UserError(f"{where}: unknown grid key {written!r}{did_you_mean(written, known.split(', '))}; "
                        f"known keys: {known}")
    return (head, *rest)


def _dotted(allowed: set[str]) -> str:
    forms = [f"{t.replace('_', '-')}.NAME" for t in sorted(TABLES & allowed)]
    if "defences" in allowed:
        forms.append("defence.NAME.SETTING")
    return ", ".join(forms)


def _refuse_duplicate(written: str, path: tuple[str, ...], entry: dict[str, Any], where: str) -> None:
    head = path[0]
    plural = {v: k for k, v in SINGULAR.items()}.get(head)
    if len(path) == 1 and (head in entry or (plural is not None and plural in entry)):
        raise UserError(f"{where}: {written!r} is set both in the entry and in its grid; keep one")
    if len(path) == 2 and path[1] in (entry.get(head) or {}):
        raise UserError(f"{where}: {written!r} is set both in the entry's {head} table and in its grid; keep one")


def _assign(cell: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    if path[0] == "defence":
        overrides = {k: dict(v) for k, v in cell.get(DEFENCE_SETTINGS, {}).items()}
        overrides.setdefault(path[1], {})[path[2]] = value
        cell[DEFENCE_SETTINGS] = overrides
    elif len(path) == 2:
        cell[path[0]] = {**(cell.get(path[0]) or {}), path[1]: value}
    else:
        cell[path[0]] = value


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
