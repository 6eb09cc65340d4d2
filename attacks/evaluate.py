"""`evaluate_run`: attack a trained federation and write one result per victim, plus a summary.

For each victim and threat model: build the view (what the adversary sees) and, separately,
the ground truth; rebuild the victim's model with each requested reconstruction strategy; run
each attack; save its `AttackResult` as JSON (images and tensors beside it). A threat model
that sees nothing, or a method no strategy can rebuild, gives a result with `applicable=False`
and a note saying why, instead of an error. `summary.json` holds mean and std over victims.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

from tqdm import tqdm

from fedattack.attacks import truth as truth_mod
from fedattack.attacks.base import Adversary, Attack
from fedattack.attacks.data import split_pools
from fedattack.attacks.eval_classifier import eval_classifier
from fedattack.attacks.reconstruction.base import RECONSTRUCTIONS, Reconstructor, resolve
from fedattack.attacks.summary import write_summary
from fedattack.attacks.threat_models.base import ThreatModel
from fedattack.data import load_dataset
from fedattack.federation.executors import EXECUTORS
from fedattack.federation.rundir import Federation
from fedattack.registry import ATTACKS, THREAT_MODELS, UserError
from fedattack.results import AttackResult
from fedattack.rng import numpy_rng


def evaluate_run(run_dir: str | Path, threat_model: str | Sequence[str] = "eavesdropper",
                 attack: str | Sequence[str] = "all", victims: str | int | Sequence[str | int] = "random:1",
                 reconstruction: str = "auto", aux_size: int | None = None, seed: int = 0,
                 out_dir: str | Path | None = None, *, eval_size: int | None = None,
                 max_queries: int = 1000, executor: str = "sequential", data_root: str | None = None,
                 attack_options: dict[str, Any] | None = None, progress: bool = True) -> list[Path]:
    """Attack `run_dir` and write results into `out_dir`; returns the result files written.

    `threat_model` / `attack`: names, lists of names, or "all". `victims`: client ids, "all", or
    "random:N" (N clients drawn by `seed` among those on the recorded wire). `reconstruction`:
    "auto" (the best applicable strategy), "all", or strategy names (comma-separated).
    """
    fed = Federation(run_dir)
    out = Path(out_dir) if out_dir is not None else Path("results") / Path(run_dir).name
    threats = [THREAT_MODELS.get(n)() for n in names(threat_model, THREAT_MODELS.names())]
    attacks = build_attacks(names(attack, ATTACKS.names()), attack_options or {})
    chosen = parse_victims(victims, fed, seed)
    EXECUTORS.get(executor)  # refuse a bad name before any work
    if reconstruction not in ("auto", "all"):
        for name in reconstruction.split(","):
            RECONSTRUCTIONS.get(name.strip())
    spec, target = fed.spec, fed.target()
    dataset = load_dataset(spec.dataset, data_root)
    partition = fed.partition()
    pools = split_pools(dataset, aux_size, eval_size, seed)
    key = (spec.dataset, aux_size, eval_size, int(dataset.y_test.shape[0]))
    shared = truth_mod.SharedTruth(pools.evaluation, truth_mod.train_class_means(dataset),
                                   lambda: eval_classifier(spec.model, pools.evaluation,
                                                           dataset.num_classes, seed, key))
    base = {"run": run_info(fed), "settings": {"pools": pools.sizes(), "max_queries": max_queries,
                                               "executor": executor,
                                               "reconstruction_request": reconstruction}}
    written: list[Path] = []
    bar = tqdm(total=len(chosen) * len(threats) * len(attacks), desc="evaluate", unit="attack",
               disable=not progress, leave=False)
    for victim in chosen:
        knowledge, truth = truth_mod.build(fed, target, dataset, partition, victim, pools, shared, seed,
                                           max_queries)
        for tm in threats:
            ctx = with_threat(base, tm, knowledge)
            written += attack_victim(fed, target, tm, victim, knowledge, truth, attacks, reconstruction,
                                     seed, out, ctx, executor, bar)
    bar.close()
    write_summary(out / "summary.json", written)
    return written


def attack_victim(fed: Federation, target: Any, tm: ThreatModel, victim: int, knowledge: Any,
                  truth: Any, attacks: list[Attack], request: str, seed: int, out: Path,
                  ctx: dict[str, Any], executor: str, bar: tqdm) -> list[Path]:
    """Every attack on one victim under one threat model, for each reconstruction strategy."""
    view = tm.view(fed, victim)
    if view.empty:
        return [skip(a, tm, victim, seed, out, ctx, nothing_seen(fed, tm, victim), bar) for a in attacks]
    obs = view.observation()
    strategies = resolve(request, target, obs.parts(), tm.attacks_deployed)
    if not strategies:
        note = (f"no reconstruction strategy rebuilds a {target.name} model from what the {tm.name} "
                f"observes ({', '.join(sorted(obs.parts())) or 'nothing'} of round {obs.round})")
        return [skip(a, tm, victim, seed, out, ctx, note, bar) for a in attacks]
    bar.total += len(attacks) * (len(strategies) - 1)
    written = []
    for strategy in strategies:
        started = time.perf_counter()
        reconstructor = Reconstructor(strategy, target, knowledge, seed, victim)
        model = reconstructor(obs, key=0)
        adv = Adversary(view, knowledge, obs, model, reconstructor, executor)
        extra = {**ctx["extra"], "observation": {"round": obs.round, "parts": sorted(obs.parts())}}
        sctx = {**ctx, "extra": extra, "reconstruction_seconds": time.perf_counter() - started,
                "settings": {**ctx["settings"], "reconstruction": strategy.name}}
        for attack in attacks:
            bar.set_postfix_str(f"victim {victim} {tm.name} {strategy.name} {attack.name}")
            path = out / f"{attack.name}-{tm.name}-{strategy.name}-victim{victim}.json"
            written.append(attack(adv, truth, seed, path, sctx).save(path))
            bar.update()
    return written


def skip(attack: Attack, tm: ThreatModel, victim: int, seed: int, out: Path, ctx: dict[str, Any],
         note: str, bar: tqdm) -> Path:
    """A "not applicable" result: the request was fine, there is just nothing to attack."""
    path = out / f"{attack.name}-{tm.name}-none-victim{victim}.json"
    result = AttackResult(attack=attack.name, threat_model=tm.name, run=ctx["run"], victim=victim,
                          settings={**ctx["settings"], "threat_model": tm.name}, seed=seed,
                          extra=ctx["extra"], applicable=False, upper_bound=tm.upper_bound, note=note)
    bar.update()
    return result.save(path)


def nothing_seen(fed: Federation, tm: ThreatModel, victim: int) -> str:
    method, recording = fed.spec.method, fed.manifest.get("recording", {})
    if recording.get("policy") == "none":
        return f"the run recorded no messages (--record none); the {tm.name} has nothing to attack"
    if not recording.get("messages"):
        return f"{method} puts nothing on the wire; the {tm.name} observes nothing to attack"
    return f"client {victim} sent or received nothing in the recorded rounds; the {tm.name} observes nothing"


def names(request: str | Sequence[str], known: list[str]) -> list[str]:
    items = [request] if isinstance(request, str) else list(request)
    if "all" in items:
        return known
    if not items:
        raise UserError("name at least one threat model and one attack (or all)")
    return items


def build_attacks(chosen: list[str], options: dict[str, Any]) -> list[Attack]:
    """Attack objects; each option goes to every chosen attack that has such a setting."""
    classes = [ATTACKS.get(n) for n in chosen]
    fields = [set(getattr(c.Settings, "__dataclass_fields__", {})) for c in classes]
    unused = [k for k in options if not any(k.replace("-", "_") in f for f in fields)]
    if unused:
        raise UserError(f"no chosen attack has the setting {unused[0]!r}; see `fedattack list attacks`")
    return [c.from_options({k: v for k, v in options.items() if k.replace("-", "_") in f})
            for c, f in zip(classes, fields)]


def parse_victims(victims: str | int | Sequence[str | int], fed: Federation, seed: int) -> list[int]:
    """Client ids from ids, "all" or "random:N" (see `evaluate_run`)."""
    items = [victims] if isinstance(victims, (str, int)) else list(victims)
    chosen: list[int] = []
    for item in items:
        text = str(item).strip()
        if text == "all":
            chosen += range(fed.num_clients)
        elif text.startswith("random:"):
            chosen += random_victims(fed, text[7:], seed)
        else:
            try:
                client = int(text)
            except ValueError:
                raise UserError(f"victim {text!r} is not a client id, all, or random:N") from None
            fed.check_client(client)
            chosen.append(client)
    return list(dict.fromkeys(chosen))


def random_victims(fed: Federation, count: str, seed: int) -> list[int]:
    if not count.isdigit() or int(count) < 1:
        raise UserError(f"random:{count} needs a positive count, e.g. random:5")
    seen = sorted(set(fed.transcript().clients())) or list(range(fed.num_clients))
    k = min(int(count), len(seen))
    return sorted(int(c) for c in numpy_rng(seed, "victims").choice(seen, size=k, replace=False))


def run_info(fed: Federation) -> dict[str, Any]:
    spec, m = fed.spec, fed.manifest
    return {"path": str(fed.path.resolve()), "method": spec.method, "dataset": spec.dataset,
            "partition": m.get("partition", spec.partition), "seed": spec.seed, "model": spec.model,
            "rounds": spec.rounds, "hyper": spec.hyper, "utility": m.get("utility", {}),
            "recording": m.get("recording", {}).get("policy")}


def with_threat(base: dict[str, Any], tm: ThreatModel, knowledge: Any) -> dict[str, Any]:
    extra = {"threat_model": tm.describe(),
             "knowledge": {"assumptions": knowledge.assumptions, "aux": len(knowledge.aux),
                           "victim_size": knowledge.victim_size,
                           "victim_class_counts": knowledge.victim_class_counts}}
    return {**base, "settings": {**base["settings"], "threat_model": tm.name}, "extra": extra}
