"""Confidence intervals for a verdict and a summary: a mean, a difference of two means, a rate.

The unit resampled is one attack result (one victim of one seeded federation), so an
interval speaks of the victims and seeds the audit drew, not of the attack's own query noise.
Every interval is drawn with a fixed generator, so the same results give the same report bit
for bit. With fewer than two values there is no interval, and `Interval.low`/`high` are NaN
rather than the mean, so nothing downstream can print "± 0" as if it were certain. Values that
are all equal leave nothing to resample: the interval is the point itself, marked `degenerate`;
where the values are rates of known counts (10 judgements, 250 images), `binomial_interval`
gives the exact interval of the pooled count instead. A 95% BCa interval from fewer than about
5 values is roughly their range: the report says so beside it (`fedattack.reports.numbers`).
This module is in the core so that `summary.json` (attacks) and the reports share it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

LEVEL = 0.95
RESAMPLES = 9999
SEED = 20240601  # fixed: a report must be reproducible
METHOD = "BCa"   # bias-corrected and accelerated; falls back to percentile where BCa is undefined
TOLERANCE = 1e-9  # a bound this close to a value judged against it counts as touching it


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float
    n: int
    how: str = ""  # how it was made where not by the bootstrap over units ("exact binomial over 10 ...")

    @property
    def has_interval(self) -> bool:
        return self.n >= 2 and math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def degenerate(self) -> bool:
        """Every unit gave the same value: nothing to resample, so no width to speak of."""
        return self.has_interval and self.low == self.high and not self.how

    @property
    def width(self) -> float:
        return self.high - self.low if self.has_interval else math.inf

    def contains(self, value: float) -> bool:
        """Whether `value` lies within the interval, bounds within rounding error (`TOLERANCE`) of
        it included: a bound of -1e-16 is zero that the arithmetic blurred, not a finding."""
        return self.has_interval and self.low - TOLERANCE <= value <= self.high + TOLERANCE

    def above(self, value: float) -> bool:
        """The whole interval lies above `value` (beyond rounding error)."""
        return self.has_interval and self.low > value + TOLERANCE

    def below(self, value: float) -> bool:
        """The whole interval lies below `value` (beyond rounding error)."""
        return self.has_interval and self.high < value - TOLERANCE

    def scaled(self, factor: float) -> Interval:
        return Interval(self.mean * factor, self.low * factor, self.high * factor, self.n, self.how)

    def to_json(self) -> dict[str, Any]:
        """For JSON files: the bounds as null where there is no interval."""
        def number(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None
        bootstrap = f"{METHOD} bootstrap over victims (and seeds), {RESAMPLES} resamples"
        method = self.how or (bootstrap if self.has_interval else "none (n < 2)")
        return {"mean": number(self.mean), "low": number(self.low), "high": number(self.high), "n": self.n,
                "confidence": LEVEL, "method": method}


@dataclass(frozen=True)
class Difference:
    interval: Interval
    paired: bool
    n_other: int  # the reference's count (equal to interval.n when paired)


def _finite(values: Sequence[float]) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    return arr[np.isfinite(arr)]


def _diff_of_means(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def _bootstrap(samples: tuple[np.ndarray, ...], statistic: object, point: float, seed: int) -> Interval:
    """scipy's bootstrap, BCa first; constant data (no spread to resample) gives the point itself."""
    n = min(len(s) for s in samples)
    if n < 2:
        return Interval(point, math.nan, math.nan, n)
    if all(np.ptp(s) == 0 for s in samples):
        return Interval(point, point, point, n)
    for method in (METHOD, "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BCa on tiny samples may warn, and is then retried
            res = _scipy_bootstrap(samples, statistic, method, seed)
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            return Interval(point, low, high, n)
    return Interval(point, math.nan, math.nan, n)


def _scipy_bootstrap(samples: tuple[np.ndarray, ...], statistic: object, method: str, seed: int) -> Any:
    kwargs = {"n_resamples": RESAMPLES, "confidence_level": LEVEL, "method": method, "vectorized": True}
    try:
        return stats.bootstrap(samples, statistic, rng=np.random.default_rng(seed), **kwargs)
    except TypeError:  # scipy before 1.15 names the generator random_state
        return stats.bootstrap(samples, statistic, random_state=np.random.default_rng(seed), **kwargs)


def mean_interval(values: Sequence[float], seed: int = SEED) -> Interval:
    """The mean and its 95% bootstrap interval (NaN bounds when n < 2)."""
    arr = _finite(values)
    if arr.size == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    return _bootstrap((arr,), np.mean, float(arr.mean()), seed)


def difference_interval(values: Mapping[Hashable, float], reference: Mapping[Hashable, float],
                        seed: int = SEED) -> Difference:
    """mean(values) - mean(reference) with its interval.

    Keys name the unit (victim and seed). Where both sides attacked the same units the
    difference is paired, one resampled difference per unit, which removes the victim-to-victim
    spread the two share; otherwise the two sides are resampled independently.
    """
    a = {k: float(v) for k, v in values.items() if math.isfinite(v)}
    b = {k: float(v) for k, v in reference.items() if math.isfinite(v)}
    if a and set(a) == set(b):
        keys = sorted(a, key=repr)
        d = np.asarray([a[k] - b[k] for k in keys])
        return Difference(_bootstrap((d,), np.mean, float(d.mean()), seed), True, len(b))
    x, y = np.asarray(list(a.values())), np.asarray(list(b.values()))
    if x.size == 0 or y.size == 0:
        return Difference(Interval(math.nan, math.nan, math.nan, 0), False, y.size)
    point = float(x.mean() - y.mean())
    return Difference(_bootstrap((x, y), _diff_of_means, point, seed), False, int(y.size))


def binomial_interval(successes: int, trials: int, n: int, how: str) -> Interval:
    """The exact (Clopper-Pearson) interval of a pooled rate, for `n` units whose values were all
    equal: the units say nothing about spread, but the counts behind them still do."""
    if trials <= 0:
        return Interval(math.nan, math.nan, math.nan, n)
    ci = stats.binomtest(successes, trials).proportion_ci(confidence_level=LEVEL, method="exact")
    return Interval(successes / trials, float(ci.low), float(ci.high), n, how)
