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
    `FactorSelectionTarget.selection` does.
    """

    def __init__(self, p: LayerSelection, noise: Draw,
                 tau: float | torch.Tensor, k: torch.Tensor, alpha: float, scale: float,
                 kl_b: str, tuning: torch.Tensor | None, kappa: float) -> None:
        log_u, log_1mu, log_1mu_v = noise
        self.tau, self.k, self.alpha, self.scale, self.kl_b = tau, k, alpha, scale, kl_b
        self.tuning, self.kappa = tuning, kappa
        self.sp = p.pi_logit * scale
        self.q = ibp.clip_logit(self.sp)
        self.y = (self.q + log_u - log_1mu) / tau
        self.relaxed = torch.sigmoid(self.y)
        self.b = self.relaxed
        if tuning is not None:
            pi = torch.sigmoid(self.q)
            self.on = (pi >= kappa).to(pi.dtype)
            self.pi = pi
            self.b = torch.where(tuning, pi * self.on, self.relaxed)
        self.sc, self.sd = p.log_c * scale, p.log_d * scale
        self.c, self.d = torch.exp(self.sc.clamp(-7.0, 7.0)), torch.exp(self.sd.clamp(-7.0, 7.0))
        self.t = log_1mu_v / self.d
        self.inner = -torch.expm1(self.t)
        self.inner_c = self.inner.clamp_min(1e-30)
        self.log_inner = torch.log(self.inner_c)
        self.v = torch.exp(self.log_inner / self.c)
        self.v_c = self.v.clamp_min(1e-7)
        self.log_pi = torch.cumsum(torch.log(self.v_c), dim=-1)
        self.p = torch.exp(self.log_pi)
        self.p_c = self.p.clamp(ibp.PROB_EPS, 1.0 - ibp.PROB_EPS)
        self.p_logit = torch.log(self.p_c) - torch.log1p(-self.p_c)

    def grads(self, g_b: torch.Tensor) -> LayerSelection:
        """Gradients of the stored (scaled) parameters, given dNLL/db."""
        k, tau = self.k, self.tau
        if self.kl_b == "concrete":
            z_q = self.q - tau * self.y
            z_p = self.p_logit - tau * self.y
            s_q, s_p = torch.sigmoid(z_q), torch.sigmoid(z_p)
            g_y = self._relaxed_grad(g_b) + k * (2.0 * tau) * (s_q - s_p)
            g_q = g_y / tau + k * (1.0 - 2.0 * s_q)
            g_plogit = k * (2.0 * s_p - 1.0)
        else:  # exact Bernoulli KL given v: d/dq = q(1-q)(q_logit - p_logit), d/dp_logit = p - q
            pq = torch.sigmoid(self.q)
            g_q = self._relaxed_grad(g_b) / tau + k * pq * (1.0 - pq) * (self.q - self.p_logit)
            g_plogit = k * (torch.sigmoid(self.p_logit) - pq)
        if self.tuning is not None:
            g_q = g_q + torch.where(self.tuning, g_b * self.pi * (1.0 - self.pi) * self.on, 0.0)
        g_pi = g_q * _inside(self.sp, -ibp.LOGIT_MAX, ibp.LOGIT_MAX) * self.scale
        g_c, g_d = self._stick_grads(g_plogit)
        g_c = g_c + k * self._kl_v_dc()
        g_d = g_d + k * self._kl_v_dd()
        g_log_c = g_c * self.c * _inside(self.sc, -7.0, 7.0) * self.scale
        g_log_d = g_d * self.d * _inside(self.sd, -7.0, 7.0) * self.scale
        return LayerSelection(g_pi, g_log_c, g_log_d)

    def _relaxed_grad(self, g_b: torch.Tensor) -> torch.Tensor:
        """dNLL/dy through b = sigmoid(y), zero for clients that fine-tune (their b is pi's)."""
        g = g_b * self.relaxed * (1.0 - self.relaxed)
        return g if self.tuning is None else torch.where(self.tuning, 0.0, g)

    def _stick_grads(self, g_plogit: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Back from the prior's logit through pi = prod v and the Kumaraswamy draw to (c, d)."""
        p_c = self.p_c
        g_p = g_plogit / (p_c * (1.0 - p_c)) * _inside(self.p, ibp.PROB_EPS, 1.0 - ibp.PROB_EPS)
        g_s = g_p * self.p
        g_log_v = g_s.flip(-1).cumsum(-1).flip(-1)
        g_v = g_log_v / self.v_c * (self.v >= 1e-7).to(g_s.dtype)
        g_ratio = g_v * self.v / self.c  # d/d(log_inner / c)
        g_c = -g_ratio * self.log_inner / self.c
        g_inner = g_ratio / self.inner_c * (self.inner >= 1e-30).to(g_s.dtype)
        g_d = g_inner * torch.exp(self.t) * self.t / self.d  # inner = -expm1(log(1-u)/d)
        return g_c, g_d

    def _kl_v_dc(self) -> torch.Tensor:
        """d/dc of KL(Kumaraswamy(c, d) || Beta(alpha, 1)) (`ibp.kumaraswamy_beta_kl`)."""
        c, d = self.c, self.d
        bracket = -ibp.EULER_GAMMA - torch.digamma(d) - 1.0 / d
        return self.alpha * bracket / (c * c) + 1.0 / c

    def _kl_v_dd(self) -> torch.Tensor:
        c, d = self.c, self.d
        inv_d2 = 1.0 / (d * d)
        return ((c - self.alpha) / c) * (inv_d2 - torch.polygamma(1, d)) + 1.0 / d - inv_d2


def _inside(x: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """Where clamp(x, low, high) passes gradient (torch: the closed interval)."""
    return ((x >= low) & (x <= high)).to(x.dtype)

