"""The tables of docs/ rebuilt from committed evidence, and the tables that have none yet.

A measured table on a docs page sits between two comment lines,

    <!-- evidence: privacy/waffle-membership-cifar10 -->
    | ... the table ... |
    <!-- /evidence -->

and its evidence is `docs/evidence/privacy/waffle-membership-cifar10.json`: the compact
per-victim (or per-seed) rows an experiment script wrote, never a run directory, with a
top-level `"render": "benchmarks/lab/<script>.py:<function>"` naming the function that turns the
parsed JSON into the Markdown the page shows. The page stem is the page's path under docs/
without `.md` (`privacy`, `lab/reproduction`).

    python -m benchmarks.lab.evidence            # check every marked table against its evidence
    python -m benchmarks.lab.evidence --write    # rewrite every marked table from its evidence
    python -m benchmarks.lab.evidence --missing  # every table of docs/ without evidence

Rendering reads JSON and formats it: nothing is measured again, so the check takes a second.
The tables without evidence are listed in `docs/evidence/without-evidence.toml`, each with the
command that would make its evidence; tests/docs/test_evidence.py holds the pages to both.
Only standard-library imports here and at the top of every render module, so the check stays
fast.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EVIDENCE = DOCS / "evidence"
WITHOUT = EVIDENCE / "without-evidence.toml"
OPEN = re.compile(r"^<!--\s*evidence:\s*(\S+)\s*-->\s*$")
CLOSE = re.compile(r"^<!--\s*/evidence\s*-->\s*$")
FENCE = re.compile(r"^ {0,3}(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
SEPARATOR = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+\s*$")
RENDER = re.compile(r"^(?!/)([\w./-]+\.py):([A-Za-z_]\w*)$")


class EvidenceError(Exception):
    """A marked table that cannot be rebuilt: the message says which and why."""


@dataclass(frozen=True)
class Block:
    page: Path
    docs: Path           # the docs folder it belongs to (evidence under docs/evidence/)
    line: int            # the opening marker's line (1-based)
    end: int             # the closing marker's line
    key: str             # <page-stem>/<table>
    body: str            # the lines between the markers, blank edges dropped

    @property
    def where(self) -> str:
        return f"{rel(self.page)}:{self.line}"

    @property
    def evidence(self) -> Path:
        return self.docs / "evidence" / f"{self.key}.json"


@dataclass(frozen=True)
class Table:
    page: Path
    line: int            # the header row's line
    section: str         # the text of the nearest heading above it
    columns: str         # the header row's cells, joined by " | "
    marked: bool         # inside an evidence block
    occurrence: int = 1  # the how-manieth table of this section with these columns

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (rel(self.page), self.section, self.columns, self.occurrence)

    @property
    def where(self) -> str:
        return f"{rel(self.page)}:{self.line}"


def rel(path: Path) -> str:
    """A path as the messages and the list name it: from the repository root where it is inside."""
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.as_posix()


def pages(docs: Path = DOCS) -> list[Path]:
    return sorted(p for p in docs.rglob("*.md") if docs / "evidence" not in p.parents)


def stem(page: Path, docs: Path = DOCS) -> str:
    return page.relative_to(docs).with_suffix("").as_posix()


def _outside_fences(text: str) -> Iterable[tuple[int, str, bool]]:
    """(line number, line, inside a fenced code block) for every line."""
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if fence is not None:
            if line.lstrip().startswith(fence):
                fence = None
            yield number, line, True
            continue
        opened = FENCE.match(line)
        if opened:
            fence = opened.group(1)
        yield number, line, opened is not None


def blocks(page: Path, docs: Path = DOCS) -> list[Block]:
    """Every evidence block of a page; an unclosed, nested or misnamed block is an error."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    start: tuple[int, str] | None = None
    for number, line, fenced in _outside_fences("\n".join(lines)):
        if fenced:
            continue
        if (m := OPEN.match(line)):
            if start is not None:
                raise EvidenceError(f"{rel(page)}:{number}: an evidence block opens inside "
                                    f"the one opened at line {start[0]}; close it first (<!-- /evidence -->)")
            start = (number, m.group(1))
        elif CLOSE.match(line):
            if start is None:
                raise EvidenceError(f"{rel(page)}:{number}: <!-- /evidence --> closes no block")
            body = "\n".join(lines[start[0]:number - 1]).strip("\n")
            found.append(Block(page, docs, start[0], number, start[1], body))
            start = None
    if start is not None:
        raise EvidenceError(f"{rel(page)}:{start[0]}: evidence block {start[1]} is never closed "
                            "(add <!-- /evidence --> after the table)")
    for b in found:
        if b.key.rpartition("/")[0] != stem(page, docs):
            raise EvidenceError(f"{b.where}: block {b.key} names another page; on this page it is "
                                f"{stem(page, docs)}/<table>")
    return found


def tables(page: Path) -> list[Table]:
    """Every Markdown table of a page (outside code blocks), and whether an evidence block holds it."""
    out: list[Table] = []
    seen: dict[tuple[str, str], int] = {}
    section, inside, previous = "", False, ""
    for number, line, fenced in _outside_fences(page.read_text(encoding="utf-8")):
        if fenced:
            previous = ""
            continue
        if (h := HEADING.match(line)):
            section = h.group(2)
        inside = bool(OPEN.match(line)) or (inside and not CLOSE.match(line))
        if SEPARATOR.match(line.strip()) and previous.startswith("|"):
            head = (section, columns(previous))
            seen[head] = seen.get(head, 0) + 1
            out.append(Table(page, number - 1, section, head[1], inside, seen[head]))
        previous = line.strip()
    return out


def columns(header: str) -> str:
    return " | ".join(cell.strip() for cell in header.strip().strip("|").split("|"))


def load(block: Block) -> dict[str, Any]:
    if not block.evidence.is_file():
        raise EvidenceError(f"{block.where}: no evidence file {rel(block.evidence)} for block "
                            f"{block.key}; run the experiment script that writes it")
    data = json.loads(block.evidence.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("render"), str):
        raise EvidenceError(f"{rel(block.evidence)}: needs a top-level \"render\": "
                            "\"<path>.py:<function>\"")
    return data


def renderer(spec: str, root: Path = ROOT) -> Callable[[dict[str, Any]], str]:
    """The function a `"render"` key names, imported from its file (a file of this repository only)."""
    m = RENDER.match(spec)
    if not m:
        raise EvidenceError(f"render {spec!r}: write it as <path from the repository root>.py:<function>")
    path = (root / m.group(1)).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise EvidenceError(f"render {spec!r}: {m.group(1)} is not a file of the repository")
    name = "evidence_render_" + re.sub(r"\W", "_", path.relative_to(root).with_suffix("").as_posix())
    module = sys.modules.get(name)
    if module is None:
        loaded = importlib.util.spec_from_file_location(name, path)
        assert loaded is not None and loaded.loader is not None
        module = importlib.util.module_from_spec(loaded)
        sys.modules[name] = module
        loaded.loader.exec_module(module)
    function = getattr(module, m.group(2), None)
    if not callable(function):
        raise EvidenceError(f"render {spec!r}: {m.group(1)} has no function {m.group(2)}")
    return cast(Callable[[dict[str, Any]], str], function)


def rendered(block: Block) -> str:
    data = load(block)
    text = renderer(data["render"])(data)
    if not isinstance(text, str):
        raise EvidenceError(f"{data['render']} returned {type(text).__name__}, not the table's Markdown")
    return text.strip("\n")


def mismatch(block: Block, text: str | None = None) -> str | None:
    """None when the page shows what the evidence renders; else the first differing line, said."""
    expected = rendered(block) if text is None else text
    if block.body == expected:
        return None
    page, ours = block.body.splitlines(), expected.splitlines()
    for i, (a, b) in enumerate(zip(page, ours)):
        if a != b:
            return (f"{block.where}: {block.key} line {i + 1} differs from its evidence\n"
                    f"  page:     {a}\n  evidence: {b}")
    return (f"{block.where}: {block.key} has {len(page)} lines, its evidence renders {len(ours)}; "
            "rebuild it with python -m benchmarks.lab.evidence --write")


def every_block(docs: Path = DOCS) -> list[Block]:
    return [b for page in pages(docs) for b in blocks(page, docs)]


def write(docs: Path = DOCS) -> list[str]:
    """Rewrite every block from its evidence; returns the blocks changed."""
    changed = []
    for page in pages(docs):
        lines = page.read_text(encoding="utf-8").splitlines()
        mine = [b for b in reversed(blocks(page, docs)) if rendered(b) != b.body]
        for block in mine:
            lines[block.line:block.end - 1] = rendered(block).splitlines()
            changed.append(block.key)
        if mine:
            page.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return changed


# What an experiment script needs to write evidence and render it.

def save(key: str, render: str, rows: Sequence[dict[str, Any]], **about: Any) -> Path:
    """Write docs/evidence/<key>.json: `render`, whatever says where the rows come from, the rows."""
    path = EVIDENCE / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"render": render, **about, "rows": list(rows)}
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return path


def markdown(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table as the docs print them: `| a | b |` under a `|---|---|` rule."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def plain(data: dict[str, Any]) -> str:
    """The render function of a table whose evidence already holds its cells: `columns` and `rows`."""
    return markdown(data["columns"], data["rows"])


def interval(point: float, low: float, high: float, digits: int = 3) -> str:
    return f"{point:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


# The tables without evidence.

def listed(path: Path = WITHOUT) -> list[dict[str, Any]]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return list(data.get("table", []))


def entry_key(entry: dict[str, Any]) -> tuple[str, str, str, int]:
    return (str(entry["page"]), str(entry["section"]), str(entry["columns"]), int(entry.get("occurrence", 1)))


def unlisted_and_stale(docs: Path = DOCS, path: Path = WITHOUT) -> tuple[list[Table], list[dict[str, Any]]]:
    """Tables without evidence that the list lacks, and list entries that match no such table."""
    bare = [t for page in pages(docs) for t in tables(page) if not t.marked]
    entries = listed(path)
    keys = {entry_key(e) for e in entries}
    present = {t.key for t in bare}
    return [t for t in bare if t.key not in keys], [e for e in entries if entry_key(e) not in present]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite every marked table from its evidence")
    parser.add_argument("--missing", action="store_true", help="list every table of docs/ without evidence")
    args = parser.parse_args(argv)
    if args.missing:
        bare = [t for page in pages() for t in tables(page) if not t.marked]
        for t in bare:
            print(f"{t.where}  [{t.section}]  {t.columns[:80]}")
        print(f"{len(bare)} tables without evidence")
        return 0
    if args.write:
        for key in write():
            print(f"rebuilt {key}")
        return 0
    problems = [p for b in every_block() if (p := mismatch(b))]
    print("\n".join(problems) if problems else f"{len(every_block())} tables match their evidence")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
