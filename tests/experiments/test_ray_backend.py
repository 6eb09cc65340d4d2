"""The Ray backend on a local Ray instance: the sweep of test_backends gives the same bytes as
one after another. Needs `pip install "fedattack[ray]"` (skipped without it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.experiments.test_backends import digests, sweep

ray = pytest.importorskip("ray", reason='Ray is not installed; pip install "fedattack[ray]" to run this test')


def test_ray_backend_gives_the_bytes_of_the_sequential_one(tmp_path: Path) -> None:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        summary = sweep(tmp_path / "ray", "ray", workers=None)
        assert ray.is_initialized()  # a Ray the caller started is left running for the caller
    finally:
        ray.shutdown()
    assert summary.trained == 2
    sweep(tmp_path / "sequential", "sequential")
    a, b = digests(tmp_path / "sequential"), digests(tmp_path / "ray")
    assert len(a) >= 2 * 6 and a == b
