"""How a metric is labelled, scaled and ordered in a report.

Attack metrics are declared by the attacks themselves (`fedattack.results.Metric`) and carried
by every result file (`AttackResult.metric_info`), so a report never imports an attack and a new
attack's labels appear without an edit here; results written before declarations existed, or a
metric nobody declared, show under their key, unscaled, after the declared ones. Utility
metrics belong to no attack: their presentation is kept here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fedattack.results import Metric


@dataclass(frozen=True)
class MetricInfo:
    label: str
    scale: float = 1.0      # display value = stored value * scale
    headline: bool = True   # shown in the Markdown table (every metric goes to the CSV)
    digits: int = 2
    privacy_axis: bool = False  # the attack's summary number in the privacy-utility figure
    bounds: tuple[float | None, float | None] = (None, None)  # of displayed values: error bars stop there

    @classmethod
    def of(cls, m: Metric) -> MetricInfo:
        """A result's declaration, as the report shows it (bounds in display units)."""
        lo, hi = (None if b is None else b * m.scale for b in m.bounds)
        return cls(m.title, m.scale, m.headline, m.digits, m.primary, (lo, hi))


PERCENT = 100.0

# Utility metrics (fedattack.metrics.utility_summary), already in percent / percent squared.
UTILITY_METRICS: dict[str, MetricInfo] = {
    "mean": MetricInfo("mean local acc. (%)"),
    "majority": MetricInfo("majority (%)"),
    "minority": MetricInfo("minority (%)"),
    "gap": MetricInfo("gap (%)"),
    "variance": MetricInfo("variance (%^2)", digits=0, headline=False),  # kept where a paper reports it
    "agent0_best": MetricInfo("agent 0 best acc. (%)"),
    "std": MetricInfo("std over clients (%)"),  # reads better than the variance in %^2
    # where no client holds test images: the dataset's test split (fedattack.federation.utility)
    "test_split": MetricInfo("test-split acc. (%), no local test images"),
}


def declared(metrics: Iterable[dict[str, Metric]]) -> dict[str, MetricInfo]:
    """Merge results' declarations (first declaration of a key wins), in declaration order."""
    out: dict[str, MetricInfo] = {}
    for table in metrics:
        for key, m in table.items():
            out.setdefault(key, MetricInfo.of(m))
    return out


def info(metric: str, kind: str, known: dict[str, MetricInfo] | None = None) -> MetricInfo:
    """`known`: the declarations the results carry (attack metrics)."""
    table = UTILITY_METRICS if kind == "utility" else (known or {})
    if metric in table:
        return table[metric]
    if metric.startswith("group:"):
        return MetricInfo(f"{metric[6:]} (%)")
    return MetricInfo(metric)


def order(metrics: set[str], kind: str, known: dict[str, MetricInfo] | None = None) -> list[str]:
    """Known metrics in their declared (the papers') order, then any others alphabetically."""
    first = list(UTILITY_METRICS if kind == "utility" else (known or {}))
    return [m for m in first if m in metrics] + sorted(m for m in metrics if m not in first)


def headline(metrics: list[str], kind: str, known: dict[str, MetricInfo] | None = None) -> list[str]:
    return [m for m in metrics if info(m, kind, known).headline]


def privacy_metric(metrics: list[str], known: dict[str, MetricInfo] | None = None) -> str | None:
    """The number that summarises an attack on one axis: the declared primary, else the first."""
    marked = [m for m in metrics if info(m, "attack", known).privacy_axis]
    chosen = marked or metrics
    return chosen[0] if chosen else None
