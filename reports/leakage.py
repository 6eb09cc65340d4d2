"""What a headline metric means for leakage: which way leaks more, where chance lies, how it reads.

The attacks declare their metrics (`fedattack.results.Metric`: label, unit, scale, leak, primary,
bounds, digits) and every result carries the declarations (`AttackResult.metric_info`), so the
verdict reads them from the files. Results written before declarations existed have none; for
those, and for what a declaration does not say (the chance level, the FPR a TPR is read at), a
small fallback table covers the built-in attacks' headline metrics. A declaration always wins.
Whether a metric measures this client's data (`Metric.client`, what the risk level counts) is read
the same way: model inversion's scores of class representatives are not, in old results too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fedattack.results import AttackResult

_RATE = {"unit": "%", "scale": 100.0, "leak": "higher", "bounds": (0.0, 1.0), "digits": 2}
FALLBACK: dict[str, dict[str, Any]] = {
    "auc": {"label": "AUC", "unit": "", "scale": 1.0, "leak": "higher", "bounds": (0.0, 1.0), "digits": 3,
            "chance": 0.5},
    "tpr_at_1fpr": {**_RATE, "label": "TPR @ 1% FPR", "chance": 0.01, "at_fpr": 0.01},
    "tpr_at_01fpr": {**_RATE, "label": "TPR @ 0.1% FPR", "chance": 0.001, "at_fpr": 0.001},
    "accuracy": {**_RATE, "label": "accuracy"},
    "attack_accuracy": {**_RATE, "label": "attack accuracy", "client": False},
    "psnr": {"label": "PSNR", "unit": "dB", "scale": 1.0, "leak": "higher", "bounds": (0.0, None), "digits": 2,
             "client": False},
}
# An attack's headline metrics when its results declare no primary: the first ranks, the second is
# shown beside it.
FALLBACK_HEADLINES = {"membership": ("auc", "tpr_at_1fpr"), "inversion": ("attack_accuracy", "psnr")}
SECONDARY = {"auc": "tpr_at_1fpr", "attack_accuracy": "psnr"}  # shown beside a declared primary


@dataclass(frozen=True)
class Reading:
    """One metric as the verdict uses it (stored units unless said)."""

    key: str
    label: str
    unit: str
    scale: float
    leak: str                              # "higher" or "lower": the direction that leaks more
    digits: int
    bounds: tuple[float | None, float | None]
    chance: float | None = None
    at_fpr: float | None = None            # a TPR read at this FPR needs 1/#non-members <= it
    client: bool = True                    # measures this client's data (`Metric.client`)

    @property
    def suffix(self) -> str:
        """What follows a displayed number: '%' close up, any other unit after a space."""
        return "%" if self.unit == "%" else (f" {self.unit}" if self.unit else "")

    @property
    def difference_unit(self) -> str:
        return " pp" if self.unit == "%" else self.suffix  # two rates differ by percentage points


def declarations(result: AttackResult) -> dict[str, dict[str, Any]]:
    """A result's metric declarations as plain dicts by key (none for results that predate them)."""
    raw = getattr(result, "metric_info", None) or {}
    items = raw.items() if isinstance(raw, dict) else ((None, m) for m in raw)
    out: dict[str, dict[str, Any]] = {}
    for key, decl in items:
        d = dict(decl) if isinstance(decl, dict) else {k: getattr(decl, k) for k in dir(decl) if not k.startswith("_")}
        name = key if isinstance(key, str) else d.get("key")
        if isinstance(name, str):
            out[name] = d
    return out


def merged(results: Iterable[AttackResult]) -> dict[str, dict[str, Any]]:
    """Every declaration the results carry, the first of a key winning."""
    out: dict[str, dict[str, Any]] = {}
    for r in results:
        for key, d in declarations(r).items():
            out.setdefault(key, d)
    return out


def reading(key: str, declared: dict[str, dict[str, Any]]) -> Reading:
    """A metric's reading: its declaration over the fallback table over its bare key."""
    d = {**FALLBACK.get(key, {}), **{k: v for k, v in declared.get(key, {}).items() if v is not None}}
    label, unit = str(d.get("label") or key), str(d.get("unit") or "")
    if label.endswith(")") and " (" in label and not unit:  # an old-style label carrying its unit
        label, _, unit = label[:-1].rpartition(" (")
    leak = d.get("leak") if d.get("leak") in ("higher", "lower") else "higher"
    bounds = tuple(d.get("bounds") or d.get("range") or (None, None))
    return Reading(key, label, unit, float(d.get("scale") or 1.0), str(leak), int(d.get("digits") or 2),
                   (bounds[0], bounds[1]) if len(bounds) == 2 else (None, None),
                   _number(d.get("chance")), _number(d.get("at_fpr")), d.get("client") is not False)


def headlines(attack: str, present: set[str], declared: dict[str, dict[str, Any]]) -> list[str]:
    """The metric that ranks (the declared primary, else the fallback's) and one shown beside it."""
    primary = [k for k, d in declared.items() if d.get("primary") and d.get("leak") != "none" and k in present]
    if primary:
        beside = SECONDARY.get(primary[0])
        return [primary[0], *([beside] if beside in present else [])]
    fallback = [m for m in FALLBACK_HEADLINES.get(attack, ()) if m in present]
    leaking = [k for k, d in declared.items() if d.get("leak") in ("higher", "lower") and k in present]
    return fallback or leaking[:1] or sorted(present)[:1]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
