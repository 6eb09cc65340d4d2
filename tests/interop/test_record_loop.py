"""A hand-written PyTorch FedAvg loop (this file's, not fedattack's), recorded and attacked.

The loop below is what a researcher's own script looks like: a model class, a split of the
digits' train split among clients, local SGD, an n_k-weighted average. It hands each message to
`Recorder.record`; the run directory it leaves opens with `Federation`, is attacked by
`evaluate_run`, and bad recordings are refused in one line with nothing left on disk.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from fedattack.attacks.evaluation.evaluate import evaluate_run
from fedattack.data import load_dataset
from fedattack.evaluation import EvaluationSpec
from fedattack.federation.rundir import Federation
from fedattack.interop import Recorder
from fedattack.interop.plugins import missing_plugins
from fedattack.registry import MODELS, UserError

CLIENTS, ROUNDS, EPOCHS, BATCH, LR = 4, 3, 2, 16, 0.1


class Net(nn.Module):
    """The user's model: not one of fedattack's."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def split(train_size: int) -> list[np.ndarray]:
    """The user's own split: a seeded permutation cut in CLIENTS parts; 37 samples left unused."""
    order = np.random.default_rng(0).permutation(train_size)[: train_size - 37]
    return np.array_split(order, CLIENTS)


def local_sgd(model: nn.Module, x: torch.Tensor, y: torch.Tensor, gen: torch.Generator) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(EPOCHS):
        for idx in torch.randperm(len(y), generator=gen).split(BATCH):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()


def fedavg_loop(rec: Recorder | None, parts: list[np.ndarray]) -> dict[str, torch.Tensor]:
    data = load_dataset("digits")
    torch.manual_seed(0)
    global_model, gen = Net(), torch.Generator().manual_seed(0)
    for rnd in range(1, ROUNDS + 1):
        states, sizes = [], []
        for k, idx in enumerate(parts):
            local = Net()
            local.load_state_dict(global_model.state_dict())
            down = {n: t.clone() for n, t in global_model.state_dict().items()}
            t = torch.as_tensor(idx)
            local_sgd(local, data.x_train[t], data.y_train[t], gen)
            if rec is not None:
                rec.record(rnd, k, downlink=down, uplink=local.state_dict(), samples=len(idx))
            states.append(local.state_dict())
            sizes.append(len(idx))
        total = sum(sizes)
        global_model.load_state_dict({n: sum(s[n] * (w / total) for s, w in zip(states, sizes))
                                      for n in states[0]})
    return global_model.state_dict()


def recorder(out: Path, parts: list[np.ndarray], **kw: object) -> Recorder:
    return Recorder(out, model=Net, dataset="digits", clients=parts, epochs=EPOCHS, batch_size=BATCH,
                    lr=LR, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    saved = MODELS.snapshot()  # this file's model is forgotten after it (other tests iterate over models)
    out = tmp_path_factory.mktemp("loop") / "run"
    parts = split(int(load_dataset("digits").y_train.shape[0]))
    with recorder(out, parts) as rec:
        final = fedavg_loop(rec, parts)
    fed = Federation(out)
    server = fed.server_state()
    for name, t in final.items():  # the default final state is FedAvg of the last round: the loop's
        assert torch.allclose(server[name], t, atol=1e-6), name
    yield out
    MODELS.restore(saved)


@pytest.mark.usefixtures("isolated_registries")
def test_a_recorded_loop_opens_like_a_fedattack_run(recorded: Path) -> None:
    fed = Federation(recorded)
    spec, part = fed.spec, fed.partition()
    assert (spec.method, spec.dataset, spec.model) == ("fedavg", "digits", f"{__name__}:Net")
    assert (spec.rounds, spec.recipe.epochs, spec.recipe.batch_size, spec.recipe.lr) == (ROUNDS, EPOCHS, BATCH, LR)
    assert len(part.discarded) == 37 and part.num_clients == CLIENTS
    assert spec.normalize == "none" and fed.target().ctx.normalization is None  # the loop fed pixels as they are
    msgs = fed.transcript().load()
    assert len(msgs) == 2 * CLIENTS * ROUNDS
    assert {m.samples for m in msgs if m.kind == "uplink"} == {len(c.train) for c in part.clients}
    assert fed.manifest["source"]["user_model"] and not fed.manifest["source"]["user_dataset"]
    assert fed.manifest["utility"]["mean"] > 50  # three rounds of FedAvg learn the digits
    assert fed.target().param_names == ["body.1.weight", "body.1.bias", "body.3.weight", "body.3.bias"]


@pytest.mark.usefixtures("isolated_registries")
def test_the_recorded_loop_is_attacked(recorded: Path, tmp_path: Path) -> None:
    spec = EvaluationSpec(threat_models=("eavesdropper", "server"), attacks=("membership",), victims=(0, 2),
                          settings={"shadows": 1, "classifier": "logreg"})
    written = evaluate_run(recorded, spec, tmp_path, progress=False)
    results = [json.loads(p.read_text()) for p in written]
    assert len(results) == 4
    for r in results:
        assert r["applicable"], r["note"]
        assert math.isfinite(r["metrics"]["auc"]) and r["run"]["model"] == f"{__name__}:Net"


@pytest.mark.usefixtures("isolated_registries")
def test_the_recorded_loop_gets_the_default_audit(recorded: Path, tmp_path: Path) -> None:
    """Issue 33: a recorded federation is planned and audited as fedattack's own (the user's model probed)."""
    fast = {"shadows": 1, "classifier": "logreg", "references": 2, "population": 50, "steps": 20, "max_rounds": 2,
            "programs": 20, "iterations": 2}
    spec = EvaluationSpec(threat_models=("eavesdropper", "server"), victims=(0,), settings=fast)
    written = evaluate_run(recorded, spec, tmp_path, progress=False)
    plan = json.loads((tmp_path / "plan.json").read_text())
    chosen = {(c["threat_model"], c["attack"]) for c in plan["calls"]}
    assert {("eavesdropper", "rmia"), ("server", "rmia"), ("server", "fedmia"), ("eavesdropper", "membership"),
            ("eavesdropper", "inversion")} <= chosen
    assert all(c["measured_seconds"] > 0 for c in plan["calls"])
    assert all(json.loads(p.read_text())["applicable"] for p in written if "rmia" in p.name or "membership" in p.name)


@pytest.mark.usefixtures("isolated_registries")
def test_a_run_on_a_user_model_names_what_evaluate_needs(recorded: Path) -> None:
    manifest = Federation(recorded).manifest
    MODELS.restore({n: b for n, b in MODELS.snapshot().items() if n != f"{__name__}:Net"})
    assert missing_plugins(manifest) == (f"this run was trained on the user model '{__name__}:Net'; pass "
                                         f"--model {__name__}:Net (a run directory never imports code on its own)")


def _refused(tmp_path: Path, match: str, *calls: dict[str, object]) -> None:
    parts = split(int(load_dataset("digits").y_train.shape[0]))
    rec = recorder(tmp_path / "bad", parts)
    good = Net().state_dict()
    with pytest.raises(UserError, match=match) as err:
        for call in calls:
            rec.record(**{"downlink": good, "uplink": good, **call})  # type: ignore[arg-type]
    assert "\n" not in str(err.value) and "nothing written" in str(err.value)
    assert list(tmp_path.iterdir()) == []  # no run, no staging folder
    with pytest.raises(UserError, match="closed"):
        rec.record(round=1, client=0, downlink=good)


@pytest.mark.usefixtures("isolated_registries")
def test_bad_recordings_are_refused_in_one_line_leaving_nothing(tmp_path: Path) -> None:
    wide = Net()
    wide.body[1] = nn.Linear(64, 48)
    _refused(tmp_path, "sent an uplink but received no downlink", {"round": 1, "client": 0, "downlink": None})
    _refused(tmp_path, "client 9 is not in the partition", {"round": 1, "client": 9})
    _refused(tmp_path, "changes shape", {"round": 1, "client": 0},
             {"round": 2, "client": 1, "uplink": {**Net().state_dict(), "body.1.weight": torch.zeros(48, 64)}})
    _refused(tmp_path, "has shape", {"round": 1, "client": 0, "uplink": wide.state_dict()})
    _refused(tmp_path, "arrives after round 2", {"round": 2, "client": 0}, {"round": 1, "client": 1})
    _refused(tmp_path, "already sent an uplink", {"round": 1, "client": 0}, {"round": 1, "client": 0, "downlink": None})
    _refused(tmp_path, "lacks 'body.3.bias'", {"round": 1, "client": 0, "uplink": {
        n: t for n, t in Net().state_dict().items() if n != "body.3.bias"}})


@pytest.mark.usefixtures("isolated_registries")
def test_a_last_round_without_uplinks_needs_the_final_model_and_keeps_the_recording(tmp_path: Path) -> None:
    parts = split(int(load_dataset("digits").y_train.shape[0]))
    rec, final = recorder(tmp_path / "run", parts), Net().state_dict()
    rec.record(1, 0, downlink=final)
    with pytest.raises(UserError, match=r"has no uplink to aggregate; call close\(server=final_state\)"):
        rec.close()
    assert not (tmp_path / "run").exists()
    fed = Federation(rec.close(server=final))
    assert all(torch.equal(fed.server_state()[n], t) for n, t in final.items())
    assert [m.kind for m in fed.transcript().load()] == ["downlink"]

    rec = recorder(tmp_path / "other", parts)
    rec.record(1, 0, downlink=final)
    with pytest.raises(UserError, match="the final server state lacks 'body.3.bias'.*nothing written"):
        rec.close(server={n: t for n, t in final.items() if n != "body.3.bias"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


@pytest.mark.usefixtures("isolated_registries")
def test_bad_declarations_are_refused_before_anything_is_staged(tmp_path: Path) -> None:
    parts = split(int(load_dataset("digits").y_train.shape[0]))
    with pytest.raises(UserError, match="more than one client"):
        recorder(tmp_path / "r", [parts[0], parts[0]])
    with pytest.raises(UserError, match="outside the dataset's train split"):
        recorder(tmp_path / "r", [np.array([0, 10**6])])
    with pytest.raises(UserError, match="give model_name"):
        Recorder(tmp_path / "r", model=lambda: Net(), dataset="digits", clients=parts, epochs=1,
                 batch_size=1, lr=0.1)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("isolated_registries")
def test_client_test_indices_give_local_utility_and_a_dropped_recorder_leaves_nothing(tmp_path: Path) -> None:
    import gc
    parts = split(int(load_dataset("digits").y_train.shape[0]))
    trains, tests = [p[20:] for p in parts], [p[:20] for p in parts]
    with recorder(tmp_path / "run", trains, test_clients=tests) as rec:
        fedavg_loop(rec, trains)
    fed = Federation(tmp_path / "run")
    assert [list(c.test) for c in fed.partition().clients] == [list(t) for t in tests]
    assert fed.manifest["source"]["utility_on"] == "each client's local test indices"
    assert len(fed.metrics()["rounds"][-1]["accuracy"]) == CLIENTS

    rec = recorder(tmp_path / "dropped", parts)
    rec.record(1, 0, downlink=Net().state_dict())
    staging = rec.writer.tmp
    assert staging.is_dir()
    del rec
    gc.collect()
    assert not staging.exists() and not (tmp_path / "dropped").exists()


def test_a_report_keeps_a_recorded_run_apart_from_fedattacks_own_training(recorded: Path) -> None:
    """Same method, same data: a report must put the two side by side, never average them."""
    from fedattack.reports.collect import read_run, variant_of
    info = read_run(recorded)
    assert info is not None and info.label == "fedavg [recorded from pytorch]"
    assert variant_of("fedavg", {}) == "" and variant_of("fedprox", {"mu": 0.5}, {"framework": "flower"}) == (
        "mu=0.5, recorded from flower")
