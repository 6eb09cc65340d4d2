"""`evaluate_run` and `fedattack evaluate`: files, summary, determinism, one-line refusals."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.cli import main
from fedattack.evaluation import EvaluationSpec
from fedattack.registry import UserError
from fedattack.results import AttackResult

CHEAP = {"steps": 40, "shadows": 1, "classifier": "logreg"}


def run_eval(run: Path, out: Path, **kw: Any) -> list[Path]:
    args: dict[str, Any] = dict(threat_models="eavesdropper", attacks=("inversion", "membership"),
                                victims=[1, 4], aux_size=100, seed=3,
                                eval_size=80, settings=CHEAP)
    args.update(kw)
    return evaluate_run(run, EvaluationSpec(**args), out, progress=False)


def test_results_summary_and_images(fedavg_run: Path, tmp_path: Path) -> None:
    paths = run_eval(fedavg_run, tmp_path)
    results = [AttackResult.load(p) for p in paths]
    assert sorted((r.attack, r.victim) for r in results) == [(a, v) for a in ("inversion", "membership")
                                                             for v in (1, 4)]
    for r in results:
        assert r.run["path"] == str(fedavg_run.resolve()) and r.run["method"] == "fedavg"
        assert r.settings["pools"]["aux"] == 100 and r.settings["pools"]["evaluation"] == 80
        assert r.seconds > 0 and r.reconstruction == "decoded" and not r.upper_bound
    inv = next(r for r in results if r.attack == "inversion")
    for rel in inv.artifacts.values():
        assert (tmp_path / rel).is_file()
    summary = json.loads((tmp_path / "summary.json").read_text())
    group = next(g for g in summary["groups"] if g["attack"] == "membership")
    assert group["victims"] == [1, 4] and group["metrics"]["auc"]["n"] == 2


def test_same_seed_same_numbers(fedavg_run: Path, tmp_path: Path) -> None:
    first = [AttackResult.load(p) for p in run_eval(fedavg_run, tmp_path / "a", victims=[1])]
    again = [AttackResult.load(p) for p in run_eval(fedavg_run, tmp_path / "b", victims=[1])]
    assert all(r.applicable for r in first)
    assert [r.metrics for r in first] == [r.metrics for r in again]
    other = [AttackResult.load(p) for p in run_eval(fedavg_run, tmp_path / "c", victims=[1], seed=4)]
    assert [r.metrics for r in first] != [r.metrics for r in other]


def test_bad_requests_are_user_errors(fedavg_run: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="client 99 does not exist"):
        run_eval(fedavg_run, tmp_path, victims=[99])
    with pytest.raises(UserError, match="unknown threat_model 'spy'"):
        run_eval(fedavg_run, tmp_path, threat_models="spy")
    with pytest.raises(UserError, match="no chosen attack has the setting 'shadowz'"):
        run_eval(fedavg_run, tmp_path, settings={"shadowz": 2})
    with pytest.raises(UserError, match="exceed the 360 test samples"):
        run_eval(fedavg_run, tmp_path, aux_size=300, eval_size=100)


def test_cli_prints_one_line_on_a_bad_request(fedavg_run: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", ["fedattack", "evaluate", str(fedavg_run), "--victim", "x7",
                                      "--out", str(tmp_path), "--quiet"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and err.count("\n") == 0
    assert "victim 'x7' is not a client id" in err


def test_local_method_is_not_applicable_on_the_wire(tmp_path: Path) -> None:
    from tests.attacks.conftest import train_tiny
    run = train_tiny(tmp_path / "local", method="local", rounds=1)
    paths = run_eval(run, tmp_path / "out", victims=[0], threat_models=["eavesdropper", "oracle"],
                     attacks="membership", settings={"shadows": 1, "classifier": "logreg"})
    by_threat = {AttackResult.load(p).threat_model: AttackResult.load(p) for p in paths}
    assert not by_threat["eavesdropper"].applicable
    assert "nothing on the wire" in by_threat["eavesdropper"].note
    assert by_threat["oracle"].applicable and by_threat["oracle"].upper_bound


def test_shadow_models_train_through_any_executor(fedavg_run: Path, tmp_path: Path) -> None:
    from fedattack.federation.executors import EXECUTORS
    if "batched" not in EXECUTORS:
        pytest.skip("no batched executor registered")
    mia = {"shadows": 1, "classifier": "logreg"}
    runs = {ex: AttackResult.load(run_eval(fedavg_run, tmp_path / ex, victims=[1], attacks="membership", settings=mia,
                                           executor=ex)[0]) for ex in ("sequential", "batched")}
    assert runs["batched"].metrics == pytest.approx(runs["sequential"].metrics, abs=1e-6)
    assert runs["batched"].settings["executor"] == "batched"


def test_batched_evaluation_inverts_every_victim_at_once(fedavg_run: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the batched executor model inversion runs once over every victim's models (the
    oracle's held models included), after the loop; its results are saved where the loop would
    have saved them and agree with one victim at a time within float tolerance."""
    import fedattack.attacks.model_inversion.inversion as inversion
    sizes: list[int] = []
    real = inversion.invert_many

    def counting(target, params, x0, settings):  # type: ignore[no-untyped-def]
        sizes.append(len(params))
        return real(target, params, x0, settings)

    monkeypatch.setattr(inversion, "invert_many", counting)
    kw: dict[str, Any] = dict(threat_models=("eavesdropper", "oracle"), attacks=("inversion", "membership"),
                              settings={**CHEAP, "shadows": 1})
    one = run_eval(fedavg_run, tmp_path / "one", executor="sequential", **kw)
    assert sizes == []  # the sequential executor attacks one model at a time
    together = run_eval(fedavg_run, tmp_path / "together", executor="batched", **kw)
    assert [p.name for p in together] == [p.name for p in one]  # the loop's order
    assert len(sizes) == 1 and sizes[0] >= 4  # 2 eavesdropper + 2 oracle victims (held models)
    for a, b in zip(one, together):
        ra, rb = AttackResult.load(a), AttackResult.load(b)
        assert ra.applicable and rb.applicable
        assert rb.metrics == pytest.approx(ra.metrics, abs=1e-3)
        for rel in rb.artifacts.values():
            assert (tmp_path / "together" / rel).is_file()
