"""A federation's risk level, from its claims, by thresholds the report prints beside it.

Only realistic adversaries count: an upper bound (the oracle, handed the victim's private
state on purpose) says how far an attack could go, not what this federation's wire gives away.
The levels, highest first, each judged on the lower end of a 95% interval (the leak the data
supports, not the point estimate):
- high: a record-level leak: at least `HIGH_SHARE` of a client's training images recovered above
  20 dB, or members found at `HIGH_RATIO` times chance or more at an FPR of 1% or below, or
  a membership AUC of at least `HIGH_AUC`;
- moderate: any attack's leak is shown (above chance), model inversion's class images included,
  or a membership score below chance whose sign is flipped (reversed, it finds members);
- low: every attack's interval holds chance (or lies below it as an artefact of the query
  sets), each from at least `numbers.FEW` victims;
- undetermined: anything else (too few victims, no interval).
"""

from __future__ import annotations

from dataclasses import dataclass

from fedattack.reports.claims import Claim
from fedattack.reports.numbers import FEW

HIGH_SHARE = 0.10
HIGH_RATIO = 10.0
HIGH_AUC = 0.75
LOW_FPR = 0.01
LEVELS = ("high", "moderate", "low", "undetermined")


@dataclass(frozen=True)
class Risk:
    level: str
    because: Claim | None  # the claim that set it (None for low)


def thresholds() -> str:
    """The levels as the report prints them."""
    return (f"Risk levels, judged on the lower end of each 95% interval and on realistic adversaries only "
            f"(not an upper bound): high: at least {HIGH_SHARE:.0%} of a client's training images recovered "
            f"above 20 dB, or members found at {HIGH_RATIO:g}x chance or more at an FPR of {LOW_FPR:.0%} or "
            f"below, or a membership AUC of at least {HIGH_AUC:g}; moderate: any attack shown above chance "
            f"(model inversion's class images included), or a membership score below chance with its sign "
            f"flipped; low: every attack's interval holds chance, each from at least {FEW} victims; "
            f"undetermined: anything else.")


def high(claim: Claim) -> bool:
    if claim.status != "shown":
        return False
    for s in claim.numbers:
        low = s.interval.low if s.interval.has_interval else float("nan")
        if s.reading.key == "share_recovered" and low >= HIGH_SHARE:
            return True
        if s.reading.key == "auc" and low >= HIGH_AUC:
            return True
    rt = claim.rates
    if rt is not None and rt.alpha <= LOW_FPR and claim.numbers and claim.numbers[0].interval.has_interval:
        return claim.numbers[0].interval.low >= HIGH_RATIO * rt.mean_chance
    return False


def risk(claims: list[Claim]) -> Risk:
    real = [c for c in claims if not c.upper_bound and c.candidates]
    for c in real:
        if high(c):
            return Risk("high", c)
    shown = [c for c in real if c.status == "shown" or (c.status == "below chance" and c.why_below == "flipped")]
    if shown:
        return Risk("moderate", shown[0])
    unsure = [c for c in real if not settled(c)]
    if real and not unsure:
        return Risk("low", None)
    return Risk("undetermined", unsure[0] if unsure else None)


def settled(claim: Claim) -> bool:
    """Nothing shown, and enough victims to say so: holds chance, or lies below it for a reason
    that is not a leak (an artefact of the query sets)."""
    enough = bool(claim.numbers) and min(s.interval.n for s in claim.numbers) >= FEW
    return enough and (claim.status == "not shown" or (claim.status == "below chance" and
                                                          claim.why_below == "artefact"))
