"""The default audit (`evaluate` without `--attack`) and the strongest strategy's selection are
what attacks/README.md says they are; the ground truth stays with the scorer (issue 39)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from fedattack.attacks.base import Attack
from fedattack.attacks.data_reconstruction.family import DataReconstruction
from fedattack.attacks.data_reconstruction.units import MatchingUnits, SimulationUnits
from fedattack.attacks.evaluation import truth as truth_mod
from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.attacks.evaluation.selection import SELECTED, select_strongest
from fedattack.attacks.model_inversion.inversion import InversionUnits
from fedattack.attacks.planning.cost import Probe, Workload
from fedattack.attacks.planning.default_audit import DefaultAudit
from fedattack.evaluation import EvaluationSpec
from fedattack.registry import ATTACKS, THREAT_MODELS
from fedattack.results import AttackResult, metric_table

README = Path(__file__).resolve().parents[2] / "attacks" / "README.md"
GIB = 2**30
PROBE = Probe(params=159_010, step_seconds=1e-3, job_seconds=0.01, forward_seconds=4e-6, input_numel=784,
              measured={MatchingUnits: MatchingUnits(grad_seconds=5e-5, second_seconds=8e-5, second_fixed_seconds=1e-4,
                                                     second_bytes=5_000, second_fixed_bytes=2_000_000),
                        SimulationUnits: SimulationUnits(sim_step_seconds=0.01, sim_step_bytes=700_000),
                        InversionUnits: InversionUnits(grad_seconds=5e-5, grad_fixed_seconds=1e-4, grad_bytes=900,
                                                       inversion_step_seconds=3e-4)})


def work(samples: int, first_layer: tuple[int, int] | None = (200, 784), epochs: int = 5) -> Workload:
    return Workload(samples=samples, rounds=20, clients=2, queries=2000, aux=4000, classes=10, epochs=epochs,
                    batch_size=10, probe=PROBE, first_layer=first_layer)


def chosen(w: Workload, room: int = 8 * GIB, seconds: float | None = 1800.0) -> dict[str, list[str]]:
    threats = [THREAT_MODELS.get(n)() for n in ("eavesdropper", "server", "oracle")]
    works = {(tm.name, 0): (w, 1) for tm in threats}
    picks = DefaultAudit(works, {}, room, seconds).choose(threats)
    return {tm.name: sorted(p.name for p in picks if p.tm is tm) for tm in threats}


def documented() -> dict[str, dict[str, list[str]]]:
    """The README's table of the default audit: per case and threat model, the attacks."""
    text = README.read_text()
    table = text[text.index("<!-- default-audit -->"):text.index("<!-- /default-audit -->")]
    out: dict[str, dict[str, list[str]]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] and not set(cells[0]) <= {"-"} and cells[0] != "case":
            out.setdefault(cells[0], {})[cells[1]] = sorted(re.findall(r"`([a-z-]+)`", cells[2]))
    return out


WIDE_ONE_STEP = dataclasses.replace(work(64, first_layer=(1024, 784), epochs=1), batch_size=64)
CASES = {"thousands of images, a fully connected first layer": work(2400),
         "fewer images than the first layer has units": work(50),
         "one local step (FedSGD)": work(10, first_layer=None, epochs=1),
         "a convolutional first layer": work(2400, first_layer=None),
         "64 images in one step through a 1,024-unit dense layer": WIDE_ONE_STEP}


@pytest.mark.parametrize("case", list(CASES))
def test_the_default_audit_is_what_the_readme_says(case: str) -> None:
    assert chosen(CASES[case]) == documented()[case]


def test_the_default_audit_leaves_out_what_does_not_fit() -> None:
    roomy = chosen(work(50))["eavesdropper"]
    assert "update-inversion" in roomy
    tight = chosen(work(50), room=30 * 2**20)["eavesdropper"]  # 30 MB: 16 reference models do not fit
    assert "rmia" not in tight and "update-inversion" in tight
    hurried = chosen(work(2400), seconds=10.0)["eavesdropper"]  # 10 s: 16 models of 1,000 steps do not fit
    assert "rmia" not in hurried and hurried  # something cheaper still runs (membership since #47)


def left_out(w: Workload, seconds: float | None = 1800.0) -> dict[str, str]:
    """What the eavesdropper's default audit left out on `w`, and why, as its plan says."""
    audit = DefaultAudit({("eavesdropper", 0): (w, 1)}, {}, 8 * GIB, seconds)
    audit.choose([THREAT_MODELS.get("eavesdropper")()])
    names = [i["attack"] for i in audit.left_out]
    assert len(names) == len(set(names)), audit.left_out  # each said once
    return {i["attack"]: i["why"] for i in audit.left_out}


def test_the_cocktail_party_attack_runs_beside_update_inversion_through_a_wide_dense_layer() -> None:
    """Issue 48: a 64-image one-step client through 1,024 dense units is read by both readings."""
    picks = chosen(WIDE_ONE_STEP)
    assert all({"cocktail-party", "update-inversion"} <= set(p) for p in picks.values()), picks
    assert "cocktail-party" not in left_out(WIDE_ONE_STEP)


def test_the_plan_says_why_it_leaves_the_cocktail_party_attack_out() -> None:
    cnn = work(64, first_layer=None, epochs=1)
    assert "cocktail-party" not in chosen(cnn)["eavesdropper"]
    assert "not fully connected" in left_out(cnn)["cocktail-party"]
    assert "more than the first layer's 200 units" in left_out(work(2400))["cocktail-party"]
    many = dataclasses.replace(work(900, first_layer=(1024, 784), epochs=1), batch_size=900)
    assert "span every image" in left_out(many)["cocktail-party"]  # 900 images of 784 pixels
    hurried = left_out(WIDE_ONE_STEP, seconds=1.0)  # less than its FastICA's few seconds
    assert "time budget" in hurried["cocktail-party"]


def test_the_cocktail_party_attack_is_the_familys_pick_where_update_inversion_does_not_apply() -> None:
    """As many images as units: the update's row space is every image, which the linear programs
    cannot read, and ICA still has one mixture per image."""
    square = dataclasses.replace(work(256, first_layer=(256, 784), epochs=1), batch_size=256)
    assert "update-inversion" in left_out(square) and "cocktail-party" in chosen(square)["eavesdropper"]


def test_the_default_audit_runs_update_inversion_through_the_first_layer() -> None:
    w = work(50)
    threats = [THREAT_MODELS.get("eavesdropper")()]
    (pick,) = [p for p in DefaultAudit({("eavesdropper", 0): (w, 1)}, {}, 8 * GIB, None).choose(threats)
               if p.name == "update-inversion"]
    attack, _ = pick.calls[0]
    assert attack.settings.start == "first-layer"


def result(victim: int, strategy: str, auc: float) -> AttackResult:
    cls = ATTACKS.get("rmia")
    return AttackResult(attack="rmia", threat_model="eavesdropper", run={}, victim=victim, reconstruction=strategy,
                        settings={"reconstruction_request": "strongest", "reconstruction": strategy},
                        metrics={"auc": auc}, metric_info=metric_table(cls.metrics))


def test_the_strongest_strategy_is_chosen_on_the_other_victims(tmp_path: Path) -> None:
    """attacks/README.md: each victim's strategy is the best on average over the other victims,
    so a strategy that is best on one victim only by chance is not reported for it."""
    aucs = {0: {"a": 0.60, "b": 0.55}, 1: {"a": 0.62, "b": 0.58}, 2: {"a": 0.50, "b": 0.70}}
    paths = [result(v, s, auc).save(tmp_path / f"rmia-eavesdropper-{s}-victim{v}.json")
             for v, by in aucs.items() for s, auc in by.items()]
    written = {AttackResult.load(p).victim: AttackResult.load(p) for p in select_strongest(paths, tmp_path)}
    # victim 0: on victims 1, 2 a averages 0.56, b 0.64 -> b; victim 1: a 0.55, b 0.625 -> b;
    # victim 2: a 0.61, b 0.565 -> a (though b is best on victim 2 itself)
    assert {v: r.settings["selected_strategy"] for v, r in written.items()} == {0: "b", 1: "b", 2: "a"}
    assert {v: r.metrics["auc"] for v, r in written.items()} == {0: 0.55, 1: 0.58, 2: 0.50}
    assert all(r.reconstruction == SELECTED and r.extra["selection"]["chosen_on_victims"] == sorted({0, 1, 2} - {v})
               for v, r in written.items())


def test_one_victim_has_nothing_to_choose_on(tmp_path: Path) -> None:
    paths = [result(0, s, auc).save(tmp_path / f"r-{s}.json") for s, auc in (("a", 0.6), ("b", 0.7))]
    (only,) = [AttackResult.load(p) for p in select_strongest(paths, tmp_path)]
    assert not only.applicable and "two or more victims" in only.note


def reconstruction_attacks() -> list[str]:
    # an acting attack's guesses are its design, held to the same in tests/active/test_malicious_server.py
    return [n for n, cls in ATTACKS.items() if "queries" not in cls.requires and not cls.acting]


def test_only_membership_attacks_are_handed_the_queries() -> None:
    queries = Samples(torch.rand(4, 1, 8, 8), torch.arange(4))
    from fedattack.attacks.view import Knowledge

    know = Knowledge(aux=queries, queries=queries, victim_size=4, victim_class_counts=[1] * 4)
    for name, cls in ATTACKS.items():
        handed = know.for_attack(cls.requires)
        assert len(handed.queries) == (4 if "queries" in cls.requires else 0), name
    assert set(reconstruction_attacks()) >= {n for n, c in ATTACKS.items()
                                              if issubclass(c, DataReconstruction) and not c.acting}


def destroyed(build: Any) -> Any:
    """`truth.build` with the truth destroyed: the victim's images noise, membership inverted, its
    private and deployed state noise, and the membership queries (which hold its images) noise."""

    def build_destroyed(*args: Any, **kwargs: Any) -> Any:
        knowledge, truth = build(*args, **kwargs)
        gen = torch.Generator().manual_seed(123)
        noise = Samples(torch.rand(truth.members.x.shape, generator=gen), truth.members.y)
        queries = Samples(torch.rand(knowledge.queries.x.shape, generator=gen), knowledge.queries.y)
        scramble = {k: torch.rand(v.shape, generator=gen) if v.is_floating_point() else v
                    for k, v in truth.private.items()}
        truth = dataclasses.replace(truth, members=noise, is_member=~np.asarray(truth.is_member), private=scramble,
                                    deployed={k: torch.rand(v.shape, generator=gen) if v.is_floating_point() else v
                                              for k, v in truth.deployed.items()})
        return dataclasses.replace(knowledge, queries=queries), truth

    return build_destroyed


@pytest.mark.parametrize("name", reconstruction_attacks())
def test_a_reconstruction_attack_never_sees_the_truth(name: str, fedavg_run: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 39: the same reconstruction, byte for byte, when every piece of ground truth is destroyed."""
    seen: list[bytes] = []
    original = ATTACKS.get(name).run_many

    def recording(self: Attack, advs: list[Any], gens: list[torch.Generator]) -> list[Any]:
        out = original(self, advs, gens)
        seen.append(b"".join(g.images.detach().numpy().tobytes() for g in out if hasattr(g, "images")))
        return out

    monkeypatch.setattr(ATTACKS.get(name), "run_many", recording)
    spec = EvaluationSpec(threat_models=("eavesdropper",), attacks=(name,), victims=(1,), aux_size=100, eval_size=60,
                          settings=dict(ATTACKS.get(name).fast_settings))
    evaluate_run(fedavg_run, spec, tmp_path / "true", progress=False)
    monkeypatch.setattr(truth_mod, "build", destroyed(truth_mod.build))
    evaluate_run(fedavg_run, spec, tmp_path / "destroyed", progress=False)
    if len(seen) == 2 and not seen[0] and not seen[1]:  # e.g. cocktail-party: more images than pixels here
        pytest.skip(f"{name} does not apply to this run's victim (no images either way)")
    assert len(seen) == 2 and seen[0] and seen[0] == seen[1]


def test_destroying_the_truth_does_change_what_a_membership_attack_sees(fedavg_run: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above could not pass by accident: a membership attack, which is handed the
    queries, scores differently once they are destroyed."""
    seen: list[bytes] = []
    original = ATTACKS.get("rmia").run_many

    def recording(self: Attack, advs: list[Any], gens: list[torch.Generator]) -> list[Any]:
        out = original(self, advs, gens)
        seen.append(b"".join(g.scores.tobytes() for g in out))
        return out

    monkeypatch.setattr(ATTACKS.get("rmia"), "run_many", recording)
    spec = EvaluationSpec(threat_models=("eavesdropper",), attacks=("rmia",), victims=(1,), aux_size=100,
                          eval_size=60, settings=dict(ATTACKS.get("rmia").fast_settings))
    evaluate_run(fedavg_run, spec, tmp_path / "true", progress=False)
    monkeypatch.setattr(truth_mod, "build", destroyed(truth_mod.build))
    evaluate_run(fedavg_run, spec, tmp_path / "destroyed", progress=False)
    assert len(seen) == 2 and seen[0] != seen[1]


def test_an_experiment_evaluation_without_attacks_is_the_default_audit() -> None:
    import tomllib

    from fedattack.experiments.spec import parse

    text = """
name = "t"
[[federation]]
methods = ["fedavg"]
[[evaluation]]
threat-models = ["eavesdropper"]
"""
    (spec,) = parse(tomllib.loads(text)).evaluations[0].specs()
    assert spec.attacks == ("default",) and spec.reconstruction == "strongest"
    assert EvaluationSpec().attacks == ("default",) and EvaluationSpec().reconstruction == "strongest"


def test_a_refusal_names_a_weaker_attack_of_the_family_that_fits() -> None:
    from fedattack.attacks.planning.plan import sibling

    w = work(2400)
    shokri = ATTACKS.get("membership")().cost(w, None)
    assert sibling(ATTACKS.get("rmia")(), w, shokri.peak_bytes, None).startswith("--attack membership fits")
    assert sibling(ATTACKS.get("rmia")(), w, 1, None) == ""


def test_the_malicious_server_is_planned_only_where_its_attack_can_act() -> None:
    """On a CNN the traps have no dense first layer: the plan once priced acting-trap-weights
    there (551 s on Fashion-MNIST's CNN) and every call then came back not applicable."""
    traps, cnn = ATTACKS.get("acting-trap-weights")(), work(2400, first_layer=None)
    assert traps.for_audit(work(2400)) == {}
    assert "dense first layer" in str(traps.for_audit(cnn))
    audit = DefaultAudit({("malicious-server", 0): (cnn, 1)}, {}, 8 * GIB, 60.0)  # the imprint does not fit
    assert "acting-trap-weights" not in [p.name for p in audit.choose([THREAT_MODELS.get("malicious-server")()])]
    assert "dense first layer" in {i["attack"]: i["why"] for i in audit.left_out}["acting-trap-weights"]


@pytest.mark.parametrize("seconds", [1.0, 5.0, 20.0, 60.0])
def test_an_attack_left_out_for_time_is_said_once_with_its_first_reason(seconds: float) -> None:
    """Tried again as a paper or complementing attack with less time left, its reason's figures
    change; the plan still says it once (the 1,000-client audit printed inversion twice)."""
    why = left_out(work(2400), seconds=seconds)  # asserts each attack is said once
    assert all(reason for reason in why.values())
