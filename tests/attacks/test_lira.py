"""Calibration of every registered membership attack (read from the registry), and LiRA's parts.

- No query is a member (victims that never trained, attacked through the oracle's model):
  AUC 0.50 +- 0.03 over the victims' queries pooled. (An attack that reads the other clients'
  messages of the victim's rounds cannot attack a victim that never trained: its null test is
  in test_membership_sota.py.)
- A model that memorised its members (a tiny federation on digits with 30% of labels drawn at
  random: the mislabelled members can only be memorised) is found at TPR >= 10% at 1% FPR by
  every attack that claims the low-FPR regime (`low_fpr`), pooled over the victims (a victim's
  ~220 non-members resolve 1% but not 0.1%); every attack's AUC is clearly above chance; those
  that read every client's messages run as the server.
Each attack runs with its own `fast_settings` (few reference models).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.attacks.membership.family import MembershipAttack
from fedattack.attacks.membership.metrics import pooled, ranking
from fedattack.attacks.membership.reference_models import online_plan
from fedattack.data.sources.digits import load as load_digits
from fedattack.data.types import Dataset
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.rundir import Federation
from fedattack.registry import ATTACKS, DATASETS, UserError
from fedattack.results import AttackResult
from fedattack.target import Recipe
from tests.attacks.conftest import train_tiny
from tests.attacks.test_attack_conformance import fast_settings

NOISE = 0.3


def membership_attacks(every_client: bool = False) -> list[str]:
    """Membership attacks; those that read every client's messages (`reads_every_client`, the
    server's) apart, since they need a threat model and victims of their own."""
    return [n for n in ATTACKS.names() if issubclass(ATTACKS.get(n), MembershipAttack)
            and getattr(ATTACKS.get(n), "reads_every_client", False) == every_client]


def noisy_digits(root: Path | None, download: bool) -> Dataset:
    """Digits with NOISE of the labels (train and test alike) drawn at random, seeded."""
    d = load_digits(root, download)
    rng = np.random.default_rng(0)

    def noisy(y: torch.Tensor) -> torch.Tensor:
        flip = torch.from_numpy(rng.random(len(y)) < NOISE)
        return torch.where(flip, torch.from_numpy(rng.integers(0, 10, len(y))), y)

    return replace(d, name="noisy-digits", y_train=noisy(d.y_train), y_test=noisy(d.y_test))


@pytest.fixture(scope="module")
def noisy_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    saved = DATASETS.snapshot()
    DATASETS.register("noisy-digits")(noisy_digits)
    try:
        yield train_tiny(tmp_path_factory.mktemp("lira") / "noisy", dataset="noisy-digits", partition="iid",
                         num_clients=20, rounds=1, fraction=0.3, recipe=Recipe(epochs=40, batch_size=10, lr=0.3))
    finally:
        DATASETS.restore(saved)


def resplit_digits(split: int) -> Callable[[Path | None, bool], Dataset]:
    """Digits with a train/test split drawn by `split`: members (train) and non-members (test)
    are exchangeable only over splits, so the null test averages over two fixed ones."""

    def load(root: Path | None, download: bool) -> Dataset:
        d = load_digits(root, download)
        x, y = torch.cat([d.x_train, d.x_test]), torch.cat([d.y_train, d.y_test])
        order = torch.from_numpy(np.random.default_rng(split).permutation(len(y)))
        cut = len(d.y_train)
        return replace(d, name=f"digits-split{split}", x_train=x[order[:cut]], y_train=y[order[:cut]],
                       x_test=x[order[cut:]], y_test=y[order[cut:]])

    return load


@pytest.fixture(scope="module")
def unseen_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Path]]:
    """FedAvg where 2 of 10 clients train once: the other 8 clients' data is in no model."""
    saved = DATASETS.snapshot()
    runs = []
    try:
        for split in (1, 2):
            DATASETS.register(f"digits-split{split}")(resplit_digits(split))
            folder = tmp_path_factory.mktemp("lira") / f"unseen{split}"
            runs.append(train_tiny(folder, dataset=f"digits-split{split}", partition="iid", rounds=1,
                                   fraction=0.2, recipe=Recipe(epochs=20, batch_size=10, lr=0.3)))
        yield runs
    finally:
        DATASETS.restore(saved)


def pooled_metrics(paths: list[Path]) -> dict[str, dict[str, float]]:
    results = [r for r in map(AttackResult.load, paths) if r.applicable]
    out = {}
    for name in {r.attack for r in results}:
        truth, scores = pooled([r.extra["membership"]["per_query"] for r in results if r.attack == name])
        out[name] = ranking(truth, scores)[0]
    return out


def test_no_member_gives_auc_one_half(unseen_runs: list[Path], tmp_path: Path) -> None:
    attacks = membership_attacks()
    aucs: dict[str, list[float]] = {}
    for i, run in enumerate(unseen_runs):
        seen = set(Federation(run).transcript().clients())
        victims = [c for c in range(10) if c not in seen][:6]
        spec = EvaluationSpec(threat_models=("oracle",), attacks=tuple(attacks), victims=tuple(victims), aux_size=140,
                              eval_size=0, settings=fast_settings(attacks), executor="batched")
        for name, metrics in pooled_metrics(evaluate_run(run, spec, tmp_path / str(i), progress=False)).items():
            aucs.setdefault(name, []).append(metrics["auc"])
    assert set(aucs) == set(attacks)
    for name, values in aucs.items():
        assert abs(np.mean(values) - 0.5) <= 0.03, f"{name}: AUC {values} without members"


def test_memorised_members_are_found_at_low_fpr(noisy_run: Path, tmp_path: Path) -> None:
    attacks, servers = membership_attacks(), membership_attacks(every_client=True)
    spec = EvaluationSpec(attacks=tuple(attacks), victims=("all",), aux_size=140, eval_size=0,
                          settings=fast_settings(attacks), executor="batched")
    paths = evaluate_run(noisy_run, spec, tmp_path, progress=False)
    server = replace(spec, threat_models=("server",), attacks=tuple(servers), settings=fast_settings(servers))
    found = pooled_metrics(paths + evaluate_run(noisy_run, server, tmp_path / "server", progress=False))
    assert set(found) == set(attacks + servers)
    for name, metrics in found.items():
        assert metrics["auc"] > 0.62, f"{name}: AUC {metrics['auc']:.3f} on a memorising model"
        if ATTACKS.get(name).low_fpr:
            assert metrics["tpr_at_1fpr"] >= 0.10, f"{name}: TPR {metrics['tpr_at_1fpr']:.3f} at 1% FPR"
    one = next(r for r in map(AttackResult.load, paths) if r.applicable)
    info = one.extra["membership"]
    assert len(info["per_query"]["score"]) == info["members"] + info["nonmembers"]
    assert info["nonmembers"] > 2 * info["members"]  # as many as the 220-record pool supplies in the class mix
    assert info["not_measurable"] == ["tpr_at_01fpr"]
    assert "tpr_at_01fpr" not in one.metrics and info["ci"]["auc"][0] < one.metrics["auc"] < info["ci"]["auc"][1]
    assert info["chance"]["distinguishable_from_chance"]


def test_online_plan_holds_each_query_in_about_half_the_models() -> None:
    g = torch.Generator().manual_seed(0)
    aux = Samples(torch.rand(200, 1, 8, 8, generator=g), torch.arange(200) % 10)
    queries = Samples(torch.rand(60, 1, 8, 8, generator=g), torch.arange(60) % 10)
    plan = online_plan(aux, queries, [12] * 10, 16, 0.5, seed=0)
    share = plan.included.mean(0)
    assert 0 < share.min() and share.max() < 1 and abs(share.mean() - 0.5) < 0.05  # Binomial(16, 1/2) each
    for data, inc in zip(plan.datas, plan.included):
        held = {tuple(x.flatten().tolist()) for x in data.trained.x}
        assert all((tuple(q.flatten().tolist()) in held) == bool(i) for q, i in zip(queries.x, inc))
        assert len(data.trained) >= 10 * 10  # topped up per class to 12, at most half of aux (10)


@pytest.mark.parametrize("setting", [{"references": 1}, {"variance": "both"}, {"in_fraction": 1.0}])
def test_lira_settings_refuse_in_one_line(setting: dict[str, object]) -> None:
    for name in ("lira-offline", "lira-online"):
        with pytest.raises(UserError):
            ATTACKS.get(name).from_options(setting)


def test_lira_rounds_reads_every_visible_round_of_the_victim(fedavg_run: Path, tmp_path: Path) -> None:
    spec = EvaluationSpec(threat_models=("eavesdropper",), attacks=("lira-rounds",), victims=("all",),
                          aux_size=100, eval_size=0, settings=dict(ATTACKS.get("lira-rounds").fast_settings))
    results = [r for r in map(AttackResult.load, evaluate_run(fedavg_run, spec, tmp_path, progress=False))
               if r.applicable]
    index = Federation(fedavg_run).transcript().index
    for r in results:
        sent = sorted({e["round"] for e in index if e["sender"] == r.victim and e["kind"] == "uplink"})
        assert r.extra["membership"]["rounds"] == sent[-2:]  # fast_settings: max_rounds = 2
    assert any(len(r.extra["membership"]["rounds"]) == 2 for r in results)
    with pytest.raises(UserError):
        ATTACKS.get("lira-rounds").from_options({"max_rounds": 0})
