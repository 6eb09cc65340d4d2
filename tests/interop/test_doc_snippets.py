"""Issue #18: the code blocks of docs/audit-your-federation.md run as written.

The first block (a whole FedAvg loop on the digits, recorded, attacked with offline LiRA and
reported) is executed as it stands, in a scratch folder. The Flower block is the ServerApp of
examples/flower_digits (whose simulation `test_flower.py` trains, evaluates and reports): its
imports are executed and its function must be that file's code, character for character.
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


@pytest.mark.usefixtures("isolated_registries")
def test_the_loop_snippet_records_attacks_and_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(python_blocks()[0], str(PAGE), "exec"), {"__name__": "__doc_snippet__"})
    printed = capsys.readouterr().out
    assert printed.count("lira-offline / eavesdropper / decoded / victim") == 4, printed
    assert (tmp_path / "runs/my-fedavg/federation.json").is_file()
    html = (tmp_path / "report-my-fedavg/report.html").read_text()
    assert "fedavg" in html and "offline LiRA" in html


def test_the_flower_snippet_is_the_example_apps_code(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("flwr", reason='Flower is not installed; pip install "fedattack[flower]"')
    block = python_blocks()[1]
    imports, _, function = block.partition("\n\n\ndef ")
    monkeypatch.syspath_prepend(str(DIGITS_APP))
    exec(compile(imports, str(PAGE), "exec"), {})
    assert "def " + function.rstrip("\n") in (DIGITS_APP / "digits_app.py").read_text()
    assert "RecordingStrategy(FedAvg(" in function and "recorder.close(server=" in function
