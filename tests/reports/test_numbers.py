"""The one rule by which the verdict shows a number (`fedattack.reports.numbers.shown`).

Issue #34's examples come out as it wrote them where the rule agrees ("61% [56, 66]",
"6.2% [4.6, 7.9]"), an AUC interval of half-width 0.02 keeps a third decimal (two significant
digits of the half-width), and what the data cannot support is said: one victim, all equal, few.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fedattack.intervals import Interval, binomial_interval
from fedattack.reports import numbers
from fedattack.reports.absolute_section import sentence
from fedattack.reports.claims import build_claims
from fedattack.reports.collect import LoadedResult, RunInfo
from fedattack.reports.leakage import Reading
from fedattack.results import AttackResult

RATE = Reading("share", "recovered", "%", 100.0, "higher", 2, (0.0, 1.0))
AUC = Reading("auc", "AUC", "", 1.0, "higher", 3, (0.0, 1.0), chance=0.5)


@pytest.mark.parametrize(("interval", "reading", "text"), [
    (Interval(0.61, 0.56, 0.66, 5), RATE, "61% [56, 66] (5 victims)"),
    (Interval(0.062, 0.046, 0.079, 8), RATE, "6.2% [4.6, 7.9] (8 victims)"),
    (Interval(0.51, 0.49, 0.53, 12), AUC, "0.510 [0.490, 0.530] (12 victims)"),
    (Interval(0.494, 0.423, 0.558, 5), AUC, "0.49 [0.42, 0.56] (5 victims)"),
    (Interval(0.7, 0.5, 0.9, 3), AUC,
     "0.70 [0.50, 0.90] (3 victims: too few for the interval to be more than about their range)"),
    (Interval(0.4321, math.nan, math.nan, 1), AUC, "0.43 (1 victim, no interval)"),
    (Interval(1.0, 1.0, 1.0, 5), RATE, "100% (5 victims, all equal: no spread to give an interval)"),
])
def test_digits_come_from_the_interval_and_n_always_follows(interval: Interval, reading: Reading, text: str) -> None:
    assert numbers.shown(interval, reading) == text


def test_an_exact_interval_replaces_a_degenerate_one_and_says_how() -> None:
    s = binomial_interval(10, 10, 5, "every one scored the same: exact binomial interval over their 10 judgements")
    assert numbers.shown(s, RATE) == ("100% [69, 100] (5 victims; every one scored the same: exact binomial interval "
                                      "over their 10 judgements)")


def test_rounding_never_carries_a_bound_across_what_it_is_judged_against() -> None:
    above = Interval(0.6, 0.5004, 0.7, 9)
    assert numbers.shown(above, AUC) == "0.60 [0.50, 0.70] (9 victims)"  # alone, two decimals are enough
    assert numbers.shown(above, AUC, against=(0.5,)) == "0.6000 [0.5004, 0.7000] (9 victims)"
    lowered = Interval(-0.2, -0.3, -0.0004, 6)
    assert numbers.shown(lowered, RATE, signed=True) == "-20 pp [-30, -0] (6 victims)"  # reads as holding 0
    assert numbers.shown(lowered, RATE, signed=True, against=(0.0,)) == "-20.00 pp [-30.00, -0.04] (6 victims)"


def test_victims_not_applicable_are_counted_in_the_line() -> None:
    """The issue: 7 of 10 victims dropped as not applicable were not mentioned in the verdict."""
    run = RunInfo(method="fedavg", dataset="digits", partition="iid", seed=0)
    decl = {"auc": {"key": "auc", "label": "AUC", "primary": True, "leak": "higher", "bounds": [0, 1], "chance": 0.5}}

    def one(victim: int) -> LoadedResult:
        ok = victim < 3
        r = AttackResult(attack="membership", threat_model="eavesdropper", run={}, victim=victim,
                         metrics={"auc": 0.6 + victim / 50} if ok else {}, metric_info=decl, applicable=ok,
                         note="" if ok else "client sent nothing in the recorded rounds")
        return LoadedResult(r, Path(f"/nowhere/{victim}.json"), run)

    (claim,) = build_claims([one(v) for v in range(10)])
    text = sentence(claim)
    assert "(3 victims: too few for the interval to be more than about their range; 7 more not applicable: " \
           "client sent nothing in the recorded rounds)" in text
