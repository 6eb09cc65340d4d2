"""Every registered target honours the method contract on a tiny digits federation.

It trains (the run directory is complete and every client has a finite local accuracy), it is
deterministic (a second run with the same seed saves identical tensors and metrics), and what
it put on the wire matches the names and shapes its `wire_schema()` declares.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from fedattack.federation.rundir import Federation
from fedattack.registry import TARGETS
from tests.targets.conftest import target_spec, train_quietly


def _saved(run: Path) -> dict[str, torch.Tensor]:
    fed = Federation(run)
    out = {f"server/{k}": v for k, v in fed.server_state().items()}
    for k in range(fed.num_clients):
        out.update({f"private{k}/{n}": v for n, v in fed.private_state(k).items()})
    for i, m in enumerate(fed.transcript().load()):
        out.update({f"msg{i}/{m.round}/{m.kind}/{m.client}/{n}": v for n, v in m.payload.items()})
    return out


@pytest.mark.parametrize("method", TARGETS.names())
def test_trains_and_reports_utility(method: str, target_run: Callable[[str], Path]) -> None:
    fed = Federation(target_run(method))
    final = fed.metrics()["rounds"][-1]
    assert final["round"] == target_spec(method).rounds
    assert len(final["accuracy"]) == fed.num_clients
    assert all(0.0 <= a <= 1.0 for a in final["accuracy"] if not math.isnan(a))
    assert all(torch.isfinite(t).all() for t in fed.server_state().values())


@pytest.mark.parametrize("method", TARGETS.names())
def test_same_seed_same_federation(method: str, target_run: Callable[[str], Path],
                                   tmp_path: Path) -> None:
    first = target_run(method)
    again = train_quietly(target_spec(method), tmp_path / "again")
    a, b = _saved(first), _saved(again)
    assert a.keys() == b.keys()
    assert [k for k in a if not torch.equal(a[k], b[k])] == []
    assert Federation(first).metrics() == Federation(again).metrics()


@pytest.mark.parametrize("method", TARGETS.names())
def test_messages_match_wire_schema(method: str, target_run: Callable[[str], Path]) -> None:
    fed = Federation(target_run(method))
    schema = fed.target().wire_schema()
    declared = {"downlink": dict(schema.downlink), "uplink": dict(schema.uplink)}
    assert fed.manifest["wire_schema"] == {k: {n: {"shape": list(s), "dtype": "float32"} for n, s in v.items()}
                                           for k, v in declared.items()}
    for m in fed.transcript().load():
        shapes = {n: (tuple(t.shape), t.dtype) for n, t in m.payload.items()}
        assert shapes == {n: (tuple(s), schema.dtype(m.kind, n)) for n, s in declared[m.kind].items()}, \
            (method, m.kind, m.round)
