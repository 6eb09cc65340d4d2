"""Hidden or personal parts of a model, guessed by training them on auxiliary data.

  hidden-fitted         the method keeps some model parameters off the wire (FedPer's head,
                        CGAU's conditioning): they start from a fresh initialisation and are
                        trained on auxiliary data with the decoded, shared part frozen
  hidden-zero           those parameters set to zero, where the method declares that zeros are
                        what a client that never trained holds (CGAU's conditioning)
  personal-fine-tuned   the method keeps a personal model beside the shared one (pFedMe's theta,
                        Ditto's v, APFL's v): fine-tune the decoded shared model on auxiliary data,
                        with the method's declared proximal weight (the pull towards the shared
                        model that defines the personal one)

All read only the method's declarations (`Target.hidden()`), and train on auxiliary samples with
the victim's class mix and the protocol's recipe.
"""

from __future__ import annotations

import torch

from fedattack.attacks.hidden_parts.base import Reconstructed, Strategy, aux_like_victim, decoded
from fedattack.attacks.hidden_parts.fitting import fit
from fedattack.attacks.view import Knowledge, Observation
from fedattack.target import Target, initial_weights


def hidden_parameters(target: Target) -> str | None:
    """Why `target` has no hidden model parameters to guess (None: it has)."""
    if not target.hidden().parameters:
        return f"{target.name} keeps no model parameters off the wire"
    if not target.wire_schema().uplink:
        return f"{target.name} sends nothing"
    return None


class HiddenFitted(Strategy):
    """Missing parameters trained on auxiliary data with the decoded ones frozen."""

    name = "hidden-fitted"
    needs_labels = True
    rank = 1

    def unsupported(self, target: Target) -> str | None:
        return hidden_parameters(target)

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        shared = decoded(target, obs)
        hidden = [n for n in target.param_names if n not in shared]
        fresh = initial_weights(target.model, gen)
        start = {**{n: fresh[n] for n in hidden}, **shared}
        data = aux_like_victim(knowledge, gen)
        params = fit(target, start, hidden, data, gen)
        return Reconstructed(self.name, params, {"fitted": hidden, "aux_samples": len(data),
                                                 "source": f"uplink of round {obs.round}"})


class HiddenZero(Strategy):
    """Hidden parameters at zero, what a client that never trained holds (declared by the method)."""

    name = "hidden-zero"
    rank = 0

    def unsupported(self, target: Target) -> str | None:
        reason = hidden_parameters(target)
        if reason is None and not target.hidden().zero_means_untrained:
            return f"{target.name} does not declare zeros as an untrained client's hidden parameters"
        return reason

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        shared = decoded(target, obs)
        shapes = dict(target.model.named_parameters())
        hidden = [n for n in target.param_names if n not in shared]
        params = {**{n: torch.zeros_like(shapes[n]).detach() for n in hidden}, **shared}
        return Reconstructed(self.name, params, {"zeroed": hidden, "source": f"uplink of round {obs.round}"})


class PersonalFineTuned(Strategy):
    """The decoded shared model fine-tuned on auxiliary data (with the method's prox weight)."""

    name = "personal-fine-tuned"
    needs_labels = True
    rank = 2

    def unsupported(self, target: Target) -> str | None:
        if target.hidden().personal_prox is None:
            return f"{target.name} keeps no personal model"
        return None

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        shared = decoded(target, obs)
        lam = float(target.hidden().personal_prox or 0.0)
        data = aux_like_victim(knowledge, gen)
        params = fit(target, shared, list(shared), data, gen, anchor=shared, lam=lam)
        return Reconstructed(self.name, params, {"lam": lam, "aux_samples": len(data),
                                                 "source": f"uplink of round {obs.round}"})
