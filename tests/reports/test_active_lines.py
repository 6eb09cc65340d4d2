"""Issue #38: a report keeps passive and active adversaries apart. Results of a run whose server
acted (`run["active_adversary"]`) form their own verdict lines, which say in words what the server
did; the honest server's results on the same data stay on lines of their own."""

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
    active = [line for line in lines if "the server acting (imprint, the victim isolated" in line]
    passive = [line for line in lines if "acting" not in line]
    assert len(active) == 1 and len(passive) == 1, lines
    assert passive[0].startswith("Readout on digits, server (") and "n=" in active[0]
