"""Issue #38, end to end: the `readout` results of a run whose server acted (`run["active_adversary"]`,
written by `evaluate`) and of its honest twin land on separate lines of the verdict, the active
one saying what the server did with only the settings it changed."""

from __future__ import annotations

from pathlib import Path

from fedattack.reports.collect import collect
from fedattack.reports.verdict_section import lead_lines
from tests.active.conftest import readout, train


def test_passive_and_active_servers_get_separate_lines(tmp_path: Path) -> None:
    secure = ("secure-aggregation",)
    acting = train(tmp_path / "acting", "imprint:isolate=true,rounds=1", secure, rounds=1)
    honest = train(tmp_path / "honest", None, secure, rounds=1)
    readout(acting, tmp_path / "results" / "acting", (0, 1, 2))
    readout(honest, tmp_path / "results" / "honest", (0, 1, 2))
    lines = lead_lines(collect([tmp_path / "results"]).results)
    text = "\n".join(lines)
    assert "against passive adversaries" in text and "against an active server: imprint(isolate=True)" in text
    active = [line for line in lines if line.strip().startswith("Active server: imprint(isolate=True)")]
    passive = [line for line in lines if line.strip().startswith("server (") and "(readout" in line]
    assert len(active) == 1 and len(passive) == 1, text
    assert "above 20 dB" in active[0] and "above 20 dB" in passive[0]
