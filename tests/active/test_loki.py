"""Issue #44's test: through secure aggregation with 100 clients a round, one acting round of the
`loki` server (every client its own block of imprint units, nobody a model of zeros) recovers
images of many clients at once from the one sum the server holds; an honest server reading the
same kind of securely aggregated round recovers no more than as many public images match.

Marked slow (the secure sum's pairwise masks of 100 clients take about a minute on two busy
cores); `test_matrix.py` runs `loki` fast on every method and defence. Tiny on purpose: digits
(8x8), 100 clients of 4 images (3 to train on), 8 bins each, one round, in memory.
A client counts as read when some image the server returns matches one of its training images
above 20 dB (one-to-one matching, `readout.matched`)."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

from fedattack.attacks.active.readout import held, honest_readout, matched
from fedattack.data.partition import make_partition
from fedattack.defences import parse_defence
from fedattack.federation.active import parse_active
from fedattack.federation.executors import make_executor
from fedattack.federation.loop import RoundLoop, client_data
from fedattack.federation.train import active_adversary, build_target
from fedattack.target import LocalData, Recipe, Target
from fedattack.wire import Message
from tests.active.conftest import digits
from tests.conftest import tiny_spec

CLIENTS, DB = 100, 20.0


@functools.cache
def round_of(active: str | None) -> tuple[Target, list[Message], list[LocalData], object]:
    """One round of 100 digits clients (4 images each) under secure aggregation."""
    spec = tiny_spec(partition="iid", partition_options={"client_size": 4}, num_clients=CLIENTS, fraction=1.0,
                     rounds=1, recipe=Recipe(epochs=1, batch_size=2, lr=0.1),
                     active=None if active is None else parse_active(active),
                     defences=(parse_defence("secure-aggregation"),))
    data = digits()
    target = build_target(spec, data, CLIENTS)
    adversary = active_adversary(spec, target, data, CLIENTS)
    partition = make_partition(spec.partition, data, CLIENTS, spec.seed, **spec.partition_options)
    datas = [client_data(data, partition, k) for k in range(CLIENTS)]
    messages: list[Message] = []
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        loop = RoundLoop(spec, target, datas, make_executor(spec.executor), messages.append, adversary)
        loop.run_round(loop.start(), 1)
    finally:
        torch.set_num_threads(before)
    return target, messages, datas, adversary


def read_clients(images_of: list[torch.Tensor], datas: list[LocalData]) -> int:
    """How many clients have a training image that some returned image matches above 20 dB."""
    return sum(bool((matched(images, d.x_train).psnr > DB).any()) for images, d in zip(images_of, datas))


@pytest.mark.slow  # about a minute on 2 busy cores: 100 clients' pairwise masks
def test_one_loki_round_reads_many_clients_through_a_secure_sum_of_100() -> None:
    target, messages, datas, adversary = round_of("loki:rounds=1,bins=8,alpha=0.003")
    downs = {m.receiver: m.payload for m in messages if m.kind == "downlink"}
    assert len(downs) == CLIENTS
    assert all(bool(p["fc1.weight"].any()) for p in downs.values()), "a client got a model of zeros"
    assert not torch.equal(downs[0]["loki.weight"], downs[1]["loki.weight"])  # said: clients get different models
    assert all(str(t.dtype) == "torch.int64" for m in messages if m.kind == "uplink" for t in m.payload.values())
    aux = digits().x_test
    seen = held(target, messages, 1, 0, aux)  # the one secure sum, decoded once
    reads = [adversary.read(dataclasses.replace(seen, victim=k)).images for k in range(CLIENTS)]  # type: ignore[attr-defined]
    assert read_clients(reads, datas) >= 60, read_clients(reads, datas)
    verbatim = sum(bool((matched(r, d.x_train).psnr > 40.0).any()) for r, d in zip(reads, datas))
    assert verbatim >= 40, verbatim


@pytest.mark.slow
def test_an_honest_server_reading_a_secure_sum_of_100_recovers_nothing_above_chance() -> None:
    target, messages, datas, _ = round_of(None)
    aux = digits().x_test
    seen = held(target, messages, 1, 0, aux)
    reads = [honest_readout(dataclasses.replace(seen, victim=k)).images for k in range(CLIENTS)]
    public = [aux[(k * len(r)) % (len(aux) - len(r)):][:len(r)] for k, r in enumerate(reads)]  # as many public images
    assert read_clients(reads, datas) <= read_clients(public, datas) + 2, (read_clients(reads, datas),
                                                                        read_clients(public, datas))
