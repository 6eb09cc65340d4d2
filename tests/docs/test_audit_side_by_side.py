"""benchmarks/README.md's quiet four-federation side by side (issue #47) is the committed JSON
files' table, row for row, so the page cannot drift from the measurements it cites."""

from __future__ import annotations

from pathlib import Path

from benchmarks import audit_side_by_side as sbs

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "benchmarks" / "measured" / "bench_audit-2026-12-03-s8"


def test_side_by_side_rows_are_on_the_page() -> None:
    rendered = sbs.table(MEASURED)
    assert len(rendered) == 2 + 3 * 4  # the header, then every federation's two rows and its speed-up
    page = (ROOT / "benchmarks" / "README.md").read_text()
    missing = [line for line in rendered if line not in page]
    assert not missing, missing


def test_a_changed_figure_is_caught(tmp_path: Path) -> None:
    for f in MEASURED.glob("*.json"):
        (tmp_path / f.name).write_text(f.read_text().replace('"wall": ', '"wall": 1', 1))
    page = (ROOT / "benchmarks" / "README.md").read_text()
    assert any(line not in page for line in sbs.table(tmp_path))
