"""`fedattack evaluate --backend` (issue #47): every victim a task on a sweep backend gives the
result files of the evaluation in one process, and resumes like it.

A result records the machine's wall time (`seconds`) and each call's measured cost
(`extra.cost`: seconds, memory, the budget it ran under), which differ between any two runs,
even two in one process; everything else, every other file of the folder (`summary.json`, a
victim's images and tensors) included, must be the same bytes. The plan (`plan.json`) is the
parent's measurement of this machine and is not compared."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.hostile._cli import fedattack

# rmia trains reference models (together, batched), inversion is deferred in one process (every
# victim's models inverted at once) and runs in each victim's task on a backend
CHEAP = ("--attack", "rmia", "--attack", "inversion", "--set", "references=4", "--set", "steps=60",
         "--victim", "random:2", "--quiet")


def comparable(folder: Path) -> dict[str, str]:
    """Every file of a results folder but the plan, by relative path: a result as its JSON
    without the machine's measurements, anything else as its bytes (SHA-256)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if not path.is_file() or rel == "plan.json":
            continue
        data = path.read_bytes()
        if path.suffix == ".json" and rel != "summary.json":
            result = json.loads(data)
            result.pop("seconds", None)
            (result.get("extra") or {}).pop("cost", None)
            data = json.dumps(result, sort_keys=True).encode()
        out[rel] = hashlib.sha256(data).hexdigest()
    return out


def evaluate(run: Path, out: Path, *extra: str) -> str:
    done = fedattack("evaluate", str(run), "--out", str(out), *CHEAP, *extra)
    assert done.code == 0, done.err
    return done.out


def test_the_local_backend_gives_the_results_of_one_process_and_resumes(fedavg_run: Path, tmp_path: Path) -> None:
    evaluate(fedavg_run, tmp_path / "one")
    said = evaluate(fedavg_run, tmp_path / "local", "--backend", "local", "--workers", "2")
    assert "on 2 local worker(s), one victim a task" in said  # the plan's estimate over the workers
    one, local = comparable(tmp_path / "one"), comparable(tmp_path / "local")
    assert len([f for f in one if f.endswith(".json")]) == 2 * 2 + 1  # 2 attacks x 2 victims, the summary
    assert any(f.endswith(".pt") for f in one)  # the inversion's tensors are compared too
    assert one == local
    before = {p: p.read_bytes() for p in (tmp_path / "local").rglob("*") if p.is_file()}
    said = evaluate(fedavg_run, tmp_path / "local", "--backend", "local", "--workers", "2", "--resume")
    assert "2 victim(s) already evaluated" in said
    assert {p: p.read_bytes() for p in before} == before  # nothing it kept was rewritten
