"""Local optimisers as functional steps on plain tensors, for single and stacked parameters alike.

A method may declare, per parameter, the optimiser of its local problem (`Target.optimizer`):
plain SGD at the recipe's learning rate (every paper's default), or Adam (the IBP-WF code that
WAFFLe's machinery comes from trains every parameter with Adam at lr 1e-3). The executors own
the loop, so the step is written once here and used by the sequential trainer, the stacked
(vmap) path and the kernels: every operation is elementwise, so the same code updates one
client's tensor or a (clients, ...) stack of them, where all clients still training are at the
same local step. The kernels' SGD is here too, each arithmetic once: `sgd_product_` for a
weight whose gradient is a product, `sgd_fused_` in one fused operation; WAFFLe's compiled
step fuses its SGD and Adam into its C loops (`targets/waffle/native.c`), tested against these.

Adam's moments live for one local problem only: fresh (zero) for each client each round, as a
client that restarts its optimiser when it receives a new model. The step reproduces
`torch.optim.Adam` (single-tensor, no weight decay, no amsgrad) operation for operation, so one
client's run equals the library's bit for bit (tests/core/test_optim.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

State = dict[str, torch.Tensor]


@dataclass(frozen=True)
class SGD:
    """p <- p - lr * g."""

    lr: float


@dataclass(frozen=True)
class Adam:
    """Kingma & Ba's Adam with torch's defaults for betas and eps."""

    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8


Optimizer = SGD | Adam


def init_state(opt: Optimizer, param: torch.Tensor) -> State:
    """The optimiser's state for one parameter (or a stack of them) at the start of a local run."""
    if isinstance(opt, Adam):
        return {"m": torch.zeros_like(param), "v": torch.zeros_like(param)}
    return {}


def step(opt: Optimizer, param: torch.Tensor, grad: torch.Tensor, state: State, t: int) -> torch.Tensor:
    """The parameter after local step number `t` (1-based), as a new tensor; `state` in place."""
    if isinstance(opt, SGD):
        return param - opt.lr * grad
    denom, step_size = _adam_moments(opt, grad, state, t)
    return param.addcdiv(state["m"], denom, value=-step_size)


def step_(opt: Optimizer, param: torch.Tensor, grad: torch.Tensor, state: State, t: int) -> None:
    """`step` in place on `param` (a view into stacked parameters); may overwrite `grad`."""
    if isinstance(opt, SGD):
        param.sub_(grad.mul_(opt.lr))
        return
    denom, step_size = _adam_moments(opt, grad, state, t)
    param.addcdiv_(state["m"], denom, value=-step_size)


def sgd_product_(param: torch.Tensor, a: torch.Tensor, b: torch.Tensor, lr: float) -> None:
    """SGD on a stacked weight whose gradient is the batched product a @ b, taken straight into
    the weight (`baddbmm_`) instead of materialised first: the hand-written kernels' step for
    their matrix products (one pass over the weights instead of three)."""
    param.baddbmm_(a, b, alpha=-lr)


def sgd_fused_(param: torch.Tensor, grad: torch.Tensor, lr: float, factor: torch.Tensor | None = None) -> None:
    """SGD by one fused operation, param - lr * grad (* factor): the kernels' step for a vector
    whose gradient they have (the rounding differs from `step_`'s scale-then-subtract)."""
    if factor is None:
        param.sub_(grad, alpha=lr)
    else:
        param.addcmul_(grad, factor, value=-lr)


def _adam_moments(opt: Adam, grad: torch.Tensor, state: State, t: int) -> tuple[torch.Tensor, float]:
    """Update the moments in place; the denominator and step size of step `t` (torch's order)."""
    state["m"].lerp_(grad, 1 - opt.beta1)
    state["v"].mul_(opt.beta2).addcmul_(grad, grad, value=1 - opt.beta2)
    bias1 = 1 - opt.beta1 ** float(t)
    bias2 = 1 - opt.beta2 ** float(t)
    denom = (state["v"].sqrt() / bias2 ** 0.5).add_(opt.eps)
    return denom, opt.lr / bias1


def is_plain_sgd(opts: dict[str, Optimizer], lr: float) -> bool:
    """Whether every parameter steps by SGD at `lr` (what the hand-written MLP step does)."""
    return all(isinstance(o, SGD) and o.lr == lr for o in opts.values())
