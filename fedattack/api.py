"""The Python API: `fedattack.train`, `fedattack.evaluate`, `fedattack.report`.

The same three steps as the commands, for a notebook: each returns a small result object that
prints as a one-line answer (accuracy; headline metrics per victim; the verdict) and keeps its
paths, so a cell can chain them. Heavy modules load on the first call, never at `import
fedattack` (the CLI starts without torch)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Run:
    """A trained federation: its run directory and its final utility."""

    path: Path
    method: str
    dataset: str
    accuracy: float | None  # mean local test accuracy at the end, in %; None where no client holds test images
    utility: dict[str, float] = field(default_factory=dict)  # the run's whole utility summary

    def __str__(self) -> str:
        if self.accuracy is not None:
            return f"{self.method} on {self.dataset}: mean local accuracy {self.accuracy:.1f}% ({self.path})"
        from fedattack.metrics import describe_utility

        clients = int(self.utility.get("clients_measured", 0))  # none measured: the count is not needed
        return f"{self.method} on {self.dataset}: {describe_utility(self.utility, clients)} ({self.path})"


@dataclass(frozen=True)
class Evaluation:
    """The results of attacking one run: one per (victim, threat model, attack, reconstruction)."""

    path: Path
    results: list[Any] = field(default_factory=list)  # AttackResult

    def __str__(self) -> str:
        lines = [f"{len(self.results)} result(s) in {self.path}"]
        for r in self.results:
            shown = ", ".join(f"{k} {v:.3f}" for k, v in list(r.metrics.items())[:3]) if r.applicable else r.note
            lines.append(f"  {r.attack} / {r.threat_model} / {r.reconstruction} / victim {r.victim}: {shown}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Report:
    """A written report and its verdict (the lines the report opens with)."""

    markdown: Path
    html: Path
    verdict: list[str]

    def __str__(self) -> str:
        from fedattack.reports.verdict_section import bulleted

        return "\n".join([*bulleted(self.verdict), f"report: {self.html}"])


def train(method: str = "fedavg", dataset: str = "digits", out: str | Path = "runs/api", *,
          overwrite: bool = False, progress: bool = False, **settings: Any) -> Run:
    """Train a federation, e.g. `train("fedavg", rounds=20, executor="batched", out="runs/a")`.

    `settings` are `FederationSpec.for_dataset`'s: rounds, fraction, epochs, batch_size, lr, model,
    partition, num_clients, hyper, seed, record, executor; the dataset's defaults fill the rest."""
    from fedattack.federation.spec import FederationSpec
    from fedattack.federation.train import train_federation

    spec = FederationSpec.for_dataset(dataset, method=method, **settings)
    path = train_federation(spec, out, overwrite=overwrite, progress=progress)
    final = json.loads((path / "metrics.json").read_text())["final"]
    return Run(path=Path(path), method=method, dataset=dataset, accuracy=final.get("mean"), utility=final)


def evaluate(run: Run | str | Path, out: str | Path | None = None, *,
             threat_models: str | Sequence[str] = "eavesdropper", attacks: str | Sequence[str] = "default",
             victims: str | int | Sequence[str | int] = "random:5", progress: bool = False,
             memory: str | int | None = None, time: str | float | None = None, show_plan: bool = False,
             resume: bool = False, replace: bool = False, **options: Any) -> Evaluation:
    """Attack a run as `fedattack evaluate` does (by default the default audit: the strongest
    attacks that fit); `memory` ("8G" or bytes; default half the memory available) and `time`
    ("45m" or seconds) are its budget, `show_plan` prints the plan first; `options` are
    `EvaluationSpec`'s (settings=, reconstruction=, aux_size=, eval_size=, max_queries=, seed=,
    executor=). A folder that holds results already is refused, as the command refuses it,
    unless `resume` (add to them, skipping the victims done) or `replace` (replace them); the
    returned results are every result in the folder, as its summary.json covers them."""
    from fedattack.attacks.evaluation.evaluate import evaluate_run
    from fedattack.attacks.evaluation.results_folder import existing_mode
    from fedattack.attacks.planning.planner import budget_of, is_default
    from fedattack.evaluation import EvaluationSpec
    from fedattack.resources import parse_duration, parse_size
    from fedattack.results import AttackResult

    existing = existing_mode(resume, replace, ("resume", "replace"))
    run_dir = run.path if isinstance(run, Run) else Path(run)
    folder = Path(out) if out is not None else Path("results") / run_dir.name
    spec = EvaluationSpec(threat_models=_tuple(threat_models), attacks=_tuple(attacks),
                          victims=_tuple(victims), **options)
    budget = budget_of(None if memory is None else parse_size(memory, "memory"),
                       None if time is None else parse_duration(time, "time"), is_default(spec))
    written = evaluate_run(run_dir, spec, folder, progress=progress, budget=budget,
                           echo=print if show_plan else None,
                           existing=existing,
                           resume_hint=f"fedattack.evaluate({str(run_dir)!r}, {str(folder)!r}, ..., resume=True)")
    return Evaluation(path=folder, results=[AttackResult.load(p) for p in written])


def _tuple(value: Any) -> tuple[Any, ...]:
    return (value,) if isinstance(value, (str, int)) else tuple(value)


def report(*inputs: Evaluation | Run | str | Path, out: str | Path = "report", reference: str = "fedavg",
           figures: bool = True) -> Report:
    """Write report.md and report.html from results and runs; returns them with the verdict."""
    from fedattack.reports.build import build_report
    from fedattack.reports.collect import collect
    from fedattack.reports.verdict_section import lead_lines

    paths = [i.path if isinstance(i, (Evaluation, Run)) else Path(i) for i in inputs]
    markdown = build_report(paths, out, figures=figures, reference=reference)
    verdict = lead_lines(collect(paths).results, reference)
    return Report(markdown=markdown, html=markdown.with_name("report.html"), verdict=verdict)
