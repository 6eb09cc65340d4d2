"""The verdict: ranking, direction of each sentence, flags, intervals that cover, and its place."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_results import make

from fedattack.intervals import difference_interval
from fedattack.reports import numbers
from fedattack.reports.aggregate import Stat
from fedattack.reports.build import build_report
from fedattack.reports.collect import LoadedResult, RunInfo
from fedattack.reports.comparison_section import sentences
from fedattack.reports.figures import clipped_error, series_styles
from fedattack.reports.verdict import Group, build_groups
from fedattack.results import AttackResult


def loaded(method: str, victim: int, seed: int, metrics: dict[str, float], *, attack: str = "membership",
           threat: str = "eavesdropper", nonmembers: int = 200, extra: dict[str, Any] | None = None) -> LoadedResult:
    stats = {"nonmembers": nonmembers, "fpr_resolution": 1 / nonmembers}
    more = {"membership": stats} if attack == "membership" else {}
    result = AttackResult(attack=attack, threat_model=threat, run={"method": method}, victim=victim, seed=seed,
                          metrics=metrics, extra={**more, **(extra or {})})
    run = RunInfo(method=method, dataset="digits", partition="iid", seed=seed)
    return LoadedResult(result, Path(f"/nowhere/{method}-{victim}-{seed}.json"), run)


def audit(means: dict[str, float], units: int = 6, spread: float = 0.02, rng_seed: int = 0,
          **kw: Any) -> list[LoadedResult]:
    """`units` victims and seeds per method, AUC (and TPR) around the given means."""
    rng = np.random.default_rng(rng_seed)
    out = []
    for method, mean in means.items():
        for u in range(units):
            auc = float(np.clip(mean + rng.normal(0, spread), 0, 1))
            out.append(loaded(method, u % 3, u // 3, {"auc": auc, "tpr_at_1fpr": max(0.0, (auc - .5) / 4)}, **kw))
    return out


def only(groups: list[Group]) -> Group:
    assert len(groups) == 1
    return groups[0]


def test_methods_ranked_by_leakage_and_the_sentence_says_which_way() -> None:
    g = only(build_groups(audit({"waffle-ibp": 0.55, "fedavg": 0.8, "fedprox": 0.7})))
    assert [e.method for e in g.entries] == ["fedavg", "fedprox", "waffle-ibp"]
    waffle = g.entry("waffle-ibp")
    assert waffle is not None and waffle.diff is not None and waffle.diff.paired
    assert waffle.diff.interval.high < 0 < 0.8 - 0.55
    text = " ".join(sentences([g]))
    assert "waffle-ibp leaks less than fedavg" in text
    assert "fedprox leaks less than fedavg" in text
    assert "more than" not in text


def test_a_metric_declared_lower_is_more_leakage_ranks_the_other_way() -> None:
    """Declarations as `fedattack.results.Metric.to_json` writes them into `AttackResult.metric_info`."""
    decl = {"distance": {"key": "distance", "label": "distance", "unit": "", "scale": 1.0, "leak": "lower",
                         "headline": True, "primary": True, "bounds": [0.0, None], "digits": 2},
            "steps": {"key": "steps", "label": "steps", "leak": "none", "headline": True, "primary": False}}
    results = [loaded(m, v, 0, {"distance": base + 0.01 * v, "steps": 10.0}, attack="probe")
               for m, base in (("fedavg", 1.0), ("waffle-ibp", 3.0)) for v in range(5)]
    for r in results:
        r.result.metric_info = decl  # type: ignore[attr-defined]  # the field the results carry (helper B)
    g = only(build_groups(results))
    assert [m.key for m in g.metrics] == ["distance"] and g.primary.leak == "lower"
    assert [e.method for e in g.entries] == ["fedavg", "waffle-ibp"]
    assert "waffle-ibp leaks less than fedavg" in sentences([g])[0]


def test_chance_is_flagged_where_the_auc_interval_holds_half() -> None:
    g = only(build_groups(audit({"fedavg": 0.5, "waffle-ibp": 0.85}, units=9)))
    fedavg, waffle = g.entry("fedavg"), g.entry("waffle-ibp")
    assert fedavg is not None and waffle is not None
    assert "AUC holds chance (0.5)" in fedavg.flags
    assert not any("chance" in f for f in waffle.flags)
    assert "AUC holds chance (0.5): fedavg." in sentences([g])[0]


def test_a_decisive_difference_is_stated_even_where_neither_number_is_above_chance() -> None:
    """The issue: a paired difference of [+0.019, +0.045] AUC was summarised as "neither leaks
    detectably". The difference decides the comparison; where each number lies against chance is
    said of that number, apart from it."""
    g = only(build_groups(audit({"fedavg": 0.45, "waffle-ibp": 0.5}, units=9, spread=0.01)))
    fedavg = g.entry("fedavg")
    assert fedavg is not None and fedavg.flags == ["AUC below chance (0.5; see the verdict above for why)"]
    lead = sentences([g])[0]
    assert "waffle-ibp leaks more than fedavg" in lead and "neither" not in lead
    assert re.search(r"AUC below chance \(0\.5; [^)]*\): [^.]*fedavg\.", lead)


def test_methods_attacked_through_different_reconstructions_are_compared_in_one_group() -> None:
    results = audit({"fedavg": 0.8})
    for r in results:
        r.result.reconstruction = "uplink"
    waffle = audit({"waffle-ibp": 0.6}, rng_seed=1)
    for r in waffle:
        r.result.reconstruction = "factors-inferred"
    g = only(build_groups(results + waffle))
    assert [e.name for e in g.entries] == ["fedavg (uplink)", "waffle-ibp (factors-inferred)"]
    assert "waffle-ibp (factors-inferred) leaks less than fedavg (uplink)" in sentences([g])[0]


def test_one_victim_prints_no_interval_and_concludes_nothing() -> None:
    results = audit({"fedavg": 0.8, "waffle-ibp": 0.6}, units=1)
    g = only(build_groups(results))
    fedavg = g.entry("fedavg")
    assert fedavg is not None and math.isnan(fedavg.stats["auc"].low)
    auc = results[0].result.metrics["auc"]
    assert numbers.shown(fedavg.stats["auc"], g.primary) == f"{auc:.2f} (1 victim, no interval)"
    text = sentences([g])[0]
    assert "cannot be compared (no interval on one side) with fedavg" in text
    assert "[" not in text and "±" not in text
    assert "no interval (n=1)" in fedavg.flags


def test_a_missing_reference_is_named_and_every_method_still_stated() -> None:
    g = only(build_groups(audit({"fedprox": 0.7, "waffle-ibp": 0.6}), reference="fedavg"))
    lines = sentences([g])
    assert "no fedavg results to compare with" in lines[0]
    assert lines[1].startswith("fedprox: AUC 0.") and lines[2].startswith("waffle-ibp: AUC 0.")


def test_too_few_victims_are_flagged_beside_every_interval() -> None:
    g = only(build_groups(audit({"fedavg": 0.8, "waffle-ibp": 0.6}, units=2)))
    text = " ".join(sentences([g]))
    assert text.count("[") == text.count("too few for the interval to be more than about their range")


def test_tpr_at_1pct_fpr_only_where_the_non_members_resolve_it() -> None:
    coarse = only(build_groups(audit({"fedavg": 0.8, "waffle-ibp": 0.6}, nonmembers=50)))
    fine = only(build_groups(audit({"fedavg": 0.8, "waffle-ibp": 0.6}, nonmembers=100)))
    assert not any(e.measurable(coarse.metrics[1]) for e in coarse.entries)
    assert "TPR @ 1% FPR not measurable (1/#non-members = 0.02)" in sentences([coarse])[0]
    assert "TPR" not in " ".join(sentences([coarse])[1:])  # said once, in the lead
    assert all(e.measurable(fine.metrics[1]) for e in fine.entries)
    assert re.search(r"TPR @ 1% FPR [\d.]+% \[[\d.]+, [\d.]+\] \(6 victim-seed pairs\) against",
                     " ".join(sentences([fine])))


def test_the_verdict_is_reproducible() -> None:
    results = audit({"fedavg": 0.7, "waffle-ibp": 0.6}, spread=0.1)
    a, b = build_groups(results), build_groups(list(reversed(results)))
    assert sentences(a) == sentences(b)


@pytest.mark.parametrize("paired", [True, False])
def test_the_difference_interval_covers_the_true_difference(paired: bool) -> None:
    """200 simulated audits of 12 victims per method with a known difference of -0.05 AUC.

    A 95% interval should cover in 95% of them. With 200 trials the binomial standard error of
    the coverage is 1.5 points, so chance alone moves it within 95 ± 4.6 (3 SE); the bootstrap
    at n = 12 is known to undercover by a point or two, so the bound below is 0.88, and the
    upper bound 0.995 catches an interval too wide to be of use. Widths are checked as well,
    so a trivially wide interval cannot pass.
    """
    rng = np.random.default_rng(99)
    covered, widths = 0, []
    for trial in range(200):
        victim = rng.normal(0, 0.05, 12)  # victims differ, and both methods meet the same victims when paired
        other = victim if paired else rng.normal(0, 0.05, 12)
        a = 0.60 + victim + rng.normal(0, 0.02, 12)
        b = 0.65 + other + rng.normal(0, 0.02, 12)
        keys_b = [(0, i, trial) if paired else (1, i, trial) for i in range(12)]
        d = difference_interval({(0, i, trial): x for i, x in enumerate(a)}, dict(zip(keys_b, b)), seed=trial)
        assert d.paired == paired
        covered += d.interval.low <= -0.05 <= d.interval.high
        widths.append(d.interval.width)
    assert 0.88 <= covered / 200 <= 0.995
    assert np.mean(widths) < (0.04 if paired else 0.1)


def test_the_report_opens_with_the_verdict(tmp_path: Path) -> None:
    make(tmp_path, with_inversion=False)
    md_path = build_report([tmp_path / "results", tmp_path / "runs"], tmp_path / "report", figures=False)
    md = md_path.read_text()
    assert md.index("## Verdict") < md.index("### utility") < md.index("## Provenance")
    assert "cannot be told apart from fedavg" in md or "than fedavg" in md
    html = (tmp_path / "report" / "report.html").read_text()
    assert html.index(">Verdict<") < html.index(">utility<")
    assert "<details><summary>Provenance</summary>" in html
    assert (tmp_path / "report" / "tables" / "verdict.csv").read_text().count("\n") == 1 + 2 * 2 * 2


def test_palette_stays_distinct_for_any_number_of_series() -> None:
    for n in (3, 11, 25, 90):
        styles = series_styles(n)
        assert len({(s["color"], s["ls"], s["marker"]) for s in styles}) == n


def test_error_bars_stop_at_the_metric_range() -> None:
    (low,), (high,) = clipped_error(Stat(96.0, 10.0, 4), (0.0, 100.0))
    assert (low, high) == (10.0, 4.0)
    (low,), (high,) = clipped_error(Stat(3.0, 10.0, 4), (0.0, 100.0))
    assert (low, high) == (3.0, 10.0)


def _on(results: list[LoadedResult], partition: str = "iid", setting: str = "") -> list[LoadedResult]:
    for r in results:
        r.run = RunInfo(method=r.run.method, dataset=r.run.dataset, partition=partition, seed=r.run.seed,
                        variant=setting, setting=setting)
    return results


def test_partitions_and_settings_are_separate_verdicts_with_every_victim_kept() -> None:
    """The same seeds and victims on two partitions (or at two local-epoch counts) are different
    audits: pooled, one partition's numbers overwrote the other's under the same victim."""
    shards = _on(audit({"fedavg": 0.8, "waffle-ibp": 0.6}), "shards")
    multi = _on(audit({"fedavg": 0.6, "waffle-ibp": 0.8}, rng_seed=1), "multimodal")
    groups = build_groups(shards + multi)
    assert sorted(g.scope for g in groups) == ["multimodal", "shards"]
    for g in groups:
        assert all(e.stats["auc"].n == 6 for e in g.entries)
        fedavg = g.entry("fedavg")
        assert fedavg is not None and fedavg.stats["auc"].mean == pytest.approx(0.8 if g.partition == "shards" else 0.6,
                                                                             abs=0.05)
    assert any("on digits (shards)" in s for s in sentences(groups))
    epochs = [_on(audit({"fedavg": m, "waffle-ibp": 0.55}, rng_seed=e), setting=f"epochs={e}")
              for e, m in ((1, 0.52), (20, 0.9))]
    by_setting = {g.setting: g for g in build_groups(epochs[0] + epochs[1])}
    assert set(by_setting) == {"epochs=1", "epochs=20"}
    high = by_setting["epochs=20"]
    assert high.reference == "fedavg [epochs=20]"  # each setting compared with its own reference
    waffle = high.entry("waffle-ibp [epochs=20]")
    assert waffle is not None and waffle.diff is not None and waffle.diff.interval.high < 0


def test_rows_and_the_privacy_utility_figure_name_each_partition() -> None:
    """The detail tables split results by partition where there are several, and the figure
    finds each row's runs by that same key (its points were missing when the keys differed)."""
    from fedattack.reports.aggregate import attack_tables
    from fedattack.reports.collect import Inputs
    from fedattack.reports.figures import _utility

    results = _on(audit({"fedavg": 0.8, "waffle-ibp": 0.6}), "shards") + \
        _on(audit({"fedavg": 0.6, "waffle-ibp": 0.8}, rng_seed=1), "multimodal")
    for r in results:
        r.run.utility = {"mean": 90.0 if r.run.partition == "shards" else 80.0}
        r.run.path = Path(f"/nowhere/{r.run.method}-{r.run.partition}-{r.run.seed}")
    table = next(t for t in attack_tables(Inputs(results, [])) if t.name == "membership")
    assert sorted({row.key[0] for row in table.rows}) == ["digits (multimodal)", "digits (shards)"]
    for row in table.rows:
        assert row.n == 6
        utility = _utility(results, "membership", row.key)
        assert utility.n == 2 and utility.mean == (90.0 if "shards" in row.key[0] else 80.0)


def test_the_log_roc_view_starts_at_one_over_the_non_members(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Below 1/#non-members a rate cannot be told from zero: the log-log view neither draws the
    averaged curve there nor extends its axes below the finest resolution of the curves shown."""
    from fedattack.reports import figures

    drawn = []
    monkeypatch.setattr(figures, "_save", lambda fig, path: drawn.append(fig))
    fpr = [0.0, 0.02, 0.1, 0.5, 1.0]
    results = []
    for method, nonmembers in (("fedavg", 50), ("waffle-ibp", 200)):
        for victim in range(2):
            r = loaded(method, victim, 0, {"auc": 0.7}, nonmembers=nonmembers)
            r.result.curves = {"roc_fpr": fpr if method == "fedavg" else [0.0, 0.005, *fpr[1:]],
                               "roc_tpr": [0.0, 0.3, 0.5, 0.8, 1.0] + ([1.0] if method != "fedavg" else [])}
            results.append(r)
    assert len(figures.roc_figures(results, tmp_path)) == 1
    log = drawn[0].axes[1]
    assert log.get_xlim()[0] == pytest.approx(1 / 200)
    floors = {"fedavg": 1 / 50, "waffle-ibp": 1 / 200}
    for line in log.get_lines():
        method = line.get_label().split(" ")[0]
        if method in floors:
            assert min(line.get_xdata()) >= floors[method]


def test_a_named_recipe_labels_a_run_by_its_name_and_what_was_set_beside_it() -> None:
    """recipe=personal presets a dozen settings; a label listing them all buried the figures'
    legends. The preset values count as the recipe's own defaults."""
    from fedattack.reports.collect import variant_of

    assert variant_of("waffle-ibp", {"recipe": "personal"}) == "recipe=personal"
    assert variant_of("waffle-ibp", {"recipe": "personal", "kl_weight": 0.1}) == "kl_weight=0.1, recipe=personal"
    assert variant_of("waffle-ibp", {"recipe": "literal"}) == ""  # the method's default recipe
    assert variant_of("waffle-ibp", {"r_init_mean": 1.0}) == "r_init_mean=1.0"


def test_one_methods_many_reconstructions_are_named_once_with_the_nearest_and_farthest_difference() -> None:
    results = audit({"fedavg": 0.8})
    for r in results:
        r.result.reconstruction = "uplink"
    recons = {"factors-a": 0.7, "factors-b": 0.65, "factors-c": 0.6, "factors-d": 0.55}
    for i, (recon, mean) in enumerate(recons.items()):
        waffle = audit({"waffle-ibp": mean}, rng_seed=i + 1)
        for r in waffle:
            r.result.reconstruction = recon
        results += waffle
    lines = sentences([only(build_groups(results))])
    lead = lines[0]
    assert "waffle-ibp (factors-a, factors-b, factors-c, factors-d) leaks less than fedavg (uplink)" in lead
    assert re.search(r"differences from -0\.\d+ \[.*\] \(6 victim-seed pairs, paired\), factors-a, "
                     r"to -0\.2\d* \[.*\] \(6 victim-seed pairs, paired\), factors-d\)", lead)
    assert lead.count("difference") == 1 and len(lines) == 5  # every comparison still below
