"""Reference and shadow models trained together, by default (issue #47).

`evaluate`'s default executor trains each victim's reference and shadow models in one stacked
computation (the method's step kernel), in chunks the memory budget allows. Each model's draws
are keyed by its number, so a chunked training gives each model what one call gives it; the
stacked models agree with the sequential reference, one model at a time, within the batched
executors' float32 tolerance (not bit for bit: torch's batched products round differently
from one model's). Held here for every registered model, and the plan's estimate follows the
stacking.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.membership.reference_models import TrainsModels, references_cost
from fedattack.attacks.membership.shadow import ShadowData, ShadowModels, shadow_splits, train_shadows
from fedattack.attacks.planning.cost import Probe, Workload
from fedattack.attacks.planning.plan import decide
from fedattack.attacks.view import Observation
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.train import build_target
from fedattack.registry import ATTACKS, MODELS, UserError
from fedattack.rng import generator
from fedattack.target import Recipe, Target
from tests.core.test_executor_conformance import ATOL, RTOL, dataset_for

MODELS_TRAINED = 5
SPEC = dataclasses.replace(EvaluationSpec())
FED = {"num_clients": 3, "recipe": Recipe(epochs=1, batch_size=8, lr=0.05)}


def setting(model: str) -> tuple[Target, Observation, list[ShadowData]]:
    from tests.conftest import tiny_spec

    dataset = dataset_for(model)
    target = build_target(tiny_spec(model=model, **FED), dataset, 3)
    start = Observation(round=0, down=target.broadcast(target.init_server(generator(0, "init")), 0, 0))
    aux = Samples(dataset.x_test[:300], dataset.y_test[:300])
    return target, start, shadow_splits(aux, [3] * dataset.num_classes, MODELS_TRAINED, 0.5, seed=3)


def adversary(target: Target, start: Observation, executor: str, chunk: int | None) -> SimpleNamespace:
    """What `train_shadows` reads of an adversary."""
    return SimpleNamespace(view=SimpleNamespace(target=target, victim=0), obs=start, executor=executor,
                           chunk=chunk, trained={})


def test_the_default_executor_stacks_them() -> None:
    assert SPEC.executor != "sequential"  # the reference trains one model after another


@pytest.mark.parametrize("model", MODELS.names())
def test_models_trained_together_are_the_ones_trained_one_at_a_time(model: str) -> None:
    try:
        target, start, datas = setting(model)
    except UserError as exc:
        pytest.skip(f"{model}: {exc}")
    alone = [sh.obs.up for j, data in enumerate(datas)
             for sh in ShadowModels(target, "sequential", 1, 0).train(start, [data], False, first=j)]
    for chunk in (None, 2):  # all in one stack, and stacks of 2, 2 and 1
        together = [sh.obs.up for sh in train_shadows(adversary(target, start, SPEC.executor, chunk), 1, datas, False)]
        assert len(together) == len(alone) == MODELS_TRAINED
        for j, (a, b) in enumerate(zip(together, alone)):
            assert a is not None and b is not None and a.keys() == b.keys()
            for k in a:
                torch.testing.assert_close(a[k], b[k], atol=ATOL, rtol=RTOL,
                                           msg=lambda m, j=j, k=k, c=chunk: f"{model}, model {j}, chunk {c}: {k}: {m}")
    assert any(not torch.equal(alone[0][k], alone[1][k]) for k in alone[0])  # the models differ


def test_one_at_a_time_in_chunks_is_bit_for_bit_one_call() -> None:
    """The sequential reference trains each model from its own keyed draws: chunks change nothing."""
    target, start, datas = setting("digits-mlp")
    whole = train_shadows(adversary(target, start, "sequential", len(datas)), 1, datas, False)
    parts = train_shadows(adversary(target, start, "sequential", 2), 1, datas, False)
    for a, b in zip(whole, parts):
        assert a.obs.up is not None and b.obs.up is not None
        assert all(torch.equal(a.obs.up[k], b.obs.up[k]) for k in a.obs.up)


def probe(stacked: float | None) -> Probe:
    return Probe(params=159_010, step_seconds=1e-3, job_seconds=0.01, forward_seconds=4e-6, input_numel=784,
                 stacked_step_seconds=stacked, executor="sequential" if stacked is None else "batched")


def work(p: Probe) -> Workload:
    return Workload(samples=2400, rounds=1, clients=1, queries=2000, aux=4000, classes=10, epochs=5,
                    batch_size=10, probe=p)


def test_the_plan_follows_the_stacking_and_chunks_to_the_budget() -> None:
    one, stacked = work(probe(None)), work(probe(2e-4))
    seq, together = references_cost(one, 16, 2400, 2000), references_cost(stacked, 16, 2400, 2000)
    # 16 x 1,200 steps of 1 ms one at a time; 1,200 steps of 0.8 ms + 16 x 0.2 ms stacked
    assert seq.once == pytest.approx(16 * (0.01 + 1200e-3))
    assert together.once == pytest.approx(16 * 0.01 + 1200 * (0.8e-3 + 16 * 2e-4))
    assert "16 at a time" in together.detail and "at a time" not in seq.detail
    halves = references_cost(stacked, 16, 2400, 2000, chunk=8)
    assert halves.once == pytest.approx(16 * 0.01 + 1200 * (2 * 0.8e-3 + 16 * 2e-4))
    assert halves.peak_bytes < together.peak_bytes
    for name in ATTACKS.names():  # every attack that trains models may be given fewer at a time
        attack = ATTACKS.get(name)()
        if not isinstance(attack, TrainsModels):
            continue
        full = decide(attack, stacked, 1, 1 << 40)
        assert full.runs and full.chunk is None
        models = attack.chunks(stacked)
        room = (attack.cost(stacked, None).peak_bytes + attack.cost(stacked, 1).peak_bytes) // 2
        tight = decide(attack, stacked, 1, room)
        assert tight.runs and tight.chunk is not None and 1 <= tight.chunk < models, name
