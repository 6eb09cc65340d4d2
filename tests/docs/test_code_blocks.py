"""Every code block of the docs and the README, checked as far as a fast test can (issue #49 item 6).

- every `fedattack` command line in a shell block names commands and options that exist (its
  subcommands walked through the CLI's groups, every `--option` looked up on the command): a
  renamed option or a command that is gone fails here, on every page, with no run;
- every Python block compiles;
- the blocks marked `<!-- runs-in-tests -->` run as they stand in the page, one after the other in
  an empty folder: a Python block whose first line names a file (`# mypkg/models.py`) is written
  there and run with `python FILE`, each line of a shell block is run by bash with the test's own
  `fedattack` on PATH. (docs/audit-your-federation.md's shell line once failed right after the
  page's own block: its results folder was full, and the model was known to the script only.)
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from fedattack.cli import cli
from tests.docs.markdown import FENCE, ROOT

PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
MARK = "<!-- runs-in-tests -->"
LEAVES = {"docs/audit-your-federation.md": ("runs/my-fedavg/federation.json", "report-my-fedavg/report.html")}
SHELLS = ("", "sh", "bash", "shell", "console")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int            # where the block's text starts
    lang: str            # the fence's info string; "" for an indented block
    text: str
    runs: bool           # marked to run in tests

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The page's fenced and indented code blocks, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        marked = i > 0 and lines[i - 1].strip() == MARK
        opened = FENCE.match(lines[i])
        if opened:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].lstrip().startswith(opened.group(1))),
                       len(lines))
            lang = lines[i].strip()[3:].strip().split(" ")[0]
            out.append(Block(page, i + 2, lang, "\n".join(lines[i + 1:end]), marked))
            i = end + 1
            continue
        if lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()) and not _in_list(lines, i):
            end = i
            while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
                end += 1
            out.append(Block(page, i + 1, "", "\n".join(x[4:] for x in lines[i:end]).strip("\n"), marked))
            i = end
            continue
        i += 1
    return out


def _in_list(lines: list[str], i: int) -> bool:
    """An indented line after a blank one continues a list item when the item came before it."""
    j = i - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    return j >= 0 and bool(re.match(r"^\s*([-*+]|\d+\.)\s", lines[j])) and not lines[j].startswith("    ")


def every_block() -> list[Block]:
    return [b for page in PAGES for b in blocks(page)]


def logical_lines(text: str) -> list[str]:
    """Shell lines with their backslash continuations joined, prompts dropped."""
    out, current = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        current += line[:-1] + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            out.append(current.strip().removeprefix("$ "))
            current = ""
    return [x for x in out if x]


def fedattack_words(line: str) -> list[str] | None:
    """The words after `fedattack` of a command line (assignments before it allowed), or None."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return None
    while words and ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words or Path(words[0]).name != "fedattack":
        return None
    return words[1:]


def problems(words: list[str]) -> list[str]:
    """What in one command line the CLI does not have: an unknown command or option."""
    command: click.Command = cli
    rest = list(words)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        found = command.commands.get(rest[0])
        if found is None:
            return [f"no command {rest[0]!r} (choices: {', '.join(sorted(command.commands))})"]
        command, rest = found, rest[1:]
    known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)} | {"--help"}
    return [f"{command.name} has no option {w.split('=')[0]}" for w in rest
            if w.startswith("--") and w.split("=")[0] not in known]


def test_every_fedattack_command_line_names_real_commands_and_options() -> None:
    bad, seen = [], 0
    for block in every_block():
        if block.lang not in SHELLS:
            continue
        for line in logical_lines(block.text):
            words = fedattack_words(line)
            if words is None:
                continue
            seen += 1
            bad += [f"{block.where}: {line!r}: {p}" for p in problems(words)]
    assert seen > 50, f"found only {seen} fedattack command lines: is the block parser broken?"
    assert not bad, "\n".join(bad)


def test_every_python_block_compiles() -> None:
    bad = []
    for block in every_block():
        if block.lang in ("python", "py"):
            try:
                ast.parse(block.text)
            except SyntaxError as exc:
                bad.append(f"{block.where}: {exc.msg} at line {exc.lineno}")
    assert not bad, "\n".join(bad)


def marked_pages() -> list[Path]:
    return [page for page in PAGES if MARK in page.read_text(encoding="utf-8")]


@pytest.mark.parametrize("page", marked_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_marked_blocks_run_as_they_stand_in_the_page(page: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}  # one torch thread, as every test has
    ran = [b for b in blocks(page) if b.runs]
    assert ran
    for block in ran:
        for command in commands_of(block, tmp_path):
            done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"{block.where}: {command[-1]!r} exited {done.returncode}:\n" \
                                         f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    for left in LEAVES.get(str(page.relative_to(ROOT)), ()):
        assert (tmp_path / left).is_file(), f"{page.name} ran but left no {left}"


def commands_of(block: Block, folder: Path) -> list[list[str]]:
    """What running the block means: a Python block is written to the file its first line names
    (else a scratch file) and run; a shell block's lines are run one by one."""
    if block.lang in ("python", "py"):
        first = block.text.splitlines()[0]
        named = re.match(r"#\s*([\w./-]+\.py)\b", first)
        path = folder / (named.group(1) if named else f"block_{block.line}.py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.text + "\n", encoding="utf-8")
        return [[sys.executable, str(path.relative_to(folder))]]
    return [["bash", "-c", line] for line in logical_lines(block.text)]
