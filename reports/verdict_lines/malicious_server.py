"""What a server that acted for one round would take from this federation (`malicious-server`).

The run's server did not act; the `malicious-server` threat model asks what it would have got had
it acted once, from the downlinks the run recorded (its results declare `acts` in their threat
model). Those are a different adversary from the passive ones and from a server that did act in
training (`active_server.py`), so they get lines and a level of their own, in words: the share of
a client's training images it would recover above 20 dB with its interval over victims and n,
the verbatim share (above 40 dB), chance, whether the run's defences stopped it, and which
registered client checks would have refused the round, in how many of the victims' rounds.
"""

from __future__ import annotations

import math

from fedattack.intervals import Interval, binomial_interval, mean_interval
from fedattack.reports import numbers
from fedattack.reports.absolute_section import finding
from fedattack.reports.claims import Claim, measured_chance
from fedattack.reports.collect import LoadedResult
from fedattack.reports.families import metric_reading
from fedattack.reports.risk import risk
from fedattack.reports.verdict_lines.base import VERDICT_LINES, Federation, Level, LineSource, Part

AGAINST = "a server that acts for one round"


def metric(results: list[LoadedResult], key: str) -> Interval:
    return mean_interval([float(r.result.metrics[key]) for r in results
                          if isinstance(r.result.metrics.get(key), (int, float))
                          and math.isfinite(float(r.result.metrics[key]))])


def share(results: list[LoadedResult], key: str, against: tuple[float, ...] = (), note: str = "none") -> str:
    """A share in the report's one notation (`numbers.shown`: digits from the interval, never
    rounded onto the chance it is judged against)."""
    return numbers.shown(metric(results, key), metric_reading(results, key), note=note, against=against)


def sentence(results: list[LoadedResult], missing: int) -> str:
    """One attack's line over its applicable results (one per victim)."""
    n = len({r.result.victim for r in results})
    found = metric(results, "recovered_20")
    level = measured_chance(results, "recovered_20")
    chance = () if level is None else (level,)
    defences = sorted({d.get("name", "") for r in results for d in r.result.run.get("defences") or []})
    stops = "do not stop it" if level is not None and found.has_interval and found.low > level else "stop it here"
    said = (f"{AGAINST} would recover {share(results, 'recovered_20', chance)} of this client's training "
            f"images above 20 dB ({share(results, 'recovered_40')} verbatim, above 40 dB")
    if level is not None:
        said += f"; chance {numbers.level(level, metric_reading(results, 'recovered_20'), found, chance)}"
    said += f"; {numbers.count(n)})"
    said += f"; this federation's defences ({', '.join(defences)}) {stops}" if defences else ""
    said += checks_clause(results)
    said += f"; {missing} more victims not applicable" if missing else ""
    return said + "."


def checks_clause(results: list[LoadedResult]) -> str:
    """Which registered client checks would refuse the acting round, each in k of n victims'
    rounds with its exact 95% interval (`extra["client_checks"]`); results written before it
    was recorded say downlink-check's alone."""
    judged = [r.result.extra["client_checks"] for r in results if isinstance(r.result.extra.get("client_checks"), dict)]
    if not judged:
        if not metric(results, "flagged_downlink_check").n:
            return ""
        return (f"; a client running downlink-check would refuse the round in "
                f"{share(results, 'flagged_downlink_check')} of rounds")
    parts = []
    for name in sorted({n for checks in judged for n in checks}):
        decided = [c[name] for c in judged if name in c and c[name].get("refused") is not None]
        if not decided:
            parts.append(f"{name} does not apply to this method")
            continue
        k, n = sum(bool(c["refused"]) for c in decided), len(decided)
        ci = binomial_interval(k, n, n, "exact")
        rate = f"{100 * k / n:.0f}% [{100 * ci.low:.0f}, {100 * ci.high:.0f}]"
        needs = "" if all(c.get("alone", True) for c in decided) else \
            " (it compares the round's downlinks: it needs the other clients' digests over a channel the server " \
            "cannot forge, which one client alone does not have)"
        parts.append(f"{name} in {k} of {n} ({rate}, exact 95%){needs}")
    return "; the registered client checks would refuse the round: " + ", ".join(parts)


@VERDICT_LINES.register("malicious-server")
class MaliciousServerLines(LineSource):
    """The what-if of one acting round, apart from the passive lines."""

    order = 15

    def takes(self, claim: Claim) -> bool:
        return claim.acts

    def part(self, fed: Federation, claims: list[Claim]) -> Part:
        out = Part()
        for c in claims:
            if c.chosen is None and c.family.key != "recovered_20":
                continue  # a passive attack named under it: its result says why it did not run
            if c.chosen is None:
                why = next(iter(c.not_applicable), "no result")
                out.lines.append(f"*Had the server acted* (**{c.threat}**): not applicable: {why}.")
                continue
            missing = sum(c.not_applicable.values())
            out.lines.append(f"*Had the server acted* (**{c.threat}**, sees {c.observes}; {c.chosen.attack}): "
                             + sentence(c.chosen.results, missing))
        if claims:
            r = risk(claims)
            out.levels.append(Level(r, AGAINST, finding(r), named=True))
        return out
