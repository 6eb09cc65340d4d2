"""The passive adversaries' lines: per threat model, what the strongest attack of each family
learns, and the risk level they set (an upper bound's lines folded, and setting no level)."""

from __future__ import annotations

from fedattack.reports.absolute_section import finding, line
from fedattack.reports.claims import Claim
from fedattack.reports.risk import risk
from fedattack.reports.verdict_lines.base import VERDICT_LINES, Federation, Level, LineSource, Part


def by_threat(claims: list[Claim]) -> list[list[Claim]]:
    """The claims grouped by threat model, in the order they come."""
    groups: dict[str, list[Claim]] = {}
    for c in claims:
        groups.setdefault(c.threat, []).append(c)
    return list(groups.values())


def threat_lines(claims: list[Claim], prefix: str = "") -> Part:
    """One line per threat model, realistic or upper bound; the level from the realistic ones."""
    part = Part()
    for group in by_threat(claims):
        (part.bound if group[0].upper_bound else part.lines).append(prefix + line(group))
    return part


@VERDICT_LINES.register("passive")
class Passive(LineSource):
    """Adversaries that read the wire of a federation whose server did not act."""

    order = 10
    fallback = True  # a new kind of adversary takes its own claims first

    def takes(self, claim: Claim) -> bool:
        return claim.adversary == ""

    def part(self, fed: Federation, claims: list[Claim]) -> Part:
        if not claims:
            return Part()
        out = threat_lines(claims)
        r = risk(claims)
        out.levels.append(Level(r, "passive adversaries", finding(r)))
        return out
