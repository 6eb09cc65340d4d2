"""docs/active-server.md's measurements: every active attack against FedAvg (undefended, behind
secure aggregation, under client-level DP at three noise levels, under sample-level DP) and
WAFFLe, on MNIST and CIFAR-10, beside the passive eavesdropper on the same clients; and what the
client-side check (`downlink-check`) stops and how often it refuses an honest downlink.

    FEDATTACK_DATA=../shared/datasets python benchmarks/lab/active_server.py run --out /tmp/active [--only WORD]
    python benchmarks/lab/active_server.py table --out /tmp/active > tables.md

`run` trains each cell's federation and evaluates it into OUT/<cell>/ (a cell whose summary
exists is skipped, so the same command continues after an interruption), then deletes the run
directory (transcripts of acting rounds are hundreds of MB) unless --keep. Every cell acts in
rounds 1-12 of a federation of 12 rounds, seed 0; its victims are the 12 clients an isolating
server picks (the lowest-numbered sampled client it has not attacked yet, each round: the
sampling depends only on the seed, so they are the same clients in every cell), and every
attack is scored on those clients. `table` prints per cell and attack the mean share of a
victim's images recovered above 20 dB and above 40 dB with 95% percentile-bootstrap intervals
over the victims (scipy), n, and the chance baseline.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.defences import parse_defence
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.active import parse_active
from fedattack.federation.rundir import Federation
from fedattack.federation.spec import FederationSpec
from fedattack.federation.train import train_federation
from fedattack.results import AttackResult
from fedattack.target import Recipe

ROUNDS = 12
SECURE = "secure-aggregation"
CHECK = "downlink-check"


def dp(sigma: float) -> str:
    return f"dp-fedavg:clip_norm=1.0,noise_multiplier={sigma:g},noise=client"


@dataclass(frozen=True)
class Setting:
    """A dataset's federation (the same clients in every cell) and the imprint's size there."""

    name: str
    spec: FederationSpec
    bins: int


MNIST = Setting("mnist", FederationSpec(
    dataset="mnist", model="mnist-mlp", partition="iid", partition_options={"test_fraction": 0.5},
    num_clients=600, fraction=10 / 600, rounds=ROUNDS, recipe=Recipe(epochs=5, batch_size=5, lr=0.04),
    seed=0, record="all", eval_every=ROUNDS, executor="batched"), bins=500)
MNIST_LARGE = Setting("mnist-600", FederationSpec(
    dataset="mnist", model="mnist-mlp", partition="iid", num_clients=100, fraction=0.1, rounds=ROUNDS,
    recipe=Recipe(epochs=5, batch_size=10, lr=0.04), seed=0, record="all", eval_every=ROUNDS,
    executor="batched"), bins=2000)
CIFAR = Setting("cifar10", FederationSpec(
    dataset="cifar10", model="cifar-cnn", partition="iid", num_clients=200, fraction=10 / 200, rounds=ROUNDS,
    recipe=Recipe(epochs=1, batch_size=10, lr=0.02), seed=0, record="all", eval_every=ROUNDS,
    executor="batched"), bins=500)
WAFFLE = {"method": "waffle-ibp", "hyper": {"recipe": "personal"}}


@dataclass(frozen=True)
class Cell:
    """One federation: a setting, a method, its defences, an active server (None: honest)."""

    setting: Setting
    defences: tuple[str, ...] = ()
    active: str | None = None
    method: dict[str, Any] = field(default_factory=dict)
    passive: bool = False  # also run the passive eavesdropper's first-layer reading here
    rounds: int = ROUNDS  # an honest federation with the check runs longer, so that clients return

    @property
    def name(self) -> str:
        parts = [self.setting.name, self.method.get("method", "fedavg"), *(d.split(":")[0] + _sigma(d)
                                                                         for d in self.defences),
                 (self.active or "honest").replace(":", "-").replace(",", "-").replace("=", "")]
        return "_".join(parts) + ("" if self.rounds == ROUNDS else f"_{self.rounds}rounds")

    def spec(self) -> FederationSpec:
        return replace(self.setting.spec, defences=tuple(parse_defence(d) for d in self.defences),
                       active=None if self.active is None else parse_active(self.active), rounds=self.rounds,
                       eval_every=self.rounds, **self.method)

    @property
    def false_alarms(self) -> bool:
        """An honest federation with the check: what it refuses is a false alarm."""
        return CHECK in self.defences and self.active is None


def _sigma(defence: str) -> str:
    if "noise_multiplier" not in defence:
        return ""
    return "-s" + defence.split("noise_multiplier=")[1].split(",")[0] + ("-server" if "noise=server" in defence else "")


def imprint(setting: Setting, extra: str = "") -> str:
    return f"imprint:rounds=1-{ROUNDS},bins={setting.bins}{extra}"


TRAP = f"trap-weights:rounds=1-{ROUNDS}"
ALONE = f"model-inconsistency:rounds=1-{ROUNDS}"


def mnist_cells(s: Setting) -> list[Cell]:
    sigmas = (0.01, 0.1, 1.0)
    cells = [Cell(s, passive=True), Cell(s, active=imprint(s)), Cell(s, active=TRAP),
             Cell(s, (SECURE,), passive=True), Cell(s, (SECURE,), imprint(s)),
             Cell(s, (SECURE,), imprint(s, ",isolate=true")), Cell(s, (SECURE,), TRAP + ",isolate=true"),
             Cell(s, (SECURE,), ALONE)]
    for sigma in sigmas:
        cells += [Cell(s, (dp(sigma),), passive=sigma == 0.01), Cell(s, (dp(sigma),), imprint(s)),
                  Cell(s, (dp(sigma),), TRAP)]
    cells += [Cell(s, ("dp-sgd:clip_norm=1.0,noise_multiplier=1.0",), imprint(s)),
              Cell(s, ("dp-sgd:clip_norm=1.0,noise_multiplier=1.0",), TRAP)]
    cells += [Cell(s, active=imprint(s, ",output=linear"))]  # the paper's trained output layer
    # the noise a trusted server adds: the uplinks it reads are clipped, not noised
    cells += [Cell(s, ("dp-fedavg:clip_norm=1.0,noise_multiplier=1.0,noise=server",), imprint(s))]
    cells += [Cell(s, method=WAFFLE, passive=True), Cell(s, active=imprint(s), method=WAFFLE),
              Cell(s, active=TRAP, method=WAFFLE)]
    cells += [Cell(s, (CHECK,), imprint(s)), Cell(s, (CHECK,), TRAP),
              Cell(s, (CHECK, SECURE), imprint(s, ",isolate=true")), Cell(s, (CHECK, SECURE), ALONE)]
    return cells


def large_cells(s: Setting) -> list[Cell]:
    return [Cell(s, passive=True), Cell(s, active=imprint(s)), Cell(s, active=TRAP),
            Cell(s, (SECURE,), imprint(s, ",isolate=true")), Cell(s, (SECURE,), ALONE)]


def cifar_cells(s: Setting) -> list[Cell]:
    """No honest cells: the honest server's and the eavesdropper's closed-form readings need a
    dense first layer, and cifar-cnn starts with a convolution (docs: not run, and why)."""
    cells = [Cell(s, active=imprint(s)), Cell(s, (SECURE,), imprint(s)),
             Cell(s, (SECURE,), imprint(s, ",isolate=true"))]
    cells += [Cell(s, (dp(sigma),), imprint(s)) for sigma in (0.01, 0.1, 1.0)]
    # WAFFLe's personal recipe fine-tunes in its last local epoch, so it needs two
    waffle = {**WAFFLE, "recipe": replace(s.spec.recipe, epochs=2)}
    cells += [Cell(s, active=imprint(s), method=waffle), Cell(s, (CHECK,), imprint(s))]
    return cells


def honest_checks() -> list[Cell]:
    """Honest federations with the check, long enough for clients to come back (false alarms)."""
    return [Cell(MNIST_LARGE, (CHECK,), rounds=40), Cell(MNIST_LARGE, (CHECK,), method=WAFFLE, rounds=40),
            Cell(CIFAR, (CHECK,), rounds=40)]


CELLS = [*mnist_cells(MNIST), *large_cells(MNIST_LARGE), *cifar_cells(CIFAR), *honest_checks()]


def victims(setting: Setting) -> list[int]:
    """The clients an isolating server picks in rounds 1..12 (the same in every cell)."""
    from fedattack.federation.loop import sample_clients
    num = setting.spec.num_clients or 0
    picked: list[int] = []
    for rnd in range(1, ROUNDS + 1):
        picked.append(next(k for k in sample_clients(setting.spec, num, rnd) if k not in picked))
    return picked


def run_cell(cell: Cell, out: Path, data_root: str | None, keep: bool) -> None:
    folder = out / cell.name
    if (folder / "done.json").exists():
        return
    started = time.perf_counter()
    run = train_federation(cell.spec(), folder / "run", data_root=data_root, overwrite=True, progress=False)
    trained = time.perf_counter() - started
    manifest = Federation(run, deep_verify=False).manifest
    facts = {"cell": cell.name, "seconds_training": round(trained, 1), "utility": manifest.get("utility"),
             "active": manifest.get("active_adversary"), "defences": manifest.get("defences")}
    if cell.false_alarms:
        facts["least_row_cosine"] = least_similarity(Federation(run))
    else:
        evaluate_cell(cell, run, folder, data_root)
    facts["seconds_total"] = round(time.perf_counter() - started, 1)
    if not keep:
        shutil.rmtree(folder / "run")
    (folder / "done.json").write_text(json.dumps(facts, indent=1, default=str))
    print(f"{cell.name}: {facts['seconds_total']:.0f} s", flush=True)


def evaluate_cell(cell: Cell, run: Path, folder: Path, data_root: str | None) -> None:
    chosen = tuple(victims(cell.setting))
    evaluate_run(run, EvaluationSpec(threat_models=("server",), attacks=("readout",), victims=chosen),
                 folder / "readout", data_root=data_root, progress=False)
    if cell.passive:
        spec = EvaluationSpec(threat_models=("eavesdropper",), attacks=("update-inversion",), victims=chosen,
                              settings={"start": "first-layer", "iterations": 1})
        evaluate_run(run, spec, folder / "passive", data_root=data_root, progress=False)


def least_similarity(fed: Federation) -> dict[str, float]:
    """Per weight, the lowest mean row cosine between a downlink and the same client's previous one
    (what `downlink-check` compares with its `min_similarity`)."""
    from fedattack.defences.downlink_check import similarity

    last: dict[int, dict[str, torch.Tensor]] = {}
    least: dict[str, float] = {}
    for rnd in sorted({e["round"] for e in fed.transcript().index}):
        for m in fed.transcript().load(kind="downlink", rounds={rnd}):
            before = last.get(m.receiver)
            for name, t in m.payload.items():
                if before is not None and t.dim() >= 2:
                    least[name] = min(least.get(name, 1.0), similarity(t.flatten(1), before[name].flatten(1)))
            last[m.receiver] = m.payload
    return least


def summarise(out: Path) -> list[dict[str, Any]]:
    """Per cell and attack: the shares over victims with their intervals."""
    from scipy.stats import bootstrap

    rows = []
    for done in sorted(out.glob("*/done.json")):
        facts = json.loads(done.read_text())
        if not (done.parent / "readout").is_dir():  # an honest federation with the check: no reading
            rows.append({"cell": facts["cell"], "reading": "none", "facts": facts})
        for kind in ("readout", "passive"):
            results = [AttackResult.load(p) for p in sorted((done.parent / kind).glob("*victim*.json"))]
            if not results:
                continue
            row: dict[str, Any] = {"cell": facts["cell"], "reading": kind, "n": len(results),
                                   "applicable": sum(r.applicable for r in results), "facts": facts}
            for key, alias in (("recovered_20", "share_recovered"), ("recovered_40", None)):
                values = [metric(r, key, alias) for r in results]
                row[key] = interval(np.array(values), bootstrap)
            row["chance_20"] = float(np.mean([r.baselines.get("chance", {}).get("recovered_20", 0.0)
                                              for r in results]))
            row["notes"] = sorted({r.note for r in results if not r.applicable})
            rows.append(row)
    return rows


def metric(r: AttackResult, key: str, alias: str | None) -> float:
    """A victim's share (0 where the attack could not be applied: it recovered nothing)."""
    if not r.applicable:
        return 0.0
    if key in r.metrics:
        return float(r.metrics[key])
    if key == "recovered_40":  # the passive attack reports PSNRs per matched pair only
        psnr = r.extra.get("reconstruction_match", {}).get("psnr", [])
        return float(np.sum(np.array(psnr) > 40.0)) / max(1, r.extra.get("victim_images", len(psnr)))
    return float(r.metrics.get(alias or key, 0.0))


def interval(values: np.ndarray, bootstrap: Any) -> list[float]:
    mean = float(values.mean())
    if len(values) < 2 or float(values.std()) == 0.0:
        return [mean, mean, mean]
    ci = bootstrap((values,), np.mean, confidence_level=0.95, method="percentile", n_resamples=2000,
                   random_state=np.random.default_rng(0)).confidence_interval
    return [mean, float(ci.low), float(ci.high)]


COLUMNS = ("honest server", "passive eavesdropper", "imprint", "imprint (paper's output layer)",
           "imprint + isolation", "trap weights", "trap weights + isolation", "model inconsistency")


def column(cell: Cell, reading: str) -> str:
    if reading == "passive":
        return "passive eavesdropper"
    if cell.active is None:
        return "honest server"
    name = {"imprint": "imprint", "trap-weights": "trap weights", "model-inconsistency": "model inconsistency"}
    base = name[cell.active.split(":")[0]] + (" (paper's output layer)" if "output=linear" in cell.active else "")
    return base + (" + isolation" if "isolate=true" in cell.active else "")


def row_label(cell: Cell) -> str:
    method = cell.method.get("method", "fedavg")
    defences = ", ".join(d.split(":")[0] + (f" σ={_sigma(d)[2:]}".replace("-server", " (server noise)")
                                            if _sigma(d) else "") for d in cell.defences)
    return f"{method}" + (f" + {defences}" if defences else "")


def share(interval_: list[float]) -> str:
    mean, low, high = (100 * v for v in interval_)
    return f"{mean:.0f}" if low == high else f"{mean:.0f} [{low:.0f}, {high:.0f}]"


def tables(rows: list[dict[str, Any]]) -> str:
    """Markdown: per setting, one table per threshold, rows method + defences, columns the readings."""
    by_name = {c.name: c for c in CELLS}
    order = {c.name: i for i, c in enumerate(CELLS)}
    out = []
    for setting in (MNIST, MNIST_LARGE, CIFAR):
        mine = sorted([(by_name[r["cell"]], r) for r in rows if r["cell"] in by_name
                       and by_name[r["cell"]].setting is setting and not by_name[r["cell"]].false_alarms
                       and CHECK not in by_name[r["cell"]].defences], key=lambda cr: order[cr[0].name])
        if not mine:
            continue
        labels = list(dict.fromkeys(row_label(c) for c, _ in mine))
        used = [col for col in COLUMNS if any(column(c, r["reading"]) == col for c, r in mine)]
        for key, title in (("recovered_20", "above 20 dB"), ("recovered_40", "above 40 dB (verbatim)")):
            out.append(f"\n**{setting.name}: share of a victim's images recovered {title}** (%, mean "
                       f"[95% bootstrap interval] over n = 12 victims)\n")
            out.append("| method + defences | " + " | ".join(used) + " |")
            out.append("| --- | " + " | ".join("---" for _ in used) + " |")
            for label in labels:
                cells = {column(c, r["reading"]): r for c, r in mine if row_label(c) == label}
                out.append(f"| {label} | " + " | ".join(share(cells[col][key]) if col in cells else "-"
                                                       for col in used) + " |")
    return "\n".join(out + ["", check_table(rows)])


def check_table(rows: list[dict[str, Any]]) -> str:
    """What `downlink-check` stops (the attack with it beside without it) and its false alarms."""
    by_name = {c.name: c for c in CELLS}
    out = ["| setting | attack | recovered > 20 dB without the check | with it | downlinks refused |",
           "| --- | --- | --- | --- | --- |"]
    shares = {r["cell"]: r for r in rows if r["reading"] == "readout"}
    for r in rows:
        cell = by_name.get(r["cell"])
        if cell is None or CHECK not in cell.defences or cell.false_alarms or r["reading"] != "readout":
            continue
        twin = replace(cell, defences=tuple(d for d in cell.defences if d != CHECK))
        before = shares.get(twin.name)
        out.append(f"| {cell.setting.name}{' + secure aggregation' if SECURE in cell.defences else ''} | "
                   f"{column(cell, 'readout')} | {share(before['recovered_20']) if before else '-'} | "
                   f"{share(r['recovered_20'])} | {refused(r['facts'])} |")
    out += ["", "| honest federation (40 rounds) | downlinks checked | refused (false alarms) | "
                "lowest mean row cosine between a client's two downlinks |", "| --- | --- | --- | --- |"]
    for r in sorted({r["cell"]: r for r in rows}.values(), key=lambda r: r["cell"]):
        cell = by_name.get(r["cell"])
        if cell is None or not cell.false_alarms:
            continue
        acc = next(d["accounting"] for d in r["facts"]["defences"] if d["name"] == CHECK)
        least = ", ".join(f"{k} {v:.2f}" for k, v in r["facts"].get("least_row_cosine", {}).items())
        out.append(f"| {cell.setting.name} {cell.method.get('method', 'fedavg')} | {acc['checked']} | "
                   f"{acc['refused']} | {least} |")
    return "\n".join(out)


def refused(facts: dict[str, Any]) -> str:
    acc = next((d.get("accounting", {}) for d in facts.get("defences") or [] if d["name"] == CHECK), {})
    reasons = "; ".join(f"{n}: {why}" for why, n in acc.get("reasons", {}).items())
    return f"{acc.get('refused', 0)} of {acc.get('checked', 0)}" + (f" ({reasons})" if reasons else "")


SHOWN = (("mnist_fedavg_secure-aggregation_imprint-rounds1-12-bins500-isolatetrue",
          "MNIST, secure aggregation, imprint + isolation"),
         ("mnist_waffle-ibp_trap-weights-rounds1-12", "MNIST, WAFFLe, trap dictionary"),
         ("cifar10_fedavg_secure-aggregation_imprint-rounds1-12-bins500-isolatetrue",
          "CIFAR-10, secure aggregation, imprint + isolation"))


def figure(out: Path, to: Path, per_row: int = 10) -> None:
    """One victim per shown cell: its images (top) and what the server read (below), with PSNR."""
    import matplotlib.pyplot as plt
    from matplotlib.image import imread

    shown = [(cell, title) for cell, title in SHOWN if (out / cell / "readout").is_dir()]
    fig, axes = plt.subplots(2 * len(shown), per_row, figsize=(per_row * 0.9, 2.6 * len(shown)), squeeze=False,
                             gridspec_kw={"hspace": 0.45, "wspace": 0.08})
    for row, (cell, title) in enumerate(shown):
        path = next(p for p in sorted((out / cell / "readout").glob("*victim*.json"))
                    if AttackResult.load(p).applicable)
        result = AttackResult.load(path)
        psnr = result.extra["reconstruction_match"]["psnr"]
        order = np.argsort(psnr)[::-1][:per_row]  # the best reads; the share says how many there are
        for name, offset in (("matched", 0), ("reconstructions", 1)):
            grid = imread(path.parent / result.artifacts[name])
            side = (grid.shape[0] - 2)
            for col, i in enumerate(order):
                ax = axes[2 * row + offset][col]
                x0 = 1 + int(i) * (side + 1)
                ax.imshow(grid[1:1 + side, x0:x0 + side], cmap="gray" if grid.ndim == 2 else None)
                ax.set_xticks([]), ax.set_yticks([])
                if offset:
                    ax.set_xlabel(f"{psnr[i]:.0f} dB", fontsize=7)
        axes[2 * row][0].set_ylabel("victim", fontsize=7)
        axes[2 * row + 1][0].set_ylabel("read", fontsize=7)
        share = 100 * result.metrics["recovered_40"]
        axes[2 * row][0].set_title(f"{title}: client {result.victim}, {share:.0f}% of its "
                                   "images above 40 dB (its best reads shown)", fontsize=8, loc="left")
    fig.subplots_adjust(left=0.05, right=0.99, top=0.95, bottom=0.04)
    fig.savefig(to, dpi=130)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["run", "table", "list", "figure"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", default="", help="run the cells whose name contains this")
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the run directories")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cells = [c for c in CELLS if args.only in c.name]
    if args.what == "figure":
        figure(args.out, Path(__file__).resolve().parents[2] / "docs" / "active-server.png")
    elif args.what == "list":
        print("\n".join(c.name for c in cells))
    elif args.what == "run":
        for cell in cells:
            run_cell(cell, args.out, args.data_root, args.keep)
    else:
        rows = summarise(args.out)
        (args.out / "summary.json").write_text(json.dumps(rows, indent=1, default=str))
        print(tables(rows))


if __name__ == "__main__":
    main()
