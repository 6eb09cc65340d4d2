"""A report as a list of blocks, rendered to Markdown, CSV and one self-contained HTML file.

Building the content once and rendering it twice keeps `report.md` and `report.html` saying
the same thing. The HTML embeds every figure as base64 and uses no external stylesheet,
script or image, so it can be mailed or archived as a single file.
"""

from __future__ import annotations

import base64
import csv
import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fedattack.reports.aggregate import Cell, Stat, Table


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Paragraph:
    text: str


@dataclass
class TableBlock:
    table: Table
    csv: str          # path relative to the report folder
    all_metrics: bool = False


@dataclass
class Figure:
    path: Path        # absolute
    rel: str          # relative to the report folder
    caption: str


Item = str | tuple[str, list[str]] | tuple[str, list[str], list[str]]


@dataclass
class Bullets:
    """A list; an item may carry sub-items, folded away in HTML when there are more than `fold`,
    and a third list of sub-items that HTML always folds away under `folded` (Markdown shows all)."""

    items: Sequence[Item]
    fold: int = 1
    folded: str = "more"


def _parts(item: Item) -> tuple[str, list[str], list[str]]:
    if isinstance(item, str):
        return item, [], []
    if len(item) == 2:
        return item[0], list(item[1]), []
    return item[0], list(item[1]), list(item[2])


@dataclass
class Columns:
    """Side by side in HTML where the page is wide enough (wrapping below otherwise), in turn in Markdown."""

    left: list[Block]
    right: list[Block]


@dataclass
class Folded:
    """Folded away in HTML (<details>), a plain section in Markdown: kept, but out of the reader's way."""

    summary: str
    blocks: list[Block]


Block = Heading | Paragraph | TableBlock | Figure | Bullets | Columns | Folded


def fmt(cell: Cell, digits: int = 2) -> str:
    if cell is None:
        return "—"
    if isinstance(cell, str):
        return cell
    if cell.n == 0 or not math.isfinite(cell.mean):
        return "—"
    if cell.n == 1:
        return f"{cell.mean:.{digits}f}"
    return f"{cell.mean:.{digits}f} ± {cell.std:.{digits}f}"


def shown_metrics(table: Table, all_metrics: bool) -> list[str]:
    from fedattack.reports.metric_info import headline
    if all_metrics or table.kind == "compare":
        return table.metrics
    return headline(table.metrics, table.kind, table.declared) or table.metrics


def grid(table: Table, all_metrics: bool = False) -> tuple[list[str], list[list[str]]]:
    """Header and body cells exactly as both renderers print them."""
    metrics = shown_metrics(table, all_metrics)
    with_notes = any(r.note for r in table.rows)
    header = [*table.key_names, *(table.label(m) for m in metrics), "n", *(["note"] if with_notes else [])]
    body = []
    for row in table.rows:
        cells = [fmt(row.cells.get(m), _digits(table, m)) for m in metrics]
        body.append([*row.key, *cells, str(row.n), *([row.note] if with_notes else [])])
    return header, body


def _digits(table: Table, metric: str) -> int:
    from fedattack.reports.metric_info import info
    base = metric.split(":", 1)[1] if metric.startswith("paper:") else metric
    return table.digits.get(base, info(base, table.kind, table.declared).digits)


def write_csv(table: Table, path: Path) -> None:
    """Every metric with separate mean, std and n columns, full precision, for other tools."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        header = list(table.key_names)
        for m in table.metrics:
            paper = table.kind == "compare" and m.startswith("paper:")
            header += [m] if paper else [f"{m}_mean", f"{m}_std", f"{m}_n"]
        out.writerow([*header, "n", "note"])
        for row in table.rows:
            values: list[object] = list(row.key)
            for m in table.metrics:
                cell = row.cells.get(m)
                if isinstance(cell, Stat):
                    values += [_num(cell.mean), _num(cell.std), cell.n]
                elif table.kind != "compare" or not m.startswith("paper:"):
                    values += [cell or "", "", ""]
                else:
                    values.append(cell or "")
            out.writerow([*values, row.n, row.note])


def _num(x: float) -> str:
    return "" if not math.isfinite(x) else repr(x)


def to_markdown(blocks: list[Block]) -> str:
    return "\n".join(_md_lines(blocks)).rstrip() + "\n"


def _md_lines(blocks: list[Block]) -> list[str]:
    lines: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            lines += ["#" * b.level + " " + b.text, ""]
        elif isinstance(b, Paragraph):
            lines += [b.text, ""]
        elif isinstance(b, Bullets):
            for item in b.items:
                head, subs, folded = _parts(item)
                lines += [f"- {head}", *(f"  - {sub}" for sub in subs + folded)]
            lines.append("")
        elif isinstance(b, Columns):
            lines += _md_lines(b.left) + _md_lines(b.right)
        elif isinstance(b, Folded):
            lines += _md_lines([Heading(b.summary), *b.blocks])
        elif isinstance(b, TableBlock):
            header, body = grid(b.table, b.all_metrics)
            lines.append("| " + " | ".join(_md(c) for c in header) + " |")
            lines.append("|" + "|".join("---" for _ in header) + "|")
            lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in body]
            caption = f"{b.table.caption} " if b.table.caption else ""
            lines += ["", f"{caption}[CSV]({b.csv})", ""]
        elif isinstance(b, Figure):
            lines += [f"![{b.caption}]({b.rel})", "", f"*{b.caption}*", ""]
    return lines


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# Numbers and names never wrap (a "mean ± std" split over two lines reads as two numbers); notes may,
# and a table too wide for the page scrolls sideways rather than squeezing its cells.
STYLE = """body{font-family:system-ui,sans-serif;max-width:1240px;margin:1.5em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:3px 8px}
th{background:#f2f2f2}td{text-align:right;white-space:nowrap}td.key{text-align:left}td.note{text-align:left;white-space:normal;min-width:10em}
figure{margin:1em 0}img{max-width:100%}figcaption,.caption{color:#555;font-size:.9em}code{background:#f4f4f4}
.cols{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}.col{flex:1 1 560px;min-width:0}
.col.side{flex:1 1 380px}.col.side figure{margin-top:0}ul{padding-left:1.2em}li{margin:.25em 0}
details{margin:1em 0}.wide{overflow-x:auto}
li details{margin:.2em 0}li summary{font-weight:normal;color:#555;font-size:.9em}
summary{cursor:pointer;font-weight:600}"""


def to_html(blocks: list[Block], title: str) -> str:
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{STYLE}</style></head><body>", *_html_parts(blocks), "</body></html>"]
    return "\n".join(parts) + "\n"


def _html_parts(blocks: list[Block]) -> list[str]:
    parts: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            parts.append(f"<h{b.level}>{html.escape(b.text)}</h{b.level}>")
        elif isinstance(b, Paragraph):
            parts.append(f"<p>{html.escape(b.text)}</p>")
        elif isinstance(b, Bullets):
            parts.append(_html_list(b))
        elif isinstance(b, Columns):
            parts += ["<div class='cols'><div class='col'>", *_html_parts(b.left), "</div><div class='col side'>",
                      *_html_parts(b.right), "</div></div>"]
        elif isinstance(b, Folded):
            parts += [f"<details><summary>{html.escape(b.summary)}</summary>", *_html_parts(b.blocks), "</details>"]
        elif isinstance(b, TableBlock):
            parts.append(_html_table(b))
        elif isinstance(b, Figure):
            data = base64.b64encode(b.path.read_bytes()).decode("ascii")
            parts.append(f"<figure><img alt='{html.escape(b.caption)}' src='data:image/png;base64,{data}'>"
                         f"<figcaption>{html.escape(b.caption)}</figcaption></figure>")
    return parts


def _html_list(block: Bullets) -> str:
    out = []
    for item in block.items:
        head, subs, folded = _parts(item)
        inner = _ul(subs)
        if len(subs) > block.fold:
            inner = f"<details><summary>{len(subs)} comparisons, with their numbers</summary>{inner}</details>"
        if folded:
            inner += f"<details><summary>{html.escape(block.folded)}</summary>{_ul(folded)}</details>"
        out.append(f"<li>{_inline(head)}{inner}</li>")
    return "<ul>" + "".join(out) + "</ul>"


def _ul(items: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>" if items else ""


def _inline(text: str) -> str:
    """Escaped text with Markdown's **bold**, *italic* and `code`, the inline marks the report's
    sentences use (a verdict line names files and commands in backticks)."""
    code = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))
    bold = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", code)
    return re.sub(r"(?<![*\w])\*(?![*\s])([^*]+?)(?<!\s)\*(?![*\w])", r"<em>\1</em>", bold)


def _html_table(block: TableBlock) -> str:
    header, body = grid(block.table, block.all_metrics)
    keys = len(block.table.key_names)
    kinds = ["key" if i < keys else "note" if name in ("note", "flag") else "" for i, name in enumerate(header)]
    rows = ["<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in header) + "</tr>"]
    for row in body:
        cells = [f"<td class='{k}'>{html.escape(c)}</td>" if k else f"<td>{html.escape(c)}</td>"
                 for k, c in zip(kinds, row)]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    caption = f"<p class='caption'>{html.escape(block.table.caption)} (table: {html.escape(block.csv)})</p>"
    return "<div class='wide'><table>" + "".join(rows) + "</table></div>" + caption
