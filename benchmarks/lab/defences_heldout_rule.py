"""docs/defences.md, "Many runs": how the multi-run audit chooses its threshold, searched on ideal
scores only (never on measured runs).

    python benchmarks/lab/defences_heldout_rule.py     # about 3 CPU minutes -> evidence

Scores drawn as the exact statistic of a correct dp-fedavg whose claim is exact (N(+-mu/2, 1),
mu the claim's, a fair coin per run; seeds 0-19), bounded by `heldout`'s Clopper-Pearson bound at
95% at the tested runs, the threshold chosen on the choosing runs by one of three rules:
  quantiles  the rule until 2026-12-03: of the choosing runs' 2%, ..., 98% pooled quantiles (both
             directions), the one whose error counts, projected onto the tested runs, give the
             largest mu bound;
  median     the choosing runs' pooled median, the direction of their means;
  fitted     a Gaussian fit of the choosing runs (two means, a pooled spread), the threshold
             whose fitted rates give the largest mu bound (`heldout.choose` now).
Each rule at the share of choosing runs 0.25 (the old fixed share), and the fitted rule at 0.05
and 0.10 too. The cell: the bound as a share of the claim, median and minimum over the 20 seeds,
and how many seeds reach 0.8x.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.lab.evidence import markdown, save  # noqa: E402

HERE = "benchmarks/lab/defences_heldout_rule.py"
CELLS = ((1.0, 80_000), (3.44, 18_000), (8.0, 6_000), (3.44, 9_000), (8.0, 3_000))
TRIALS = ((("quantiles", 0.25), ("median", 0.25), ("fitted", 0.25), ("fitted", 0.10), ("fitted", 0.05)))
SEEDS = range(20)
DELTA, CONFIDENCE = 1e-5, 0.95


def by_quantiles(c_in: Any, c_out: Any, n_in: int, n_out: int, alpha: float) -> tuple[int, float]:
    import numpy as np

    from fedattack.audit import heldout as h

    best: tuple[float, int, float] = (-1.0, 1, float("inf"))
    for direction in (1, -1):
        pooled = direction * np.concatenate([c_in, c_out])
        for t in np.quantile(pooled, [q / 50 for q in range(1, 50)]):
            fp, fn = h.errors(c_in, c_out, direction, float(t))
            mu = h.rate_bounds(fp / len(c_out) * n_out, n_out, fn / len(c_in) * n_in, n_in, DELTA, alpha)["mu"]
            if mu > best[0]:
                best = (mu, direction, float(t))
    return best[1], best[2]


def bounded(scores: Any, inside: Any, seed: int, rule: str, share: float) -> float:
    import numpy as np

    from fedattack.audit import heldout as h
    from fedattack.audit.gdp import epsilon_of_mu

    alpha, pick = 1 - CONFIDENCE, h.choosing(len(scores), seed, share)
    c_in, c_out = scores[pick & inside], scores[pick & ~inside]
    t_in, t_out = scores[~pick & inside], scores[~pick & ~inside]
    if rule == "quantiles":
        d, t = by_quantiles(c_in, c_out, len(t_in), len(t_out), alpha)
    elif rule == "median":
        d = 1 if c_in.mean() >= c_out.mean() else -1
        t = float(np.median(d * np.concatenate([c_in, c_out])))
    else:
        d, t = h.choose(c_in, c_out, len(t_in), len(t_out), DELTA, alpha)
    fp, fn = h.errors(t_in, t_out, d, t)
    return epsilon_of_mu(h.rate_bounds(fp, len(t_out), fn, len(t_in), DELTA, alpha)["mu"], DELTA)


def measure() -> list[dict[str, Any]]:
    import numpy as np

    from fedattack.audit.gdp import mu_of_epsilon

    rows = []
    for claim, runs in CELLS:
        mu = mu_of_epsilon(claim, DELTA)
        draws = []
        for seed in SEEDS:
            gen = np.random.default_rng(seed)
            inside = gen.random(runs) < 0.5
            draws.append((gen.normal(size=runs) + np.where(inside, mu / 2, -mu / 2), inside, seed))
        for rule, share in TRIALS:
            ratios = [bounded(s, i, seed, rule, share) / claim for s, i, seed in draws]
            rows.append({"claim": claim, "runs": runs, "rule": rule, "share": share,
                         "ratios": [round(r, 4) for r in ratios]})
            print(rows[-1]["claim"], runs, rule, share, round(float(np.median(ratios)), 3), flush=True)
    return rows


def render(data: dict[str, Any]) -> str:
    import statistics

    trials = list(dict.fromkeys((r["rule"], r["share"]) for r in data["rows"]))
    cells = list(dict.fromkeys((r["claim"], r["runs"]) for r in data["rows"]))
    at = {(r["claim"], r["runs"], r["rule"], r["share"]): r["ratios"] for r in data["rows"]}
    lines = []
    for rule, share in trials:
        line = [f"{rule}, {share:.2f} choosing"]
        for claim, runs in cells:
            v = at[(claim, runs, rule, share)]
            line.append(f"{statistics.median(v):.2f}x (min {min(v):.2f}; {sum(x >= 0.8 for x in v)} of {len(v)})")
        lines.append(line)
    return markdown(["rule, share", *(f"claim {c:g}, {n:,} runs" for c, n in cells)], lines)


def main() -> None:
    save("defences/heldout-rule-search", f"{HERE}:render", measure(), script=HERE, date=time.strftime("%Y-%m-%d"),
         delta=DELTA, confidence=CONFIDENCE, seeds="0-19", scores="ideal: N(+-mu/2, 1), mu the claim's (exact)")


if __name__ == "__main__":
    main()
