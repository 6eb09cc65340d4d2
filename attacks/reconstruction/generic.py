"""The strategies every method gets: the uplink is the model, or (oracle) the deployed model.

`uplink` serves every method no family file claims, when the uplink's names are exactly the
model's parameter names: the client sent its whole model (FedAvg, FedProx, ...), so there is
nothing to guess. `true` is the oracle's: the victim's deployed model, private parts included.
"""

from __future__ import annotations

import torch

from fedattack.attacks.reconstruction.base import EVERY, GENERIC, Reconstructed, Strategy
from fedattack.attacks.view import Knowledge, Observation
from fedattack.target import Target


class Uplink(Strategy):
    """The uplink carries the client's whole model: query it as it is."""

    name = "uplink"
    methods = GENERIC
    needs = frozenset({"up"})
    rank = 0

    def unsupported(self, target: Target) -> str | None:
        if set(target.wire_schema().uplink) != set(target.param_names):
            return f"{target.name}'s uplink is not its model's parameters"
        return None

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        assert obs.up is not None
        params = {n: obs.up[n] for n in target.param_names}
        return Reconstructed(self.name, params, {"source": f"uplink of round {obs.round}"})


class TrueModel(Strategy):
    """The victim's deployed model itself (oracle only: an upper bound, nothing is guessed)."""

    name = "true"
    methods = EVERY
    needs = frozenset({"deployed"})
    rank = 0

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        assert obs.deployed is not None
        return Reconstructed(self.name, dict(obs.deployed), {"source": "deployed model (upper bound)"})
