"""Reconstruction: turning what the adversary observed into a model it can query.

A strategy is one class that registers itself by defining `name`. It never knows a method by
name: `unsupported(target)` reads what the method declares about its own wire, `target.decode`
(the client's parameters rebuilt from one round's messages) and `target.hidden()` (what the
client keeps: parameters, a factor selection, a personal model), and says why it cannot serve
that method, if it cannot. A new method that declares these is attackable with no edit here. A
strategy reads only an `Observation` and the adversary's auxiliary data; how it guessed is
recorded in the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.view import Knowledge, Observation
from fedattack.registry import Registry, UserError
from fedattack.rng import generator
from fedattack.target import State, Target

RECONSTRUCTIONS: Registry = Registry("reconstruction", "fedattack.attacks.hidden_parts")

# Which model a threat model attacks (`ThreatModel.attacks`), and so which strategies serve it.
CLIENT_MODEL = "client model"  # the victim's own model, rebuilt from what it sent
BROADCAST_MODEL = "broadcast model"  # the model the server broadcast
DEPLOYED_MODEL = "deployed model"  # the model the victim deploys (an upper bound's)
MODELS = (CLIENT_MODEL, BROADCAST_MODEL, DEPLOYED_MODEL)


@dataclass
class Reconstructed:
    """A queryable model: `params` for `target.forward`, how it was obtained, and the guesses.

    `guesses` holds the hidden parts the strategy guessed (e.g. `{layer}.b`); they are compared
    with the truth only after the attack, by the strategy's `score`.
    """

    strategy: str
    params: State
    details: dict[str, Any] = field(default_factory=dict)
    guesses: State = field(default_factory=dict)


class Strategy:
    """Base class of reconstruction strategies (see the module docstring)."""

    name: ClassVar[str] = ""
    needs: ClassVar[frozenset[str]] = frozenset()  # Observation parts it reads besides decode's
    needs_labels: ClassVar[bool] = False  # it fits on labelled auxiliary data (no labels: not applicable)
    rank: ClassVar[int] = 10  # `auto` picks the applicable strategy of lowest rank
    serves: ClassVar[frozenset[str]] = frozenset({CLIENT_MODEL})  # the attacked models it rebuilds

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            RECONSTRUCTIONS.add(cls.name, cls)

    def unsupported(self, target: Target) -> str | None:
        """Why this strategy cannot serve `target`'s wire (None: it can)."""
        return None

    def needed(self, target: Target) -> frozenset[str]:
        """The Observation parts this strategy reads for `target`: decode's and its own."""
        return self.needs | target.decode_needs

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        raise NotImplementedError

    def score(self, target: Target, rec: Reconstructed, true_private: State,
              true_deployed: State) -> dict[str, Any]:
        """Compare the guesses with the truth (called by the scorer only, after the attack)."""
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class WireOnly(Strategy):
    """No reconstruction: for an attack that reads the wire itself (no `name`: never chosen by
    `auto` or `all`, only handed to such an attack by the evaluation)."""

    def reconstruct(self, target: Target, obs: Observation, knowledge: Knowledge,
                    gen: torch.Generator) -> Reconstructed:
        return Reconstructed("wire", {}, {"source": "none: the attack reads the wire itself"})


def applicable(target: Target, parts: frozenset[str], attacks: str) -> list[Strategy]:
    """Strategies that rebuild `target`'s model of the kind a threat model `attacks` (one of
    `MODELS`) from observations with `parts`; a strategy serves only the kinds it declares."""
    out = []
    for cls in sorted((c for _, c in RECONSTRUCTIONS.items()), key=lambda c: (c.rank, c.name)):
        strategy = cls()
        if attacks not in strategy.serves or strategy.unsupported(target) is not None:
            continue
        if strategy.needed(target) <= parts:
            out.append(strategy)
    return out


def resolve(request: str, target: Target, parts: frozenset[str], attacks: str) -> list[Strategy]:
    """`auto` (the applicable strategy of lowest rank), `all` or `strongest` (every applicable:
    `strongest` then keeps the strongest, chosen honestly, `attacks.evaluation.selection`) or strategies
    by name.

    Returns [] when nothing applies (the caller reports "not applicable"); a strategy asked for
    by name that cannot apply here is the user's mistake and raises `UserError`.
    """
    usable = applicable(target, parts, attacks)
    if request == "auto":
        return usable[:1]
    if request in ("all", "strongest"):
        return usable
    names = [s.name for s in usable]
    for name in request.split(","):
        RECONSTRUCTIONS.get(name.strip())  # unknown names: one line listing the known ones
    chosen = [s for s in usable if s.name in {n.strip() for n in request.split(",")}]
    if not chosen:
        raise UserError(f"reconstruction {request!r} does not apply to {target.name} under this threat "
                        f"model; applicable: {', '.join(names) or 'none'} (or use auto / all)")
    return chosen


def decoded(target: Target, obs: Observation) -> State:
    """The client's parameters decoded from the observation by the method's own decoder."""
    assert obs.up is not None
    params = target.read_uplink(obs.down, obs.up)
    if params is None:
        raise ValueError(f"{target.name} cannot decode the messages of round {obs.round}")
    return params


def log_probs(target: Target, params: State, x: torch.Tensor, batch: int = 1024) -> torch.Tensor:
    """Log-softmax outputs of a reconstructed model, in batches, without gradients."""
    with torch.no_grad():
        outs = [target.forward(params, x[i:i + batch]).log_softmax(1) for i in range(0, len(x), batch)]
    return torch.cat(outs) if outs else torch.zeros(0, target.num_classes)


def aux_like_victim(knowledge: Knowledge, gen: torch.Generator) -> Samples:
    """Auxiliary samples with the victim's class mix (at most its size), for fitting guesses."""
    groups = knowledge.aux.by_class()
    picks = []
    for c, want in enumerate(knowledge.victim_class_counts):
        have = groups.get(c)
        if want and have is not None and len(have):
            order = torch.randperm(len(have), generator=gen)[:want].numpy()
            picks.append(have[order])
    if not picks:
        return knowledge.aux
    return knowledge.aux.take(np.concatenate(picks))


class Reconstructor:
    """One strategy bound to a method, the adversary's knowledge and a seed.

    The membership attack reconstructs its shadow models with the same object it used for the
    victim, so the attack classifier learns from models guessed the same way.
    """

    def __init__(self, strategy: Strategy, target: Target, knowledge: Knowledge, seed: int,
                 victim: int) -> None:
        self.strategy, self.target, self.knowledge = strategy, target, knowledge
        self.seed, self.victim = seed, victim

    def __call__(self, obs: Observation, key: int = 0) -> Reconstructed:
        gen = generator(self.seed, f"reconstruct:{self.strategy.name}", self.victim, key)
        return self.strategy.reconstruct(self.target, obs, self.knowledge, gen)

    def __repr__(self) -> str:
        return f"Reconstructor({self.strategy!r}, method={self.target.name!r})"
