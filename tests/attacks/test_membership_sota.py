"""Issue 20's last pieces: query sets sized for low FPRs, the server's own signal (FedMIA), and
an upper bound that is one.

- The query draw keeps the members' class mix among many more non-members where the pool has
  them, and falls back to the balanced draw where it does not.
- `fedmia` on a memorising digits federation: the server, comparing the victim with the other
  clients of its round, is far above chance; the eavesdropper, which sees no other client, is
  told it cannot run it (with no member among the queries the server's attacks are at chance:
  `test_server_null.py`).
- The oracle attacks every model the victim held and keeps the strongest, so it is at least
  what the eavesdropper gets from the victim's uplink.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.attacks.evaluation.truth import membership_queries
from fedattack.evaluation import EvaluationSpec
from fedattack.registry import ATTACKS
from fedattack.results import AttackResult


def labelled(n: int, classes: int, seed: int) -> Samples:
    g = torch.Generator().manual_seed(seed)
    return Samples(torch.rand(n, 1, 4, 4, generator=g), torch.arange(n) % classes)


def test_the_query_draw_is_unbalanced_with_the_members_class_mix() -> None:
    members = Samples.concat([labelled(60, 2, 0), labelled(20, 1, 1)])  # 50 of class 0, 30 of class 1
    queries, is_member = membership_queries(members, labelled(8000, 10, 2), seed=0, victim=3, max_queries=1000,
                                            nonmembers=1000)
    assert is_member.sum() == 80 and (~is_member).sum() == 1000
    mix = [np.bincount(queries.y[m].numpy(), minlength=2) / m.sum() for m in (is_member, ~is_member)]
    assert np.allclose(mix[0], mix[1], atol=0.002)  # class alone tells nothing
    small, small_member = membership_queries(members, labelled(100, 10, 2), 0, 3, 1000, 1000)
    assert small_member.sum() == (~small_member).sum() == 10 + 10  # the pool has 10 of a class: balanced
    _, none_wanted = membership_queries(members, labelled(8000, 10, 2), 0, 3, 1000, nonmembers=0)
    assert (~none_wanted).sum() == none_wanted.sum() == 80


def test_fedmia_the_server_finds_members_and_the_eavesdropper_cannot_run_it(overfit_run: Path,
                                                                           tmp_path: Path) -> None:
    spec = EvaluationSpec(threat_models=("server", "eavesdropper"), attacks=("fedmia",), victims=("random:3",),
                          aux_size=0, eval_size=0, settings=dict(ATTACKS.get("fedmia").fast_settings))
    results = [AttackResult.load(p) for p in evaluate_run(overfit_run, spec, tmp_path, progress=False)]
    server = [r for r in results if r.threat_model == "server"]
    assert len(server) == 3 and all(r.applicable for r in server)
    assert np.mean([r.metrics["auc"] for r in server]) > 0.7
    assert all(r.extra["membership"]["other_clients_per_round"] == [5] for r in server)  # 6 clients a round
    assert not any(r.applicable for r in results if r.threat_model == "eavesdropper")
    group = next(g for g in json.loads((tmp_path / "summary.json").read_text())["groups"]
                 if g["threat_model"] == "server")
    pooled = group["queries"]["pooled"]  # the summary says how many queries each victim and the pool had
    members = sum(r.extra["membership"]["members"] for r in server)
    assert pooled["members"] == members == sum(group["queries"]["members"])
    assert pooled["nonmembers"] == sum(group["queries"]["nonmembers"]) and 0.5 < pooled["metrics"]["auc"] <= 1


def test_the_oracle_keeps_the_strongest_model_the_victim_held(overfit_run: Path, tmp_path: Path) -> None:
    spec = EvaluationSpec(threat_models=("eavesdropper", "oracle"), attacks=("lira-offline",), victims=("random:2",),
                          aux_size=140, eval_size=0, settings=dict(ATTACKS.get("lira-offline").fast_settings),
                          executor="batched")
    results = [AttackResult.load(p) for p in evaluate_run(overfit_run, spec, tmp_path, progress=False)]
    for victim in {r.victim for r in results}:
        eaves, oracle = (next(r for r in results if r.victim == victim and r.threat_model == t)
                         for t in ("eavesdropper", "oracle"))
        bound = oracle.extra["upper_bound"]
        assert [k.split(" ")[0] for k in bound["per_model"]] == ["deployed", "local"]
        local = next(k for k in bound["per_model"] if k.startswith("local"))
        for key in ("auc", "accuracy"):
            assert oracle.metrics[key] >= eaves.metrics[key] - 1e-9
            assert oracle.metrics[key] == max(m[key] for m in bound["per_model"].values())
        # the local model after training is the uplink the eavesdropper decodes: the same numbers
        assert bound["per_model"][local]["auc"] == eaves.metrics["auc"]
