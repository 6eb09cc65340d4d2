"""An open cost model (issue #42, item 5): the planner measures generic unit costs only, a family
measures its own units when one of its attacks is planned, and a score-only membership attack
(the README's example, as written) has a cost without declaring one, so it passes the registry
tests every registered attack passes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.attacks.planning import planner
from fedattack.attacks.planning.cost import Probe
from fedattack.evaluation import EvaluationSpec
from fedattack.registry import ATTACKS
from tests.attacks.test_audit_budget import check_cost_and_place, check_tiny_budget, server_run  # noqa: F401
from tests.examples.one_file import HERE, load_example

README = Path(__file__).resolve().parents[2] / "attacks" / "README.md"


def probes_of(monkeypatch: pytest.MonkeyPatch) -> list[Probe]:
    seen: list[Probe] = []
    real = planner.measure

    def kept(*args: Any, **kwargs: Any) -> Probe:
        seen.append(real(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(planner, "measure", kept)
    return seen


@pytest.mark.parametrize(("attack", "units"), [("membership", set()), ("inversion", {"InversionUnits"}),
                                               ("gradient-inversion", {"MatchingUnits"})])
def test_a_familys_units_are_measured_only_when_it_is_planned(attack: str, units: set[str], fedavg_run: Path,
                                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probes = probes_of(monkeypatch)
    spec = EvaluationSpec(attacks=attack, victims=(4,), aux_size=100, eval_size=60, max_queries=20,
                          settings=dict(ATTACKS.get(attack).fast_settings))
    evaluate_run(fedavg_run, spec, tmp_path / "out", progress=False)
    (probe,) = probes
    assert {kind.__name__ for kind in probe.measured} == units


def test_the_readmes_example_attack_passes_the_registry_tests(isolated_registries: None, server_run: Path,  # noqa: F811
                                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block = re.search(r"```python\n# confidence_attack\.py[^\n]*\n(.*?)```", README.read_text(), re.S)
    assert block, "attacks/README.md lost its example attack"
    assert block.group(1).strip() in (HERE / "confidence_attack.py").read_text()  # the file is the example
    load_example("confidence_attack.py", ATTACKS, "confidence", "Confidence")
    check_cost_and_place("confidence")
    check_tiny_budget("confidence", server_run, tmp_path, monkeypatch)
