"""WAFFLE (Beaussart, Grimberg, Hartley, Jaggi: "WAFFLE: Weighted Averaging for Personalized
Federated Learning", 2021): SCAFFOLD whose server combines the agents' updates with weights that
move from global training to training on Alice's data alone.

Every round the server runs CalcWeights (Algorithm 1) on the uploaded dy_i:
  d_i = |dy_i - dy_Alice|_2;  dM, dm = max, min of d_i over the other agents;
  d_Alice = dm (1 - (dM - dm) / dM * (1 - Omega(r)))                      (eq. 2)
  alpha_i = max(Psi(r) - (d_i - d_Alice) / (dM - d_Alice), 0)              (eq. 3)
  alpha = one-hot(Alice) when r >= 0.95 R (pure local training at the end), normalised to sum 1,
  and the weights used are the mean of this round's and the two previous rounds' (line 10),
with Omega(r) = Psi(r) = 1 / (1 + exp(delta_omega (r / (R/2) - 1)))  (eq. 4, delta_omega = 3.2).
Then (dx, dc) = sum_i alpha_i (dy_i, dc_i) (eq. 1), x <- x + server_lr dx, c <- c + dc.
Algorithm 1 line 6 divides by dM - min_i d_i; after line 4 the smallest distance is d_Alice, so
this is eq. 3's dM - d_Alice. In rounds 1 and 2 the smoothing averages the rounds there are.

R is the federation's `--rounds` (the paper's 100); `--set rounds=R` overrides it, e.g. to
run the first rounds of a longer schedule. The model is personalised for agent `alice` (0, as
in the paper): every agent deploys Alice's model, and only Alice's accuracy is the paper's
metric. To personalise for every agent, run one federation per agent (the paper: "WE (or
WAFFLE) can be run several times in parallel"):
    for a in $(seq 0 9); do fedattack train --method waffle-wavg --set alice=$a ...; done
The paper has every agent in every round (--fraction 1). Under partial participation the
weights are computed among the agents sampled with Alice (the smoothed weights restricted to
them and renormalised), and a round without Alice moves nothing at the server.

Wire: as SCAFFOLD, (x, c) down (x is Alice's personalised model), (dy_i, dc_i) up. Private: c_i.
The server keeps the weights of the last rounds under `waffle.alpha.*` (never sent).

Agents at weight 0 (`zero_weight`). Read literally ("keep", `reading=literal`), an agent whose weight
is 0 still updates its control variate every round; nothing pulls it back, it drifts by about
-c a round and eventually overflows, which diverges WAFFLE on MNIST at lr 0.1 and 0.05
(docs/lab/reproduction-waffle-cgau.md). The paper's Algorithm 2, which may say what to do, is
missing from the text we have. The stabilising variants: "freeze" leaves c_i untouched while
the agent's weight is 0 (it still trains and sends dy, which the weights need, and dc = 0);
"reset" restarts it from 0 (trained with and kept at c_i = 0). c_i is the agent's own, so the
server must tell it: under freeze or reset the downlink carries `waffle.zero_weight` (1 if the
agent's smoothed weight over the last `smoothing` rounds is 0, else 0). That is one bit per
agent and round on the wire, which tells an eavesdropper whom the server has excluded from
Alice's model (the weights were server-only before). It lags by a round: the server knows the
weights of the rounds so far, not this round's, which depend on this round's uplinks. Under
partial participation an agent absent from the last rounds also has weight 0 there.

Readings (`reading`): `stabilised`, the default, is zero_weight=freeze, zero_below=0.05,
control=variates, the three readings of what the paper leaves open that keep WAFFLE from
diverging on MNIST (chosen on seed 0, checked on seed 1 and on held-out seeds of B and C:
docs/lab/reproduction-waffle-cgau.md); `literal` is Algorithm 1 and eq. (1) as written
(zero_weight=keep, zero_below=0, control=increments), which diverges there. A setting given
alone overrides its reading's. The stabilised reading puts one bit per agent and round on the
downlink (`waffle.zero_weight`); the literal one adds nothing to SCAFFOLD's wire.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from fedattack.options import one_of
from fedattack.registry import UserError
from fedattack.target import State, WireSchema, weighted_sum
from fedattack.wire import Message, Payload

from ._alice import alice_among, check_alice
from ._control import DC, DY, C, ControlHyper, ControlVariateTarget, flat

HISTORY = "waffle.alpha_history"
CI = "waffle.c_i."  # server-side running sum of each agent's dc uplinks (control=variates)
ZERO = "waffle.zero_weight"  # downlink under zero_weight=freeze|reset: 1 if the agent's weight is 0
ZERO_WEIGHT_MODES = ("keep", "freeze", "reset")
READINGS = {"literal": {"zero_weight": "keep", "zero_below": 0.0, "control": "increments"},
            "stabilised": {"zero_weight": "freeze", "zero_below": 0.05, "control": "variates"}}


@dataclass(frozen=True, kw_only=True)
class WaffleHyper(ControlHyper):
    """alice: the agent personalised for. delta_omega: slope of eq. (4). rounds: R of the schedule
    (0: the federation's number of rounds). local_fraction: final share of rounds trained on
    Alice alone. smoothing: rounds averaged. control: how c moves, "increments" (eq. 1 as
    written: c <- c + sum_i alpha_i dc_i) or "variates" (c <- sum_i alpha_i c_i, the weighted
    mean of the agents' control variates, which the server adds up from their dc uplinks; the
    two agree for SCAFFOLD's equal weights, and differ once the weights change between rounds).
    zero_weight: what an agent at weight 0 does with its control variate, keep (updates it, the
    literal reading), freeze or reset (see the module docstring). zero_below: under freeze or
    reset, an agent counts as at weight 0 when its mean weight over the last `smoothing` rounds
    is at most this (0: exactly 0); agents that alternate with others at the largest distance
    get tiny weights now and then, and their control variates drift as a zero-weight agent's.
    reading: stabilised (the default) or literal (the paper as written; the module docstring),
    which sets the three before it; an empty control or zero_weight, or a negative zero_below,
    takes the reading's."""

    alice: int = 0
    delta_omega: float = 3.2
    rounds: int = 0
    local_fraction: float = 0.05
    smoothing: int = 3
    control: str = ""
    zero_weight: str = ""
    zero_below: float = -1.0
    reading: str = "stabilised"  # a literal: `fedattack list` reads defaults from the source

    def __post_init__(self) -> None:
        super().__post_init__()
        one_of(self.reading, tuple(READINGS), "waffle-wavg reading")
        chosen = READINGS[self.reading]
        for name in ("control", "zero_weight"):
            if not getattr(self, name):
                object.__setattr__(self, name, chosen[name])
        if self.zero_below < 0:
            object.__setattr__(self, "zero_below", chosen["zero_below"])
        one_of(self.zero_weight, ZERO_WEIGHT_MODES, "waffle-wavg zero_weight")
        one_of(self.control, ("increments", "variates"), "waffle-wavg control")
        if not 0 <= self.zero_below < 1:
            raise UserError(f"waffle-wavg zero_below={self.zero_below}: use a weight in [0, 1)")
        if self.rounds < 0 or self.smoothing < 1 or not 0 <= self.local_fraction <= 1:
            raise UserError("waffle-wavg needs rounds >= 0 (0: the federation's), smoothing >= 1 "
                            "and 0 <= local_fraction <= 1")


def omega(r: int, total: int, delta_omega: float) -> float:
    """Eq. (4): about 0.96 at the start (global), 0.5 at R/2, about 0.04 at R (local)."""
    return 1.0 / (1.0 + math.exp(delta_omega * (r / (total / 2.0) - 1.0)))


def calc_weights(d: torch.Tensor, alice: int, om: float, psi: float) -> torch.Tensor:
    """Eqs. (2) and (3) for the distances `d` of every agent's update to Alice's; normalised."""
    n = d.numel()
    if n == 1:
        return torch.ones(1, dtype=torch.float64)
    if not bool(torch.isfinite(d).all()):
        # An update overflowed. In exact arithmetic its distance is huge, dM with it, and eq. (3)
        # tends to Psi for every finite agent and to 0 for the far one: take that limit.
        alpha = torch.where(torch.isfinite(d), psi, 0.0).to(torch.float64)
        return alpha / alpha.sum() if float(alpha.sum()) > 0 else alpha
    others = torch.cat([d[:alice], d[alice + 1:]])
    d_max, d_min = float(others.max()), float(others.min())
    spread = (d_max - d_min) / d_max if d_max > 0 else 0.0
    d_alice = d_min * (1.0 - spread * (1.0 - om))
    d = d.clone()
    d[alice] = d_alice
    span = d_max - d_alice
    alpha = (psi - (d - d_alice) / span).clamp(min=0.0) if span > 0 else torch.full_like(d, psi)
    if float(alpha.sum()) <= 0.0:  # Psi underflowed to 0 (a very steep schedule): Alice alone
        alpha = torch.zeros_like(d)
        alpha[alice] = 1.0
    return alpha / alpha.sum()


class Waffle(ControlVariateTarget):
    """SCAFFOLD with distance-based weights that personalise the model for one agent."""

    name = "waffle-wavg"
    paper = "Beaussart et al. 2021"
    Hyper = WaffleHyper

    def init_server(self, gen: torch.Generator) -> State:
        check_alice(self.hyper, self.num_clients)
        state = {**super().init_server(gen),
                 HISTORY: torch.zeros(0, self.num_clients, dtype=torch.float64)}
        if self.hyper.control == "variates":
            state.update({CI + n: torch.zeros(self.num_clients, *state[n].shape) for n in self.param_names})
        return state

    def after_combine(self, server: State, uplinks: list[Message], coeffs: list[float]) -> State:
        """control=variates: c is the weighted mean of the agents' c_i, which the server keeps
        as the running sums of their dc uplinks. A parameter the server did not start with (an
        active server's module in front of the model) starts with every c_i at 0, as the agents'
        own c_i do (`_control`: a c_i not yet in the private state is 0)."""
        if self.hyper.control != "variates":
            return {}
        senders = [m.sender for m in uplinks]
        out: State = {}
        for n in self.param_names:
            c_i = (server[CI + n].clone() if CI + n in server
                   else torch.zeros(self.num_clients, *server[n].shape, dtype=server[n].dtype))
            c_i[senders] += torch.stack([m.payload[DC + n] for m in uplinks])
            out[CI + n] = c_i
            used = [(a, k) for a, k in zip(coeffs, senders) if a != 0]
            if used:
                out[C + n] = weighted_sum([c_i[k] for _, k in used], [a for a, _ in used])
        return out

    def broadcast(self, server: State, client: int, rnd: int) -> Payload:
        down = super().broadcast(server, client, rnd)
        if self.hyper.zero_weight != "keep":
            down[ZERO] = torch.tensor([1.0 if self.weight_is_zero(server, client) else 0.0])
        return down

    def weight_is_zero(self, server: State, client: int) -> bool:
        """Whether the agent's smoothed weight over the last rounds is 0, or at most `zero_below`
        (none before round 2)."""
        recent = server[HISTORY][-self.hyper.smoothing:, client]  # weights are >= 0: mean 0 iff all 0
        return len(recent) > 0 and float(recent.mean()) <= self.hyper.zero_below

    def control_mode(self, down: Payload) -> str:
        if ZERO in down and float(down[ZERO][0]) == 1.0:
            return "freeze" if self.hyper.zero_weight == "freeze" else "reset"
        return "update"

    def wire_schema(self) -> WireSchema:
        schema = super().wire_schema()
        if self.hyper.zero_weight == "keep":
            return schema
        return WireSchema(downlink={**schema.downlink, ZERO: (1,)}, uplink=schema.uplink)

    def schedule_rounds(self) -> int:
        """R of eq. (4): the hyperparameter if set, else the federation's rounds."""
        return self.hyper.rounds or self.ctx.rounds

    def combine(self, server: State, uplinks: list[Message],
                rnd: int) -> tuple[list[float], float, State]:
        h = self.hyper
        senders, a = alice_among(uplinks, h.alice)
        if a is None:  # no reference update: nothing moves this round
            return [0.0] * len(uplinks), 1.0, {}
        ups = [m.payload for m in uplinks]
        ref = flat(ups[a], DY, self.param_names).double()
        d = torch.stack([(flat(up, DY, self.param_names).double() - ref).norm() for up in ups])
        total = self.schedule_rounds()
        om = omega(rnd, total, h.delta_omega)
        if rnd >= (1.0 - h.local_fraction) * total:
            alpha = torch.zeros(len(uplinks), dtype=torch.float64)
            alpha[a] = 1.0
        else:
            alpha = calc_weights(d, a, om, om)
        row = torch.zeros(1, self.num_clients, dtype=torch.float64)
        row[0, senders] = alpha
        history = torch.cat([server[HISTORY], row])
        smoothed = history[-h.smoothing:].mean(0)[senders]
        mass = float(smoothed.sum())
        coeffs = (smoothed / mass if mass > 0 else smoothed).tolist()
        return coeffs, 1.0, {HISTORY: history}
