"""Model inversion (WAFFLe's Table 4) and factor recovery from `fedattack evaluate` results.

Issue #14 asks for both on the personalising WAFFLe. The result files hold every figure (one
JSON per victim, threat model and reconstruction); this prints them as the tables of
docs/lab/reproduction.md, grouped by the victim's subpopulation where the run's partition has two
(multimodal), so the figures on the page come from the files, not from hand copying:

    python benchmarks/lab/waffle_privacy_tables.py RESULTS_DIR...

Inversion: mean ± std over victims (ddof = 0) of PSNR and attack accuracy, on the victim's
classes and on all ten. Factor recovery: per strategy, summed over victims and factorised
layers, how many factors it guesses right against the victim's deployed selection (a factor is
on when b >= 0.5), how many of the truly-on ones it finds, and how many of the victim's
factors differ from the prior mean's on-set: the part of the selection that is private at all.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

COUNTS = ("factors", "true_on", "guessed_on", "correct", "on_found")


def load_results(folders: list[Path]) -> list[dict[str, Any]]:
    """Every per-victim result under the folders (the summaries are skipped)."""
    out = []
    for folder in folders:
        for path in sorted(folder.rglob("*.json")):
            data = json.loads(path.read_text())
            if isinstance(data, dict) and data.get("schema", "").startswith("fedattack.result") \
                    and "victim" in data:
                out.append(data)
    return out


def group_of(result: dict[str, Any]) -> str:
    """The victim's subpopulation in its run's partition ("all" where there is one)."""
    part = Path(result["run"]["path"]) / "partition.json"
    groups = json.loads(part.read_text()).get("groups", []) if part.exists() else []
    return str(groups[result["victim"]]) if groups else "all"


def _pm(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    vals = [scale * v for v in values]
    return f"{statistics.fmean(vals):.{digits}f} ± {statistics.pstdev(vals):.{digits}f}"


def inversion_table(results: list[dict[str, Any]]) -> str:
    rows: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for r in results:
        if r["attack"] == "inversion":
            key = (r["run"]["method"], r["threat_model"], r["reconstruction"], group_of(r))
            rows.setdefault(key, []).append(r)
    lines = ["| method | threat model | reconstruction | victims | utility | PSNR (dB), victim's classes | "
             "attack acc. (%), victim's classes | PSNR, all classes | attack acc. (%), all classes |",
             "|" + "---|" * 9]
    for (method, tm, rec, group), rs in sorted(rows.items()):
        m = [r["metrics"] for r in rs]
        victims = ", ".join(str(r["victim"]) for r in sorted(rs, key=lambda r: r["victim"]))
        lines.append(f"| {method} | {tm} | {rec} | {group}: {victims} | {rs[0]['run']['utility']['mean']:.2f} | "
                     f"{_pm([x['psnr'] for x in m])} | {_pm([x['attack_accuracy'] for x in m], 100, 1)} | "
                     f"{_pm([x['psnr_all_classes'] for x in m])} | "
                     f"{_pm([x['attack_accuracy_all_classes'] for x in m], 100, 1)} |")
    return "\n".join(lines)


def selection_score(result: dict[str, Any]) -> dict[str, int] | None:
    score = result.get("extra", {}).get("reconstruction", {}).get("score", {})
    total = score.get("factor_selection", {}).get("total")
    return {k: int(total[k]) for k in COUNTS} if total else None


def recovery_table(results: list[dict[str, Any]]) -> str:
    """Factor recovery per strategy and group; one attack's results suffice (all score alike)."""
    attack = next((r["attack"] for r in results if selection_score(r)), None)
    sums: dict[tuple[str, str, str], dict[str, int]] = {}
    wrong_prior: dict[tuple[str, str], int] = {}
    shares: dict[tuple[str, str, str], list[float]] = {}
    for r in results:
        score = selection_score(r)
        if score is None or r["attack"] != attack or r["threat_model"] != "eavesdropper":
            continue
        for group in {group_of(r), "all"}:  # each subpopulation, and every victim pooled
            key = (r["run"]["method"], group, r["reconstruction"])
            acc = sums.setdefault(key, {k: 0 for k in (*COUNTS, "victims")})
            for k in COUNTS:
                acc[k] += score[k]
            acc["victims"] += 1
            shares.setdefault(key, []).append(100 * score["correct"] / score["factors"])
            if r["reconstruction"] == "factors-prior-mean":
                wrong_prior[key[:2]] = wrong_prior.get(key[:2], 0) + score["factors"] - score["correct"]
    lines = ["| method | victims | strategy | factors | truly on | guessed on | correct | truly-on found | "
             "correct, per victim (min-max) | differ from the prior mean's set |", "|" + "---|" * 10]
    for key, s in sorted(sums.items(), key=lambda kv: (kv[0][:2], -kv[1]["correct"])):
        method, group, rec = key
        differ = wrong_prior.get((method, group))
        lines.append(f"| {method} | {group} ({s['victims']}) | {rec} | {s['factors']} | {s['true_on']} | "
                     f"{s['guessed_on']} | {s['correct']} ({100 * s['correct'] / s['factors']:.1f}%) | "
                     f"{s['on_found']} ({100 * s['on_found'] / max(s['true_on'], 1):.1f}%) | "
                     f"{min(shares[key]):.1f}-{max(shares[key]):.1f}% | "
                     f"{'' if differ is None else differ} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    args = parser.parse_args()
    results = load_results(args.results)
    print(inversion_table(results), "", recovery_table(results), sep="\n")


if __name__ == "__main__":
    main()
