"""Small Flower apps for the DP audit's tests: the example's, cut to 2 partitions and 2 rounds,
and configurations the audit must refuse (each a function, as `fedattack audit-flower` takes)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping

from fedattack.interop.flower_dp import FlowerApp

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "flower_dp"))
import dp_app  # noqa: E402  # the example app, on the path just above

PARTITIONS, ROUNDS = 2, 2


def small(kind: str) -> FlowerApp:
    """The example's `kind` configuration on 2 partitions for 2 rounds (claimed epsilon 0.95)."""
    return dataclasses.replace(getattr(dp_app, kind)(), partitions=PARTITIONS, rounds=ROUNDS)


def server_side() -> FlowerApp:
    return small("server_side")


def wrong_sample_count() -> FlowerApp:
    """The wrapper told one client fewer than are sampled: its noise std is for n - 1."""
    return dataclasses.replace(server_side(), strategy=lambda n: DifferentialPrivacyServerSideFixedClipping(
        dp_app.fedavg(), dp_app.SIGMA, dp_app.CLIP, n - 1))


def negative_noise() -> FlowerApp:
    return dataclasses.replace(server_side(), strategy=lambda n: DifferentialPrivacyServerSideFixedClipping(
        dp_app.fedavg(), -1.0, dp_app.CLIP, n))


def unequal_weights() -> FlowerApp:
    """Canaries would report another num-examples than the clients: the mean is not uniform."""
    return dataclasses.replace(server_side(), examples=dp_app.EXAMPLES // 2)


def crashing_client() -> FlowerApp:
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        raise RuntimeError("the client's data is missing")

    return dataclasses.replace(server_side(), client_app=app)


def not_an_app() -> str:
    return "a Flower app"


def forgotten_mod() -> FlowerApp:
    """Client-side fixed clipping with the clients' fixedclipping_mod left out: nothing clips."""
    return small("forgotten_mod")
