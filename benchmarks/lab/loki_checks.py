"""docs/active-server.md, "Detection at scale": every registered client check (the registry's
subclasses of `downlink-check`) on every downlink of one `loki` round of `loki_scale.py`'s cells,
and on honest rounds of the same federations (their false alarms).

    FEDATTACK_DATA=../shared/datasets python -m benchmarks.lab.loki_scale checks --out DIR --dataset D --clients M
    FEDATTACK_DATA=../shared/datasets python -m benchmarks.lab.loki_scale honest --out DIR --dataset D --clients M

Streamed: a round's downlinks are never held together (at 1,000 MNIST clients each is 94 million
numbers, 376 MB; a round of them 376 GB). One client's downlink is built, every check judges it
(a check that compares clients, `consistency-check`, keeps only what that client would tell the
others, `DownlinkCheck.gossip`: its digest), and it is dropped; after the round the comparing
checks judge every client from the gossip (`on_gossip`, `judge_gossip`), which decides what
`on_downlinks` and `judge` on the whole round would (tests/defences/test_client_checks.py).

Why the real `loki` refuses CIFAR-10 at 100 clients: its `LIMIT` (2^27 numbers, 512 MiB of
float32) is a deliberate memory guard on the module it puts in front of the model, m x bins x
pixels numbers (100 x 800 x 3,072 = 245,760,000 here, 983 MB), because the federation's round
loop holds every sampled client's downlink at once (m of them: 98 GB). `Unlimited` is the same
server without the guard; `module_for` and the units are `Loki`'s own, so each downlink is
byte for byte the one `Loki.send` would give that client (tested where `Loki` builds,
tests/benchmarks/test_loki_checks.py), and it is built one client at a time.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from fedattack.attacks.active.client_checks import registered_checks
from fedattack.attacks.active.servers._front import with_module
from fedattack.attacks.active.servers.imprint import Imprint
from fedattack.attacks.active.servers.loki import LIMIT, Loki, LokiSettings
from fedattack.data import Dataset, load_dataset
from fedattack.data.partition import make_partition
from fedattack.defences import parse_defence
from fedattack.defences.base import build_defence
from fedattack.defences.downlink_check import DownlinkCheck, similarity
from fedattack.federation.active import parse_active
from fedattack.federation.executors import make_executor
from fedattack.federation.loop import RoundLoop, client_data, sample_clients
from fedattack.federation.spec import FederationSpec
from fedattack.federation.train import active_adversary, build_target
from fedattack.rng import generator
from fedattack.target import Target
from fedattack.wire import Message, Payload


class Unlimited(Loki):
    """`loki` without its size guard (`LIMIT`), for a harness that builds one downlink at a time."""

    def __init__(self, settings: LokiSettings, target: Target, knowledge: object = None) -> None:
        Imprint.__init__(self, settings, target, knowledge)  # type: ignore[arg-type]


class Judges:
    """Every registered check, bound to the method, judging downlinks one at a time; each client
    with its own memory where `remember` (honest rounds), none in a first round."""

    def __init__(self, target: Target) -> None:
        self.checks: dict[str, DownlinkCheck] = {}
        for name in registered_checks():
            check = build_defence({"name": name}, target.ctx)
            assert isinstance(check, DownlinkCheck)
            check.bind(target)
            self.checks[name] = check
        self.told: dict[str, dict[int, str]] = {n: {} for n in self.checks}
        self.decided: dict[str, dict[tuple[int, int], str | None]] = {n: {} for n in self.checks}
        self.seconds: dict[str, float] = {n: 0.0 for n in self.checks}

    def see(self, down: Payload, client: int, rnd: int, remember: bool) -> None:
        """One client's downlink: judged by the checks that need nobody else, noted for the others."""
        for name, check in self.checks.items():
            start = time.process_time()
            if check.compares_clients:
                self.told[name][client] = check.gossip(down)
            else:
                judge = check.accept if remember else check.judge
                self.decided[name][(rnd, client)] = judge(down, client, rnd)
            self.seconds[name] += time.process_time() - start

    def close(self, rnd: int) -> None:
        """The round is over: the comparing checks judge each client from the round's gossip."""
        for name, check in self.checks.items():
            if check.compares_clients:
                check.on_gossip(rnd, self.told[name])
                for client, own in self.told[name].items():
                    self.decided[name][(rnd, client)] = check.judge_gossip(own, client, rnd)
                self.told[name] = {}

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per check: refused of judged, whether one client can run it, its reasons counted, the
        first reason, the CPU seconds it took."""
        out = {}
        for name, decided in self.decided.items():
            whys = [w for w in decided.values() if w is not None]
            reasons: dict[str, int] = {}
            for why in whys:
                kind = self.checks[name].kind(why)
                reasons[kind] = reasons.get(kind, 0) + 1
            out[name] = {"refused": len(whys), "of": len(decided), "alone": not self.checks[name].compares_clients,
                         "reasons": reasons, "why": whys[0] if whys else None,
                         "cpu_seconds": round(self.seconds[name], 1)}
        return out


def stream(judges: Judges, clients: list[int], build: Callable[[int], Payload], rnd: int,
           remember: bool = False) -> float:
    """Build, judge and drop each client's downlink in turn; the CPU seconds the building took."""
    building = 0.0
    for client in clients:
        start = time.process_time()
        down = build(client)
        building += time.process_time() - start
        judges.see(down, client, rnd, remember)
        del down
    judges.close(rnd)
    return building


def machine(start: float, cpu: float, load: tuple[float, ...]) -> dict[str, Any]:
    """What the measurement cost and under what load: wall and CPU seconds, this process's peak
    resident memory, the 1-minute load average before and after (a shared 2-core machine)."""
    return {"seconds": round(time.time() - start), "cpu_seconds": round(time.process_time() - cpu),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "load": [round(load[0], 1), round(os.getloadavg()[0], 1)]}


def attacked(base: FederationSpec, clients: int, cell: Mapping[str, Any]) -> dict[str, Any]:
    """Every check on every downlink of the cell's `loki` round (`designed`), streamed. The round
    is the model's first, so no client has an earlier downlink to compare with."""
    start, cpu, load = time.time(), time.process_time(), os.getloadavg()
    spec = replace(base, fraction=clients / base.num_clients, active=parse_active(
        f"loki:rounds=1,bins={cell['bins']},alpha={cell['alpha']}"), defences=(parse_defence("secure-aggregation"),))
    target, sampled, build = designed(spec, load_dataset(spec.dataset))
    judges = Judges(target)
    building = stream(judges, sampled, build, 1)
    numbers = sum(t.numel() for n, t in build(sampled[0]).items() if n.startswith("loki."))  # the module
    return {"checks": judges.summary(), "checks_run": {**machine(start, cpu, load), "building_cpu_seconds":
                                                       round(building), "module_numbers": numbers,
                                                       "downlinks": len(sampled), "loki_limit": LIMIT}}


def designed(spec: FederationSpec, data: Dataset) -> tuple[Target, list[int], Callable[[int], Payload]]:
    """The method, the round's sampled clients, and each one's downlink of round 1 as `Loki.send`
    builds it (the method's downlink with the whole module, block j alive for the j-th sampled
    client), by a server of `spec.active`'s settings (`Unlimited`: past `LIMIT` too)."""
    target = build_target(spec, data, spec.num_clients)
    single = replace(spec, fraction=1 / spec.num_clients, defences=())  # a real `loki` of one block: its settings
    real = active_adversary(single, build_target(single, data, spec.num_clients), data, spec.num_clients)
    assert isinstance(real, Loki)
    server = Unlimited(real.settings, target, real.knowledge)  # type: ignore[arg-type]
    sampled = sorted(sample_clients(spec, spec.num_clients, 1))
    state, model = target.init_server(generator(spec.seed, "init")), server.front_model(server.alpha, target)
    block = {k: j for j, k in enumerate(sampled)}
    return target, sampled, lambda k: with_module(model, target.broadcast(state, k, 1), server.module_for(1, block[k]))


def honest(base: FederationSpec, clients: int, rounds: int) -> dict[str, Any]:
    """Every check on every downlink of `rounds` honest rounds of the same federation (the same
    method, model, clients and recipe; no server acting), each client with its own memory, the
    round's downlinks streamed as the loop records them. Without secure aggregation: it changes
    no downlink but the fixed-point rounding of the sum (2^-24), and its pairwise masks for 1,000
    clients would cost more than the rounds."""
    start, cpu, load = time.time(), time.process_time(), os.getloadavg()
    data = load_dataset(base.dataset)
    spec = replace(base, fraction=clients / base.num_clients, rounds=rounds, executor="batched")
    target = build_target(spec, data, spec.num_clients)
    partition = make_partition(spec.partition, data, spec.num_clients, spec.seed, **spec.partition_options)
    datas = [client_data(data, partition, k) for k in range(spec.num_clients)]
    judges = Judges(target)
    ends: list[Payload] = []  # the first and the last downlink: did the model move?

    def record(msg: Message) -> None:
        if msg.kind == "downlink":
            judges.see(msg.payload, msg.receiver, msg.round, remember=True)
            ends[1 if ends else 0:] = [msg.payload]

    loop = RoundLoop(spec, target, datas, make_executor(spec.executor), record, None)
    state = loop.start()
    seen: set[int] = set()
    returning = 0
    for rnd in range(1, rounds + 1):
        sampled = loop.run_round(state, rnd)
        judges.close(rnd)
        returning += len(seen & set(sampled))
        seen |= set(sampled)
    weight = next(n for n in target.downlink_weights() if ends[0][n].dim() >= 2)
    moved = similarity(ends[-1][weight].flatten(1), ends[0][weight].flatten(1))
    return {"honest": {"rounds": rounds, "returning": returning, "checks": judges.summary(),
                       "first_to_last_row_cosine": {weight: round(moved, 4)},
                       **machine(start, cpu, load)}}


def judged_round(downs: Mapping[int, Payload], target: Target, rnd: int = 1) -> dict[str, str | None]:
    """Each check's first refusal over a whole round held in memory, judged the streamed way
    (for tests: the same round through `on_downlinks`/`judge` must decide the same)."""
    judges = Judges(target)
    stream(judges, sorted(downs), lambda k: downs[k], rnd)
    return {f"{n}:{k}": w for n, d in judges.decided.items() for (_, k), w in sorted(d.items())}
