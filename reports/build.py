"""`build_report`: result files in, a folder with tables, figures, report.md and report.html out.

Layout of the output folder:
  report.md, report.html   the report (the HTML embeds its figures: one file to share)
  tables/*.csv              every table with mean, std and n per metric at full precision
  figures/*.png             ROC curves, inversion grids, privacy against utility
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from fedattack import provenance
from fedattack.atomic import write_text
from fedattack.reports import document as doc
from fedattack.reports.aggregate import Row, Stat, Table, attack_tables, utility_table
from fedattack.reports.collect import Inputs, collect
from fedattack.reports.compare import comparison
from fedattack.reports.figures import privacy_utility_figure, roc_figures
from fedattack.reports.inversion_grid import inversion_figures
from fedattack.reports.paper_numbers import lookup
from fedattack.reports.per_client import per_client_blocks
from fedattack.reports.setup_section import setup_blocks
from fedattack.reports.verdict import REFERENCE, require_reference
from fedattack.reports.verdict_section import verdict_blocks


def build_report(paths: Sequence[str | Path], out: str | Path, papers: Iterable[str] = (),
                 title: str = "fedattack report", figures: bool = True, intro: str = "",
                 reference: str = REFERENCE, caveat: str = "", require: bool = False) -> Path:
    """Render the report of every result and run under `paths`; returns the report.md path.

    The verdict (`verdict_section.py`) comes first, comparing every method with `reference`, after
    the experiment's `caveat` (what its numbers are not) where it has one; `require`: the
    reference was named by the user, so results without it are refused."""
    papers = list(dict.fromkeys(papers))
    for key in papers:
        lookup(key)  # refuse an unknown table before reading anything
    inputs = collect(paths)
    if require:
        require_reference(inputs.results, reference)
    out = Path(out)
    extra = {m for key in papers for m in lookup(key)[0].metrics}
    tables = [t for t in [utility_table(inputs, extra), *attack_tables(inputs)] if t is not None]
    compared = [comparison(key, tables) for key in papers]
    blocks: list[doc.Block] = [doc.Heading(title, 1)]
    blocks += [doc.Paragraph(f"Caveat: {caveat}")] if caveat else []
    blocks += verdict_blocks(inputs.results, out, _verdict_figure(inputs, tables, out) if figures else [], reference)
    blocks += [*([doc.Paragraph(intro)] if intro else []), doc.Paragraph(_summary(inputs))]
    blocks += setup_blocks(inputs.results) + per_client_blocks(inputs.results)
    blocks += _table_blocks("Results", tables, out)
    if compared:
        blocks += [doc.Heading("Beside the papers' numbers"),
                   doc.Paragraph("The papers' published numbers next to ours for the same method, "
                                 "dataset and partition. They are references only; nothing was tuned "
                                 "to match them, and settings may differ (see each table's source).")]
        blocks += _table_blocks(None, compared, out)
    if figures:
        blocks += _figure_blocks(inputs, tables, out)
    blocks += _provenance(inputs, out)
    write_text(out / "report.md", doc.to_markdown(blocks))  # atomic: a report being rewritten is
    write_text(out / "report.html", doc.to_html(blocks, title))  # never read half-written
    return out / "report.md"


def _summary(inputs: Inputs) -> str:
    attacks = sorted({r.result.attack for r in inputs.results})
    unknown = sum(1 for r in inputs.results if not r.run.defences_known)
    old = (f" {unknown} result(s) predate the recording of a run's defences and their runs are out of reach: "
           "they are taken as undefended." if unknown else "")
    return (f"{len(inputs.results)} attack result(s) ({', '.join(attacks) or 'none'}) on {len(inputs.runs)} "
            f"federation(s).{old} {software_note(inputs)} Each cell is the mean ± the standard "
            "deviation (population, ddof=0) over the n seeds and victims of its row; rates are in percent. "
            "A threat model marked 'upper bound' (the oracle) was given the victim's private state on "
            "purpose and is not a realistic adversary.")


def software_note(inputs: Inputs) -> str:
    """What made the runs and results: one line when it was one version, and a warning when not
    (an experiment rerun after an upgrade reuses the cells the old version made)."""
    runs = provenance.distinct(r.software for r in inputs.runs if r.path is not None)
    results = provenance.distinct(provenance.recorded(r.result.extra.get("software")) for r in inputs.results)
    unknown = provenance.comparable(None)

    def count(found: dict[tuple[str, ...], tuple[Any, int]], key: tuple[str, ...]) -> int:
        return found.get(key, (None, 0))[1]

    keys = [k for k in dict.fromkeys([*runs, *results]) if k != unknown]
    parts = [f"{provenance.describe((runs.get(k) or results[k])[0])} "
             f"({count(runs, k)} run(s), {count(results, k)} result(s))" for k in keys]
    unrecorded = count(runs, unknown) + count(results, unknown)
    old = f" {unrecorded} run(s) or result(s) predate the recording of software." if unrecorded else ""
    built = f"This report: {provenance.describe(provenance.software())}."
    if len(keys) <= 1:
        return f"Made by {parts[0] if parts else 'unrecorded software'}.{old} {built}"
    return (f"**Made by {len(keys)} different versions of the software**: {'; '.join(parts)}. Their numbers "
            "may differ for that reason alone: rerunning an experiment reuses the cells an earlier "
            f"version made; remove those folders (or use a new --out) to recompute them.{old} {built}")


def _table_blocks(heading: str | None, tables: list[Table], out: Path) -> list[doc.Block]:
    blocks: list[doc.Block] = [doc.Heading(heading)] if heading else []
    for table in tables:
        rel = f"tables/{table.name}.csv"
        doc.write_csv(table, out / rel)
        blocks += [doc.Heading(table.title, 3), doc.TableBlock(table, rel)]
    return blocks


def _figure_blocks(inputs: Inputs, tables: list[Table], out: Path) -> list[doc.Block]:
    folder = out / "figures"
    made = [*roc_figures(inputs.results, folder), *inversion_figures(inputs.results, folder)]
    if not made:
        return []
    blocks: list[doc.Block] = [doc.Heading("Figures")]
    blocks += [doc.Figure(path, path.relative_to(out).as_posix(), caption) for path, caption in made]
    return blocks


def _verdict_figure(inputs: Inputs, tables: list[Table], out: Path) -> list[doc.Figure]:
    """Privacy against utility, shown beside the verdict (and not again among the figures)."""
    made = privacy_utility_figure(inputs.results, tables, out / "figures", stacked=True)
    return [doc.Figure(path, path.relative_to(out).as_posix(), caption) for path, caption in made]


def _provenance(inputs: Inputs, out: Path) -> list[doc.Block]:
    if not inputs.results:
        return []
    table = Table("provenance", "provenance", "provenance",
                  ["result", "method", "threat model", "reconstruction", "victim", "seed"], ["seconds"],
                  labels={"seconds": "seconds"})
    for r in inputs.results:
        key = (r.path.name, r.run.method, r.result.threat_model, r.result.reconstruction,
               str(r.result.victim), str(r.result.seed))
        table.rows.append(Row(key, {"seconds": Stat(r.result.seconds, 0.0, 1)}, n=1,
                              note="" if r.result.applicable else f"not applicable: {r.result.note}"))
    doc.write_csv(table, out / "tables/provenance.csv")
    return [doc.Folded("Provenance", [
            doc.Paragraph("Every result file this report read; each records its run, settings and seed, "
                          "so it can be re-run with `fedattack evaluate`."),
            doc.TableBlock(table, "tables/provenance.csv", all_metrics=True)])]
