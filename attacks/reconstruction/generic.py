"""The strategies every method gets: the client's model decoded from its uplink, or the truth.

`uplink`: the uplink's names are exactly the model's parameter names, so the client sent its
whole model (FedAvg, FedProx, pFedMe, APFL, ...) and there is nothing to guess. `update-applied`:
the uplink is an update of every parameter, and the same round's downlink is the model it was
taken from, so the client's model is downlink + update: `dy.<name>` (SCAFFOLD, WAFFLE) and
`delta.<name>` (Ditto) are y - x, `g.<name>` (Weight Erosion) is (x - y) / lr with the public
local learning rate. `true` is the oracle's: the victim's deployed model, private parts included.
"""

from __future__ import annotations

import torch

from fedattack.attacks.reconstruction.base import EVERY, GENERIC, Reconstructed, Strategy
from fedattack.attacks.view import Knowledge, Observation
from fedattack.target import State, Target

# uplink prefix -> the factor that turns it into (client model - downlink model)
UPDATES = {"dy": lambda t: 1.0, "delta": lambda t: 1.0, "g": lambda t: -float(t.recipe.lr)}


def encoding(target: Target) -> str | None:
    """How `target`'s uplink carries the client model: "model", an update prefix, or None."""
    up, params = set(target.wire_schema().uplink), target.param_names
    if up == set(params):
        return "model"
    for prefix in UPDATES:
        if up == {f"{prefix}.{n}" for n in params} | (up & {f"dc.{n}" for n in params}):
            return prefix
    return None


def client_model(target: Target, obs: Observation) -> State:
    """The client's model after local training, decoded from the observation's uplink."""
    kind = encoding(target)
    assert obs.up is not None and kind is not None
    if kind == "model":
        return {n: obs.up[n] for n in target.param_names}
    assert obs.down is not None
    scale = UPDATES[kind](target)
    return {n: obs.down[n] + scale * obs.up[f"{kind}.{n}"] for n in target.param_names}


class Uplink(Strategy):
    """The uplink carries the client's whole model: query it as it is."""

    name = "uplink"
    methods = GENERIC
    needs = frozenset({"up"})
    rank = 0

    def unsupported(self, target: Target) -> str | None:
        return None if encoding(target) == "model" else f"{target.name}'s uplink is not its model"

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        return Reconstructed(self.name, client_model(target, obs), {"source": f"uplink of round {obs.round}"})


class UpdateApplied(Strategy):
    """The uplinked update applied to the same round's downlink: the client's trained model."""

    name = "update-applied"
    methods = GENERIC
    needs = frozenset({"up", "down"})
    rank = 0

    def unsupported(self, target: Target) -> str | None:
        kind = encoding(target)
        return None if kind not in (None, "model") else f"{target.name}'s uplink is not a plain update"

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        kind = encoding(target)
        return Reconstructed(self.name, client_model(target, obs),
                             {"source": f"downlink + {kind}.* of round {obs.round}"})


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
