"""Every marked table of docs/ is what its committed evidence renders, and every other table is listed.

A page holds a measured table between `<!-- evidence: <page>/<table> -->` and `<!-- /evidence -->`;
`docs/evidence/<page>/<table>.json` holds the per-victim (or per-seed) rows it is computed from and
names the function that renders them (`benchmarks/lab/evidence.py` says how). Rebuilding reads
JSON and formats it, never re-runs an experiment, so the whole check takes about a second. A
table without evidence must be on the explicit list `docs/evidence/without-evidence.toml`, with
the command that would make its evidence; an entry whose table gained evidence fails until it is
taken off, so the list can only shrink.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from benchmarks.lab import evidence as ev

BLOCKS = ev.every_block()
CEILING = 98  # without-evidence.toml entries (98, +1 reference table, -1 audit power); lower it as tables gain evidence


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.key)
def test_the_page_shows_what_its_evidence_renders(block: ev.Block) -> None:
    assert ev.mismatch(block) is None, ev.mismatch(block)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.key)
def test_a_changed_number_in_the_page_fails(block: ev.Block) -> None:
    """Every digit of the table's measured rows (below its header and rule), changed alone, fails."""
    expected = ev.rendered(block)
    head = "\n".join(block.body.splitlines()[:2]) + "\n"
    digits = [m.start() for m in re.finditer(r"\d", block.body) if m.start() >= len(head)]
    assert digits, f"{block.key}: a measured table without a single number in its rows"
    for i in digits:
        changed = block.body[:i] + str((int(block.body[i]) + 1) % 10) + block.body[i + 1:]
        edited = ev.Block(block.page, block.docs, block.line, block.end, block.key, changed)
        problem = ev.mismatch(edited, expected)
        assert problem is not None and "differs from its evidence" in problem, (block.key, i)


def test_rebuilding_every_table_is_fast() -> None:
    start = time.perf_counter()
    for block in BLOCKS:
        ev.rendered(block)
    assert time.perf_counter() - start < 5, "a render module imports something heavy at its top"


def test_every_table_without_evidence_is_listed_and_the_list_only_shrinks() -> None:
    unlisted, stale = ev.unlisted_and_stale()
    assert not unlisted, ("tables without evidence and not in docs/evidence/without-evidence.toml (give them "
                          "evidence, see benchmarks/lab/evidence.py):\n"
                          + "\n".join(f"  {t.where} [{t.section}] {t.columns[:70]}" for t in unlisted))
    assert not stale, ("entries of docs/evidence/without-evidence.toml whose table has evidence now or is "
                       "gone; delete them:\n" + "\n".join(f"  {e['page']} [{e['section']}]" for e in stale))
    entries = ev.listed()
    assert len(entries) <= CEILING, f"{len(entries)} tables without evidence, more than the {CEILING} listed"
    assert all(e["kind"] in ("measurement", "generated", "reference") and e["remake"] for e in entries)


def _docs(tmp_path: Path, page: str, evidence: dict[str, object] | None, key: str = "p/t") -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "p.md").write_text(page, encoding="utf-8")
    if evidence is not None:
        (docs / "evidence" / key.partition("/")[0]).mkdir(parents=True)
        (docs / "evidence" / f"{key}.json").write_text(json.dumps(evidence), encoding="utf-8")
    return docs


TABLE = "| a | b |\n|---|---|\n| 1 | 0.512 |"
PLAIN = {"render": "benchmarks/lab/evidence.py:plain", "columns": ["a", "b"], "rows": [[1, "0.512"]]}


def test_a_marked_table_is_rebuilt_from_its_evidence_and_a_changed_number_is_caught(tmp_path: Path) -> None:
    docs = _docs(tmp_path, f"# P\n\n<!-- evidence: p/t -->\n{TABLE}\n<!-- /evidence -->\n", PLAIN)
    [block] = ev.every_block(docs)
    assert ev.mismatch(block) is None
    (docs / "p.md").write_text(f"# P\n\n<!-- evidence: p/t -->\n{TABLE.replace('512', '521')}\n<!-- /evidence -->\n")
    problem = ev.mismatch(ev.every_block(docs)[0])
    assert problem and "line 3" in problem and "0.521" in problem and "0.512" in problem
    assert ev.write(docs) == ["p/t"] and ev.mismatch(ev.every_block(docs)[0]) is None
    assert (docs / "p.md").read_text().startswith("# P\n\n<!-- evidence: p/t -->\n| a | b |")


@pytest.mark.parametrize(("page", "evidence", "says"), [
    ("<!-- evidence: p/t -->\n" + TABLE + "\n", PLAIN, "never closed"),
    (TABLE + "\n<!-- /evidence -->\n", PLAIN, "closes no block"),
    ("<!-- evidence: q/t -->\n" + TABLE + "\n<!-- /evidence -->\n", PLAIN, "names another page"),
    ("<!-- evidence: p/t -->\n" + TABLE + "\n<!-- /evidence -->\n", None, "no evidence file"),
    ("<!-- evidence: p/t -->\n" + TABLE + "\n<!-- /evidence -->\n", {**PLAIN, "render": "/etc/x.py:f"}, "write it as"),
    ("<!-- evidence: p/t -->\n" + TABLE + "\n<!-- /evidence -->\n", {**PLAIN, "render": "../x.py:f"},
     "not a file of the repository"),
    ("<!-- evidence: p/t -->\n" + TABLE + "\n<!-- /evidence -->\n",
     {**PLAIN, "render": "benchmarks/lab/evidence.py:nothing"}, "has no function"),
])
def test_a_block_that_cannot_be_rebuilt_says_why(tmp_path: Path, page: str, evidence: dict[str, object] | None,
                                                  says: str) -> None:
    docs = _docs(tmp_path, page, evidence)
    with pytest.raises(ev.EvidenceError, match=says):
        for block in ev.every_block(docs):
            ev.rendered(block)


def test_tables_are_found_outside_code_blocks_and_told_apart(tmp_path: Path) -> None:
    page = (f"# P\n\n## S\n\n{TABLE}\n\n{TABLE}\n\n```\n{TABLE}\n```\n\n"
            f"<!-- evidence: p/t -->\n{TABLE}\n<!-- /evidence -->\n")
    docs = _docs(tmp_path, page, PLAIN)
    found = ev.tables(docs / "p.md")
    assert [(t.section, t.columns, t.occurrence, t.marked) for t in found] == [
        ("S", "a | b", 1, False), ("S", "a | b", 2, False), ("S", "a | b", 3, True)]
