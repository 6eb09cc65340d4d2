"""The verdict in words and one compact table per attack, placed first in the report.

Each comparison is one plain sentence a reader can quote; the table beside it ranks the
methods with the same numbers. Numbers are shown in the report's display units (rates in
percent), read from the result's metric declarations where it carries them.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from fedattack.reports import document as doc
from fedattack.reports.aggregate import Cell, Row, Table
from fedattack.reports.collect import LoadedResult
from fedattack.reports.intervals import LEVEL, Interval
from fedattack.reports.leakage import Reading
from fedattack.reports.verdict import (
    MIN_N,
    REFERENCE,
    Entry,
    Group,
    build_groups,
    leak_word,
)


def value(m: Reading, s: Interval, with_n: bool = False) -> str:
    """'0.54 [0.51, 0.57]', or '0.54 (n=1, no interval)': never a ± 0 that looks certain."""
    if s.n == 0 or not math.isfinite(s.mean):
        return "—"
    v, d = s.scaled(m.scale), m.digits
    text = f"{v.mean:.{d}f}{m.suffix}"
    if not s.has_interval:
        return f"{text} (n={s.n}, no interval)"
    return f"{text} [{v.low:.{d}f}, {v.high:.{d}f}]" + (f" (n={s.n})" if with_n else "")


def _where(g: Group) -> str:
    """'Membership on digits, oracle (upper bound, reconstruction true)'."""
    threat = g.threat
    if g.reconstruction not in ("none", ""):
        extra = f"reconstruction {g.reconstruction}"
        threat = f"{threat[:-1]}, {extra})" if threat.endswith(")") else f"{threat} ({extra})"
    return f"{_capital(g.attack)} on {g.data}, {threat}"


def lead(g: Group) -> str:
    """The group's finding in one line: who leaks more or less than the reference, the most
    leaking entry with its interval, and every flag that qualifies what is said."""
    m = g.primary
    outcome: dict[tuple[str, str], list[Entry]] = {}
    for e in g.entries:
        ref = g.entry(e.against) if e.against else None
        if e.diff is None or ref is None:
            continue
        decided = e.stats[m.key].has_interval and ref.stats[m.key].has_interval
        kind = (leak_word(g, e) or "same") if decided else "none"
        outcome.setdefault((kind, ref.name), []).append(e)
    found = "; ".join(_outcome(kind, ref, es) + (_differences(m, es) if kind in ("more", "less") else "")
                      for (kind, ref), es in outcome.items())
    if not found:
        found = (f"no {g.asked} results to compare with" if len(g.entries) > 1
                 else f"only {g.entries[0].name} was audited")
    top = g.entries[0]
    text = f"**{_where(g)}: {found}.** Most leakage: {top.name}, {m.label} {value(m, top.stats[m.key], with_n=True)}."
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


def _differences(m: Reading, entries: list[Entry]) -> str:
    """By how much, on the first screen: each difference for one or two entries; for more, the
    one nearest the reference and the farthest (every one is in the sentences below)."""
    pairs = [(e, e.diff.interval) for e in entries if e.diff is not None]
    if len(pairs) <= 2:
        shown = [f"{e.name}: " * (len(pairs) > 1) + f"difference {_signed(m, d)}" for e, d in pairs]
        return f" ({'; '.join(shown)})" if shown else ""
    ordered = sorted(pairs, key=lambda p: abs(p[1].mean))
    (near, d_near), (far, d_far) = ordered[0], ordered[-1]
    one = len({e.method for e in entries}) == 1  # then the method is named already: the reconstruction says which
    near_name, far_name = (e.reconstruction if one else e.name for e in (near, far))
    return f" (differences from {_signed(m, d_near)}, {near_name}, to {_signed(m, d_far)}, {far_name})"


def _outcome(kind: str, ref: str, entries: list[Entry]) -> str:
    who, methods = _who(entries)
    if kind == "none":
        return f"nothing can be concluded for {who} against {ref} (fewer than two victims and seeds)"
    if kind == "same":
        return f"{who} cannot be told apart from {ref}"
    if kind == "neither":
        return f"neither {who} nor {ref} leaks detectably (not above chance)"
    return f"{who} leak{'' if methods > 1 else 's'} {kind} than {ref}"


def comparison(g: Group, e: Entry) -> str:
    """One comparison of `e` with its reference (or `e` alone where there is none), as a sentence."""
    m = g.primary
    ref = g.entry(e.against) if e.against else None
    if ref is None or e.diff is None:
        return f"{e.name}: {m.label} {value(m, e.stats[m.key], with_n=True)}."
    a, b = e.stats[m.key], ref.stats[m.key]
    if not a.has_interval or not b.has_interval:
        return f"{e.name} against {ref.name}: {m.label} {value(m, a)} against {value(m, b)}; nothing can be concluded."
    n = f"n={a.n} each" if a.n == b.n else f"n={a.n} and {b.n}"
    word = leak_word(g, e)
    verb = ("and " + ref.name + ": neither leaks detectably (not above chance)" if word == "neither"
            else f"leaks {word} than {ref.name}" if word else f"cannot be told apart from {ref.name}")
    how = "paired by victim and seed" if e.diff.paired else "unpaired"
    return (f"{e.name} {verb}: {m.label} {value(m, a)} against {value(m, b)} ({n}); "
            f"difference {_signed(m, e.diff.interval)}, {how}.{_secondary(g, e, ref)}")


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _signed(m: Reading, d: Interval) -> str:
    v, digits, unit = d.scaled(m.scale), m.digits, m.difference_unit
    if not v.has_interval:
        return f"{v.mean:+.{digits}f}{unit} (no interval)"
    return f"{v.mean:+.{digits}f}{unit} [{v.low:+.{digits}f}, {v.high:+.{digits}f}]"


def _secondary(g: Group, e: Entry, ref: Entry) -> str:
    if len(g.metrics) < 2 or not (e.measurable(g.metrics[1]) and ref.measurable(g.metrics[1])):
        return ""  # an unmeasurable secondary metric is said once, in the lead
    m = g.metrics[1]
    return f" {m.label} {value(m, e.stats[m.key])} against {value(m, ref.stats[m.key])}."


def _unmeasurable(g: Group) -> str:
    m = g.metrics[1] if len(g.metrics) > 1 else None
    if m is None or all(e.measurable(m) for e in g.entries):
        return ""
    worst = max(e.resolution or 0.0 for e in g.entries)
    return f" {m.label} not measurable (1/#non-members = {worst:.2g})."


def _flag_text(entries: list[Entry]) -> str:
    """' Too small to say (n=2): waffle-ibp, fedavg.', one clause per distinct flag."""
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


def sentences(groups: list[Group]) -> list[str]:
    """Every line of the verdict as plain text (no Markdown marks): for a terminal or a test."""
    return [line.replace("**", "") for head, subs in items(groups) for line in (head, *subs)]


def lead_lines(results: list[LoadedResult], reference: str = REFERENCE) -> list[str]:
    """The verdict's lead lines as plain text, for a command to print when it has written a report."""
    return [head.replace("**", "") for head, _ in items(build_groups(results, reference))]


def tables(groups: list[Group], reference: str) -> list[Table]:
    """One ranked table per attack (its headline metrics are its columns)."""
    by_attack: dict[str, list[Group]] = {}
    for g in groups:
        by_attack.setdefault(g.attack, []).append(g)
    one_dataset = len({g.data for g in groups}) == 1  # then the column says nothing
    out = []
    for attack, gs in by_attack.items():
        first = gs[0]
        metrics = first.metrics
        labels = {m.key: m.label + (f" ({m.unit})" if m.unit else "") + f", {LEVEL:.0%} CI" for m in metrics}
        labels["diff"] = f"difference to {reference}"
        labels["flag"] = "flag"
        table = Table(f"verdict-{attack}", f"{attack}: methods ranked by leakage", "verdict",
                      ["threat model", "rank", "method", "reconstruction"] if one_dataset
                      else ["dataset", "threat model", "rank", "method", "reconstruction"],
                      [metrics[0].key, "diff", *(m.key for m in metrics[1:]), "flag"], labels=labels)
        for g in gs:
            for rank, e in enumerate(g.entries, 1):
                cells: dict[str, Cell] = {m.key: value(m, e.stats[m.key]) if e.measurable(m) else "not measurable"
                                          for m in g.metrics}
                cells["diff"] = (_signed(g.primary, e.diff.interval) if e.diff
                                 else "reference" if e.method == g.reference else "—")
                cells["flag"] = "; ".join(f.split(" (")[0] for f in e.flags)  # reasons: in the lead
                key = (g.threat, str(rank), e.method, e.reconstruction)
                table.rows.append(Row(key if one_dataset else (g.data, *key), cells,
                                      n=e.stats[g.primary.key].n))
        out.append(table)
    return out


def write_csv(groups: list[Group], path: Path) -> None:
    """Every interval at full precision, stored units, for other tools."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["dataset", "threat model", "attack", "reconstruction", "rank", "method", "metric", "mean",
                      "low", "high", "n", "diff", "diff_low", "diff_high", "paired", "measurable", "flags"])
        for g in groups:
            for rank, e in enumerate(g.entries, 1):
                for m in g.metrics:
                    s = e.stats[m.key]
                    d = e.diff.interval if e.diff and m == g.primary else None
                    out.writerow([g.data, g.threat, g.attack, e.reconstruction, rank, e.method, m.key, s.mean, s.low,
                                  s.high, s.n, *(("", "", "") if d is None else (d.mean, d.low, d.high)),
                                  "" if d is None else e.diff.paired if e.diff else "", e.measurable(m),
                                  "; ".join(e.flags)])


def how_to_read(reference: str) -> str:
    return (f"Each number is the mean over victims and seeds with its {LEVEL:.0%} bootstrap interval (BCa, "
            "fixed seed: the same results give the same report). Differences are to "
            f"{reference}, paired by victim and seed where both attacked the same victims. "
            "'indistinguishable from chance': the interval holds chance (AUC 0.5, TPR = the FPR). "
            f"'too small to say': fewer than {MIN_N} victims and seeds, or an interval wider than a fifth of "
            "the metric's range (6 dB for PSNR). TPR at 1% FPR is shown only where the audits had at least "
            "100 non-members. Rank 1 leaks most.")


def verdict_blocks(results: list[LoadedResult], out: Path, figure: list[doc.Figure],
                   reference: str = REFERENCE) -> list[doc.Block]:
    """The report's first section: sentences and ranked tables, privacy against utility beside them."""
    groups = build_groups(results, reference)
    if not groups:
        return []
    write_csv(groups, out / "tables/verdict.csv")
    blocks: list[doc.Block] = [doc.Heading("Verdict"), doc.Columns([doc.Bullets(items(groups))], list(figure))]
    for t in tables(groups, reference):
        blocks += [doc.Heading(t.title, 3), doc.TableBlock(t, "tables/verdict.csv", all_metrics=True)]
    return [*blocks, doc.Paragraph(how_to_read(reference))]
