"""WAFFLe's step under the kernel option "native", with everything fixed for a stack prepared once.

The eager step (`step.py`) looks its tensors up by name, slices the step's rows out of the
round's and allocates every intermediate on every step: ~50 small torch operations and their
Python, about 0.3 ms of a ~0.8 ms step at 10 clients. Here a stack of clients gets its buffers,
views and the compiled functions' arguments when it first steps (`NativeStep`); a step is then
the low-rank layers' matrix products (torch's, written into the buffers with `out=`), C calls
(`native.py`) and a few address sums, since each input of a step (batch rows,
noise, temperatures, KL weights, targets) is a row of a round-long contiguous tensor. The
dense output layer and the loss are one C call (`_Head`): at 10 classes its three products
cost torch ~70 us a step in dispatch and threading against ~50 us for the whole head in C.
The eager step's operations in its order, except the head's sums, which C adds in its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from fedattack import optim
from fedattack.target import State, Target

from . import native as ibp_native
from .native import NativeGather, NativeSelection
from .selection import LayerPrior
from .step import product_step

if TYPE_CHECKING:
    from .kernel import IBPStepSpec


class Rows:
    """A round-long tensor (S, ...) read one step at a time, by address: row s of it, and so
    its first `a` clients' part, starts at base + s * stride."""

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t.contiguous()
        self.base, self.stride = self.t.data_ptr(), self.t.stride(0) * self.t.element_size()

    def at(self, s: int) -> int:
        return self.base + s * self.stride


@dataclass(frozen=True)
class SelectionStepping:
    """How the native step steps a layer's selection once its gradient is taken: by SGD at `lr`
    (0: not at all), or by Adam with its per-step constants (`ibp_native.adam_constants`) and its
    moments, laid out as the packed selection."""

    lr: float = 0.0
    adam: Rows | None = None
    moments: tuple[torch.Tensor, torch.Tensor] | None = None


@dataclass
class RoundInputs:
    """Every step's inputs for a round, as `Rows`: the batch's row numbers (S, C * B), the
    loss's -onehot * w (S, C, B, K) and w (S, C, B), per factorised layer the selection's noise
    (S, C, F) twice, per client tau, k and the fine-tuning flag (S, C), and per selection that
    Adam steps its constants (S, 6)."""

    rows: Rows
    neg_targets: Rows
    weights: Rows
    noise: dict[str, tuple[Rows, Rows]]
    tau: Rows
    k: Rows
    tuning: Rows
    batch: int
    x: torch.Tensor  # the round's input: raw when `raw` gives its (mean, std), else normalised and padded
    raw: tuple[torch.Tensor, torch.Tensor] | None
    ones: bool
    adam: dict[str, Rows]


def runs_native(spec: IBPStepSpec, params: State) -> bool:
    """The compiled step is float32 and CPU, for chains of factorised layers ending in a dense
    one (what WAFFLe makes of an MLP: every hidden layer factorised, never the output);
    elsewhere `batched-native` steps as `batched`."""
    like = params[f"{next(iter(spec.alpha))}.pi_logit"]
    layers = [factored for _, factored in spec.chain]
    return like.dtype == torch.float32 and like.device.type == "cpu" and all(layers[:-1]) and not layers[-1]


def native_statistics(target: Target, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(mean, std) per channel for the native gather, if the target declares that it normalises
    as the contract does (`plain_normalization`; else the round's input is normalised by the
    target, as without `native`)."""
    if not target.plain_normalization or x.dtype != torch.float32 or x.device.type != "cpu":
        return None
    channels = x.shape[1] if x.dim() == 4 else 1
    norm = target.ctx.normalization
    mean, std = (norm.mean, norm.std) if norm is not None else ((0.0,) * channels, (1.0,) * channels)
    if len(mean) != channels:
        return None
    return torch.tensor(mean, dtype=torch.float32), torch.tensor(std, dtype=torch.float32)


def c_step(opt: optim.Optimizer, like: torch.Tensor) -> tuple[float, torch.Tensor | None]:
    """How a C call steps a parameter like `like`: plain SGD in place at its rate, or (rate 0)
    its gradient written into the buffer returned, for `fedattack.optim` to step."""
    return (opt.lr, None) if isinstance(opt, optim.SGD) else (0.0, torch.empty_like(like))


def address(t: torch.Tensor | None) -> int | None:
    """A tensor's address for a C call, NULL (None) for none."""
    return None if t is None else t.data_ptr()


class NativeStep:
    """Local steps of the first `a` clients of a stack, in place: `p`, `t` and `sel` are
    their parameters, the weight matrices transposed (biases as (a, 1, d)) and the packed
    selections; the selections' gradients go into `sel_grad`, and the selections step here too,
    as `stepping` says. A call returns the gradients of parameters that are not plain SGD
    (valid until the next call). The chain is factorised layers (the body) and a dense output
    layer (`runs_native`), which with the loss is one C call (`_Head`)."""

    def __init__(self, chain: tuple[tuple[str, bool], ...], p: State, t: State, sel: dict[str, torch.Tensor],
                 sel_grad: dict[str, torch.Tensor], stepping: dict[str, SelectionStepping],
                 opts: dict[str, optim.Optimizer],
                 priors: dict[str, LayerPrior], inputs: RoundInputs, a: int) -> None:
        self.inputs, batch = inputs, inputs.batch
        lib = ibp_native.library()
        self._relu, self._relu_backward = lib.relu_forward, lib.relu_backward
        if inputs.raw is not None:
            self.gather: NativeGather | None = NativeGather(inputs.x, *inputs.raw, inputs.ones, a * batch)
            first = self.gather.out
        else:
            self.gather, first = None, torch.empty(a * batch, inputs.x.shape[1])
        self.x = first.view(a, batch, -1)
        self.body = [_Factored(name, p, t, opts, a, batch, i > 0,
                               NativeSelection(sel[name], priors[name], stepping[name].moments), sel_grad[name],
                               stepping[name]) for i, (name, _) in enumerate(chain[:-1])]
        # what each body layer reads: the input, then the ReLU of the layer before
        self.acts = [self.x] + [torch.empty(a, batch, layer.width) for layer in self.body[:-1]]
        self.head = _Head(chain[-1][0], p, opts, self.body[-1], inputs)

    def __call__(self, s: int) -> State:
        inputs = self.inputs
        tau, k, tuning = inputs.tau.at(s), inputs.k.at(s), inputs.tuning.at(s)
        if self.gather is not None:
            self.gather(inputs.rows.at(s))
        else:
            torch.index_select(inputs.x, 0, inputs.rows.t[s, :self.x.shape[0] * self.x.shape[1]],
                               out=self.x.view(-1, self.x.shape[2]))
        pre = []
        for i, layer in enumerate(self.body):
            logistic, log_1mu_v = inputs.noise[layer.name]
            layer.selection.draw(logistic.at(s), log_1mu_v.at(s), tau, tuning)
            z = layer.forward(self._act(i))
            pre.append(z)
            if i + 1 < len(self.body):
                self._relu(z.numel(), z.data_ptr(), self.acts[i + 1].data_ptr())
        out: State = {}
        self.head(s, out)  # into the last body layer's grad
        for i in range(len(self.body) - 1, -1, -1):
            below = self.body[i].backward(self._act(i), out, s, tau, k, tuning)
            if below is not None:  # through the ReLU below
                grad = self.body[i - 1].grad
                self._relu_backward(below.numel(), below.data_ptr(), pre[i - 1].data_ptr(), grad.data_ptr())
        return out

    def _act(self, i: int) -> torch.Tensor:
        """Body layer i's input; past the first, with a column of ones for W_a's bias row."""
        act = self.acts[i]
        return torch.nn.functional.pad(act, (0, 1), value=1.0) if i > 0 else act


class _Head:
    """The dense output layer on the ReLU of the body's last output, with the loss: forward,
    backward into the body's last gradient, and the layer's SGD step (or its gradients, for
    other optimisers), in one C call."""

    def __init__(self, name: str, p: State, opts: dict[str, optim.Optimizer], last: _Factored,
                 inputs: RoundInputs) -> None:
        self.inputs, self.names = inputs, (f"{name}.weight", f"{name}.bias")
        weight, bias = p[self.names[0]], p[self.names[1]]
        assert weight.is_contiguous() and bias.is_contiguous()
        a, batch, d = last.z.shape
        classes = weight.shape[1]
        self.act, self.logits = torch.empty(a, batch, d), torch.empty(a, batch, classes)
        steps = [c_step(opts[n], v) for n, v in zip(self.names, (weight, bias))]
        self.grads = {n: g for n, (_, g) in zip(self.names, steps) if g is not None}
        self._head = ibp_native.library().dense_head
        self._front = (a, batch, d, classes, last.z.data_ptr(), self.act.data_ptr(), weight.data_ptr(),
                       bias.data_ptr())
        self._back = (*(lr for lr, _ in steps), *(address(g) for _, g in steps), self.logits.data_ptr(),
                      last.grad.data_ptr())

    def __call__(self, s: int, out: State) -> None:
        self._head(*self._front, self.inputs.neg_targets.at(s), self.inputs.weights.at(s), *self._back)
        out.update(self.grads)


class _Factored:
    """A low-rank layer z = act W_a diag(r b) W_b, its selection b and its buffers."""

    def __init__(self, name: str, p: State, t: State, opts: dict[str, optim.Optimizer], a: int, batch: int,
                 below: bool, selection: NativeSelection, sel_grad: torch.Tensor, stepping: SelectionStepping) -> None:
        self.name, self.opts, self.selection, self.sel_grad = name, opts, selection, sel_grad
        self.sel_lr, self.adam = stepping.lr, stepping.adam
        self.w_a, self.w_b, self.w_b_t, self.r = p[f"{name}.W_a"], p[f"{name}.W_b"], t[f"{name}.W_b"], p[f"{name}.r"]
        factors, self.width = self.w_b.shape[1], self.w_b.shape[2]
        self.h, self.g, self.d_g = (torch.empty(a, batch, factors) for _ in range(3))
        self.rb, self.g_rb, self.g_b = torch.empty(a, 1, factors), torch.empty(a, factors), torch.empty(a, factors)
        self.z, self.grad = torch.empty(a, batch, self.width), torch.empty(a, batch, self.width)
        self.below = torch.empty(a, batch, self.w_a.shape[1] - 1) if below else None
        lib = ibp_native.library()
        self._forward, self._backward = lib.lowrank_forward, lib.lowrank_backward
        shape = (a, batch, factors)
        self._fwd = (*shape, self.h.data_ptr(), self.r.data_ptr(), selection.b.data_ptr(), self.rb.data_ptr(),
                     self.g.data_ptr())
        lr_r, self.g_r = c_step(opts[f"{name}.r"], self.r)
        self._bwd = (*shape, self.d_g.data_ptr(), self.h.data_ptr(), self.rb.data_ptr(), self.r.data_ptr(),
                     selection.b.data_ptr(), lr_r, address(self.g_r), self.g_rb.data_ptr(), self.g_b.data_ptr())

    def forward(self, act: torch.Tensor) -> torch.Tensor:
        torch.bmm(act, self.w_a, out=self.h)
        self._forward(*self._fwd)  # rb = r b, g = h diag(rb)
        return torch.bmm(self.g, self.w_b, out=self.z)

    def backward(self, act: torch.Tensor, out: State, s: int, tau: int, k: int, tuning: int) -> torch.Tensor | None:
        name, d_h = self.name, self.d_g
        torch.bmm(self.grad, self.w_b_t, out=self.d_g)
        self._backward(*self._bwd)  # g_b = g_rb r, then r's step (or gradient); d_g *= rb: d_h
        if self.below is not None:
            torch.bmm(d_h, self.w_a[:, :-1].transpose(1, 2), out=self.below)
        product_step(out, f"{name}.W_b", self.w_b, self.g.transpose(1, 2), self.grad, self.opts)
        product_step(out, f"{name}.W_a", self.w_a, act.transpose(1, 2), d_h, self.opts)
        self.selection.grads(self.g_b.data_ptr(), tau, k, tuning, self.sel_grad.data_ptr(), self.sel_lr,
                             None if self.adam is None else self.adam.at(s))
        if self.g_r is not None:
            out[f"{name}.r"] = self.g_r
        return self.below
