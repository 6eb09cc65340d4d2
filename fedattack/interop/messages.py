"""Checks on each recorded message, before anything of it is kept.

The wire schema of a recorded run is inferred from its first downlink and first uplink; it
must be the declared method's schema for the declared model (otherwise fedattack's rebuilt
model would not be the one that was trained), and every later message must match it exactly
(a shape that changes mid-run means the recording mixes models). Model buffers that are not
parameters (batch-norm statistics, counters) are left off the wire: fedattack's methods send
parameters, and the manifest lists what was left off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from fedattack.registry import UserError
from fedattack.target import Target

State = dict[str, torch.Tensor]


class WireCheck:
    """What a recorded message must be: a known round order, a known client, the declared wire."""

    def __init__(self, target: Target, num_clients: int) -> None:
        self.target, self.num_clients = target, num_clients
        schema = target.wire_schema()
        self.declared = {"downlink": dict(schema.downlink), "uplink": dict(schema.uplink)}
        self.inferred: dict[str, dict[str, tuple[int, ...]]] = {}
        self.buffers = {n for n, _ in target.model.named_buffers()}
        self.dtype = next(iter(target.model.parameters())).dtype
        self.left_off: set[str] = set()

    def round_and_client(self, rnd: Any, client: Any, current: int | None) -> None:
        if not _is_int(rnd) or rnd < 1:
            raise UserError(f"round {rnd!r} is not a round number (1, 2, ...)")
        if current is not None and rnd < current:
            raise UserError(f"round {rnd} arrives after round {current} was recorded; record rounds in order")
        if not _is_int(client) or not 0 <= client < self.num_clients:
            raise UserError(f"round {rnd}: client {client!r} is not in the partition "
                            f"(clients 0..{self.num_clients - 1})")

    def payload(self, kind: str, tensors: Mapping[str, Any], rnd: int, client: int) -> State:
        """The message's tensors as recorded: the declared names, float, shapes as before."""
        where = f"round {rnd}, client {client}'s {kind}"
        first = self.inferred.get(kind, {})
        for name, value in (tensors.items() if isinstance(tensors, Mapping) else ()):
            shape = tuple(np.shape(value))
            if name in first and shape != first[name]:
                raise UserError(f"{where}: {name!r} changes shape from {list(first[name])} in earlier "
                                f"messages to {list(shape)}; a recording holds one model")
        payload = self._named(tensors, self.declared[kind], where)
        self.inferred.setdefault(kind, {n: tuple(t.shape) for n, t in payload.items()})
        return payload

    def params(self, state: Mapping[str, Any], what: str) -> State:
        return self._named(state, self.target.param_shapes(), what)

    def _named(self, tensors: Mapping[str, Any], declared: Mapping[str, tuple[int, ...]], where: str) -> State:
        if not isinstance(tensors, Mapping):
            raise UserError(f"{where} is a {type(tensors).__name__}, not a dict of named tensors (a state_dict)")
        out: State = {}
        for name, value in tensors.items():
            if name in declared:
                out[name] = self._tensor(value, name, declared[name], where)
            elif name in self.buffers or _integer(value):
                self.left_off.add(str(name))
            else:
                raise UserError(f"{where} carries {name!r}, which model {self.target.ctx.model} does not "
                                f"have; is it the model you declared?")
        missing = [n for n in declared if n not in out]
        if missing:
            raise UserError(f"{where} lacks {missing[0]!r} of model {self.target.ctx.model} "
                            f"({len(missing)} tensor(s) missing)")
        return out

    def _tensor(self, value: Any, name: str, shape: tuple[int, ...], where: str) -> torch.Tensor:
        t = torch.as_tensor(np.asarray(value) if not isinstance(value, torch.Tensor) else value)
        if tuple(t.shape) != tuple(shape):
            raise UserError(f"{where}: {name!r} has shape {list(t.shape)}, model {self.target.ctx.model}'s "
                            f"is {list(shape)}; is it the model you declared?")
        if not t.is_floating_point():
            raise UserError(f"{where}: {name!r} is {t.dtype}, not a floating-point tensor")
        if not bool(torch.isfinite(t).all()):
            raise UserError(f"{where}: {name!r} holds NaN or infinite values; no method sends "
                            "those (the federation diverged: train it with a smaller learning rate)")
        return t.detach().to("cpu", self.dtype).clone()


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _integer(value: Any) -> bool:
    t = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
    return not t.is_floating_point()
