"""Recording a federation trained elsewhere (issue #39): what FedAvg cannot produce is refused.

`fedattack.interop.Recorder` (and Flower's `RecordingStrategy`, which records through it) is
the public API a user's own loop calls. Each input below is one call that a FedAvg federation
could not have made: NaN weights, a sample count that contradicts the partition, two different
models sent within one round, a second recorder on the same folder. Each is refused with one
line naming it, the recording is aborted, and the user's folder is left as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from fedattack.data import load_dataset, make_partition
from fedattack.interop import Recorder
from tests.hostile._cli import Workspace, api_refused

CLIENTS = 4


class Net(nn.Module):
    """A user's model (registered by its import path, forgotten after each test)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def parts() -> list[np.ndarray]:
    return [c.train for c in make_partition("iid", load_dataset("digits"), CLIENTS, 0).clients]


def recorder(out: Path, **kw: Any) -> Recorder:
    return Recorder(out, model=Net, dataset="digits", clients=kw.pop("clients", parts()), epochs=1,
                    batch_size=16, lr=0.1, **kw)


def state(scale: float = 1.0) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return {n: t * scale for n, t in Net().state_dict().items()}


def nan_uplink(rec: Recorder) -> None:
    rec.record(1, 0, downlink=state(), uplink={**state(), "body.1.bias": torch.full((10,), float("nan"))})


def inf_downlink(rec: Recorder) -> None:
    rec.record(1, 0, downlink={**state(), "body.1.weight": state()["body.1.weight"] * float("inf")})


def samples(value: Any) -> Callable[[Recorder], None]:
    def call(rec: Recorder) -> None:
        rec.record(1, 0, downlink=state(), uplink=state(0.9), samples=value)
    return call


def two_downlinks(rec: Recorder) -> None:
    rec.record(1, 0, downlink=state(), uplink=state(0.9))
    rec.record(1, 1, downlink=state(1.5), uplink=state(0.9))


HELD = len(parts()[0])
BAD_RECORDINGS: dict[str, tuple[Callable[[Recorder], None], tuple[str, ...]]] = {
    "nan-in-an-uplink": (nan_uplink, ("'body.1.bias'", "NaN")),
    "infinity-in-a-downlink": (inf_downlink, ("'body.1.weight'", "infinite")),
    "samples-ten-times-the-partition": (samples(10 * HELD), (f"samples={10 * HELD}", f"gives it {HELD}")),
    "samples-100000": (samples(100_000), ("samples=100000",)),
    "samples-negative": (samples(-5), ("samples=-5",)),
    "samples-zero": (samples(0), ("samples=0",)),
    "samples-a-fraction": (samples(2.5), ("samples=2.5",)),
    "different-downlinks-in-one-fedavg-round": (two_downlinks, ("client 1's downlink differs", "fedavg")),
}


@pytest.mark.usefixtures("isolated_registries")
@pytest.mark.parametrize("case", BAD_RECORDINGS.keys())
def test_a_recording_fedavg_cannot_produce_is_refused(ws: Workspace, case: str) -> None:
    call, words = BAD_RECORDINGS[case]
    ws.seal()
    rec = recorder(ws.root / "recorded")
    api_refused(lambda: call(rec), f"Recorder(...).record(...): {case}", *words, "recording aborted")
    ws.unchanged()  # no run directory, no staging folder, no lock


@pytest.mark.usefixtures("isolated_registries")
def test_two_recorders_on_one_folder_are_refused(ws: Workspace) -> None:
    ws.seal()
    first = recorder(ws.root / "recorded")
    api_refused(lambda: recorder(ws.root / "recorded"), "a second Recorder(out) while the first records",
                "already writing")
    first.abort()
    ws.unchanged()


@pytest.mark.usefixtures("isolated_registries")
def test_a_partition_named_but_not_given_is_refused(ws: Workspace) -> None:
    shuffled = [np.random.default_rng(1).permutation(p) for p in parts()]
    shuffled[0], shuffled[1] = shuffled[0][1:], np.concatenate([shuffled[1], shuffled[0][:1]])
    ws.seal()
    api_refused(lambda: recorder(ws.root / "recorded", clients=shuffled, partition="iid"),
                "Recorder(partition='iid') with other indices", "client 0's train indices", "iid partition")
    ws.unchanged()


@pytest.mark.usefixtures("isolated_registries")
def test_the_flower_wrapper_refuses_a_sample_count_against_the_partition(ws: Workspace) -> None:
    """The same checks reach a Flower federation: its reply's num-examples is the client's n_k."""
    pytest.importorskip("flwr")
    from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict

    from fedattack.interop.flower import RecordingStrategy
    from tests.interop.test_flower import _Inner, _Reply

    ws.seal()
    wrapped = RecordingStrategy(_Inner(), recorder(ws.root / "recorded"))  # type: ignore[arg-type]
    wrapped.configure_train(1, ArrayRecord(Net().state_dict()), ConfigRecord(), None)  # type: ignore[arg-type]
    reply = _Reply(RecordDict({"arrays": ArrayRecord(Net().state_dict()),
                               "metrics": MetricRecord({"num-examples": 100_000, "partition-id": 0})}), src=11)
    api_refused(lambda: wrapped.aggregate_train(1, [reply]),  # type: ignore[list-item]
                "RecordingStrategy.aggregate_train: num-examples 100000", "samples=100000")
    ws.unchanged()
