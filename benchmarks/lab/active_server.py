"""docs/active-server.md's measurements: every active attack against FedAvg (undefended, behind
secure aggregation, under client-level DP at three noise levels, under sample-level DP) and
WAFFLe, on MNIST and CIFAR-10, beside the passive eavesdropper on the same clients; and what the
client-side check (`downlink-check`) stops and how often it refuses an honest downlink.

    FEDATTACK_DATA=../shared/datasets python benchmarks/lab/active_server.py run --out /tmp/active [--only WORD]
    python benchmarks/lab/active_server.py evidence --out /tmp/active   # docs/evidence/active-server/*.json
    python benchmarks/lab/active_server.py before-after --out /tmp/active  # that table alone, merged
    python benchmarks/lab/active_server.py table --out /tmp/active      # the page's tables, from that evidence
    python benchmarks/lab/active_server.py figure --out /tmp/active     # docs/active-server.png

`run` trains each cell's federation and evaluates it into OUT/<cell>/ (a cell whose done.json
exists is skipped, so the same command continues after an interruption), then deletes the run
directory (transcripts of acting rounds are hundreds of MB) unless --keep. Every cell acts in
rounds 1-12 of a federation of 12 rounds, seed 0; its victims are the 12 clients an isolating
server picks (the lowest-numbered sampled client it has not attacked yet, each round: the
sampling depends only on the seed, so they are the same clients in every cell), and every
attack is scored on those clients. The server's reading is scored twice on the same rounds:
by `readout` as it is, and by `readout-before` (defined here), the readout of 80c64d1, which
dropped the later of two candidates within a cosine of 0.999 before matching (the page's before
and after). `evidence` writes each table's per-victim rows, which
`benchmarks/lab/active_server_tables.py` renders (mean over victims, 95% percentile bootstrap).
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

from fedattack.attacks.active._reading import SAME
from fedattack.attacks.active.readout import Readout
from fedattack.attacks.base import Adversary
from fedattack.attacks.data_reconstruction.family import Reconstructions
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
    """A dataset's federation (the same clients in every cell) and the imprint's size there; the
    name gives the images a client trains on (MNIST-480: 600 a client, 20% held out to test)."""

    name: str
    spec: FederationSpec
    bins: int


MNIST = Setting("mnist", FederationSpec(
    dataset="mnist", model="mnist-mlp", partition="iid", partition_options={"test_fraction": 0.5},
    num_clients=600, fraction=10 / 600, rounds=ROUNDS, recipe=Recipe(epochs=5, batch_size=5, lr=0.04),
    seed=0, record="all", eval_every=ROUNDS, executor="batched"), bins=500)
MNIST_LARGE = Setting("mnist-480", FederationSpec(
    dataset="mnist", model="mnist-mlp", partition="iid", num_clients=100, fraction=0.1, rounds=ROUNDS,
    recipe=Recipe(epochs=5, batch_size=10, lr=0.04), seed=0, record="all", eval_every=ROUNDS,
    executor="batched"), bins=2000)
CIFAR = Setting("cifar10", FederationSpec(
    dataset="cifar10", model="cifar-cnn", partition="iid", num_clients=200, fraction=10 / 200, rounds=ROUNDS,
    recipe=Recipe(epochs=1, batch_size=10, lr=0.02), seed=0, record="all", eval_every=ROUNDS,
    executor="batched"), bins=500)
WAFFLE = {"method": "waffle-ibp", "hyper": {"recipe": "personal"}}
# methods whose uplink is not the model: SCAFFOLD's (dy, dc), q-FFL's scaled delta and h (issue #50)
SCAFFOLD, QFFL = {"method": "scaffold"}, {"method": "qffl"}


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
    cells += [Cell(s, active=attack, method=method) for method in (SCAFFOLD, QFFL) for attack in (imprint(s), TRAP)]
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


CHECKED_ROUNDS = 40


def honest_checks() -> list[Cell]:
    """Honest federations with the check, long enough for clients to come back (false alarms)."""
    return [Cell(MNIST_LARGE, (CHECK,), rounds=CHECKED_ROUNDS),
            Cell(MNIST_LARGE, (CHECK,), method=WAFFLE, rounds=CHECKED_ROUNDS),
            Cell(MNIST_LARGE, (CHECK,), method=SCAFFOLD, rounds=CHECKED_ROUNDS),
            Cell(CIFAR, (CHECK,), rounds=CHECKED_ROUNDS)]


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
    partition = Federation(run, deep_verify=False).partition()
    facts = {"cell": cell.name, "seconds_training": round(trained, 1), "utility": manifest.get("utility"),
             "active": manifest.get("active_adversary"), "defences": manifest.get("defences"),
             "train_images": {str(v): len(partition.clients[v].train) for v in victims(cell.setting)}}
    if cell.false_alarms:
        facts["least_row_cosine"] = least_similarity(Federation(run))
    else:
        evaluate_cell(cell, run, folder, data_root)
    facts["seconds_total"] = round(time.perf_counter() - started, 1)
    if not keep:
        shutil.rmtree(folder / "run")
    (folder / "done.json").write_text(json.dumps(facts, indent=1, default=str))
    print(f"{cell.name}: {facts['seconds_total']:.0f} s", flush=True)


class ReadoutBefore(Readout):
    """The readout as it was at 80c64d1 (issue #50): of two candidates within a cosine of 0.999
    the later was dropped before matching, whichever of them was the exact read."""

    name = "readout-before"

    def reconstruct(self, adv: Adversary, gen: torch.Generator) -> Reconstructions:
        found = super().reconstruct(adv, gen)
        if "distinct" not in found.info:  # not unit ratios (model inconsistency's span): never de-duplicated
            return found
        return Reconstructions(earlier_kept(found.images), {**found.info, "de-duplicated": "the earlier kept"})


def earlier_kept(images: torch.Tensor) -> torch.Tensor:
    """80c64d1's `distinct`: an image is dropped when an earlier one is within cosine `SAME`."""
    if len(images) < 2:
        return images
    flat = images.flatten(1).double()
    unit = flat / flat.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return images[~(torch.tril(unit @ unit.T, diagonal=-1) > SAME).any(1)]


def evaluate_cell(cell: Cell, run: Path, folder: Path, data_root: str | None) -> None:
    chosen = tuple(victims(cell.setting))
    evaluate_run(run, EvaluationSpec(threat_models=("server",), attacks=("readout", ReadoutBefore.name),
                                     victims=chosen), folder / "readout", data_root=data_root, progress=False)
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


def victim_rows(out: Path) -> list[dict[str, Any]]:
    """Per cell, reading and victim: the shares read (0 where the reading could not be applied:
    it recovered nothing), the old readout's verbatim share beside the readout's, and chance."""
    rows = []
    for done in sorted(out.glob("*/done.json")):
        facts = json.loads(done.read_text())
        for kind in ("readout", "passive"):
            results = [AttackResult.load(p) for p in sorted((done.parent / kind).glob("*victim*.json"))]
            before = {r.victim: r for r in results if r.attack == ReadoutBefore.name}
            for r in (r for r in results if r.attack != ReadoutBefore.name):
                row = {"cell": facts["cell"], "reading": kind, "victim": r.victim, "applicable": r.applicable,
                       "recovered_20": metric(r, "recovered_20", "share_recovered"),
                       "recovered_40": metric(r, "recovered_40", None),
                       "chance_20": r.baselines.get("chance", {}).get("recovered_20"),
                       "chance_40": r.baselines.get("chance", {}).get("recovered_40"),
                       "train_images": facts.get("train_images", {}).get(str(r.victim))}
                if r.victim in before:
                    row["recovered_40_before"] = metric(before[r.victim], "recovered_40", None)
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


EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "active-server"
RENDER = "benchmarks/lab/active_server_tables.py"


def save(table: str, function: str, rows: list[dict[str, Any]], **about: Any) -> Path:
    path = EVIDENCE / f"{table}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"render": f"{RENDER}:{function}", **about, "rows": rows}, indent=1) + "\n")
    return path


def evidence(out: Path) -> list[Path]:
    """Every table of the page as its per-victim (or per-federation) rows, under docs/evidence/."""
    by_name, order = {c.name: c for c in CELLS}, {c.name: i for i, c in enumerate(CELLS)}
    rows = sorted((r for r in victim_rows(out) if r["cell"] in by_name),
                  key=lambda r: (order[r["cell"]], r["reading"] != "readout", r["victim"]))
    written, acting = [], []
    for setting in (MNIST, MNIST_LARGE, CIFAR):
        mine = [(by_name[r["cell"]], r) for r in rows if by_name[r["cell"]].setting is setting
                and CHECK not in by_name[r["cell"]].defences]
        if not mine:
            continue
        labels = list(dict.fromkeys(row_label(c) for c, _ in mine))
        used = [col for col in COLUMNS if any(column(c, r["reading"]) == col for c, r in mine)]
        for key, name in (("recovered_20", "recovered-20"), ("recovered_40", "verbatim")):
            cells = [{"row": row_label(c), "column": column(c, r["reading"]), "victim": r["victim"], key: r[key]}
                     for c, r in mine]
            written.append(save(f"{setting.name}-{name}", "shares", cells, setting=setting.name, metric=key,
                                columns=used, row_order=labels, n_victims=len(victims(setting))))
        acting += read_twice(mine)
    written.append(save("verbatim-before-after", "before_after", merged(acting)))
    written += check_evidence(out, rows, by_name)
    return written


def before_after_evidence(out: Path) -> Path:
    """The before/after table's evidence alone, from the cells OUT holds merged into the committed
    rows (`merged`): for re-running a few cells without rewriting the other tables' evidence."""
    by_name = {c.name: c for c in CELLS}
    mine = [(by_name[r["cell"]], r) for r in victim_rows(out)
            if r["cell"] in by_name and CHECK not in by_name[r["cell"]].defences]
    return save("verbatim-before-after", "before_after", merged(read_twice(mine)))


def read_twice(mine: list[tuple[Cell, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each victim's verbatim share by the readout before #50's fix and after, in the server's cells
    (the honest server's too: the same readout on the honest federation)."""
    return [{"setting": c.setting.name, "row": row_label(c), "column": column(c, "readout"), "victim": r["victim"],
             "recovered_40_before": r["recovered_40_before"], "recovered_40": r["recovered_40"]}
            for c, r in mine if r["reading"] == "readout" and "recovered_40_before" in r]


def table_key(row: dict[str, Any]) -> tuple[str, str, str]:
    return row["setting"], row["row"], row["column"]


def merged(fresh: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The before/after rows of the cells in OUT, beside the committed rows of the cells OUT does
    not hold (re-measured in an earlier session), in the order of CELLS: a partial OUT (a few
    cells re-run) adds to the evidence and never drops any."""
    path = EVIDENCE / "verbatim-before-after.json"
    committed = json.loads(path.read_text())["rows"] if path.exists() else []
    redone = {table_key(r) for r in fresh}
    rows = [r for r in committed if table_key(r) not in redone] + fresh
    order = {(c.setting.name, row_label(c), column(c, "readout")): i for i, c in enumerate(CELLS)}
    return sorted(rows, key=lambda r: (order.get(table_key(r), len(order)), r["victim"]))


def check_evidence(out: Path, rows: list[dict[str, Any]], by_name: dict[str, Cell]) -> list[Path]:
    """What the check stops (each checked cell beside its twin without the check), and its false alarms."""
    stops, refusals = [], {}
    for cell in CELLS:
        if CHECK not in cell.defences or cell.false_alarms or not (out / cell.name / "done.json").exists():
            continue
        twin = replace(cell, defences=tuple(d for d in cell.defences if d != CHECK))
        setting = cell.setting.name + (" + secure aggregation" if SECURE in cell.defences else "")
        attack = column(cell, "readout")
        for name, checked in ((twin.name, False), (cell.name, True)):
            stops += [{"setting": setting, "attack": attack, "checked": checked, "victim": r["victim"],
                       "recovered_20": r["recovered_20"]}
                      for r in rows if r["cell"] == name and r["reading"] == "readout"]
        refusals[f"{setting}|{attack}"] = accounting(json.loads((out / cell.name / "done.json").read_text()))
    alarms = []
    for cell in (c for c in CELLS if c.false_alarms and (out / c.name / "done.json").exists()):
        facts = json.loads((out / cell.name / "done.json").read_text())
        acc = accounting(facts)
        alarms.append({"federation": f"{cell.setting.name} {cell.method.get('method', 'fedavg')}",
                       "checked": acc["checked"], "refused": acc["refused"],
                       "least_row_cosine": facts.get("least_row_cosine", {})})
    return [save("check-stops", "check_stops", stops, refused=refusals),
            save("check-false-alarms", "false_alarms", alarms, rounds=CHECKED_ROUNDS)]


def accounting(facts: dict[str, Any]) -> dict[str, Any]:
    acc = next((d.get("accounting", {}) for d in facts.get("defences") or [] if d["name"] == CHECK), {})
    return {"checked": acc.get("checked", 0), "refused": acc.get("refused", 0), "reasons": acc.get("reasons", {})}


def tables() -> str:
    """The page's tables, rendered from the evidence `evidence` wrote (as the page holds them)."""
    import importlib.util

    found = importlib.util.spec_from_file_location("active_server_tables", Path(__file__).with_name(
        "active_server_tables.py"))
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    out = []
    for path in sorted(EVIDENCE.glob("*.json")):
        data = json.loads(path.read_text())
        out += [f"<!-- evidence: active-server/{path.stem} -->", getattr(module, data["render"].split(":")[1])(data),
                "<!-- /evidence -->", ""]
    return "\n".join(out)


def facts(out: Path) -> str:
    """What the prose quotes beside the tables: chance per cell, client sizes, calibrations, seconds."""
    lines = []
    rows = victim_rows(out)
    for done in sorted(out.glob("*/done.json")):
        f = json.loads(done.read_text())
        mine = [r for r in rows if r["cell"] == f["cell"] and r["reading"] == "readout"]
        chance = [r["chance_20"] for r in mine if r["chance_20"] is not None]
        cal = (f.get("active") or {}).get("calibration", {})
        sizes = sorted({v for v in f.get("train_images", {}).values()})
        lines.append(f"{f['cell']}: {f['seconds_total']:.0f} s; train images {sizes[:1]}..{sizes[-1:]}; chance20 max "
                     f"{max(chance, default=0):.3f}; alpha {cal.get('alpha')} {cal.get('read_back_above_40db', '')}")
    return "\n".join(lines)


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
        path = next(p for p in sorted((out / cell / "readout").glob("readout-server-*victim*.json"))
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
    parser.add_argument("what", choices=["run", "evidence", "before-after", "table", "facts", "list", "figure"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", default="", help="run the cells whose name contains this")
    parser.add_argument("--cell", action="append", default=[], help="run this cell (its exact name, `list`); "
                        "repeat it for several, run in the order given")
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the run directories")
    parser.add_argument("--readout-only", action="store_true", help="read the server's readings only, not "
                        "the passive eavesdropper's (which never de-duplicated: issue #50's before/after)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cells = [c for c in CELLS if args.only in c.name]
    if args.cell:
        named = {c.name: c for c in cells}
        unknown = [n for n in args.cell if n not in named]
        if unknown:
            parser.error(f"no cell named {unknown[0]!r}: `list` prints the cells' names")
        cells = [named[n] for n in args.cell]
    if args.readout_only:  # the passive reading never de-duplicated: a re-read for the before/after skips it
        cells = [replace(c, passive=False) for c in cells]
    if args.what == "figure":
        figure(args.out, Path(__file__).resolve().parents[2] / "docs" / "active-server.png")
    elif args.what == "list":
        print("\n".join(c.name for c in cells))
    elif args.what == "run":
        for cell in cells:
            run_cell(cell, args.out, args.data_root, args.keep)
    elif args.what == "before-after":
        print(before_after_evidence(args.out))
    elif args.what == "evidence":
        print("\n".join(str(p) for p in evidence(args.out)))
    elif args.what == "facts":
        print(facts(args.out))
    else:
        print(tables())


if __name__ == "__main__":
    main()
