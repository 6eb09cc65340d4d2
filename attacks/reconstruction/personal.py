"""Hidden or personal parts of a model, guessed by training them on auxiliary data.

  hidden-fitted         the uplink carries only some of the model's parameters (FedPer's base):
                        the missing ones (the head) start from a fresh initialisation and are
                        trained on auxiliary data with the shared part frozen
  personal-fine-tuned   the uplink gives the client's copy of the shared model, its personalised
                        model stays home (pFedMe's theta, Ditto's v, APFL's v): fine-tune that
                        copy on auxiliary data, with the method's proximal weight `lam` when it
                        has one (the pull towards the shared model that defines the personal one)
  conditioning-zero     CGAU: the client's private conditioning vectors set to zero, what a
                        client that never trained uses (`hidden-fitted` fits them instead)

Both train on auxiliary samples with the victim's class mix and the protocol's recipe.
"""

from __future__ import annotations

import torch

from fedattack.attacks.reconstruction.base import GENERIC, Reconstructed, Strategy, aux_like_victim
from fedattack.attacks.reconstruction.fitting import fit
from fedattack.attacks.reconstruction.generic import client_model, encoding
from fedattack.attacks.view import Knowledge, Observation
from fedattack.target import Target, initial_weights

PERSONAL = ("pfedme", "ditto", "apfl")


class HiddenFitted(Strategy):
    """Missing parameters trained on auxiliary data with the uplinked ones frozen."""

    name = "hidden-fitted"
    methods = GENERIC
    needs = frozenset({"up"})
    rank = 1

    def unsupported(self, target: Target) -> str | None:
        up, params = set(target.wire_schema().uplink), set(target.param_names)
        if not up < params:
            return f"{target.name}'s uplink is not a strict subset of its model's parameters"
        return None

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        assert obs.up is not None
        hidden = [n for n in target.param_names if n not in obs.up]
        fresh = initial_weights(target.model, gen)
        start = {**{n: fresh[n] for n in hidden}, **{n: obs.up[n] for n in target.param_names if n in obs.up}}
        data = aux_like_victim(knowledge, gen)
        params = fit(target, start, hidden, data, gen)
        return Reconstructed(self.name, params, {"fitted": hidden, "aux_samples": len(data),
                                                 "source": f"uplink of round {obs.round}"})


class PersonalFineTuned(Strategy):
    """The uplinked shared model fine-tuned on auxiliary data (with the method's prox weight)."""

    name = "personal-fine-tuned"
    methods = PERSONAL
    needs = frozenset({"up"})
    rank = 2

    def unsupported(self, target: Target) -> str | None:
        return None if encoding(target) else f"{target.name}'s uplink does not decode to a model"

    def needed(self, target: Target) -> frozenset[str]:
        return frozenset({"up"} if encoding(target) == "model" else {"up", "down"})

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        shared = client_model(target, obs)
        lam = float(getattr(target.hyper, "lam", 0.0))
        data = aux_like_victim(knowledge, gen)
        params = fit(target, shared, list(shared), data, gen, anchor=shared, lam=lam)
        return Reconstructed(self.name, params, {"lam": lam, "aux_samples": len(data),
                                                 "source": f"uplink of round {obs.round}"})


class ConditioningZero(Strategy):
    """CGAU's private conditioning guessed as zero (a client that never trained)."""

    name = "conditioning-zero"
    methods = ("cgau",)
    needs = frozenset({"up"})
    rank = 0

    def unsupported(self, target: Target) -> str | None:
        return HiddenFitted().unsupported(target)

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        assert obs.up is not None
        shapes = dict(target.model.named_parameters())
        params = {n: obs.up[n] if n in obs.up else torch.zeros_like(shapes[n]).detach()
                  for n in target.param_names}
        hidden = [n for n in target.param_names if n not in obs.up]
        return Reconstructed(self.name, params, {"zeroed": hidden, "source": f"uplink of round {obs.round}"})
