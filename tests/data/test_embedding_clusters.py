"""The embedding-clusters partition (CGAU 3.3) and the Frechet heterogeneity Gamma (CGAU 3.4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedattack.data import load_dataset
from fedattack.data.heterogeneity import frechet_distance, gamma
from fedattack.data.partition import make_partition
from fedattack.federation.rundir import Federation
from fedattack.registry import UserError


def _split(shuffle: float, seed: int = 0, embedding: str = "pixels", clients: int = 5):  # type: ignore[no-untyped-def]
    dataset = load_dataset("digits")
    return dataset.y_train.numpy(), make_partition("embedding-clusters", dataset, clients, seed,
                                                   shuffle=shuffle, embedding=embedding)


def test_frechet_distance_of_gaussians_in_closed_form() -> None:
    # 1-D: (mu1 - mu2)^2 + (sigma1 - sigma2)^2
    distance = frechet_distance(np.array([1.0]), np.array([[4.0]]), np.array([-2.0]), np.array([[1.0]]))
    assert distance == pytest.approx(10.0)
    cov = np.array([[2.0, 0.3], [0.3, 1.0]])
    assert frechet_distance(np.zeros(2), cov, np.zeros(2), cov) == pytest.approx(0.0, abs=1e-9)
    rng = np.random.default_rng(0)
    same = rng.normal(size=(4000, 3))
    far = rng.normal(size=(4000, 3)) + 3.0
    halves = [np.arange(2000), np.arange(2000, 4000)]
    assert gamma(same, halves) < 0.05
    assert gamma(np.concatenate([same, far]), [np.arange(4000), np.arange(4000, 8000)]) == pytest.approx(27.0, rel=0.05)


def test_clusters_partition_every_sample_with_one_cluster_per_class_per_client() -> None:
    labels, part = _split(0.0)
    held = [np.concatenate([c.train, c.test]) for c in part.clients]
    everything = np.concatenate(held)
    assert len(everything) == len(np.unique(everything)) == len(labels)
    counts = np.array(part.stats["class_counts"])
    assert (counts > 0).all()  # every client holds a cluster of every class
    assert part.stats["shuffled"] == 0


def test_shuffling_moves_toward_iid_and_lowers_gamma() -> None:
    gammas = [_split(s)[1].stats["gamma_embedding"] for s in (0.0, 0.5, 1.0)]
    assert gammas[0] > gammas[1] > gammas[2]
    labels, half = _split(0.5)
    # half the samples are re-dealt; a re-dealt sample keeps its client with chance ~1/5
    assert 0.3 * len(labels) < half.stats["shuffled"] < 0.5 * len(labels)


def test_same_seed_same_partition_and_bad_options_refused() -> None:
    a, b = _split(0.3, seed=4)[1], _split(0.3, seed=4)[1]
    assert all(np.array_equal(x.train, y.train) for x, y in zip(a.clients, b.clients))
    with pytest.raises(UserError, match="shuffle"):
        _split(1.5)


def test_central_embedding_clusters_digits() -> None:
    _, part = _split(0.0, embedding="central", clients=10)
    assert part.stats["embedding_dim"] == 64  # digits-mlp's hidden layer
    assert part.stats["gamma_embedding"] > 0


def test_every_manifest_reports_gamma(fedavg_run: Path) -> None:
    het = Federation(fedavg_run).manifest["heterogeneity"]
    assert het["gamma"] > 0 and "principal components" in het["features"]


def test_the_embedding_can_come_from_a_network_trained_on_other_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """CGAU's condition: clients clustered by a pre-trained network "not trained on the data set at hand"."""
    from fedattack.models.zoo import cgau

    asked = []
    real = cgau.build_extractor

    def spy(spec, *args, **kwargs):  # type: ignore[no-untyped-def]
        asked.append(spec.dataset)
        return real(cgau.ExtractorSpec("pixels"), *args, **kwargs)

    monkeypatch.setattr(cgau, "build_extractor", spy)
    dataset = load_dataset("digits")
    make_partition("embedding-clusters", dataset, 5, 0, embedding="central")
    make_partition("embedding-clusters", dataset, 5, 0, embedding="central", embedding_data="mnist")
    assert asked == ["digits", "mnist"]
