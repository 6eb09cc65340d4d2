"""What the update-inversion attacks share on top of the data-reconstruction family base.

`gradient-inversion` and `update-inversion` differ only in how they invert (one gradient, or a
simulated local run); reading the victim's run from the adversary's view (`problem`), recovering
labels when the threat model does not know them, the hidden selection's adaptive option, and
scoring labels beside the images are the same, so they live here. This class has no `name`:
it registers nothing itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
import torch

from fedattack.attacks.base import Adversary, NotApplicable, Scored
from fedattack.attacks.data_reconstruction.family import IMAGE_METRICS, DataReconstruction, Reconstructions
from fedattack.attacks.data_reconstruction.first_layer import FirstLayerReader
from fedattack.attacks.data_reconstruction.joint import Extras, Inverted
from fedattack.attacks.data_reconstruction.labels import count_accuracy
from fedattack.attacks.data_reconstruction.problem import VictimUpdate, recover_labels, victim_update
from fedattack.attacks.data_reconstruction.through import ThroughSettings
from fedattack.attacks.data_reconstruction.unmix import Search
from fedattack.attacks.evaluation.truth import GroundTruth
from fedattack.options import check_device, one_of
from fedattack.registry import UserError
from fedattack.results import Metric

SELECTIONS = ("strategy", "adaptive")
LABELS = ("threat-model", "recovered")
STARTS = ("random", "first-layer")
RANKS = ("levels", "quantised", "sparsity")
FALLBACKS = ("optimiser", "none")
POLISH_RATE = 0.1  # the optimiser's rate when polishing a first reading, as a share of step_size
WINDOWS = ("first", "last")
ON = 0.5  # a relaxed selection entry counts as "factor on" from here (as the strategies' scores)


def _headline(keys: set[str]) -> tuple[Metric, ...]:
    """The family's image metrics, with only `keys` as headlines (share recovered first)."""
    ordered = sorted(IMAGE_METRICS, key=lambda m: m.key != "share_recovered")
    return tuple(replace(m, headline=m.key in keys) for m in ordered)


UPDATE_INVERSION_METRICS = (
    *_headline({"share_recovered", "psnr_mean"}),
    Metric(key="label_accuracy", label="labels recovered", unit="%", scale=100.0, bounds=(0.0, 1.0),
           headline=False),
    Metric(key="matched_label_accuracy", label="label of the matched image", unit="%", scale=100.0,
           bounds=(0.0, 1.0), headline=False),
)


@dataclass(frozen=True, kw_only=True)
class InversionSettings:
    """iterations: Adam steps per restart. step_size: Adam's rate on the images' sigmoid latent.
    tv: total-variation weight. distance: cosine or l2. restarts: independent starts (the lowest
    final loss wins). selection: for a method with a hidden factor selection, "strategy" holds
    the reconstruction strategy's guess fixed, "adaptive" optimises a relaxed selection per
    factorised layer jointly with the images, starting from that guess. labels: "threat-model"
    uses the victim's class counts when the threat model knows them; "recovered" always counts
    them from the update (and probes with unlabelled auxiliary images), the labels-unknown
    attacker of the FL literature on a threat model that would know them. start: "random"
    optimises from noise; "first-layer" reads the images off a fully connected first layer's
    update (`unmix`: the non-negative images of its row space, one linear program per candidate
    pixel, `programs` of them, 0 for every lit pixel; `peel` further rounds steer away from the
    images found; `rank` "levels" trusts answers with integer pixel levels (`levels` of them;
    0 reads them off the auxiliary images' pixel grid: 255 for 8-bit images, 16 for digits; 255
    without auxiliary data) at the brightness the bias update fixes first, "quantised" up to
    scale, "sparsity" the sparsest; `slack` lets answers dip that far below zero (float noise in
    the update's span), see `unmix.Search`) and skips the optimiser, falling back to it (said in
    the result) where that does not apply. rounds: how many of the victim's rounds the
    first-layer reading folds together (0 for all: a client with more images than the layer has
    units needs several, `rounds.py`), the last K it saw (`round_window=last`, up to the observed
    round) or the first K (`first`: richer, as an image the model has learnt fades from later
    updates). fallback: where the first layer does not
    unmix, "optimiser" runs the optimiser from noise, "none" says why and stops (not applicable),
    which is what a client of thousands of images needs: the optimiser cannot help there.
    polish: iterations of the optimiser started from the first-layer reading (0: none), at a
    tenth of step_size (the images are already close). device: where the optimisers and the
    simulated runs compute (cpu, or cuda[:k]); the linear programs run on the CPU either way."""

    iterations: int = 300
    step_size: float = 0.3
    tv: float = 1e-4
    distance: str = "cosine"
    restarts: int = 1
    selection: str = "strategy"
    labels: str = "threat-model"
    start: str = "random"
    programs: int = 0
    peel: int = 0
    rank: str = "levels"
    slack: float = 0.0
    levels: int = 0
    rounds: int = 1
    round_window: str = "last"
    fallback: str = "optimiser"
    polish: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.iterations < 1 or self.restarts < 1 or self.step_size <= 0 or self.tv < 0:
            raise UserError("iterations and restarts must be >= 1, step_size > 0 and tv >= 0")
        one_of(self.distance, ("cosine", "l2"), "distance")
        one_of(self.selection, SELECTIONS, "selection")
        one_of(self.start, STARTS, "start")
        if self.programs < 0 or self.peel < 0:
            raise UserError(f"programs and peel must be >= 0, got {self.programs} and {self.peel}")
        if not self.slack >= 0:
            raise UserError(f"slack {self.slack} must be >= 0")
        if self.levels < 0:
            raise UserError(f"levels {self.levels} must be >= 1 (255 for 8-bit images), or 0 to read "
                            "them off the auxiliary data")
        one_of(self.rank, RANKS, "rank")
        one_of(self.labels, LABELS, "labels")
        if self.polish < 0:
            raise UserError(f"polish {self.polish} must be >= 0 (optimiser iterations after the first-layer reading)")
        check_device(self.device)
        if self.rounds < 0:
            raise UserError(f"rounds {self.rounds} must be >= 1 (the last K rounds seen), or 0 for all")
        one_of(self.round_window, WINDOWS, "round_window")
        one_of(self.fallback, FALLBACKS, "fallback")


class UpdateInversionFamily(DataReconstruction):
    """Base of attacks that invert the victim's observed update: write `invert`."""

    metrics: ClassVar[tuple[Metric, ...]] = UPDATE_INVERSION_METRICS
    fast_settings: ClassVar[dict[str, Any]] = {"iterations": 2}
    _reader: FirstLayerReader | None = None
    _chunk: int | None = None  # the planner's chunk for the current call (images or local steps), read by `invert`

    def invert(self, update: VictimUpdate, labels: torch.Tensor, gen: torch.Generator,
               init: torch.Tensor | None = None) -> Inverted:
        """The images by the attack's optimiser: from noise, or (`init`) polishing a first
        reading for `polish` iterations."""
        raise NotImplementedError

    def reconstruct(self, adv: Adversary, gen: torch.Generator) -> Reconstructions:
        self._chunk = adv.chunk
        update = on_device(victim_update(adv, adaptive_selection=self.settings.selection == "adaptive"),
                           self.settings.device)
        labels, label_note = recover_labels(update, adv, gen,
                                            use_known=self.settings.labels == "threat-model")
        labels = labels.to(self.settings.device)
        inverted, how, rounds_note = self.first_layer(update, labels, gen, adv)
        if inverted is None:
            if self.settings.start == "first-layer" and self.settings.fallback == "none":
                raise NotApplicable(how.removeprefix("the optimiser from noise: "))
            inverted = self.invert(update, labels, gen)
        elif self.settings.polish:
            found = Extras(fixed=update.extras.fixed, free={**update.extras.free, **inverted.extras})
            inverted = self.invert(replace(update, extras=found), labels, gen, init=inverted.images)
            how = f"{how}; polished by {self.settings.polish} iterations of the optimiser"
        info = {**update.notes, **rounds_note, "labels": {**label_note, "guessed": labels.tolist()},
                "inverted_by": how,
                "final_loss": inverted.loss,
                "selection_found": {k: v.tolist() for k, v in inverted.extras.items()}}
        return Reconstructions(inverted.images.cpu(), info)

    def first_layer(self, update: VictimUpdate, labels: torch.Tensor, gen: torch.Generator,
                    adv: Adversary) -> tuple[Inverted | None, str, dict[str, Any]]:
        """The images off the first dense layer's update (`start=first-layer`, `first_layer.py`),
        or None and why not."""
        if self.settings.start != "first-layer":
            return None, "the optimiser from noise", {}
        s = self.settings
        if self._reader is None:
            search = Search(programs=s.programs, peel=s.peel, rank=s.rank, slack=s.slack, levels=s.levels)
            through = ThroughSettings(programs=s.programs, slack=s.slack, iterations=s.iterations)
            self._reader = FirstLayerReader(search, s.rounds, s.round_window, through)
        return self._reader.read(update, labels, gen, adv)

    def score(self, guesses: Reconstructions, truth: GroundTruth) -> Scored:
        scored = super().score(guesses, truth)
        guessed = torch.as_tensor(guesses.info["labels"]["guessed"], dtype=torch.long)
        real = truth.members.y
        if len(real) == 0 or len(guessed) == 0:
            return scored
        classes = max(int(real.max()), int(guessed.max())) + 1
        scored.metrics["label_accuracy"] = count_accuracy(torch.bincount(guessed, minlength=classes),
                                                          torch.bincount(real, minlength=classes))
        pairs = scored.extra["reconstruction_match"]["pairs"]
        hits = [int(guessed[i]) == int(real[j]) for i, j in pairs]
        scored.metrics["matched_label_accuracy"] = float(np.mean(hits)) if hits else float("nan")
        found = guesses.info.get("selection_found") or {}
        if found:
            scored.extra["selection_score"] = selection_score(found, truth.deployed)
        return scored


def on_device(update: VictimUpdate, device: str) -> VictimUpdate:
    """The victim's run with its tensors on `device` (the model's parameters are passed in,
    functionally, so only they and the inputs need to move)."""
    if device == "cpu":
        return update
    moved = Extras(fixed={k: v.to(device) for k, v in update.extras.fixed.items()},
                   free={k: v.to(device) for k, v in update.extras.free.items()})
    return replace(update, start={k: v.to(device) for k, v in update.start.items()},
                   after={k: v.to(device) for k, v in update.after.items()}, extras=moved)


def selection_score(found: dict[str, list[float]], deployed: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Factors the optimised selection got right against the victim's deployed one (scorer only)."""
    out = {}
    for key, values in found.items():
        if key in deployed:
            guess, real = torch.as_tensor(values) >= ON, deployed[key] >= ON
            out[key] = {"factors": int(real.numel()), "correct": int((guess == real).sum()),
                        "true_on": int(real.sum()), "guessed_on": int(guess.sum())}
    return out
