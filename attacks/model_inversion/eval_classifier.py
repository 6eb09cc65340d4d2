"""The evaluation classifier that labels inversion results (scorer side).

Trained separately, on the evaluation pool of the test split (data no client holds), with the
attacked run's architecture in its plain form; a fifth of the pool is held out to report its
own accuracy, which every inversion result carries (the WAFFLe paper reports 96.67%).
It normalises its inputs as the attacked federation's model does (images stay in [0, 1]).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.planning.cost import Cost, Probe
from fedattack.data.normalization import Normalization
from fedattack.models import build_model
from fedattack.rng import generator
from fedattack.target import State, initial_weights

HOLDOUT = 0.2
MIN_STEPS = 1000


@dataclass
class EvalClassifier:
    model: nn.Module
    params: State
    accuracy: float
    train_size: int
    test_size: int
    normalization: Normalization | None = None

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            x = _normed(x, self.normalization)
            return torch.func.functional_call(self.model, self.params, (x,)).argmax(1)


def _normed(x: torch.Tensor, norm: Normalization | None) -> torch.Tensor:
    return x if norm is None else norm.apply(x)


_CACHE: dict[tuple, EvalClassifier] = {}
CACHE_SIZE = 8


def eval_classifier(model_name: str, data: Samples, num_classes: int, seed: int, key: tuple,
                    normalization: Normalization | None = None) -> EvalClassifier:
    """`train_eval_classifier`, remembered per `key` (evaluations of several runs that share the
    dataset, architecture, pools and seed share one classifier: it does not depend on the run)."""
    full = (model_name, num_classes, seed, len(data), normalization, *key)
    if full not in _CACHE:
        if len(_CACHE) >= CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[full] = train_eval_classifier(model_name, data, num_classes, seed,
                                             normalization=normalization)
    return _CACHE[full]


def training_cost(probe: Probe, size: int, epochs: int = 30, batch_size: int = 64) -> Cost:
    """What `train_eval_classifier` costs on a pool of `size` images: its steps of Adam on a
    batch (a forward and backward per image, the probe's, and Adam's update, about as much again
    as the backward on these small models)."""
    batches = math.ceil((1 - HOLDOUT) * size / batch_size)
    steps = max(epochs * batches, MIN_STEPS) if size else 0
    seconds = 0.0
    if steps:  # the input gradient's units are model inversion's, measured only when it is planned
        from fedattack.attacks.model_inversion.inversion import InversionUnits

        units = probe.unit(InversionUnits)
        seconds = steps * 2 * (min(batch_size, size) * units.grad_seconds + units.grad_fixed_seconds)
    return Cost(seconds, 8 * probe.param_bytes, f"the evaluation classifier ({steps:,} steps, once)")


def train_eval_classifier(model_name: str, data: Samples, num_classes: int, seed: int,
                          epochs: int = 30, batch_size: int = 64, lr: float = 1e-3,
                          normalization: Normalization | None = None) -> EvalClassifier:
    """Adam on cross-entropy for `epochs` (at least MIN_STEPS steps), reproducible from `seed`."""
    gen = generator(seed, "eval-classifier")
    order = torch.randperm(len(data), generator=gen)
    n_test = max(1, int(HOLDOUT * len(data)))
    test, train = data.take(order[:n_test]), data.take(order[n_test:])
    c, h, w = (int(n) for n in data.x.shape[1:])
    model = build_model(model_name, (c, h, w), num_classes)
    params = {k: v.requires_grad_(True) for k, v in initial_weights(model, gen).items()}
    opt = torch.optim.Adam(params.values(), lr=lr)
    batches = math.ceil(len(train) / batch_size)
    epochs = max(epochs, math.ceil(MIN_STEPS / max(1, batches)))
    for _ in range(epochs):
        perm = torch.randperm(len(train), generator=gen)
        for i in range(0, len(train), batch_size):
            idx = perm[i:i + batch_size]
            x = _normed(train.x[idx], normalization)
            loss = F.cross_entropy(torch.func.functional_call(model, params, (x,)), train.y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    frozen = {k: v.detach() for k, v in params.items()}
    clf = EvalClassifier(model, frozen, 0.0, len(train), len(test), normalization)
    clf.accuracy = float((clf.predict(test.x) == test.y).float().mean())
    return clf
