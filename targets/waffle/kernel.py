"""WAFFLe's step kernel: low-rank MLP layers with an IBP factor selection, written out.

What the `dense` kernel is to plain MLPs. Under `vmap(grad(local_loss))` a WAFFLe step is bound
by the number of small operations: the selection's relaxed Bernoulli and Kumaraswamy draws, the
stick-breaking prior and the KL terms are ~60 elementwise operations on (F,) vectors, each paid
for twice (forward and backward) through the transforms, plus the factorised layer's products.
Here the factorised layer runs as explicit batched products over clients, [x, 1] W_a diag(r * b)
W_b (the input carries its column of ones, so W_a's bias row rides in the same product), the
selection and its KL as (3, C, F) tensor code with the backward written out (`selection.py`),
and plain-SGD weights take their gradient straight into the weights with `baddbmm_`; any other
declared optimiser (Adam: `recipe=ibp-wf`, or Adam on the selection only) steps through
`fedattack.optim`, the selection's three parameters in one step. The gradients are
`derivation.py`'s, which the tests hold this step to.

One step's forward and backward is `step.ibp_step`. Everything that does not change from step
to step is prepared once per round (`IBPRun`): the noise's logs, temperatures, KL weights and
fine-tuning flags of every step, one-hot labels, views of the parameters for each set of
clients still training. A step is then ~100 tensor operations whatever the number of clients,
about half what an operation-for-operation transcription of `local_loss` took.

With the kernel option "native" (`--executor batched-native`) a stack steps through
`native_step.NativeStep` instead: the selection and the elementwise work between the products
compiled (`native.py`, `native.c`), and the buffers and arguments kept from step to step.

`WaffleIBP.step_kernel` returns this kernel when its loss is exactly the one computed here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from fedattack import optim
from fedattack.kernels import Chunking, Stack, StepKernel
from fedattack.target import State, Target

from . import native as ibp_native
from .native_step import NativeStep, RoundInputs, Rows, SelectionStepping, native_statistics, runs_native
from .selection import LayerPrior, SelectionNoise, SelectionStep
from .step import ibp_step

# The eager step pays ~100 small operations per step for the factor selection, whatever the
# stack's size: measured on the MNIST setting (1 thread, shared machine) a client step cost 0.42
# ms of CPU in stacks of 5, 0.32 in 10, 0.29 in 25. And it holds the GIL for each of those
# operations, so in Python threads small stacks wait on each other: measured on the 2-core
# machine (MNIST setting, 10 clients a round, idle), two threads of 5 clients ran 4,000-5,500
# client steps/s, one stack of 10 with torch's two threads inside its products 5,300-7,650, and
# one thread alone 4,700-6,400; at 20 clients two threads of 10 won (5,700-7,500 against
# 5,900-6,100). So stacks run in threads only when each gets at least THREAD_MIN clients.
GROUP, THREAD_MIN = 16, 8
# Compiled ("native"), those operations release the GIL, and larger stacks pay again: measured
# (MNIST setting, rounds alternating in one process) at 50 clients, stacks of 16 in two threads
# 1,098 ms a round, one stack of 50 970, two threads of 25 956 (bench_waffle: 12,737 client
# steps/s before, 12,858-13,912 after); at 20 clients one stack 454-500 against 513-526 for two
# threads of 10 there, but no difference in bench_waffle.
NATIVE_GROUP, NATIVE_THREAD_MIN = 50, 25


SELECTION = ("pi_logit", "log_c", "log_d")  # a factorised layer's private parameters, packed in this order


@dataclass(frozen=True)
class IBPStepSpec:
    """What the hand-written step needs to know about a WAFFLe-style loss."""

    chain: tuple[tuple[str, bool], ...]   # the MLP's layers in order, True where factorised
    alpha: dict[str, float]               # the IBP prior's alpha per factorised layer
    scale: float                          # selection parameters are stored divided by this
    kl_b: str                             # concrete or bernoulli (`ibp.ibp_layer_kl`)
    kappa: float | None                   # fine-tuning threshold; None: no fine-tuning phase
    # the temperature of local steps: a float, or a tensor broadcast from `steps`, which the
    # run passes as an (S, 1) column of step numbers (consts are stacked over clients)
    temperature: Callable[[State, torch.Tensor], float | torch.Tensor]
    kl_weight: float = 1.0                # the KL's weight, a multiple of 1 / n_train


class WaffleKernel(StepKernel):
    """Every local step of a stack of WAFFLe clients (see the module docstring)."""

    label = "waffle"

    def __init__(self, spec: IBPStepSpec) -> None:
        self.spec = spec

    def chunking(self, options: frozenset[str]) -> Chunking:
        if "native" in options:
            return Chunking(group=NATIVE_GROUP, thread_min=NATIVE_THREAD_MIN)
        return Chunking(group=GROUP, thread_min=THREAD_MIN)

    def prepare(self, options: frozenset[str]) -> None:
        if "native" in options:  # built once per process, before stacks train in threads
            ibp_native.library()

    def train(self, stack: Stack) -> None:
        ibp_steps(stack.target, self.spec, stack.active, stack.params, stack.consts, stack.noise, stack.x,
                  stack.y, stack.rows, stack.weights, "native" in stack.options)


def ibp_steps(target: Target, spec: IBPStepSpec, active: list[int], params: State, consts: State,
              noise: State, x: torch.Tensor, y: torch.Tensor, rows: torch.Tensor,
              weights: torch.Tensor, native: bool = False) -> None:
    """Every local step of the stacked clients (a prefix `active[s]` at step s), in place;
    `native`: the factor selection compiled to C (`ibp_native`) where the tensors allow it."""
    native = native and runs_native(spec, params)
    stats = native_statistics(target, x) if native else None
    if stats is None:
        x = target.normalized(x)  # the step reads x itself, not through forward
    run = IBPRun(spec, params, consts, noise, x.reshape(x.shape[0], -1), y, rows, weights,
                 {k: target.optimizer(k) for k in params}, torch.arange(len(active)), native, stats)
    for s, a in enumerate(active):
        run.step(s, a)
    run.finish()


@dataclass
class _Prefix:
    """Views of everything stepped, for the first `a` clients (those still training)."""

    p: State                          # every parameter but the packed selections
    t: State                          # the weight matrices transposed, the biases as (a, 1, d)
    states: dict[str, State]          # their optimiser states
    sel: dict[str, torch.Tensor]      # per factorised layer, (3, a, F)
    sel_states: dict[str, State]
    sel_grad: dict[str, torch.Tensor]  # a buffer each step's selection gradient is written into
    native: NativeStep | None = None


class IBPRun:
    """One stack of C clients through its local steps, in place on `params` (the packed
    selections are written back by `finish`). Step s trains on the rows `rows[s]` (S, C, B) of
    `x` with the sample weights `weights[s]`; `steps` are the steps' numbers."""

    def __init__(self, spec: IBPStepSpec, params: State, consts: State, noise: State,
                 x: torch.Tensor, y: torch.Tensor, rows: torch.Tensor, weights: torch.Tensor,
                 opts: dict[str, optim.Optimizer], steps: torch.Tensor, native: bool = False,
                 raw: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        """`raw`: x is the raw input and these its (mean, std) per channel, for the native gather."""
        self.spec, self.params, self.opts, self.raw = spec, params, opts, raw
        packed = {f"{layer}.{n}" for layer in spec.alpha for n in SELECTION}
        self.plain = {k: v for k, v in params.items() if k not in packed}
        like = params[f"{next(iter(spec.alpha))}.pi_logit"]
        self.ones = spec.chain[0][1]  # [x, 1] for W_a
        self.native = native and runs_native(spec, params)
        assert raw is None or self.native, "a raw input is for the native step's gather"
        self.x = x.contiguous() if raw is not None else F.pad(x, (0, 1), value=1.0) if self.ones else x
        w = weights.to(like.dtype).unsqueeze(-1)
        # the loss's gradient in the logits is softmax * w - onehot * w: the second term, per step
        neg_targets = F.one_hot(y, _classes(spec, params)).to(like.dtype)[rows] * -w
        self.sel = {layer: torch.stack([params[f"{layer}.{n}"] for n in SELECTION]) for layer in spec.alpha}
        self.sel_opt = {layer: opts[f"{layer}.pi_logit"] for layer in spec.alpha}  # one each: step_kernel
        self.priors = {layer: LayerPrior.of(alpha, spec.scale, spec.kl_b, spec.kappa or 0.0,
                                            params[f"{layer}.pi_logit"])  # its own number of factors
                       for layer, alpha in spec.alpha.items()}
        drawn = {layer: SelectionNoise.of(noise[f"{layer}.u_b"], noise[f"{layer}.u_v"])
                 for layer in spec.alpha}
        self._per_step(consts, steps.unsqueeze(1), like.dtype)
        if self.native:  # each step's inputs read by address
            self.inputs = self._round_inputs(rows, neg_targets, w, drawn, like.shape[0])
        else:  # each step's inputs as views
            self.rows = rows.reshape(rows.shape[0], -1).unbind(0)
            self.neg_targets, self.w = neg_targets.unbind(0), w.unbind(0)
            self.noise = {layer: (d.logistic.unbind(0), d.log_1mu_v.unbind(0)) for layer, d in drawn.items()}
        self.states = {k: optim.init_state(opts[k], p) for k, p in self.plain.items()}
        self.sel_states = {layer: optim.init_state(self.sel_opt[layer], s) for layer, s in self.sel.items()}
        self.prefixes: dict[int, _Prefix] = {}

    def _per_step(self, consts: State, col: torch.Tensor, dtype: torch.dtype) -> None:
        """Temperature, KL weight and fine-tuning flags of every step, in one go."""
        spec, n = self.spec, len(col)
        tau = spec.temperature(consts, col)
        if isinstance(tau, torch.Tensor):
            self.taus: list[torch.Tensor] | tuple[torch.Tensor, ...] = tau.unsqueeze(-1).unbind(0)
        else:  # 0-d: a Python float would be converted to the dtype on every division
            self.taus = [torch.tensor(tau, dtype=dtype, device=consts["n_train"].device)] * n
        k = consts["n_train"].to(dtype).reciprocal().unsqueeze(-1)
        if spec.kl_weight != 1.0:
            k = k * spec.kl_weight
        self.tuning: list[torch.Tensor | None] = [None] * n
        self.ks: list[torch.Tensor] | tuple[torch.Tensor, ...] = [k] * n
        if spec.kappa is not None:
            tuning = (col >= consts["finetune_from"]).unsqueeze(-1)  # (S, C, 1)
            self.tuning, self.ks = list(tuning.unbind(0)), torch.where(tuning, 0.0, k).unbind(0)

    def _prefix(self, a: int) -> _Prefix:
        if a not in self.prefixes:  # the clients still training change rarely: slice once per prefix
            sel = {layer: s[:, :a] for layer, s in self.sel.items()}
            p = {k: v[:a] for k, v in self.plain.items()}
            self.prefixes[a] = _Prefix(
                p, {k: v.transpose(1, 2) if v.dim() == 3 else v.unsqueeze(1) for k, v in p.items()},
                {k: {n: t[:a] for n, t in st.items()} for k, st in self.states.items()},
                sel, {layer: {n: t[:, :a] for n, t in st.items()} for layer, st in self.sel_states.items()},
                {layer: torch.empty(s.shape, dtype=s.dtype) for layer, s in sel.items()})
            if self.native:
                v = self.prefixes[a]
                v.native = NativeStep(self.spec.chain, v.p, v.t, v.sel, v.sel_grad, self._stepping(v), self.opts,
                                      self.priors, self.inputs, a)
        return self.prefixes[a]

    def _stepping(self, v: _Prefix) -> dict[str, SelectionStepping]:
        """How the native step steps each selection of the prefix `v`: SGD, or Adam on its moments."""
        def stepping(layer: str, opt: optim.Optimizer) -> SelectionStepping:
            if isinstance(opt, optim.SGD):
                return SelectionStepping(lr=opt.lr)
            state = v.sel_states[layer]
            return SelectionStepping(adam=self.inputs.adam[layer], moments=(state["m"], state["v"]))

        return {layer: stepping(layer, opt) for layer, opt in self.sel_opt.items()}

    def _round_inputs(self, rows: torch.Tensor, neg_targets: torch.Tensor, w: torch.Tensor,
                      drawn: dict[str, SelectionNoise], clients: int) -> RoundInputs:
        """The round's inputs as the native step reads them, each step a row at an address."""
        tau, k, tuning = ibp_native.per_step_rows(self.taus, self.ks, self.tuning, clients)
        return RoundInputs(Rows(rows.reshape(rows.shape[0], -1)), Rows(neg_targets), Rows(w),
                           {layer: (Rows(d.logistic), Rows(d.log_1mu_v)) for layer, d in drawn.items()},
                           Rows(tau), Rows(k), Rows(tuning), rows.shape[-1], self.x, self.raw, self.ones,
                           {layer: Rows(ibp_native.adam_constants(opt, rows.shape[0]))
                            for layer, opt in self.sel_opt.items() if isinstance(opt, optim.Adam)})

    def step(self, s: int, a: int) -> None:
        """Local step `s` of the first `a` clients."""
        v = self._prefix(a)
        grads = v.native(s) if v.native is not None else self._eager_step(v, s, a)
        for name, g in grads.items():
            optim.step_(self.opts[name], v.p[name], g, v.states[name], s + 1)
        if v.native is not None:  # the native step steps the selections itself
            return
        for layer, opt in self.sel_opt.items():
            if isinstance(opt, optim.SGD):
                optim.sgd_fused_(v.sel[layer], v.sel_grad[layer], opt.lr)
            else:
                optim.step_(opt, v.sel[layer], v.sel_grad[layer], v.sel_states[layer], s + 1)

    def _eager_step(self, v: _Prefix, s: int, a: int) -> State:
        rows, w, neg_target = self.rows[s], self.w[s], self.neg_targets[s]
        whole = a == len(w)
        if not whole:
            rows, w, neg_target = rows[:a * w.shape[1]], w[:a], neg_target[:a]
        x = self.x.index_select(0, rows).view(a, -1, self.x.shape[1])
        return ibp_step(self.spec, v.p, v.t, x, neg_target, w, self._selections(v, s, a, whole), v.sel_grad,
                        self.opts)

    def _selections(self, v: _Prefix, s: int, a: int, whole: bool) -> dict[str, SelectionStep]:
        """Each factorised layer's selection at step `s` for the first `a` clients."""
        noise = {layer: (n[s], u[s]) if whole else (n[s][:a], u[s][:a]) for layer, (n, u) in self.noise.items()}
        tau, k, tuning = self.taus[s], self.ks[s], self.tuning[s]
        if not whole:
            tau = tau[:a] if tau.dim() and len(tau) > 1 else tau
            k, tuning = k[:a], tuning[:a] if tuning is not None else None
        return {layer: SelectionStep(v.sel[layer], *noise[layer], tau, k, self.priors[layer], tuning)
                for layer in noise}

    def finish(self) -> None:
        for layer, sel in self.sel.items():
            for i, n in enumerate(SELECTION):
                self.params[f"{layer}.{n}"].copy_(sel[i])


def _classes(spec: IBPStepSpec, params: State) -> int:
    name, factored = spec.chain[-1]
    return params[f"{name}.W_b"].shape[-1] if factored else params[f"{name}.weight"].shape[1]

