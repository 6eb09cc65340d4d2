"""Shared mechanics of stochastic control variates (SCAFFOLD, Karimireddy et al. 2020, option II).

SCAFFOLD and WAFFLE differ only in how the server combines the uplinks, so both subclass
`ControlVariateTarget` and supply `combine`. Not a method itself (no `name`, so nothing
registers here).

Client i receives (x, c), sets y_i = x and takes K steps y_i <- y_i - lr (g_i(y_i) - c_i + c).
The correction is written inside the pure loss as the linear term <y, c - c_i>, whose gradient
is exactly c - c_i, so an executor can batch clients. Option II then gives
    c_i+ = c_i - c + (x - y_i) / (K lr),
the client sends (dy_i, dc_i) = (y_i - x, c_i+ - c_i) and keeps c_i+.

Wire names: downlink x under the model's parameter names and c under `c.<name>`; uplink
`dy.<name>` and `dc.<name>`. Private: c_i under `c.<name>`, absent until the client first trains
that parameter (which means c_i = 0, the paper's initialisation; a parameter is new to a client
when a server puts a module in front of the model, `attacks/active/servers/_front.py`). The
server's c starts at zero and stays there until a round moves it (for WAFFLE, until Alice takes
part): a downlink's c is the protocol's state, not the model, so a client's check of the model
it receives does not judge its values (`Target.downlink_weights`). Note that c_i is the sum of the client's own
`dc` uplinks: private in that it is never sent as such, but a server that records every uplink
of a client can add them up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from fedattack.registry import UserError
from fedattack.target import Hidden, LocalData, LocalProblem, State, Target, WireSchema, applied_update, initial_weights
from fedattack.training import Batch
from fedattack.wire import Message, Payload

C, DY, DC, CORR = "c.", "dy.", "dc.", "corr."


@dataclass(frozen=True, kw_only=True)
class ControlHyper:
    """server_lr: eta_g, the server's step on the combined update (1 in the SCAFFOLD paper)."""

    server_lr: float = 1.0

    def __post_init__(self) -> None:
        if self.server_lr <= 0:
            raise UserError(f"server_lr={self.server_lr} must be > 0")


def local_steps(size: int, epochs: int, batch_size: int) -> int:
    """K: the number of SGD steps the executor takes (every epoch ends with a partial batch)."""
    return epochs * math.ceil(size / batch_size)


class ControlVariateTarget(Target):
    """SCAFFOLD's client and state; subclasses decide how `combine` weighs the uplinks."""

    wire_exposes = {C: "c_i is the sum of the client's own dc uplinks (option II from c_i = 0); "
                       "after its first round it equals that round's dc"}
    decode_needs = frozenset({"up", "down"})

    def init_server(self, gen: torch.Generator) -> State:
        x = initial_weights(self.model, gen)
        return {**x, **{C + n: torch.zeros_like(t) for n, t in x.items()}}

    def broadcast(self, server: State, client: int, rnd: int) -> Payload:
        return {**{n: server[n] for n in self.param_names},
                **{C + n: server[C + n] for n in self.param_names}}

    def control_mode(self, down: Payload) -> str:
        """How this round treats the client's control variate: "update" (option II), "freeze"
        (c_i stays, dc = 0) or "reset" (c_i restarts from 0: trained with and kept at 0).
        A subclass may decide from what its downlink says (WAFFLE's zero-weight agents)."""
        return "update"

    def start_local(self, down: Payload, private: State, data: LocalData) -> LocalProblem:
        fresh = not private or self.control_mode(down) == "reset"
        corr = {CORR + n: down[C + n].clone() if fresh or C + n not in private else down[C + n] - private[C + n]
                for n in self.param_names}
        return LocalProblem(params={n: down[n] for n in self.param_names}, consts=corr)

    def local_loss(self, params: State, consts: State, batch: Batch, noise: State,
                   step: torch.Tensor) -> torch.Tensor:
        linear = sum((params[n] * consts[CORR + n]).sum() for n in self.param_names)
        return batch.cross_entropy(self.forward(params, batch.x)) + linear

    def finish_local(self, params: State, problem: LocalProblem, down: Payload, private: State,
                     data: LocalData) -> tuple[Payload, State]:
        r = self.recipe
        scale = 1.0 / (local_steps(data.size, r.epochs, r.batch_size) * r.lr)
        mode = self.control_mode(down)
        up: Payload = {}
        new: State = {}
        for n in self.param_names:
            c_i = private[C + n] if C + n in private else torch.zeros_like(down[n])
            if mode == "freeze":
                c_new = c_i
            elif mode == "reset":
                c_new = torch.zeros_like(c_i)
            else:
                c_new = c_i - down[C + n] + (down[n] - params[n]) * scale
            up[DY + n] = params[n] - down[n]
            up[DC + n] = c_new - c_i
            new[C + n] = c_new
        return up, new

    def combine(self, server: State, uplinks: list[Message],
                rnd: int) -> tuple[list[float], float, State]:
        """Coefficients for (dy, dc), the extra factor on dc, and server bookkeeping to keep."""
        raise NotImplementedError

    def after_combine(self, server: State, uplinks: list[Message], coeffs: list[float]) -> State:
        """Server state a subclass derives from the round's coefficients (none by default)."""
        return {}

    def aggregate(self, server: State, uplinks: list[Message], rnd: int) -> State:
        coeffs, c_scale, extra = self.combine(server, uplinks, rnd)
        eta = float(self.hyper.server_lr)
        out = dict(server)
        ups = [m.payload for m in uplinks]
        for n in self.param_names:
            # a weight of 0 leaves an agent out even if its update overflowed (0 * inf is NaN)
            dx = sum(a * up[DY + n] for a, up in zip(coeffs, ups) if a != 0)
            dc = sum(a * up[DC + n] for a, up in zip(coeffs, ups) if a != 0)
            out[n] = server[n] + eta * dx
            out[C + n] = server[C + n] + c_scale * dc
        out.update(extra)
        out.update(self.after_combine(server, uplinks, coeffs))
        return out

    def deployed(self, server: State, private: State) -> State:
        return {n: server[n] for n in self.param_names}

    def wire_schema(self) -> WireSchema:
        shapes = self.param_shapes()
        down = {**shapes, **{C + n: s for n, s in shapes.items()}}
        up = {**{DY + n: s for n, s in shapes.items()}, **{DC + n: s for n, s in shapes.items()}}
        return WireSchema(downlink=down, uplink=up)

    def decode(self, down: Payload | None, up: Payload) -> State | None:
        """The client's trained model: the downlink's x plus its uplinked dy."""
        return applied_update(down, up, self.param_names, DY)

    def hidden(self) -> Hidden:
        return Hidden(note="the control variate c_i (not part of the model)")


def flat(payload: Payload, prefix: str, names: list[str]) -> torch.Tensor:
    """The tensors `prefix + name` of a payload as one vector (for distances between updates)."""
    return torch.cat([payload[prefix + n].reshape(-1) for n in names])
