"""docs/active-server.md, "Stronger checks": every registered active server's acting rounds, what
each recovers and how often each registered client-side check (every subclass of `downlink-check`)
would refuse it; and the checks' false alarms on honest federations of every registered method.
The checks are replayed over the recorded downlinks (`DownlinkCheck.accept`, what a client running
them would decide, round by round, with its own memory); they are not in the federation, so the
attack's share is what it takes from clients that do not check.

    FEDATTACK_DATA=../shared/datasets python benchmarks/lab/detection.py attacks --setting mnist --out /tmp/detect
    FEDATTACK_DATA=../shared/datasets python benchmarks/lab/detection.py honest --setting mnist --out /tmp/detect
    python benchmarks/lab/detection.py evidence --setting mnist --out /tmp/detect   # docs/evidence/active-server/

Two settings (`SETTINGS`), seed 0, 10 clients a round, 5 local epochs; the server acts in rounds
2-13 (round 1 honest, so a client sampled again holds an honest downlink to compare with):
  - digits: scikit-learn's 8x8, `digits-mlp`, 60 clients of 20 i.i.d. images (16 to train on),
    batches of 5, SGD at 0.1; imprint and loki 64 bins (four per image);
  - mnist: the page's "MNIST, clients of 50 images", `mnist-mlp`, 600 clients of 100 i.i.d. images
    (50 to train on), batches of 5, SGD at 0.04; imprint 500 bins (the page's), loki 200 a client
    (four per image).
Victims: the client each acting round picks (the lowest-numbered sampled one not attacked yet: 12);
each is scored on its training images (share matched above 20 dB, one to one), beside chance (as
many test-split images matched the same way).
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from fedattack.attacks.active.client_checks import registered_checks
from fedattack.attacks.active.readout import held
from fedattack.attacks.data_reconstruction.image_metrics import assignment, psnr_matrix
from fedattack.data import load_dataset
from fedattack.data.partition import make_partition
from fedattack.defences import parse_defence
from fedattack.defences.base import build_defence
from fedattack.defences.downlink_check import DownlinkCheck
from fedattack.federation.active import ACTIVE, parse_active
from fedattack.federation.executors import make_executor
from fedattack.federation.loop import RoundLoop, client_data
from fedattack.federation.spec import FederationSpec
from fedattack.federation.train import active_adversary, build_target
from fedattack.registry import TARGETS, UserError
from fedattack.target import Recipe, Target
from fedattack.wire import Message

ROUNDS, DB = 13, 20.0
SECURE = "secure-aggregation"


@dataclass(frozen=True)
class Setting:
    """A federation the checks are measured in: its spec, each active server's extra settings
    (the imprint's and loki's bins: four per training image on digits; the page's 500 on MNIST,
    loki four per image), and how many honest rounds judge the false alarms."""

    spec: FederationSpec
    extra: dict[str, str]
    honest_rounds: int


SETTINGS = {
    "digits": Setting(FederationSpec(dataset="digits", model="digits-mlp", partition="iid",
                                     partition_options={"client_size": 20}, num_clients=60, fraction=1 / 6,
                                     rounds=ROUNDS, recipe=Recipe(epochs=5, batch_size=5, lr=0.1), seed=0,
                                     executor="batched"),
                      {"imprint": "bins=64", "loki": "bins=64"}, 20),
    # docs/active-server.md's "MNIST, clients of 50 images": 600 clients of 100 (50 trained on)
    "mnist": Setting(FederationSpec(dataset="mnist", model="mnist-mlp", partition="iid",
                                    partition_options={"test_fraction": 0.5}, num_clients=600, fraction=10 / 600,
                                    rounds=ROUNDS, recipe=Recipe(epochs=5, batch_size=5, lr=0.04), seed=0,
                                    eval_every=ROUNDS, executor="batched"),
                     {"imprint": "bins=500", "loki": "bins=200"}, 20),
}


def cells(setting: Setting) -> list[tuple[str, str, tuple[str, ...]]]:
    """(label, active spec, defences) for every registered active server and its variants; the
    secure sum where the server reads through one (isolation needs it; loki is built for it)."""
    out = []
    for name in ACTIVE.names():
        extra = setting.extra.get(name, "")
        settings = f"rounds=2-{ROUNDS}" + (f",{extra}" if extra else "")
        isolating = "isolate" in {f.name for f in ACTIVE.get(name).Settings.__dataclass_fields__.values()}
        reads_sum = name in ("model-inconsistency", "loki")
        out.append((name, f"{name}:{settings}", (SECURE,) if reads_sum else ()))
        if isolating:
            out.append((f"{name} + isolation", f"{name}:{settings},isolate=true", (SECURE,)))
        if name == "imprint":
            out.append((f"{name} through the sum", f"{name}:{settings}", (SECURE,)))
    return out


def federate(spec: FederationSpec) -> tuple[Target, list[Message], list[Any], Any, Any]:
    """The federation in memory, recording every message."""
    data = load_dataset(spec.dataset)
    target = build_target(spec, data, spec.num_clients)
    adversary = active_adversary(spec, target, data, spec.num_clients)
    partition = make_partition(spec.partition, data, spec.num_clients, spec.seed, **spec.partition_options)
    datas = [client_data(data, partition, k) for k in range(spec.num_clients)]
    messages: list[Message] = []
    loop = RoundLoop(spec, target, datas, make_executor(spec.executor), messages.append, adversary)
    state = loop.start()
    for rnd in range(1, spec.rounds + 1):
        loop.run_round(state, rnd)
    return target, messages, datas, adversary, data


def replay(target: Target, messages: list[Message]) -> dict[str, dict[tuple[int, int], str | None]]:
    """What each registered check decides on every downlink, each client with its own memory."""
    out: dict[str, dict[tuple[int, int], str | None]] = {}
    for name in registered_checks():
        check = build_defence({"name": name}, target.ctx)
        assert isinstance(check, DownlinkCheck)
        check.bind(target)
        decided: dict[tuple[int, int], str | None] = {}
        for rnd in sorted({m.round for m in messages}):
            downs = {m.receiver: m.payload for m in messages if m.round == rnd and m.kind == "downlink"}
            check.on_downlinks(rnd, downs)
            for client, down in sorted(downs.items()):
                decided[(rnd, client)] = check.accept(down, client, rnd)
        out[name] = decided
    return out


def share(images: torch.Tensor, real: torch.Tensor) -> float:
    """The share of `real` matched one to one above 20 dB."""
    if len(images) == 0:
        return 0.0
    table = psnr_matrix(images, real)
    rows, cols = assignment(table, maximize=True)
    return float((table[rows, cols] > DB).sum()) / len(real)


def attacks(out: Path, setting: Setting) -> None:
    for label, active, defences in cells(setting):
        path = out / "attacks" / f"{label.replace(' ', '_')}.json"
        if path.exists():
            continue
        start, cpu = time.time(), time.process_time()
        spec = replace(setting.spec, active=parse_active(active), defences=tuple(parse_defence(d) for d in defences))
        target, messages, datas, adversary, data = federate(spec)
        decided = replay(target, messages)
        rows = []
        for entry in adversary.acted:
            rnd, victim = entry["round"], entry["victim"]
            seen = held(target, messages, rnd, victim, data.x_test)
            images = adversary.read(seen).images
            public = data.x_test[(victim * 37) % max(1, len(data.x_test) - len(images)):][:len(images)]
            rows.append({"victim": victim, "round": rnd, "recovered_20": share(images, datas[victim].x_train),
                         "chance_20": share(public, datas[victim].x_train),
                         "flagged": {n: decided[n][(rnd, victim)] for n in decided}})
        acting = {r for r, _ in next(iter(decided.values())) if r >= 2}
        sent = {n: [why for (r, _), why in d.items() if r in acting] for n, d in decided.items()}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"attack": label, "active": active, "defences": list(defences), "victims": rows,
                                    "downlinks": {n: [len(v), sum(w is not None for w in v)] for n, v in sent.items()},
                                    "seconds": time.time() - start, "cpu_seconds": time.process_time() - cpu,
                                    "peak_rss_mib": peak_mib()},
                                   indent=1))
        print(label, [round(r["recovered_20"], 2) for r in rows],
              f"{time.time() - start:.0f}s", flush=True)


def honest(out: Path, setting: Setting) -> None:
    for method in TARGETS.names():
        path = out / "honest" / f"{method}.json"
        if path.exists():
            continue
        start, cpu = time.time(), time.process_time()
        spec = replace(setting.spec, method=method, rounds=setting.honest_rounds, eval_every=setting.honest_rounds)
        try:
            target, messages, _, _, _ = federate(spec)
        except UserError as why:  # a method that does not run in this setting as it stands: said, not hidden
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"method": method, "rounds": setting.honest_rounds, "not_run": str(why)}))
            print(method, "not run:", why, flush=True)
            continue
        decided = replay(target, messages)
        returning = {(r, k) for (r, k) in next(iter(decided.values()))
                     if any(r2 < r for (r2, k2) in next(iter(decided.values())) if k2 == k)}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"method": method, "rounds": setting.honest_rounds, "checks": {
            n: {"checked": len(d), "returning": len(returning), "refused": [[r, k, w] for (r, k), w in d.items() if w]}
            for n, d in decided.items()}, "seconds": time.time() - start, "cpu_seconds": time.process_time() - cpu,
            "peak_rss_mib": peak_mib()}, indent=1))
        print(method, {n: sum(w is not None for w in d.values()) for n, d in decided.items()},
              f"{time.time() - start:.0f}s", flush=True)


def peak_mib() -> int:
    """This process's peak resident memory so far (MiB; the cells run one after another in it)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["attacks", "honest", "evidence"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--setting", choices=sorted(SETTINGS), default="digits")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.what == "evidence":
        from benchmarks.lab.detection_tables import write_evidence
        write_evidence(args.out, args.setting)
        return
    {"attacks": attacks, "honest": honest}[args.what](args.out, SETTINGS[args.setting])


if __name__ == "__main__":
    main()
