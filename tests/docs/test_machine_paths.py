"""No document names a path of the machine it was written on.

A reader's checkout is somewhere else: a command with `/work/runs14/...` or a lane script under
`/home/...` cannot be run as written, and says nothing about fedattack. What counts as such a path:

- a POSIX path under a machine's own roots: `/work/`, `/home/`, `/root/`, `/Users/`, `/mnt/`,
  `/scratch/` (not `/tmp/x` in an example command, nor `/shared/...` standing for a cluster's
  shared folder, nor `~/data`, which are the reader's own);
- a Windows drive path, `C:\\...` or `C:/...`.

URLs are allowed (`https://host/home/...` is an address, not a path), and so are relative paths
(`../shared/datasets`: the folder CI puts beside the checkout).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.markdown import ROOT

URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
MACHINE_PATH = re.compile(r"(?<![\w.~/-])/(?:work|home|root|Users|mnt|scratch)/[^\s`'\")\]]*"
                          r"|(?<![\w])[A-Za-z]:[\\/][^\s`'\")\]]*")
TEXT = {".md", ".py", ".sh", ".html", ".csv", ".txt", ".toml", ".json"}

DOCS = sorted([ROOT / "README.md", *(p for p in (ROOT / "docs").rglob("*") if p.suffix in TEXT),
               *(ROOT / d / "README.md" for d in ("benchmarks", "benchmarks/lab", "attacks", "reports"))])

# A page still being cleaned, with the reason (none at present). Strict: once a page is clean its
# marker fails, so it is taken off and the page stays clean.
PENDING: dict[str, str] = {}


def machine_paths(text: str) -> list[str]:
    return [m.group(0) for line in text.splitlines() for m in MACHINE_PATH.finditer(URL.sub(" ", line))]


def _param(page: Path) -> object:
    name = str(page.relative_to(ROOT))
    marks = [pytest.mark.xfail(strict=True, reason=PENDING[name])] if name in PENDING else []
    return pytest.param(page, id=name, marks=marks)


@pytest.mark.parametrize("page", [_param(p) for p in DOCS])
def test_no_document_names_a_path_of_this_machine(page: Path) -> None:
    found = machine_paths(page.read_text(encoding="utf-8"))
    assert not found, f"{page.relative_to(ROOT)} names machine paths: {sorted(set(found))}"


@pytest.mark.parametrize(("text", "expected"), [
    ("--out /work/runs14/utility --data-root ../shared/datasets", ["/work/runs14/utility"]),
    ("through `/work/slot.sh`: one thread", ["/work/slot.sh"]),
    ("see /home/alice/fed and C:\\Users\\bob\\runs", ["/home/alice/fed", "C:\\Users\\bob\\runs"]),
    ("https://example.org/home/page and http://host/root/x", []),
    ("--out /tmp/x, --data-root ~/data, /shared/sweeps/clip, ../work/x, runs/work/y", []),
])
def test_what_counts_as_a_machine_path(text: str, expected: list[str]) -> None:
    assert machine_paths(text) == expected
