"""`inversion`: model inversion by gradient descent on the input (Fredrikson et al., CCS 2015).

MI-FACE, per class c: start from x = 0, step x <- clip(x - lr * grad c(x)) with the cost
c(x) = 1 - p_c(x) (or `loss=ce`: -log p_c(x)), keep the input in the valid pixel range [0, 1],
stop a class after `steps`, or when its cost is no lower than the worst of its last `patience`
costs (Fredrikson's stopping rule), and return the lowest-cost input seen. All classes run
together as one batch; the model has no batch statistics, so they do not interact.

Scoring (the WAFFLe paper's Table 4, after Zhang et al. 2020): PSNR (scikit-image,
data_range=1) between each reconstruction and the victim's mean training image of that class,
over the classes the victim holds; attack accuracy: the share of those reconstructions an
evaluation classifier, trained separately on data no client holds, labels as their class.
The same two numbers over every class (PSNR against the train split's class means) are kept
as `psnr_all_classes` and `attack_accuracy_all_classes`. These say how well class
representatives are rebuilt, which the population's data gives away as well (`client=False`);
what the inversion learns about this client is its class mix beyond the population's,
`class_mix_excess` (`class_mix.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch
from torch.func import vmap

from fedattack import progress
from fedattack.attacks.base import Adversary, Attack, AuditRole, NotApplicable, Scored
from fedattack.attacks.data_reconstruction.image_metrics import psnr
from fedattack.attacks.evaluation.truth import GroundTruth
from fedattack.attacks.model_inversion.class_mix import class_mix, log_odds
from fedattack.attacks.planning.cost import GRAPH_PEAK, Cost, Units, Workload, cheaper_setting
from fedattack.attacks.planning.probe import fastest, input_grad, per_image, probe_params
from fedattack.options import check_device, one_of
from fedattack.registry import UserError
from fedattack.results import Metric
from fedattack.target import State, Target

RATE = (0.0, 1.0)
INVERSION_METRICS = (
    Metric(key="psnr", label="PSNR", unit="dB", bounds=(0.0, None), client=False),
    Metric(key="attack_accuracy", label="attack accuracy", unit="%", scale=100.0, bounds=RATE, primary=True,
           client=False),
    Metric(key="class_mix_excess", label="class mix beyond the population", unit="pp", scale=100.0,
           bounds=(-1.0, 1.0), chance=0.0),
    Metric(key="eval_classifier_accuracy", label="eval. classifier accuracy", unit="%", scale=100.0,
           bounds=RATE, leak="none"),
    Metric(key="psnr_all_classes", label="PSNR, all classes", unit="dB", bounds=(0.0, None), headline=False,
           client=False),
    Metric(key="attack_accuracy_all_classes", label="attack accuracy, all classes", unit="%", scale=100.0,
           bounds=RATE, headline=False, client=False),
)


@dataclass(frozen=True, kw_only=True)
class InversionSettings:
    """steps: most gradient steps (alpha). lr: step size (lambda). patience: Fredrikson's beta.
    loss: fredrikson (1 - p_c) or ce (-log p_c). init: zeros, gray or aux-mean. device: where
    the steps run (cpu, or cuda where torch sees a GPU: the long loop; the guesses come back to
    the CPU, and the starting images are made there, so a seed gives the same start anywhere)."""

    steps: int = 5000
    lr: float = 0.1
    patience: int = 100
    loss: str = "fredrikson"
    init: str = "zeros"
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.steps < 1 or self.lr <= 0 or self.patience < 1:
            raise UserError("inversion needs steps >= 1, lr > 0 and patience >= 1")
        one_of(self.loss, ("fredrikson", "ce"), "inversion loss")
        one_of(self.init, ("zeros", "gray", "aux-mean"), "inversion init")
        check_device(self.device)


@dataclass
class InversionGuesses:
    images: torch.Tensor  # (classes, C, H, W), one reconstruction per class
    confidence: list[float]  # the model's p_c on each
    steps: list[int]
    log_odds: list[float]  # log p_c / (1 - p_c), which does not saturate (`class_mix`)


class Inversion(Attack):
    """Model inversion per class by projected gradient descent on the input (Fredrikson et al. 2015)."""

    name = "inversion"
    requires = frozenset({"evaluation"})
    Settings = InversionSettings
    metrics = INVERSION_METRICS
    fast_settings = {"steps": 5}
    audit = AuditRole("model inversion", strength=0, paper=True)  # Fredrikson et al., the WAFFLe paper's Table 4
    stacks_victims = True  # `run_many`: one optimisation over every victim's models (`invert_many`)

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        """Every class's image through `steps` forward and backward passes (the stopping rule
        ends most classes at `steps` on the papers' models: planned as if all did)."""
        u, s, k = work.probe.unit(InversionUnits), self.settings, work.classes
        memory = int(GRAPH_PEAK * k * u.grad_bytes) + 4 * k * work.probe.input_numel * 4 + s.steps * k * 8
        return Cost(s.steps * u.inversion_step_seconds, memory, f"{k} classes x {s.steps:,} steps")

    def cheaper(self, work: Workload, memory: int, seconds: float | None) -> str:
        return cheaper_setting(self, work, memory, seconds, "steps", [2000, 1000, 300, 100])

    def run(self, adv: Adversary, gen: torch.Generator) -> InversionGuesses:
        guesses = self.run_many([adv], [gen])[0]  # one model: `invert`, as it always was
        if isinstance(guesses, NotApplicable):
            raise guesses
        return guesses

    def run_many(self, advs: list[Adversary], gens: list[torch.Generator]) -> list[Any]:
        """Every adversary's inversion, alike models (`stack_key`) in one `invert_many` (a lone
        model through `invert`, as one at a time)."""
        out: list[Any] = [None] * len(advs)
        groups: dict[tuple, list[tuple[int, torch.Tensor]]] = {}
        for i, adv in enumerate(advs):
            x0 = self.start(adv.view.target, adv.knowledge.aux.x)
            try:
                check_differentiable(adv.view.target, adv.model.params, x0)
            except NotApplicable as exc:
                out[i] = exc
                continue
            groups.setdefault(stack_key(adv, x0), []).append((i, x0))
        for members in groups.values():
            target = advs[members[0][0]].view.target
            params = [advs[i].model.params for i, _ in members]
            found = (invert_many(target, params, [x0 for _, x0 in members], self.settings)
                     if len(members) > 1 else [invert(target, params[0], members[0][1], self.settings)])
            for (i, _), guesses in zip(members, found):
                out[i] = guesses
        return out

    def start(self, target: Target, aux_x: torch.Tensor) -> torch.Tensor:
        shape = (target.num_classes, *aux_x.shape[1:])
        if self.settings.init == "zeros":
            return torch.zeros(shape)
        if self.settings.init == "gray" or len(aux_x) == 0:
            return torch.full(shape, 0.5)
        return aux_x.mean(0, keepdim=True).expand(shape).clone()

    def score(self, guesses: InversionGuesses, truth: GroundTruth) -> Scored:
        recs = guesses.images
        classes = list(range(len(recs)))
        means = truth.class_means()
        held = sorted(c for c in means if c < len(recs))
        clf = truth.shared.classifier()
        labels = clf.predict(recs)
        all_means = truth.shared.train_class_means
        psnr_held = [psnr(means[c], recs[c]) for c in held]
        psnr_all = [psnr(all_means[c], recs[c]) for c in classes]
        mix = class_mix(guesses.log_odds, truth.members.class_counts(len(recs)),
                        truth.shared.evaluation.class_counts(len(recs)))
        metrics = {"psnr": _mean(psnr_held), "attack_accuracy": _mean([float(labels[c] == c) for c in held]),
                   "class_mix_excess": mix.excess,
                   "eval_classifier_accuracy": clf.accuracy, "psnr_all_classes": _mean(psnr_all),
                   "attack_accuracy_all_classes": _mean([float(labels[c] == c) for c in classes])}
        mean_row = torch.stack([means.get(c, torch.zeros_like(recs[0])) for c in classes])
        extra = {"inversion": {"victim_classes": held, "psnr_per_class": dict(zip(map(str, held), psnr_held)),
                               "eval_labels": labels.tolist(), "confidence": guesses.confidence,
                               "steps": guesses.steps, "eval_classifier_train": clf.train_size,
                               "eval_classifier_test": clf.test_size, "log_odds": guesses.log_odds,
                               "class_mix": mix.to_json()}}
        tensors = {"reconstructions": {"images": recs, "confidence": torch.tensor(guesses.confidence)}}
        return Scored(metrics=metrics, extra=extra, images={"inversion": recs, "class_means": mean_row},
                      tensors=tensors)


def stack_key(adv: Adversary, x0: torch.Tensor) -> tuple:
    """Models that one `invert_many` can hold: each view builds its own target, so alike means
    the same kind of target, input normalisation and parameter shapes, not the same object."""
    target = adv.view.target
    norm = target.ctx.normalization
    return (type(target), target.name, None if norm is None else repr(norm.to_json()),
            tuple((k, tuple(v.shape), v.dtype) for k, v in adv.model.params.items()), tuple(x0.shape))


def check_differentiable(target: Target, params: State, x0: torch.Tensor) -> None:
    """Inversion needs gradients of the outputs with respect to input images, and a forward pass
    that treats an input the same whether or not it carries gradients."""
    params = {k: v.detach() for k, v in params.items()}
    x = torch.rand(x0[:2].shape, generator=torch.Generator().manual_seed(0))
    try:
        with torch.no_grad():
            plain = target.forward(params, x.clone())
        xg = x.clone().requires_grad_(True)
        out = target.forward(params, xg)
        torch.autograd.grad(out.sum(), xg)
    except (RuntimeError, ValueError, TypeError) as exc:
        raise NotApplicable(f"{target.name}'s model cannot be differentiated with respect to its input "
                            f"images, which model inversion needs ({str(exc).splitlines()[0][:120]})") from None
    if out.shape != plain.shape or not torch.allclose(out.detach(), plain, atol=1e-5):
        raise NotApplicable(f"{target.name}'s forward pass treats an input that carries gradients "
                            "differently from an image (e.g. as precomputed features), so inverting "
                            "it would not reconstruct images")


def invert(target: Target, params: State, x0: torch.Tensor, s: InversionSettings) -> InversionGuesses:
    """Projected gradient descent on every class's input at once (see the module docstring)."""
    device = torch.device(s.device)
    classes = torch.arange(len(x0), device=device)
    params = {k: v.detach().to(device) for k, v in params.items()}
    x = x0.to(device)
    best_x, best_cost = x.clone(), torch.full((len(x0),), float("inf"), device=device)
    history: list[torch.Tensor] = []
    active = torch.ones(len(x0), dtype=torch.bool, device=device)
    steps = torch.zeros(len(x0), dtype=torch.long, device=device)
    for _ in progress.steps(range(s.steps), "steps"):
        xg = x.clone().requires_grad_(True)
        logp = target.forward(params, xg).log_softmax(1)[classes, classes]
        cost = 1.0 - logp.exp() if s.loss == "fredrikson" else -logp
        (grad,) = torch.autograd.grad(cost.sum(), xg)
        c = cost.detach()
        better = active & (c < best_cost)
        best_cost[better], best_x[better] = c[better], x[better]
        if len(history) >= s.patience:
            stalled = c >= torch.stack(history[-s.patience:]).max(0).values
            active &= ~stalled
        history.append(c)
        if not active.any():
            break
        step = (s.lr * grad).where(active.view(-1, *[1] * (x.dim() - 1)), x.new_zeros(()))
        x = (x - step).clamp(0.0, 1.0)
        steps += active.long()
    with torch.no_grad():
        logits = target.forward(params, best_x).cpu()
    conf = logits.softmax(1).diagonal()
    return InversionGuesses(best_x.cpu(), conf.tolist(), steps.tolist(), log_odds(logits).tolist())


def invert_many(target: Target, params: list[State], x0: list[torch.Tensor],
                s: InversionSettings) -> list[InversionGuesses]:
    """`invert` for several victims' models of one target at once: their parameters stacked,
    the forward pass vmapped over victims, so one step updates every victim's images together
    (on small models the step's cost is dispatch, not arithmetic; see `bench_reference_models`).
    Each (victim, class) keeps its own stopping rule and best input, so the guesses equal
    `invert`'s one victim at a time up to float rounding (vmap's batched products)."""
    if not params:
        return []
    device = torch.device(s.device)
    stacked = {k: torch.stack([p[k].detach() for p in params]).to(device) for k in params[0]}
    x = torch.stack(x0).to(device)  # (victims, classes, C, H, W)
    cells = x.shape[:2]
    step_grads = _stacked_step(target, cells[1], s.loss == "fredrikson")
    best_x, best_cost = x.clone(), torch.full(cells, float("inf"), device=device)
    history = torch.empty((s.patience, *cells), device=device)  # the last `patience` costs, a ring
    active = torch.ones(cells, dtype=torch.bool, device=device)
    steps = torch.zeros(cells, dtype=torch.long, device=device)
    pixel = (*cells, *[1] * (x.dim() - 2))
    for i in progress.steps(range(s.steps), f"steps, {len(params)} models at once"):
        g, c = step_grads(stacked, x)
        better = active & (c < best_cost)
        best_cost = torch.where(better, c, best_cost)
        best_x = torch.where(better.view(pixel), x, best_x)
        if i >= s.patience:
            active &= ~(c >= history.amax(0))  # as `invert`: a NaN cost stops nothing
        history[i % s.patience] = c
        if not active.any():
            break
        x = (x - (s.lr * g).where(active.view(pixel), x.new_zeros(()))).clamp(0.0, 1.0)
        steps += active.long()
    with torch.no_grad():
        logits = vmap(target.forward)(stacked, best_x).cpu()
    best_x, steps = best_x.cpu(), steps.cpu()
    conf = logits.softmax(2).diagonal(dim1=1, dim2=2)
    return [InversionGuesses(best_x[v], conf[v].tolist(), steps[v].tolist(), log_odds(logits[v]).tolist())
            for v in range(len(params))]


def _stacked_step(target: Target, classes: int, fredrikson: bool) -> Callable[[State, torch.Tensor], tuple]:
    """One step's input gradients and costs over stacked victims: the forward vmapped over
    them and one plain backward. The same arithmetic as `vmap(grad(...))` per victim (each
    victim's cost sums only its own images), bit for bit, without functorch's per-call
    wrapping of every parameter, which cost about a fifth of a step on the papers' MLPs."""
    forward, cls = vmap(target.forward), torch.arange(classes)

    def step(stacked: State, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        xg = x.detach().requires_grad_(True)
        logp = forward(stacked, xg).log_softmax(2)[:, cls, cls]
        cost = 1.0 - logp.exp() if fredrikson else -logp
        (g,) = torch.autograd.grad(cost.sum(), xg)
        return g, cost.detach()
    return step


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


@dataclass(frozen=True)
class InversionUnits(Units):
    """Model inversion's unit costs, measured when an inversion (or the evaluation classifier
    that scores it) is planned: per image, a forward and backward to the inputs with a graph
    (seconds, seconds whatever the batch, the bytes the graph saves), and one step of `invert`,
    every class's image at once."""

    grad_seconds: float
    grad_fixed_seconds: float
    grad_bytes: int
    inversion_step_seconds: float

    @classmethod
    def measure(cls, target: Target, executor: str, seed: int) -> InversionUnits:
        params, shape = probe_params(target, seed), tuple(target.ctx.input_shape)
        seconds, fixed, per_bytes, _ = per_image(lambda x, y: input_grad(target, params, x, y), shape,
                                                 target.num_classes)
        x0 = torch.zeros((target.num_classes, *shape))

        def run(k: int) -> None:
            invert(target, params, x0, InversionSettings(steps=k, patience=k + 1))
        five, twenty = (fastest(partial(run, k), repeats=2) for k in (5, 20))
        return cls(seconds, fixed, per_bytes, max(1e-7, (twenty - five) / 15))
