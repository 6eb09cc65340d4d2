"""A report rendered from hand-made result files says what its inputs say."""

from __future__ import annotations

import csv
import json
import re
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_results import METHODS, SEEDS, THREATS, make

from fedattack.attacks.membership.family import MEMBERSHIP_METRICS
from fedattack.cli import cli
from fedattack.registry import UserError
from fedattack.reports.build import build_report
from fedattack.reports.collect import collect
from fedattack.reports.compare import relevant
from fedattack.results import AttackResult, Metric, metric_table


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("fake")
    made = make(root)
    out = root / "report"
    build_report([root / "results"], out, papers=["waffle-ibp:table3"])
    return made, out


def test_membership_table_matches_inputs(rendered) -> None:  # type: ignore[no-untyped-def]
    made, out = rendered
    rows = read_csv(out / "tables" / "membership.csv")
    assert len(rows) == len(METHODS) * len(THREATS)
    for row in rows:
        threat = row["threat model"].replace(" (upper bound)", "")
        mine = [r for r in made.results if r.attack == "membership" and r.threat_model == threat
                and r.run["path"].split("/")[-1].rsplit("-s", 1)[0] == row["method"]]
        assert len(mine) == int(row["n"]) == 4  # two victims x two seeds
        for metric in ("accuracy", "f1", "auc", "tpr_at_1fpr", "precision"):
            values = [r.metrics[metric] for r in mine]
            scale = 1.0 if metric == "auc" else 100.0
            assert float(row[f"{metric}_mean"]) == pytest.approx(statistics.fmean(values) * scale, rel=1e-9)
            assert float(row[f"{metric}_std"]) == pytest.approx(statistics.pstdev(values) * scale, rel=1e-9)


def test_oracle_is_labelled_upper_bound_and_sorted_last(rendered) -> None:  # type: ignore[no-untyped-def]
    _, out = rendered
    rows = read_csv(out / "tables" / "membership.csv")
    for method in METHODS:
        threats = [r["threat model"] for r in rows if r["method"] == method]
        assert threats == ["eavesdropper", "oracle (upper bound)"]


def test_utility_table_from_run_directories(rendered) -> None:  # type: ignore[no-untyped-def]
    made, out = rendered
    rows = {r["method"]: r for r in read_csv(out / "tables" / "utility.csv")}
    assert set(rows) == set(METHODS)
    for method in METHODS:
        for metric in ("mean", "majority", "minority", "gap", "variance"):
            values = [made.runs[(method, s)][metric] for s in SEEDS]
            assert float(rows[method][f"{metric}_mean"]) == pytest.approx(statistics.fmean(values))
            assert float(rows[method][f"{metric}_std"]) == pytest.approx(statistics.pstdev(values))


def test_markdown_cells_show_rounded_mean_and_std(rendered) -> None:  # type: ignore[no-untyped-def]
    made, out = rendered
    text = (out / "report.md").read_text()
    values = [r.metrics["psnr"] for r in made.results
              if r.attack == "inversion" and r.threat_model == "eavesdropper" and "fedavg-" in r.run["path"]]
    cell = f"{statistics.fmean(values):.2f} ± {statistics.pstdev(values):.2f}"
    line = next(row for row in text.splitlines() if row.startswith("| digits | fedavg | eavesdropper | none |")
                and "inversion" not in row and cell in row)
    assert line  # the inversion row of fedavg/eavesdropper carries the recomputed PSNR cell
    assert "membership (baseline: loss-threshold)" in text


def test_paper_numbers_beside_ours(rendered) -> None:  # type: ignore[no-untyped-def]
    _, out = rendered
    rows = read_csv(out / "tables" / "paper-waffle-ibp-table3.csv")
    # our data set is digits, the paper's CIFAR-10: the paper rows are listed as not run by us
    assert {r["method"] for r in rows} == {"fedavg", "waffle-ibp"}
    fedavg = next(r for r in rows if r["method"] == "fedavg")
    assert fedavg["paper:accuracy"] == "83.85 ± 1.62" and fedavg["paper:f1"] == "83.72 ± 2.19"


def test_html_is_self_contained(rendered) -> None:  # type: ignore[no-untyped-def]
    _, out = rendered
    page = (out / "report.html").read_text()
    sources = re.findall(r"""(?:src|href)\s*=\s*['"]([^'"]*)['"]""", page)
    assert sources, "figures should be embedded"
    assert all(s.startswith("data:image/png;base64,") for s in sources)
    assert "<link" not in page and "<script" not in page
    figures = sorted((out / "figures").glob("*.png"))
    assert len(re.findall("data:image/png;base64,", page)) == len(figures) >= 4  # 2 ROC, inversion, tradeoff


def test_unknown_paper_table_is_a_user_error(tmp_path: Path) -> None:
    make(tmp_path, with_inversion=False)
    with pytest.raises(UserError, match="unknown paper table"):
        build_report([tmp_path], tmp_path / "r", papers=["waffle-ibp:table99"])


def test_not_applicable_results_are_reported_not_averaged(tmp_path: Path) -> None:
    AttackResult(attack="membership", threat_model="eavesdropper", run={"method": "local", "dataset": "digits"},
                 victim=0, applicable=False, note="local puts nothing on the wire").save(tmp_path / "a.json")
    build_report([tmp_path / "a.json"], tmp_path / "r", figures=False)
    row = read_csv(tmp_path / "r" / "tables" / "membership.csv")[0]
    assert row["method"] == "local" and row["n"] == "0"
    assert "nothing on the wire" in row["note"]


def test_cli_report_and_one_line_error(tmp_path: Path) -> None:
    made = make(tmp_path, with_inversion=False)
    result = CliRunner().invoke(cli, ["report", str(made.root), "-o", str(tmp_path / "r"), "--no-figures"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r" / "report.html").is_file()
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(UserError, match="not a fedattack result"):
        CliRunner().invoke(cli, ["report", str(bad), "-o", str(tmp_path / "r2")], catch_exceptions=False,
                           standalone_mode=False)


def test_relevant_paper_tables_are_suggested(tmp_path: Path) -> None:
    AttackResult(attack="membership", threat_model="eavesdropper", victim=0, metrics={"accuracy": .7},
                 run={"method": "fedavg", "dataset": "cifar10", "partition": "shards"}).save(tmp_path / "a.json")
    # the attack matches Table 3; the attacked run's utility (shards = unimodal) matches Table 2
    # (IEEE Access numbering: Table 1 is the multimodal sub-populations)
    assert relevant(collect([tmp_path])) == ["waffle-ibp:table2", "waffle-ibp:table3"]


def test_two_settings_of_one_method_are_two_rows_each_beside_the_paper(tmp_path: Path) -> None:
    """Runs that differ in a hyperparameter must never be averaged into one row."""
    for name, hyper, acc in [("plain", {}, 0.8), ("shifted", {"r_init_mean": "1"}, 0.6)]:
        run = {"method": "waffle-ibp", "dataset": "cifar10", "hyper": hyper}
        AttackResult(attack="membership", threat_model="eavesdropper", run=run, victim=0,
                     metrics={"accuracy": acc, "f1": acc},
                     metric_info=metric_table(MEMBERSHIP_METRICS)).save(tmp_path / f"{name}.json")
    build_report([tmp_path], tmp_path / "r", papers=["waffle-ibp:table3"], figures=False)
    rows = {r["method"]: r for r in read_csv(tmp_path / "r" / "tables" / "membership.csv")}
    assert set(rows) == {"waffle-ibp", "waffle-ibp [r_init_mean=1.0]"}
    assert float(rows["waffle-ibp"]["accuracy_mean"]) == pytest.approx(80.0)
    assert float(rows["waffle-ibp [r_init_mean=1.0]"]["accuracy_mean"]) == pytest.approx(60.0)
    paper = {r["method"]: r for r in read_csv(tmp_path / "r" / "tables" / "paper-waffle-ibp-table3.csv")}
    assert paper["waffle-ibp [r_init_mean=1.0]"]["paper:accuracy"].startswith("56.20")
    assert paper["waffle-ibp"]["paper:accuracy"].startswith("56.20")


def _write_run(folder: Path, dataset: str, partition: str, options: dict, lr: float, seed: int,
               acc: float) -> None:
    folder.mkdir()
    spec = {"method": "fedavg", "dataset": dataset, "partition": partition, "seed": seed, "hyper": {},
            "recipe": {"epochs": 1, "batch_size": 10, "lr": lr}}
    manifest = {"spec": spec, "partition": {"name": partition, "options": options}, "complete": True,
                "utility": {"mean": acc, "std": 1.0, "variance": 1.0}}
    (folder / "federation.json").write_text(json.dumps(manifest))
    (folder / "metrics.json").write_text(json.dumps({"rounds": [], "final": manifest["utility"]}))


def test_runs_with_different_learning_rates_are_two_rows_but_seeds_average(tmp_path: Path) -> None:
    for name, lr, seed, acc in [("a", 0.1, 0, 60.0), ("b", 0.1, 1, 70.0), ("c", 0.05, 0, 90.0)]:
        _write_run(tmp_path / name, "digits", "iid", {}, lr, seed, acc)
    build_report([tmp_path], tmp_path / "r", figures=False)
    rows = {r["method"]: r for r in read_csv(tmp_path / "r" / "tables" / "utility.csv")}
    assert set(rows) == {"fedavg [lr=0.1]", "fedavg [lr=0.05]"}
    assert float(rows["fedavg [lr=0.1]"]["mean_mean"]) == pytest.approx(65.0)
    assert rows["fedavg [lr=0.1]"]["n"] == "2"


def test_partition_settings_are_two_rows_each_beside_the_papers_number(tmp_path: Path) -> None:
    for name, shards in [("a", 2), ("b", 3)]:
        _write_run(tmp_path / name, "mnist", "shards", {"classes_per_client": shards}, 0.04, 0, 90.0)
    assert relevant(collect([tmp_path])) == ["waffle-ibp:table2"]
    build_report([tmp_path], tmp_path / "r", papers=["waffle-ibp:table2"], figures=False)
    rows = read_csv(tmp_path / "r" / "tables" / "paper-waffle-ibp-table2.csv")
    ours = {r["partition"]: r["paper:mean"] for r in rows if r["partition"].startswith("shards [")}
    assert set(ours) == {"shards [classes_per_client=2]", "shards [classes_per_client=3]"}
    assert all(v.startswith("94.46") for v in ours.values())


def test_labels_and_scales_come_from_the_results_declarations(tmp_path: Path) -> None:
    """A new attack's metric shows with its own label and scale; an old file (no declarations)
    shows its keys and stored values."""
    leak = Metric(key="leak_rate", label="records leaked", unit="%", scale=100.0, primary=True)
    AttackResult(attack="brand-new", threat_model="eavesdropper", run={"method": "fedavg", "dataset": "digits"},
                 victim=0, metrics={"leak_rate": 0.25, "aside": 3.0},
                 metric_info=metric_table([leak])).save(tmp_path / "new.json")
    AttackResult(attack="old-attack", threat_model="eavesdropper", run={"method": "fedavg", "dataset": "digits"},
                 victim=0, metrics={"leak_rate": 0.25}).save(tmp_path / "old.json")
    build_report([tmp_path], tmp_path / "r", figures=False)
    new = read_csv(tmp_path / "r" / "tables" / "brand-new.csv")[0]
    old = read_csv(tmp_path / "r" / "tables" / "old-attack.csv")[0]
    assert float(new["leak_rate_mean"]) == pytest.approx(25.0) and float(new["aside_mean"]) == 3.0
    assert float(old["leak_rate_mean"]) == pytest.approx(0.25)
    text = (tmp_path / "r" / "report.md").read_text()
    assert "| records leaked (%) | aside | n |" in text and "| leak_rate | n |" in text


def test_report_names_the_software_and_warns_when_it_differs(tmp_path: Path) -> None:
    """One version: one line. Runs made by two versions (an experiment rerun after an upgrade
    reuses old cells) are pointed out, with how many of each."""
    make(tmp_path, with_inversion=False)
    manifests = sorted((tmp_path / "runs").glob("*/federation.json"))
    versions = {"fedattack": "0.1.0", "commit": "aaaaaaaaaaaa", "torch": "2.5.0", "python": "3.11.7"}

    def stamp(files: list[Path], v: dict[str, str]) -> None:
        for f in files:
            f.write_text(json.dumps({**json.loads(f.read_text()), "versions": v}))

    def summary_line() -> str:
        build_report([tmp_path / "results"], tmp_path / "report", figures=False)
        text = (tmp_path / "report" / "report.md").read_text()
        return next(line for line in text.splitlines() if "federation(s)" in line)

    stamp(manifests, versions)
    line = summary_line()
    assert f"Made by fedattack 0.1.0 (commit aaaaaaaaaaaa), torch 2.5.0, Python 3.11.7 ({len(manifests)} run(s)" in line
    assert "predate the recording of software" in line  # the fake results record none
    assert "different versions" not in line
    stamp(manifests[:2], {**versions, "commit": "bbbbbbbbbbbb"})
    line = summary_line()
    assert "Made by 2 different versions of the software" in line
    assert "(commit bbbbbbbbbbbb), torch 2.5.0, Python 3.11.7 (2 run(s), 0 result(s))" in line
    assert f"(commit aaaaaaaaaaaa), torch 2.5.0, Python 3.11.7 ({len(manifests) - 2} run(s)" in line
