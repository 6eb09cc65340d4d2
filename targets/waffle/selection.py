"""WAFFLe's factor selection for many clients at once, with its gradient written out by hand.

`ibp.py` is what a client's loss calls, and autograd differentiates it. A batched step over C
clients (`kernel.py`) instead runs the same mathematics on
(C, F) tensors with the backward pass written out: under `vmap(grad(...))` each of the ~60 tiny
elementwise operations of the selection and its KL costs a transform's dispatch twice, and on
the MNIST setting that overhead, not arithmetic, was most of a step. At (C, F) sizes every
operation costs its dispatch, not its arithmetic, so the formulas are rearranged for few of them:

- a layer's three parameters (pi's logit, log c, log d) live in one (3, C, F) tensor, so their
  scaling, clamps, exponentials and optimiser step are one operation each, not three;
- the Concrete KL's two logistic terms in q cancel: dKL/dq = 1 - 2 sigmoid(p_logit - tau y) and
  tau y - q is the draw's logistic noise, read per round (`SelectionNoise`);
- the stick products pi = prod v and their reverse sums are products with a triangular matrix;
- the chain rule to log c and log d is folded into the Kumaraswamy-Beta KL's derivatives.

Each is the same function as `ibp.py`'s, and the gradients are `derivation.py`'s (B1-B8), which
they equal within rounding (float64, tests/targets/test_waffle_derivation.py), but the float32 bits are not those of the
operation-for-operation version this replaced. Every clamp passes gradient where torch's clamp
does (inside the closed interval; v's clamp is read in log space, ratio >= log 1e-7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import ibp

LOG_V_MIN = math.log(1e-7)  # `ibp.stick_breaking_log_probs` clamps v at 1e-7
# log pi is floored here before its exponential: below about -87 exp's float32 result is
# subnormal, and subnormals cost ~10x in exp and in what reads them (measured: 16 us of a
# ~200 us selection). pi is clamped at PROB_EPS = e^-6.9 right after and its gradient masked
# there, so any floor below that changes no result, only the cost
LOG_P_MIN = -30.0


@dataclass
class SelectionNoise:
    """A layer's uniform draws of every step of a round, as the step reads them (S, C, F)."""

    logistic: torch.Tensor    # log u_b - log(1 - u_b): tau y = q + logistic
    log_1mu_v: torch.Tensor   # log(1 - u_v), the Kumaraswamy draw's

    @classmethod
    def of(cls, u_b: torch.Tensor, u_v: torch.Tensor) -> SelectionNoise:
        u_b, u_v = ibp.clamp_uniform(u_b), ibp.clamp_uniform(u_v)
        return cls(torch.log(u_b) - torch.log1p(-u_b), torch.log1p(-u_v))


@dataclass(frozen=True)
class LayerPrior:
    """What stays fixed for one layer over a run: its prior and the triangular sum matrices."""

    alpha: float
    scale: float          # the stored parameters are the true ones divided by this
    kl_b: str             # concrete or bernoulli (`ibp.ibp_layer_kl`)
    kappa: float          # fine-tuning threshold on pi
    upper: torch.Tensor   # (F, F), ones on and above the diagonal: x @ upper = cumsum(x)
    lower: torch.Tensor   # its transpose: x @ lower = the reverse cumulative sum
    # 0-d constants of the parameters' dtype: a Python float meeting a tensor is wrapped and
    # converted to that dtype on every call (~4 us each, ~10 a step); these are converted once
    zero: torch.Tensor
    one: torch.Tensor
    euler: torch.Tensor
    neg_alpha: torch.Tensor
    log_v_min: torch.Tensor

    @classmethod
    def of(cls, alpha: float, scale: float, kl_b: str, kappa: float, like: torch.Tensor) -> LayerPrior:
        f = like.shape[-1]
        upper = torch.ones(f, f, dtype=like.dtype, device=like.device).triu()
        def const(value: float) -> torch.Tensor:
            return torch.tensor(value, dtype=like.dtype, device=like.device)

        return cls(alpha, scale, kl_b, kappa, upper, upper.t().contiguous(), const(0.0), const(1.0),
                   const(ibp.EULER_GAMMA), const(-alpha), const(LOG_V_MIN))


class SelectionStep:
    """The selection b of one step for C clients and the gradient of NLL + k * KL through it.

    `sel` holds (pi_logit, log_c, log_d) as the optimiser stores them, (3, C, F). `k` is each
    client's KL weight (C, 1) (kl_weight / n_train, 0 while it fine-tunes), `tuning` marks the
    clients in their fine-tuning phase (b = pi 1[pi >= kappa], no KL), `tau` the temperature
    (a float, or (C, 1) when annealed).
    """

    def __init__(self, sel: torch.Tensor, logistic: torch.Tensor, log_1mu_v: torch.Tensor,
                 tau: float | torch.Tensor, k: torch.Tensor, prior: LayerPrior,
                 tuning: torch.Tensor | None) -> None:
        self.tau, self.k, self.prior, self.tuning = tau, k, prior, tuning
        s = sel if prior.scale == 1.0 else sel * prior.scale
        self.q = s[0].clamp(-ibp.LOGIT_MAX, ibp.LOGIT_MAX)
        self.q_kept = self.q == s[0]
        self.qn = self.q + logistic  # tau y
        self.relaxed = torch.sigmoid(self.qn / tau)
        self.b = self.relaxed
        if tuning is not None:
            self.pi = torch.sigmoid(self.q)
            on = self.pi >= prior.kappa
            self.tuned_on = tuning & on
            self.b = torch.where(tuning, self.pi * on, self.relaxed)
        cd = s[1:].clamp(-7.0, 7.0)
        self.cd_kept = cd == s[1:]
        self.cd = torch.exp(cd)
        self.c, self.d = self.cd.unbind(0)
        self.t = log_1mu_v / self.d
        self.inner = torch.expm1(self.t).neg_()  # 1 - (1 - u)^(1/d)
        self.inner_c = self.inner.clamp_min(1e-30)
        self.ratio = torch.log(self.inner_c).div_(self.c)  # log v
        self.p = torch.exp((self.ratio.clamp_min(LOG_V_MIN) @ prior.upper).clamp_min_(LOG_P_MIN))
        self.p_c = self.p.clamp(ibp.PROB_EPS, 1.0 - ibp.PROB_EPS)
        self.p_logit = torch.logit(self.p_c)

    def grads(self, g_b: torch.Tensor, out: torch.Tensor) -> None:
        """Gradients of the stored parameters into `out` (3, C, F), given dNLL/db."""
        k, prior, zero = self.k, self.prior, self.prior.zero
        g_q = torch.ops.aten.sigmoid_backward(g_b, self.relaxed)
        if self.tuning is not None:  # clients that fine-tune: b is pi's, not the draw's
            g_q = torch.where(self.tuning, zero, g_q)
        g_q = g_q.div_(self.tau)
        if prior.kl_b == "concrete":  # dKL/dq = k (1 - 2 s_p) = -dKL/dp_logit
            m = torch.addcmul(k, k, torch.sigmoid(self.p_logit - self.qn), value=-2.0)
            g_q.add_(m)
            g_pp = m.div_(self.p_c - prior.one)  # dKL/dp_logit * dp_logit/dp * p
        else:  # exact Bernoulli KL given v: d/dq = q(1-q)(q_logit - p_logit), d/dp_logit = p - q
            pq = torch.sigmoid(self.q)
            g_q.add_(k * torch.ops.aten.sigmoid_backward(self.q - self.p_logit, pq))
            g_pp = (k * (torch.sigmoid(self.p_logit) - pq)).div_(prior.one - self.p_c)
        if self.tuning is not None:
            g_q.add_(torch.where(self.tuned_on, torch.ops.aten.sigmoid_backward(g_b, self.pi), zero))
        torch.where(self.q_kept, g_q, zero, out=out[0])
        self._sticks_and_kl(torch.where(self.p_c == self.p, g_pp, zero), out[1:])
        if prior.scale != 1.0:
            out.mul_(prior.scale)

    def _sticks_and_kl(self, g_pp: torch.Tensor, out: torch.Tensor) -> None:
        """d/d(log c, log d): back from p through pi = prod v and the Kumaraswamy draw, plus
        k times the Kumaraswamy-Beta KL's own derivatives."""
        prior = self.prior
        zero = prior.zero
        g_log_v = torch.where(self.ratio >= prior.log_v_min, g_pp @ prior.lower, zero)
        g_inner = torch.where(self.inner_c == self.inner,
                              g_log_v / (self.c * self.inner_c), zero)  # log v = log(inner) / c
        grads = self._kl_log_cd().mul_(self.k)
        grads[0].addcmul_(g_log_v, self.ratio, value=-1.0)  # c d(log v)/dc = -log v
        grads[1].addcmul_(g_inner.mul_(prior.one - self.inner), self.t)  # d d(inner)/dd
        torch.where(self.cd_kept, grads, zero, out=out)

    def _kl_log_cd(self) -> torch.Tensor:
        """(c dKL/dc, d dKL/dd) of KL(Kumaraswamy(c, d) || Beta(alpha, 1))
        (`ibp.kumaraswamy_beta_kl`): alpha B / c + 1 with B = -gamma - psi(d) - 1/d, and
        (1 - alpha / c)(1/d - d psi'(d)) + 1 - 1/d."""
        prior = self.prior
        inv_c, inv_d = self.cd.reciprocal().unbind(0)
        out = torch.empty_like(self.cd)
        minus_b = torch.digamma(self.d).add_(inv_d).add_(prior.euler)
        torch.addcmul(prior.one, minus_b, inv_c, value=-prior.alpha, out=out[0])
        shrink = torch.addcmul(inv_d, self.d, torch.polygamma(1, self.d), value=-1.0)
        torch.addcmul(prior.one - inv_d, inv_c.mul(prior.neg_alpha).add_(prior.one), shrink,
                      out=out[1])
        return out
