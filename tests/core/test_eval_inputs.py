"""The batched executor's evaluation keeps the clients' prepared test inputs between rounds.

What must hold: the same bits as preparing them every round (the logits, not only the
accuracies), one preparation for many evaluations, and nothing kept for clients no longer
evaluated.
"""

from __future__ import annotations

import torch
from torch.func import vmap

from fedattack.data import load_dataset
from fedattack.data.partition import make_partition
from fedattack.federation.executor_plugins import _evaluate
from fedattack.federation.executor_plugins._evaluate import InputCache, evaluate_clients
from fedattack.federation.executor_plugins.batched import BatchedExecutor
from fedattack.federation.loop import client_data
from fedattack.federation.train import build_target
from fedattack.target import Recipe
from tests.conftest import run_rounds, tiny_spec

SPEC = tiny_spec(method="waffle-ibp", num_clients=6, fraction=0.5, rounds=2,
                 recipe=Recipe(epochs=1, batch_size=8, lr=0.1))


def _trained():  # type: ignore[no-untyped-def]
    dataset = load_dataset("digits")
    partition = make_partition(SPEC.partition, dataset.y_train.numpy(), SPEC.num_clients, SPEC.seed, SPEC.dataset)
    target = build_target(SPEC, dataset, partition.num_clients)
    datas = [client_data(dataset, partition, k) for k in range(partition.num_clients)]
    loop, state, _ = run_rounds(SPEC, target, datas, BatchedExecutor())
    deployed = [target.deployed(state.server, p) for p in state.private]
    return target, datas, deployed


def test_cached_inputs_give_the_bits_of_inputs_prepared_every_time() -> None:
    target, datas, deployed = _trained()
    assert target.ctx.normalization is not None  # the preparation moves the normalisation
    cache = InputCache()
    logits = {}
    with torch.no_grad():
        for _ in range(2):  # the second call reads the cache
            logits = _evaluate._stacked_models(target, deployed, [[k] for k in range(len(datas))],
                                               datas, torch.device("cpu"), cache)
            cache.finish()
        width = max(len(d.x_test) for d in datas)  # one chunk: 6 clients of digits' test rows
        x = torch.stack([_evaluate._pad(d.x_test, width) for d in datas])
        params = {n: torch.stack([s[n] for s in deployed]) for n in deployed[0]}
        before = vmap(target.forward)(params, x)  # what every round computed before the cache
    for k, d in enumerate(datas):
        assert torch.equal(logits[k], before[k, :len(d.x_test)])


def test_inputs_are_prepared_once_and_dropped_when_no_longer_evaluated(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    target, datas, deployed = _trained()
    built = []
    padded = _evaluate._padded
    monkeypatch.setattr(_evaluate, "_padded", lambda *a: built.append(1) or padded(*a))
    cache = InputCache()
    with torch.no_grad():
        first = evaluate_clients(target, deployed, datas, torch.device("cpu"), cache)
        again = evaluate_clients(target, deployed, datas, torch.device("cpu"), cache)
        assert first == again == evaluate_clients(target, deployed, datas, torch.device("cpu"))
        assert len(built) == 2  # the cached call built nothing, the uncached one its own
        evaluate_clients(target, deployed[:3], datas[:3], torch.device("cpu"), cache)  # other clients
    assert len(cache.entries) == 1 and len(built) == 3
