"""The comparison between methods in words, and one compact ranked table per attack.

It follows the absolute verdict when a report holds several federations. Each comparison is one
plain sentence a reader can quote, stating the entry's one category (`verdict.category`); the
table beside it ranks the methods with the same numbers. Every number goes through
`numbers.shown`, in display units read from the results' metric declarations.
"""

from __future__ import annotations

import csv
from pathlib import Path

from fedattack.intervals import LEVEL, Interval
from fedattack.reports import numbers
from fedattack.reports.aggregate import Cell, Row, Table
from fedattack.reports.leakage import Reading
from fedattack.reports.verdict import Entry, Group, category

PHRASES = {"more": "leak{s} more than", "less": "leak{s} less than", "same": "cannot be told apart from",
           "undecided": "cannot be compared (no interval on one side) with"}


def _where(g: Group) -> str:
    """'Membership on digits, oracle (upper bound, reconstruction true)'."""
    threat = g.threat
    if g.reconstruction not in ("none", ""):
        extra = f"reconstruction {g.reconstruction}"
        threat = f"{threat[:-1]}, {extra})" if threat.endswith(")") else f"{threat} ({extra})"
    return f"{_capital(g.attack)} on {g.data}, {threat}"


def value(g: Group, m: Reading, s: Interval) -> str:
    return numbers.shown(s, m, g.units, against=() if m.chance is None else (m.chance,))


def signed(g: Group, m: Reading, d: Interval, paired: bool) -> str:
    units = f"{g.units}, paired" if paired else f"{g.units}, unpaired"
    return numbers.shown(d, m, units, signed=True, against=(0.0,))


def lead(g: Group) -> str:
    """The group's finding in one line: each entry's category against the reference, the most
    leaking entry with its interval, and what qualifies a number (chance, no interval)."""
    m = g.primary
    outcome: dict[tuple[str, str], list[Entry]] = {}
    for e in g.entries:
        kind = category(g, e)
        if kind in PHRASES and e.against:
            outcome.setdefault((kind, e.against), []).append(e)
    found = "; ".join(_outcome(kind, ref, es) + (_differences(g, es) if kind in ("more", "less") else "")
                      for (kind, ref), es in outcome.items())
    if not found:
        found = f"no {g.asked} results to compare with"
    top = g.entries[0]
    text = f"**{_where(g)}: {found}.** Most leakage: {top.name}, {m.label} {value(g, m, top.stats[m.key])}."
    return text + _unmeasurable(g) + _flag_text(g.entries)


def _who(entries: list[Entry]) -> tuple[str, int]:
    """'waffle-ibp (factors-all-on, factors-prior)': one method's reconstructions named once;
    with the number of methods (for the verb)."""
    by: dict[str, list[Entry]] = {}
    for e in entries:
        by.setdefault(e.method, []).append(e)
    names = [es[0].name if len(es) == 1 else f"{m} ({', '.join(e.reconstruction for e in es)})"
             for m, es in by.items()]
    return ", ".join(names), len(by)


def _outcome(kind: str, ref: str, entries: list[Entry]) -> str:
    who, methods = _who(entries)
    return f"{who} {PHRASES[kind].format(s='' if methods > 1 else 's')} {ref}"


def _differences(g: Group, entries: list[Entry]) -> str:
    """By how much: each difference for one or two entries; for more, the one nearest the
    reference and the farthest (every one is in the sentences below)."""
    m = g.primary
    pairs = [(e, e.diff) for e in entries if e.diff is not None]
    if len(pairs) <= 2:
        shown = [f"{e.name}: " * (len(pairs) > 1) + f"difference {signed(g, m, d.interval, d.paired)}"
                 for e, d in pairs]
        return f" ({'; '.join(shown)})" if shown else ""
    ordered = sorted(pairs, key=lambda p: abs(p[1].interval.mean))
    (near, d_near), (far, d_far) = ordered[0], ordered[-1]
    one = len({e.method for e in entries}) == 1  # then the method is named already: the reconstruction says which
    near_name, far_name = (e.reconstruction if one else e.name for e in (near, far))
    return (f" (differences from {signed(g, m, d_near.interval, d_near.paired)}, {near_name}, "
            f"to {signed(g, m, d_far.interval, d_far.paired)}, {far_name})")


def comparison(g: Group, e: Entry) -> str:
    """One comparison of `e` with its reference (or `e` alone where there is none), as a sentence."""
    m = g.primary
    ref = g.entry(e.against) if e.against else None
    kind = category(g, e)
    if ref is None or e.diff is None or kind not in PHRASES:
        return f"{e.name}: {m.label} {value(g, m, e.stats[m.key])}."
    a, b = e.stats[m.key], ref.stats[m.key]
    verb = PHRASES[kind].format(s="s")
    diff = "" if kind == "undecided" else f"; difference {signed(g, m, e.diff.interval, e.diff.paired)}"
    return (f"{e.name} {verb} {ref.name}: {m.label} {value(g, m, a)} against {value(g, m, b)}{diff}."
            f"{_secondary(g, e, ref)}")


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _secondary(g: Group, e: Entry, ref: Entry) -> str:
    if len(g.metrics) < 2 or not (e.measurable(g.metrics[1]) and ref.measurable(g.metrics[1])):
        return ""  # an unmeasurable secondary metric is said once, in the lead
    m = g.metrics[1]
    return f" {m.label} {value(g, m, e.stats[m.key])} against {value(g, m, ref.stats[m.key])}."


def _unmeasurable(g: Group) -> str:
    m = g.metrics[1] if len(g.metrics) > 1 else None
    if m is None or all(e.measurable(m) for e in g.entries):
        return ""
    worst = max(e.resolution or 0.0 for e in g.entries)
    return f" {m.label} not measurable (1/#non-members = {worst:.2g})."


def _flag_text(entries: list[Entry]) -> str:
    """' AUC holds chance (0.5): waffle-ibp, fedavg.', one clause per distinct flag."""
    holders: dict[str, list[str]] = {}
    for e in entries:
        for f in e.flags:
            holders.setdefault(f, []).append(e.name)
    return "".join(f" {_capital(f)}: {', '.join(ms)}." for f, ms in holders.items())


def items(groups: list[Group]) -> list[tuple[str, list[str]]]:
    """Per group its lead, and under it one sentence per comparison."""
    out = []
    for g in groups:
        compared = [e for e in g.entries if e.diff is not None]
        out.append((lead(g), [comparison(g, e) for e in (compared or g.entries)]))
    return out


def tables(groups: list[Group], reference: str) -> list[Table]:
    """One ranked table per attack: its headline metric and the difference to the reference; the
    other metrics and every flag are in the sentences and the CSV (a narrow table fits the page)."""
    by_attack: dict[str, list[Group]] = {}
    for g in groups:
        by_attack.setdefault(g.attack, []).append(g)
    one_dataset = len({g.data for g in groups}) == 1  # then the column says nothing
    out = []
    for attack, gs in by_attack.items():
        m = gs[0].primary
        labels = {m.key: m.label + (f" ({m.unit})" if m.unit else "") + f", {LEVEL:.0%} CI",
                  "diff": f"difference to {reference}"}
        table = Table(f"verdict-{attack}", f"{attack}: methods ranked by leakage", "verdict",
                      ["threat model", "rank", "method"] if one_dataset else ["data", "threat model", "rank", "method"],
                      [m.key, "diff"], labels=labels)
        for g in gs:
            for rank, e in enumerate(g.entries, 1):
                cells: dict[str, Cell] = {
                    m.key: numbers.shown(e.stats[m.key], g.primary, note="flag",
                                         against=() if m.chance is None else (m.chance,)),
                    "diff": (numbers.shown(e.diff.interval, g.primary, signed=True, note="flag", against=(0.0,))
                             if e.diff
                             else "reference" if e.method == g.reference else "—")}
                key = (g.threat, str(rank), e.name)
                table.rows.append(Row(key if one_dataset else (g.data, *key), cells, n=e.stats[g.primary.key].n))
        out.append(table)
    return out


def write_csv(groups: list[Group], path: Path) -> None:
    """Every interval at full precision, stored units, for other tools."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["dataset", "threat model", "attack", "reconstruction", "rank", "method", "metric", "mean",
                      "low", "high", "n", "category", "diff", "diff_low", "diff_high", "paired", "measurable",
                      "flags"])
        for g in groups:
            for rank, e in enumerate(g.entries, 1):
                for m in g.metrics:
                    s = e.stats[m.key]
                    d = e.diff.interval if e.diff and m == g.primary else None
                    diff = ("", "", "", "") if d is None or e.diff is None else (d.mean, d.low, d.high, e.diff.paired)
                    out.writerow([g.data, g.threat, g.attack, e.reconstruction, rank, e.method, m.key, s.mean, s.low,
                                  s.high, s.n, category(g, e), *diff, e.measurable(m), "; ".join(e.flags)])


def sentences(groups: list[Group]) -> list[str]:
    """Every line of the comparison as plain text (no Markdown marks): for a terminal or a test."""
    return [line.replace("**", "") for head, subs in items(groups) for line in (head, *subs)]
