"""Every relative link in the README and under docs/ leads somewhere: a file of the repository and,
where the link names one, a heading (or HTML anchor) of that file.

A page moved without its links mended, a heading reworded under a link, or a link out of the
repository (to a folder beside the checkout, which a reader of GitHub does not have) fails here.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.docs.markdown import ROOT, anchors, heading_texts, is_external, links, slug

PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"),
                *(ROOT / d / "README.md" for d in ("benchmarks", "benchmarks/lab", "attacks", "reports"))])


@cache
def _anchors_of(page: Path) -> frozenset[str]:
    return frozenset(anchors(page.read_text(encoding="utf-8")))


def _broken(page: Path, root: Path = ROOT) -> list[str]:
    text = page.read_text(encoding="utf-8")
    problems = []
    for link in links(text):
        if is_external(link.target):
            continue
        path_part, _, anchor = link.target.partition("#")
        path_part = unquote(path_part.split("?", 1)[0])
        target = (page.parent / path_part).resolve() if path_part else page
        where = f"{page.relative_to(root)}:{link.line}: {link.target}"
        if not target.is_relative_to(root):
            problems.append(f"{where} leaves the repository")
        elif not target.exists():
            problems.append(f"{where} does not exist")
        elif anchor and target.suffix == ".md" and unquote(anchor) not in _anchors_of(target):
            problems.append(f"{where}: no heading with anchor #{anchor} in {target.relative_to(root)}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert not _broken(page), "\n".join(_broken(page))


def test_the_pages_have_links_to_check() -> None:
    """The parser finds the links it is meant to: the README's to docs/ and findings.md's to its evidence."""
    readme = [link.target for link in links((ROOT / "README.md").read_text(encoding="utf-8"))]
    assert "docs/findings.md" in readme and "docs/audit-your-federation.md" in readme
    findings = [link.target for link in links((ROOT / "docs/findings.md").read_text(encoding="utf-8"))]
    assert sum("#" in t for t in findings) >= 20, findings


def test_a_missing_file_and_a_missing_anchor_are_found(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title `x` (one)\n\n## Title `x` (one)\n\n"
                                   "[ok](#title-x-one) [ok](#title-x-one-1) [bad](#nope) [gone](b.md)\n"
                                   "`[code](not-a-link.md)`\n\n    [indented](code-block.md)\n\n"
                                   "```\n[fenced](fenced.md)\n```\n[out](../outside.md)\n", encoding="utf-8")
    found = _broken(tmp_path / "a.md", root=tmp_path)
    assert len(found) == 3, found
    assert any("#nope" in f for f in found) and any("b.md does not exist" in f for f in found)
    assert any("leaves the repository" in f for f in found)


@pytest.mark.parametrize(("heading", "anchor"), [
    ("FedProx's mu and q-FFL's q: what the paper's cells fit", "fedproxs-mu-and-q-ffls-q-what-the-papers-cells-fit"),
    ("WAFFLE with `zero_weight = freeze | reset`", "waffle-with-zero_weight--freeze--reset"),
    ("Table 3: membership inference, CIFAR-10 (%; mean ± std over 5 victims)",
     "table-3-membership-inference-cifar-10--mean--std-over-5-victims"),
    ("See [the page](x.md)", "see-the-page"),
])
def test_anchors_are_githubs(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor
    assert heading_texts(f"## {heading}\n") == [(1, heading)]
