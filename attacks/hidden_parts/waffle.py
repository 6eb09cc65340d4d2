"""A hidden factor selection (WAFFLe's): ways to guess it (the truth is the oracle's `true`).

These serve every method that declares a selection in `Target.hidden()` (a factorised layer ->
its factor count, and the selection prior's alpha where there is one). The uplink carries the
whole dictionary {W_a, W_b, r} of every factorised layer (and the layers that are not
factorised), but not the client's selection b that turns the dictionary into its weights
W = W_a diag(r * b) W_b. An adversary must guess b:

  factors-all-on    b = 1: every factor on (what a client that never trained deploys)
  factors-prior     b drawn from the IBP stick-breaking prior with the method's public alpha
  factors-prior-mean  b = the prior's mean (alpha/(alpha+1))^k, where every client's posterior
                    starts (an adaptive guess the paper did not consider: a client that
                    trained little stays close to it)
  factors-fitted    b fitted on auxiliary data with the victim's class mix (sigmoid of logits,
                    from the prior mean, Adam over the recipe's epochs), dictionary frozen: the
                    client's own inference, replayed on data like its own
  factors-inferred  b = 1 for the factors the client's update changed: a factor k reaches the
                    loss only through r_k b_k, so its columns W_a[:, k], W_b[k, :] move in
                    proportion to b_k. The change of each factor (uplink minus the downlink
                    of the same round), divided by the known scale |r_k| * |other half|, is
                    split into "moved" and "still" by two-means on its logarithm.

`score` (scorer only) counts how many factors a guess gets right against the deployed b,
a factor counting as on when its b >= 0.5.

`auto` takes factors-all-on (lowest `rank`), because that is what measured strongest for
membership: in docs/privacy.md's membership-epochs sweep (the personalising WAFFLe, 12 cells of
Shokri and RMIA) it has the highest AUC in 10 (factors-fitted 0.013 higher in one,
factors-prior-mean 0.016 in another), and is 0.04-0.12 above factors-inferred from 5 local
epochs on (factors-inferred turns on 17-31 of 50 factors where the client's selection has
46-50); on CIFAR-10 Table 3 (docs/lab/reproduction.md) 0.559 against 0.523. On model inversion
(Table 4, MNIST and Fashion-MNIST) the guesses are closer: factors-prior-mean highest,
factors-all-on 0.4-0.7 dB PSNR below it and within 0.2 dB of factors-inferred; on update
inversion every guess gave the same images. The other ranks follow those membership tables'
order; `--reconstruction all` attacks with each.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from fedattack.attacks.hidden_parts.base import Reconstructed, Strategy, aux_like_victim, decoded
from fedattack.attacks.view import Knowledge, Observation
from fedattack.target import State, Target
from fedattack.training import minibatches

ON = 0.5


def layers_of(target: Target) -> dict[str, int]:
    return dict(target.hidden().selection)


def prior_mean(alpha: float, factors: int) -> torch.Tensor:
    """E[pi_k] = (alpha / (alpha + 1))^k, k = 1..F, under the stick-breaking prior: public."""
    k = torch.arange(1, factors + 1, dtype=torch.float32)
    return (alpha / (alpha + 1.0)) ** k


def alpha_of(target: Target, layer: str, factors: int) -> float:
    """The selection prior's alpha for a layer: public, like every hyperparameter of the method."""
    return float(target.hidden().selection_prior.get(layer, factors))


class FactorGuess(Strategy):
    """Shared part of the selection strategies: decoded dictionary plus a guessed `{layer}.b`."""

    def unsupported(self, target: Target) -> str | None:
        return None if layers_of(target) else f"{target.name} keeps no factor selection"

    def selection(self, target: Target, obs: Observation, layer: str, factors: int,
                  gen: torch.Generator) -> torch.Tensor:
        raise NotImplementedError

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        params = decoded(target, obs)
        guesses = {f"{layer}.b": self.selection(target, obs, layer, f, gen)
                   for layer, f in layers_of(target).items()}
        details = {"source": f"uplink of round {obs.round}",
                   "factors_on": {k[:-2]: int((v >= ON).sum()) for k, v in guesses.items()},
                   "factors": layers_of(target)}
        return Reconstructed(self.name, {**params, **guesses}, details, guesses)

    def score(self, target: Target, rec: Reconstructed, true_private: State,
              true_deployed: State) -> dict[str, Any]:
        per_layer = {}
        for name, guess in rec.guesses.items():
            truth = true_deployed[name] >= ON
            g = guess >= ON
            per_layer[name[:-2]] = {"factors": int(g.numel()), "true_on": int(truth.sum()),
                                    "guessed_on": int(g.sum()), "correct": int((g == truth).sum()),
                                    "on_found": int((g & truth).sum())}
        total = {k: sum(v[k] for v in per_layer.values()) for k in
                 ("factors", "true_on", "guessed_on", "correct", "on_found")}
        return {"factor_selection": {"total": total, "layers": per_layer,
                                     "rule": f"a factor is on when b >= {ON}"}}


class AllOn(FactorGuess):
    """Every factor on (b = 1), the selection of a client that never trained."""

    name = "factors-all-on"
    rank = 1  # `auto`'s choice: the strongest guess measured (module docstring)

    def selection(self, target: Target, obs: Observation, layer: str, factors: int,
                  gen: torch.Generator) -> torch.Tensor:
        return torch.ones(factors)


class PriorGuess(FactorGuess):
    """A guess drawn from the selection's prior: only for methods whose selection has one."""

    def unsupported(self, target: Target) -> str | None:
        if super().unsupported(target):
            return super().unsupported(target)
        return None if target.hidden().selection_prior else f"{target.name}'s selection has no prior"


class Prior(PriorGuess):
    """A draw from the IBP stick-breaking prior with the method's public alpha."""

    name = "factors-prior"
    rank = 5

    def selection(self, target: Target, obs: Observation, layer: str, factors: int,
                  gen: torch.Generator) -> torch.Tensor:
        alpha = alpha_of(target, layer, factors)
        sticks = torch.rand(factors, generator=gen) ** (1.0 / alpha)  # Beta(alpha, 1) by inverse CDF
        probs = torch.cumprod(sticks, 0)
        return (torch.rand(factors, generator=gen) < probs).float()


class PriorMean(PriorGuess):
    """The IBP prior's mean selection, where every client's variational posterior starts."""

    name = "factors-prior-mean"
    rank = 2

    def selection(self, target: Target, obs: Observation, layer: str, factors: int,
                  gen: torch.Generator) -> torch.Tensor:
        return prior_mean(alpha_of(target, layer, factors), factors)


class Inferred(FactorGuess):
    """The factors the client's update moved (uplink against the same round's downlink)."""

    name = "factors-inferred"
    needs = frozenset({"up", "down"})
    rank = 4

    def selection(self, target: Target, obs: Observation, layer: str, factors: int,
                  gen: torch.Generator) -> torch.Tensor:
        assert obs.up is not None and obs.down is not None
        scores = movement(obs.down, obs.up, layer)
        return two_means_high(torch.log(scores.clamp_min(1e-30)))


def movement(down: State, up: State, layer: str) -> torch.Tensor:
    """Per-factor change, each half divided by the scale it is multiplied by in the gradient."""
    a0, b0, r0 = (down[f"{layer}.{p}"].double() for p in ("W_a", "W_b", "r"))
    a1, b1 = up[f"{layer}.W_a"].double(), up[f"{layer}.W_b"].double()
    r_scale = r0.abs() + 1e-12
    move_a = (a1 - a0).norm(dim=0) / (r_scale * b0.norm(dim=1) + 1e-12)
    move_b = (b1 - b0).norm(dim=1) / (r_scale * a0.norm(dim=0) + 1e-12)
    return (move_a + move_b).float()


def two_means_high(values: torch.Tensor) -> torch.Tensor:
    """1 for the values in the upper of the two clusters minimising within-cluster squares."""
    v = values.double()
    order = torch.argsort(v)
    s = v[order]
    n = len(s)
    if n < 2 or float(s[-1] - s[0]) == 0.0:
        return torch.ones(n)
    best, cut = float("inf"), 1
    for i in range(1, n):
        lo, hi = s[:i], s[i:]
        sse = float(((lo - lo.mean()) ** 2).sum() + ((hi - hi.mean()) ** 2).sum())
        if sse < best:
            best, cut = sse, i
    out = torch.zeros(n)
    out[order[cut:]] = 1.0
    return out


class Fitted(FactorGuess):
    """b in [0, 1] fitted on auxiliary data like the victim's, the uplinked dictionary frozen."""

    name = "factors-fitted"
    needs_labels = True
    rank = 3
    lr = 0.05

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        params = {n: t.detach() for n, t in decoded(target, obs).items()}
        logits = {f"{layer}.b": torch.logit(start_selection(target, layer, f).clamp(0.01, 0.99))
                  .requires_grad_(True) for layer, f in layers_of(target).items()}
        data = aux_like_victim(knowledge, gen)
        opt = torch.optim.Adam(logits.values(), lr=self.lr)
        for idx in minibatches(len(data), target.recipe.epochs, target.recipe.batch_size, gen):
            b = {k: torch.sigmoid(v) for k, v in logits.items()}
            loss = F.cross_entropy(target.forward({**params, **b}, data.x[idx]), data.y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        guesses = {k: torch.sigmoid(v).detach() for k, v in logits.items()}
        details = {"source": f"uplink of round {obs.round}", "aux_samples": len(data),
                   "factors_on": {k[:-2]: int((v >= ON).sum()) for k, v in guesses.items()}}
        return Reconstructed(self.name, {**params, **guesses}, details, guesses)


def start_selection(target: Target, layer: str, factors: int) -> torch.Tensor:
    """Where a fitted selection starts: the IBP prior's mean, or all on without a prior."""
    if layer in target.hidden().selection_prior:
        return prior_mean(alpha_of(target, layer, factors), factors)
    return torch.ones(factors)
