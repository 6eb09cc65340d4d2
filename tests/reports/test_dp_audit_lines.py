"""The verdict states each run's DP audit (issue #45, item 5): a correct dp-fedavg audited by
`fedattack audit --white-box` reads "consistent", a dp-fedavg with a zoo bug "refuted", a run that
claims DP unaudited says how to audit it, and a run without a DP claim says nothing about DP.

The runs are trained and audited for real (tiny federations, 64 canaries, about a second each);
the attack results beside them are hand-made (`fake_results.membership`), since the verdict's DP
lines read only the run's manifest and its audits.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fedattack.audit.zoo import planted
from fedattack.cli import cli
from fedattack.federation.train import train_federation
from fedattack.registry import UserError
from fedattack.reports.build import build_report
from fedattack.reports.collect import collect
from fedattack.reports.verdict_section import lead_lines
from fedattack.target import Recipe
from tests.conftest import tiny_spec
from tests.reports.fake_results import membership

DP = {"name": "dp-fedavg", "settings": {"clip_norm": 0.5, "noise_multiplier": 8.0}}


def train(root: Path, name: str, *defences: dict) -> Path:
    spec = tiny_spec(num_clients=4, fraction=1.0, rounds=2, executor="batched",
                     recipe=Recipe(epochs=1, batch_size=16, lr=0.1), defences=tuple(defences))
    run = train_federation(spec, root / "runs" / name, progress=False)
    rng = np.random.default_rng(0)
    for victim in range(2):
        membership("fedavg", "eavesdropper", victim, 0, run, rng).save(root / "results" / name / f"m-{victim}.json")
    return run


def audit(run: Path, *args: str) -> None:
    done = CliRunner().invoke(cli, ["audit", str(run), "--white-box", "--canaries", "64", *args],
                              standalone_mode=False)
    assert done.exception is None, done.output


def lines(*paths: Path) -> str:
    return "\n".join(lead_lines(collect(list(paths)).results))


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("dp_accounting")
    root = tmp_path_factory.mktemp("dpverdict")
    audit(train(root, "dp", DP))                       # the default --out: runs/dp.audit-whitebox.json
    with planted("bug-noise-missing"):                 # a dp-fedavg that adds no noise, trained as such
        buggy = train(root, "buggy", {**DP, "name": "bug-noise-missing"})
    audit(buggy, "--out", str(root / "results" / "buggy" / "audit.json"))  # elsewhere: found by its record
    train(root, "plain")
    train(root, "unaudited", DP)
    train(root, "silent", {"name": "dp-fedavg", "settings": {"clip_norm": 0.5, "noise_multiplier": 0.0}})
    return root


def test_a_correct_dp_fedavg_is_consistent(root: Path) -> None:
    said = lines(root / "results" / "dp")
    audited = json.loads((root / "runs" / "dp.audit-whitebox.json").read_text())
    claim, bound = audited["claimed"]["epsilon"], audited["bounds"]["gdp"]["epsilon"]
    assert bound <= claim
    found = re.search(r"DP claim consistent: audited epsilon ([\d.]+) \(95% confidence, Gaussian DP; epsilon-delta "
                      r"bound [\d.]+\) against claimed ([\d.]+) \(dp-fedavg, delta 1e-05\), one run, 64 canaries", said)
    assert found, said
    assert float(found[1]) == pytest.approx(bound, abs=6e-3) and float(found[2]) == pytest.approx(claim, rel=2e-3)


def test_a_bug_that_adds_no_noise_is_refuted(root: Path) -> None:
    said = lines(root / "results" / "buggy")
    found = re.search(r"DP claim refuted: audited epsilon ([\d.]+) .* against claimed ([\d.]+) "
                      r"\(bug-noise-missing", said)
    assert found and float(found[1]) > float(found[2]), said
    assert "planted" not in said and "consistent" not in said


def test_a_planted_bug_is_refuted_and_said_to_be_planted(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "planted.json"
    audit(root / "runs" / "dp", "--plant", "bug-noise-missing", "--out", str(out))
    said = lines(root / "results" / "dp", out)
    assert "DP claim refuted" in said and "DP claim consistent" in said, said  # the planted audit and the run's own
    assert "bug `bug-noise-missing` planted in place of the run's dp-fedavg (not the run as trained)" in said


def test_a_run_without_a_dp_claim_says_nothing_about_dp(root: Path, tmp_path: Path) -> None:
    said = lines(root / "results" / "plain")
    assert said and not re.search(r"\bDP\b|differentially|epsilon|audit", said), said
    md = build_report([root / "results" / "plain"], tmp_path / "report", figures=False).read_text()
    assert not re.search(r"DP claim|differentially private", md)


def test_an_unaudited_claim_says_how_to_audit_it(root: Path) -> None:
    said = lines(root / "results" / "unaudited")
    assert re.search(r"DP claim not audited: dp-fedavg claims epsilon [\d.]+ at delta 1e-05; `fedattack audit "
                     r"\S+unaudited --white-box` tests it", said), said


def test_no_noise_is_not_differentially_private(root: Path) -> None:
    said = lines(root / "results" / "silent")
    assert "Not differentially private: dp-fedavg states no epsilon (no noise: no privacy guarantee)" in said, said


def test_the_report_carries_the_lines(root: Path, tmp_path: Path) -> None:
    md = build_report([root / "results"], tmp_path / "report", figures=False).read_text()
    verdict = md[md.index("## Verdict"):]
    assert "DP claim consistent" in verdict and "DP claim refuted" in verdict and "DP claim not audited" in verdict


def test_a_named_audit_of_no_reported_run_is_refused(root: Path) -> None:
    with pytest.raises(UserError, match=r"audits run .*buggy, which none of the report's") as caught:
        collect([root / "results" / "dp", root / "results" / "buggy" / "audit.json"])
    assert "\n" not in str(caught.value)


def test_a_multirun_audits_verdict_reads_its_gaussian_dp_bound() -> None:
    """The multi-run audit's primary number is its Gaussian-DP bound (the one that can reach the
    claim); the assumption-free epsilon-delta bound stands beside it, never in its place."""
    from fedattack.reports.verdict_lines.dp_audit import audited

    data = {"runs": 6000, "confidence": 0.95, "claimed": {"epsilon": 8.0},
            "bound": {"epsilon": 1.1, "mu": 1.4, "epsilon_of_mu": 6.4},
            "estimate": {"epsilon": 7.4, "epsilon_low": 7.0, "epsilon_high": 7.8}}
    found = audited(data)
    assert found.epsilon == 6.4 and found.bound.startswith("Gaussian DP")
    assert "epsilon-delta bound 1.1" in found.beside and "6,000 runs" in found.how
