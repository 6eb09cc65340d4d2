"""What a kind of verdict line declares, and the registry that puts the kinds together.

The verdict states, per audited federation, a head (its risk levels, the finding to act on, its
utility) and lines under it. Each kind of line is one `LineSource` in a file of this folder that
registers itself: the passive adversaries' lines (`passive.py`), a server that acted during
training (`active_server.py`), what was not attacked (`not_attacked.py`). A new kind of adversary
or audit adds one file here and edits nobody else's: its source says which claims it states
(`takes`: the sources are asked in `order`, the first that takes a claim states it; a `fallback`
source, the passive lines, is asked only after every other) and returns a `Part`: levels for the
head, lines under it, and lines of an upper bound (folded away in HTML), placed by `order`.
A source may state no claim at all and read the federation's results or runs instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from fedattack.registry import Registry
from fedattack.reports.claims import Claim
from fedattack.reports.collect import LoadedResult
from fedattack.reports.risk import LEVELS, Risk


@dataclass(frozen=True)
class Federation:
    """One audited federation, as every source sees it."""

    data: str                     # "digits (iid)"
    name: str                     # the federation's label: method, settings, defences
    claims: list[Claim]           # every claim about it, whoever states it
    results: list[LoadedResult]   # every result about it


@dataclass(frozen=True)
class Level:
    """A risk level for the head: against whom, and the finding that set it, in words."""

    risk: Risk
    against: str = ""             # 'passive adversaries', 'an active server: imprint(...)'
    finding: str = ""             # what to act on, when this level is the federation's highest
    named: bool = False           # say against whom even when it is the head's only level


@dataclass
class Part:
    levels: list[Level] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)    # realistic adversaries, shown
    bound: list[str] = field(default_factory=list)    # upper bounds, folded


class LineSource:
    """One kind of verdict line. `order`: lower comes first, in the head and under it. `fallback`:
    takes claims only once every other source has declined them."""

    order: ClassVar[int] = 50
    fallback: ClassVar[bool] = False

    def takes(self, claim: Claim) -> bool:
        """Whether this source states `claim` (no later source states it again)."""
        return False

    def part(self, fed: Federation, claims: list[Claim]) -> Part:
        raise NotImplementedError


VERDICT_LINES: Registry[type[LineSource]] = Registry("verdict_line", "fedattack.reports.verdict_lines")


def sources() -> list[LineSource]:
    found = [cls() for _, cls in VERDICT_LINES.items()]
    return sorted(found, key=lambda s: (s.order, type(s).__name__))


def parts(fed: Federation) -> list[Part]:
    """Every source's part for `fed`, in order, each claim given to the first source that takes it
    (the fallback sources asked last)."""
    left, given = list(fed.claims), dict[int, list[Claim]]()
    found = sources()
    for source in sorted(found, key=lambda s: s.fallback):
        given[id(source)] = [c for c in left if source.takes(c)]
        left = [c for c in left if not source.takes(c)]
    return [source.part(fed, given[id(source)]) for source in found]


def severest(levels: list[Level]) -> Level | None:
    """The level a user acts on first: high, then moderate, then undetermined, then low."""
    rank = {"high": 0, "moderate": 1, "undetermined": 2, "low": 3}
    return min(levels, key=lambda lv: rank.get(lv.risk.level, len(LEVELS)), default=None)
