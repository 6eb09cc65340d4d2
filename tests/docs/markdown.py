"""Just enough Markdown for the documentation tests: code blocks, headings, anchors and links.

The docs are read the way GitHub renders them, because that is where a reader follows a link:
fenced and indented code blocks and inline code spans are not prose (a `[x](y)` inside them is
not a link), and a heading's anchor is GitHub's slug of its text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FENCE = re.compile(r"^ {0,3}(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


@dataclass(frozen=True)
class Link:
    line: int
    target: str


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, text) of every line outside code blocks."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    indented = False
    previous_blank = True
    for number, line in enumerate(text.splitlines(), start=1):
        if fence is not None:
            if line.lstrip().startswith(fence):
                fence = None
            continue
        opened = FENCE.match(line)
        if opened:
            fence = opened.group(1)
            continue
        blank = not line.strip()
        if indented and (blank or line.startswith(("    ", "\t"))):
            previous_blank = blank
            continue
        indented = previous_blank and line.startswith(("    ", "\t")) and not blank
        previous_blank = blank
        if not indented:
            out.append((number, line))
    return out


def without_inline_code(line: str) -> str:
    return INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)


def links(text: str) -> list[Link]:
    """Every link and image target in the prose (inline code spans removed first)."""
    return [Link(number, m.group(2)) for number, line in prose_lines(text)
            for m in LINK.finditer(without_inline_code(line))]


def heading_texts(text: str) -> list[tuple[int, str]]:
    return [(number, m.group(2)) for number, line in prose_lines(text) if (m := HEADING.match(line))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its rendered text, lower-cased, punctuation dropped, spaces as '-'."""
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a page offers: its headings' slugs (repeats numbered as GitHub does) and HTML anchors."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, heading in heading_texts(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    found.update(HTML_ANCHOR.findall(text))
    return found


def is_external(target: str) -> bool:
    return bool(SCHEME.match(target)) or target.startswith("//")


def section(text: str, title: str, level: int) -> str:
    """The body of the first heading `title` at `level`, up to the next heading at that level or above."""
    lines = text.splitlines()
    prose = dict(prose_lines(text))
    start = None
    for number, line in prose.items():
        m = HEADING.match(line)
        if not m:
            continue
        depth = len(m.group(1))
        if start is None and depth == level and m.group(2) == title:
            start = number
        elif start is not None and depth <= level:
            return "\n".join(lines[start:number - 1])
    if start is None:
        raise LookupError(f"no heading {'#' * level} {title}")
    return "\n".join(lines[start:])
