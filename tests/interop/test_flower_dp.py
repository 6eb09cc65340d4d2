"""Issue #45 item 4: a Flower app's DP audited end to end (`fedattack.audit.flower`).

The example app (examples/flower_dp/dp_app.py) on 2 partitions for 2 rounds, 32 canary nodes,
on the in-process grid: Flower's DP wrappers are claim-consistent and their noise is measured at
the std they claim; the same wrapper with its noise planted away is refuted by the canaries (the
audited lower bound above the claim); a clip-only "privacy" filter is not DP. About 2 s an audit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("flwr.supercore.privacy_accounting", reason="the Flower DP audit needs flwr>=1.42 (its accountant)")

from fedattack.audit.flower import audit_flower_app  # noqa: E402
from tests.interop import flower_dp_apps as apps  # noqa: E402

CANARIES = 32


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("kind", ["server_side", "client_side", "accounted", "adaptive"])
def test_flowers_dp_wrappers_are_audited_consistent_with_their_claim(kind: str) -> None:
    result = audit_flower_app(apps.small(kind), canaries=CANARIES)
    claim, best = result["claimed"], max(v["epsilon"] for v in result["views"].values())
    assert claim["epsilon"] == pytest.approx(0.95, abs=0.01) and claim["population"] == apps.PARTITIONS + CANARIES
    assert result["verdict"].startswith("claim consistent (audited epsilon ") and best <= claim["epsilon"]
    assert result["noise"]["reaches_aggregate"] and all(f > 0 for f in result["noise"]["fresh_std"])
    if result["noise"]["claimed_std"] is not None:  # fixed clipping: the noise measured is the noise claimed
        for measured in result["noise"]["fresh_std"]:
            assert measured == pytest.approx(result["noise"]["claimed_std"], rel=0.1)
    if kind == "accounted":
        assert claim["accountant"].startswith("the app's own Flower RdpAccountant (2 releases)")


def test_the_wrapper_with_its_noise_removed_is_refuted_by_the_canaries() -> None:
    result = audit_flower_app(apps.small("noise_removed"), canaries=CANARIES)
    claimed = result["claimed"]["epsilon"]
    assert claimed == pytest.approx(0.95, abs=0.01)
    assert result["verdict"].startswith("claim refuted (audited epsilon ")
    assert all(v["epsilon"] > claimed and v["auc"] > 0.99 for v in result["views"].values())
    assert not result["noise"]["reaches_aggregate"] and result["noise"]["fresh_std"] == [0.0, 0.0]


def test_client_side_clipping_without_its_mod_is_refuted_though_noise_is_added() -> None:
    """The server adds sigma C / m, but no client clips: a canary's 100 C update swamps the noise."""
    result = audit_flower_app(apps.forgotten_mod(), canaries=CANARIES)
    assert result["noise"]["reaches_aggregate"]
    assert result["verdict"].startswith("claim refuted (audited epsilon ")
    assert max(v["epsilon"] for v in result["views"].values()) > result["claimed"]["epsilon"]


def test_a_noise_free_privacy_filter_is_not_differentially_private() -> None:
    result = audit_flower_app(apps.small("noise_free_filter"), canaries=CANARIES)
    assert result["claimed"]["epsilon"] is None
    assert result["verdict"] == "not differentially private (no noise reaches the aggregate)"


def test_the_same_seed_gives_the_same_audit_and_another_seed_other_canaries() -> None:
    first, again = (audit_flower_app(apps.small("server_side"), canaries=8, seed=3) for _ in range(2))
    other = audit_flower_app(apps.small("server_side"), canaries=8, seed=4)
    strip = {"seconds"}
    assert json.dumps({k: v for k, v in first.items() if k not in strip}) == json.dumps(
        {k: v for k, v in again.items() if k not in strip})
    assert first["noise"]["fresh_std"] != other["noise"]["fresh_std"]


def test_the_command_prints_the_claim_and_the_verdict_and_writes_the_audit(tmp_path: Path) -> None:
    from tests.hostile._cli import fedattack

    out = tmp_path / "audit.json"
    outcome = fedattack("audit-flower", "tests.interop.flower_dp_apps:server_side", "--canaries", "8",
                        "--out", str(out))
    assert outcome.code == 0, outcome.err
    lines = outcome.out.splitlines()
    assert lines[0].startswith("claimed: epsilon 0.95 at delta 1e-05 (DifferentialPrivacyServerSideFixedClipping")
    assert any(line.startswith("verdict: claim consistent (audited epsilon ") for line in lines)
    assert json.loads(out.read_text())["schema"] == "fedattack.audit-flower/1"
