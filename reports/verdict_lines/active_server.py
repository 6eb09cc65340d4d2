"""The lines of a federation whose server acted during training (`AttackResult.run["active_adversary"]`):
marked as such, after the passive lines, with a risk level of their own."""

from __future__ import annotations

from fedattack.reports.absolute_section import finding
from fedattack.reports.claims import Claim
from fedattack.reports.risk import risk
from fedattack.reports.verdict_lines.base import VERDICT_LINES, Federation, Level, LineSource, Part
from fedattack.reports.verdict_lines.passive import threat_lines


@VERDICT_LINES.register("active-server")
class ActiveServer(LineSource):
    """A server that built what it broadcast (imprint, trap weights, ...) in the rounds it chose."""

    order = 20

    def takes(self, claim: Claim) -> bool:
        return claim.adversary != ""

    def part(self, fed: Federation, claims: list[Claim]) -> Part:
        out = Part()
        for adversary in sorted({c.adversary for c in claims}):
            mine = [c for c in claims if c.adversary == adversary]
            lines = threat_lines(mine, f"*{adversary[:1].upper()}{adversary[1:]}*: ")
            r = risk(mine)
            out.levels.append(Level(r, f"an {adversary}", finding(r), named=True))
            out.lines += lines.lines
            out.bound += lines.bound
        return out
