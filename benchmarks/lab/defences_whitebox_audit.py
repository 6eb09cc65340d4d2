"""docs/defences.md, "Tight audits": the white-box audit of dp-fedavg, one run and many, at claimed
epsilon 1, 3.44 and 8 (delta 1e-5), noise 2x and 5x too small, and every bug of the zoo.

    python benchmarks/lab/defences_whitebox_audit.py [--canaries 1024] [--runs 200] [--workers 2]

The setting: FedAvg on the digits, 4 clients plus the canaries, all sampled every round, 2 rounds,
digits-mlp, batch 16, lr 0.1, dp-fedavg with C = 0.5 and server noise, sigma solved so that the
accountant states the claim. Writes docs/evidence/defences/whitebox-{tightness,detection,zoo}.json;
the render functions below turn them into the page's tables (standard library only at the top).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.lab.evidence import markdown, save  # noqa: E402

HERE = "benchmarks/lab/defences_whitebox_audit.py"
CLAIMS = (1.0, 3.44, 8.0)
DELTA = 1e-5


def spec(defences: tuple[dict[str, Any], ...], rounds: int = 2, seed: int = 0) -> Any:
    from fedattack.federation.spec import FederationSpec
    from fedattack.target import Recipe

    return FederationSpec(method="fedavg", dataset="digits", partition="shards", num_clients=4,
                          model="digits-mlp", rounds=rounds, fraction=1.0, seed=seed, record="all",
                          executor="batched", recipe=Recipe(epochs=1, batch_size=16, lr=0.1), defences=defences)


def sigma_for(claim: float, rounds: int = 2) -> float:
    """The noise multiplier whose accountant (full participation) states `claim`."""
    from scipy.optimize import brentq

    from fedattack.defences import _accountant

    return float(brentq(lambda s: _accountant.epsilon_fixed_size(round(s, 6), 5, 5, rounds, DELTA) - claim,
                        0.3, 200.0, xtol=1e-4))


def dp(sigma: float, **extra: Any) -> tuple[dict[str, Any], ...]:
    return ({"name": "dp-fedavg", "settings": {"clip_norm": 0.5, "noise_multiplier": round(sigma, 4), **extra}},)


def one_run(defences: tuple[dict[str, Any], ...], canaries: int, rounds: int = 2) -> dict[str, Any]:
    from fedattack.audit.whitebox import WhiteBoxSpec, whitebox_audit

    r = whitebox_audit(spec(defences, rounds), WhiteBoxSpec(canaries=canaries))
    b = r["bounds"]
    return {"claimed": r["claimed"]["epsilon"], "steinke": b["steinke"]["epsilon"], "gdp": b["gdp"]["epsilon"],
            "gdp_mu": b["gdp"]["mu"], "claimed_mu": b["claimed_mu"], "canaries": canaries,
            "seconds": r["seconds"]}


def multi_run(defences: tuple[dict[str, Any], ...], runs: int, workers: int) -> dict[str, Any]:
    from fedattack.audit.multirun import multirun_audit

    r = multirun_audit(spec(defences), runs, backend="local", workers=workers)
    e = r["estimate"]
    return {"claimed": r["claimed"]["epsilon"], "claimed_mu": r["claimed_mu"], "runs": runs,
            "bound": r["bound"]["epsilon"], "bound_mu": r["bound"]["mu"], "mu": e["mu"], "mu_low": e["low"],
            "mu_high": e["high"], "estimate": e["epsilon"], "estimate_low": e["epsilon_low"],
            "estimate_high": e["epsilon_high"], "seconds": r["seconds"]}


def measure(canaries: int, runs: int, workers: int) -> None:
    from fedattack.audit.zoo import BUGS, with_bug

    about = {"script": HERE, "date": time.strftime("%Y-%m-%d"), "delta": DELTA, "confidence": 0.95,
             "setting": "fedavg, digits, 4 clients + canaries all sampled, 2 rounds, digits-mlp, C 0.5, server noise"}
    tight, detect = [], []
    for claim in CLAIMS:
        sigma = sigma_for(claim)
        tight.append({"target_claim": claim, "sigma": sigma, "one_run": one_run(dp(sigma), canaries),
                      "multi_run": multi_run(dp(sigma), runs, workers)})
        print(tight[-1], flush=True)
    save("defences/whitebox-tightness", f"{HERE}:render_tightness", tight, **about)
    sigma = sigma_for(CLAIMS[0])
    for k, how in ((2, "multi"), (5, "one")):
        row = one_run(dp(sigma / k), canaries) if how == "one" else multi_run(dp(sigma / k), runs, workers)
        detect.append({"too_small_by": k, "audit": how, "claimed": tight[0]["one_run"]["claimed"],
                       "claimed_mu": tight[0]["one_run"]["claimed_mu"], **{x: v for x, v in row.items()
                                                                              if x not in ("claimed", "claimed_mu")}})
        print(detect[-1], flush=True)
    save("defences/whitebox-detection", f"{HERE}:render_detection", detect, **about)
    zoo = []
    base = dp(8.0)
    for name in BUGS.names():
        cls = BUGS.get(name)
        row = one_run(with_bug(base, name), 256, cls.rounds) if cls.one_run else \
            multi_run(with_bug(dp(2.0), name), runs, workers)
        zoo.append({"bug": name, "wrong": cls.wrong, "one_run": cls.one_run, "rounds": cls.rounds, **row})
        print(zoo[-1], flush=True)
    save("defences/whitebox-zoo", f"{HERE}:render_zoo", zoo, **about)


def render_tightness(data: dict[str, Any]) -> str:
    rows = []
    for r in data["rows"]:
        o, m = r["one_run"], r["multi_run"]
        rows.append([f"{o['claimed']:.2f}", f"{r['sigma']:.2f}",
                     f"{o['gdp']:.2f} ({o['gdp'] / o['claimed']:.2f}x); Steinke {o['steinke']:.2f}",
                     f"{o['canaries']}, {o['seconds']:.0f} s",
                     f"{m['estimate']:.2f} [{m['estimate_low']:.2f}, {m['estimate_high']:.2f}] "
                     f"({m['estimate'] / m['claimed']:.2f}x); bound {m['bound']:.2f}",
                     f"{m['runs']}, {m['seconds']:.0f} s"])
    return markdown(["claimed epsilon", "sigma", "one run: audited epsilon (GDP bound, 95%)", "canaries, time",
                     "many runs: GDP estimate [95% interval]; Clopper-Pearson bound", "runs, time"], rows)


def render_detection(data: dict[str, Any]) -> str:
    rows = []
    for r in data["rows"]:
        if r["audit"] == "one":
            found, seen = r["gdp"], f"one run, {r['canaries']} canaries"
        else:
            found, seen = r["estimate"], f"{r['runs']} runs (estimate, low end {r['estimate_low']:.2f})"
        low = r["gdp"] if r["audit"] == "one" else r["estimate_low"]
        rows.append([f"{r['too_small_by']}x", f"{r['claimed']:.2f}", seen, f"{found:.2f}",
                     "**refuted**" if low > r["claimed"] else "not refuted"])
    return markdown(["noise too small by", "claimed epsilon", "audit", "audited epsilon", "verdict"], rows)


def render_zoo(data: dict[str, Any]) -> str:
    rows = []
    for r in data["rows"]:
        if r["one_run"]:
            found, how, low = r["gdp"], f"one run, {r['canaries']} canaries, {r['rounds']} rounds", r["gdp"]
        else:
            found, low = r["estimate"], r["estimate_low"]
            how = f"{r['runs']} runs (estimate, low end {low:.2f})"
        rows.append([f"`{r['bug']}`", r["wrong"], f"{r['claimed']:.2f}", f"{found:.2f}", how,
                     "**refuted**" if low > r["claimed"] else "not refuted"])
    return markdown(["bug", "what is wrong", "claimed epsilon", "audited epsilon", "audit", "verdict"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--canaries", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    measure(args.canaries, args.runs, args.workers)


if __name__ == "__main__":
    main()
