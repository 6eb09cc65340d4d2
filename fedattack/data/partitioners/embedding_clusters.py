"""`embedding-clusters`: clients whose inputs differ even within a class (CGAU section 3.3).

"We then learn a dimensionality reduction on the training partition of the embedded data through
principal component analysis ... the first two principal components ... For each class, we then
cluster the training data using a K-means clustering, thereby obtaining a set of C times K
cluster centroids. Each of the K clients are then assigned a set of centroids such that samples
that are the closest to one of a client's C centroids belongs to that client." A shuffle
proportion then re-deals that share of the samples at random among clients, from maximally
non-i.i.d. (0) to i.i.d. (1) (section 4); client sizes stay as the clusters made them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedattack.data.heterogeneity import gamma
from fedattack.data.partitioners._common import build_partition, check_fraction, check_num_clients
from fedattack.data.types import Partition, PartitionInput
from fedattack.registry import PARTITIONS, UserError

PAPER_CLIENTS = 10


@dataclass(frozen=True)
class EmbeddingClustersOptions:
    """Options of `embedding-clusters`.

    shuffle: proportion of samples whose client is re-dealt at random (0 to 1). embedding: the
    extractor (as cgau's `extractor`): central (a network trained on the dataset's test split,
    which no client holds), central:<zoo model>, torchvision:<arch> with extractor_weights=<file>
    (and extractor_size), or pixels. embedding_data: the dataset a central extractor is trained
    on (as cgau's `extractor_data`; default: the federation's own), so that the clients can be
    clustered, as in the CGAU paper, by a network not trained on the data at hand.
    test_fraction: each client's local test share. The images are the dataset the federation
    trains on, handed over by the caller.
    """

    shuffle: float = 0.0
    embedding: str = "central"
    embedding_data: str = ""
    extractor_weights: str = ""
    extractor_size: int = 0
    test_fraction: float = 0.2


@PARTITIONS.register("embedding-clusters")
class EmbeddingClusters:
    """Per class, k-means (k = clients) on 2-D PCA of embeddings; cluster j of a class to one client.

    Which client gets which cluster of a class is drawn at random (the paper leaves it to the
    k-means labels). `stats["gamma_embedding"]` is Gamma (section 3.4) on the full embeddings,
    `stats["shuffled"]` the number of samples re-dealt. `num_clients` None means 10 (the paper).
    """

    Options = EmbeddingClustersOptions

    @staticmethod
    def split(data: PartitionInput, num_clients: int | None, seed: int,
              options: EmbeddingClustersOptions) -> Partition:
        labels = data.labels
        check_fraction("test_fraction", options.test_fraction)
        if not 0.0 <= options.shuffle <= 1.0:
            raise UserError(f"shuffle must be in [0, 1], got {options.shuffle}")
        n = num_clients if num_clients is not None else PAPER_CLIENTS
        check_num_clients(n, len(labels))
        feats = embeddings(data, options)
        rng = np.random.default_rng(seed)
        owner = cluster_owners(feats, labels, n, seed, rng)
        moved = shuffle_owners(owner, options.shuffle, rng)
        holdings = [np.flatnonzero(owner == k) for k in range(n)]
        if any(len(h) == 0 for h in holdings):
            raise UserError("a client received no data; use fewer clients")
        stats = {"gamma_embedding": gamma(feats, holdings), "embedding_dim": int(feats.shape[1]),
                 "shuffled": int(moved)}
        return build_partition("embedding-clusters", seed, options, labels, holdings,
                               ["all"] * n, rng, stats)


def embeddings(data: PartitionInput, options: EmbeddingClustersOptions) -> np.ndarray:
    """The train split's embeddings under the chosen extractor."""
    from fedattack.models.zoo.cgau import ExtractorSpec, build_extractor, embed

    dataset = data.dataset
    if dataset is None:
        raise UserError("embedding-clusters needs the dataset's images, not only its labels; "
                        "pass the Dataset to make_partition")
    spec = ExtractorSpec(options.embedding, options.embedding_data or dataset.name, options.extractor_weights,
                         options.extractor_size)
    extractor = build_extractor(spec, dataset.input_shape, dataset.num_classes, dataset)
    return embed(extractor, dataset.x_train).numpy().astype(np.float64)


def cluster_owners(feats: np.ndarray, labels: np.ndarray, n: int, seed: int,
                   rng: np.random.Generator) -> np.ndarray:
    """Each sample's client: its k-means cluster within its class, clusters dealt to clients."""
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA

    plane = PCA(n_components=2, random_state=seed).fit_transform(feats)
    owner = np.empty(len(labels), dtype=np.int64)
    for c in np.unique(labels):
        rows = np.flatnonzero(labels == c)
        if len(rows) < n:
            raise UserError(f"class {c} has {len(rows)} samples, fewer than the {n} clients")
        km = KMeans(n_clusters=n, n_init=10, random_state=seed).fit(plane[rows])
        owner[rows] = rng.permutation(n)[km.labels_]
    return owner


def shuffle_owners(owner: np.ndarray, proportion: float, rng: np.random.Generator) -> int:
    """Permute the clients of a random `proportion` of samples in place; returns how many moved."""
    chosen = rng.choice(len(owner), size=int(round(proportion * len(owner))), replace=False)
    before = owner[chosen].copy()
    owner[chosen] = before[rng.permutation(len(chosen))]
    return int((owner[chosen] != before).sum())
