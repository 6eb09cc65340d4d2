"""One WAFFLe step's forward and backward over stacked clients, written out (see `kernel.py`).

The factorised layer runs as explicit batched products over clients, [x, 1] W_a diag(r * b) W_b
(the input carries its column of ones, so W_a's bias row rides in the same product); plain-SGD
weights take their gradient straight into the weights with `baddbmm_`, and any other declared
optimiser gets the gradient back. (The "native" option runs the same step with its elementwise
work compiled and its buffers kept: `native_step.py`.) The formulas are `derivation.py`'s (N1-N3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from fedattack import optim
from fedattack.target import State

from .selection import SelectionStep

if TYPE_CHECKING:
    from .kernel import IBPStepSpec


def ibp_step(spec: IBPStepSpec, p: State, t: State, x: torch.Tensor, neg_target: torch.Tensor,
             w: torch.Tensor, selections: dict[str, SelectionStep], sel_grad: dict[str, torch.Tensor],
             opts: dict[str, optim.Optimizer]) -> State:
    """Forward and backward of one step (`t`: `p`'s weights transposed, biases as columns).
    Plain-SGD parameters are updated here, in place; the selections' gradients go into
    `sel_grad`; those of every other parameter are returned."""
    acts, pre, cache = [x], [], {}
    for i, (name, factored) in enumerate(spec.chain):
        if factored:
            if i > 0:
                acts[-1] = F.pad(acts[-1], (0, 1), value=1.0)
            h = acts[-1].bmm(p[f"{name}.W_a"])
            rb = (p[f"{name}.r"] * selections[name].b).unsqueeze(1)
            g = h * rb
            cache[name] = (h, rb, g)
            z = g.bmm(p[f"{name}.W_b"])
        else:
            z = torch.baddbmm(t[f"{name}.bias"], acts[-1], t[f"{name}.weight"])
        pre.append(z)
        if i < len(spec.chain) - 1:
            acts.append(z.relu())
    grad = torch.addcmul(neg_target, pre[-1].softmax(-1), w)
    out: State = {}
    for i in range(len(spec.chain) - 1, -1, -1):
        name, factored = spec.chain[i]
        if factored:
            h, rb, g = cache[name]
            w_a, w_b = p[f"{name}.W_a"], p[f"{name}.W_b"]
            d_g = grad.bmm(t[f"{name}.W_b"])
            g_rb = (d_g * h).sum(1)
            g_b = g_rb * p[f"{name}.r"]
            d_g.mul_(rb)
            d_h = d_g
            below = d_h.bmm(w_a[:, :-1].transpose(1, 2)) if i > 0 else None
            product_step(out, f"{name}.W_b", w_b, g.transpose(1, 2), grad, opts)
            product_step(out, f"{name}.W_a", w_a, acts[i].transpose(1, 2), d_h, opts)
            sel = selections[name]
            sel.grads(g_b, sel_grad[name])  # g_b computed before r steps
            _vector_step(out, f"{name}.r", p[f"{name}.r"], g_rb, opts, sel.b)
        else:
            weight = p[f"{name}.weight"]
            below = grad.bmm(weight) if i > 0 else None
            product_step(out, f"{name}.weight", weight, grad.transpose(1, 2), acts[i], opts)
            _vector_step(out, f"{name}.bias", p[f"{name}.bias"], grad.sum(1), opts)
        if below is not None:  # through the ReLU below
            grad = torch.ops.aten.threshold_backward(below, pre[i - 1], 0.0)
    return out


def product_step(out: State, name: str, param: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                 opts: dict[str, optim.Optimizer]) -> None:
    """The weight whose gradient is a @ b: SGD adds it straight in, other optimisers get it."""
    opt = opts[name]
    if isinstance(opt, optim.SGD):
        optim.sgd_product_(param, a, b, opt.lr)
    else:
        out[name] = a.bmm(b)


def _vector_step(out: State, name: str, param: torch.Tensor, grad: torch.Tensor,
                 opts: dict[str, optim.Optimizer], factor: torch.Tensor | None = None) -> None:
    """The parameter whose gradient is `grad` (times `factor`): SGD steps it here, in one
    operation; other optimisers get the gradient."""
    opt = opts[name]
    if not isinstance(opt, optim.SGD):
        out[name] = grad if factor is None else grad * factor
    else:
        optim.sgd_fused_(param, grad, opt.lr, factor)
