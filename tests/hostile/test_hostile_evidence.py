"""Damaged and forged evidence files (issue #43, the surface #46 added): each given to the command
that rebuilds docs tables from them, `python -m benchmarks.lab.evidence` (check, and `--write`).

Evidence JSON is committed input a pull request can change, and its `"render"` key names code
to run. Each forgery below is made in a copy of the checkout's layout (the tool, a page with one
marked table, its evidence, and a lab script beside them), then the tool runs as a user runs it,
in its own process from that folder: one line starting `error:`, exit 2, no traceback, every
page and evidence file as it was, and no code outside the lab scripts run (a planted script
would create a marker file).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.hostile._cli import MARKER, Outcome, Workspace, log, refused

TOOL = Path(__file__).resolve().parents[2] / "benchmarks" / "lab" / "evidence.py"
PAGE = "# A page\n\nSome prose.\n\n<!-- evidence: p/t -->\n| a | b |\n|---|---|\n| 1 | 0.512 |\n<!-- /evidence -->\n"
GOOD = {"render": "benchmarks/lab/evidence.py:plain", "columns": ["a", "b"], "rows": [[1, "0.512"]]}
PLANT = f"open({MARKER!r}, 'w').write('ran')\n\ndef render(data):\n    return ''\n"


def evidence(run: Path, value: object) -> None:
    (run / "docs" / "evidence" / "p" / "t.json").write_text(value if isinstance(value, str) else json.dumps(value))


def render_of(spec: str) -> Callable[[Path], None]:
    return lambda root: evidence(root, {**GOOD, "render": spec})


def planted(where: str, spec: str) -> Callable[[Path], None]:
    """A script that would leave a marker if it ran, at `where`, named by the evidence's render."""
    def forge(root: Path) -> None:
        (root / where).parent.mkdir(parents=True, exist_ok=True)
        (root / where).write_text(PLANT)
        evidence(root, {**GOOD, "render": spec})
    return forge


def page(text: str) -> Callable[[Path], None]:
    return lambda root: (root / "docs" / "p.md").write_text(text)


FORGERIES: dict[str, tuple[Callable[[Path], None], str]] = {
    "evidence-not-json": (lambda root: evidence(root, '{"render": "benchmarks/lab/evidence.py:plain", '),
                          "not valid JSON"),
    "evidence-nested-deeply": (lambda root: evidence(root, "[" * 100_000 + "]" * 100_000), "not valid JSON"),
    "evidence-a-list": (lambda root: evidence(root, [GOOD]), "needs a top-level"),
    "evidence-missing": (lambda root: (root / "docs" / "evidence" / "p" / "t.json").unlink(), "no evidence file"),
    "render-absolute-path": (render_of("/tmp/evil.py:render"), "write it as"),
    "render-outside-the-repository": (planted("../outside/evil.py", "../outside/evil.py:render"),
                                      "not a file of the repository"),
    "render-a-script-that-is-not-a-lab-script": (planted("tools/evil.py", "tools/evil.py:render"),
                                                 "not a lab script"),
    "render-the-command-line": (render_of("benchmarks/lab/evidence.py:main"), "cannot render"),
    "render-no-such-function": (render_of("benchmarks/lab/evidence.py:nothing"), "has no function"),
    "render-rows-missing": (lambda root: evidence(root, {"render": GOOD["render"], "columns": ["a", "b"]}),
                            "cannot render it (KeyError"),
    "render-a-lab-script-that-does-not-import": (
        lambda root: ((root / "benchmarks" / "lab" / "broken.py").write_text("import not_a_module_here\n"),
                      evidence(root, {**GOOD, "render": "benchmarks/lab/broken.py:render"})), "does not import"),
    "block-never-closed": (page(PAGE.replace("<!-- /evidence -->\n", "")), "never closed"),
    "block-of-another-page": (page(PAGE.replace("evidence: p/t", "evidence: privacy/t")), "names another page"),
}


@pytest.fixture
def checkout(tmp_path: Path) -> Workspace:
    """The checkout's layout in a folder of its own: the tool, a page, its evidence, no other code."""
    ws = Workspace(tmp_path / "checkout")
    (ws.root / "benchmarks" / "lab").mkdir(parents=True)
    shutil.copy(TOOL, ws.root / "benchmarks" / "lab" / "evidence.py")
    (ws.root / "docs" / "evidence" / "p").mkdir(parents=True)
    (ws.root / "docs" / "evidence" / "without-evidence.toml").write_text("")
    (ws.root / "docs" / "p.md").write_text(PAGE)
    evidence(ws.root, GOOD)
    return ws


def tool(ws: Workspace, *args: str) -> Outcome:
    done = subprocess.run([sys.executable, "-m", "benchmarks.lab.evidence", *args], cwd=ws.root, text=True,
                          capture_output=True, timeout=120)
    outcome = Outcome(("python:", "-m benchmarks.lab.evidence", *args), done.returncode, done.stdout, done.stderr)
    log(outcome)
    return outcome


def test_the_intact_checkout_passes_and_a_changed_number_is_caught(checkout: Workspace) -> None:
    assert tool(checkout).code == 0
    page(PAGE.replace("0.512", "0.521"))(checkout.root)
    checkout.seal()
    changed = tool(checkout)
    assert changed.code == 1 and "differs from its evidence" in changed.out
    checkout.unchanged()


@pytest.mark.parametrize("write", [False, True], ids=["check", "write"])
@pytest.mark.parametrize("case", FORGERIES.values(), ids=FORGERIES.keys())
def test_a_forged_evidence_file_is_refused(checkout: Workspace, case: tuple[Callable[[Path], None], str],
                                           write: bool) -> None:
    forge, words = case
    forge(checkout.root)
    checkout.seal()
    refused(tool(checkout, *(["--write"] if write else [])), words)
    assert not (checkout.root / MARKER).exists() and not (checkout.root.parent / MARKER).exists()
    checkout.unchanged()


def test_write_leaves_every_page_as_it_was_when_one_table_cannot_be_rendered(checkout: Workspace) -> None:
    """A page whose table would change is not written when another page's evidence is broken."""
    (checkout.root / "docs" / "a.md").write_text(PAGE.replace("p/t", "a/t").replace("0.512", "0.9"))
    (checkout.root / "docs" / "evidence" / "a").mkdir()
    (checkout.root / "docs" / "evidence" / "a" / "t.json").write_text(json.dumps(GOOD))  # a.md would change
    evidence(checkout.root, {"render": GOOD["render"]})  # p.md's cannot render
    checkout.seal()
    refused(tool(checkout, "--write"), "cannot render")
    checkout.unchanged()
