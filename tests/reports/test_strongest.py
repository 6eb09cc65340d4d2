"""The strongest attack of a family is chosen per victim on the other victims, never on itself.

Ten attacks that are all the same noise around AUC 0.6: the best of their means, measured on the
victims it is reported on, overstates 0.6; the leave-one-out choice does not. An attack better
on every other victim is chosen even where another happens to beat it; evaluate's honest
strategy selection (`selected`) stands for its attack, and its per-strategy results are only
listed as tried.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedattack.reports.claims import build_claims
from fedattack.reports.collect import LoadedResult, RunInfo
from fedattack.results import AttackResult

RUN = RunInfo(method="fedavg", dataset="digits", partition="iid", seed=0)
AUC = {"auc": {"key": "auc", "label": "AUC", "primary": True, "leak": "higher", "bounds": [0, 1], "chance": 0.5}}


def result(attack: str, victim: int, auc: float, recon: str = "decoded", **extra: object) -> LoadedResult:
    r = AttackResult(attack=attack, threat_model="eavesdropper", run={}, victim=victim, reconstruction=recon,
                     metrics={"auc": auc}, metric_info=AUC, extra=dict(extra))
    return LoadedResult(r, Path(f"/nowhere/{attack}-{recon}-{victim}.json"), RUN)


def test_the_best_of_many_equal_attacks_is_not_overstated() -> None:
    overstated, honest = [], []
    for trial in range(40):
        rng = np.random.default_rng(trial)
        results = [result(f"attack{a}", v, 0.6 + rng.normal(0, 0.05)) for a in range(10) for v in range(8)]
        (claim,) = build_claims(results)
        assert claim.strongest is not None and claim.strongest.candidates == 10
        honest.append(claim.numbers[0].interval.mean)
        overstated.append(max(c.rank for c in claim.candidates))
    assert np.mean(overstated) > 0.615  # the expected maximum of ten means of 8: 0.6 + 1.54 * 0.05 / sqrt(8)
    assert abs(np.mean(honest) - 0.6) < 0.006


def test_each_victim_gets_the_attack_best_on_the_others() -> None:
    strong = [result("rmia", v, 0.8) for v in range(5)]
    weak = [result("membership", v, 0.6 if v else 0.9) for v in range(5)]  # best only on victim 0
    (claim,) = build_claims(strong + weak)
    assert claim.strongest is not None and dict(claim.strongest.chosen) == {"rmia (decoded)": 5}
    assert claim.numbers[0].interval.mean == 0.8
    assert claim.chosen is not None and claim.chosen.attack == "rmia"


def test_evaluates_honest_strategy_choice_stands_for_its_attack() -> None:
    per_strategy = [result("lira", v, auc, recon) for v in range(4)
                    for recon, auc in (("factors-a", 0.9), ("factors-b", 0.5))]
    selected = [result("lira", v, 0.7, "selected", selection={"chosen": "factors-a"}) for v in range(4)]
    (claim,) = build_claims(per_strategy + selected)
    assert claim.chosen is not None and claim.chosen.reconstruction == "selected"
    assert claim.numbers[0].interval.mean == 0.7  # not the per-strategy maximum, 0.9
    from fedattack.reports.absolute_section import sentence
    text = sentence(claim)
    assert "also tried: lira (factors-a), lira (factors-b)" in text
    assert "strategy chosen on the other victims: factors-a for 4" in text


def test_one_victim_is_an_optimistic_pick_and_says_so() -> None:
    (claim,) = build_claims([result("rmia", 0, 0.7), result("lira", 0, 0.9)])
    assert claim.strongest is not None and claim.strongest.optimistic
    assert "an optimistic pick" in claim.strongest.how()
