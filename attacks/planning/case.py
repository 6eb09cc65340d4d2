"""What planning derives for one victim under one threat model, and hands to execution as it is.

The planner needs the adversary's view (the rounds and uplinks it sees), the observation a
model is rebuilt from and the reconstruction strategies that apply, to cost each call; the
evaluation needs the same three to run it. They are derived once (`make_case`), from the
evaluation's one method (`Target`, built once from the run), and kept in the plan
(`Plan.cases`), so execution never derives them again.

Which observation depends on the model the threat model attacks (`ThreatModel.attacks`): the
victim's client model (its latest visible uplink, with that round's downlink), the broadcast
model (the latest model the server broadcast that the view holds) or the deployed model (an
upper bound's, with the observation of the wire beside it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fedattack.attacks.hidden_parts.base import Strategy, resolve
from fedattack.attacks.threat_models.base import BROADCAST_MODEL, RunFacts, ThreatModel
from fedattack.attacks.view import Observation, View
from fedattack.target import Target


@dataclass(frozen=True)
class Case:
    """One (threat model, victim): the view, the observation, the strategies that rebuild a model."""

    tm: ThreatModel
    victim: int
    view: View
    obs: Observation
    strategies: tuple[Strategy, ...]

    def seen(self) -> dict[str, Any]:
        """The round and parts the model is rebuilt from, as results record them."""
        return {"round": self.obs.round, "parts": sorted(self.obs.parts())}

    def unrebuilt(self, target: Target) -> str:
        """Why no strategy rebuilds a model here (the note of a not-applicable result)."""
        parts = ", ".join(sorted(self.obs.parts())) or "nothing"
        return (f"no reconstruction strategy rebuilds the {self.tm.attacks} of {target.name} from what the "
                f"{self.tm.name} observes ({parts} of round {self.obs.round})"
                + (f": {target.uplinks_hidden}" if target.uplinks_hidden else ""))


def make_case(fed: Any, target: Target, tm: ThreatModel, victim: int, facts: RunFacts, request: str) -> Case:
    """The case of `victim` under `tm`; `request` is the evaluation's `--reconstruction`."""
    view = tm.view(fed, victim, facts, method=target)
    obs = observe(view, tm)
    strategies = () if view.empty else tuple(resolve(request, target, obs.parts(), tm.attacks))
    return Case(tm, victim, view, obs, strategies)


def observe(view: View, tm: ThreatModel) -> Observation:
    """The observation the attacked model is rebuilt from (see the module docstring)."""
    if tm.attacks != BROADCAST_MODEL:
        return view.observation()
    broadcasts = [e for e in view.entries() if e["kind"] == "downlink"]
    if not broadcasts:
        return Observation(deployed=view.deployed)
    rnd = max(e["round"] for e in broadcasts)
    receivers = sorted(e["receiver"] for e in broadcasts if e["round"] == rnd)
    receiver = view.victim if view.victim in receivers else receivers[0]
    down = next(m.payload for m in view.messages(client=receiver, kind="downlink", rounds={rnd}))
    return Observation(round=rnd, down=down, deployed=view.deployed)
