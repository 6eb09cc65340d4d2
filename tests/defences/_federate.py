"""Tiny in-memory federations on digits, with defences, run once per test session."""

from __future__ import annotations

import dataclasses
import json
from functools import cache, lru_cache
from typing import Any

from fedattack.data import load_dataset
from fedattack.data.partition import make_partition
from fedattack.federation.executor_plugins.batched import BatchedExecutor
from fedattack.federation.executors import Executor, make_executor
from fedattack.federation.loop import FederationState, client_data
from fedattack.federation.train import build_target
from fedattack.target import Recipe, Target
from fedattack.wire import Message
from tests.conftest import run_rounds, tiny_spec

SPEC = tiny_spec(num_clients=4, fraction=0.75, rounds=2, recipe=Recipe(epochs=1, batch_size=16, lr=0.1))


@lru_cache(maxsize=1)
def _setting():  # type: ignore[no-untyped-def]
    dataset = load_dataset("digits")
    partition = make_partition(SPEC.partition, dataset.y_train.numpy(), SPEC.num_clients,
                               SPEC.seed, SPEC.dataset, **SPEC.partition_options)
    return dataset, partition


def federate(method: str, defences: list[dict[str, Any]], executor: str = "sequential",
             **spec: Any) -> tuple[Target, FederationState, list[Message]]:
    """The federation's target, final state and every message on the wire (cached per session)."""
    return _federate(method, json.dumps(defences), executor, json.dumps(spec, sort_keys=True))


@cache
def _federate(method: str, defences: str, executor: str,
              spec_json: str) -> tuple[Target, FederationState, list[Message]]:
    dataset, partition = _setting()
    spec = dataclasses.replace(SPEC, method=method, executor=executor,
                               defences=tuple(json.loads(defences)), **json.loads(spec_json))
    target = build_target(spec, dataset, partition.num_clients)
    datas = [client_data(dataset, partition, k) for k in range(partition.num_clients)]
    for k, d in enumerate(datas):  # uneven sizes, so sample weights matter
        d.x_train, d.y_train = d.x_train[:20 + 12 * k], d.y_train[:20 + 12 * k]
    _, state, messages = run_rounds(spec, target, datas, _executor(executor))
    return target, state, messages


def _executor(name: str) -> Executor:
    """A registered executor, or "batched-vmap": the batched one with vmap for every target (no
    hand-written MLP step), whose arithmetic is the sequential loop's."""
    return BatchedExecutor(fast=False) if name == "batched-vmap" else make_executor(name)


def pairs(messages: list[Message]) -> list[tuple[Message, Message]]:
    """(downlink, uplink) of each client's round."""
    downs = {(m.round, m.client): m for m in messages if m.kind == "downlink"}
    return [(downs[(m.round, m.client)], m) for m in messages if m.kind == "uplink"]
