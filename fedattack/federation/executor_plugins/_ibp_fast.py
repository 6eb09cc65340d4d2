"""A hand-written batched step for WAFFLe: low-rank MLP layers with an IBP factor selection.

What `_mlp_fast` is to plain MLPs. Under `vmap(grad(local_loss))` a WAFFLe step is bound by
the number of small operations: the selection's relaxed Bernoulli and Kumaraswamy draws, the
stick-breaking prior and the KL terms are ~60 elementwise operations on (F,) vectors, each paid
for twice (forward and backward) through the transforms, plus the factorised layer's products.
Here the factorised layer runs as explicit batched products over clients,
[x, 1] W_a diag(r * b) W_b, the selection and its KL as (C, F) tensor code with the backward
written out (`fedattack.models.ibp_grad`), and plain-SGD weights take their gradient straight
into the weights with `baddbmm_`; any other declared optimiser (Adam: `recipe=ibp-wf`) steps
through `fedattack.optim` like the vmap path.

A target opts in by answering `ibp_step_spec(problem)` with an `IBPStepSpec` when its loss is
exactly the one computed here (`targets/waffle_ibp.py`), and None otherwise. Same mathematics
as the sequential loop; tests hold it to the vmap path and the sequential executor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from fedattack import optim
from fedattack.models.ibp_grad import Draw, LayerSelection, SelectionNoise, SelectionStep
from fedattack.target import LocalProblem, State, Target


@dataclass(frozen=True)
class IBPStepSpec:
    """What the hand-written step needs to know about a WAFFLe-style loss."""

    chain: tuple[tuple[str, bool], ...]   # the MLP's layers in order, True where factorised
    alpha: dict[str, float]               # the IBP prior's alpha per factorised layer
    scale: float                          # selection parameters are stored divided by this
    kl_b: str                             # concrete or bernoulli (`ibp.ibp_layer_kl`)
    kappa: float | None                   # fine-tuning threshold; None: no fine-tuning phase
    temperature: Callable[[State, torch.Tensor], float | torch.Tensor]
    kl_weight: float = 1.0                # the KL's weight, a multiple of 1 / n_train


def ibp_spec(target: Target, problem: LocalProblem) -> IBPStepSpec | None:
    """The target's declaration, if it makes one for this problem."""
    declare = getattr(target, "ibp_step_spec", None)
    return declare(problem) if callable(declare) else None


def ibp_steps(target: Target, spec: IBPStepSpec, active: list[int], params: State, consts: State,
              noise: State, x: torch.Tensor, y: torch.Tensor, rows: torch.Tensor,
              weights: torch.Tensor) -> None:
    """Every local step of the stacked clients (a prefix `active[s]` at step s), in place."""
    opts = {k: target.optimizer(k) for k in params}
    states = {k: optim.init_state(opts[k], p) for k, p in params.items()}
    draws = {layer: SelectionNoise.of(noise[f"{layer}.u_b"], noise[f"{layer}.u_v"])
             for layer in spec.alpha}
    x = target.normalized(x)  # the step reads x itself, not through forward
    x = x.reshape(x.shape[0], -1)
    views: dict[int, tuple[State, State, dict[str, State]]] = {}
    for s, a in enumerate(active):
        if a not in views:  # the clients still training change rarely: slice once per prefix
            views[a] = ({k: v[:a] for k, v in params.items()}, {k: v[:a] for k, v in consts.items()},
                        {k: {n: t[:a] for n, t in st.items()} for k, st in states.items()})
        p, c, st = views[a]
        r = rows[s, :a]
        step_noise = {layer: (d.log_u[s, :a], d.log_1mu[s, :a], d.log_1mu_v[s, :a])
                      for layer, d in draws.items()}
        xb = x.index_select(0, r.reshape(-1)).view(*r.shape, -1)
        grads = ibp_step(spec, p, c, xb, y[r], weights[s, :a], step_noise, s, opts)
        for k, g in grads.items():
            optim.step_(opts[k], p[k], g, st[k], s + 1)


def ibp_step(spec: IBPStepSpec, p: State, consts: State, x: torch.Tensor, y: torch.Tensor,
             w: torch.Tensor, noise: dict[str, Draw], step: int,
             opts: dict[str, optim.Optimizer]) -> State:
    """Forward and backward of one step. Plain-SGD weights are updated here, in place; the
    gradients of every other parameter are returned for the caller's optimiser step."""
    selections = _selections(spec, p, consts, noise, step)
    acts, pre, cache = [x], [], {}
    for i, (name, factored) in enumerate(spec.chain):
        if factored:
            w_a = p[f"{name}.W_a"]
            d = w_a.shape[1] - 1  # the last row of W_a is the bias's (the input's column of ones)
            h = torch.baddbmm(w_a[:, d:], acts[-1], w_a[:, :d])
            rb = p[f"{name}.r"] * selections[name].b
            g = h * rb.unsqueeze(1)
            cache[name] = (h, rb, g)
            z = g.bmm(p[f"{name}.W_b"])
        else:
            z = torch.baddbmm(p[f"{name}.bias"].unsqueeze(1), acts[-1],
                              p[f"{name}.weight"].transpose(1, 2))
        pre.append(z)
        if i < len(spec.chain) - 1:
            acts.append(z.relu())
    logits = pre[-1]
    grad = (logits.softmax(-1) - F.one_hot(y, logits.shape[-1]).to(logits.dtype)) * w.unsqueeze(-1)
    out: State = {}
    for i in range(len(spec.chain) - 1, -1, -1):
        name, factored = spec.chain[i]
        a = acts[i]
        if factored:
            h, rb, g = cache[name]
            w_a, w_b = p[f"{name}.W_a"], p[f"{name}.W_b"]
            d = w_a.shape[1] - 1
            d_g = grad.bmm(w_b.transpose(1, 2))
            g_rb = (d_g * h).sum(1)
            d_h = d_g * rb.unsqueeze(1)
            below = d_h.bmm(w_a[:, :d].transpose(1, 2)) * (pre[i - 1] > 0) if i > 0 else None
            _product_step(out, f"{name}.W_b", w_b, g.transpose(1, 2), grad, opts)
            _w_a_step(out, f"{name}.W_a", w_a, a.transpose(1, 2), d_h, opts)
            out[f"{name}.r"] = g_rb * selections[name].b
            sel = selections[name].grads(g_rb * p[f"{name}.r"])
            out.update({f"{name}.pi_logit": sel.pi_logit, f"{name}.log_c": sel.log_c,
                        f"{name}.log_d": sel.log_d})
        else:
            weight = p[f"{name}.weight"]
            below = grad.bmm(weight) * (pre[i - 1] > 0) if i > 0 else None
            _product_step(out, f"{name}.weight", weight, grad.transpose(1, 2), a, opts)
            out[f"{name}.bias"] = grad.sum(1)
        grad = below  # type: ignore[assignment]
    return out


def _selections(spec: IBPStepSpec, p: State, consts: State,
                noise: dict[str, Draw], step: int) -> dict[str, SelectionStep]:
    """Every factorised layer's selection of this step, with what its backward needs."""
    s = torch.tensor(step)
    tau = spec.temperature(consts, s)
    if isinstance(tau, torch.Tensor):
        tau = tau.unsqueeze(-1)  # (C,): one temperature per client
    dtype = p[f"{next(iter(spec.alpha))}.pi_logit"].dtype
    k = consts["n_train"].to(dtype).reciprocal().unsqueeze(-1)
    if spec.kl_weight != 1.0:
        k = k * spec.kl_weight
    tuning = None
    if spec.kappa is not None:
        tuning = (s >= consts["finetune_from"]).unsqueeze(-1)
        k = torch.where(tuning, 0.0, k)
    return {layer: SelectionStep(LayerSelection(p[f"{layer}.pi_logit"], p[f"{layer}.log_c"],
                                                p[f"{layer}.log_d"]),
                                 noise[layer], tau, k, alpha, spec.scale, spec.kl_b, tuning,
                                 spec.kappa or 0.0)
            for layer, alpha in spec.alpha.items()}


def _product_step(out: State, name: str, param: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                  opts: dict[str, optim.Optimizer]) -> None:
    """The weight whose gradient is a @ b: SGD adds it straight in, other optimisers get it."""
    opt = opts[name]
    if isinstance(opt, optim.SGD):
        param.baddbmm_(a, b, alpha=-opt.lr)
    else:
        out[name] = a.bmm(b)


def _w_a_step(out: State, name: str, w_a: torch.Tensor, a_t: torch.Tensor, d_h: torch.Tensor,
              opts: dict[str, optim.Optimizer]) -> None:
    """W_a's gradient: x^T dH for the input rows, the column sums of dH for the bias row."""
    opt, d = opts[name], w_a.shape[1] - 1
    if isinstance(opt, optim.SGD):
        w_a[:, :d].baddbmm_(a_t, d_h, alpha=-opt.lr)
        w_a[:, d].sub_(d_h.sum(1).mul_(opt.lr))
    else:
        out[name] = torch.cat([a_t.bmm(d_h), d_h.sum(1, keepdim=True)], dim=1)
