"""The tables of docs/active-server.md, rendered from their evidence (docs/evidence/active-server/).

`benchmarks/lab/active_server.py evidence --out DIR` writes each table's per-victim rows (per
federation for the false alarms) with a `"render"` key naming one of the functions here; each
takes the parsed JSON and returns the table's Markdown exactly as the page shows it, between its
`<!-- evidence: active-server/<table> -->` markers. Nothing is measured here: a cell is the mean
over the victims with its 95% percentile bootstrap interval (2,000 resamples, scipy, seeded),
recomputed from the rows. Only the standard library at the top, so rebuilding a page is quick.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

RESAMPLES = 2000
HERE = "benchmarks/lab/active_server_tables.py"


def interval(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high) of the victims' values: the 95% percentile bootstrap interval of the mean
    (low = high = mean where every victim gave the same value, or there is one)."""
    mean = sum(values) / len(values)
    if len(values) < 2 or all(v == values[0] for v in values):
        return mean, mean, mean
    import numpy as np
    from scipy.stats import bootstrap

    ci = bootstrap((np.asarray(values, dtype=float),), np.mean, confidence_level=0.95, method="percentile",
                   n_resamples=RESAMPLES, random_state=np.random.default_rng(0)).confidence_interval
    return mean, float(ci.low), float(ci.high)


def percent(values: Sequence[float]) -> str:
    """`98 [97, 99]`: a share in % with its interval, or the mean alone where it has none."""
    mean, low, high = (100 * v for v in interval(values))
    return f"{mean:.0f}" if low == high else f"{mean:.0f} [{low:.0f}, {high:.0f}]"


def markdown(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def grouped(rows: list[dict[str, Any]], *keys: str) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    out: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(tuple(row[k] for k in keys), []).append(row)
    return out


def shares(data: dict[str, Any]) -> str:
    """One setting at one threshold: rows method + defences, columns the readings ("-": not run)."""
    cells = grouped(data["rows"], "row", "column")
    body = [[label, *(percent([r[data["metric"]] for r in cells[(label, col)]]) if (label, col) in cells else "-"
                      for col in data["columns"])] for label in data["row_order"]]
    return markdown(["method + defences", *data["columns"]], body)


def before_after(data: dict[str, Any]) -> str:
    """The verbatim share of each acting cell read with the readout of 80c64d1 (near-duplicate
    candidates dropped, the earlier kept) and with the corrected one (every candidate, matched
    one to one), on the same federations and victims."""
    body = []
    for (setting, label, column), rows in grouped(data["rows"], "setting", "row", "column").items():
        changed = sum(r["recovered_40"] != r["recovered_40_before"] for r in rows)
        diffs = [r["recovered_40"] - r["recovered_40_before"] for r in rows]
        mean, low, high = (100 * v for v in interval(diffs))
        gain = f"{mean:+.1f}" if low == high else f"{mean:+.1f} [{low:+.1f}, {high:+.1f}]"
        body.append([setting, label, column, percent([r["recovered_40_before"] for r in rows]),
                     percent([r["recovered_40"] for r in rows]), gain, f"{changed} of {len(rows)}"])
    return markdown(["setting", "method + defences", "reading", "verbatim before", "verbatim after",
                     "after - before (points)", "victims that changed"], body)


def check_stops(data: dict[str, Any]) -> str:
    """What downlink-check stops: each attack with and without it, and what it refused."""
    body = []
    for (setting, attack), rows in grouped(data["rows"], "setting", "attack").items():
        without = [r["recovered_20"] for r in rows if not r["checked"]]
        with_it = [r["recovered_20"] for r in rows if r["checked"]]
        refused = data["refused"][f"{setting}|{attack}"]
        reasons = "; ".join(f"{n}: {why}" for why, n in refused["reasons"].items())
        body.append([setting, attack, percent(without) if without else "-", percent(with_it),
                     f"{refused['refused']} of {refused['checked']}" + (f" ({reasons})" if reasons else "")])
    return markdown(["setting", "attack", "recovered > 20 dB without the check", "with it", "downlinks refused"], body)


def false_alarms(data: dict[str, Any]) -> str:
    """Honest federations with the check: what it refused (every refusal a false alarm)."""
    body = [[r["federation"], str(r["checked"]), str(r["refused"]),
             ", ".join(f"{name} {value:.2f}" for name, value in r["least_row_cosine"].items())] for r in data["rows"]]
    return markdown([f"honest federation ({data['rounds']} rounds)", "downlinks checked", "refused (false alarms)",
                     "lowest mean row cosine between a client's two downlinks"], body)
