"""The absolute verdict: what each adversary learns from each audited federation.

One `Claim` per (federation, adversary, threat model, attack family): the strongest attack of
the family (and its reconstruction strategy) leads, with its numbers, how many victims they
rest on, how many were not applicable and why, and one status decided by one rule
(`status_of`): the leak is shown (the interval's lower end above chance), not shown (the
interval holds chance), below chance (explained where the results allow), or undetermined (no
interval). The same rule over the numbers that measure this client's data alone (`Metric.client`)
gives `client_status`, which is what the risk level counts: a family whose own metrics say nothing
about the client (model inversion's class representatives) states beside them the client measure
its results declare (the class mix beyond the population's). Comparisons between methods are a
separate section (`verdict.py`); this one needs only one federation.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from fedattack.intervals import Interval, binomial_interval, mean_interval
from fedattack.reports.collect import LoadedResult
from fedattack.reports.families import (
    Family,
    Judge,
    Rates,
    describe,
    family_of,
    inversion_chance,
    judge,
    membership_rates,
    metric_reading,
    trials,
    unit,
    units_word,
    values,
)
from fedattack.reports.identity import adversary_label
from fedattack.reports.leakage import Reading, merged
from fedattack.reports.strongest import Strongest, pool, strongest

# shown: an interval lies on the leaking side of chance; not shown: they hold chance; below chance;
# undetermined: a number has no interval; unjudged: no chance level to judge by (a new attack's metric)
STATUSES = ("shown", "not shown", "below chance", "undetermined", "unjudged")


@dataclass
class Candidate:
    """One attack through one reconstruction strategy, within a family."""

    attack: str
    reconstruction: str
    results: list[LoadedResult]          # applicable only
    rank: float                          # its mean on the family's ranking metric (NaN: none)

    @property
    def name(self) -> str:
        return self.attack if self.reconstruction in ("none", "") else f"{self.attack} ({self.reconstruction})"


@dataclass
class Shown:
    """One number a claim states: what it is, and its interval over units."""

    reading: Reading
    interval: Interval
    chance: float | None = None          # in stored units


@dataclass
class Claim:
    federation: str
    data: str
    adversary: str                       # '' for passive adversaries
    threat: str
    observes: str
    upper_bound: bool
    family: Family
    candidates: list[Candidate]          # strongest first
    units: int                           # every unit the family's results were asked about
    not_applicable: dict[str, int] = field(default_factory=dict)   # reason -> units
    numbers: list[Shown] = field(default_factory=list)             # the first decides the status
    status: str = "undetermined"
    client_status: str = "none"          # the rule over the client measures alone ('none': it has none)
    why_below: str = ""                  # 'flipped', 'artefact' or 'unclear' (`explain_below`)
    baseline: Interval | None = None     # the loss-threshold baseline's AUC on the same queries
    judge: Judge | None = None
    rates: Rates | None = None
    units_word: str = "victims"          # what the chosen attack's n counts
    strongest: Strongest | None = None   # how the strongest was chosen (`strongest.py`)
    pick: Candidate | None = None        # the strongest: per unit the candidate chosen for it
    acts: bool = False                   # its threat model acts for one round (a what-if, not the run's wire)

    @property
    def chosen(self) -> Candidate | None:
        """The strongest attack as the claim states it: named after the candidate chosen for
        most victims, holding each victim's chosen result."""
        return self.pick


def build_claims(results: list[LoadedResult]) -> list[Claim]:
    buckets: dict[tuple[str, ...], list[LoadedResult]] = defaultdict(list)
    for r in results:
        buckets[claim_key(r)].append(r)
    return [make_claim(key, rs) for key, rs in sorted(buckets.items(), key=lambda kv: _order(kv[0], kv[1]))]


def claim_key(r: LoadedResult) -> tuple[str, ...]:
    data = f"{r.run.dataset} ({r.run.partition})"
    return (data, r.run.federation, adversary_label(r.run.adversary), r.result.threat_model, family_of(r).key)


def _order(key: tuple[str, ...], rs: list[LoadedResult]) -> tuple[object, ...]:
    data, federation, adversary, threat, family = key
    return (data, federation, adversary, any(r.result.upper_bound for r in rs), threat, family)


def make_claim(key: tuple[str, ...], rs: list[LoadedResult]) -> Claim:
    data, federation, adversary, threat, _ = key
    family = family_of(rs[0])
    first = rs[0].result.extra.get("threat_model")
    claim = Claim(federation, data, adversary, threat, describe(first), any(r.result.upper_bound for r in rs),
                  family, candidates(rs, family), len({unit(r) for r in rs}))
    claim.acts = bool((first or {}).get("acts"))
    choose(claim, rs)
    chosen = claim.chosen
    used = {unit(r) for r in chosen.results} if chosen else set()
    reasons = Counter(r.result.note or "no reason recorded" for r in rs
                      if not r.result.applicable and unit(r) not in used)
    claim.not_applicable = dict(reasons.most_common())
    if chosen is not None:
        claim.units_word = units_word(chosen.results)
        fill(claim, chosen)
    return claim


def candidates(rs: list[LoadedResult], family: Family) -> list[Candidate]:
    by: dict[tuple[str, str], list[LoadedResult]] = defaultdict(list)
    for r in rs:
        if r.result.applicable:
            by[(r.result.attack, r.result.reconstruction)].append(r)
    out = []
    for (attack, recon), members in by.items():
        key = next((k for k in family.rank if values(members, k)), family.key)
        found = list(values(members, key).values())
        out.append(Candidate(attack, recon, members, sum(found) / len(found) if found else math.nan))
    lower = metric_reading(rs, family.key).leak == "lower"

    def strength(c: Candidate) -> tuple[float, str]:
        m = c.rank if math.isfinite(c.rank) else -math.inf
        return (m if lower else -m, c.name)

    return sorted(out, key=strength)


def choose(claim: Claim, rs: list[LoadedResult]) -> None:
    """The strongest attack of the family, chosen per victim on the other victims (`strongest.py`)."""
    if not claim.candidates:
        return
    honest = pool({(c.attack, c.reconstruction): c.results for c in claim.candidates})
    ranked = [c for c in claim.candidates if (c.attack, c.reconstruction) in honest]
    key = next((k for k in claim.family.rank if any(values(c.results, k) for c in ranked)), claim.family.key)
    lower = metric_reading(rs, claim.family.key).leak == "lower"
    st = strongest([(c.name, c.results) for c in ranked], key, lower)
    lead = next(c for c in ranked if c.name == st.lead)
    claim.strongest = st
    found = list(values(st.results, key).values())
    claim.pick = Candidate(lead.attack, lead.reconstruction, st.results, sum(found) / len(found) if found else math.nan)


def estimate(results: list[LoadedResult], key: str) -> Interval:
    """The mean over units and its interval; units that all scored the same, on a rate whose
    counts the results record, get the exact interval of the pooled count instead."""
    found = values(results, key)
    s = mean_interval([found[k] for k in sorted(found, key=repr)])
    counted = trials(results, key)
    if s.degenerate and counted is not None:
        n, what = counted
        total = sum(n[k] for k in found if k in n)
        hits = round(sum(found[k] * n[k] for k in found if k in n))
        return binomial_interval(hits, total, s.n,
                                 f"every one scored the same: exact binomial interval over their {total} {what}")
    return s


def rate_interval(rt: Rates) -> Interval:
    s = mean_interval([rt.tpr[k] for k in sorted(rt.tpr, key=repr)])
    if s.degenerate:
        total, hits = sum(rt.members.values()), round(sum(rt.tpr[k] * rt.members[k] for k in rt.tpr))
        return binomial_interval(hits, total, s.n,
                                 f"every one scored the same: exact binomial interval over their {total} members")
    return s


def fill(claim: Claim, chosen: Candidate) -> None:
    """The chosen attack's numbers, in the order a sentence states them, and the claim's status."""
    rs, family = chosen.results, claim.family
    if family.key == "auc":
        claim.rates = membership_rates(rs)
        if claim.rates is not None:
            claim.numbers.append(Shown(claim.rates.reading(), rate_interval(claim.rates), claim.rates.mean_chance))
    shown_keys = [k for k in (*family.rank, family.key) if values(rs, k)]
    if claim.rates is None and not any(metric_reading(rs, k).client for k in shown_keys):
        shown_keys += client_measures(rs)
    for key in dict.fromkeys(shown_keys):
        m = metric_reading(rs, key)
        chance = inversion_chance(rs) if key == "attack_accuracy" else m.chance
        chance = 0.0 if key == "share_recovered" else chance
        chance = measured_chance(rs, key) if chance is None else chance
        claim.numbers.append(Shown(m, estimate(rs, key), chance))
    if any(k == "attack_accuracy" for k in shown_keys):
        claim.judge = judge(rs)
    claim.status = status_of(claim.numbers)
    about = [n for n in claim.numbers if n.reading.client]
    claim.client_status = status_of(about) if about else "none"
    if claim.status == "below chance":
        claim.why_below, claim.baseline = explain_below(rs)


def measured_chance(rs: list[LoadedResult], key: str) -> float | None:
    """Chance as the attacks measured it (a result's `chance` baseline: the acting server's readout
    scores public images that were never trained on), where a metric declares no fixed level;
    the mean over victims, and only where every victim measured it."""
    found = [b.get(key) for r in rs if isinstance(b := r.result.baselines.get("chance"), dict)]
    if len(found) != len(rs) or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in found):
        return None
    return sum(float(v) for v in found if v is not None) / len(found)


def client_measures(rs: list[LoadedResult]) -> list[str]:
    """The headline metrics the results declare as measures of the client's data, with values."""
    declared = merged(r.result for r in rs)
    return [k for k, d in declared.items() if d.get("client") is not False and d.get("headline", True)
            and d.get("leak") in ("higher", "lower") and values(rs, k)]


def status_of(numbers: Iterable[Shown]) -> str:
    """The one rule: shown if any number's interval lies on the leaking side of its chance
    level; else not shown if every interval holds chance; below chance if one lies on the other
    side; undetermined without an interval (or a chance level to judge by)."""
    sides = [side(s) for s in numbers]
    if "above" in sides:
        return "shown"
    if "below" in sides:
        return "below chance"
    if "holds" in sides and "none" not in sides:
        return "not shown"
    return "undetermined" if "none" in sides or not sides else "unjudged"


def side(s: Shown) -> str:
    """Where a number lies against its chance level: above (the leaking side), holds, below, none
    (no interval), or no chance (none to judge by)."""
    i, leak_higher = s.interval, s.reading.leak != "lower"
    if s.chance is None or not math.isfinite(s.chance):
        return "no chance"
    if not i.has_interval:
        return "none"
    if i.above(s.chance) if leak_higher else i.below(s.chance):
        return "above"
    if i.below(s.chance) if leak_higher else i.above(s.chance):
        return "below"
    return "holds"


def explain_below(rs: list[LoadedResult]) -> tuple[str, Interval | None]:
    """Why members score below non-members, as far as the same queries' loss-threshold baseline
    can tell (it ranks members by the attacked model's own loss, which training on them lowers):
    'flipped' (the baseline is above chance: the attack's learnt rule points the wrong way),
    'artefact' (the baseline is below chance too), or 'unclear' (it holds chance, or is absent)."""
    base = {unit(r): float(b["auc"]) for r in rs if isinstance(b := r.result.baselines.get("loss-threshold"), dict)
            and isinstance(b.get("auc"), (int, float))}
    s = mean_interval([base[k] for k in sorted(base, key=repr)])
    if not s.has_interval:
        return "unclear", None
    return ("flipped" if s.above(0.5) else "artefact" if s.below(0.5) else "unclear"), s
