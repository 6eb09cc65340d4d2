"""A Flower app on the digits with Flower's own differential privacy, declared for `fedattack audit-flower`.

The ClientApp trains a small MLP on its partition of the digits (equal partitions, so every
client reports the same num-examples, which Flower's DP noise assumes). Each function below is
one ServerApp configuration, declared as a `FlowerApp` (its strategy for n nodes, its ClientApp
and the mods it runs):

    server_side       DifferentialPrivacyServerSideFixedClipping (the server clips and adds noise)
    client_side       DifferentialPrivacyClientSideFixedClipping + fixedclipping_mod on the clients
    forgotten_mod     client_side with the clients' fixedclipping_mod left out (nothing clips)
    accounted         server_side with Flower's RdpAccountant kept by the wrapper
    adaptive          DifferentialPrivacyServerSideAdaptiveClipping
    noise_removed     a planted bug: server_side whose noise is never added, its claim kept
    noise_free_filter a "privacy" filter that clips each update and adds nothing, claiming no epsilon

    PYTHONPATH=examples/flower_dp fedattack audit-flower dp_app:server_side --canaries 64
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.clientapp.mod import fixedclipping_mod
from flwr.serverapp import NeighboringRelation, PrivacyConfig, RdpAccountant, SamplingMethod
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyServerSideFixedClipping,
    FedAvg,
)
from flwr.supercore.differential_privacy import compute_clip_model_update
from torch import nn

from fedattack.data import load_dataset
from fedattack.interop.flower_dp import FlowerApp

PARTITIONS, ROUNDS, EXAMPLES, SIGMA, CLIP, LR, BATCH, SEED = 4, 3, 256, 6.0, 0.5, 0.1, 32, 0


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(64, 32), nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.fc1(x.flatten(1)).relu())


@lru_cache(maxsize=1)
def digits() -> tuple[torch.Tensor, torch.Tensor]:
    data = load_dataset("digits")
    return data.x_train, data.y_train


def partition(pid: int) -> torch.Tensor:
    """EXAMPLES samples per partition, from one seeded shuffle of the digits train split."""
    order = np.random.default_rng(SEED).permutation(len(digits()[1]))
    return torch.as_tensor(order[pid * EXAMPLES:(pid + 1) * EXAMPLES])


def train(msg: Message, context: Context) -> Message:
    pid = int(context.node_config["partition-id"])
    x, y = (t[partition(pid)] for t in digits())
    model = Net()
    model.load_state_dict(msg.content.array_records["arrays"].to_torch_state_dict())
    opt, gen = torch.optim.SGD(model.parameters(), lr=LR), torch.Generator().manual_seed(SEED + pid)
    for batch in torch.randperm(len(y), generator=gen).split(BATCH):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
        opt.step()
    metrics = MetricRecord({"num-examples": len(y), "partition-id": pid})
    return Message(RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics}), reply_to=msg)


def client_app(mods: list | None = None) -> ClientApp:
    app = ClientApp(mods=mods or [])
    app.train()(train)
    return app


def initial() -> ArrayRecord:
    torch.manual_seed(SEED)
    return ArrayRecord(Net().state_dict())


def fedavg() -> FedAvg:
    return FedAvg(fraction_train=1.0, fraction_evaluate=0.0)


def declared(strategy, mods: list | None = None) -> FlowerApp:  # type: ignore[no-untyped-def]
    return FlowerApp(strategy=strategy, client_app=client_app(mods), initial_arrays=initial,
                     partitions=PARTITIONS, rounds=ROUNDS, examples=EXAMPLES, mods=tuple(mods or ()))


def server_side() -> FlowerApp:
    return declared(lambda n: DifferentialPrivacyServerSideFixedClipping(fedavg(), SIGMA, CLIP, n))


def client_side() -> FlowerApp:
    return declared(lambda n: DifferentialPrivacyClientSideFixedClipping(fedavg(), SIGMA, CLIP, n),
                    [fixedclipping_mod])


def forgotten_mod() -> FlowerApp:
    """A misconfiguration: client-side fixed clipping, the clients' fixedclipping_mod left out."""
    return declared(lambda n: DifferentialPrivacyClientSideFixedClipping(fedavg(), SIGMA, CLIP, n))


def accounted() -> FlowerApp:
    def strategy(n: int) -> DifferentialPrivacyServerSideFixedClipping:
        config = PrivacyConfig(1e-5, n, NeighboringRelation.ADD_OR_REMOVE_ONE, SamplingMethod.NO_AMPLIFICATION)
        return DifferentialPrivacyServerSideFixedClipping(fedavg(), SIGMA, CLIP, n, accountant=RdpAccountant(config))
    return declared(strategy)


def adaptive() -> FlowerApp:
    return declared(lambda n: DifferentialPrivacyServerSideAdaptiveClipping(
        fedavg(), SIGMA, n, initial_clipping_norm=CLIP, clipped_count_stddev=n / 2))


class NoiseForgotten(DifferentialPrivacyServerSideFixedClipping):
    """Planted bug: clips like Flower's wrapper and claims its noise multiplier, but adds no noise."""

    def _add_noise_to_aggregated_arrays(self, aggregated_arrays: ArrayRecord) -> ArrayRecord:
        return aggregated_arrays


def noise_removed() -> FlowerApp:
    return declared(lambda n: NoiseForgotten(fedavg(), SIGMA, CLIP, n))


class ClipOnlyFilter(FedAvg):
    """A "privacy" filter of the kind deployers ship: every update clipped to CLIP, no noise added."""

    def configure_train(self, server_round, arrays, config, grid):  # type: ignore[no-untyped-def]
        self.current = arrays.to_numpy_ndarrays()
        return super().configure_train(server_round, arrays, config, grid)

    def aggregate_train(self, server_round, replies):  # type: ignore[no-untyped-def]
        replies = list(replies)
        for reply in replies:
            record = reply.content.array_records["arrays"]
            arrays = record.to_numpy_ndarrays()
            compute_clip_model_update(arrays, self.current, CLIP)
            reply.content["arrays"] = ArrayRecord({k: Array(np.asarray(v)) for k, v in zip(record.keys(), arrays)})
        return super().aggregate_train(server_round, replies)


def noise_free_filter() -> FlowerApp:
    return declared(lambda n: ClipOnlyFilter(fraction_train=1.0, fraction_evaluate=0.0))
