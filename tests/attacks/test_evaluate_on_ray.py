"""`fedattack evaluate --backend ray --address ...` on a Ray cluster this test starts: a head and
a second worker node on this machine (`ray.cluster_utils.Cluster`), one CPU each, so each of the
two victims' tasks runs on its own node. The second node is removed while both tasks run; the
task it held runs again on the head, and the result files are those of the evaluation in one
process (`test_evaluate_on_backends.comparable`). Needs `pip install "fedattack[ray]"`.

Slow (a Ray cluster starts, a node dies and is noticed: about a minute on 2 cores); the fast test of
the same promise on the local backend is `test_evaluate_on_backends`."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.attacks.test_evaluate_on_backends import CHEAP, comparable
from tests.hostile._cli import fedattack

ray = pytest.importorskip("ray", reason='Ray is not installed; pip install "fedattack[ray]" to run this test')
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]  # one local Ray at a time


def running_tasks(out: Path) -> int:
    """Victim tasks at work: their hidden folders beside `out` hold a staging folder."""
    return sum(1 for stage in out.parent.glob(f".{out.name}.partial-*") if any(stage.glob(".stage-*")))


def kill_when_both_run(cluster, node, out: Path, killed: dict[str, object]) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if running_tasks(out) == 2:
            killed["published"] = sorted(p.name for p in out.glob("*-victim*.json")) if out.is_dir() else []
            cluster.remove_node(node, allow_graceful=False)
            killed["at"] = time.monotonic()
            return
        time.sleep(0.02)


def test_an_evaluation_on_a_ray_cluster_gives_the_results_of_one_process_and_survives_a_lost_node(
        fedavg_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("RAY_raylet_start_wait_time_s", "120")  # Ray's 60 s ran out at load 60 here
    cluster = Cluster(initialize_head=True, connect=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        node = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        out, killed = tmp_path / "ray", {}
        killer = threading.Thread(target=kill_when_both_run, args=(cluster, node, out, killed), daemon=True)
        killer.start()
        done = fedattack("evaluate", str(fedavg_run), "--out", str(out), *CHEAP, "--backend", "ray",
                         "--address", cluster.address)
        killer.join(timeout=5)
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert done.code == 0, done.err
    assert "at" in killed, "both victims' tasks never ran at once"
    assert killed["published"] == []  # the node died before any victim was done: one task ran again
    assert "on 2 ray worker(s), one victim a task" in done.out
    one = tmp_path / "one"
    assert fedattack("evaluate", str(fedavg_run), "--out", str(one), *CHEAP).code == 0
    assert comparable(out) == comparable(one)
    assert not list(tmp_path.glob(".ray.partial-*"))  # no task's folder is left behind
