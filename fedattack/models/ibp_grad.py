"""WAFFLe's factor selection for many clients at once, with its gradient written out by hand.

`fedattack.models.ibp` is what a client's loss calls, and autograd differentiates it. A batched
step over C clients (`executor_plugins/_ibp_fast.py`) instead runs these same formulas on (C, F)
tensors and writes the backward pass out: under `vmap(grad(...))` each of the ~60 tiny
elementwise operations of the selection and its KL costs a transform's dispatch twice (forward
and backward), and on the MNIST setting that overhead, not arithmetic, was most of a step.

Every quantity is the one `ibp.py` computes, operation for operation where that is cheap, and
every clamp passes gradient exactly where torch's clamp does (inside the closed interval), so the
result equals autograd's within floating-point rounding (tests/targets/test_waffle_fused.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedattack.models import ibp

Draw = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # one step's (log u_b, log(1-u_b), log(1-u_v))


@dataclass
class SelectionNoise:
    """A layer's uniform draws of every step, turned into the logs the formulas need (S, C, F)."""

    log_u: torch.Tensor       # log u_b
    log_1mu: torch.Tensor     # log(1 - u_b)
    log_1mu_v: torch.Tensor   # log(1 - u_v)

    @classmethod
    def of(cls, u_b: torch.Tensor, u_v: torch.Tensor) -> SelectionNoise:
        u_b, u_v = ibp.clamp_uniform(u_b), ibp.clamp_uniform(u_v)
        return cls(torch.log(u_b), torch.log1p(-u_b), torch.log1p(-u_v))


@dataclass
class LayerSelection:
    """One factorised layer's private selection parameters, as the optimiser stores them (C, F)."""

    pi_logit: torch.Tensor
    log_c: torch.Tensor
    log_d: torch.Tensor


class SelectionStep:
    """The selection b of one step for C clients and the gradient of NLL + k * KL through it.

    `k` is each client's KL weight (1 / n_train, or 0 while it fine-tunes), `tuning` marks the
    clients in their fine-tuning phase (b = pi 1[pi >= kappa], no KL), `tau` the temperature
    (a float, or (C, 1) when annealed). Parameters are scaled by `scale` as
    `FactorSelectionTarget.selection` does. Clamps pass gradient where they left x unchanged,
    which is torch's rule (the closed interval); operations are few on purpose: at (C, F) sizes
    each one costs its dispatch, not its arithmetic.
    """

    def __init__(self, p: LayerSelection, noise: Draw, tau: float | torch.Tensor, k: torch.Tensor,
                 alpha: float, scale: float, kl_b: str, tuning: torch.Tensor | None,
                 kappa: float) -> None:
        log_u, log_1mu, log_1mu_v = noise
        self.tau, self.k, self.alpha, self.scale, self.kl_b = tau, k, alpha, scale, kl_b
        self.tuning = tuning
        self.sp = _scaled(p.pi_logit, scale)
        self.q = ibp.clip_logit(self.sp)
        self.y = (self.q + log_u - log_1mu) / tau
        self.relaxed = torch.sigmoid(self.y)
        self.b = self.relaxed
        if tuning is not None:
            self.pi = torch.sigmoid(self.q)
            self.on = self.pi >= kappa
            self.b = torch.where(tuning, self.pi * self.on, self.relaxed)
        self.sc, self.sd = _scaled(p.log_c, scale), _scaled(p.log_d, scale)
        self.sc_c, self.sd_c = self.sc.clamp(-7.0, 7.0), self.sd.clamp(-7.0, 7.0)
        self.c, self.d = torch.exp(self.sc_c), torch.exp(self.sd_c)
        self.t = log_1mu_v / self.d
        self.inner = torch.expm1(self.t).neg_()
        self.inner_c = self.inner.clamp_min(1e-30)
        self.ratio = torch.log(self.inner_c) / self.c
        self.v = torch.exp(self.ratio)
        self.v_c = self.v.clamp_min(1e-7)
        self.p = torch.exp(torch.cumsum(torch.log(self.v_c), dim=-1))
        self.p_c = self.p.clamp(ibp.PROB_EPS, 1.0 - ibp.PROB_EPS)
        self.p_logit = torch.log(self.p_c) - torch.log1p(-self.p_c)

    def grads(self, g_b: torch.Tensor) -> LayerSelection:
        """Gradients of the stored (scaled) parameters, given dNLL/db."""
        k, tau = self.k, self.tau
        g_relaxed = torch.ops.aten.sigmoid_backward(g_b, self.relaxed)
        if self.tuning is not None:  # clients that fine-tune: b is pi's, not the draw's
            g_relaxed = torch.where(self.tuning, 0.0, g_relaxed)
        if self.kl_b == "concrete":
            tau_y = self.y * tau
            s_q, s_p = torch.sigmoid(self.q - tau_y), torch.sigmoid(self.p_logit - tau_y)
            g_y = torch.addcmul(g_relaxed, k * (2.0 * tau), s_q - s_p)
            g_q = torch.addcmul(g_y / tau, k, s_q.mul(-2.0).add_(1.0))
            g_plogit = k * s_p.mul(2.0).sub_(1.0)
        else:  # exact Bernoulli KL given v: d/dq = q(1-q)(q_logit - p_logit), d/dp_logit = p - q
            pq = torch.sigmoid(self.q)
            g_q = torch.addcmul(g_relaxed / tau,
                                k, torch.ops.aten.sigmoid_backward(self.q - self.p_logit, pq))
            g_plogit = k * (torch.sigmoid(self.p_logit) - pq)
        if self.tuning is not None:
            g_pi_b = torch.ops.aten.sigmoid_backward(g_b, self.pi)
            g_q = g_q + torch.where(self.tuning & self.on, g_pi_b, 0.0)
        g_pi = _scaled(torch.where(self.q == self.sp, g_q, 0.0), self.scale)
        g_c, g_d = self._stick_grads(g_plogit)
        g_c = torch.addcmul(g_c, k, self._kl_v_dc())
        g_d = torch.addcmul(g_d, k, self._kl_v_dd())
        g_log_c = _scaled(torch.where(self.sc_c == self.sc, g_c * self.c, 0.0), self.scale)
        g_log_d = _scaled(torch.where(self.sd_c == self.sd, g_d * self.d, 0.0), self.scale)
        return LayerSelection(g_pi, g_log_c, g_log_d)

    def _stick_grads(self, g_plogit: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Back from the prior's logit through pi = prod v and the Kumaraswamy draw to (c, d)."""
        p_c = self.p_c
        g_p = torch.where(p_c == self.p, g_plogit / (p_c * torch.rsub(p_c, 1.0)), 0.0)
        g_log_v = (g_p * self.p).flip(-1).cumsum(-1).flip(-1)
        g_v = torch.where(self.v_c == self.v, g_log_v / self.v_c, 0.0)
        g_ratio = g_v * self.v / self.c  # d/d(log_inner / c)
        g_c = (g_ratio * self.ratio).neg_()  # d(log_inner / c)/dc = -ratio / c
        g_inner = torch.where(self.inner_c == self.inner, g_ratio / self.inner_c, 0.0)
        g_d = (g_inner * torch.rsub(self.inner, 1.0)).mul_(self.t).div_(self.d)  # inner = -expm1(t), t = A / d
        return g_c, g_d

    def _kl_v_dc(self) -> torch.Tensor:
        """d/dc of KL(Kumaraswamy(c, d) || Beta(alpha, 1)) (`ibp.kumaraswamy_beta_kl`)."""
        c, d = self.c, self.d
        bracket = torch.digamma(d).neg_().sub_(ibp.EULER_GAMMA).sub_(d.reciprocal())
        return (bracket * self.alpha).div_(c * c).add_(c.reciprocal())

    def _kl_v_dd(self) -> torch.Tensor:
        c, d = self.c, self.d
        inv_d = d.reciprocal()
        inv_d2 = inv_d * inv_d
        return ((c - self.alpha) / c).mul_(inv_d2 - torch.polygamma(1, d)).add_(inv_d).sub_(inv_d2)


def _scaled(x: torch.Tensor, scale: float) -> torch.Tensor:
    return x if scale == 1.0 else x * scale
