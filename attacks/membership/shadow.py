"""Shadow models (Shokri et al. 2017): clients the adversary trains itself, like the victim.

Each shadow is a "client" of the attacked method holding auxiliary data with the victim's size
and class mix, started from the downlink the victim started from (or, with no downlink in the
view, from a fresh initialisation) and trained with the method's own `client_update` through
the executor API, so a faster executor trains them faster. What comes out has the shape of an
`Observation`, so the adversary rebuilds each shadow exactly as it rebuilt the victim.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from fedattack import progress
from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.view import Observation
from fedattack.federation.executors import ClientJob, make_executor
from fedattack.rng import derive_seed, generator, numpy_rng
from fedattack.target import ClientContext, LocalData, State, Target
from fedattack.wire import SERVER, Message, Payload

if TYPE_CHECKING:
    from fedattack.attacks.base import Adversary


@dataclass(frozen=True)
class ShadowData:
    """A shadow's training records ("in") and same-class records it never saw ("out")."""

    trained: Samples
    held_out: Samples


@dataclass(frozen=True)
class Shadow:
    data: ShadowData
    obs: Observation


def shadow_splits(aux: Samples, class_counts: list[int], count: int, in_fraction: float,
                  seed: int) -> list[ShadowData]:
    """Per shadow and class c: min(victim's count, in_fraction of aux's class c) in, the rest out.

    Shadows draw independently, so their data overlap (as in Shokri et al.); within one shadow,
    in and out are disjoint.
    """
    groups = aux.by_class()
    splits = []
    for j in range(count):
        rng = numpy_rng(seed, "shadow-split", j)
        ins, outs = [], []
        for c, want in enumerate(class_counts):
            have = groups.get(c)
            if not want or have is None or len(have) < 2:
                continue
            order = rng.permutation(have)
            k = max(1, min(want, int(in_fraction * len(have))))
            ins.append(order[:k])
            outs.append(order[k:])
        ins_idx = np.concatenate(ins) if ins else np.zeros(0, np.int64)
        outs_idx = np.concatenate(outs) if outs else np.zeros(0, np.int64)
        splits.append(ShadowData(aux.take(rng.permutation(ins_idx)), aux.take(outs_idx)))
    return splits


class ShadowModels:
    """Trains shadow clients of `target` through the named executor."""

    def __init__(self, target: Target, executor: str, seed: int, victim: int) -> None:
        self.target, self.executor_name = target, executor
        self.seed, self.victim = seed, victim

    def train(self, start: Observation, datas: list[ShadowData], solo_deployed: bool, first: int = 0) -> list[Shadow]:
        """Shadows `first`, `first + 1`, ... trained on `datas` (each shadow's draws are keyed by
        its number, so training them in several calls gives the same shadows)."""
        executor = make_executor(self.executor_name)
        trainer = executor.trainer
        rnd = start.round or 0
        jobs, servers = [], []
        for j, data in enumerate(datas, start=first):
            server, down = self._start(start, j)
            gen = generator(self.seed, "shadow-private", self.victim, j)
            private = self.target.init_private(self.victim, server, gen)
            ctx = ClientContext(rnd, self.victim, derive_seed(self.seed, "shadow", self.victim, j), trainer)
            local = LocalData(data.trained.x, data.trained.y, data.trained.x[:0], data.trained.y[:0])
            jobs.append(ClientJob(self.victim, down, private, local, ctx))
            servers.append(server)
        results = executor.run(self.target, jobs)
        shadows = []
        for data, job, server, (up, private) in zip(datas, jobs, servers, results):
            deployed = (deployed_alone(self.target, server, up, private, len(data.trained), rnd,
                                      self.victim) if solo_deployed else None)
            shadows.append(Shadow(data, Observation(start.round, job.down, up, deployed)))
        return shadows

    def _start(self, start: Observation, j: int) -> tuple[State, Payload]:
        if start.down is not None:
            return dict(start.down), dict(start.down)
        server = self.target.init_server(generator(self.seed, "shadow-init", self.victim, j))
        return server, self.target.broadcast(server, self.victim, start.round or 0)


def train_shadows(adv: Adversary, seed: int, datas: list[ShadowData], solo_deployed: bool) -> list[Shadow]:
    """Shadow clients of the victim trained on `datas`, or the same set trained before for this
    victim: the upper bound runs each attack once per model the victim held and `all` once per
    reconstruction strategy, and neither changes what a shadow trains from (the downlink, the
    data, the seed), so training again would only repeat the same bytes."""
    key = (seed, solo_deployed, adv.executor, adv.view.victim, adv.obs.round,
           fingerprint([adv.obs.down or {}] + [{"x": d.trained.x, "y": d.trained.y} for d in datas]))
    if key not in adv.trained:
        trainer = ShadowModels(adv.view.target, adv.executor, seed, adv.view.victim)
        # one executor call per chunk of models: one at a time on the sequential executor (which
        # trains them one at a time anyway, so the progress bar counts models), all at once on
        # a stacking one unless the planner's chunk says fewer
        size = adv.chunk or (1 if adv.executor == "sequential" else len(datas))
        parts = [range(i, min(i + size, len(datas))) for i in range(0, len(datas), size)]
        found: list[Observation] = []
        for part in progress.steps(parts, f"shadow and reference models ({size} at a time)"):
            found += [sh.obs for sh in trainer.train(adv.obs, [datas[j] for j in part], solo_deployed, part.start)]
        adv.trained[key] = found
    return [Shadow(data, obs) for data, obs in zip(datas, adv.trained[key])]


def fingerprint(states: list[dict[str, torch.Tensor]]) -> str:
    """A digest of tensors' names, shapes, types and bytes (equal digests: equal training inputs)."""
    digest = hashlib.blake2b(digest_size=16)
    for state in states:
        for name in sorted(state):
            t = state[name].detach().cpu()
            digest.update(f"{name}{tuple(t.shape)}{t.dtype};".encode())
            digest.update(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        digest.update(b"|")
    return digest.hexdigest()


def deployed_alone(target: Target, server: State, up: Payload, private: State, n: int, rnd: int,
                  client: int = 0) -> State:
    """What a client would deploy had it been the round's only client: its local model after
    training, private parts included (the server state is the round's downlink)."""
    try:
        msg = Message(rnd, client, SERVER, "uplink", up, samples=n)
        merged = target.server_step(server, [msg], rnd) if up else server
    except (KeyError, IndexError, ValueError, RuntimeError):
        merged = {**server, **up}
    return target.deployed(merged, private)
