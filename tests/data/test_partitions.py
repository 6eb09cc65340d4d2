"""Partition invariants for every registered partitioner, and each partitioner's own promises.

The partition is the ground truth of membership, so these tests pin what attacks and scorers rely
on: clients are disjoint, local train and test are disjoint, discarded data is never given out,
and one seed always gives the same partition.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedattack.data import load_dataset, make_partition, parse_options, partition_from_spec
from fedattack.data.types import Partition
from fedattack.registry import PARTITIONS, UserError

# Partitioners that read the dataset's images themselves, not just labels: swept on the real
# digits with cheap options, never on synthetic labels.
IMAGE_PARTITIONERS: dict[str, dict[str, str]] = {"embedding-clusters": {"embedding": "pixels"}}

# MNIST's real per-class training counts, so shard arithmetic meets uneven classes as in the paper
MNIST_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]


def mnist_like_labels(counts: list[int] = MNIST_COUNTS, seed: int = 7) -> np.ndarray:
    labels = np.repeat(np.arange(len(counts)), counts)
    return np.random.default_rng(seed).permutation(labels)


@pytest.fixture(scope="module")
def digit_labels() -> np.ndarray:
    return load_dataset("digits").y_train.numpy()


def client_classes(labels: np.ndarray, partition: Partition) -> list[set[int]]:
    return [set(labels[np.concatenate([c.train, c.test])].tolist()) for c in partition.clients]


def assert_same(a: Partition, b: Partition) -> None:
    assert a.spec == b.spec and a.groups() == b.groups()
    assert np.array_equal(a.discarded, b.discarded)
    for x, y in zip(a.clients, b.clients, strict=True):
        assert np.array_equal(x.train, y.train) and np.array_equal(x.test, y.test)


@pytest.mark.parametrize("name", PARTITIONS.names())
@pytest.mark.parametrize("dataset", ["digits", "mnist-like"])
def test_invariants(name: str, dataset: str, digit_labels: np.ndarray) -> None:
    if name in IMAGE_PARTITIONERS and dataset != "digits":
        pytest.skip(f"{name} needs the dataset's own images")
    labels = digit_labels if dataset == "digits" else mnist_like_labels()
    ds_name = "digits" if dataset == "digits" else "mnist"
    source = load_dataset("digits") if name in IMAGE_PARTITIONERS else labels  # images, or labels
    part = make_partition(name, source, None, 3, ds_name, **IMAGE_PARTITIONERS.get(name, {}))
    held = [np.concatenate([c.train, c.test]) for c in part.clients]
    everything = np.concatenate(held + [part.discarded])
    # disjoint clients, nothing discarded is allocated, every index accounted for exactly once
    assert len(np.unique(everything)) == len(everything) == len(labels)
    for client in part.clients:
        assert client.train.dtype == np.int64 and client.test.dtype == np.int64
        assert len(np.intersect1d(client.train, client.test)) == 0
        assert len(client.train) > 0 and len(client.test) > 0
        assert 0.1 < len(client.test) / (len(client.train) + len(client.test)) < 0.3
    assert part.discarded.min(initial=0) >= 0 and everything.max() < len(labels)
    assert part.spec["name"] == name and part.spec["num_clients"] == part.num_clients
    json.dumps(part.stats)
    assert_same(part, partition_from_spec(json.loads(json.dumps(part.spec)), source, ds_name))


@pytest.mark.parametrize("name", PARTITIONS.names())
def test_seed_determines_partition(name: str, digit_labels: np.ndarray) -> None:
    options = IMAGE_PARTITIONERS.get(name, {})
    source = load_dataset("digits") if name in IMAGE_PARTITIONERS else digit_labels
    first = make_partition(name, source, None, 11, "digits", **options)
    assert_same(first, make_partition(name, source, None, 11, "digits", **options))
    other = make_partition(name, source, None, 12, "digits", **options)
    assert any(
        not np.array_equal(a.train, b.train) for a, b in zip(first.clients, other.clients)
    )


@pytest.mark.parametrize("name", PARTITIONS.names())
def test_every_partitioner_declares_documented_options(name: str) -> None:
    partitioner = PARTITIONS.get(name)
    assert partitioner.__doc__ and partitioner.Options.__doc__
    assert parse_options(name, []) == partitioner.Options()
    assert partitioner.Options().test_fraction == 0.2


@pytest.mark.parametrize("z", [1, 2, 3])
def test_shards_give_z_distinct_classes(z: int) -> None:
    labels = mnist_like_labels()
    part = make_partition("shards", labels, 100, 0, "mnist", classes_per_client=z)
    assert part.num_clients == 100 and len(part.discarded) == 0
    assert all(len(classes) == z for classes in client_classes(labels, part))
    assert part.stats["repeated_class_clients"] == 0
    # every class equally represented: the same number of shards per class
    per_class = np.array(part.stats["class_counts"]).astype(bool).sum(axis=0)
    assert per_class.min() == per_class.max() == 100 * z // 10


def test_shards_more_classes_per_client_than_classes_is_counted() -> None:
    labels = mnist_like_labels([50] * 3)
    part = make_partition("shards", labels, 4, 0, "x", classes_per_client=4)
    assert part.stats["repeated_class_clients"] == 4


def test_multimodal_paper_setting_mnist() -> None:
    labels = mnist_like_labels()
    part = make_partition("multimodal", labels, None, 0, "mnist")
    groups = part.groups()
    assert groups.count("majority") == 100 and groups.count("minority") == 20
    size = part.stats["shard_size"]
    assert set(part.stats["sizes"]) == {2 * size}  # equal shards within and across modes
    for group, classes in zip(groups, client_classes(labels, part)):
        assert len(classes) == 2
        assert classes <= ({1, 3, 5, 7, 9} if group == "majority" else {0, 2, 4, 6, 8})
    # the even digits are rarer overall: 5:1, as in the paper
    counts = np.bincount(np.concatenate([labels[c.train] for c in part.clients]), minlength=10)
    assert counts[1::2].sum() > 4 * counts[0::2].sum()
    assert len(part.discarded) == len(labels) - 120 * 2 * size


@pytest.mark.parametrize(
    "dataset, minority", [("fmnist", {5, 6, 7, 9}), ("cifar10", {0, 1, 8, 9})]
)
def test_multimodal_paper_defaults(dataset: str, minority: set[int]) -> None:
    labels = mnist_like_labels([6000] * 10 if dataset == "fmnist" else [5000] * 10)
    part = make_partition("multimodal", labels, 110, 0, dataset)
    assert part.groups().count("majority") == 90 and part.groups().count("minority") == 20
    for group, classes in zip(part.groups(), client_classes(labels, part)):
        assert (classes <= minority) == (group == "minority") and len(classes) == 2


def test_multimodal_overrides_and_errors(digit_labels: np.ndarray) -> None:
    part = make_partition(
        "multimodal", digit_labels, 6, 0, "image-folder", majority_classes="0,1,2",
        minority_classes=[3], majority_clients=5, minority_clients=1, classes_per_client=1,
    )  # fmt: skip
    assert part.groups() == ["majority"] * 5 + ["minority"]
    assert part.spec["options"]["minority_classes"] == [3]
    with pytest.raises(UserError, match="120 clients, not 50"):
        make_partition("multimodal", mnist_like_labels(), 50, 0, "mnist")
    with pytest.raises(UserError, match="no paper defaults"):
        make_partition("multimodal", digit_labels, None, 0, "image-folder")
    with pytest.raises(UserError, match="disjoint"):
        make_partition("multimodal", digit_labels, None, 0, "digits", minority_classes=(1, 2))


def test_label_distribution_b_shifts_labels_right(digit_labels: np.ndarray) -> None:
    part = make_partition("label-distribution", digit_labels, None, 0, "digits", distribution="B")
    for i, classes in enumerate(client_classes(digit_labels, part)):
        assert classes == {(i + k) % 10 for k in range(4)}
    assert part.stats["label_maps"] == [list(range(10))] * 10
    assert part.groups() == ["alice"] + ["others"] * 9


def test_label_distribution_c_and_sizes() -> None:
    labels = mnist_like_labels()
    part = make_partition(
        "label-distribution", labels, None, 0, "mnist", distribution="C", size_distribution="B"
    )
    counts = np.array(part.stats["class_counts"], dtype=float)
    sizes = counts.sum(axis=1)
    paper_sizes = [0.21, 0.06, 0.11, 0.06, 0.11, 0.06, 0.16, 0.06, 0.11, 0.06]
    assert np.allclose(sizes / sizes.sum(), paper_sizes, atol=1e-3)
    shares = counts / sizes[:, None]
    expected_0 = [0, 0, 0, 0.1, 0.2, 0.4, 0.2, 0.1, 0, 0]
    assert np.allclose(shares[0], expected_0, atol=1e-3)
    assert np.allclose(shares[3], np.roll(expected_0, 3), atol=1e-3)
    assert np.all(counts.sum(axis=0) <= MNIST_COUNTS)


@pytest.mark.parametrize("distribution", ["A*", "B*"])
def test_concept_shift_relabels_everyone_but_alice(distribution: str) -> None:
    labels = mnist_like_labels()
    part = make_partition("label-distribution", labels, None, 0, "mnist", distribution=distribution)
    maps = part.stats["label_maps"]
    assert maps[0] == list(range(10))
    assert all(sorted(m) == list(range(10)) for m in maps)
    assert sum(m != list(range(10)) for m in maps[1:]) >= 8
    plain = make_partition(
        "label-distribution", labels, None, 0, "mnist", distribution=distribution[0]
    )
    assert plain.stats["class_counts"] == part.stats["class_counts"]  # labels change, not data


def test_label_distribution_errors(digit_labels: np.ndarray) -> None:
    with pytest.raises(UserError, match="distribution must be one of"):
        make_partition("label-distribution", digit_labels, None, 0, "digits", distribution="D")
    with pytest.raises(UserError, match="10 agents"):
        make_partition("label-distribution", digit_labels, 5, 0, "digits", size_distribution="C")
    with pytest.raises(UserError, match="10 classes"):
        make_partition("label-distribution", np.arange(20) % 12, None, 0, "x")


def test_dirichlet_skew_and_minimum() -> None:
    labels = mnist_like_labels()
    skewed = make_partition("dirichlet", labels, 50, 0, "mnist", alpha=0.1, min_samples=20)
    flat = make_partition("dirichlet", labels, 50, 0, "mnist", alpha=100.0)
    assert min(skewed.stats["sizes"]) >= 20 and len(skewed.discarded) == 0

    def mean_classes(part: Partition) -> float:
        return float(np.mean([len(c) for c in client_classes(labels, part)]))

    assert mean_classes(skewed) < mean_classes(flat)
    with pytest.raises(UserError, match="min_samples"):
        make_partition("dirichlet", labels[:100], 20, 0, "mnist", min_samples=10)


def test_parse_options_checks_keys_and_types() -> None:
    opts = parse_options("multimodal", ["majority-classes=1,3", "minority_clients=none"])
    assert opts.majority_classes == (1, 3) and opts.minority_clients is None
    assert parse_options("dirichlet", {"alpha": "0.3"}).alpha == 0.3
    with pytest.raises(UserError, match="valid options: alpha"):
        parse_options("dirichlet", ["beta=1"])
    with pytest.raises(UserError, match="must be int"):
        parse_options("dirichlet", ["min_samples=2.5"])
    with pytest.raises(UserError, match="key=value"):
        parse_options("iid", ["test_fraction"])
    with pytest.raises(UserError, match="unknown partition"):
        make_partition("nope", np.zeros(3, dtype=np.int64), 1, 0, "x")
    with pytest.raises(UserError, match=r"test_fraction must be in \[0, 1\)"):
        make_partition("iid", np.zeros(30, dtype=np.int64), 3, 0, "x", test_fraction=1.5)


def test_iid_client_size_gives_every_client_exactly_that_many_samples() -> None:
    """Ordinary clients of a chosen size without thousands of clients (#33: an eavesdropper's
    victim seen every round); the rest of the split is left out, and too large a size refused."""
    labels = np.arange(100, dtype=np.int64) % 10
    part = make_partition("iid", labels, 4, 0, "x", test_fraction=0.0, client_size=7)
    held = [np.concatenate([c.train, c.test]) for c in part.clients]
    assert [len(h) for h in held] == [7, 7, 7, 7] and len(np.unique(np.concatenate(held))) == 28
    assert len(part.discarded) == 72
    with pytest.raises(UserError, match="client_size=30 for 4 clients needs 120"):
        make_partition("iid", labels, 4, 0, "x", client_size=30)
