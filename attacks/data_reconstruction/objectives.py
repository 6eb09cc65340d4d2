"""The pieces every inversion objective shares: distances between parameter dicts, the image
prior, and the box-constrained image parameterisation.

Distances compare the concatenation of every tensor (Geiping et al. 2020 match the whole
gradient at once): per-layer cosines would weight a 10-parameter bias like a 50k-entry matrix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
import torch.nn.functional as F

State = dict[str, torch.Tensor]
Forward = Callable[[State, torch.Tensor], torch.Tensor]


def cosine_distance(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """1 - cos(a, b) over the keys of `b`; scale-free, so the learning rate need not be known."""
    dot = sum((a[k] * b[k]).sum() for k in b)
    na = sum((a[k] ** 2).sum() for k in b)
    nb = sum((b[k] ** 2).sum() for k in b)
    return 1 - torch.as_tensor(dot) / (torch.as_tensor(na).sqrt() * torch.as_tensor(nb).sqrt() + 1e-12)


def squared_distance(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """|a - b|^2 / |b|^2: the L2 match, normalised so its weight does not depend on the update's size."""
    num = sum(((a[k] - b[k]) ** 2).sum() for k in b)
    den = sum((b[k] ** 2).sum() for k in b)
    return torch.as_tensor(num) / (torch.as_tensor(den) + 1e-12)


DISTANCES: dict[str, Callable[[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor]], torch.Tensor]] = {
    "cosine": cosine_distance,
    "l2": squared_distance,
}


def total_variation(x: torch.Tensor) -> torch.Tensor:
    """Mean absolute difference between neighbouring pixels (anisotropic TV), per image summed."""
    dh = (x[..., 1:, :] - x[..., :-1, :]).abs().flatten(1).mean(1)
    dw = (x[..., :, 1:] - x[..., :, :-1]).abs().flatten(1).mean(1)
    return (dh + dw).sum()


def to_images(z: torch.Tensor) -> torch.Tensor:
    """The box constraint [0, 1] as a sigmoid of a free variable: Adam never leaves the box and
    needs no projection step, which keeps the whole run differentiable and deterministic."""
    return torch.sigmoid(z)


def from_images(x: torch.Tensor, edge: float = 1e-3) -> torch.Tensor:
    """The latent of given images (the inverse of `to_images`, pixels kept `edge` off 0 and 1
    so that the latent is finite and Adam can still move them)."""
    return torch.logit(x.detach().clamp(edge, 1 - edge))


def initial_latent(n: int, shape: tuple[int, ...], gen: torch.Generator,
                   device: torch.device) -> torch.Tensor:
    """Random starting images (latent ~ N(0, 1), images spread around 0.5), drawn on the
    generator's device (CPU: the same seed gives the same start on any device) then moved."""
    return torch.randn((n, *shape), generator=gen, device=gen.device).to(device)


def batch_loss(forward: Forward, params: Mapping[str, torch.Tensor], x: torch.Tensor,
               y: torch.Tensor) -> torch.Tensor:
    """The client's minibatch loss: mean cross-entropy, as `fedattack.training.Batch` weights it.
    `y` may be class indices or soft label rows (for labels the adversary optimises)."""
    logits = forward(dict(params), x)
    if y.dim() == 1:
        return F.cross_entropy(logits, y)
    return -(y * logits.log_softmax(1)).sum(1).mean()


def parameter_gradient(forward: Forward, params: Mapping[str, torch.Tensor], x: torch.Tensor,
                       y: torch.Tensor, keys: list[str], create_graph: bool = True) -> State:
    """d loss / d params for `keys`, differentiable in `x` (second-order graph) when asked."""
    live = {k: (v if v.requires_grad else v.detach().requires_grad_(True)) for k, v in params.items()}
    loss = batch_loss(forward, live, x, y)
    grads = torch.autograd.grad(loss, [live[k] for k in keys], create_graph=create_graph)
    return dict(zip(keys, grads))
