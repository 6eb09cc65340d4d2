"""The one rule by which a report shows a number: digits from its interval, and always its n.

Every estimate a verdict sentence or verdict table shows goes through `shown`, so a reader
never meets a number that claims more than its data:
- **digits from the interval**: the interval's half-width is shown to one significant digit,
  two where it starts with 1 to 3 (the Particle Data Group's rule), and the mean and bounds to
  the same decimal place ("61% [56, 66]", "6.2% [4.6, 7.9]", "0.510 [0.490, 0.530]"); without
  an interval, two significant digits;
- **n always**, in the units the interval resampled ("5 victims");
- **few units flagged**: a 95% interval from fewer than `FEW` units is about their range
  (a BCa interval over 3 victims is nearly their min-max), and says so;
- **no false certainty**: one unit has no interval; units that all gave the same value have no
  spread to resample, and say so, unless an exact interval from their counts replaced it (`how`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from fedattack.intervals import TOLERANCE, Interval
from fedattack.reports.leakage import Reading

FEW = 5  # fewer units than this: the interval is flagged as about their range
MAX_DECIMALS = 4


def decimals(half_width: float) -> int:
    """Decimal places that show `half_width` to 1 significant digit, 2 if it starts with 1-3."""
    if not math.isfinite(half_width) or half_width <= 0:
        return 0
    exponent = math.floor(math.log10(half_width))
    leading = half_width / 10 ** exponent  # in [1, 10)
    digits = 2 if leading < 3.55 else 1
    return max(0, min(MAX_DECIMALS, digits - 1 - exponent))


def significant(value: float, digits: int = 2) -> int:
    """Decimal places that show `value` to `digits` significant digits (at least none)."""
    if not math.isfinite(value) or value == 0:
        return 0
    return max(0, min(MAX_DECIMALS, digits - 1 - math.floor(math.log10(abs(value)))))


def count(n: int, units: str = "victims") -> str:
    """'5 victims', '1 victim', '1 seed, paired'."""
    word, _, rest = units.partition(",")
    if n == 1 and word.endswith("s"):
        word = word[:-1]
    return f"{n} {word}{',' + rest if rest else ''}"


def n_note(s: Interval, units: str = "victims") -> str:
    """What follows a number in parentheses: its n, and why its interval is missing or weak."""
    if s.n <= 1:
        return f"{count(s.n, units)}, no interval"
    if s.how:
        return f"{count(s.n, units)}; {s.how}"
    if s.degenerate:
        return f"{count(s.n, units)}, all equal: no spread to give an interval"
    if s.n < FEW:
        return f"{count(s.n, units)}: too few for the interval to be more than about their range"
    return count(s.n, units)


def flag(s: Interval) -> str:
    """The short form of `n_note`'s warning, for a table whose n is in a column of its own."""
    if s.n <= 1:
        return "no interval"
    if s.degenerate:
        return "all equal"
    return "few" if s.n < FEW and not s.how else ""


def places(s: Interval, m: Reading, against: Iterable[float] = ()) -> int:
    """The decimals `shown` uses: from the interval's width, then more while rounding would put a
    bound on the other side of (or onto) a value the verdict judges it against (chance, zero):
    a verdict that says "above chance" never shows an interval that seems to hold it."""
    v = s.scaled(m.scale)
    interval = v.has_interval and not v.degenerate
    d = decimals((v.high - v.low) / 2) if interval else significant(v.mean)
    marks = [a * m.scale for a in against if math.isfinite(a)]
    bounds = (v.low, v.high) if interval else (v.mean,)
    while d < MAX_DECIMALS + 2 and any(_crosses(b, a, d) for a in marks for b in bounds):
        d += 1
    return d


def _crosses(bound: float, mark: float, d: int) -> bool:
    exact = 0 if abs(bound - mark) <= TOLERANCE else (bound > mark) - (bound < mark)
    shown = (round(bound, d) > round(mark, d)) - (round(bound, d) < round(mark, d))
    return exact != 0 and shown != exact


def shown(s: Interval, m: Reading, units: str = "victims", signed: bool = False, note: str = "full",
          against: Iterable[float] = ()) -> str:
    """'61% [56, 66] (5 victims)': the estimate in display units with its interval and n.

    `signed` shows a difference (+/-, percentage points for rates). `note`: "full" puts the n
    and any warning in parentheses after the number; "flag" only a short warning (a table
    with an n column); "none" nothing (a sentence that states the n once, after its numbers).
    `against`: values (stored units) the verdict judges this number against (`places`)."""
    if s.n == 0 or not math.isfinite(s.mean):
        return "no result"
    v = s.scaled(m.scale)
    unit = m.difference_unit if signed else m.suffix
    sign = "+" if signed else ""
    d = places(s, m, against)
    text = f"{v.mean:{sign}.{d}f}{unit}"
    if v.has_interval and not v.degenerate:
        text += f" [{v.low:{sign}.{d}f}, {v.high:{sign}.{d}f}]"
    if note == "full":
        return f"{text} ({n_note(s, units)})"
    warning = flag(s) if note == "flag" else ""
    return f"{text} ({warning})" if warning else text


def level(value: float, m: Reading, s: Interval, against: Iterable[float] = ()) -> str:
    """A reference level (chance) at no fewer decimals than the number judged against it."""
    x = value * m.scale
    return f"{x:.{max(significant(x), places(s, m, against))}f}{m.suffix}"
