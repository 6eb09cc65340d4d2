"""Shadow and reference models are trained once per victim, whatever the strategies and held models.

The upper bound (`oracle`) runs each attack on every model the victim held and `--reconstruction
all` runs it once per strategy; the shadows start from the same downlink every time, so they are
trained once and reused (`shadow.train_shadows`). These tests count the trainings and check that
reusing them changes no number.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.attacks.membership import shadow
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.rundir import Federation
from fedattack.results import AttackResult

SETTINGS = {"shadows": 1, "classifier": "logreg", "references": 2}
STRATEGIES = "factors-inferred,factors-all-on,factors-prior-mean,true"  # `all` less the slow fit


def evaluate(run: Path, out: Path) -> dict[tuple[str, str, str], AttackResult]:
    spec = EvaluationSpec(threat_models=("eavesdropper", "oracle"), attacks=("membership", "rmia"),
                          victims=("random:1",), reconstruction=STRATEGIES, aux_size=120, eval_size=0, max_queries=40,
                          nonmembers=40, seed=1, settings=SETTINGS)
    results = [AttackResult.load(p) for p in evaluate_run(run, spec, out, progress=False)]
    return {(r.threat_model, r.reconstruction, r.attack): r for r in results}


def test_each_shadow_set_trains_once_and_reuse_changes_nothing(waffle_run: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    train = shadow.ShadowModels.train

    def counted(self: shadow.ShadowModels, *args, **kwargs):  # type: ignore[no-untyped-def]
        if kwargs.get("first", args[3] if len(args) > 3 else 0) == 0:  # a set's first executor call
            calls.append(1)
        return train(self, *args, **kwargs)

    from fedattack.attacks.planning import planner as planning
    from fedattack.attacks.planning import probe

    measured = probe.measure(Federation(waffle_run).target())  # the plan's probe trains clients of its own
    monkeypatch.setattr(planning, "measure", lambda *args, **kwargs: measured)
    monkeypatch.setattr(shadow.ShadowModels, "train", counted)
    reused = evaluate(waffle_run, tmp_path / "reused")
    strategies = {s for tm, s, _ in reused if tm == "eavesdropper"}
    assert len(strategies) == 3 and all(r.applicable for r in reused.values())
    assert "upper_bound" in reused[("oracle", "true", "rmia")].extra  # two held models attacked
    # once per attack and threat model, not per strategy (eavesdropper) or held model (oracle)
    assert len(calls) == 2 * 2

    fresh = itertools.count()
    monkeypatch.setattr(shadow, "fingerprint", lambda states: str(next(fresh)))  # never a hit
    calls.clear()
    again = evaluate(waffle_run, tmp_path / "again")
    assert len(calls) == 2 * len(strategies) + 2 * 2
    assert reused.keys() == again.keys()
    for key, result in reused.items():
        assert result.metrics == again[key].metrics, key
        assert result.extra["membership"]["per_query"] == again[key].extra["membership"]["per_query"], key
