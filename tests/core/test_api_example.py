"""The README's Python API example, run as written; and `import fedattack` stays without torch."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_import_fedattack_loads_no_torch() -> None:
    code = "import sys, fedattack; assert callable(fedattack.report); assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_readme_api_example_runs_as_written(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    block = re.search(r"```python\n(# notebook example\n.*?)```", README.read_text(), re.S)
    assert block, "README.md lost its notebook example"
    monkeypatch.chdir(tmp_path)
    exec(compile(block.group(1), "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert re.search(r"fedavg on digits: mean local accuracy \d+\.\d%", out)
    assert out.count("membership / ") == 10  # 5 victims x 2 threat models
    assert "- fedavg on digits (shards): risk " in out and "report: " in out  # the verdict: what leaks
    assert "  - eavesdropper (sees the victim's channel): Membership inference" in out
    assert (tmp_path / "report-api" / "report.html").is_file()
