"""Fitting a model's hidden parts on the adversary's auxiliary data (plain SGD, the victim's recipe).

Used by strategies that cannot see part of a model (FedPer's head, a personalised model): the
adversary trains that part itself, on auxiliary samples with the victim's class mix, with the
same epochs, batch size and learning rate the protocol tells every client to use.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fedattack.attacks.evaluation.data import Samples
from fedattack.target import State, Target
from fedattack.training import minibatches


def fit(target: Target, params: State, trainable: list[str], data: Samples, gen: torch.Generator,
        anchor: State | None = None, lam: float = 0.0) -> State:
    """SGD on cross-entropy (+ lam/2 |theta - anchor|^2) over `trainable`; the rest stays fixed."""
    recipe = target.recipe
    fixed = {n: t.detach() for n, t in params.items() if n not in trainable}
    train = {n: params[n].detach().clone() for n in trainable}
    n = len(data)
    if n == 0 or not train:
        return {**fixed, **train}
    for idx in minibatches(n, recipe.epochs, recipe.batch_size, gen):
        leaves = {k: v.requires_grad_(True) for k, v in train.items()}
        loss = F.cross_entropy(target.forward({**fixed, **leaves}, data.x[idx]), data.y[idx])
        if anchor is not None and lam:
            loss = loss + lam / 2 * sum(((leaves[k] - anchor[k]) ** 2).sum() for k in leaves)
        grads = torch.autograd.grad(loss, list(leaves.values()))
        train = {k: (v - recipe.lr * g).detach() for (k, v), g in zip(leaves.items(), grads)}
    return {**fixed, **train}
