"""The attack-side contract, read from the registries: declared metrics, declared knowledge,
the family base classes on hand-made inputs, and `EvaluationSpec`'s own checks."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from fedattack.attacks.data_reconstruction.family import MAX_PSNR, DataReconstruction, Reconstructions
from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.hidden_parts.base import RECONSTRUCTIONS
from fedattack.attacks.membership.family import MembershipAttack
from fedattack.attacks.threat_models.base import RunFacts, ThreatModel
from fedattack.attacks.view import UNKNOWN_LABEL, Channel, Knowledge, Knows
from fedattack.cli import cli
from fedattack.evaluation import EvaluationSpec
from fedattack.registry import ATTACKS, THREAT_MODELS, UserError

FACTS = RunFacts(recorded_rounds=(1, 2, 5), num_clients=10, rounds=5)


@pytest.mark.parametrize("name", ATTACKS.names())
def test_every_attack_declares_its_metrics(name: str) -> None:
    metrics = ATTACKS.get(name).metrics
    keys = [m.key for m in metrics]
    assert keys and len(set(keys)) == len(keys)
    assert any(m.headline for m in metrics) and sum(m.primary for m in metrics) == 1
    assert all(m.leak in ("higher", "lower", "none") for m in metrics)


@pytest.mark.parametrize("name", THREAT_MODELS.names())
def test_every_threat_model_keeps_to_what_it_declares(name: str) -> None:
    tm = THREAT_MODELS.get(name)()
    assert isinstance(tm.knows, Knows) and tm.observes
    channels = tm.channels(3, FACTS)
    assert channels and all(ch.kind in ("downlink", "uplink") for ch in channels)
    if not tm.knows.every_client:
        assert all(ch.client == 3 for ch in channels)
    described = tm.describe(3, FACTS)
    assert described["knows"] == tm.knows.describe() and len(described["channels"]) == len(channels)


def test_a_threat_model_may_not_use_other_clients_without_declaring_it() -> None:
    class Nosy(ThreatModel):  # no `name`: not registered
        def channels(self, victim: int, facts: RunFacts) -> list[Channel]:
            return [Channel(None, "uplink")]

    fed = SimpleNamespace(check_client=lambda c: None)
    with pytest.raises(UserError, match="declare knows = Knows\\(every_client=True\\)"):
        Nosy().view(fed, 0, FACTS)


def samples(n: int, seed: int = 0) -> Samples:
    gen = torch.Generator().manual_seed(seed)
    return Samples(torch.rand(n, 1, 8, 8, generator=gen), torch.arange(n) % 3)


def test_knowledge_hands_over_only_what_the_threat_model_knows() -> None:
    full = Knowledge(aux=samples(20), queries=samples(6, 1), victim_size=9, victim_class_counts=[3, 3, 3])
    assert full.as_known_by(Knows()) == full.as_known_by(Knows()) and full.as_known_by(Knows()).labels_known
    blind = full.as_known_by(Knows(labels=False, local_samples=False, recipe=False, aux_size=5))
    assert len(blind.aux) == 5 and torch.equal(blind.aux.x, full.aux.x[:5])
    assert (blind.aux.y == UNKNOWN_LABEL).all() and (blind.queries.y == UNKNOWN_LABEL).all()
    assert blind.victim_size is None and blind.victim_class_counts == [] and not blind.recipe_known
    assert "no labels" in blind.assumptions and "recipe" not in blind.assumptions


class Linear:
    """A stand-in target: logits are the first pixels, so confidence is readable by hand."""

    num_classes = 3

    def forward(self, params: dict, x: torch.Tensor) -> torch.Tensor:
        return 5.0 * x.flatten(1)[:, :3]


class Brightness(MembershipAttack):
    """Members are the brighter queries (a test attack: `scores` only)."""

    def scores(self, adv: Any, gen: torch.Generator) -> np.ndarray:
        return adv.knowledge.queries.x.flatten(1).mean(1).numpy()


def adversary(knowledge: Knowledge) -> Any:
    return SimpleNamespace(knowledge=knowledge, view=SimpleNamespace(target=Linear()),
                           model=SimpleNamespace(params={}))


@pytest.mark.parametrize("labels", [True, False])
def test_a_membership_attack_writes_only_its_score(labels: bool) -> None:
    queries = samples(40, 2)
    is_member = np.arange(40) % 2 == 0
    queries = Samples(queries.x + torch.as_tensor(is_member, dtype=torch.float32).view(-1, 1, 1, 1), queries.y)
    know = Knowledge(aux=samples(10), queries=queries, victim_size=20, victim_class_counts=[7, 7, 6])
    adv = adversary(know.as_known_by(Knows(labels=labels)))
    guesses = Brightness().run(adv, torch.Generator())
    assert guesses.predicted.sum() == 20  # the default rule: the upper half
    truth: Any = SimpleNamespace(is_member=is_member)  # a stand-in: the scorer reads is_member only
    scored = Brightness().score(guesses, truth)
    assert scored.metrics["auc"] == 1.0 and scored.metrics["accuracy"] == 1.0
    unmeasurable = set(scored.extra["membership"]["not_measurable"])  # 20 non-members: no TPR at 1% FPR
    assert unmeasurable == {"tpr_at_1fpr", "tpr_at_01fpr"}
    assert set(scored.metrics) == {m.key for m in MembershipAttack.metrics} - unmeasurable
    assert set(scored.baselines["loss-threshold"]) == set(scored.metrics)
    assert scored.extra["membership"]["labels"].startswith("known" if labels else "predicted")


def test_data_reconstruction_matches_each_guess_to_its_training_image() -> None:
    members = samples(5, 3)
    noise = 0.05 * torch.randn(2, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    guesses = torch.cat([members.x[[0]], (members.x[[3, 1]] + noise).clamp(0, 1)])
    truth: Any = SimpleNamespace(members=members)  # a stand-in: the scorer reads the members only
    scored = DataReconstruction().score(Reconstructions(guesses), truth)
    match = scored.extra["reconstruction_match"]
    assert match["pairs"] == [[0, 0], [1, 3], [2, 1]]
    assert match["psnr"][0] == pytest.approx(MAX_PSNR) and 20 < match["psnr"][1] < MAX_PSNR
    assert match["ssim"][0] == pytest.approx(1.0) and scored.metrics["share_recovered"] == 1.0
    assert set(scored.metrics) == {m.key for m in DataReconstruction.metrics}
    assert torch.equal(scored.images["matched"], members.x[[0, 3, 1]])
    far = DataReconstruction().score(Reconstructions(1 - members.x[:2]), truth)
    assert far.metrics["psnr_mean"] < scored.metrics["psnr_mean"]


def test_evaluation_spec_checks_its_own_values() -> None:
    spec = EvaluationSpec(threat_models="server", victims=3, settings={"shadows": 2})
    assert spec.threat_models == ("server",) and spec.victims == (3,)
    assert spec.to_json()["threat_models"] == ["server"]
    for bad, message in [({"attacks": ()}, "name at least one attack"), ({"victims": ["x"]}, "not a client id"),
                         ({"aux_size": -1}, "aux-size must be an integer of at least 0"),
                         ({"max_queries": 0}, "max-queries"), ({"settings": {"a": [1]}}, "attack setting 'a'"),
                         ({"reconstruction": ""}, "reconstruction must be")]:
        with pytest.raises(UserError, match=message) as err:
            EvaluationSpec(**bad)
        assert "\n" not in str(err.value)
    with pytest.raises(AttributeError):
        spec.seed = 1  # type: ignore[misc]  # frozen


def test_list_has_a_section_for_reconstruction_strategies() -> None:
    out = CliRunner().invoke(cli, ["list", "reconstructions"]).output
    assert all(name in out for name in RECONSTRUCTIONS.names())
