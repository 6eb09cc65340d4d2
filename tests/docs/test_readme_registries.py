"""The README's reference part names everything a user can pick, read from the registries.

Each kind `fedattack list` shows has a subsection under "## What is built in", one bullet per
registered name: the name in backticks, a link to where it is explained, one line. A name a later
change registers without a bullet fails here, and so does a bullet whose name is no longer
registered. The data side (datasets, partitions, models) is left to `fedattack list` and the
walk-through, and said so below.
"""

from __future__ import annotations

import re

import pytest

from fedattack.catalog import entries
from fedattack.commands.list_cmd import SECTIONS
from tests.docs.markdown import ROOT, section

PART = "What is built in"
TITLES = {"reconstructions": "Reconstruction strategies", "backends": "Sweep backends",
          "dp-bugs": "DP bugs of the audit's zoo"}
LEFT_TO_FEDATTACK_LIST = {"datasets", "partitions", "models"}
BULLET = re.compile(r"^- (\[)?`([^`]+)`(?(1)\]\(([^)\s]+)\))(.*)$")


def title(kind: str) -> str:
    return TITLES.get(kind, kind.replace("-", " ").capitalize())


def bullets(kind: str) -> dict[str, tuple[str | None, str]]:
    """name -> (link, the rest of its line) for every bullet of the kind's subsection."""
    body = section(section((ROOT / "README.md").read_text(encoding="utf-8"), PART, 2), title(kind), 3)
    found = {}
    for line in body.splitlines():
        m = BULLET.match(line)
        if m:
            found[m.group(2)] = (m.group(3), m.group(4))
    return found


@pytest.mark.parametrize("kind", sorted(set(SECTIONS) - LEFT_TO_FEDATTACK_LIST))
def test_the_readme_names_every_registered_name_of_each_kind(kind: str) -> None:
    registered = {e.name for e in entries(SECTIONS[kind])}
    try:
        named = bullets(kind)
    except LookupError as exc:
        raise AssertionError(f"README.md has no '### {title(kind)}' under '## {PART}' for `fedattack list "
                             f"{kind}`: {exc}") from None
    assert registered - set(named) == set(), f"registered {kind} without a README line: {registered - set(named)}"
    assert set(named) - registered == set(), f"README names {kind} that are not registered: {set(named) - registered}"
    for name, (link, rest) in named.items():
        assert link, f"{kind} `{name}`: its README line links nowhere"
        assert len(rest.strip(" :-")) > 10, f"{kind} `{name}`: its README line says nothing"


def test_every_kind_is_in_the_readme_or_left_to_fedattack_list_on_purpose() -> None:
    assert LEFT_TO_FEDATTACK_LIST <= set(SECTIONS)
    assert "fedattack list" in section((ROOT / "README.md").read_text(encoding="utf-8"), PART, 2)


def test_a_missing_name_would_be_found() -> None:
    """The parse is not vacuous: it finds the bullets that are there, with their links."""
    attacks = bullets("attacks")
    assert "rmia" in attacks and attacks["rmia"][0]
    linked, unlinked = BULLET.match("- [`x`](a.md#b): one line"), BULLET.match("- `x`: no link")
    assert linked and linked.group(3) == "a.md#b" and unlinked and unlinked.group(3) is None
