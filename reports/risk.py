"""A federation's risk level, from its claims, by thresholds the report prints beside it.

Only realistic adversaries count: an upper bound (the oracle, handed the victim's private
state on purpose) says how far an attack could go, not what this federation's wire gives away.
And an attack counts only through what it learns about this client's data (`Claim.client_status`,
from the metrics declared `client`): its members identified, its images recovered, its class mix
inferred beyond the population's. A class representative that model inversion rebuilds from a
model of the whole population says nothing about the client, so it sets no level.
The levels, highest first, each judged on the lower end of a 95% interval (the leak the data
supports, not the point estimate):
- high: a record-level leak: at least `HIGH_SHARE` of a client's training images recovered above
  20 dB, or members found at `HIGH_RATIO` times chance or more at an FPR of 1% or below, or
  a membership AUC of at least `HIGH_AUC`;
- moderate: any measure of the client's data shown above chance (model inversion's: the class
  mix beyond the population's), or a membership score below chance whose sign is flipped
  (reversed, it finds members);
- low: every client measure's interval holds chance (or lies below it as an artefact of the
  query sets), each from at least `numbers.FEW` victims;
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
# the share of a client's training images recovered above 20 dB: update inversion's, and the
# acting server's readout's
RECOVERED = ("share_recovered", "recovered_20")


@dataclass(frozen=True)
class Risk:
    level: str
    because: Claim | None  # the claim that set it (None for low)


def thresholds() -> str:
    """The levels as the report prints them."""
    return (f"Risk levels, judged on the lower end of each 95% interval, on realistic adversaries only "
            f"(not an upper bound), and on what an attack learns about a client's data (its members, its "
            f"images, its class mix beyond the population's; not class images any model of the population "
            f"gives): high: at least {HIGH_SHARE:.0%} of a client's training images recovered above 20 dB, or "
            f"members found at {HIGH_RATIO:g}x chance or more at an FPR of {LOW_FPR:.0%} or below, or a "
            f"membership AUC of at least {HIGH_AUC:g}; moderate: any of these measures shown above chance, or "
            f"a membership score below chance with its sign flipped; low: every such interval holds chance, "
            f"each from at least {FEW} victims; undetermined: anything else.")


def high(claim: Claim) -> bool:
    if claim.client_status != "shown":
        return False
    for s in (n for n in claim.numbers if n.reading.client):
        low = s.interval.low if s.interval.has_interval else float("nan")
        if s.reading.key in RECOVERED and low >= HIGH_SHARE:
            return True
        if s.reading.key == "auc" and low >= HIGH_AUC:
            return True
    rt = claim.rates
    if rt is not None and rt.alpha <= LOW_FPR and claim.numbers and claim.numbers[0].interval.has_interval:
        return claim.numbers[0].interval.low >= HIGH_RATIO * rt.mean_chance
    return False


def counts(claim: Claim) -> bool:
    """Whether the claim counts toward the level: a realistic adversary's, with a client measure."""
    return not claim.upper_bound and bool(claim.candidates) and claim.client_status != "none"


def risk(claims: list[Claim]) -> Risk:
    real = [c for c in claims if counts(c)]
    for c in real:
        if high(c):
            return Risk("high", c)
    shown = [c for c in real if c.client_status == "shown" or
             (c.client_status == "below chance" and c.why_below == "flipped")]
    if shown:
        return Risk("moderate", shown[0])
    unsure = [c for c in real if not settled(c)]
    if real and not unsure:
        return Risk("low", None)
    return Risk("undetermined", unsure[0] if unsure else None)


def settled(claim: Claim) -> bool:
    """Nothing shown, and enough victims to say so: holds chance, or lies below it for a reason
    that is not a leak (an artefact of the query sets)."""
    about = [s for s in claim.numbers if s.reading.client]
    enough = bool(about) and min(s.interval.n for s in about) >= FEW
    return enough and (claim.client_status == "not shown" or (claim.client_status == "below chance" and
                                                                 claim.why_below == "artefact"))
