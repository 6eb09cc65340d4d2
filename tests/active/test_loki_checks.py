"""benchmarks/lab/loki_checks.py judges a `loki` round one downlink at a time: each downlink it
builds must be byte for byte what the real `loki` server sends that client (`Loki.send`, where
its size limit lets it build), and the streamed decisions of every registered check must be the
ones the checks reach on the whole round held in memory (`on_downlinks`, then `judge`)."""

from __future__ import annotations

import torch

from benchmarks.lab.loki_checks import designed, judged_round
from fedattack.attacks.active.client_checks import registered_checks
from fedattack.defences import parse_defence
from fedattack.defences.base import build_defence
from fedattack.defences.consistency_check import digest
from fedattack.defences.downlink_check import DownlinkCheck
from fedattack.federation.active import Downlinks, parse_active
from fedattack.federation.train import active_adversary
from fedattack.rng import generator
from tests.active.conftest import digits
from tests.conftest import tiny_spec


def test_the_streamed_downlinks_are_the_real_servers_and_judged_alike() -> None:
    spec = tiny_spec(partition="iid", partition_options={"client_size": 4}, num_clients=12, fraction=0.5, rounds=1,
                     active=parse_active("loki:rounds=1,bins=8,alpha=0.01"),
                     defences=(parse_defence("secure-aggregation"),))
    data = digits()
    target, sampled, build = designed(spec, data)
    real = active_adversary(spec, target, data, spec.num_clients)
    state = target.init_server(generator(spec.seed, "init"))
    sent = real.send(1, sampled[0], state, Downlinks(target, {k: target.broadcast(state, k, 1) for k in sampled}))
    assert len(sampled) == 6
    assert {k: digest(build(k)) for k in sampled} == {k: digest(p) for k, p in sent.payloads.items()}
    streamed = judged_round(sent.payloads, target)
    whole = {}
    for name in registered_checks():
        check = build_defence({"name": name}, target.ctx)
        assert isinstance(check, DownlinkCheck)
        check.bind(target)
        check.on_downlinks(1, sent.payloads)
        whole.update({f"{name}:{k}": check.judge(p, k, 1) for k, p in sorted(sent.payloads.items())})
    assert streamed == whole
    assert all(why is not None for why in whole.values())  # every check refuses every client of the round
    assert not torch.equal(build(sampled[0])["loki.weight"], build(sampled[1])["loki.weight"])
