"""The evaluation's plan and budget (issue 33): every registered attack declares its cost, and
under a memory budget too small for it all at once it either works in chunks (the same result as
unchunked, within float tolerance) or is refused in one line before anything runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from fedattack.attacks.base import Attack
from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.attacks.planning.cost import Budget
from fedattack.attacks.planning.default_audit import FAMILIES
from fedattack.attacks.planning.plan import Plan
from fedattack.evaluation import EvaluationSpec
from fedattack.registry import ATTACKS, THREAT_MODELS, UserError
from fedattack.resources import parse_duration, parse_size
from fedattack.results import AttackResult

GIB = 2**30


def spec_for(attack: str) -> EvaluationSpec:
    # the server sees every client (fedmia), the victim's downlinks and uplinks (update inversion);
    # an attack that designs an acting round runs under a threat model that acts
    acting = [n for n, cls in THREAT_MODELS.items() if cls.acts] if ATTACKS.get(attack).acting else ["server"]
    return EvaluationSpec(threat_models=(acting[0],), attacks=(attack,), victims=(2,), aux_size=100, eval_size=60,
                          max_queries=20, nonmembers=40, settings=dict(ATTACKS.get(attack).fast_settings))


@pytest.mark.parametrize("name", ATTACKS.names())
def test_every_attack_declares_its_cost_and_place(name: str) -> None:
    check_cost_and_place(name)


def check_cost_and_place(name: str) -> None:
    cls = ATTACKS.get(name)
    assert cls.cost is not Attack.cost, f"{name} declares no cost: the plan cannot budget it"
    assert cls.audit is None or cls.audit.family in FAMILIES
    assert not cls.chunk_unit or cls.chunks is not Attack.chunks


@pytest.fixture(scope="module")
def server_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny FedAvg federation whose clients each take 60 local steps, every round recorded."""
    from fedattack.target import Recipe
    from tests.attacks.conftest import train_tiny

    return train_tiny(tmp_path_factory.mktemp("budget") / "fedavg", rounds=2, fraction=1.0,
                      recipe=Recipe(epochs=5, batch_size=10, lr=0.1))


def planned(out: Path) -> dict[str, Any]:
    return json.loads((out / "plan.json").read_text())


def guesses_of(paths: list[Path]) -> list[AttackResult]:
    return [AttackResult.load(p) for p in paths]


def one_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both evaluations plan from the same probe: its memory figures (the bytes autograd saves,
    told apart by address) move a little from run to run, and a budget set one byte short of
    the first plan's need was met by the second's, unchunked, on a loaded CI machine."""
    from fedattack.attacks.planning import planner as planning

    measured: dict[tuple[object, ...], Any] = {}
    real = planning.measure

    def same(target: Any, executor: str = "sequential", seed: int = 0) -> Any:
        key = (target.name, executor, seed)
        if key not in measured:
            measured[key] = real(target, executor, seed)
        return measured[key]

    monkeypatch.setattr(planning, "measure", same)


@pytest.mark.parametrize("name", ATTACKS.names())
def test_a_tiny_budget_chunks_or_refuses(name: str, server_run: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    check_tiny_budget(name, server_run, tmp_path, monkeypatch)


def check_tiny_budget(name: str, server_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = spec_for(name)
    one_probe(monkeypatch)
    free = guesses_of(evaluate_run(server_run, spec, tmp_path / "free", progress=False, budget=Budget(64 * GIB)))
    call = planned(tmp_path / "free")["calls"][0]
    need = call["planned_peak_bytes"] - planned(tmp_path / "free")["baseline_bytes"]
    monkeypatch.setattr(Plan, "room", property(lambda self: need - 1))  # just short of all at once
    lines: list[str] = []
    try:
        tight = guesses_of(evaluate_run(server_run, spec, tmp_path / "tight", progress=False,
                                        budget=Budget(64 * GIB), echo=lines.append))
    except UserError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith(f"refused before starting: {name} needs")
        assert "--memory" in message
        assert not (tmp_path / "tight").exists(), "a refused evaluation left files behind"
        return
    chunked = planned(tmp_path / "tight")["calls"][0]
    assert chunked["chunk"] is not None and chunked["chunk"] < (call["chunk"] or float("inf"))
    assert any(f"{chunked['chunk']} {ATTACKS.get(name).chunk_unit} at a time" in line for line in lines)
    assert len(free) == len(tight)
    for a, b in zip(free, tight):
        assert a.applicable == b.applicable
        for key, value in a.metrics.items():
            assert b.metrics[key] == pytest.approx(value, rel=1e-3, abs=1e-3), f"{name}: {key} moved when chunked"


def test_update_inversion_in_segments_is_the_same_run(server_run: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Recomputing the simulated run segment by segment changes the memory, not the numbers."""
    from fedattack.attacks.data_reconstruction.local_run import LocalRecipe, simulate_local_run

    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    params = {k: v.detach() for k, v in net.named_parameters()}

    def forward(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(net, p, (x,))

    grads = []
    for segment in (None, 3):
        copies = torch.rand((2, 12, 1, 4, 4), generator=torch.Generator().manual_seed(0)).requires_grad_(True)
        after = simulate_local_run(forward, params, copies, torch.arange(12) % 3, LocalRecipe(2, 2, 0.1, 0.1, segment))
        sum(((after[k] - params[k]) ** 2).sum() for k in after).backward()
        grads.append(copies.grad)
    assert torch.equal(grads[0], grads[1])


def test_gradient_matching_in_chunks_is_the_same_loss_and_gradient() -> None:
    from fedattack.attacks.data_reconstruction.gradient import MatchSettings, invert_gradient_jointly

    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    params = {k: v.detach() for k, v in net.named_parameters()}

    def forward(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(net, p, (x,))

    observed = {k: torch.randn(v.shape, generator=torch.Generator().manual_seed(1)) for k, v in params.items()}
    labels = torch.arange(10) % 3
    found = [invert_gradient_jointly(forward, params, observed, labels, (1, 4, 4), torch.Generator().manual_seed(0),
                                     MatchSettings(steps=20, chunk=chunk)) for chunk in (None, 3)]
    assert found[0].loss == pytest.approx(found[1].loss, rel=1e-5)
    assert torch.allclose(found[0].images, found[1].images, atol=1e-4)


def test_a_named_attack_past_the_time_budget_is_refused(server_run: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"refused before starting: the plan needs .* and --time allows"):
        evaluate_run(server_run, spec_for("rmia"), tmp_path / "out", progress=False,
                     budget=Budget(64 * GIB, seconds=1e-6))
    assert not (tmp_path / "out").exists()


def test_plan_is_printed_and_kept_with_what_each_call_measured(server_run: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    paths = evaluate_run(server_run, spec_for("rmia"), tmp_path, progress=False, echo=lines.append)
    assert lines[0].startswith("plan: 1 victim(s), budget memory") and "rmia" in lines[1]
    plan = planned(tmp_path)
    (call,) = plan["calls"]
    assert call["planned_seconds"] > 0 and call["measured_seconds"] > 0
    assert 0 < call["measured_peak_bytes"] <= plan["budget"]["memory"]
    cost = AttackResult.load(paths[0]).extra["cost"]
    assert cost["measured_seconds"] > 0 and cost["planned_peak_bytes"] > 0


@pytest.mark.parametrize(("text", "size"), [("8G", 8 * GIB), ("512M", 512 * 2**20), ("1.5GiB", int(1.5 * GIB)),
                                            ("1000", 1000)])
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(("text", "seconds"), [("30m", 1800.0), ("2h", 7200.0), ("1h30m", 5400.0), ("90", 90.0)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["lots", "8X", "-1G", "0"])
def test_bad_sizes_are_one_line(bad: str) -> None:
    with pytest.raises(UserError, match="--memory"):
        parse_size(bad)
