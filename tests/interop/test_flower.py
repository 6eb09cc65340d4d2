"""Issue #18: a tiny Flower federation (Flower's simulation engine, Message API) on the digits,
recorded by `RecordingStrategy` around Flower's own FedAvg, then `fedattack evaluate` and
`fedattack report` on the run directory it leaves. Needs `pip install "fedattack[flower]"`."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from click.testing import CliRunner

pytest.importorskip("flwr", reason='Flower is not installed; pip install "fedattack[flower]" to run this test')

from fedattack.cli import cli
from fedattack.federation.rundir import Federation
from fedattack.registry import MODELS, UserError

# Ray (and Flower's simulation engine, built on it) starts one local instance at a time here:
# these tests share one pytest-xdist worker.
pytestmark = pytest.mark.xdist_group("ray")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flower_digits"
CLIENTS, ROUNDS = 3, 2


def _example(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.setenv("PYTHONPATH", str(EXAMPLE))  # Flower hands the path on to its workers
    spec = importlib.util.spec_from_file_location("flower_digits_run", EXAMPLE / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cli(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    if isinstance(result.exception, UserError):
        raise result.exception
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.usefixtures("isolated_registries")
def test_a_flower_federation_is_recorded_evaluated_and_reported(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    run = _example(monkeypatch).simulate(tmp_path / "flower-run", CLIENTS, ROUNDS)
    fed = Federation(run)
    spec, msgs = fed.spec, fed.transcript().load()
    assert (spec.method, spec.model, spec.rounds, spec.recipe.epochs) == ("fedavg", "digits_task:Net", ROUNDS, 2)
    assert fed.manifest["source"]["framework"] == "flower"
    assert len(msgs) == 2 * CLIENTS * ROUNDS and {m.client for m in msgs} == set(range(CLIENTS))
    part = fed.partition()
    assert sorted(m.samples or 0 for m in msgs if m.kind == "uplink" and m.round == 1) == sorted(
        len(c.train) for c in part.clients)
    last = [m for m in msgs if m.kind == "uplink" and m.round == ROUNDS]
    total = sum(m.samples or 0 for m in last)
    for name, t in fed.server_state().items():  # Flower's FedAvg: the n_k-weighted mean of the uplinks
        mean = torch.stack([m.payload[name] * ((m.samples or 0) / total) for m in last]).sum(0)
        assert torch.allclose(t, mean, atol=1e-5), name

    MODELS.restore({n: b for n, b in MODELS.snapshot().items() if n != "digits_task:Net"})  # a fresh process
    with pytest.raises(UserError, match="pass --model digits_task:Net"):
        _cli("evaluate", str(run), "--quiet")
    results, report = tmp_path / "results", tmp_path / "report"
    _cli("evaluate", str(run), "--model", "digits_task:Net", "--attack", "membership", "--victim", "all",
         "--set", "shadows=1", "--set", "classifier=logreg", "--out", str(results), "--quiet")
    found = [json.loads(p.read_text()) for p in results.glob("membership-*.json")]
    assert len(found) == CLIENTS and all(r["applicable"] and math.isfinite(r["metrics"]["auc"]) for r in found)
    _cli("report", str(results), str(run), "-o", str(report), "--no-figures")
    text = (report / "report.md").read_text()
    assert "fedavg" in text and "digits" in text

    # issue #44: the malicious server's line on a recorded Flower run (its recipe declared by the
    # recording), from the round the clients really held, apart from the passive lines
    from fedattack.reports.collect import collect
    from fedattack.reports.verdict_section import lead_lines
    acting = tmp_path / "acting"
    _cli("evaluate", str(run), "--model", "digits_task:Net", "--threat-model", "malicious-server",
         "--attack", "acting-imprint", "--set", "bins=100", "--victim", "all", "--out", str(acting), "--quiet")
    lines = lead_lines(collect([acting]).results)
    said = [ln for ln in lines if "Had the server acted" in ln]
    assert len(said) == 1 and f"{CLIENTS} victims" in said[0], "\n".join(lines)
    assert re.search(r"would recover [\d.]+% \[[\d.]+, [\d.]+\] of this client's training images above 20 dB",
                     said[0]), said[0]


class _Reply:
    """What the wrapper reads of a Flower Message (constructing real ones needs a running app)."""

    def __init__(self, content: object, src: int = 0, dst: int = 0) -> None:
        from types import SimpleNamespace
        self.content, self.metadata = content, SimpleNamespace(src_node_id=src, dst_node_id=dst)

    def has_error(self) -> bool:
        return False


class _Inner:
    """A stand-in Flower strategy: sends `arrays` to nodes 11 and 12, remembers what it aggregated."""

    arrayrecord_key, weighted_by_key = "arrays", "num-examples"

    def __init__(self) -> None:
        self.aggregated: list[object] = []

    def configure_train(self, rnd: int, arrays: Any, config: Any, grid: Any) -> list[_Reply]:
        from flwr.app import RecordDict
        return [_Reply(RecordDict({"arrays": arrays}), dst=node) for node in (11, 12)]

    def aggregate_train(self, rnd: int, replies: Any) -> tuple[None, None]:
        self.aggregated += list(replies)
        return None, None


@pytest.mark.usefixtures("isolated_registries")
def test_the_wrapper_names_positional_arrays_and_refuses_an_unnamed_client(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np
    from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict

    from fedattack.interop import Recorder
    from fedattack.interop.flower import RecordingStrategy

    _example(monkeypatch)
    Net, partition = (getattr(importlib.import_module("digits_task"), n) for n in ("Net", "partition"))

    def reply(node: int, metrics: dict[str, int | float | list[int] | list[float]]) -> _Reply:
        """A reply whose arrays are a plain list, as NumPy-based apps send them."""
        arrays = [np.asarray(t) for t in Net().state_dict().values()]
        return _Reply(RecordDict({"arrays": ArrayRecord(arrays), "metrics": MetricRecord(metrics)}), src=node)

    def strategy(out: Path) -> tuple[RecordingStrategy, _Inner]:
        inner = _Inner()
        rec = Recorder(out, model=Net, dataset="digits", clients=partition(2), epochs=1, batch_size=8, lr=0.1)
        wrapped = RecordingStrategy(inner, rec)  # type: ignore[arg-type]
        wrapped.configure_train(1, ArrayRecord(Net().state_dict()), ConfigRecord(), None)  # type: ignore[arg-type]
        return wrapped, inner

    wrapped, inner = strategy(tmp_path / "ok")
    sizes = [len(p) for p in partition(2)]  # n_k must be what the partition gives each client
    replies = [reply(12, {"num-examples": sizes[1], "partition-id": 1}),
               reply(11, {"num-examples": sizes[0], "partition-id": 0})]
    wrapped.aggregate_train(1, replies)  # type: ignore[arg-type]
    assert inner.aggregated == replies  # the wrapped strategy aggregates what it would have
    wrapped.configure_train(2, ArrayRecord(Net().state_dict()), ConfigRecord(), None)  # type: ignore[arg-type]
    wrapped.aggregate_train(2, replies[1:])  # type: ignore[arg-type]  # node 12 (client 1) drops out
    fed = Federation(wrapped.recorder.close())
    assert sorted((m.round, m.client, m.samples) for m in fed.transcript().load(kind="uplink")) == [
        (1, 0, sizes[0]), (1, 1, sizes[1]), (2, 0, sizes[0])]
    assert sorted((m.round, m.client) for m in fed.transcript().load(kind="downlink")) == [
        (1, 0), (1, 1), (2, 0), (2, 1)]

    wrapped, inner = strategy(tmp_path / "bad")
    with pytest.raises(UserError, match="reports no 'partition-id' metric"):
        wrapped.aggregate_train(1, [reply(11, {"num-examples": 7})])  # type: ignore[list-item]
    assert not inner.aggregated and list(tmp_path.iterdir()) == [tmp_path / "ok"]
    refusals = {"client 5 is not in the partition": reply(11, {"num-examples": 7, "partition-id": 5}),
                "node 13, which was sent no training message": reply(13, {"num-examples": 7, "partition-id": 0})}
    for message, bad in refusals.items():  # a client outside the partition; an uplink with no downlink
        wrapped, inner = strategy(tmp_path / "bad")
        with pytest.raises(UserError, match=f"{message}.*recording aborted, nothing written"):
            wrapped.aggregate_train(1, [bad])  # type: ignore[list-item]
        assert list(tmp_path.iterdir()) == [tmp_path / "ok"]  # no run directory, no staging folder
