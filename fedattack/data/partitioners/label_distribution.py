"""`label-distribution`: WAFFLE's label-skew and concept-shift benchmark (Beaussart et al., 2021).

"We specify each distribution as a list of ten numbers that sum to one (see Figure 2). For each
agent i, we move the list to the right i times to get non-IID data, e.g. with distribution B,
agent 0 will only have labels 0 to 3, agent 1 labels 1 to 4, etc." A is i.i.d., B is classic
label skew (four labels per agent), C is nuanced skew (40% of one label, 20% of two, 10% of two
others). A* and B* add concept shift: "randomly swapping the class labels of all agents, except
for Alice" (agent 0). The size distributions (appendix table) give each agent's share of the
data. The paper runs ten agents.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedattack.data.partitioners._common import build_partition, check_fraction
from fedattack.data.types import Partition, PartitionInput
from fedattack.options import one_of
from fedattack.registry import PARTITIONS, UserError
from fedattack.suggest import did_you_mean

NUM_LABELS = 10
PAPER_AGENTS = 10

# Figure 2: the share of each label (0..9) in agent 0's data
LABEL_DISTRIBUTIONS: dict[str, tuple[float, ...]] = {
    "A": (0.1,) * 10,
    "B": (0.25, 0.25, 0.25, 0.25, 0, 0, 0, 0, 0, 0),
    "C": (0, 0, 0, 0.1, 0.2, 0.4, 0.2, 0.1, 0, 0),
}
DISTRIBUTION_NAMES = ("A", "B", "C", "A*", "B*")  # the paper has no C*
# Appendix B: the share of all allocated data each agent 0..9 holds
SIZE_DISTRIBUTIONS: dict[str, tuple[float, ...]] = {
    "A": (0.1,) * 10,
    "B": (0.21, 0.06, 0.11, 0.06, 0.11, 0.06, 0.16, 0.06, 0.11, 0.06),
    "C": (0.1, 0.1, 0.1, 0.1, 0.2, 0.05, 0.05, 0.1, 0.1, 0.1),
}


@dataclass(frozen=True)
class LabelDistributionOptions:
    """Options of `label-distribution`.

    distribution: A, B, C (label skew) or A*, B* (the same with concept shift). size_distribution:
    A (equal), B or C: each agent's share of the data (needs 10 agents unless A). shift: how far
    the label list moves per agent index, 1 as the paper's text says ("to the right"); the
    paper's appendix table for C shows it moving left, which is shift=-1. max_samples: cap on the
    samples allocated in all (None: as many as the class counts allow). test_fraction: share of
    each agent's data held out as its local test set.
    """

    distribution: str = "A"
    size_distribution: str = "A"
    shift: int = 1
    max_samples: int | None = None
    test_fraction: float = 0.2


@PARTITIONS.register("label-distribution")
class LabelDistribution:
    """Agent i holds T * size[i] * roll(dist, shift * i)[c] samples of each class c.

    T is the largest total the class counts allow (or max_samples); what no agent receives is
    discarded. Concept shift (A*, B*) does not move any sample: it relabels. For each agent
    `stats["label_maps"][i]` is a list of 10 ints mapping a true label to the label that agent
    sees (identity for agent 0, "Alice", and for every agent under A, B, C); the training loop
    must apply it to the agent's local train and test labels. Group "alice" for agent 0, "others"
    for the rest. `num_clients` None means the paper's 10 agents.
    """

    Options = LabelDistributionOptions

    @staticmethod
    def split(data: PartitionInput, num_clients: int | None, seed: int,
              options: LabelDistributionOptions) -> Partition:
        labels = data.labels
        check_fraction("test_fraction", options.test_fraction)
        n = num_clients if num_clients is not None else PAPER_AGENTS
        dist, sizes, concept_shift = _tables(options, n, labels)
        shares = sizes[:, None] * np.stack([np.roll(dist, options.shift * i) for i in range(n)])
        rng = np.random.default_rng(seed)
        holdings = _allocate(rng, labels, shares, options.max_samples)
        maps = [list(range(NUM_LABELS))] + [
            rng.permutation(NUM_LABELS).tolist() if concept_shift else list(range(NUM_LABELS))
            for _ in range(n - 1)
        ]
        groups = ["alice"] + ["others"] * (n - 1)
        stats = {"label_maps": maps}
        return build_partition(
            "label-distribution", seed, options, labels, holdings, groups, rng, stats
        )


def _tables(
    options: LabelDistributionOptions, n: int, labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Validate the options; return agent 0's label shares, per-agent sizes, concept shift."""
    name = options.distribution.upper()
    if name not in DISTRIBUTION_NAMES:
        allowed = ", ".join(DISTRIBUTION_NAMES)
        raise UserError(f"distribution must be one of {allowed}, got {options.distribution!r}"
                        f"{did_you_mean(options.distribution, DISTRIBUTION_NAMES)}")
    size_name = options.size_distribution.upper()
    one_of(size_name, SIZE_DISTRIBUTIONS, "size_distribution")
    if n < 1:
        raise UserError(f"num_clients must be at least 1, got {n}")
    if size_name != "A" and n != PAPER_AGENTS:
        raise UserError(f"size_distribution {size_name} is defined for 10 agents, not {n}")
    if len(labels) == 0 or labels.min() < 0 or labels.max() >= NUM_LABELS:
        raise UserError("label-distribution needs a dataset with 10 classes (labels 0..9)")
    sizes = np.full(n, 1.0 / n) if size_name == "A" else np.asarray(SIZE_DISTRIBUTIONS[size_name])
    return np.asarray(LABEL_DISTRIBUTIONS[name.rstrip("*")]), sizes, name.endswith("*")


def _allocate(
    rng: np.random.Generator, labels: np.ndarray, shares: np.ndarray, max_samples: int | None
) -> list[np.ndarray]:
    """Give agent i floor(T * shares[i, c]) random samples of class c, T as large as allowed."""
    counts = np.bincount(labels, minlength=NUM_LABELS)
    demand = shares.sum(axis=0)
    total = min(counts[c] / demand[c] for c in range(NUM_LABELS) if demand[c] > 0)
    if max_samples is not None:
        if max_samples < 1:
            raise UserError(f"max_samples must be at least 1, got {max_samples}")
        total = min(total, float(max_samples))
    wanted = np.floor(total * shares).astype(np.int64)
    assert np.all(wanted.sum(axis=0) <= counts), "allocation exceeds a class count"
    pools = [rng.permutation(np.flatnonzero(labels == c)) for c in range(NUM_LABELS)]
    taken = np.zeros(NUM_LABELS, dtype=np.int64)
    holdings = []
    for row in wanted:
        parts = [pools[c][taken[c] : taken[c] + k] for c, k in enumerate(row)]
        taken += row
        holdings.append(np.concatenate(parts))
    if any(len(h) == 0 for h in holdings):
        raise UserError("an agent would receive no data; use fewer agents or a larger max_samples")
    return holdings
