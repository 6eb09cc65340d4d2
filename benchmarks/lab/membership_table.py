"""The membership table of docs/privacy.md from result folders (`fedattack evaluate --out`).

    .venv/bin/python benchmarks/lab/membership_table.py RESULTS [RESULTS ...] [--baseline membership] [--per-victim]
    .venv/bin/python benchmarks/lab/membership_table.py --sweep SWEEP   # an experiment's --out (Table 3)

With --sweep: one row per federation (seed) and result, then one row per setting seen on several
seeds with the mean over seeds and a bootstrap interval of that mean (`mean_over_seeds`).

One row per (attack, threat model): victims, members and non-members (pooled), balanced
accuracy (mean over victims), and AUC, TPR at 1% and 0.1% FPR of every victim's queries pooled,
each with a 95% stratified bootstrap interval (`membership_metrics.intervals`); a TPR at an FPR
below 1/#non-members is printed as "n/m". With --per-victim, the same row for every victim
alone under its pooled row (the issue's victim x attack x threat model table). Then, per
threat model and over all of them, the best attack's TPR at 1% and at 0.1% FPR over the
baseline's on the same victims and queries, with a paired bootstrap interval of the ratio
(members and non-members resampled, the same draw for both attacks). The baseline of the
"all threat models" line is the eavesdropper's (the weakest adversary that runs it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy import stats

from fedattack.attacks.membership.metrics import (
    FPR_LEVELS,
    auc_of,
    intervals,
    measurable,
    pooled,
    ranking,
    tpr_at_fpr,
)
from fedattack.results import AttackResult


def load(folders: list[str]) -> list[AttackResult]:
    out = []
    for folder in folders:
        for path in sorted(Path(folder).glob("*.json")):
            if path.name not in ("summary.json", "cell.json"):
                r = AttackResult.load(path)
                if r.applicable and "membership" in r.extra:
                    out.append(r)
    return out


def cell(value: float | None, ci: list[float] | None, scale: float = 100.0, digits: int = 1) -> str:
    if value is None:
        return "n/m"
    text = f"{value * scale:.{digits}f}"
    return text + (f" [{ci[0] * scale:.{digits}f}, {ci[1] * scale:.{digits}f}]" if ci else "")


def aligned(results: list[AttackResult]) -> tuple[np.ndarray, np.ndarray]:
    """Pooled (membership, scores), victims in id order, so two attacks' queries line up."""
    ordered = sorted(results, key=lambda r: r.victim)
    return pooled([r.extra["membership"]["per_query"] for r in ordered])


def ratio_interval(truth: np.ndarray, best: np.ndarray, base: np.ndarray, alpha: float = 0.01,
                   resamples: int = 2000) -> tuple[float, list[float]]:
    rng = np.random.default_rng(20)
    mem, non = np.flatnonzero(truth), np.flatnonzero(~truth)

    def tpr(s: np.ndarray, m: np.ndarray, n: np.ndarray) -> float:
        return float(tpr_at_fpr(s[m], s[n], alpha))

    def ratio(m: np.ndarray, n: np.ndarray) -> float:
        """Infinite where the baseline finds no member at all (an unbounded ratio, not 1e12)."""
        b = tpr(base, m, n)
        return tpr(best, m, n) / b if b > 0 else np.inf

    draws = [ratio(rng.choice(mem, len(mem)), rng.choice(non, len(non))) for _ in range(resamples)]
    return ratio(mem, non), np.quantile(draws, [0.025, 0.975], method="inverted_cdf").round(2).tolist()


def loss_row(tm: str, results: list[AttackResult]) -> str:
    """The loss-threshold baseline beside the baseline attack (threshold set on its shadows):
    its scores are not kept per query, so means +- std over victims, not pooled."""

    def mean(key: str) -> str:
        values = [r.baselines["loss-threshold"][key] for r in results if key in r.baselines["loss-threshold"]]
        scale = 1.0 if key == "auc" else 100.0
        return f"{np.mean(values) * scale:.3g} ± {np.std(values) * scale:.2g} (victim mean)" if values else "n/m"

    acc = np.mean([r.baselines["loss-threshold"]["accuracy"] for r in results]) * 100
    ids = ", ".join(str(r.victim) for r in sorted(results, key=lambda r: r.victim))
    return (f"| {tm} | loss threshold (baseline) | {ids} (victim mean) | as above | {acc:.1f} | {mean('auc')} | "
            f"{mean('tpr_at_1fpr')} | {mean('tpr_at_01fpr')} |")


def uplink_accuracy(run_dir: str, victims: list[int], data_root: str | None) -> None:
    """Each victim's last uplink (FedAvg: its local model after training) on its training
    records and on its local test records: how far the attacked models overfit."""
    import torch

    from fedattack.attacks.hidden_parts.base import decoded, log_probs
    from fedattack.attacks.view import Observation
    from fedattack.data import load_dataset
    from fedattack.federation.loop import client_data
    from fedattack.federation.rundir import Federation

    torch.set_num_threads(1)
    fed = Federation(run_dir)
    target, dataset = fed.target(data_root), load_dataset(fed.spec.dataset, data_root)
    index = fed.transcript().index
    for v in victims:
        rnd = max(e["round"] for e in index if e["kind"] == "uplink" and e["sender"] == v)
        msgs = fed.transcript().load(client=v, rounds={rnd})
        down = next(m.payload for m in msgs if m.kind == "downlink")
        params = decoded(target, Observation(rnd, down, next(m.payload for m in msgs if m.kind == "uplink")))
        data = client_data(dataset, fed.partition(), v)
        acc = [float((log_probs(target, params, x).argmax(1) == y).float().mean())
               for x, y in ((data.x_train, data.y_train), (data.x_test, data.y_test))]
        print(f"- victim {v}, uplink of round {rnd}: train {acc[0] * 100:.1f}% ({len(data.y_train)}), "
              f"local test {acc[1] * 100:.1f}% ({len(data.y_test)})")


HEADER = ("| threat model | attack | victims | members / non-members | accuracy (%) | AUC | "
          "TPR @ 1% FPR (%) | TPR @ 0.1% FPR (%) |\n|---|---|---|---|---|---|---|---|")
Groups = dict[tuple[str, str], list[AttackResult]]


def row(tm: str, attack: str, rs: list[AttackResult], victims: str) -> str:
    """One table row: the results' queries pooled (one result: that victim alone)."""
    truth, scores = aligned(rs)
    metrics, _ = ranking(truth, scores)
    ci = intervals(truth, scores)
    acc = np.mean([r.metrics["accuracy"] for r in rs])
    return (f"| {tm} | {attack} | {victims} | {int(truth.sum())} / {int((~truth).sum())} | {acc * 100:.1f} | "
            f"{cell(metrics.get('auc'), ci.get('auc'), 1.0, 3)} | "
            f"{cell(metrics.get('tpr_at_1fpr'), ci.get('tpr_at_1fpr'))} | "
            f"{cell(metrics.get('tpr_at_01fpr'), ci.get('tpr_at_01fpr'))} |")


def table(groups: Groups, baseline: str, per_victim: bool) -> None:
    print(HEADER)
    for (tm, attack), rs in sorted(groups.items()):
        ids = ", ".join(str(r.victim) for r in sorted(rs, key=lambda r: r.victim))
        print(row(tm, attack, rs, f"{ids} pooled" if len(rs) > 1 else ids))
        if per_victim and len(rs) > 1:
            for r in sorted(rs, key=lambda r: r.victim):
                print(row(tm, attack, [r], f"{r.victim}"))
        if attack == baseline:
            print(loss_row(tm, rs))


def best_over(groups: Groups, base: list[AttackResult], baseline: str, tms: set[str],
              alpha: float) -> tuple[str, str] | None:
    """The (threat model, attack) among `tms` with the highest pooled TPR at `alpha` on the
    baseline's victims, the baseline itself left out."""
    victims, key = sorted(r.victim for r in base), {0.01: "tpr_at_1fpr", 0.001: "tpr_at_01fpr"}[alpha]
    best, best_tpr = None, -1.0
    for (tm, attack), rs in sorted(groups.items()):
        if tm not in tms or attack == baseline or sorted(r.victim for r in rs) != victims:
            continue
        value = ranking(*aligned(rs))[0].get(key, -1.0)
        if value > best_tpr:
            best, best_tpr = (tm, attack), value
    return best


def ratios(groups: Groups, baseline: str) -> None:
    """Per threat model, and over all threat models against the eavesdropper's baseline."""
    tms = sorted({tm for tm, _ in groups})
    scopes = [(tm, tm, {tm}) for tm in tms] + [("all threat models", "eavesdropper", set(tms))]
    for label, base_tm, among in scopes:
        base = groups.get((base_tm, baseline))
        if not base or (label != base_tm and len(among) < 2):
            continue
        truth, base_scores = aligned(base)
        for alpha, name in ((0.01, "1%"), (0.001, "0.1%")):
            best = best_over(groups, base, baseline, among, alpha)
            if best is None or not measurable(alpha, int((~truth).sum())):
                continue
            best_truth, best_scores = aligned(groups[best])
            if not np.array_equal(truth, best_truth):
                print(f"- {label}: {best[1]} and {baseline} judged different queries; no ratio")
                continue
            point, ci = ratio_interval(truth, best_scores, base_scores, alpha)
            low, high = (f"{c:.2f}x" if np.isfinite(c) else "unbounded" for c in ci)
            print(f"- {label}: best {best[1]} ({best[0]}) / {baseline} ({base_tm}) at {name} FPR = "
                  f"{point:.2f}x (95% paired bootstrap {low} to {high})")


def sweep_results(folder: str) -> list[tuple[dict, float, AttackResult]]:
    """(federation spec, its mean local test accuracy, result) for every result of an experiment
    folder, ordered by method, local epochs, seed, threat model, attack, reconstruction."""
    root, out = Path(folder), []
    for run in (root / "runs").glob("[!.]*"):  # hidden: a cell still being written
        spec = json.loads((run / "federation.json").read_text())["spec"]
        final = json.loads((run / "metrics.json").read_text())["final"]["mean"]
        for r in load([str(d) for d in (root / "results" / run.name).glob("[!.]*") if d.is_dir()]):
            out.append((spec, final, r))
    return sorted(out, key=lambda t: (t[0]["method"], t[0]["recipe"]["epochs"], t[0]["seed"], t[2].threat_model,
                                      t[2].attack, t[2].reconstruction))


def sweep_table(folder: str) -> None:
    """One row per federation x attack result (`fedattack experiment run --out`): method, local
    epochs, seed, the federation's mean local test accuracy, and the result's own metrics with
    its stored bootstrap intervals."""
    print("| method | local epochs | seed | utility (%) | threat model | attack | reconstruction | "
          "members / non-members | accuracy (%) | AUC | TPR @ 1% FPR (%) | TPR @ 0.1% FPR (%) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for spec, final, r in sweep_results(folder):
        m, ci = r.metrics, r.extra["membership"].get("ci", {})
        print(f"| {spec['method']} | {spec['recipe']['epochs']} | {spec['seed']} | {final:.2f} | "
              f"{r.threat_model} | {r.attack} | {r.reconstruction} | {r.extra['membership']['members']} / "
              f"{r.extra['membership']['nonmembers']} | {m['accuracy'] * 100:.1f} | "
              f"{cell(m.get('auc'), ci.get('auc'), 1.0, 3)} | "
              f"{cell(m.get('tpr_at_1fpr'), ci.get('tpr_at_1fpr'))} | "
              f"{cell(m.get('tpr_at_01fpr'), ci.get('tpr_at_01fpr'))} |")


def mean_over_seeds(results: list[AttackResult]) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Each metric's mean over the seeds' results, with a 95% percentile bootstrap interval that
    resamples every seed's members and non-members on their own (the same statistic on each
    draw): the uncertainty of these federations' queries, not of training another federation."""
    samples: list[np.ndarray] = []
    for r in results:
        truth, scores = pooled([r.extra["membership"]["per_query"]])
        samples += [scores[truth], scores[~truth]]
    fns = {"auc": auc_of, **{k: (lambda m, n, axis=-1, a=a: tpr_at_fpr(m, n, a, axis)) for k, a in FPR_LEVELS.items()
                             if all(measurable(a, len(samples[i])) for i in range(1, len(samples), 2))}}
    means, cis = {}, {}
    for i, (key, fn) in enumerate(fns.items()):
        def stat(*xs: np.ndarray, axis: int = -1, fn=fn) -> np.ndarray:  # type: ignore[no-untyped-def]
            return np.mean([fn(xs[j], xs[j + 1], axis=axis) for j in range(0, len(xs), 2)], axis=0)
        means[key] = float(stat(*samples))
        res = stats.bootstrap(samples, stat, n_resamples=1000, method="percentile", vectorized=True, batch=100,
                              random_state=np.random.default_rng([20, i]))
        cis[key] = [float(res.confidence_interval.low), float(res.confidence_interval.high)]
    return means, cis


def seed_means(folder: str) -> None:
    """One row per method x local epochs x threat model x attack x reconstruction seen on more
    than one seed: the seeds' mean utility, balanced accuracy, AUC and TPRs."""
    groups: dict[tuple, list[tuple[dict, float, AttackResult]]] = {}
    for spec, final, r in sweep_results(folder):
        key = (spec["method"], spec["recipe"]["epochs"], r.threat_model, r.attack, r.reconstruction)
        groups.setdefault(key, []).append((spec, final, r))
    print("| method | local epochs | seeds | utility (%) | threat model | attack | reconstruction | "
          "accuracy (%) | AUC | TPR @ 1% FPR (%) | TPR @ 0.1% FPR (%) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (method, epochs, tm, attack, rec), rows in groups.items():
        if len(rows) < 2:
            continue
        means, cis = mean_over_seeds([r for _, _, r in rows])
        seeds = ", ".join(str(spec["seed"]) for spec, _, _ in rows)
        acc, util = (np.mean([r.metrics["accuracy"] for _, _, r in rows]) * 100, np.mean([f for _, f, _ in rows]))
        print(f"| {method} | {epochs} | {seeds} | {util:.2f} | {tm} | {attack} | {rec} | {acc:.1f} | "
              f"{cell(means.get('auc'), cis.get('auc'), 1.0, 3)} | "
              f"{cell(means.get('tpr_at_1fpr'), cis.get('tpr_at_1fpr'))} | "
              f"{cell(means.get('tpr_at_01fpr'), cis.get('tpr_at_01fpr'))} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*")
    parser.add_argument("--sweep", default=None, help="An experiment's output folder: its Table 3 rows.")
    parser.add_argument("--baseline", default="membership")
    parser.add_argument("--per-victim", action="store_true", help="Also one row per victim.")
    parser.add_argument("--run", default=None, help="Also print the victims' uplink accuracy on this run.")
    parser.add_argument("--data-root", default=None)
    args = parser.parse_args()
    if args.sweep:
        sweep_table(args.sweep)
        print()
        seed_means(args.sweep)
        return
    results = load(args.folders)
    if args.run:
        uplink_accuracy(args.run, sorted({r.victim for r in results}), args.data_root)
    groups: Groups = {}
    for r in results:
        groups.setdefault((r.threat_model, r.attack), []).append(r)
    table(groups, args.baseline, args.per_victim)
    print()
    ratios(groups, args.baseline)


if __name__ == "__main__":
    sys.exit(main())
