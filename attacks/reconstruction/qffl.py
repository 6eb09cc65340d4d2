"""q-FFL: the uplink is a scaled update, Delta = F^q L (w - w_bar), with h beside it.

`qffl-decoded` undoes the scaling. With s = |Delta|^2, L = 1/lr (public) and q (public), the
uplink's h = q s F^(-q-1) + L F^q is one equation in the client's loss F, decreasing in F up
to F* = ((q+1) s / L)^(1/(2q+1)); bisection below F* recovers F, and then
w_bar = w - Delta / (L F^q) is the client's locally trained model.
"""

from __future__ import annotations

import torch

from fedattack.attacks.reconstruction.base import Reconstructed, Strategy
from fedattack.attacks.view import Knowledge, Observation
from fedattack.target import Target
from fedattack.wire import Payload
from fedattack.targets.qffl import loss_from_uplink


class QFFLDecoded(Strategy):
    """The client's trained model from the scaled update, its loss solved from h."""

    name = "qffl-decoded"
    methods = ("qffl",)
    needs = frozenset({"up", "down"})
    replaces_generic = True
    rank = 0

    def unsupported(self, target: Target) -> str | None:
        up = set(target.wire_schema().uplink)
        if up != {f"delta.{n}" for n in target.param_names} | {"h"}:
            return f"{target.name}'s uplink is not q-FedAvg's (delta.<param>, h)"
        return None

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        assert obs.up is not None and obs.down is not None
        q, lip = float(target.hyper.q), 1.0 / float(target.recipe.lr)
        loss = solve_loss(obs.up, q, lip) if q > 0 else 1.0
        scale = lip * loss ** q
        params = {n: (obs.down[n].double() - obs.up[f"delta.{n}"].double() / scale).float()
                  for n in target.param_names}
        return Reconstructed(self.name, params, {"recovered_loss": loss, "q": q,
                                                 "source": f"round {obs.round}, both directions"})


def solve_loss(up: Payload, q: float, lip: float, iters: int = 200) -> float:
    """The root F of h = q s F^(-q-1) + L F^q below F*; a zero update leaves F = (h / L)^(1/q).

    The bisection itself is the target's (`targets.qffl.loss_from_uplink`): the method that
    defines the encoding owns its inverse."""
    s = sum(float((t.double() ** 2).sum()) for n, t in up.items() if n.startswith("delta."))
    if s == 0.0:
        return (float(up["h"].double().reshape(())) / lip) ** (1.0 / q)
    return loss_from_uplink(up, q, 1.0 / lip, iters)
