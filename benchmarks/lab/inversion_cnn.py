"""Update inversion through convolutional networks (#36): the experiments of docs/privacy.md,
trained, attacked and tabulated from one command.

    FEDATTACK_DATA=../shared/datasets .venv/bin/python benchmarks/lab/inversion_cnn.py \\
        --experiments dimitrov-mnist dimitrov-fmnist --work /work/scratch/inversion --table out.md

Each experiment is a FedAvg federation of one round whose clients hold exactly N training
images (`iid`, `client_size=N`, no local test split; seed 0), every client trained from the
model's seeded initialisation with the experiment's recipe, the whole wire recorded; and an
eavesdropper's `update-inversion` on its victims with labels unknown (`labels=recovered`).
Victims listed as `tuning` were the ones settings were chosen on; the table reports the others
(`--tuning` tabulates the tuning victims instead). Federations and results already in `--work`
are reused (`runs/<experiment>`, `results/<experiment>`); delete them to redo. The share's
interval is a 95% percentile bootstrap over victims (whole victims resampled).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from inversion_rounds_curve import collect, row  # noqa: E402  (a sibling script)

FIRST = {"start": "first-layer", "labels": "recovered", "fallback": "none"}
FROM_NOISE = {"start": "first-layer", "labels": "recovered", "fallback": "optimiser"}
POLISHED = {**FIRST, "polish": 300, "step_size": 1.0}  # chosen on fmnist-cnn-1x1's first 3 clients (a 3-client run)


@dataclass(frozen=True)
class Experiment:
    """One federation (dataset, model, N images a client, E epochs of batches of B at lr) and
    the attack's settings; `method` and `hyper` for WAFFLe's; `reconstruction` its strategies."""

    dataset: str
    model: str
    images: int
    epochs: int
    batch_size: int
    lr: float
    clients: int
    victims: tuple[int, ...]
    tuning: tuple[int, ...] = ()
    settings: dict[str, Any] = field(default_factory=lambda: dict(FIRST))
    method: str = "fedavg"
    hyper: dict[str, Any] = field(default_factory=dict)
    reconstruction: str = "auto"
    federation: str = ""  # another experiment's federation, shared (same clients)


PERSONAL = {"recipe": "personal", "finetune_epochs": 0}  # one local epoch leaves no fine-tuning epoch
VICTIMS = tuple(range(1, 11))  # the curve's held-out victims (10; client 0 tunes)
EXPERIMENTS = {
    # Dimitrov et al. 2022: their CNN, 50 images, 10 epochs of 10 batches of 5, lr 0.004, at initialisation
    "dimitrov-mnist": Experiment("mnist", "dimitrov-cnn", 50, 10, 5, 0.004, 16, tuple(range(1, 16)), (0,)),
    "dimitrov-fmnist": Experiment("fmnist", "dimitrov-cnn", 50, 10, 5, 0.004, 16, tuple(range(1, 16)), (0,)),
    # breaching's FedAvg case (4 images, 4 local steps of 2, lr 0.001) on the seeds' CIFAR-10 CNN
    # (settings chosen on victim 0 among four, docs/privacy.md: breaching's own Adam step and TV weight)
    "breaching-cifar": Experiment("cifar10", "cifar-cnn", 4, 2, 2, 0.001, 12, tuple(range(1, 11)), (0,),
                                  {"start": "random", "labels": "recovered", "iterations": 2000, "step_size": 0.1,
                                   "tv": 1e-3}),
    # the local-work curve on the seeds' CNNs (their datasets' default rates); victim 0 tunes
    "fmnist-cnn-1x1": Experiment("fmnist", "fmnist-cnn", 1, 1, 1, 0.02, 11, VICTIMS, (0,), POLISHED),
    "fmnist-cnn-1x10": Experiment("fmnist", "fmnist-cnn", 10, 1, 10, 0.02, 11, VICTIMS, (0,), FROM_NOISE),
    "fmnist-cnn-1e50b5": Experiment("fmnist", "fmnist-cnn", 50, 1, 5, 0.02, 11, VICTIMS, (0,), FROM_NOISE),
    "fmnist-cnn-5e50b5": Experiment("fmnist", "fmnist-cnn", 50, 5, 5, 0.02, 11, VICTIMS, (0,),
                                    {**FROM_NOISE, "iterations": 100}),
    "cifar-cnn-1x1": Experiment("cifar10", "cifar-cnn", 1, 1, 1, 0.02, 11, VICTIMS, (0,), POLISHED),
    "cifar-cnn-1x10": Experiment("cifar10", "cifar-cnn", 10, 1, 10, 0.02, 11, VICTIMS, (0,), POLISHED),
    "cifar-cnn-1e50b5": Experiment("cifar10", "cifar-cnn", 50, 1, 5, 0.02, 11, VICTIMS, (0,)),
    "cifar-cnn-5e50b5": Experiment("cifar10", "cifar-cnn", 50, 5, 5, 0.02, 11, VICTIMS, (0,)),
    # WAFFLe on the same clients (the personalising recipe), every strategy, and the adaptive attacker
    "waffle-fmnist-cnn-1x1": Experiment("fmnist", "fmnist-cnn", 1, 1, 1, 0.02, 11, VICTIMS, (0,), POLISHED,
                                        "waffle-ibp", PERSONAL, "all"),
    "waffle-fmnist-cnn-1x1-adaptive": Experiment("fmnist", "fmnist-cnn", 1, 1, 1, 0.02, 11, VICTIMS, (0,),
                                                 {**POLISHED, "selection": "adaptive"}, "waffle-ibp", PERSONAL,
                                                 "factors-inferred", federation="waffle-fmnist-cnn-1x1"),
    "waffle-cifar-cnn-1x10": Experiment("cifar10", "cifar-cnn", 10, 1, 10, 0.02, 11, VICTIMS, (0,), POLISHED,
                                        "waffle-ibp", PERSONAL, "all"),
    "waffle-cifar-cnn-1x10-adaptive": Experiment("cifar10", "cifar-cnn", 10, 1, 10, 0.02, 11, VICTIMS, (0,),
                                                 {**POLISHED, "selection": "adaptive"}, "waffle-ibp", PERSONAL,
                                                 "factors-inferred", federation="waffle-cifar-cnn-1x10"),
}


def federation(work: Path, name: str, exp: Experiment) -> Path:
    import fedattack

    path = work / "runs" / (exp.federation or name)
    if not (path / "federation.json").exists():
        fedattack.train(exp.method, exp.dataset, out=path, model=exp.model, partition="iid",
                        partition_options={"test_fraction": 0.0, "client_size": exp.images},
                        num_clients=exp.clients, fraction=1.0, rounds=1, epochs=exp.epochs,
                        batch_size=exp.batch_size, lr=exp.lr, hyper=dict(exp.hyper), record="all", seed=0)
    return path


def attack(run: Path, out: Path, exp: Experiment, victims: tuple[int, ...]) -> None:
    import fedattack

    done = {json.loads(p.read_text())["victim"] for p in out.glob("*victim*.json")} if out.exists() else set()
    todo = [v for v in victims if v not in done]
    if todo:
        fedattack.evaluate(run, out=out, threat_models="eavesdropper", attacks="update-inversion", victims=todo,
                           settings=dict(exp.settings), reconstruction=exp.reconstruction, progress=True)


def rows_of(out: Path, name: str, exp: Experiment) -> list[dict[str, Any]]:
    """One row per reconstruction strategy found in the results."""
    strategies = sorted({json.loads(p.read_text()).get("reconstruction") or "-" for p in out.glob("*victim*.json")})
    rows = []
    for strategy in strategies:
        pick = out / f".pick-{strategy}"
        pick.mkdir(exist_ok=True)
        for old in pick.glob("*.json"):
            old.unlink()
        for p in out.glob("*victim*.json"):
            if (json.loads(p.read_text()).get("reconstruction") or "-") == strategy:
                (pick / p.name).symlink_to(p.resolve())
        r = row(exp.images, 1, collect(pick, exp.images))
        rows.append({**r, "experiment": name, "strategy": strategy})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| experiment | strategy | victims | images | recovered > 20 dB (95% CI over victims) | per victim "
             "| PSNR mean | labels | s / victim | how |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        psnr = "-" if r["psnr_mean"] != r["psnr_mean"] else f"{r['psnr_mean']:.1f}"
        labels = "-" if r["label_accuracy"] != r["label_accuracy"] else f"{100 * r['label_accuracy']:.0f}%"
        lines.append(f"| {r['experiment']} | {r['strategy']} | {r['victims']} | {r['images']} | "
                     f"{100 * r['share']:.0f}% ({100 * r['ci'][0]:.0f}-{100 * r['ci'][1]:.0f}) | "
                     f"{', '.join(f'{100 * v:.0f}' for v in r['per_victim'])} | {psnr} | {labels} | "
                     f"{r['seconds']:.0f} | {'; '.join(r['notes'])} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiments", nargs="+", default=list(EXPERIMENTS), help=", ".join(EXPERIMENTS))
    parser.add_argument("--work", type=Path, default=Path("results/inversion-cnn"))
    parser.add_argument("--tuning", action="store_true", help="attack and tabulate the tuning victims instead")
    parser.add_argument("--table", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for name in args.experiments:
        exp = EXPERIMENTS[name]
        run = federation(args.work, name, exp)
        victims = exp.tuning if args.tuning else exp.victims
        out = args.work / "results" / (f"{name}-tuning" if args.tuning else name)
        attack(run, out, exp, victims)
        rows += rows_of(out, name, exp)
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    text = table(rows)
    args.table.write_text(text) if args.table else print(text)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
