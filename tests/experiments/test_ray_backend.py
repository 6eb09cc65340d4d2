"""The Ray backend on a local Ray instance: the sweep of test_backends gives the same bytes as
one after another. Needs `pip install "fedattack[ray]"` (skipped without it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.experiments.test_backends import digests, sweep

ray = pytest.importorskip("ray", reason='Ray is not installed; pip install "fedattack[ray]" to run this test')
# Ray (and Flower's simulation engine, built on it) starts one local instance at a time here:
# these tests share one pytest-xdist worker.
pytestmark = pytest.mark.xdist_group("ray")


def test_ray_backend_gives_the_bytes_of_the_sequential_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_raylet_start_wait_time_s", "120")  # Ray's 60 s ran out at load 60 here
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as exc:  # Ray's own start-up, before any fedattack code runs
        if "timed out during startup" not in str(exc):
            raise
        pytest.skip(f"the local Ray instance did not start on this machine: {str(exc).splitlines()[0]}")
    try:
        summary = sweep(tmp_path / "ray", "ray", workers=None)
        assert ray.is_initialized()  # a Ray the caller started is left running for the caller
    finally:
        ray.shutdown()
    assert summary.trained == 2
    sweep(tmp_path / "sequential", "sequential")
    a, b = digests(tmp_path / "sequential"), digests(tmp_path / "ray")
    assert len(a) >= 2 * 6 and a == b
