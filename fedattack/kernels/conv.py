"""The `conv` kernel: the zoo's CNNs without vmap, K models' convolutions as one grouped one.

`vmap(grad(local_loss))` over a `ConvNet` pays the transforms' bookkeeping on every operation
of every step, and a batch of 10 small images leaves each convolution too little work to hide
it. Here the K stacked models are one ordinary network: their inputs sit side by side along the
channels ([B, K*C, H, W]) and each convolution is `conv2d(..., groups=K)` with the weights
[K*O, C, kh, kw], so group k sees only model k's channels (a greyscale first layer, one input
channel per model, runs model by model instead, see `_convolve`); ReLU and pooling (max or
average, as the model declares) act per channel and so per model; the fully connected layers
are `baddbmm` over (K, B, features). The loss is the sum of the K models' weighted
cross-entropies, so autograd's gradient of each model's weights is that model's own, and plain
SGD updates the stacked weights in place.

Chosen (`fedattack.kernels.standard`) where a method declares that it trains the model's
cross-entropy, with or without a proximal pull, on a `ConvNet` whose declared layout
(`ConvNet.layout`) is one this kernel computes (`computes`: every fact of it, pooling,
activation, normalisation, padding, stride, bias, ...), by plain SGD at the recipe's learning
rate. Same mathematics as the sequential loop; tests/core/test_conformance.py holds it to the
sequential executor, for every registered model and method, within the batched tolerance.
(Before #43 the layout left the pooling out and this step max-pooled always, so Dimitrov et
al.'s average-pooled CNN trained as a max-pooled one under the batched executors.)
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from fedattack import optim
from fedattack.kernels.base import Chunking, Stack, State, StepKernel
from fedattack.kernels.proximal import Pull, first, pull_of
from fedattack.models.zoo.cnn import ConvLayout, pools

CPU_GROUP = 16  # clients a stack on a CPU; stacks run side by side in threads
POOLING: dict[str, Callable[..., torch.Tensor]] = {"max": F.max_pool2d, "avg": F.avg_pool2d}


def computes(layout: ConvLayout) -> bool:
    """Whether `cnn_loss` computes a network laid out as `layout`: every convolution a biased,
    stride-1, undilated, ungrouped, zero- and square-padded one, ReLU after it, then max or
    average pooling of the layout's size; no normalisation; biased fully connected layers."""
    plain = all(c.bias and c.stride == (1, 1) and c.dilation == (1, 1) and c.groups == 1
                and c.padding_mode == "zeros" and c.padding[0] == c.padding[1] >= 0 for c in layout.convs)
    return (plain and layout.activation == "relu" and layout.norm is None and layout.pool in POOLING
            and layout.pool_size == 2 and all(bias for _, bias in layout.fcs) and bool(layout.fcs))


class ConvKernel(StepKernel):
    """Every step of a stack of `ConvNet`s laid out as `layout`, written out."""

    label = "conv"

    def __init__(self, layout: ConvLayout, proximal: float) -> None:
        self.layout, self.proximal = layout, proximal

    def chunking(self, options: frozenset[str]) -> Chunking:
        return Chunking(group=CPU_GROUP, thread_min=1)

    def train(self, stack: Stack) -> None:
        target = stack.target
        cnn_steps(self.layout, stack.active, stack.params, target.normalized(stack.x), stack.y, stack.rows,
                  stack.weights, target.recipe.lr, pull_of(self.proximal, stack.consts))


def cnn_steps(spec: ConvLayout, active: list[int], params: State, x: torch.Tensor, y: torch.Tensor,
              rows: torch.Tensor, weights: torch.Tensor, lr: float, pull: Pull | None = None) -> None:
    """Every local step of the stacked models (a prefix `active[s]` at step s), in place.
    x: the concatenated training images, normalised as the model sees them."""
    for s, a in enumerate(active):
        r = rows[s, :a]
        batch_major = r.t().reshape(-1)  # (B, K): each sample's K images side by side
        xb = x.index_select(0, batch_major).view(r.shape[1], a, *x.shape[1:])
        cnn_step({k: v[:a] for k, v in params.items()}, spec, xb, y[r], weights[s, :a], lr, first(pull, a))


def cnn_loss(params: State, spec: ConvLayout, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The sum over the K stacked models of each one's weighted cross-entropy.
    x: (B, K, C, H, W), batch-major, so the models' channels are side by side; y, w: (K, B).

    Max-pooling comes before the ReLU (they commute, and the gradient is the same: max-pooling
    routes it to the window's largest pre-activation, which ReLU then keeps or zeroes exactly
    as it would have) so the ReLU and its backward touch a quarter of the values; average
    pooling does not commute with the ReLU and comes after it, as in the model. The grouped
    convolutions run channels-last, where oneDNN's grouped kernels and max-pooling measured
    fastest on the 2-core machine."""
    batch, k = x.shape[:2]
    h = x.reshape(batch, -1, *x.shape[3:])
    pool, first = POOLING[spec.pool], spec.pool == "max"
    for conv in spec.convs:
        h = _convolve(h, params[f"{conv.name}.weight"], params[f"{conv.name}.bias"], conv.padding[0])
        if first and pools(h):
            h = pool(h, spec.pool_size)
        h = h.relu()
        if not first and pools(h):
            h = pool(h, spec.pool_size)
    h = h.reshape(batch, k, -1).transpose(0, 1)
    fcs = [name for name, _ in spec.fcs]
    for i, name in enumerate(fcs):
        h = torch.baddbmm(params[f"{name}.bias"].unsqueeze(1), h, params[f"{name}.weight"].transpose(1, 2))
        if i < len(fcs) - 1:
            h = h.relu()
    ce = F.cross_entropy(h.reshape(-1, h.shape[-1]), y.reshape(-1), reduction="none")
    return (w.reshape(-1) * ce).sum()


def _convolve(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, padding: int) -> torch.Tensor:
    """Every model's convolution of its own channels of h (B, K*C, H, W); weight (K, O, C, kh, kw).

    With one input channel per model (a greyscale first layer) oneDNN takes a depthwise kernel
    whose rounding depends on how many models are stacked (measured: a model's weights changed
    with its neighbours), so those run one model at a time through ATen's own convolution
    (im2col and one matrix product per model), which is as fast there; wider inputs run as one
    grouped convolution, whose result for a model measured the same whatever the group."""
    k, c = weight.shape[0], weight.shape[2]
    if c == 1:
        outs = [torch.ops.aten.thnn_conv2d(h[:, j:j + 1], weight[j], weight.shape[-2:], bias[j], [1, 1],
                                           [padding, padding]) for j in range(k)]
        return torch.cat(outs, 1).contiguous(memory_format=torch.channels_last)
    flat = weight.reshape(-1, *weight.shape[2:]).contiguous(memory_format=torch.channels_last)
    return F.conv2d(h.contiguous(memory_format=torch.channels_last), flat, bias.reshape(-1),
                    padding=padding, groups=k)


def cnn_step(params: State, spec: ConvLayout, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor,
             lr: float, pull: Pull | None = None) -> None:
    """One SGD step of every stacked model, in place. params: (K, ...); x: (B, K, C, H, W).
    `pull` (mu, anchors): the loss plus (mu/2)|w - anchor|^2, as in `dense.mlp_step`."""
    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    with torch.enable_grad():
        grads = torch.autograd.grad(cnn_loss(leaves, spec, x, y, w), list(leaves.values()))
    with torch.no_grad():
        for (k, p), g in zip(params.items(), grads):
            if pull is not None:  # the gradients were taken before any weight moved
                p.lerp_(pull[1][k], lr * pull[0])
            optim.step_(optim.SGD(lr), p, g, {}, 1)
