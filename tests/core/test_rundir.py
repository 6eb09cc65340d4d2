"""The run directory: round trip, refusal of damaged or foreign files, atomic writes."""

from __future__ import annotations

import json
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from fedattack.federation import train as train_module
from fedattack.federation.rundir import Federation
from fedattack.federation.storage import load_tensors
from fedattack.federation.train import train_federation
from fedattack.registry import UserError
from tests.conftest import tiny_spec


def test_round_trip_reads_back_what_was_trained(fedavg_run: Path) -> None:
    fed = Federation(fedavg_run)
    part = fed.partition()
    assert part.num_clients == fed.num_clients == 10
    assert fed.spec == tiny_spec(rounds=4)
    transcript = fed.transcript().load()
    assert transcript.rounds() == [1, 2, 3, 4]
    assert len(transcript) == 4 * 3 * 2  # 3 clients a round, one message each way
    server = fed.server_state()
    assert set(server) == set(fed.target().param_names)
    rounds = fed.metrics()["rounds"]
    assert [r["round"] for r in rounds] == [1, 2, 3, 4]
    numerics = fed.manifest["numerics"]  # what decides the bits besides the seed
    assert numerics["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert numerics["torch_threads"] >= 1 and "mkl_cbwr" in numerics


def test_uplink_payload_equals_the_aggregate_input(fedavg_run: Path) -> None:
    """The final server state is the weighted mean of the last round's recorded uplinks."""
    fed = Federation(fedavg_run)
    part = fed.partition()
    last = fed.transcript().load(rounds={4}, kind="uplink")
    weights = [len(part.clients[m.sender].train) for m in last]
    server = fed.server_state()
    for name, value in server.items():
        mean = sum(w * m.payload[name] for w, m in zip(weights, last)) / sum(weights)
        assert torch.allclose(mean, value, atol=1e-6)


def _copy(run: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(run, dst)
    return dst


def test_truncated_tensor_file_is_refused(fedavg_run: Path, tmp_path: Path) -> None:
    run = _copy(fedavg_run, tmp_path)
    f = run / "server.pt"
    f.write_bytes(f.read_bytes()[:100])
    with pytest.raises(UserError, match="wrong size"):
        Federation(run)
    with pytest.raises(UserError, match="corrupt or truncated"):
        load_tensors(f)


def test_altered_file_is_refused(fedavg_run: Path, tmp_path: Path) -> None:
    run = _copy(fedavg_run, tmp_path)
    f = run / "metrics.json"
    data = f.read_bytes()
    f.write_bytes(data[:-2] + b"0}")
    with pytest.raises(UserError, match="checksum"):
        Federation(run)


class Boom:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.touch, (Path(self.marker),))


def test_pickle_carrying_file_is_refused_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    Boom.marker = str(marker)  # type: ignore[attr-defined]
    evil = tmp_path / "server.pt"
    torch.save({"w": torch.zeros(2), "x": Boom()}, evil)
    with pytest.raises(UserError, match="objects other than tensors|corrupt"):
        load_tensors(evil)
    assert not marker.exists()
    plain = tmp_path / "plain.pt"
    plain.write_bytes(pickle.dumps(Boom()))
    with pytest.raises(UserError):
        load_tensors(plain)
    assert not marker.exists()


@pytest.mark.parametrize("change, message", [
    (lambda m: m.update(schema_version=99), "schema 99"),
    (lambda m: m.update(complete=False), "incomplete"),
    (lambda m: m.pop("schema_version"), "not a fedattack run"),
])
def test_foreign_or_incomplete_manifest_is_refused(fedavg_run: Path, tmp_path: Path, change, message) -> None:  # type: ignore[no-untyped-def]
    run = _copy(fedavg_run, tmp_path)
    manifest = json.loads((run / "federation.json").read_text())
    change(manifest)
    (run / "federation.json").write_text(json.dumps(manifest))
    with pytest.raises(UserError, match=message):
        Federation(run)


def test_missing_manifest_and_missing_file_are_refused(fedavg_run: Path, tmp_path: Path) -> None:
    run = _copy(fedavg_run, tmp_path)
    (run / "private.pt").unlink()
    with pytest.raises(UserError, match="missing"):
        Federation(run)
    with pytest.raises(UserError, match="missing"):
        Federation(tmp_path)


def test_interrupted_training_leaves_nothing_that_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(train_module, "describe", explode)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        train_federation(tiny_spec(), out, progress=False)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_existing_output_is_not_overwritten_without_asking(fedavg_run: Path) -> None:
    with pytest.raises(UserError, match="already exists"):
        train_federation(tiny_spec(), fedavg_run, progress=False)


def _terminate_once_training(job: subprocess.Popen, folder: Path) -> str:
    """SIGTERM the job as soon as its hidden partial run folder exists; its stderr."""
    deadline = time.monotonic() + 120
    while not any(p.name.startswith(".run.partial-") for p in folder.iterdir()):
        assert job.poll() is None and time.monotonic() < deadline, "training never started"
        time.sleep(0.2)
    job.send_signal(signal.SIGTERM)
    return job.communicate(timeout=120)[1]


def test_terminated_training_cleans_up_like_ctrl_c(tmp_path: Path) -> None:
    """A batch scheduler stops jobs with SIGTERM; that must not strand a partial run directory."""
    command = [sys.executable, "-c", "from fedattack.cli import main; main()", "train",
               "--dataset", "digits", "--rounds", "100000", "--quiet", "--out", str(tmp_path / "run")]
    job = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    err = _terminate_once_training(job, tmp_path)
    assert job.returncode == 130, err
    assert "interrupted" in err
    assert list(tmp_path.iterdir()) == []


def test_terminated_training_from_a_script_cleans_up_too(tmp_path: Path) -> None:
    """The same stop for a user's script that calls `train_federation`, with no CLI around it."""
    script = ("from fedattack.federation.train import train_federation\n"
              "from tests.conftest import tiny_spec\n"
              f"train_federation(tiny_spec(rounds=100000, record='none'), {str(tmp_path / 'run')!r}, "
              "progress=False)\n")
    job = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True,
                           cwd=Path(__file__).resolve().parents[2])
    err = _terminate_once_training(job, tmp_path)
    assert job.returncode != 0 and "KeyboardInterrupt" in err, err
    assert list(tmp_path.iterdir()) == []
