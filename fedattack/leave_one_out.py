"""Choosing among candidates without looking at what the choice is for: leave one out.

The maximum of several noisy measurements overstates each one, so wherever the project picks
the strongest of several candidates (evaluate's reconstruction strategies,
`attacks/evaluation/selection.py`; the report's strongest attack of a family,
`reports/strongest.py`), a unit's candidate is the one best on average over the *other* units.
This is that average, in one place.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def mean_without(values: Mapping[K, float], left_out: K) -> float:
    """The mean of the finite values of every unit but `left_out`, in the mapping's order (-inf
    where there are none): a candidate's score for `left_out`, measured on the others."""
    finite = [v for unit, v in values.items() if unit != left_out and math.isfinite(v)]
    return sum(finite) / len(finite) if finite else -math.inf
