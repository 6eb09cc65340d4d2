"""`fedattack report`: tables, figures and a report from result files (never re-runs an attack)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource


def _paper_help() -> str:
    return "Put a paper table's published numbers beside ours (repeatable); see --list-papers."


@click.command("report")
@click.argument("results", nargs=-1, type=click.Path(exists=True))
@click.option("-o", "--out", type=click.Path(file_okay=False), default="report", show_default=True,
              help="Folder to write report.md, report.html, tables/ and figures/ into.")
@click.option("--paper", "papers", multiple=True, metavar="TABLE", help=_paper_help())
@click.option("--title", default="fedattack report", show_default=True)
@click.option("--no-figures", is_flag=True, help="Tables only (faster).")
@click.option("--list-papers", is_flag=True, help="List the paper tables --paper accepts and exit.")
@click.option("--reference", default="fedavg", show_default=True, metavar="METHOD",
              help="The method the verdict compares every other method with.")
def report_command(results: tuple[str, ...], out: str, papers: tuple[str, ...], title: str,
                   no_figures: bool, list_papers: bool, reference: str) -> None:
    """Report on RESULTS: result files, or folders searched for results and run directories."""
    from fedattack.registry import UserError
    from fedattack.reports.paper_numbers import TABLES

    if list_papers:
        for key, table in TABLES.items():
            click.echo(f"  {key:<22} {table.title}")
        return
    if not results:
        raise UserError("no results given; pass result files or folders, e.g. fedattack report results/ -o report")
    from fedattack.federation.claim import refuse_dangerous

    refuse_dangerous(Path(out))  # a report's files would land among the user's own
    from fedattack.commands.hints import incomplete_notes, unevaluated_hint

    named = click.get_current_context().get_parameter_source("reference") is not ParameterSource.DEFAULT
    unfinished = incomplete_notes(Path(r) for r in results)
    caveat = " ".join(n.removeprefix("note: ") for n in unfinished)  # the report says it too
    path = write_report(list(results), Path(out), papers, title=title, figures=not no_figures, reference=reference,
                        require=named, caveat=caveat[:1].upper() + caveat[1:])
    click.echo(f"report: {path}  (self-contained: {path.with_name('report.html')})")
    for note in unfinished:
        click.secho(note, fg="yellow", err=True)
    from fedattack.reports.collect import collect

    inputs = collect(list(results))
    unevaluated = unevaluated_hint(inputs, Path(out))
    if unevaluated:
        click.secho(unevaluated, fg="yellow", err=True)
    if not papers:
        from fedattack.reports.compare import relevant
        hints = relevant(inputs)
        if hints:
            click.echo("the papers have numbers for these results; add " + " ".join(f"--paper {k}" for k in hints)
                       + " to show them beside ours")


def write_report(results: list[str], out: Path, papers: tuple[str, ...], **options: Any) -> Path:
    """A new report folder is built aside and moved into place whole, so a failure (a full disk)
    leaves no half report; an existing folder is written file by file (each file atomically), so
    whatever else the user keeps there stays."""
    from fedattack.atomic import staged_dir
    from fedattack.reports.build import build_report

    if out.exists():
        return build_report(results, out, papers, **options)
    with staged_dir(out) as tmp:
        build_report(results, tmp, papers, **options)
    return out / "report.md"


COMMAND = report_command
