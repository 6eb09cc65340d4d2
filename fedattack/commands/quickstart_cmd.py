"""`fedattack quickstart`: the main job, on the embedded digits data, ending in a report to open."""

from __future__ import annotations

import click

from fedattack.commands.experiment_cmd import run_named


@click.command("quickstart")
@click.option("--out", type=click.Path(file_okay=False), default="fedattack-quickstart", show_default=True,
              help="Output folder; run again to resume or to rebuild the report.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
def quickstart_command(out: str, quiet: bool) -> None:
    """Train FedAvg, WAFFLe and others on digits, attack them, and write a report (a few minutes).

    Runs the shipped experiment `quick-digits` (see `fedattack experiment show quick-digits`).
    """
    summary = run_named("quick-digits", out, None, False, quiet)
    if summary.report is not None:
        html = summary.report.with_name("report.html").resolve()
        click.echo(click.style(f"Open the report: {html}", bold=True))
        click.echo(f"(Markdown: {summary.report.resolve()}; tables as CSV in {html.parent / 'tables'})")


COMMAND = quickstart_command
