"""WAFFLe's local step, differentiated by hand: the one derivation every fast step is tested against.

WAFFLe's loss (`method.WaffleIBP.local_loss`) is differentiated by autograd in the sequential
loop. The batched kernel (`selection.SelectionStep`, `step.ibp_step`) and the compiled one
(`native.c`) compute the same gradients from formulas written out by hand, rearranged for
speed. This module is those formulas once, as written here, term by term, in the plainest
tensor code, for one client at a time; the tests hold autograd to it (so the derivation is
right) and each fast step to it (so each implements the derivation):
tests/targets/test_waffle_derivation.py.

Notation, per factorised layer with F factors. The stored selection parameters are the true
ones divided by `scale` (sqrt of `selection_lr_scale`): s = (s_pi, s_c, s_d). Clamps pass the
gradient only strictly inside, or on, their interval (as torch's clamp does), marked [in].

Forward
  (F1) q = clamp(scale s_pi, -Q, Q), Q = log((1 - e) / e), e = 1e-3: the logit of q(b) = Bern(pi)
  (F2) l = log u_b - log(1 - u_b), u_b clamped to [1e-6, 1 - 1e-6]: the draw's logistic noise
  (F3) y = (q + l) / tau;  b = sigmoid(y)   (variational phase: the relaxed Bernoulli)
       b = pi 1[pi >= kappa], pi = sigmoid(q)   (fine-tuning phase: the deployed selection)
  (F4) c = exp(clamp(scale s_c, -7, 7)),  d = exp(clamp(scale s_d, -7, 7))
  (F5) t = log(1 - u_v) / d;  n = 1 - exp(t);  rho = log(max(n, 1e-30)) / c   (rho = log v,
       v ~ Kumaraswamy(c, d) by its inverse CDF)
  (F6) log p_k = sum_{j <= k} max(rho_j, log 1e-7);  p = exp(log p);  pc = clamp(p, e, 1 - e);
       p_logit = log(pc / (1 - pc))   (the stick-breaking prior's pi given the sticks)
  (F7) KL_b = sum_k [log g(y; q) - log g(y; p_logit)], log g(y; a) = log tau + z - 2 softplus(z),
       z = a - tau y   (kl_b = "concrete": one sample, at the draw that fed the network)
       KL_b = sum_k KL(Bern(sigmoid(q)) || Bern(sigmoid(p_logit)))   (kl_b = "bernoulli")
  (F8) KL_v = sum_k (1 - alpha / c)(-gamma - psi(d) - 1/d) + log c + log d - log alpha - (d - 1)/d
  (F9) loss = NLL(b) + k (KL_b + KL_v),  k = kl_weight / n_train (0 while fine-tuning)

Backward, given g_b = dNLL/db (from the network, below)
  (B1) dNLL/dq = g_b b (1 - b) / tau (variational); g_b pi (1 - pi) where pi >= kappa, else 0
       (fine-tuning; the indicator has no gradient)
  (B2) concrete: z_q = q - tau y = -l does not depend on q, so dKL_b/dq = 1 - 2 sigmoid(z_p)
       with z_p = p_logit - tau y, and dKL_b/dp_logit = -(1 - 2 sigmoid(z_p))
       bernoulli: dKL_b/dq = sigmoid'(q) (q - p_logit), dKL_b/dp_logit = sigmoid(p_logit) - sigmoid(q)
  (B3) dL/ds_pi = scale [in F1] (dNLL/dq + k dKL_b/dq)
  (B4) G_k = dL/dlog p_k = k dKL_b/dp_logit_k / (1 - pc_k) [in F6's pc clamp]
       (dp_logit/dp = 1 / (p (1 - p)), and d/dlog p = p d/dp)
  (B5) dL/drho_j = sum_{k >= j} G_k [in F6's stick clamp]   (log p is a cumulative sum)
  (B6) c dL/dc = k (1 - alpha (psi(d) + 1/d + gamma) / c) - rho dL/drho
       (c drho/dc = -rho; c dKL_v/dc = alpha B / c + 1 with B = -gamma - psi(d) - 1/d)
  (B7) d dL/dd = k ((1 - 1/d) + (1 - alpha / c)(1/d - d psi'(d)))
                 + dL/drho / (c n) [in F5's floor] (1 - n) t
       (dn/dd = (1 - n) t / d; d dKL_v/dd = (1 - alpha/c)(1/d - d psi'(d)) + 1 - 1/d)
  (B8) dL/ds_c = scale [in F4] c dL/dc,  dL/ds_d = scale [in F4] d dL/dd

The network, per step, with x the batch (its column of ones appended where a factorised layer
reads it), w the per-sample weights, and the low-rank layer z = ((x W_a) * (r b)) W_b:
  (N1) dlogits = (softmax(logits) - onehot(y)) w   (the weighted cross-entropy)
  (N2) dense: dW = dz^T a, dbias = sum_batch dz, da = dz W, through ReLU: da 1[z_below > 0]
  (N3) low-rank, h = x W_a, g = h * (r b): dW_b = g^T dz, dg = dz W_b^T,
       g_rb = sum_batch dg * h, dr = g_rb * b, g_b = g_rb * r, dh = dg * (r b),
       dW_a = x^T dh, dx = dh W_a[:-1]^T (the row of W_a the ones multiply is the bias)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

EPS = 1e-3
Q_MAX = math.log((1.0 - EPS) / EPS)
EULER = 0.5772156649015329
LOG_V_MIN = math.log(1e-7)


def inside(x: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """1 where a clamp to [lo, hi] passes its gradient, 0 where it cut the value."""
    return ((x >= lo) & (x <= hi)).to(x.dtype)


@dataclass(frozen=True)
class Layer:
    """One factorised layer's prior and settings (F3, F7, F8)."""

    alpha: float
    scale: float = 1.0
    kl_b: str = "concrete"
    kappa: float = 0.0


def selection_gradients(layer: Layer, sel: torch.Tensor, u_b: torch.Tensor, u_v: torch.Tensor, tau: float,
                        k: float, g_b: torch.Tensor, tuning: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """One client's b (F3) and dL/d(s_pi, s_c, s_d) (B1-B8), (3, F), given g_b = dNLL/db."""
    s_pi, s_c, s_d = layer.scale * sel[0], layer.scale * sel[1], layer.scale * sel[2]
    q = s_pi.clamp(-Q_MAX, Q_MAX)                                             # F1
    u_b, u_v = u_b.clamp(1e-6, 1 - 1e-6), u_v.clamp(1e-6, 1 - 1e-6)
    logistic = torch.log(u_b) - torch.log1p(-u_b)                              # F2
    y = (q + logistic) / tau                                                   # F3
    pi = torch.sigmoid(q)
    b = pi * (pi >= layer.kappa) if tuning else torch.sigmoid(y)
    c, d = torch.exp(s_c.clamp(-7, 7)), torch.exp(s_d.clamp(-7, 7))           # F4
    t = torch.log1p(-u_v) / d                                                  # F5
    n = -torch.expm1(t)
    rho = torch.log(n.clamp_min(1e-30)) / c
    log_p = torch.cumsum(rho.clamp_min(LOG_V_MIN), 0)                         # F6
    p = torch.exp(log_p)
    pc = p.clamp(EPS, 1 - EPS)
    p_logit = torch.log(pc / (1 - pc))
    if tuning:                                                                 # B1
        d_nll_q = g_b * pi * (1 - pi) * (pi >= layer.kappa)
        k = 0.0
    else:
        d_nll_q = g_b * b * (1 - b) / tau
    if layer.kl_b == "concrete":                                               # B2
        d_kl_q = 1 - 2 * torch.sigmoid(p_logit - tau * y)
        d_kl_plogit = -d_kl_q
    else:
        d_kl_q = torch.sigmoid(q) * (1 - torch.sigmoid(q)) * (q - p_logit)
        d_kl_plogit = torch.sigmoid(p_logit) - torch.sigmoid(q)
    g_pi = layer.scale * inside(s_pi, -Q_MAX, Q_MAX) * (d_nll_q + k * d_kl_q)   # B3
    g_log_p = k * d_kl_plogit / (1 - pc) * inside(p, EPS, 1 - EPS)            # B4
    g_rho = torch.flip(torch.cumsum(torch.flip(g_log_p, [0]), 0), [0]) * (rho >= LOG_V_MIN)  # B5
    c_dc = k * (1 - layer.alpha * (torch.digamma(d) + 1 / d + EULER) / c) - rho * g_rho    # B6
    d_dd = (k * ((1 - 1 / d) + (1 - layer.alpha / c) * (1 / d - d * torch.polygamma(1, d)))  # B7
            + g_rho / (c * n) * (n >= 1e-30) * (1 - n) * t)
    g_c = layer.scale * inside(s_c, -7, 7) * c_dc                              # B8
    g_d = layer.scale * inside(s_d, -7, 7) * d_dd
    return b, torch.stack([g_pi, g_c, g_d])


def weighted_cross_entropy_grad(logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """(N1): d(sum_i w_i CE(logits_i, y_i)) / dlogits."""
    return (logits.softmax(-1) - F.one_hot(y, logits.shape[-1]).to(logits.dtype)) * w.unsqueeze(-1)


def lowrank_gradients(x1: torch.Tensor, w_a: torch.Tensor, w_b: torch.Tensor, r: torch.Tensor, b: torch.Tensor,
                      dz: torch.Tensor) -> dict[str, torch.Tensor]:
    """(N3) for one client: x1 (B, D + 1) the input with its column of ones, dz (B, O)."""
    h = x1 @ w_a
    g = h * (r * b)
    dg = dz @ w_b.t()
    g_rb = (dg * h).sum(0)
    dh = dg * (r * b)
    return {"W_b": g.t() @ dz, "W_a": x1.t() @ dh, "r": g_rb * b, "b": g_rb * r, "x": dh @ w_a[:-1].t()}


def dense_gradients(a: torch.Tensor, weight: torch.Tensor, dz: torch.Tensor) -> dict[str, torch.Tensor]:
    """(N2) for one client: a (B, D) the layer's input, dz (B, O) the gradient in its output."""
    return {"weight": dz.t() @ a, "bias": dz.sum(0), "a": dz @ weight}
