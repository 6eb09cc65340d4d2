"""WAFFLe's factorised layers: W = W_a diag(r * b) W_b, a dictionary of rank-1 factors.

A method's layer factory (`Target.layers`) hands an architecture these in place of its plain
layers by name. The factor selection `b` is a buffer: a client supplies its own through
`torch.func.functional_call`, which is how a private selection reaches the forward pass
without ever being a shared weight.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fedattack.models.layers import Layers


class FactorizedLayers(Layers):
    """Factorises the layers named in `factors` (name -> number of factors F)."""

    def __init__(self, factors: dict[str, int]) -> None:
        self.factors = dict(factors)

    def linear(self, name: str, d_in: int, d_out: int) -> nn.Module:
        if name in self.factors:
            return FactorizedLinear(d_in, d_out, self.factors[name])
        return super().linear(name, d_in, d_out)

    def conv(self, name: str, c_in: int, c_out: int, kernel: int, padding: int) -> nn.Module:
        if name in self.factors:
            return FactorizedConv2d(c_in, c_out, kernel, padding, self.factors[name])
        return super().conv(name, c_in, c_out, kernel, padding)


class _Factorized(nn.Module):
    """W = W_a diag(r * b) W_b: a dictionary of F rank-1 factors with strengths r.

    W_a and W_b are Glorot-uniform and r ~ N(0, 0.1^2), as in the IBP-WF reference code the
    WAFFLe authors built on; `b` (all ones until a client supplies its selection) switches
    factors on and off.
    """

    b: torch.Tensor  # a buffer (register_buffer), declared for the type checker

    def __init__(self, dim_a: int, dim_b: int, num_factors: int) -> None:
        super().__init__()
        self.num_factors = num_factors
        self.W_a = nn.Parameter(torch.empty(dim_a, num_factors))
        self.W_b = nn.Parameter(torch.empty(num_factors, dim_b))
        self.r = nn.Parameter(torch.empty(num_factors))
        self.b: torch.Tensor
        self.register_buffer("b", torch.ones(num_factors))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for w in (self.W_a, self.W_b):
            bound = math.sqrt(6.0 / (w.shape[0] + w.shape[1]))
            nn.init.uniform_(w, -bound, bound)
        nn.init.normal_(self.r, 0.0, 0.1)

    def composed(self) -> torch.Tensor:
        return (self.W_a * (self.r * self.b)) @ self.W_b


class FactorizedLinear(_Factorized):
    """A linear layer whose bias sits inside the dictionary: the input gets a column of ones."""

    def __init__(self, d_in: int, d_out: int, num_factors: int) -> None:
        super().__init__(d_in + 1, d_out, num_factors)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ones = torch.ones(*x.shape[:-1], 1, dtype=x.dtype, device=x.device)
        return torch.cat([x, ones], dim=-1) @ self.composed()


class FactorizedConv2d(_Factorized):
    """A convolution whose (k*k*C_in) x C_out kernel matrix is factorised (WAFFLe appendix A)."""

    def __init__(self, c_in: int, c_out: int, kernel: int, padding: int, num_factors: int) -> None:
        super().__init__(kernel * kernel * c_in, c_out, num_factors)
        self.shape = (kernel, kernel, c_in, c_out)
        self.padding = padding
        self.bias = nn.Parameter(torch.zeros(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.composed().reshape(self.shape).permute(3, 2, 0, 1)
        return F.conv2d(x, weight, self.bias, padding=self.padding)


def factorized_modules(model: nn.Module) -> dict[str, _Factorized]:
    """Every factorised layer of a model, by its module name."""
    return {n: m for n, m in model.named_modules() if isinstance(m, _Factorized)}


class LowRankLinear(FactorizedLinear):
    """`FactorizedLinear` computed as ([x, 1] W_a) diag(r * b) W_b, never forming W.

    The same function and parameters; for a batch of B << d_out inputs it costs B*F*(d_in + d_out)
    instead of d_in*F*d_out (MNIST fc1: 1.2M instead of 19M multiply-adds per step of 10).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ones = torch.ones(*x.shape[:-1], 1, dtype=x.dtype, device=x.device)
        return ((torch.cat([x, ones], dim=-1) @ self.W_a) * (self.r * self.b)) @ self.W_b


class LowRankLayers(FactorizedLayers):
    """WAFFLe's factorisation with the low-rank evaluation order for linear layers."""

    def linear(self, name: str, d_in: int, d_out: int) -> nn.Module:
        if name in self.factors:
            return LowRankLinear(d_in, d_out, self.factors[name])
        return super().linear(name, d_in, d_out)
