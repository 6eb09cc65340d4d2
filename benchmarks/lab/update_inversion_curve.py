"""The update-inversion curve of docs/privacy.md: share of images recovered against local work.

    .venv/bin/python benchmarks/lab/update_inversion_curve.py --table out.md --plot docs/x.png \\
        "MNIST|1 step of 1|results/mnist-1x1" "MNIST|1 step of 10|results/mnist-1x10" ...

Each POINT is "series|local work|results folder[,folder...]" (a folder `fedattack evaluate` wrote, one JSON
per victim). Per point it pools the victims' matched pairs (the per-image PSNR and SSIM in
`extra.reconstruction_match`) and reports the share above 20 dB, mean and median PSNR, mean
SSIM and the label accuracy, with 95% percentile bootstrap intervals (2,000 resamples, seed 0)
over victims (whole victims resampled, images kept together: they share one update) when
there are at least 3 of them, else over images (said in the table: images of one victim are
not independent, so that interval is too narrow); the share's interval over images and each
victim's share are given beside it. `--figure` draws reconstructions above the
real training images they were matched to, best PSNR first, from the results' PNG rows.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

RECOVERED_DB = 20.0
RESAMPLES = 2000


@dataclass
class Point:
    series: str
    work: str
    folder: Path
    psnr: list[np.ndarray]
    ssim: list[np.ndarray]
    labels: list[float]
    seconds: list[float]
    files: list[Path]
    victims: list[int]


def load_point(spec: str) -> Point:
    series, work, folders = spec.split("|")
    point = Point(series, work, Path(folders.split(",")[0]), [], [], [], [], [], [])
    for path in sorted(p for folder in folders.split(",") for p in Path(folder).glob("*.json")):
        if path.name == "summary.json":
            continue
        result = json.loads(path.read_text())
        match = result["extra"].get("reconstruction_match", {})
        if not result.get("applicable", True) or "psnr" not in match:
            continue
        point.psnr.append(np.asarray(match["psnr"], dtype=float))
        point.ssim.append(np.asarray(match["ssim"], dtype=float))
        point.labels.append(float(result["metrics"].get("label_accuracy", float("nan"))))
        point.seconds.append(float(result["seconds"]))
        point.files.append(path)
        point.victims.append(int(result["victim"]))
    return point


def bootstrap(groups: list[np.ndarray], stat: Callable[[np.ndarray], float],
              over: str = "auto") -> tuple[float, float, str]:
    """95% percentile interval of `stat` over the pooled values: whole victims resampled
    (over="victims", or "auto" with >= 3 of them), else single images (over="images")."""
    rng = np.random.default_rng(0)
    if over == "victims" or (over == "auto" and len(groups) >= 3):
        draws = [stat(np.concatenate([groups[i] for i in rng.integers(0, len(groups), len(groups))]))
                 for _ in range(RESAMPLES)]
        unit = "victims"
    else:
        pooled = np.concatenate(groups)
        draws = [stat(pooled[rng.integers(0, len(pooled), len(pooled))]) for _ in range(RESAMPLES)]
        unit = "images"
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(low), float(high), unit


def share(values: np.ndarray) -> float:
    return float((values > RECOVERED_DB).mean())


def row(point: Point) -> dict[str, object]:
    pooled = np.concatenate(point.psnr)
    share_ci, mean_ci = bootstrap(point.psnr, share), bootstrap(point.psnr, lambda v: float(v.mean()))
    return {"series": point.series, "work": point.work, "victims": len(point.psnr), "images": len(pooled),
            "share": share(pooled), "share_ci": share_ci[:2], "unit": share_ci[2],
            "share_ci_images": bootstrap(point.psnr, share, over="images")[:2],
            "per_victim": [share(v) for v in point.psnr], "victim_ids": point.victims,
            "psnr_mean": float(pooled.mean()), "psnr_ci": mean_ci[:2], "psnr_median": float(np.median(pooled)),
            "ssim_mean": float(np.concatenate(point.ssim).mean()), "label_accuracy": float(np.mean(point.labels)),
            "seconds": float(np.mean(point.seconds))}


def table(rows: list[dict[str, object]]) -> str:
    lines = ["| series | local work | victims | images | recovered > 20 dB (95% CI) | CI over images "
             "| per victim | PSNR mean (95% CI) | PSNR median | SSIM mean | label accuracy | s / victim |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lo, hi = r["share_ci"]  # type: ignore[misc]
        plo, phi = r["psnr_ci"]  # type: ignore[misc]
        lines.append(f"| {r['series']} | {r['work']} | {r['victims']} | {r['images']} | "
                     f"{100 * r['share']:.0f}% ({100 * lo:.0f}-{100 * hi:.0f}, over {r['unit']}) | "  # type: ignore[operator]
                     f"{images_ci(r)} | {per_victim(r)} | "
                     f"{r['psnr_mean']:.1f} ({plo:.1f}-{phi:.1f}) | {r['psnr_median']:.1f} | "
                     f"{r['ssim_mean']:.3f} | {100 * r['label_accuracy']:.0f}% | {r['seconds']:.0f} |")  # type: ignore[operator]
    return "\n".join(lines) + "\n"


def images_ci(r: dict[str, object]) -> str:
    lo, hi = r["share_ci_images"]  # type: ignore[misc]
    return f"{100 * lo:.0f}-{100 * hi:.0f}"


def per_victim(r: dict[str, object]) -> str:
    pairs = zip(r["victim_ids"], r["per_victim"])  # type: ignore[call-overload]
    return ", ".join(f"{i}: {100 * v:.0f}" for i, v in pairs)


def plot(rows: list[dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    works = list(dict.fromkeys(str(r["work"]) for r in rows))
    series = list(dict.fromkeys(str(r["series"]) for r in rows))
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for k, name in enumerate(series):
        mine = [r for r in rows if r["series"] == name]
        x = np.array([works.index(str(r["work"])) for r in mine]) + (k - (len(series) - 1) / 2) * 0.08
        y = np.array([100 * float(r["share"]) for r in mine])  # type: ignore[arg-type]
        ci = np.array([[100 * c for c in r["share_ci"]] for r in mine])  # type: ignore[attr-defined]
        ax.errorbar(x, y, yerr=[y - ci[:, 0], ci[:, 1] - y], marker="o", capsize=3, label=name)
    ax.axhline(45, color="grey", linestyle=":", label="Dimitrov et al. 2022: 45%")
    ax.set_xticks(range(len(works)), [w.replace(", ", ",\n") for w in works], fontsize=8)
    ax.set_ylabel("images recovered, PSNR > 20 dB (%)")
    ax.set_ylim(-3, 103)
    ax.set_title("Eavesdropper inverting one FedAvg update, labels unknown (95% bootstrap CI)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def tiles(png: Path, count: int) -> list[np.ndarray]:
    """The first `count` images of a result's PNG row (tiles of equal width with 1-pixel gaps)."""
    from PIL import Image

    image = np.asarray(Image.open(png).convert("RGB"))
    height = image.shape[0] - 2
    step = height + 1
    return [image[1:1 + height, 1 + i * step:1 + i * step + height] for i in range(count)]


def figure(specs: list[str], path: Path, per_row: int = 12) -> None:
    """Reconstructions (top) above their matched training images (bottom): per panel, pairs
    spread evenly over the PSNR ranking, best first, so that the failures show as well."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []
    for spec in specs:
        title, result_path = spec.split("|")
        result = json.loads(Path(result_path).read_text())
        psnr = np.asarray(result["extra"]["reconstruction_match"]["psnr"])
        folder = Path(result_path).parent
        recs = tiles(folder / result["artifacts"]["reconstructions"], len(psnr))
        real = tiles(folder / result["artifacts"]["matched"], len(psnr))
        ranked = np.argsort(-psnr)  # best first, spread over the whole ranking (failures shown too)
        order = ranked[np.unique(np.linspace(0, len(ranked) - 1, min(per_row, len(ranked))).round().astype(int))]
        panels.append((title, [recs[i] for i in order], [real[i] for i in order], psnr[order]))
    fig, axes = plt.subplots(2 * len(panels), per_row, figsize=(per_row * 0.9, 2.1 * len(panels)), squeeze=False)
    for p, (title, recs, real, values) in enumerate(panels):
        for i in range(per_row):
            for r, images in enumerate((recs, real)):
                ax = axes[2 * p + r, i]
                ax.axis("off")
                if i < len(images):
                    ax.imshow(images[i])
                    if r == 0:
                        ax.set_title(f"{values[i]:.0f} dB", fontsize=7)
        axes[2 * p, 0].set_ylabel(title, fontsize=7)
        axes[2 * p, 0].axis("on")
        axes[2 * p, 0].set_xticks([])
        axes[2 * p, 0].set_yticks([])
    fig.suptitle("top: reconstruction; bottom: the real training image it was matched to", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("points", nargs="*", help='"series|local work|results folder"')
    parser.add_argument("--table", type=Path, help="write the markdown table here (else print it)")
    parser.add_argument("--plot", type=Path, help="the curve, a PNG")
    parser.add_argument("--json", type=Path, help="the rows as JSON")
    parser.add_argument("--figure", nargs="*", default=[], help='"title|result JSON" rows for the pairs figure')
    parser.add_argument("--figure-out", type=Path, help="where the pairs figure goes")
    args = parser.parse_args()
    rows = [row(p) for p in map(load_point, args.points) if p.psnr]
    text = table(rows)
    if args.table:
        args.table.write_text(text)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.plot:
        plot(rows, args.plot)
    if args.figure and args.figure_out:
        figure(args.figure, args.figure_out)


if __name__ == "__main__":
    main()
