"""Small hand-made inputs for report tests: run manifests and attack results, written as files.

Nothing here trains or attacks: the numbers are drawn from a seeded generator, so tests can
recompute every mean and standard deviation from the returned records independently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fedattack.attacks.membership.family import MEMBERSHIP_METRICS
from fedattack.attacks.model_inversion.inversion import INVERSION_METRICS
from fedattack.results import AttackResult, metric_table

METHODS = ("fedavg", "waffle-ibp")
THREATS = ("eavesdropper", "oracle")
VICTIMS = (0, 3)
SEEDS = (0, 1)


@dataclass
class Made:
    root: Path
    results: list[AttackResult]
    runs: dict[tuple[str, int], dict]      # (method, seed) -> utility summary


def write_run(folder: Path, method: str, seed: int, rng: np.random.Generator, dataset: str = "digits") -> dict:
    """A minimal complete run directory: just the JSON files a report reads."""
    folder.mkdir(parents=True)
    maj, mino = rng.uniform(70, 95), rng.uniform(40, 80)
    utility = {"mean": (5 * maj + mino) / 6, "std": rng.uniform(1, 9), "variance": rng.uniform(50, 300),
               "majority": maj, "minority": mino, "gap": maj - mino}
    spec = {"method": method, "dataset": dataset, "partition": "multimodal", "seed": seed, "partition_options": {}}
    manifest = {"schema_version": 1, "spec": spec, "partition": {"name": "multimodal", "options": {}},
                "utility": utility, "complete": True}
    (folder / "federation.json").write_text(json.dumps(manifest))
    history = [{"round": r, "accuracy": list(rng.uniform(0, 1, 4))} for r in (1, 2, 3)]
    (folder / "metrics.json").write_text(json.dumps({"rounds": history, "final": utility}))
    return utility


def membership(method: str, threat: str, victim: int, seed: int, run: Path, rng: np.random.Generator) -> AttackResult:
    fpr = np.sort(np.concatenate([[0.0, 1.0], rng.uniform(0, 1, 20)]))
    tpr = np.sort(np.concatenate([[0.0, 1.0], rng.uniform(0, 1, 20)]))
    metrics = {"accuracy": rng.uniform(.5, .9), "f1": rng.uniform(.4, .9), "auc": rng.uniform(.5, .95),
               "tpr_at_1fpr": rng.uniform(0, .1), "tpr_at_01fpr": rng.uniform(0, .02), "precision": rng.uniform(.5, 1)}
    return AttackResult(attack="membership", threat_model=threat, run={"path": str(run), "method": method},
                        victim=victim, seed=seed, seconds=1.5, metrics=metrics,
                        curves={"roc_fpr": fpr.tolist(), "roc_tpr": tpr.tolist()},
                        baselines={"loss-threshold": {"accuracy": rng.uniform(.5, .7), "auc": rng.uniform(.5, .7)}},
                        reconstruction="true" if threat == "oracle" else "none", upper_bound=threat == "oracle",
                        metric_info=metric_table(MEMBERSHIP_METRICS))


def inversion(method: str, threat: str, victim: int, seed: int, run: Path, folder: Path,
              rng: np.random.Generator) -> AttackResult:
    stem = f"inv-{method}-{threat}-v{victim}-s{seed}"
    torch.save({"images": torch.rand(10, 1, 8, 8), "labels": torch.arange(10)}, folder / f"{stem}-recon.pt")
    torch.save(torch.rand(10, 1, 8, 8) * 0.5, folder / f"{stem}-means.pt")
    return AttackResult(attack="inversion", threat_model=threat, run={"path": str(run)}, victim=victim, seed=seed,
                        metrics={"psnr": rng.uniform(8, 14), "attack_accuracy": rng.uniform(.1, .9),
                                 "eval_classifier_accuracy": .95},
                        artifacts={"reconstructions": f"{stem}-recon.pt", "class_means": f"{stem}-means.pt"},
                        reconstruction="none", upper_bound=threat == "oracle",
                        metric_info=metric_table(INVERSION_METRICS))


def make(root: Path, with_inversion: bool = True) -> Made:
    rng = np.random.default_rng(1234)
    made = Made(root, [], {})
    for method in METHODS:
        for seed in SEEDS:
            run = root / "runs" / f"{method}-s{seed}"
            made.runs[(method, seed)] = write_run(run, method, seed, rng)
            for threat in THREATS:
                for victim in VICTIMS:
                    res = membership(method, threat, victim, seed, run, rng)
                    made.results.append(res)
                    res.save(root / "results" / f"mia-{method}-{threat}-v{victim}-s{seed}.json")
                    if with_inversion:
                        folder = root / "results"
                        folder.mkdir(parents=True, exist_ok=True)
                        inv = inversion(method, threat, victim, seed, run, folder, rng)
                        made.results.append(inv)
                        inv.save(folder / f"inv-{method}-{threat}-v{victim}-s{seed}.json")
    return made
