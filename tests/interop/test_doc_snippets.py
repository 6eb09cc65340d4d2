"""Issue #18: the code blocks of docs/audit-your-federation.md run as written.

The loop's blocks (a model in a module of yours, a whole FedAvg loop on the digits, recorded,
attacked with offline LiRA and reported, then the same run attacked from the shell) run as they
stand, one after the other in an empty folder, in `tests/docs/test_code_blocks.py` (issue #49).
The Flower block is the ServerApp of examples/flower_digits (whose simulation `test_flower.py`
trains, evaluates and reports): its imports are executed and its function must be that file's
code, character for character.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "audit-your-federation.md"
DIGITS_APP = ROOT / "examples" / "flower_digits"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_the_flower_snippet_is_the_example_apps_code(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("flwr", reason='Flower is not installed; pip install "fedattack[flower]"')
    block = next(b for b in python_blocks() if "ServerApp" in b)
    imports, _, function = block.partition("\n\n\ndef ")
    monkeypatch.syspath_prepend(str(DIGITS_APP))
    exec(compile(imports, str(PAGE), "exec"), {})
    assert "def " + function.rstrip("\n") in (DIGITS_APP / "digits_app.py").read_text()
    assert "RecordingStrategy(FedAvg(" in function and "recorder.close(server=" in function
