"""The wire schema carries each tensor's dtype, and a run directory is checked against it.

A method or a defence may send other than float32 (secure aggregation's int64 ring elements, an
int8-quantised uplink): the manifest says so per tensor, and a recorded tensor of any other
dtype, or a schema-1 run's non-float tensor, is refused in one line when it is read.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from fedattack.federation.rundir import Federation
from fedattack.federation.storage import checksums, load_tensors, save_tensors
from fedattack.federation.train import train_federation
from fedattack.registry import UserError
from tests.conftest import tiny_spec


@pytest.fixture(scope="module")
def secagg_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = tiny_spec(rounds=2, defences=({"name": "secure-aggregation", "settings": {}},))
    return train_federation(spec, tmp_path_factory.mktemp("runs") / "secagg", progress=False)


def _reseal(run: Path, edit=None) -> None:  # type: ignore[no-untyped-def]
    manifest = json.loads((run / "federation.json").read_text())
    manifest["files"] = {k: v for k, v in checksums(run).items() if k != "federation.json"}
    if edit is not None:
        edit(manifest)
    (run / "federation.json").write_text(json.dumps(manifest))


def _retype_uplinks(run: Path, dtype: torch.dtype) -> None:
    """Every recorded uplink tensor converted to `dtype`, the manifest resealed (a forger's run)."""
    index = json.loads((run / "transcript" / "index.json").read_text())
    keys = {(e["file"], info["key"]) for e in index if e["kind"] == "uplink" for info in e["tensors"].values()}
    for file in {f for f, _ in keys}:
        tensors = load_tensors(run / "transcript" / file)
        save_tensors(run / "transcript" / file,
                     {k: t.to(dtype) if (file, k) in keys else t for k, t in tensors.items()})
    _reseal(run)


def test_the_manifest_gives_each_tensor_its_dtype(secagg_run: Path) -> None:
    fed = Federation(secagg_run)
    schema = fed.manifest["wire_schema"]
    assert fed.manifest["schema_version"] == 2
    assert {e["dtype"] for e in schema["uplink"].values()} == {"int64"}  # masked ring elements
    assert {e["dtype"] for e in schema["downlink"].values()} == {"float32"}
    messages = list(fed.transcript().load())
    assert {t.dtype for m in messages if m.kind == "uplink" for t in m.payload.values()} == {torch.int64}


def test_a_tensor_of_another_dtype_than_declared_is_refused(secagg_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(secagg_run, run)
    _retype_uplinks(run, torch.float64)
    with pytest.raises(UserError, match="dtype torch.float64, the schema says torch.int64") as info:
        list(Federation(run).transcript().load(kind="uplink"))
    assert "\n" not in str(info.value)


def test_a_schema_1_run_is_read_as_it_was_written(fedavg_run: Path, tmp_path: Path) -> None:
    """Schema 1 declared shapes only, and every recorded tensor was floating point."""
    run = tmp_path / "run"
    shutil.copytree(fedavg_run, run)

    def as_schema_1(m: dict) -> None:  # type: ignore[type-arg]
        m["schema_version"] = 1
        m["wire_schema"] = {k: {n: e["shape"] if isinstance(e, dict) else e for n, e in v.items()}
                            for k, v in m["wire_schema"].items()}

    _reseal(run, as_schema_1)
    assert len(Federation(run).transcript().load()) == len(Federation(fedavg_run).transcript().load())
    _retype_uplinks(run, torch.int64)
    _reseal(run, as_schema_1)
    with pytest.raises(UserError, match="not a floating-point tensor"):
        list(Federation(run).transcript().load(kind="uplink"))
