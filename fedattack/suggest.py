""""Did you mean ...?" for every name and value a user types.

A mistyped `--set shadow=5`, `--attack lra` or `noise=clinet` used to get the whole list of valid
names and no pointer to the one meant. Every lookup of a name (a registry's, a setting's, an
option value's, an experiment key's) adds `did_you_mean(typed, choices)` to its one-line error,
so they all answer a typo alike. Kebab- and snake-case and letter case are ignored when comparing,
as the lookups themselves ignore them; `difflib`'s ratio does the rest, against the whole name
and against each of its parts (`lra` finds `lira-offline`, `lira-online` and `lira-rounds`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

CUTOFF = 0.6  # difflib's default: one or two letters wrong, missing or swapped in a short name
MOST = 3


def _key(text: str) -> str:
    return text.strip().lower().replace("-", "_")


def _likeness(typed: str, choice: str) -> float:
    """How alike, 0 to 1: the whole name, or a little less for one of its parts."""
    whole = difflib.SequenceMatcher(None, typed, choice).ratio()
    parts = [p for p in re.split(r"[_:.]", choice) if p and p != choice]
    best_part = max((difflib.SequenceMatcher(None, typed, p).ratio() for p in parts), default=0.0)
    return max(whole, 0.9 * best_part)


def close_matches(typed: object, choices: Iterable[object]) -> list[str]:
    """The choices most like `typed`, best first (at most three; none when nothing is close)."""
    spelled: dict[str, str] = {}
    for choice in choices:
        spelled.setdefault(_key(str(choice)), str(choice))
    key = _key(str(typed))
    scored = sorted(((_likeness(key, k), i, k) for i, k in enumerate(spelled)), key=lambda s: (-s[0], s[1]))
    return [spelled[k] for score, _, k in scored[:MOST] if score >= CUTOFF]


def did_you_mean(typed: object, choices: Iterable[object]) -> str:
    """` (did you mean 'shadows'?)` to follow the typed name in an error, or "" when no choice
    is close (then the error's list of valid names is the help)."""
    found = close_matches(typed, choices)
    if not found:
        return ""
    quoted = [repr(f) for f in found]
    alternatives = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f" (did you mean {alternatives}?)"
