"""From the adversary's inputs to an inversion problem: where the client started, where it ended,
what it ran, on how many images, with which labels.

Everything here reads what the threat model let the adversary have (`Adversary`): the victim's
observed downlink and uplink, decoded by the method's own `decode` (the client's trained
parameters, so no method is known by name), the model the chosen reconstruction strategy
rebuilt (its guesses of what the method keeps hidden), and the `Knowledge` its threat model
grants. What is not known is assumed or estimated, and the result says which (`notes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from fedattack.attacks.base import Adversary, NotApplicable
from fedattack.attacks.data_reconstruction.gradient import gradient_from_update
from fedattack.attacks.data_reconstruction.joint import Extras
from fedattack.attacks.data_reconstruction.labels import (
    estimate_label_counts,
    label_from_gradient,
    labels_from_counts,
    output_bias_key,
)
from fedattack.attacks.data_reconstruction.local_run import LocalRecipe
from fedattack.attacks.data_reconstruction.objectives import State
from fedattack.target import Recipe, Target

PROBES = 64  # auxiliary images (unlabelled) that estimate the client's mean softmax for label counts


@dataclass(frozen=True)
class VictimUpdate:
    """One observed local run: `start` (every parameter the client trains, at the downlink;
    hidden ones at the strategy's guess), `after` (the visible ones it uplinked, decoded), the
    hidden selection as `extras`, the recipe and sample count the adversary works with."""

    target: Target
    start: State
    after: State
    extras: Extras
    recipe: LocalRecipe
    num_samples: int
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def one_step(self) -> bool:
        return self.recipe.num_steps(self.num_samples) == 1

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.target.ctx.input_shape)

    def forward(self, params: State, x: torch.Tensor) -> torch.Tensor:
        return self.target.forward(params, x)


def victim_update(adv: Adversary, adaptive_selection: bool) -> VictimUpdate:
    """The victim's observed run, or `NotApplicable` with the one-line reason it cannot be had."""
    target, obs = adv.view.target, adv.obs
    if obs.down is None:
        raise NotApplicable("no downlink observed: an update cannot be inverted without the weights it started from")
    if obs.up is None:
        raise NotApplicable("no uplink of the victim observed")
    decoded = target.read_uplink(obs.down, obs.up)
    if decoded is None:
        raise NotApplicable(f"the {target.name} uplink of round {obs.round} does not decode to model parameters")
    selection = {f"{layer}.b": factors for layer, factors in target.hidden().selection.items()}
    visible = [k for k in decoded if k in obs.down and k not in selection
               and obs.down[k].shape == decoded[k].shape]
    if not visible:
        raise NotApplicable(f"nothing the {target.name} uplink decodes to was in the downlink: no update to invert")
    model = adv.model.params
    start = {k: v.detach() for k, v in model.items() if k not in selection}
    start.update({k: obs.down[k].detach().float() for k in visible})
    guessed = {k: model[k].detach() if k in model else torch.ones(f) for k, f in selection.items()}
    extras = Extras(free=guessed) if adaptive_selection else Extras(fixed=guessed)
    recipe, recipe_note = local_recipe(target, adv.knowledge.recipe_known)
    samples, samples_note = sample_count(adv, recipe)
    hidden = sorted(k for k in start if k not in visible)
    notes = {"round": obs.round, "recipe": recipe_note, "samples": samples_note, "matched_tensors": len(visible),
             "hidden_tensors": hidden, "local_steps": recipe.num_steps(samples),
             "selection": ("optimised with the images" if adaptive_selection else "the strategy's guess")
             if selection else "none"}
    return VictimUpdate(target, start, {k: decoded[k].detach().float() for k in visible}, extras, recipe,
                        samples, notes)


def local_recipe(target: Target, known: bool) -> tuple[LocalRecipe, dict[str, Any]]:
    """The victim's recipe when the threat model knows it, else fedattack's default, said so.

    A proximal pull is the one the method declares in its local objective (FedProx's mu), 0 without."""
    recipe = target.recipe if known else Recipe()
    objective = target.local_objective()
    mu = objective.proximal if objective is not None else 0.0
    note = {"epochs": recipe.epochs, "batch_size": recipe.batch_size, "lr": recipe.lr, "mu": mu,
            "source": "known" if known else "assumed: fedattack's default recipe (the victim's is not known)"}
    return LocalRecipe(recipe.epochs, recipe.batch_size, recipe.lr, mu), note


def sample_count(adv: Adversary, recipe: LocalRecipe) -> tuple[int, dict[str, Any]]:
    """The victim's number of images: known, else the n_k its uplink reports, else one batch."""
    if adv.knowledge.victim_size:
        return int(adv.knowledge.victim_size), {"n": adv.knowledge.victim_size, "source": "known"}
    rnd = adv.obs.round
    ups = adv.view.messages(client=adv.view.victim, kind="uplink", rounds=None if rnd is None else {rnd})
    reported = [m.samples for m in ups if m.samples]
    if reported:
        return int(reported[-1]), {"n": int(reported[-1]), "source": "the sample count the uplink reports"}
    return recipe.batch_size, {"n": recipe.batch_size, "source": "assumed: one batch of the recipe"}


def recover_labels(update: VictimUpdate, adv: Adversary, gen: torch.Generator,
                   use_known: bool = True) -> tuple[torch.Tensor, dict[str, Any]]:
    """The victim's labels (sorted by class): its class counts when known (and `use_known`),
    else counted from the output bias's update (iDLG for one image and one step, else
    `estimate_label_counts`, probing with the auxiliary images, labelled only if `use_known`)."""
    know, n = adv.knowledge, update.num_samples
    labelled = know.labels_known and use_known
    if labelled and sum(know.victim_class_counts) == n:
        return labels_from_counts(torch.as_tensor(know.victim_class_counts)), {"source": "known"}
    try:
        key = output_bias_key(update.after, update.target.num_classes)
    except ValueError:
        raise NotApplicable("labels unknown and no output bias on the wire to count them from") from None
    if n == 1 and update.one_step:
        grad = gradient_from_update(update.start, update.after)
        return torch.tensor([label_from_gradient(grad, key)]), {"source": "iDLG: the output bias's one negative entry"}
    held = update.extras.initial()
    aux = know.aux.x[:PROBES] if len(know.aux) else None
    aux_labels = know.aux.y[:PROBES] if aux is not None and labelled else None
    r = update.recipe

    def forward(params: State, x: torch.Tensor) -> torch.Tensor:
        return update.forward({**held, **params}, x)

    counted = estimate_label_counts(forward, update.start, {**update.start, **update.after}, n, lr=r.lr,
                                    epochs=r.epochs, batch_size=r.batch_size, bias_key=key, gen=gen,
                                    input_shape=update.shape, probes=aux, probe_labels=aux_labels)
    probes = "uniform noise" if aux is None else \
        f"{len(aux)} {'labelled' if aux_labels is not None else 'unlabelled'} auxiliary images"
    return counted.labels, {"source": f"counted from the output bias's update (probes: {probes})",
                            "counts": counted.counts.tolist()}
