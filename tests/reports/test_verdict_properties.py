"""The verdict never contradicts itself and never shows a number without its n, over 1,000
random result sets (`verdict_sets.py`: sizes, ties, all equal, n = 1, all not applicable,
defended twins, active servers).

Checked on every set:
- each compared method lands in exactly one category, and its sentences use that category's
  phrase and no other's; the lead names it under that category only;
- each absolute claim's sentence uses its status's words and no other status's (model inversion's:
  its client status's words about the class mix, and its class images said to be the population's
  unless the class mix is shown);
- the risk level agrees with the claims' client measures (one shown is never "low"; "low" has none
  shown; a claim with no client measure sets no level);
- where a claim and a comparison speak of the same attack, they hold the same interval, and the
  comparison's chance flag agrees with the claim's reading of it;
- a defence's effect says "lowers" / "raises" / "does not detectably change" as its interval does;
- every number `numbers.shown` renders is followed, within its sentence, by its n, and no other
  decimal or percentage appears outside a known phrase (a threshold, a chance level, a count).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from fedattack import intervals
from fedattack.reports import numbers
from fedattack.reports.absolute_section import blocks, sentence
from fedattack.reports.claims import Claim, build_claims, side
from fedattack.reports.comparison_section import PHRASES, comparison, items
from fedattack.reports.defence_effect import effects
from fedattack.reports.risk import risk
from fedattack.reports.verdict import CATEGORIES, Group, build_groups, category
from tests.reports.verdict_sets import result_set

SETS = 1000
OPEN, CLOSE = "\u27e6", "\u27e7"  # marks around every number `numbers.shown` renders
N_MARK = re.compile(r"\b\d+ (victims?|victim-seed pairs?|seeds?|runs?)\b")
STATUS_WORDS = {"shown": ("identifies", "ranks members above", "recovers ", "(above chance)"),
                "not shown": ("learns nothing detectable", "recovers no training image", "(holds chance)"),
                "below chance": ("ranks members below", "finds fewer members than chance", "(below chance)"),
                "undetermined": ("cannot be judged",), "unjudged": ("no chance level to judge by",)}
ALLOWED = [r"≤\d+(\.\d+)?% false positives", r"\d+(\.\d+)?x chance", r"chance \(?\d+(\.\d+)?%?", r"above 20 dB",
           r"\(\d+(\.\d+)?%?;", r"\d+(\.\d+)?% to \d+(\.\d+)?%", r"accuracy \d+\.\d%", r"TPR @ 0?\.?\d+% FPR",
           r"noise_multiplier=0\.01", r"1/#non-members = [\d.]+", r"AUC 0\.5\b", r"at \d+(\.\d+)?% FPR"]


@pytest.fixture(autouse=True)
def quick_bootstrap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The rules do not depend on the resample count; 99 keeps 1,000 sets to seconds."""
    monkeypatch.setattr(intervals, "RESAMPLES", 99)
    original = numbers.shown
    monkeypatch.setattr(numbers, "shown", lambda *a, **k: f"{OPEN}{original(*a, **k)}{CLOSE}")
    yield


def sentences_of(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.)])\s+(?=[A-Z*])|\.$", text) if s]


def check_numbers(line: str) -> None:
    for piece in sentences_of(line):
        for match in re.finditer(re.escape(OPEN), piece):
            assert N_MARK.search(piece[match.start():]), f"a number without its n: {piece!r}"
        bare = re.sub(f"{OPEN}[^{CLOSE}]*{CLOSE}", "#", piece)
        for pattern in ALLOWED:
            bare = re.sub(pattern, "", bare)
        bare = N_MARK.sub("", bare)
        assert not re.search(r"\d+\.\d+|\d+%", bare), f"a number outside the rule: {bare!r} in {piece!r}"


CLASS_MIX_WORDS = {"shown": "infers which classes the victim holds more of", "not shown": "infers nothing of the "
                   "victim's class mix", "below chance": "ranks the victim's classes below",
                   "undetermined": "cannot be judged on the victim's class mix"}
POPULATION = "what any model of the population gives"


def check_inversion(c: Claim, text: str) -> None:
    """Model inversion speaks of the class mix by its client status, and never lets class images
    that are the population's read as a finding about the client."""
    if c.client_status == "none":
        assert "hold no measure of this client's data" in text and POPULATION in text, text
        return
    said = [s for s, w in CLASS_MIX_WORDS.items() if w in text]
    assert said == [c.client_status if c.client_status in CLASS_MIX_WORDS else "undetermined"], (said, text)
    acc = next(s for s in c.numbers if s.reading.key == "attack_accuracy")
    assert (POPULATION in text) == (c.client_status != "shown" and side(acc) == "above"), text


def check_claim(c: Claim) -> None:
    text = sentence(c)
    check_numbers(text)
    if c.chosen is None:
        assert "not applicable to any" in text
        return
    if c.family.key == "attack_accuracy":
        check_inversion(c, text)
        return
    mine = STATUS_WORDS[c.status]
    assert any(w in text for w in mine), f"{c.status}: {text}"
    for status, words in STATUS_WORDS.items():
        if status != c.status:
            clash = [w for w in words if w in text and not any(w in m for m in mine)]
            assert not clash, f"{c.status} claim says {clash}: {text}"


def check_risk(claims: list[Claim]) -> None:
    by: dict[tuple[str, str, str], list[Claim]] = {}
    for c in claims:
        by.setdefault((c.data, c.federation, c.adversary), []).append(c)
    for group in by.values():
        r = risk(group)
        shown = any(c.client_status == "shown" and not c.upper_bound for c in group)
        assert not (shown and r.level in ("low", "undetermined")), (r.level, [c.client_status for c in group])
        judged = [c for c in group if not c.upper_bound and c.chosen is not None and c.client_status != "none"]
        assert r.level != "low" or (judged and all(c.client_status in ("not shown", "below chance") for c in judged))
        assert r.because is None or r.because.client_status != "none", "a claim with no client measure set a level"


def check_comparison(groups: list[Group], claims: list[Claim]) -> None:
    for g, (lead, subs) in zip(groups, items(groups)):
        for e in g.entries:
            kind = category(g, e)
            assert kind in CATEGORIES
            if kind not in PHRASES:
                continue
            said = comparison(g, e)
            check_numbers(said)
            own = PHRASES[kind].format(s="s")
            assert own in said, (kind, said)
            diff = shown_difference(said)
            if diff is not None and kind in ("more", "less", "same"):
                assert (diff[0] <= 0 <= diff[1]) == (kind == "same"), (kind, said)
            assert not [p for k, p in PHRASES.items() if k != kind and p.format(s="s") in said], said
            clauses = [c for c in lead.split("**")[1].split("; ") if re.search(rf"(^|[ ,(]){e.method}\b", c)]
            named = {k for c in clauses for k, p in PHRASES.items() if p.format(s="") in c or p.format(s="s") in c}
            assert named == {kind}, (e.name, kind, clauses)
        for line in (lead, *subs):
            check_numbers(line)
        agree(g, claims)


def agree(g: Group, claims: list[Claim]) -> None:
    """A claim and the comparison entry for the same attack hold one interval and one chance reading."""
    if g.primary.key != "auc":
        return
    for c in claims:
        chosen = c.chosen
        if chosen is None or chosen.attack != g.attack or c.threat != g.threat.split(" (")[0]:
            continue
        if c.strongest is None or len(c.strongest.chosen) != 1 or c.strongest.optimistic:
            continue  # victims' numbers from several attacks: no one comparison entry holds them
        e = next((x for x in g.entries if x.method == chosen.results[0].run.label
                  and x.reconstruction == chosen.reconstruction), None)
        auc = next((s for s in c.numbers if s.reading.key == "auc"), None)
        if e is None or auc is None:
            continue
        assert e.stats["auc"] == auc.interval
        holds = any("holds chance" in f for f in e.flags)
        assert holds == (side(auc) == "holds"), (e.flags, auc.interval)


def shown_difference(text: str) -> tuple[float, float] | None:
    """The displayed bounds of the first difference in `text`, as a reader would read them."""
    found = re.search(r"difference \u27e6[+-][\d.]+[^[\u27e7]*\[([+-][\d.]+), ([+-][\d.]+)\]", text)
    return None if found is None else (float(found.group(1)), float(found.group(2)))


def check_effects(lines: list[str]) -> None:
    for line in filter(None, lines):
        check_numbers(line)
        shown = shown_difference(line)
        if shown is None:
            assert "cannot be told from one victim" in line or "all equal" in line, line
            continue
        holds = shown[0] <= 0 <= shown[1]
        assert holds == ("does not detectably change" in line), line
        assert holds or ("lowers" in line) == (shown[1] < 0) or ("raises" in line) == (shown[0] > 0), line


@pytest.mark.parametrize("chunk", range(10))
def test_no_contradiction_and_every_number_with_its_n(chunk: int) -> None:
    for seed in range(chunk * SETS // 10, (chunk + 1) * SETS // 10):
        results = result_set(seed)
        claims = build_claims(results)
        for c in claims:
            check_claim(c)
        check_risk(claims)
        for head, real, bound in blocks(claims, results):
            for line in (head, *real, *bound):
                check_numbers(line)
        check_comparison([g for g in build_groups(results) if len(g.entries) > 1], claims)
        check_effects(effects(claims, results))
