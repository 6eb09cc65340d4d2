"""Model-inversion grids: each method's reconstructions under the victim's class means.

The inversion attack saves its images as artifacts (paths relative to the result file). This
module reads them without executing anything: `.pt` with `torch.load(weights_only=True)`,
`.npy` with `allow_pickle=False`, or `.png`. A tensor file may hold a tensor [K, C, H, W] (or
[K, H, W]; row k is class k) or a dict with `images` and optionally `labels` (class ids). The
artifact names looked for: anything containing "recon" for reconstructions and "mean" for the
victim's class means; a name ending in a number (`reconstruction_3`) is that class's image.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fedattack.reports.aggregate import threat_label
from fedattack.reports.collect import LoadedResult
from fedattack.reports.figures import FigureList, _save, plt, slug

Images = dict[int, np.ndarray]


def load_images(path: Path) -> Images:
    """Class id -> image (H, W) or (H, W, 3) in [0, 1]; {} if the file is unreadable."""
    try:
        if path.suffix == ".png":
            return {0: _as_image(plt.imread(path))}
        if path.suffix == ".npy":
            return _split(np.load(path, allow_pickle=False), None)
        if path.suffix == ".pt":
            import torch
            data = torch.load(path, map_location="cpu", weights_only=True)
            if isinstance(data, dict):
                labels = data.get("labels")
                return _split(data["images"].float().numpy(), None if labels is None else labels.tolist())
            return _split(data.float().numpy(), None)
    except Exception:  # a broken artifact must not stop the report; the grid shows a gap
        return {}
    return {}


def _split(arr: np.ndarray, labels: list[int] | None) -> Images:
    if arr.ndim == 2:  # one image
        arr = arr[None]
    labels = labels if labels is not None else list(range(arr.shape[0]))
    return {int(c): _as_image(img) for c, img in zip(labels, arr)}


def _as_image(img: np.ndarray) -> np.ndarray:
    img = np.asarray(img, dtype=float)
    if img.ndim == 3 and img.shape[0] in (1, 3) and img.shape[-1] not in (1, 3, 4):
        img = np.moveaxis(img, 0, -1)  # C, H, W -> H, W, C
    if img.ndim == 3 and img.shape[-1] == 1:
        img = img[..., 0]
    if img.ndim == 3 and img.shape[-1] == 4:
        img = img[..., :3]
    if img.ndim == 1:  # a flattened square image
        side = int(round(img.size ** .5))
        img = img.reshape(side, side) if side * side == img.size else img[None]
    lo, hi = float(np.nanmin(img)), float(np.nanmax(img))
    return np.clip(img, 0, 1) if lo >= 0 and hi <= 1 else (img - lo) / max(hi - lo, 1e-12)


def artifact_images(loaded: LoadedResult, kind: str, count: int = 0) -> Images:
    """Merge every artifact whose name says `kind` ("recon" or "mean").

    `count`: how many classes a PNG holding one row of tiles (torchvision's `save_image` grid,
    padding 1) should be cut into. Tensor files are preferred over PNGs of the same images.
    """
    out: Images = {}
    names = [n for n in sorted(loaded.result.artifacts) if kind in n.lower()]
    tensors = [n for n in names if not loaded.result.artifacts[n].endswith(".png")]
    for name in tensors or names:
        path = loaded.artifact(name)
        if path is None or not path.is_file():
            continue
        images = load_images(path)
        number = re.search(r"(\d+)$", Path(name).stem)
        if number and len(images) == 1:
            images = {int(number.group(1)): next(iter(images.values()))}
        elif path.suffix == ".png" and len(images) == 1 and count > 1:
            images = split_row(next(iter(images.values())), count)
        out.update(images)
    held = (loaded.result.extra.get("inversion") or {}).get("victim_classes")
    if kind == "mean" and isinstance(held, list):
        out = {c: img for c, img in out.items() if c in held}  # a class the victim lacks has no mean
    return out


def split_row(grid: np.ndarray, count: int, padding: int = 1) -> Images:
    """Cut a one-row grid of `count` equal tiles separated by `padding` pixels into its tiles."""
    width = grid.shape[1]
    tile = (width - padding) // count - padding
    if tile <= 0 or (tile + padding) * count + padding != width:
        return {}
    top = grid[padding:padding + grid.shape[0] - 2 * padding]
    return {k: top[:, padding + k * (tile + padding): padding + k * (tile + padding) + tile] for k in range(count)}


Notes = dict[int, str]  # class id -> the words under (or in) its cell


@dataclass
class Row:
    label: str
    images: Images
    notes: Notes = field(default_factory=dict)
    framed: set[int] = field(default_factory=set)  # the classes the adversary ranks in its top half


def inversion_figures(results: list[LoadedResult], out: Path) -> FigureList:
    """One grid per (attack, dataset): the shown victim's class means, then one row per setting."""
    groups: dict[tuple[str, str], list[LoadedResult]] = defaultdict(list)
    for r in results:
        if r.result.applicable and any("recon" in a.lower() for a in r.result.artifacts):
            groups[(r.result.attack, r.run.dataset)].append(r)
    figures: FigureList = []
    for (attack, dataset), members in sorted(groups.items()):
        victim, seed = _shown_victim(members)
        shown = [r for r in members if (r.result.victim, r.result.seed) == (victim, seed)]
        rows = grid_rows(shown)
        if not any(row.images for row in rows):
            continue
        path = out / f"inversion-{slug(attack, dataset)}.png"
        names = next((r.run.classes for r in shown if r.run.classes), [])
        _draw_grid(rows, path, f"{attack} on {dataset}: victim {victim}, seed {seed}", names)
        figures.append((path, caption(attack, dataset, victim, seed, held_classes(shown))))
    return figures


def grid_rows(shown: list[LoadedResult]) -> list[Row]:
    """The victim's class means ('not held' in the cells of classes it lacks), then one row per setting."""
    rows: list[Row] = []
    for r in sorted(shown, key=lambda r: (r.run.label, "upper bound" in threat_label(r), threat_label(r),
                                           r.result.reconstruction)):
        recon = r.result.reconstruction
        label = f"{r.run.label}\n{threat_label(r)}" + ("" if recon in ("none", "") else f"\n{recon}")
        rows.append(Row(label, artifact_images(r, "recon"), judged(r), ranked_top(r)))
    count = max((len(row.images) for row in rows), default=0)
    means = next((m for m in (artifact_images(r, "mean", count) for r in shown) if m), {})
    held = held_classes(shown)
    if means:
        rows.insert(0, Row("class means (victim's data)", means, {} if held is None else
                           {c: "not held" for c in range(count) if c not in held}))
    return rows


def held_classes(shown: list[LoadedResult]) -> list[int] | None:
    """The classes the shown victim holds, as its results record them (None if none does)."""
    for r in shown:
        held = (r.result.extra.get("inversion") or {}).get("victim_classes")
        if isinstance(held, list):
            return [int(c) for c in held]
    return None


def judged(r: LoadedResult) -> Notes:
    """Under each reconstruction: how firmly the attacked model holds it as its class (the log-odds
    of its confidence, or the confidence in results without them), and the evaluation classifier's
    label where it reads another class."""
    info = r.result.extra.get("inversion") or {}
    odds, conf, labels = info.get("log_odds"), info.get("confidence"), info.get("eval_labels")
    firm = [f"log-odds {x:.1f}" for x in odds] if isinstance(odds, list) else \
        [f"p {x:.2f}" for x in conf] if isinstance(conf, list) else []
    out: Notes = {}
    for c, text in enumerate(firm):
        read = labels[c] if isinstance(labels, list) and c < len(labels) else c
        out[c] = text + ("" if read == c else f", reads {read}")
    return out


def ranked_top(r: LoadedResult) -> set[int]:
    mix = (r.result.extra.get("inversion") or {}).get("class_mix")
    return {int(c) for c in mix.get("top", [])} if isinstance(mix, dict) else set()


def caption(attack: str, dataset: str, victim: int, seed: int, held: list[int] | None) -> str:
    holds = "" if held is None else f" The victim holds classes {', '.join(map(str, held))}."
    return (f"{attack} reconstructions per class on {dataset} (victim client {victim}, seed {seed}). Top row: the "
            "mean training image of each class the victim holds, the ground truth the PSNR compares against (a "
            "grey cell marked 'not held': the victim has no image of that class). Under each reconstruction: "
            "how firmly the attacked model holds it as its class (the log-odds of its confidence), and the "
            "evaluation classifier's label where it reads another class; framed in orange: the half of the "
            "classes held firmest, the adversary's guess of the classes the victim holds more of than the "
            f"population; a grey cell without a mark: no image was saved.{holds}")


def _shown_victim(members: list[LoadedResult]) -> tuple[int, int]:
    """The (victim, seed) attacked under the most settings, so the grid's rows are comparable."""
    counts = Counter((r.result.victim, r.result.seed) for r in members)
    return min(counts, key=lambda k: (-counts[k], k))


def _draw_grid(rows: list[Row], path: Path, title: str, names: list[str]) -> None:
    classes = sorted({c for row in rows for c in row.images} | {c for row in rows for c in row.notes})
    fig, axes = plt.subplots(len(rows), len(classes), squeeze=False,
                             figsize=(1.0 * len(classes) + 1.8, 1.2 * len(rows) + 0.5))
    for i, row in enumerate(rows):
        for j, c in enumerate(classes):
            ax = axes[i][j]
            ax.set_xticks([])
            ax.set_yticks([])
            if c in row.images:
                ax.imshow(row.images[c], cmap="gray", vmin=0, vmax=1, interpolation="nearest")
                ax.set_xlabel(row.notes.get(c, ""), fontsize=6, labelpad=2)
            else:
                ax.set_facecolor("#eeeeee")
                ax.text(0.5, 0.5, row.notes.get(c, ""), fontsize=7, ha="center", va="center",
                        transform=ax.transAxes)
            if c in row.framed:
                for spine in ax.spines.values():
                    spine.set(edgecolor="#e07000", linewidth=2.5)
            if i == 0:
                name = names[c] if c < len(names) and names[c] != str(c) else ""
                ax.set_title(f"{c}: {name[:12]}" if name else f"class {c}", fontsize=7)
        axes[i][0].set_ylabel(row.label, fontsize=7, rotation=0, ha="right", va="center")
    fig.suptitle(title, fontsize=9)
    _save(fig, path)
