"""WAFFLe (Hao, Mehta, Liang, Cheng, El-Khamy, Carin: "Weight Anonymized Factorization for
Federated Learning", ICLR 2021 submission; IEEE Access 10, 2022, which wins where they differ).

Factorised layers share a dictionary of rank-1 factors: W_i = W_a diag(r * b_i) W_b (eqs. 2-4;
convolution kernels reshaped to (k*k*C_in) x C_out, appendix A). Each client infers its own
factor selection b_i under a stick-breaking IBP prior (eqs. 5-11, `ibp.py`).

Wire (Algorithm 1, section II.C.1): down and up go W_a, W_b and r of every factorised layer and
every weight of the layers that are not factorised (the output layer; conv biases). The server
takes the simple average of what comes up.

Private state (section II.C.1: "not {pi_i, c_i, d_i}, which remain with the client"), per
factorised layer L, created the first time the client trains:
  `L.pi_logit`  logit of q(b) = Bernoulli(pi), initialised at the prior mean (alpha/(alpha+1))^k
  `L.log_c`, `L.log_d`  log of the Kumaraswamy(c, d) posterior of the sticks, initialised at
                (alpha, 1), which equals the Beta(alpha, 1) prior (IBP-WF's initialisation)
A client that has never trained has an empty private state.

Local objective: minus eq. (11) per data point, mean_batch NLL + R / |D_i|, with one relaxed
Bernoulli draw of b and one Kumaraswamy draw of v per step from the executor's `noise`
(`L.u_b`, `L.u_v`). r is a point estimate without a prior, as the paper states. Everything is
trained by the same SGD at the shared learning rate ("SGD ... for all methods", section IV.A.2).
`selection_lr_scale` (not in the paper; default 1) lets pi, c and d step that many times faster:
SGD sees them divided by its square root, and the private state keeps their own units. It is
a diagnostic: at the paper's rate the selection barely leaves its prior (docs/lab/reproduction.md).

Evaluation (section II.C.2): a client that has trained uses the current global {W_a, W_b, r}
with b = pi_i = sigmoid(pi_logit), the mean of its q(b) (factors below `eval_threshold` are
switched off; 0 keeps them all, IBP-WF uses 0.5-0.6 only after a fine-tuning phase the paper
does not mention). A client that has never trained uses only the global parameters: b = 1 for
every factor, W = W_a diag(r) W_b.

Factorised layers (appendix C): `mnist-mlp` fc1 F=120; `fmnist-cnn` conv1, conv2 F=25;
`cifar-cnn` conv1, conv2 F=10, fc1 F=80, fc2 F=40. Any other model: every layer but the output
layer, with F = its output width. `factors` > 0 sets F for all of those layers instead.
The prior's alpha is `alpha_ratio` * F per layer: Table 9 varies "alpha/F" over 0.4-1.0.
The paper does not say which ratio its Table 2 used (its F=120 numbers lie within Table 9's
0.8-1.0 rows); 1.0 (alpha = F) is the default. The temperature (2/3) is not in the paper
either; it is IBP-WF's MNIST value.

Recipes (`recipe.py`): `recipe=literal` (default) is the above, as the paper states it.
`recipe=ibp-wf` takes IBP-WF's training where the paper is silent: Adam (lr 1e-3), a temperature
schedule, a fine-tuning phase on the thresholded selection at the end of each round, evaluation
at kappa 0.5; each is its own setting (optimizer, adam_lr, temperature_start, temperature_decay,
temperature_clock, finetune_epochs, eval_threshold), documented with its source there.
`recipe=personal` is ibp-wf with the choices our search made so that clients personalise
(kl_weight 0.01 among them; the table is in `recipe.py`).
The federation's manifest gets the selection's health (`summarize`): how far pi moved from the
prior, how much clients differ, how many distinct factor sets they use, per group.

The batched executors train a stack of WAFFLe clients on an MLP through WAFFLe's own kernel
(`kernel.py`, its compiled variant `native.c` under `--executor batched-native`), which
`step_kernel` returns; `derivation.py` is the gradient they compute, written out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from fedattack import optim
from fedattack.kernels import StepKernel
from fedattack.options import one_of
from fedattack.registry import UserError
from fedattack.target import LocalData, LocalProblem, State, TargetContext
from fedattack.training import Batch
from fedattack.wire import Payload

from .._control import local_steps
from . import ibp
from . import recipe as recipes
from .factors import FactorSelectionTarget
from .kernel import SELECTION, IBPStepSpec, WaffleKernel


@dataclass(frozen=True, kw_only=True)
class WaffleHyper:
    """alpha_ratio: IBP alpha / F. factors: F override (0 = paper). temperature: relaxed
    Bernoulli temperature. kl_b: concrete (one-sample, IBP-WF) or bernoulli (exact given v).
    eval_threshold: factors with pi below it are off at evaluation. selection_lr_scale: SGD
    step of pi, c, d relative to the shared lr. r_init_mean: mean of the factor strengths'
    initial N(mean, 0.1^2) (IBP-WF's 0 suits its Adam; under plain SGD the composed weights
    then start about 20 times smaller than a plain layer's; a diagnostic, not in the paper).
    recipe: literal, ibp-wf or personal; optimizer, adam_lr, temperature_start, temperature_decay,
    temperature_clock, finetune_epochs: the recipe's choices (`recipe.py`; an empty or
    negative value takes the recipe's, as does eval_threshold; temperature is the final one).
    kl_weight: the KL's weight in the client's objective, as a multiple of the paper's (eq. 12
    weighs it 1 per client dataset, 1 / |D_i| per data point); not in the paper, a search
    choice (0 drops the prior). pi_init: every factor's initial pi (a negative value: the
    prior's mean (alpha/(alpha+1))^k, IBP-WF's initialisation); not in the paper, a search choice."""

    alpha_ratio: float = 1.0
    factors: int = 0
    temperature: float = 2.0 / 3.0
    kl_b: str = "concrete"
    eval_threshold: float = -1.0
    selection_lr_scale: float = 1.0
    r_init_mean: float = 0.0
    recipe: str = "literal"
    optimizer: str = ""
    adam_lr: float = 1e-3
    temperature_start: float = -1.0
    temperature_decay: float = 0.99
    temperature_clock: str = "client"
    finetune_epochs: int = -1
    kl_weight: float = 1.0
    pi_init: float = -1.0

    def __post_init__(self) -> None:
        recipes.check(self)
        if min(self.alpha_ratio, self.temperature, self.selection_lr_scale) <= 0 or self.factors < 0 \
                or self.kl_weight < 0 or self.pi_init >= 1:
            raise UserError("waffle-ibp needs alpha_ratio, temperature, selection_lr_scale > 0 "
                            "and factors, kl_weight >= 0, pi_init < 1")
        one_of(self.kl_b, ("concrete", "bernoulli"), "waffle-ibp kl_b")


class WaffleIBP(FactorSelectionTarget):
    """WAFFLe: IBP-selected rank-1 weight factors; the factor selection never leaves the client."""

    name = "waffle-ibp"
    paper = "Hao et al., WAFFLe, IEEE Access 2022"
    Hyper = WaffleHyper
    # its kernel computes exactly this class's loss: a subclass that changes any part of it
    # trains through the generic path unless it declares a kernel of its own
    declared_about = {**FactorSelectionTarget.declared_about,
                      "step_kernel": ("local_loss", "noise_shapes", "thresholded", "selection", "alpha")}

    def __init__(self, hyper: Any, ctx: TargetContext) -> None:
        super().__init__(hyper, ctx)
        self.rec = recipes.resolve(hyper, ctx.input_shape, ctx.recipe.epochs)

    @classmethod
    def make_hyper(cls, overrides: Mapping[str, Any]) -> Any:
        """A named recipe (`recipe=personal`) fills the settings the user left unset."""
        return super().make_hyper(recipes.with_preset(overrides))

    def alpha(self, layer: str) -> float:
        return float(self.hyper.alpha_ratio) * self.factorized[layer]

    def selection_prior(self) -> dict[str, float]:
        return {layer: self.alpha(layer) for layer in self.factorized}

    def init_server(self, gen: torch.Generator) -> State:
        state = super().init_server(gen)
        for layer in self.factorized:
            state[f"{layer}.r"] = state[f"{layer}.r"] + float(self.hyper.r_init_mean)
        return state

    def init_selection(self, layer: str, num_factors: int) -> State:
        alpha = self.alpha(layer)
        pi = ibp.prior_mean_probs(alpha, num_factors)
        if self.hyper.pi_init >= 0:
            pi = torch.full((num_factors,), float(self.hyper.pi_init))
        return {f"{layer}.pi_logit": ibp.prob_logit(pi),
                f"{layer}.log_c": torch.full((num_factors,), float(torch.log(torch.tensor(alpha)))),
                f"{layer}.log_d": torch.zeros(num_factors)}

    def optimizer(self, name: str) -> optim.Optimizer:
        kind = self.rec.optimizer
        if kind == "adam" or (kind == "adam-selection" and name not in self.param_names):
            return optim.Adam(float(self.hyper.adam_lr))
        return optim.SGD(self.recipe.lr)

    def start_local(self, down: Payload, private: State, data: LocalData) -> LocalProblem:
        private = dict(private)
        steps = private.pop(recipes.STEPS, torch.zeros(()))
        problem = super().start_local(down, private, data)
        if self.rec.counts_steps:
            problem.consts[recipes.STEPS] = steps
        if self.rec.finetune_epochs:
            per_epoch = local_steps(data.size, 1, self.recipe.batch_size)
            problem.consts["finetune_from"] = torch.tensor(
                float(per_epoch * (self.recipe.epochs - self.rec.finetune_epochs)))
        return problem

    def finish_local(self, params: State, problem: LocalProblem, down: Payload, private: State,
                     data: LocalData) -> tuple[Payload, State]:
        up, kept = super().finish_local(params, problem, down, private, data)
        if self.rec.counts_steps:
            r = self.recipe
            kept[recipes.STEPS] = problem.consts[recipes.STEPS] + local_steps(data.size, r.epochs,
                                                                              r.batch_size)
        return up, kept

    def noise_shapes(self, problem: LocalProblem) -> dict[str, tuple[int, ...]]:
        return {f"{layer}.{u}": (f,) for layer, f in self.factorized.items() for u in ("u_b", "u_v")}

    def local_loss(self, params: State, consts: State, batch: Batch, noise: State,
                   step: torch.Tensor) -> torch.Tensor:
        h = self.hyper
        tau = recipes.temperature(self.rec, consts, step)
        tuning = step >= consts["finetune_from"] if self.rec.finetune_epochs else None
        weights = {n: params[n] for n in self.param_names}
        kl = torch.zeros(())
        for layer in self.factorized:
            q_logit = ibp.clip_logit(self.selection(params, f"{layer}.pi_logit"))
            y = ibp.relaxed_bernoulli_logit(q_logit, noise[f"{layer}.u_b"], tau)
            weights[f"{layer}.b"] = torch.sigmoid(y)
            if tuning is not None:  # the fine-tuning phase: the selection the client deploys
                weights[f"{layer}.b"] = torch.where(tuning, self.thresholded(q_logit),
                                                    weights[f"{layer}.b"])
            c = torch.exp(self.selection(params, f"{layer}.log_c").clamp(-7.0, 7.0))
            d = torch.exp(self.selection(params, f"{layer}.log_d").clamp(-7.0, 7.0))
            kl = kl + ibp.ibp_layer_kl(q_logit, c, d, y, noise[f"{layer}.u_v"], self.alpha(layer),
                                       tau, h.kl_b)
        nll = batch.cross_entropy(self.forward(weights, batch.x))
        if h.kl_weight != 1.0:
            kl = kl * float(h.kl_weight)
        if tuning is not None:  # no KL while fine-tuning
            return nll + torch.where(tuning, torch.zeros(()), kl / consts["n_train"])
        return nll + kl / consts["n_train"]

    def step_kernel(self, problem: LocalProblem) -> StepKernel | None:
        """WAFFLe's kernel (`kernel.py`) computes exactly `local_loss` on a low-rank MLP whose
        layers step each selection's three parameters by one optimiser: say so where that holds."""
        chain = self.lowrank_chain(problem)
        selection = {f"{layer}.{p}" for layer in self.factorized for p in SELECTION}
        if chain is None or set(problem.params) != set(self.param_names) | selection:
            return None
        if any(len({self.optimizer(f"{layer}.{n}") for n in SELECTION}) > 1 for layer in self.factorized):
            return None
        rec = self.rec
        return WaffleKernel(IBPStepSpec(chain=chain, alpha={layer: self.alpha(layer) for layer in self.factorized},
                                        scale=self.selection_scale, kl_b=self.hyper.kl_b,
                                        kl_weight=float(self.hyper.kl_weight),
                                        kappa=rec.kappa if rec.finetune_epochs else None,
                                        temperature=lambda consts, step: recipes.temperature(rec, consts, step)))

    def thresholded(self, logit: torch.Tensor) -> torch.Tensor:
        """pi 1[pi >= kappa]: IBP-WF's deterministic selection (all of pi when kappa is 0)."""
        pi = torch.sigmoid(logit)
        return pi * (pi >= self.rec.kappa).to(pi.dtype)

    def deployed_selection(self, private: State, layer: str) -> torch.Tensor:
        return self.thresholded(private[f"{layer}.pi_logit"])

    def summarize(self, server: State, private: list[State], groups: list[str]) -> dict[str, Any]:
        """The selection's health over the clients that trained (see `recipe.py`)."""
        trained = [k for k, p in enumerate(private) if p]
        if not trained:
            return {}
        layers = {layer: (torch.stack([torch.sigmoid(private[k][f"{layer}.pi_logit"])
                                       for k in trained]),
                          recipes.prior_mean(self.alpha(layer), f))
                  for layer, f in self.factorized.items()}
        report = recipes.health_report(layers, [groups[k] for k in trained], self.rec.kappa or 0.5)
        return {"selection_health": report, "recipe": dataclasses.asdict(self.rec)}
