"""The strategies every method gets: the client's model decoded from its messages, or the truth.

`decoded`: the method's own `decode` rebuilds the client's trained parameters from one round's
messages (FedAvg's uplink is the model; SCAFFOLD's and Ditto's are updates of the downlink;
q-FFL's a scaled update whose scale the method solves from `h`), and the method hides nothing the
model needs to run (a personal model beside the shared one is allowed: the decoded shared model
is still a model the client trained). `broadcast` serves threat models that attack the model
the server broadcast (an observer of the global model): the latest downlink is that model.
`true` is the oracle's: the victim's deployed model, private parts included.
"""

from __future__ import annotations

import torch

from fedattack.attacks.hidden_parts.base import BROADCAST_MODEL, DEPLOYED_MODEL, Reconstructed, Strategy, decoded
from fedattack.attacks.view import Knowledge, Observation
from fedattack.target import State, Target
from fedattack.wire import SERVER, Message, Payload


def decodes_whole_model(target: Target) -> str | None:
    """Why the decoded uplink is not a complete model of `target` (None: it is)."""
    masked = target.uplinks_hidden  # a defence (secure aggregation) masks them
    if masked:
        return f"{target.name} under {masked}"
    hidden = target.hidden()
    if hidden.parameters:
        return f"{target.name} keeps parameters off the wire ({', '.join(hidden.parameters[:3])}...)"
    if hidden.selection:
        return f"{target.name} keeps a factor selection off the wire"
    if not target.wire_schema().uplink:
        return f"{target.name} sends nothing"
    return None


class Decoded(Strategy):
    """The client's trained model, decoded from its messages by the method's own decoder."""

    name = "decoded"
    rank = 0

    def unsupported(self, target: Target) -> str | None:
        return decodes_whole_model(target)

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        parts = "+".join(sorted(target.decode_needs))
        return Reconstructed(self.name, decoded(target, obs), {"source": f"{parts} of round {obs.round}"})


class Broadcast(Strategy):
    """The model the server broadcast: the observed downlink's parameters. A shadow or reference
    model (an observation with an uplink) is rebuilt as the model the server would broadcast had
    that client been the round's only one: its decoded model, or, where a defence masks the
    uplink, what the server's step makes of that one uplink."""

    name = "broadcast"
    needs = frozenset({"down"})
    rank = 0
    serves = frozenset({BROADCAST_MODEL})

    def needed(self, target: Target) -> frozenset[str]:
        return self.needs

    def unsupported(self, target: Target) -> str | None:
        hidden = target.hidden()
        if hidden.parameters or hidden.selection:
            return f"{target.name}'s broadcast lacks what each client keeps to run the model"
        missing = [n for n in target.param_names if n not in target.wire_schema().downlink]
        return f"{target.name}'s broadcast does not carry {missing[0]}" if missing else None

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        assert obs.down is not None
        server = dict(obs.down) if obs.up is None else self.alone(target, obs, obs.up)
        params = {n: server[n] for n in target.param_names}
        return Reconstructed(self.name, params, {"source": f"the broadcast of round {obs.round}"})

    @staticmethod
    def alone(target: Target, obs: Observation, up: Payload) -> State:
        """A client the adversary trained: the broadcast after its round, had it been alone."""
        decoded = target.read_uplink(obs.down, up)
        if decoded is not None:
            return decoded
        sent = Message(obs.round or 0, 0, SERVER, "uplink", up, samples=1)
        return target.server_step(dict(obs.down or {}), [sent], obs.round or 0)


class TrueModel(Strategy):
    """The victim's deployed model itself (oracle only: an upper bound, nothing is guessed)."""

    name = "true"
    needs = frozenset({"deployed"})
    rank = 0
    serves = frozenset({DEPLOYED_MODEL})

    def needed(self, target: Target) -> frozenset[str]:
        return self.needs

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        assert obs.deployed is not None
        return Reconstructed(self.name, dict(obs.deployed), {"source": "deployed model (upper bound)"})
