"""The report's first section: the absolute verdict, what the defences change, then the
comparison between methods where there are several.

The absolute lines come first because a user's first question is "what does an attacker learn
from my federation's wire?"; the comparison with other methods is the second. The same lines,
without Markdown, are what `fedattack quickstart` and `fedattack.report` print.
"""

from __future__ import annotations

from pathlib import Path

from fedattack.intervals import LEVEL
from fedattack.reports import document as doc
from fedattack.reports.absolute_section import blocks as absolute_blocks
from fedattack.reports.claims import build_claims
from fedattack.reports.collect import LoadedResult
from fedattack.reports.comparison_section import items, tables, write_csv
from fedattack.reports.defence_effect import effects
from fedattack.reports.numbers import FEW
from fedattack.reports.risk import thresholds
from fedattack.reports.verdict import REFERENCE, Group, build_groups

INTRO = ("What an attacker learns from each audited federation, per threat model, the strongest attack of each "
         f"family first. Each number is a mean over victims with its {LEVEL:.0%} bootstrap interval and n.")


def compared(groups: list[Group]) -> list[Group]:
    """The comparison groups that compare anything (more than one method or reconstruction)."""
    return [g for g in groups if len(g.entries) > 1]


def verdict_blocks(results: list[LoadedResult], out: Path, figure: list[doc.Figure],
                   reference: str = REFERENCE) -> list[doc.Block]:
    claims = build_claims(results)
    if not claims:
        return []
    fed = absolute_blocks(claims, results)
    blocks: list[doc.Block] = [doc.Heading("Verdict"), doc.Paragraph(INTRO),
                               doc.Bullets(fed, fold=99, folded="upper bound (the oracle, given the victim's "
                                                                  "private state on purpose)"),
                               doc.Paragraph(thresholds())]
    changed = [e for e in effects(claims, results) if e]
    if changed:
        blocks += [doc.Heading("What the defences change", 3), doc.Bullets(changed)]
    groups = compared(build_groups(results, reference))
    if groups:
        write_csv(groups, out / "tables/verdict.csv")
        blocks += [doc.Heading("Comparison between methods"), doc.Columns([doc.Bullets(items(groups))], list(figure))]
        for t in tables(groups, reference):
            blocks += [doc.Heading(t.title, 3), doc.TableBlock(t, "tables/verdict.csv", all_metrics=True)]
        blocks.append(doc.Paragraph(how_to_read(reference)))
    elif figure:
        blocks += list(figure)
    return blocks


def how_to_read(reference: str) -> str:
    return (f"Each number is the mean over victims and seeds with its {LEVEL:.0%} bootstrap interval (BCa, fixed "
            "seed: the same results give the same report), rounded to the interval's precision, with its n. An "
            f"interval from fewer than {FEW} victims is about their range and is flagged ('few'); one victim has no "
            "interval; victims that all scored the same have no spread to resample ('all equal'). Differences are "
            f"to {reference}, paired by victim and seed where both attacked the same victims. 'holds chance': the "
            "interval holds what a guessing attacker reaches (AUC 0.5). Rank 1 leaks most.")


def lead_lines(results: list[LoadedResult], reference: str = REFERENCE) -> list[str]:
    """The verdict as plain text, for a command to print when it has written a report: each
    federation's head and realistic lines, what the defences change, then each comparison's lead."""
    claims = build_claims(results)
    lines = []
    for head, real, _ in absolute_blocks(claims, results):
        lines += [head, *(f"  {line}" for line in real)]
    lines += [e for e in effects(claims, results) if e]
    lines += [head for head, _ in items(compared(build_groups(results, reference)))]
    return [line.replace("**", "").replace("*", "") for line in lines]


def bulleted(lines: list[str]) -> list[str]:
    """`lead_lines` as a terminal list: a federation's lines (indented) under its head."""
    return [f"  - {line.strip()}" if line.startswith(" ") else f"- {line}" for line in lines]
