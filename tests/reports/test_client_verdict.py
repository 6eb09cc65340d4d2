"""Issue #49 item 1, end to end: the risk level comes from what the adversary learns about the client.

Two FedAvg federations on the digits, five clients each, every client a victim of the eavesdropper's
model inversion and Shokri's membership inference:
- IID: every client's model rebuilds the same recognisable digits, which any model of the population
  gives; the class mix it infers holds chance, so model inversion does not set the level;
- shards of one class each, two per client (10 shards for 10 classes): each victim holds two classes
  no other client holds, its uplink's inversion says which, and that finding is named.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.evaluation import EvaluationSpec
from fedattack.reports.collect import collect
from fedattack.reports.inversion_grid import grid_rows, inversion_figures
from fedattack.reports.verdict_section import lead_lines
from fedattack.target import Recipe
from tests.attacks.conftest import train_tiny

SETTINGS = {"steps": 200, "shadows": 1, "classifier": "logreg"}
INVERSION = "the eavesdropper's model inversion (inversion)"


def audit(root: Path, partition: str) -> list[str]:
    run = train_tiny(root / "run", partition=partition, num_clients=5, rounds=3, fraction=1.0,
                     recipe=Recipe(epochs=2, batch_size=10, lr=0.1))
    spec = EvaluationSpec(threat_models=("eavesdropper",), attacks=("inversion", "membership"), victims=("all",),
                          settings=SETTINGS, executor="batched")
    evaluate_run(run, spec, root / "results", progress=False)
    return lead_lines(collect([root / "results"]).results)


@pytest.fixture(scope="module")
def iid(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return audit(tmp_path_factory.mktemp("iid"), "iid")


@pytest.fixture(scope="module")
def own_classes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("shards")
    return root, audit(root, "shards")


def inversion_line(lines: list[str]) -> str:
    return next(x for x in lines if "Model inversion (inversion" in x)


def test_inversion_that_gives_only_the_populations_classes_sets_no_level(iid: list[str]) -> None:
    head, line = iid[0], inversion_line(iid)
    assert "a classifier labels" in line and "are what any model of the population gives" in line, line
    assert "infers nothing of the victim's class mix beyond the population's" in line, line
    assert f"set by {INVERSION}" not in head and f"Act on: {INVERSION}" not in head, head


def test_inversion_naming_the_classes_only_this_client_holds_is_the_finding(
        own_classes: tuple[Path, list[str]]) -> None:
    _, lines = own_classes
    head, line = lines[0], inversion_line(lines)
    assert "infers which classes the victim holds more of than the population" in line, line
    assert f"set by {INVERSION}" in head, head
    assert f"Act on: {INVERSION} infers which classes the victim holds more of than the population" in head, head
    assert "(5 victims)" in head.split("Act on:")[1]


def test_the_grid_marks_only_the_classes_the_victim_does_not_hold(own_classes: tuple[Path, list[str]],
                                                                  tmp_path: Path) -> None:
    root, _ = own_classes
    results = [r for r in collect([root / "results"]).results if r.result.attack == "inversion"]
    ((_, caption),) = inversion_figures(results, tmp_path)
    victim = min(r.result.victim for r in results)
    held = next(r.result.extra["inversion"]["victim_classes"] for r in results if r.result.victim == victim)
    assert len(held) == 2 and f"The victim holds classes {', '.join(map(str, held))}." in caption
    means, *reconstructed = grid_rows([r for r in results if r.result.victim == victim])
    assert set(means.images) == set(held)
    assert means.notes == {c: "not held" for c in range(10) if c not in held}
    for row in reconstructed:  # every class rebuilt, none marked as not held
        assert set(row.images) == set(range(10)) and not any("not held" in n for n in row.notes.values())
        assert len(row.framed) == 5
