"""Update inversion by an eavesdropper who sees the same client for many rounds (#33 item 4):
the share of its images recovered above 20 dB against images per client and rounds used.

    FEDATTACK_DATA=../shared/datasets .venv/bin/python benchmarks/lab/inversion_rounds_curve.py \\
        --sizes 50 200 480 1000 2400 --rounds 1 5 20 0 --work /work/scratch/inversion \\
        --table rounds.md --plot docs/update-inversion-rounds.png

Per size N: one MNIST FedAvg federation (`mnist-mlp`, 784-200-10; seed 0) of `--clients`
clients holding exactly N training images each (`iid`, `client_size=N`, no local test split),
every client in every one of `--fed-rounds` rounds, E = 5 local epochs of batches of 10 at
MNIST's lr 0.04, the whole wire recorded. Every client is a victim. Per rounds-used K the
eavesdropper's `update-inversion` reads the images off the first layer's updates of the
victim's first K rounds folded together (`--set rounds=K round_window=first`; 0 = every
round), labels unknown (counted from the update), `fallback=none`: where the span cannot hold
the images the attack says why and is scored as recovering none of the N. `--programs` caps the
linear programs per victim for a size (random lit pixels; the default solves one per lit pixel).
Federations and results are reused when present (delete them to redo). The share's interval is
a 95% percentile bootstrap over victims (whole victims resampled).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from update_inversion_curve import bootstrap, share  # noqa: E402  (a sibling script)


def federation(work: Path, n: int, args: argparse.Namespace) -> Path:
    import fedattack

    path = work / "runs" / f"mnist-n{n}-c{args.clients}-r{args.fed_rounds}"
    if not (path / "federation.json").exists():
        fedattack.train("fedavg", "mnist", out=path, partition="iid",
                        partition_options={"test_fraction": 0.0, "client_size": n}, num_clients=args.clients,
                        fraction=1.0, rounds=args.fed_rounds, epochs=5, batch_size=10, record="all",
                        executor="batched", seed=0)
    return path


def attack(run: Path, out: Path, k: int, programs: int, args: argparse.Namespace) -> None:
    import fedattack

    settings = {"start": "first-layer", "labels": "recovered", "rounds": k, "round_window": "first",
                "fallback": "none", "programs": programs}
    done = {json.loads(p.read_text())["victim"] for p in out.glob("*victim*.json")} if out.exists() else set()
    todo = [v for v in args.victims if v not in done]
    if todo:
        fedattack.evaluate(run, out=out, threat_models="eavesdropper", attacks="update-inversion", victims=todo,
                           settings=settings, progress=True)


def collect(out: Path, n: int) -> dict[str, Any]:
    """Per victim: the matched pairs' PSNR (none recovered, N zeros, where not applicable)."""
    psnr, notes, seconds, labels, applied = [], set(), [], [], []
    for path in sorted(out.glob("*victim*.json")):
        result = json.loads(path.read_text())
        match = result["extra"].get("reconstruction_match", {})
        if result.get("applicable", True) and "psnr" in match:
            psnr.append(np.asarray(match["psnr"], dtype=float))
            applied.append(psnr[-1])
            notes.add(match.get("inverted_by", "").split(" (")[0])
            labels.append(result["metrics"].get("label_accuracy", float("nan")))
        else:
            psnr.append(np.zeros(n))
            notes.add(re.sub(r"\d+", "#", result.get("note", "not applicable")))
        seconds.append(float(result.get("seconds", 0.0)))
    return {"psnr": psnr, "notes": sorted(notes), "seconds": seconds, "labels": labels, "applied": applied}


def row(n: int, k: int, found: dict[str, Any]) -> dict[str, Any]:
    groups = found["psnr"]
    pooled = np.concatenate(groups)
    lo, hi, _ = bootstrap(groups, share, over="victims")
    return {"images": n, "rounds": k or "all", "victims": len(groups), "share": share(pooled), "ci": [lo, hi],
            "per_victim": [share(g) for g in groups],
            "psnr_mean": float(np.concatenate(found["applied"]).mean()) if found["applied"] else float("nan"),
            "label_accuracy": float(np.nanmean(found["labels"])) if found["labels"] else float("nan"),
            "seconds": float(np.mean(found["seconds"])), "notes": found["notes"]}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| images per client | rounds used | victims | recovered > 20 dB (95% CI over victims) | per victim "
             "| PSNR mean | labels | s / victim | how |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        labels = "-" if np.isnan(r["label_accuracy"]) else f"{100 * r['label_accuracy']:.0f}%"
        psnr = "-" if np.isnan(r["psnr_mean"]) else f"{r['psnr_mean']:.1f}"
        lines.append(f"| {r['images']} | {r['rounds']} | {r['victims']} | {100 * r['share']:.0f}% "
                     f"({100 * r['ci'][0]:.0f}-{100 * r['ci'][1]:.0f}) | "
                     f"{', '.join(f'{100 * v:.0f}' for v in r['per_victim'])} | {psnr} | "
                     f"{labels} | "
                     f"{r['seconds']:.0f} | {'; '.join(r['notes'])} |")
    return "\n".join(lines) + "\n"


def extreme_rays(x: np.ndarray) -> float:
    """Share of the images (N, P) that are extreme rays of the non-negative part of their span:
    the span's vectors that vanish where the image does are its multiples only. Every per-pixel
    program's answer is such a ray, so this is the most any of them can reach (scorer's side:
    it reads the real images)."""
    lit = (x > 0).any(0)
    if len(x) >= lit.sum():
        return 0.0
    # an image with fewer than N - 1 zeros cannot be one (they pin at most that many directions):
    # only the others are tested, and with none (CIFAR-10's few exact zeros) no QR is needed
    candidates = x[:, lit][((x[:, lit] == 0).sum(1) >= len(x) - 1)]
    if not len(candidates):
        return 0.0
    basis, _ = np.linalg.qr(x[:, lit].T)  # (lit, N)
    hits = 0
    for image in candidates:
        restricted = basis[image == 0]
        s = np.linalg.svd(restricted, compute_uv=False) if len(restricted) else np.zeros(0)
        hits += len(x) - int((s > 1e-8 * max(s.max(initial=0.0), 1e-30)).sum()) == 1
    return hits / len(x)


def ceilings(work: Path, sizes: list[int], args: argparse.Namespace) -> dict[int, float]:
    """The extreme-ray share per size, over the victims' real images."""
    from fedattack.data import load_dataset
    from fedattack.federation.rundir import Federation

    pixels = load_dataset("mnist").x_train.flatten(1).double().numpy()
    out = {}
    for n in sizes:
        part = Federation(federation(work, n, args)).partition()
        out[n] = float(np.mean([extreme_rays(pixels[part.clients[v].train]) for v in args.victims]))
        print(f"{n} images: {100 * out[n]:.0f}% are extreme rays of their span", flush=True)
    return out


def plot(rows: list[dict[str, Any]], path: Path, ceiling: dict[int, float] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for i, k in enumerate(dict.fromkeys(r["rounds"] for r in rows)):
        mine = [r for r in rows if r["rounds"] == k]
        x = np.array([r["images"] for r in mine], dtype=float) * 1.04 ** (i - 1.5)  # side by side
        y = np.array([100 * r["share"] for r in mine])
        ci = np.array([[100 * c for c in r["ci"]] for r in mine])
        ax.errorbar(x, y, yerr=[y - ci[:, 0], ci[:, 1] - y], marker="o", capsize=3, label=f"rounds used: {k}")
    if ceiling:
        sizes = sorted(ceiling)
        ax.plot(sizes, [100 * ceiling[n] for n in sizes], "k--", marker="x",
                label="images that are extreme rays of their span (the most any program reaches)")
    ax.axvline(200, color="grey", linestyle=":", label="first layer's width (200 units)")
    ax.set_xscale("log")
    ax.set_xlabel("images per client")
    ax.set_ylabel("images recovered, PSNR > 20 dB (%)")
    ax.set_ylim(-3, 103)
    ax.set_title("Eavesdropper on one MNIST FedAvg client, first-layer updates of K rounds, labels unknown",
                 fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 200, 480, 1000, 2400])
    parser.add_argument("--rounds", type=int, nargs="+", default=[1, 5, 20, 0], help="rounds used, 0: all")
    parser.add_argument("--clients", type=int, default=5)
    parser.add_argument("--fed-rounds", type=int, default=30)
    parser.add_argument("--victims", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--programs", nargs="*", default=[], help="N=P: at most P linear programs a victim for size N")
    parser.add_argument("--work", type=Path, default=Path("results/inversion-rounds"))
    parser.add_argument("--table", type=Path)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--ceiling", action="store_true", help="also the extreme-ray share of the real images")
    args = parser.parse_args()
    caps = {int(k): int(v) for k, v in (p.split("=") for p in args.programs)}
    rows = []
    for n in args.sizes:
        run = federation(args.work, n, args)
        for k in args.rounds:
            out = args.work / "results" / f"n{n}-rounds{k}"
            attack(run, out, k, caps.get(n, 0), args)
            rows.append(row(n, k, collect(out, n)))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    text = table(rows)
    args.table.write_text(text) if args.table else print(text)
    ceiling = ceilings(args.work, args.sizes, args) if args.ceiling else None
    if args.plot:
        plot(rows, args.plot, ceiling)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "extreme_rays": ceiling}, indent=1))


if __name__ == "__main__":
    main()
