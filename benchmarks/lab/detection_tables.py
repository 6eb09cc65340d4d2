"""docs/active-server.md's detection tables, rendered from their evidence
(docs/evidence/active-server/detection.json, honest-alarms.json), which `write_evidence` makes
from the results folder of `benchmarks/lab/detection.py`. Shares over victims: mean with the 95%
percentile bootstrap interval (`active_server_tables.interval`); false alarms over downlinks:
the count with its exact (Clopper-Pearson) 95% interval of the rate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.lab.active_server_tables import markdown, percent

HERE = "benchmarks/lab/detection_tables.py"
EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "active-server"


def detection(data: dict[str, Any]) -> str:
    """Each attack: what it recovers from victims that do not check (bootstrap interval over
    victims), and how many of those victims' acting downlinks each check (and any of them) would
    refuse, with the exact 95% interval of the rate."""
    names = data["checks"]
    body = []
    for attack in data["attacks"]:
        rows = [r for r in data["rows"] if r["attack"] == attack]
        flags = {n: sum(bool(r["flagged"][n]) for r in rows) for n in names}
        anyone = sum(any(r["flagged"][n] for n in names) for r in rows)
        body.append([attack, str(len(rows)), percent([r["recovered_20"] for r in rows]),
                     percent([r["chance_20"] for r in rows]), *(rate(flags[n], len(rows)) for n in names),
                     rate(anyone, len(rows))])
    return markdown([f"attack ({data.get('setting', 'digits')}, 10 clients a round)", "n victims", "recovered > 20 dB",
                     "chance", *(f"flagged by {n}" for n in names), "flagged by any"], body)


def rate(k: int, n: int, digits: int = 0) -> str:
    """`11 of 12 [62, 100]%`: a count with the exact 95% interval of its rate (`digits` decimals:
    1,000 of 1,000 is [99.6, 100.0]%, which no decimals would print as [100, 100])."""
    low, high = exact(k, n)
    return f"{k:,} of {n:,} [{100 * low:.{digits}f}, {100 * high:.{digits}f}]%"


def alarms(data: dict[str, Any]) -> str:
    """Honest federations: downlinks each check refused (every one a false alarm)."""
    body = []
    for entry in data["methods"]:
        if "not_run" in entry:
            body.append([entry["method"], "-", *(f"not run: {entry['not_run']}" if i == 0 else "-"
                                                 for i, _ in enumerate(data["checks"]))])
            continue
        if not entry["checked"]:
            body.append([entry["method"], str(entry["rounds"]), *("no downlink on the wire" for _ in data["checks"])])
            continue
        cells = []
        for n in data["checks"]:
            refused, checked = entry["refused"][n], entry["checked"]
            low, high = exact(refused, checked)
            cells.append(f"{refused} of {checked} [{100 * low:.1f}, {100 * high:.1f}]%")
        body.append([entry["method"], f"{entry['rounds']} ({entry['returning']} downlinks to a returning client)",
                     *cells])
    return markdown([f"honest method ({data.get('setting', 'digits')})", "rounds",
                     *(f"{n} false alarms" for n in data["checks"])], body)


def exact(k: int, n: int) -> tuple[float, float]:
    """The Clopper-Pearson 95% interval of a rate seen k times in n."""
    from scipy.stats import beta

    low = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return low, high


def write_evidence(out: Path, setting: str = "digits") -> None:
    """The per-victim rows and per-federation counts, from `detection.py`'s results folder (the
    digits' files keep their first names; another setting's carry its name)."""
    attacks = [json.loads(p.read_text()) for p in sorted((out / "attacks").glob("*.json"))]
    names = sorted({n for a in attacks for r in a["victims"] for n in r["flagged"]})
    rows = [{"attack": a["attack"], "victim": r["victim"], "round": r["round"],
             "recovered_20": round(r["recovered_20"], 4), "chance_20": round(r["chance_20"], 4),
             "flagged": {n: r["flagged"][n] is not None for n in names},
             "why": {n: r["flagged"][n] for n in names if r["flagged"][n]}} for a in attacks for r in a["victims"]]
    seconds = {a["attack"]: [round(a["seconds"]), round(a["cpu_seconds"])] for a in attacks}
    suffix, flag = ("", "") if setting == "digits" else (f"-{setting}", f" --setting {setting}")
    named = {} if setting == "digits" else {"setting": setting, "peak_rss_mib": max(a.get("peak_rss_mib", 0)
                                                                                  for a in attacks)}
    EVIDENCE.mkdir(parents=True, exist_ok=True)
    (EVIDENCE / f"detection{suffix}.json").write_text(json.dumps({
        "render": f"{HERE}:detection", "command": f"python benchmarks/lab/detection.py attacks{flag} --out DIR; "
        f"python benchmarks/lab/detection.py evidence{flag} --out DIR", **named, "checks": names,
        "attacks": [a["attack"] for a in attacks], "wall_and_cpu_seconds": seconds, "rows": rows}, indent=1) + "\n")
    honest = [json.loads(p.read_text()) for p in sorted((out / "honest").glob("*.json"))]
    skipped = [{"method": h["method"], "rounds": h["rounds"], "not_run": h["not_run"]} for h in honest if "not_run" in h]
    honest = [h for h in honest if "not_run" not in h]
    methods = [{"method": h["method"], "rounds": h["rounds"],
                "checked": next(iter(h["checks"].values()))["checked"],
                "returning": next(iter(h["checks"].values()))["returning"],
                "refused": {n: len(c["refused"]) for n, c in h["checks"].items()},
                "refusals": {n: c["refused"][:20] for n, c in h["checks"].items()},
                "wall_and_cpu_seconds": [round(h["seconds"]), round(h["cpu_seconds"])]} for h in honest]
    if not honest:
        return
    (EVIDENCE / f"honest-alarms{suffix}.json").write_text(json.dumps({
        "render": f"{HERE}:alarms", "command": f"python benchmarks/lab/detection.py honest{flag} --out DIR; "
        f"python benchmarks/lab/detection.py evidence{flag} --out DIR", **({"setting": setting} if suffix else {}),
        "checks": names, "methods": sorted(methods + skipped, key=lambda m: m["method"])}, indent=1) + "\n")


def loki_scale(data: dict[str, Any]) -> str:
    """One `loki` round through the secure sum: the share of each client's training images read
    above 20 dB, over every client of the round."""
    body = []
    for cell in data["cells"]:
        rows = cell["rows"]
        checked = cell.get("real_protocol")
        real = "-" if checked is None else (f"{percent(list(checked['shares'].values()))}; the same share for "
                                            f"{checked['same_share']} of {checked['victims']} victims")
        judged = cell.get("checks")
        flags = "-" if judged is None else ", ".join(f"{n} {rate(c['refused'], c['of'], 1)}" for n, c in judged.items())
        body.append([cell["dataset"], f"{cell['clients']:,}", str(len(rows)), str(rows[0]["train"]), str(cell["bins"]),
                     percent([r["recovered_20"] for r in rows]), percent([r["chance_20"] for r in rows]),
                     f"{cell['cpu_seconds']:,}", real, flags, honest_alarms(cell.get("honest"))])
    return markdown(["dataset", "clients a round", "n victims", "images a client trains on", "bins a client",
                     "recovered > 20 dB", "chance", "CPU seconds (the clients, after the calibration)", "real protocol (masks) on this round: recovered > 20 dB",
                     "clients of the round each registered check refuses",
                     "false alarms of each check on honest rounds of this federation (downlinks)"], body)


def honest_alarms(honest: dict[str, Any] | None) -> str:
    """`3 rounds (3,000 downlinks, 2,000 to a returning client): check k of n [low, high]%, ...`"""
    if honest is None:
        return "-"
    checks = honest["checks"]
    n = next(iter(checks.values()))["of"]
    rates = [f"{name} {rate(c['refused'], c['of'], 2)}" for name, c in checks.items()]  # 0 of 20,000: [0, 0.02]
    return (f"{honest['rounds']} rounds ({n:,} downlinks, {honest['returning']:,} to a returning client): "
            + ", ".join(rates))
