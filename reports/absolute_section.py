"""The absolute verdict in words: per audited federation, what each adversary learns.

One bullet per federation: its head (each risk level, named after the attack that set it, the one
finding to act on, its utility), under it one line per adversary and threat model, each stating
the strongest attack of every family in plain words with its interval and n (`numbers.shown`, the
one rule), the most severe first, and what was not attempted. Realistic adversaries come first; an
upper bound's lines (the oracle) are kept apart, folded away in HTML. Which lines there are is
declared by the sources of `verdict_lines/` (passive adversaries, a server that acted during
training, what the plan left out, ...); this module has the words they share.
"""

from __future__ import annotations

from collections import defaultdict

from fedattack import rates
from fedattack.reports import numbers
from fedattack.reports.claims import Claim, Shown, side
from fedattack.reports.collect import LoadedResult
from fedattack.reports.risk import Risk
from fedattack.reports.strongest import strategies
from fedattack.reports.verdict_lines.base import Federation, Level, parts, severest

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
ACTING = {"shown": "would recover {share} of the victim's training images above 20 dB in one round",
          "not shown": "would recover no training image reliably above 20 dB in one round ({share})",
          "other": "cannot be judged on training images ({share} above 20 dB in one round)"}
READ = {"shown": "recovers {share} of the victim's training images above 20 dB from the round it read",
        "not shown": "recovers no training image reliably above 20 dB from the round it read ({share})",
        "other": "cannot be judged on training images ({share} above 20 dB from the round it read)"}
# Model inversion: what it learns about the client (its class mix beyond the population's, by the
# side of that number against chance), then what its class images are.
CLASS_MIX = {"above": "infers which classes the victim holds more of than the population (the half of the "
                      "classes its model rebuilds most confidently hold {mix} more of its images than of the "
                      "population's)",
             "holds": "infers nothing of the victim's class mix beyond the population's ({mix})",
             "below": "ranks the victim's classes below the population's ({mix}), which these results cannot "
                      "explain",
             "none": "cannot be judged on the victim's class mix ({mix})"}
IMAGES = {"above": "its class images{tail}: a classifier labels {labelled} as their class",
          "other": "its class images{tail}: a classifier labels {labelled} as their class, no better than chance"}
POPULATION = " are what any model of the population gives, not this client's data"
NO_CLIENT_MEASURE = ("its results hold no measure of this client's data (written before the class-mix measure), so "
                     "it sets no risk level; its class images, what any model of the population gives: a classifier "
                     "labels {labelled} as their class")


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
    """What the inversion learns about the client first (its class mix beyond the population's),
    then its class images, said to be the population's where the class mix holds chance."""
    acc = next(s for s in c.numbers if s.reading.key == "attack_accuracy")
    labelled = _v(acc)
    chance = [_chance(acc)] if acc.chance is not None else ["no chance level recorded"]
    mix = next((s for s in c.numbers if s.reading.client), None)
    if mix is None:
        return NO_CLIENT_MEASURE.format(labelled=labelled), chance
    where = side(mix) if side(mix) in CLASS_MIX else "none"
    mixed = numbers.shown(mix.interval, mix.reading, note="none", signed=where != "above", against=_marks(mix))
    images = IMAGES["above" if side(acc) == "above" else "other"].format(
        labelled=labelled, tail=POPULATION if where != "above" and side(acc) == "above" else "")
    return f"{CLASS_MIX[where].format(mix=mixed)}; {images}", [*chance, f"class mix: chance {_level(mix)}"]


def _level(s: Shown) -> str:
    assert s.chance is not None
    return numbers.level(s.chance, s.reading, s.interval, _marks(s)).strip()


def generic(c: Claim) -> Said:
    words = {"shown": "above chance", "not shown": "holds chance", "below chance": "below chance",
             "undetermined": "cannot be judged", "unjudged": "no chance level to judge by"}[c.status]
    return "; ".join(f"{s.reading.label} {_v(s)}" for s in c.numbers), [words]


def acting(c: Claim) -> Said:
    """A server's reading of one round: what it recovers from a round it read (passive or having
    acted in training), or, for the malicious-server what-if (`Claim.acts`), what it would recover."""
    share = next(s for s in c.numbers if s.reading.key == "recovered_20")
    notes = [f"chance {_level(share)}"] if share.chance is not None else []
    return _said(c, ACTING if c.acts else READ, share=_v(share)), notes


SAYS = {"auc": membership, "psnr_mean": reconstruction, "attack_accuracy": inversion, "recovered_20": acting}


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
    """Claims that count toward the level first, then the most severe, then by family."""
    rank = FAMILY_ORDER.index(c.family.key) if c.family.key in FAMILY_ORDER else len(FAMILY_ORDER)
    status = c.client_status if c.client_status != "none" else "not shown"
    return (SEVERITY.get(status, 5) if c.candidates else 6, c.client_status == "none", rank, c.family.name)


def line(claims: list[Claim]) -> str:
    """One threat model's line: who, then each family's sentence, the most severe first."""
    return f"{who(claims[0])}: " + " ".join(sentence(c) for c in sorted(claims, key=severity))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def setter(c: Claim) -> str:
    """'the eavesdropper's membership inference (rmia)': the attack that set a level."""
    attack = f" ({c.chosen.attack})" if c.chosen is not None else ""
    return f"the {c.threat}'s {c.family.name}{attack}"


def level_text(r: Risk) -> str:
    because = f", set by {setter(r.because)}" if r.because and r.level != "low" else ""
    return f"risk **{r.level}**{because}"


def finding(r: Risk) -> str:
    """The one finding to act on, as a sentence: what the attack that set the level learns about a
    client (its first clause, the client measure), with its n."""
    c = r.because
    if r.level == "low" or c is None:
        return ("Nothing to act on from these attacks: none learns anything about a client's data (not a "
                "guarantee; see what was not attempted)." if r.level == "low" else "")
    words = SAYS.get(c.family.key, generic)(c)[0].split("; ")[0]
    about = next((s for s in c.numbers if s.reading.client), c.numbers[0] if c.numbers else None)
    n = f" ({numbers.n_note(about.interval, c.units_word)})" if about is not None else ""
    if r.level == "undetermined":
        return f"Undecided: {setter(c)} {words}{n}; attack more victims to settle it."
    return f"Act on: {setter(c)} {words}{n}."


def head(fed: Federation, levels: list[Level]) -> str:
    """'**fedavg** on digits (iid): risk **moderate**, set by ...; Act on: ... Mean local ...'."""
    named = len(levels) > 1
    said = [level_text(lv.risk) + (f" against {lv.against}" if lv.against and (named or lv.named) else "")
            for lv in levels]
    first = severest(levels)
    act = f" {first.finding}" if first is not None and first.finding else ""
    text = f"**{fed.name}** on {fed.data}: {'; '.join(said) or 'no risk level'}.{act} "
    return (text + utility(fed.results, fed.data, fed.name)).strip()


def blocks(claims: list[Claim], results: list[LoadedResult]) -> list[Block]:
    """Per federation: its head (risk, the finding to act on, utility), its realistic lines, its
    upper-bound lines, each kind of line from its source (`verdict_lines/`)."""
    by_fed: dict[tuple[str, str], list[Claim]] = defaultdict(list)
    for c in claims:
        by_fed[(c.data, c.federation)].append(c)
    out = []
    for (data, name), mine in by_fed.items():
        fed = Federation(data, name, mine, [r for r in results if r.run.federation == name and
                                            f"{r.run.dataset} ({r.run.partition})" == data])
        found = parts(fed)
        levels = [lv for p in found for lv in p.levels]
        out.append((head(fed, levels), [x for p in found for x in p.lines], [x for p in found for x in p.bound]))
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
