"""The absolute verdict in words: per audited federation, what each adversary learns.

One bullet per federation (its risk level and utility), under it one line per adversary and
threat model, each stating the strongest attack of every family in plain words with its
interval and n (`numbers.shown`, the one rule), the most severe first. Realistic adversaries
come first; an upper bound's lines (the oracle) are kept apart, folded away in HTML. Passive
adversaries come before an active server's lines (a federation in which the server acted,
`AttackResult.run["active_adversary"]`), which are marked as such and get a risk level of their own.
"""

from __future__ import annotations

from collections import defaultdict

from fedattack import rates
from fedattack.reports import numbers
from fedattack.reports.claims import Claim, Shown, side
from fedattack.reports.collect import LoadedResult
from fedattack.reports.risk import Risk, risk
from fedattack.reports.strongest import strategies

Said = tuple[str, list[str]]  # the words, and notes for the parentheses that carry the n
Block = tuple[str, list[str], list[str]]  # head, realistic lines, upper-bound lines
SEVERITY = {"shown": 0, "below chance": 1, "undetermined": 2, "unjudged": 3, "not shown": 4}
FAMILY_ORDER = ("psnr_mean", "auc", "attack_accuracy")
TRIED = 3  # other candidates named in a claim; the rest are counted


def who(c: Claim) -> str:
    sees = f" (sees {c.observes})" if c.observes else ""
    bound = ", an upper bound" if c.upper_bound else ""
    return f"**{c.threat}**{bound}{sees}"


def _v(s: Shown) -> str:
    """A claim's number without its n (the sentence states it once, after its numbers), at
    enough decimals that it never seems to sit on the other side of its chance level."""
    return numbers.shown(s.interval, s.reading, note="none", against=_marks(s))


def _marks(s: Shown) -> tuple[float, ...]:
    return () if s.chance is None else (s.chance,)


def _chance(s: Shown) -> str:
    assert s.chance is not None
    return f"chance {numbers.level(s.chance, s.reading, s.interval, _marks(s))}"


def tail(c: Claim, notes: list[str]) -> str:
    """'(chance 10%; 5 victims; each victim's attack chosen among 3 ...; also tried: ...; 2 more not
    applicable: ...)'."""
    parts = [*notes, numbers.n_note(c.numbers[0].interval, c.units_word) if c.numbers else ""]
    st, chosen = c.strongest, c.chosen
    if st is not None and chosen is not None:
        parts.append(st.how())
        others = [x.name for x in c.candidates if x.name not in st.chosen]
        shown = ", ".join(others[:TRIED]) + (f" and {len(others) - TRIED} more (in the comparison below)"
                                              if len(others) > TRIED else "")
        parts.append(f"also tried: {shown}" if others else "")
        picked = strategies(chosen.results)
        parts.append("strategy chosen on the other victims: " + ", ".join(f"{k} for {n}" for k, n in
                                                                          picked.most_common()) if picked else "")
    if c.judge is not None:
        parts.append(c.judge.words())
    missing = sum(c.not_applicable.values())
    if missing:
        parts.append(f"{missing} more not applicable: {next(iter(c.not_applicable))}")
    return "(" + "; ".join(p for p in parts if p) + ")"


def membership(c: Claim) -> Said:
    """Both numbers in words, the TPR at the lowest FPR the queries resolve and the AUC, each
    said on its own side of chance, so the sentence never claims more than either number."""
    rt, nums = c.rates, {s.reading.key: s for s in c.numbers}
    auc, tpr = nums.get("auc"), (c.numbers[0] if rt is not None else None)
    auc_text = f"AUC {_v(auc)}" if auc else ""
    if rt is None or tpr is None:
        return {"shown": (f"ranks members above non-members ({auc_text})", []),
                "not shown": (f"learns nothing detectable about membership ({auc_text})", []),
                "below chance": (f"ranks members below non-members ({auc_text}): {below(c)}", [])}.get(
                    c.status, (f"cannot be judged on membership ({auc_text})", []))
    at, chance = f"at ≤{rates.percent(rt.alpha)} false positives", _chance(tpr)
    rate = f"{_v(tpr)} of members {at}"
    if side(tpr) == "above":
        ratio = tpr.interval.mean / rt.mean_chance
        return f"identifies {rate}, {ratio:.{numbers.significant(ratio)}f}x chance; {auc_text}", [chance]
    if c.status == "shown":
        than = "worse than" if side(tpr) == "below" else "no better than"
        return f"ranks members above non-members ({auc_text}) but does {than} guessing {at} ({rate})", [chance]
    if c.status == "not shown":
        return f"learns nothing detectable about membership ({auc_text}; {rate})", [chance]
    if c.status == "below chance":
        what = ("ranks members below non-members" if auc and side(auc) == "below"
                else f"finds fewer members than chance {at}")
        return f"{what} ({auc_text}; {rate}): {below(c)}", [chance]
    return f"cannot be judged on membership ({auc_text}; {rate})", [chance]


def below(c: Claim) -> str:
    auc = next((s.reading for s in c.numbers if s.reading.key == "auc"), None)
    base = (f"loss-threshold baseline on the same queries: AUC {numbers.shown(c.baseline, auc, note='none')}"
            if c.baseline is not None and auc is not None else "no baseline on the same queries")
    if c.why_below == "flipped":
        return (f"a signal with its sign flipped ({base}: the model's own loss ranks members higher), so the "
                "attack's learnt rule points the wrong way and, reversed, would find members")
    if c.why_below == "artefact":
        return (f"likely an artefact of the query sets ({base}: even the model's own loss ranks members lower, "
                "which training on them would not do)")
    return f"a sign-flipped signal or an artefact of the query sets, which these results cannot tell apart ({base})"


# What a family's sentence says, by the claim's status ("other": undetermined or unjudged).
RECOVERY = {"shown": "recovers {share} of the victim's training images above 20 dB",
            "not shown": "recovers no training image reliably above 20 dB ({share})",
            "other": "cannot be judged on training images ({share} above 20 dB)"}
INVERSION = {"shown": "rebuilds recognisable class representatives: {labelled}",
             "not shown": "rebuilds nothing recognisable: {labelled}",
             "other": "cannot be judged on model inversion: {labelled}"}


def _said(c: Claim, words: dict[str, str], **values: str) -> str:
    return words.get(c.status, words["other"]).format(**values)


def reconstruction(c: Claim) -> Said:
    nums = {s.reading.key: s for s in c.numbers}
    share, psnr = nums.get("share_recovered"), nums.get("psnr_mean")
    psnr_text = [f"mean PSNR {_v(psnr)}"] if psnr else []
    if share is None:
        return "reconstructs training images", psnr_text
    return _said(c, RECOVERY, share=_v(share)), psnr_text


def inversion(c: Claim) -> Said:
    acc = c.numbers[0]
    chance = [_chance(acc)] if acc.chance is not None else ["no chance level recorded"]
    return _said(c, INVERSION, labelled=f"a classifier labels {_v(acc)} of them as the victim's classes"), chance


def generic(c: Claim) -> Said:
    words = {"shown": "above chance", "not shown": "holds chance", "below chance": "below chance",
             "undetermined": "cannot be judged", "unjudged": "no chance level to judge by"}[c.status]
    return "; ".join(f"{s.reading.label} {_v(s)}" for s in c.numbers), [words]


SAYS = {"auc": membership, "psnr_mean": reconstruction, "attack_accuracy": inversion}


def sentence(c: Claim) -> str:
    """'Membership inference (rmia, decoded): identifies ... (chance 1.1%; 5 victims).'"""
    chosen, family = c.chosen, _capital(c.family.name)
    if chosen is None:
        reason = next(iter(c.not_applicable), "no reason recorded")
        return f"{family}: not applicable to any of the {numbers.count(c.units, c.units_word)} ({reason})."
    how = chosen.attack if chosen.reconstruction in ("", "none") else f"{chosen.attack}, {chosen.reconstruction}"
    words, notes = SAYS.get(c.family.key, generic)(c)
    return f"{family} ({how}): {words} {tail(c, notes)}."


def severity(c: Claim) -> tuple[object, ...]:
    rank = FAMILY_ORDER.index(c.family.key) if c.family.key in FAMILY_ORDER else len(FAMILY_ORDER)
    return (SEVERITY.get(c.status, 5) if c.candidates else 6, rank, c.family.name)


def line(claims: list[Claim]) -> str:
    """One threat model's line: who, then each family's sentence, the most severe first."""
    return f"{who(claims[0])}: " + " ".join(sentence(c) for c in sorted(claims, key=severity))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def level_text(r: Risk) -> str:
    because = f", set by the {r.because.threat}'s {r.because.family.name}" if r.because and r.level != "low" else ""
    return f"risk **{r.level}**{because}"


def blocks(claims: list[Claim], results: list[LoadedResult]) -> list[Block]:
    """Per federation: its head (risk, utility), its realistic lines, its upper-bound lines."""
    by_fed: dict[tuple[str, str], dict[str, dict[str, list[Claim]]]] = defaultdict(lambda: defaultdict(dict))
    for c in claims:
        by_fed[(c.data, c.federation)][c.adversary].setdefault(c.threat, []).append(c)
    out = []
    for (data, federation), adversaries in by_fed.items():
        levels: list[str] = []
        real: list[str] = []
        bound: list[str] = []
        for adversary in sorted(adversaries, key=lambda a: (a != "", a)):
            threats = adversaries[adversary]
            levels.append(level_text(risk([c for cs in threats.values() for c in cs])) +
                          (f" against an {adversary}" if adversary else
                           " against passive adversaries" if len(adversaries) > 1 else ""))
            prefix = f"*{_capital(adversary)}*: " if adversary else ""
            for cs in threats.values():
                (bound if cs[0].upper_bound else real).append(prefix + line(cs))
        head = f"**{federation}** on {data}: {'; '.join(levels)}. {utility(results, data, federation)}"
        out.append((head.strip(), real, bound))
    return out


def utility(results: list[LoadedResult], data: str, federation: str) -> str:
    """The federation's mean local test accuracy over its runs (honest runs where there are any);
    the test split's accuracy where no client holds test images (`utility["test_split"]`)."""
    runs = {r.run.ident: r.run for r in results
            if r.run.federation == federation and f"{r.run.dataset} ({r.run.partition})" == data}
    honest = [run for run in runs.values() if run.adversary is None] or list(runs.values())
    for key, label in (("mean", "Mean local test accuracy"), ("test_split", "Test-split accuracy")):
        accs = [run.utility[key] for run in honest if key in run.utility]
        if accs:
            return f"{label} {sum(accs) / len(accs):.1f}% ({numbers.count(len(accs), 'runs')})."
    return ""
