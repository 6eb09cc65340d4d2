"""`fedattack quickstart`: the main job, on the embedded digits data, ending in a report to open.

It ends with the verdict, so the answer is on the terminal before anyone opens the report: what
an attacker learns from each federation's wire under each threat model (with intervals and n),
then which method leaks more than FedAvg."""

from __future__ import annotations

from pathlib import Path

import click

from fedattack.commands.experiment_cmd import run_named


@click.command("quickstart")
@click.option("--out", type=click.Path(file_okay=False), default="fedattack-quickstart", show_default=True,
              help="Output folder; run again to resume or to rebuild the report.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
def quickstart_command(out: str, quiet: bool) -> None:
    """Train FedAvg, WAFFLe and others on digits, attack them, and write a report (a minute or two).

    Runs the shipped experiment `quick-digits` (see `fedattack experiment show quick-digits`).
    """
    summary = run_named("quick-digits", out, None, False, quiet)
    if summary.report is not None:
        html = summary.report.with_name("report.html").resolve()
        verdict = verdict_lines(Path(out))
        if verdict:
            click.echo(click.style("Verdict:", bold=True))
            from fedattack.reports.verdict_section import bulleted

            for line in bulleted(verdict):
                click.echo(line)
        click.echo(click.style(f"Open the report: {html}", bold=True))
        click.echo(f"(Markdown: {summary.report.resolve()}; tables as CSV in {html.parent / 'tables'})")


def verdict_lines(folder: Path, experiment: str = "quick-digits") -> list[str]:
    """The verdict's lead lines over the experiment's own results, as its report reads them
    (results of an older version of the experiment may still sit in the folder)."""
    from fedattack.experiments import resolve
    from fedattack.experiments.plan import plan
    from fedattack.experiments.runner import result_dir
    from fedattack.reports.collect import collect
    from fedattack.reports.verdict_section import lead_lines

    dirs = [d for d in (result_dir(folder, job) for job in plan(resolve(experiment)).evaluations) if d.exists()]
    return lead_lines(collect(dirs).results) if dirs else []


COMMAND = quickstart_command
