"""A plugin attack that cheats (issue #43): it looks, through everything `run` is handed, for what
its threat model does not see, and reports what it found as its guess.

It walks every object reachable from its `Adversary` (attributes, containers, closures, bound
methods' objects; not modules, classes or a function's globals, which reach everything in the
process and are not what an attack is handed) and collects the paths, strings, integers and
tensors it meets; it tries the attributes a sloppy plugin would (a transcript reader's folder,
the method's seed); and it reads the victim's size and class counts from its knowledge. Beside
it, a threat model that observes the victim's channel and grants nothing.
"""

from __future__ import annotations

import gc
import types
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import torch

from fedattack.attacks.base import Adversary, Attack, Scored
from fedattack.attacks.threat_models.base import RunFacts, ThreatModel
from fedattack.attacks.view import Channel

SKIP = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.CodeType, types.FrameType)
REACH_LIMIT = 500_000


@dataclass
class Found:
    """Everything `run` could reach: strings (paths included), integers, tensors; and its guesses."""

    strings: set[str]
    ints: set[int]
    tensors: list[torch.Tensor]
    seed: Any
    folder: Any
    victim_size: Any
    class_counts: list[int]
    granted: list[str]
    other_clients: set[int]


def reachable(root: object) -> list[object]:
    """Every object reachable from `root` as an attack could walk to it (see the module docstring)."""
    seen: dict[int, object] = {}
    stack: list[object] = [root]
    while stack and len(seen) < REACH_LIMIT:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, SKIP):
            continue
        seen[id(obj)] = obj
        if isinstance(obj, torch.Tensor):
            continue  # its data is what is compared; its referents are torch's
        if isinstance(obj, types.FunctionType):
            stack.extend(c.cell_contents for c in obj.__closure__ or () if _filled(c))
            continue
        stack.extend(gc.get_referents(obj))
        if isinstance(obj, types.MethodType):
            stack.append(obj.__self__)
    return list(seen.values())


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


class Cheat(Attack):
    """Looks for private state, the partition, the run's seed and the run directory in its inputs."""

    name = "test-cheat"
    reads_wire = True  # the wire itself: no model to rebuild (so secure aggregation does not stop it)

    def run(self, adv: Adversary, gen: torch.Generator) -> Found:
        objects = reachable(adv)
        strings = {str(o) for o in objects if isinstance(o, (str, PurePath))}
        ints = {o for o in objects if isinstance(o, int) and not isinstance(o, bool)}
        tensors = [o for o in objects if isinstance(o, torch.Tensor)]
        reader = getattr(adv.view, "reader", None)  # where the View used to keep the transcript's reader
        others = {m.client for m in adv.view.messages()} - {adv.view.victim}
        know, seed = adv.knowledge, getattr(adv.view.target.ctx, "seed", None)
        return Found(strings, ints, tensors, seed, getattr(reader, "folder", None), know.victim_size,
                     list(know.victim_class_counts), list(know.granted), others)

    def score(self, guesses: Found, truth: Any) -> Scored:
        FOUND[truth.victim] = guesses
        return Scored()


FOUND: dict[int, Found] = {}  # what each victim's call found, for the test to read


class Tap(ThreatModel):
    """The victim's channel, both directions, and nothing granted besides."""

    name = "test-tap"
    observes = "the victim's channel, both directions; no assumption about the victim granted"

    def channels(self, victim: int, facts: RunFacts) -> list[Channel]:
        return [Channel(victim, "downlink"), Channel(victim, "uplink")]
