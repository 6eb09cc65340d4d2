"""The strongest attack of a family, chosen honestly: for each victim, the attack (and
reconstruction strategy) that leaks most on average over the *other* victims.

The maximum of several noisy measurements overstates each one, so the verdict never reports the
best of several attacks as measured on the same victims. As `fedattack evaluate` does for
reconstruction strategies (`attacks/evaluation/selection.py`: results under reconstruction `selected`,
with `extra.selection`), each victim's number comes from the candidate best on the other
victims, leave one out; over the victims, the chosen numbers estimate what an adversary that
picks its attack on past victims gets from the next one. Where evaluate already chose a
strategy honestly, the attack's per-strategy results are not candidates again (they are listed
as tried). With a single victim there is nothing to choose on: the best on it is taken, and the
claim says it is an optimistic pick.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from fedattack.leave_one_out import mean_without
from fedattack.reports.collect import LoadedResult
from fedattack.reports.families import Unit, unit, values

SELECTED = "selected"  # evaluate's honestly selected strategy (attacks/evaluation/selection.py)


@dataclass
class Strongest:
    results: list[LoadedResult]            # one per unit: the candidate chosen for it
    chosen: Counter[str] = field(default_factory=Counter)  # candidate name -> units chosen for
    candidates: int = 1                    # how many it was chosen among
    optimistic: bool = False               # chosen on the same victim it is reported on

    @property
    def lead(self) -> str:
        """The candidate chosen most often."""
        return self.chosen.most_common(1)[0][0] if self.chosen else ""

    def how(self) -> str:
        """'chosen per victim on the other victims among 3: rmia for 4, lira for 1', or ''."""
        if self.candidates < 2:
            return ""
        if self.optimistic:
            return f"the strongest of {self.candidates} on its only victim, an optimistic pick"
        picks = ", ".join(f"{name} for {n}" for name, n in self.chosen.most_common())
        return f"each victim's attack chosen among {self.candidates} on the other victims (leave one out): {picks}"


def pool(groups: dict[tuple[str, str], list[LoadedResult]]) -> dict[tuple[str, str], list[LoadedResult]]:
    """The candidates: an attack whose strategy evaluate selected honestly enters once, as selected."""
    honest = {attack for attack, recon in groups if recon == SELECTED}
    return {k: rs for k, rs in groups.items() if k[0] not in honest or k[1] == SELECTED}


def strongest(candidates: list[tuple[str, list[LoadedResult]]], key: str, lower: bool) -> Strongest:
    """`candidates`: (name, applicable results) strongest first; `key`: the metric that ranks."""
    if len(candidates) == 1:
        name, rs = candidates[0]
        return Strongest(rs, Counter({name: len({unit(r) for r in rs})}))
    by = [(name, {unit(r): r for r in rs}, values(rs, key)) for name, rs in candidates]
    units = sorted({u for _, results, _ in by for u in results}, key=repr)
    if len(units) < 2:
        name, results, _ = by[0]
        return Strongest(list(results.values()), Counter({name: 1}), len(by), optimistic=True)
    out = Strongest([], Counter(), len(by))
    for u in units:
        score = {name: _signed(mean_without(vals, u), lower) for name, results, vals in by if u in results}
        name = max(score, key=lambda n: (score[n], -[b[0] for b in by].index(n)))
        out.results.append(next(results[u] for n, results, _ in by if n == name))
        out.chosen[name] += 1
    return out


def _signed(mean: float, lower: bool) -> float:
    """The mean signed so that larger leaks more (-inf, none, stays the least)."""
    return -mean if lower and math.isfinite(mean) else mean


def strategies(results: list[LoadedResult]) -> Counter[str]:
    """Which strategy evaluate's honest selection chose, over the results that carry one."""
    return Counter(str(sel["chosen"]) for r in results
                   if isinstance(sel := r.result.extra.get("selection"), dict) and sel.get("chosen"))


__all__ = ["SELECTED", "Strongest", "Unit", "pool", "strategies", "strongest"]
