"""The Indian Buffet Process machinery of WAFFLe: stick-breaking prior, variational posteriors, KLs.

WAFFLe (Hao et al., IEEE Access 2022, eqs. 5-11) gives each client a binary factor selection
b_k ~ Bernoulli(pi_k) with the stick-breaking IBP prior pi_k = prod_{j<=k} v_j, v_j ~ Beta(alpha, 1).
Inference is variational: q(v) = Kumaraswamy(c, d) (a reparameterisable stand-in for the Beta)
and q(b) a relaxed Bernoulli (Binary Concrete, Maddison et al. 2017) with probabilities pi.
The numerical choices the paper leaves open follow the IBP-WF code the WAFFLe authors built on
(clipping probabilities to [1e-3, 1 - 1e-3], the single-sample KL of b in logit space).

Everything here is pure tensor code: randomness comes in as U(0,1) draws `u`, never from a
global generator, so a batched executor can vmap a client's loss and seeds stay reproducible.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

EULER_GAMMA = 0.5772156649015329
PROB_EPS = 1e-3  # IBP-WF clips every Bernoulli probability to [1e-3, 1 - 1e-3]
UNIFORM_EPS = 1e-6  # keeps log(u) and log(1 - u) finite


def clamp_uniform(u: torch.Tensor) -> torch.Tensor:
    return u.clamp(UNIFORM_EPS, 1.0 - UNIFORM_EPS)


def prior_mean_probs(alpha: float, num_factors: int) -> torch.Tensor:
    """E[pi_k] under the stick-breaking prior: (alpha / (alpha + 1))^k for k = 1..F."""
    k = torch.arange(1, num_factors + 1, dtype=torch.float32)
    return (alpha / (alpha + 1.0)) ** k


def prob_logit(p: torch.Tensor) -> torch.Tensor:
    """log(p / (1 - p)) after clipping p to [1e-3, 1 - 1e-3]."""
    p = p.clamp(PROB_EPS, 1.0 - PROB_EPS)
    return torch.log(p) - torch.log1p(-p)


LOGIT_MAX = math.log((1.0 - PROB_EPS) / PROB_EPS)


def clip_logit(logit: torch.Tensor) -> torch.Tensor:
    """A logit clipped to the probabilities [1e-3, 1 - 1e-3] (same as clipping p)."""
    return logit.clamp(-LOGIT_MAX, LOGIT_MAX)


def log_prob_logit(log_p: torch.Tensor) -> torch.Tensor:
    """The same logit computed from log p (the stick products live in log space)."""
    return prob_logit(torch.exp(log_p))


def kumaraswamy_sample(c: torch.Tensor, d: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """A reparameterised draw v = (1 - (1 - u)^(1/d))^(1/c) from Kumaraswamy(c, d)."""
    u = clamp_uniform(u)
    inner = -torch.expm1(torch.log1p(-u) / d)  # 1 - (1 - u)^(1/d), accurate near 0
    return torch.exp(torch.log(inner.clamp_min(1e-30)) / c)


def stick_breaking_log_probs(v: torch.Tensor) -> torch.Tensor:
    """log pi_k = sum_{j<=k} log v_j: the prior's activation probabilities given the sticks."""
    return torch.cumsum(torch.log(v.clamp_min(1e-7)), dim=-1)


def kumaraswamy_beta_kl(c: torch.Tensor, d: torch.Tensor, alpha: float) -> torch.Tensor:
    """KL(Kumaraswamy(c, d) || Beta(alpha, 1)) in closed form, summed over factors.

    Nalisnick & Smyth (2017), eq. 11, with the Beta's second parameter 1 (its infinite series
    is multiplied by beta - 1 = 0 and vanishes, and log B(alpha, 1) = -log alpha). Zero when
    (c, d) = (alpha, 1), since Kumaraswamy(alpha, 1) is Beta(alpha, 1).
    """
    kl = ((c - alpha) / c) * (-EULER_GAMMA - torch.digamma(d) - 1.0 / d)
    kl = kl + torch.log(c * d) - math.log(alpha) - (d - 1.0) / d
    return kl.sum(dim=-1)


def relaxed_bernoulli_logit(logit: torch.Tensor, u: torch.Tensor,
                            temperature: float | torch.Tensor) -> torch.Tensor:
    """A Binary Concrete draw in logit space, y = (logit + log u - log(1 - u)) / temperature.

    The relaxed selection is sigmoid(y), in (0, 1); it is differentiable in `logit`.
    """
    u = clamp_uniform(u)
    return (logit + torch.log(u) - torch.log1p(-u)) / temperature


def concrete_log_density(y: torch.Tensor, logit: torch.Tensor,
                         temperature: float | torch.Tensor) -> torch.Tensor:
    """log density, at y, of the Binary Concrete in logit space with location `logit`.

    The temperature is a float, or a tensor when it follows a schedule over local steps."""
    z = logit - temperature * y
    log_t = torch.log(temperature) if isinstance(temperature, torch.Tensor) else math.log(temperature)
    return log_t + z - 2.0 * F.softplus(z)


def concrete_kl_mc(y: torch.Tensor, q_logit: torch.Tensor, p_logit: torch.Tensor,
                   temperature: float | torch.Tensor) -> torch.Tensor:
    """One-sample estimate of KL(q(b) || p(b | v)) from a draw y ~ q, summed over factors."""
    log_q = concrete_log_density(y, q_logit, temperature)
    log_p = concrete_log_density(y, p_logit, temperature)
    return (log_q - log_p).sum(dim=-1)


def bernoulli_kl(q_logit: torch.Tensor, p_logit: torch.Tensor) -> torch.Tensor:
    """Exact KL(Bernoulli(sigmoid(q_logit)) || Bernoulli(sigmoid(p_logit))), summed over factors."""
    q = torch.sigmoid(q_logit)
    log_q, log_1mq = F.logsigmoid(q_logit), F.logsigmoid(-q_logit)
    log_p, log_1mp = F.logsigmoid(p_logit), F.logsigmoid(-p_logit)
    return (q * (log_q - log_p) + (1.0 - q) * (log_1mq - log_1mp)).sum(dim=-1)


def ibp_layer_kl(q_logit: torch.Tensor, c: torch.Tensor, d: torch.Tensor, y: torch.Tensor,
                 u_v: torch.Tensor, alpha: float, temperature: float | torch.Tensor,
                 kl_b: str = "concrete") -> torch.Tensor:
    """The regulariser R of WAFFLe's eq. (11) for one layer: E_q(v)[KL_b] + KL_v.

    `q_logit` is the posterior's (clipped) logit and `y` the relaxed draw made from it.

    The expectation over v is one reparameterised Kumaraswamy draw (from `u_v`); KL_b is
    either the one-sample Concrete estimate at the same draw y that fed the forward pass
    ("concrete", as IBP-WF does) or the exact Bernoulli KL given v ("bernoulli").
    """
    v = kumaraswamy_sample(c, d, u_v)
    p_logit = log_prob_logit(stick_breaking_log_probs(v))
    if kl_b == "concrete":
        kl = concrete_kl_mc(y, q_logit, p_logit, temperature)
    else:
        kl = bernoulli_kl(q_logit, p_logit)
    return kl + kumaraswamy_beta_kl(c, d, alpha)
