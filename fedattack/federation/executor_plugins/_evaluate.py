"""Every client's local test accuracy, with alike deployed models evaluated together.

The round loop evaluates all clients after every round, which at 100 clients costs as much as
the training itself when done one forward call per client. Clients that deploy the very same
tensors (FedAvg: everyone deploys the global model) need one forward pass over their pooled
test sets; clients with different models of the same shapes (WAFFLe: a private factor
selection each) are stacked and run under `vmap`. Accuracy is then taken per client with
`fedattack.metrics.accuracy`, exactly as the sequential evaluation does.

The test sets do not change between rounds, so the inputs as the forward passes read them
(pooled or padded and stacked, and normalised where the target's forward is the plain one)
are built once and kept in an `InputCache` (one per executor); only the models change. The
arithmetic is the same as building them every round: normalisation is elementwise, so the
bits do not depend on when or on which rows it runs.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.func import functional_call, vmap

from fedattack.metrics import accuracy
from fedattack.target import LocalData, State, Target

ROWS_PER_CALL = 4096  # bounds activation memory (a CNN over 100 clients' test sets is large)
Forward = Callable[[State, torch.Tensor], torch.Tensor]


class InputCache:
    """Prepared test inputs of one evaluation, reused by the next one over the same tensors.

    Entries are keyed by the identity of the tensors they were built from and hold those
    tensors, so an id cannot be reused by another tensor while its entry lives; entries the
    latest evaluation did not use are dropped, so at most one evaluation's inputs are kept.
    """

    def __init__(self) -> None:
        self.entries: dict[tuple, tuple[tuple, torch.Tensor]] = {}
        self.used: dict[tuple, tuple[tuple, torch.Tensor]] = {}

    def get(self, layout: tuple, sources: tuple, build: Callable[[], torch.Tensor]) -> torch.Tensor:
        """The input built from `sources` (objects, compared by identity) laid out as `layout`
        (values, compared by equality)."""
        key = (layout, tuple(id(s) for s in sources))
        hit = self.entries.get(key) or self.used.get(key)
        if hit is None:
            hit = (sources, build())
        self.used[key] = hit
        return hit[1]

    def finish(self) -> None:
        """Keep only what this evaluation used."""
        self.entries, self.used = self.used, {}


def evaluate_clients(target: Target, deployed: list[State], datas: list[LocalData],
                     device: torch.device, cache: InputCache | None = None) -> list[float]:
    """Accuracy of client k's deployed model on its local test set, for every k."""
    cache = InputCache() if cache is None else cache
    models: dict[tuple, list[int]] = {}
    for k, state in enumerate(deployed):
        models.setdefault(tuple((n, id(t)) for n, t in state.items()), []).append(k)
    shapes: dict[tuple, list[list[int]]] = {}
    for clients in models.values():
        state = deployed[clients[0]]
        key = tuple((n, tuple(t.shape), t.dtype) for n, t in state.items())
        shapes.setdefault(key, []).append(clients)
    logits: dict[int, torch.Tensor] = {}
    for groups in shapes.values():
        if len(groups) == 1:
            logits.update(_shared_model(target, deployed[groups[0][0]], groups[0], datas, device, cache))
        else:
            logits.update(_stacked_models(target, deployed, groups, datas, device, cache))
    cache.finish()
    return [accuracy(logits[k], datas[k].y_test) for k in range(len(datas))]


def _forward(target: Target) -> tuple[Forward, Callable[[torch.Tensor], torch.Tensor]]:
    """The forward pass on prepared inputs, and the preparation: where the forward is the model
    on normalised inputs (`Target.plain_forward`), the normalisation moves into the (cached)
    preparation; a target with its own forward gets its raw inputs."""
    if target.plain_forward:
        def on_normalized(params: State, x: torch.Tensor) -> torch.Tensor:
            return functional_call(target.model, params, (x,))
        return on_normalized, target.normalized
    return target.forward, lambda x: x


def _shared_model(target: Target, state: State, clients: list[int], datas: list[LocalData],
                  device: torch.device, cache: InputCache) -> dict[int, torch.Tensor]:
    """One model, many clients: forward over the pooled test sets in chunks, then split."""
    forward, prepare = _forward(target)
    params = {n: t.to(device) for n, t in state.items()}
    tests = tuple(datas[k].x_test for k in clients)
    x = cache.get((str(device),), (target, *tests), lambda: prepare(torch.cat(tests).to(device)))
    out = torch.cat([forward(params, chunk).cpu() for chunk in x.split(ROWS_PER_CALL)]) if len(x) else None
    sizes = [len(t) for t in tests]
    parts = out.split(sizes) if out is not None else [torch.zeros(0)] * len(clients)
    return dict(zip(clients, parts))


def _stacked_models(target: Target, deployed: list[State], groups: list[list[int]],
                    datas: list[LocalData], device: torch.device,
                    cache: InputCache) -> dict[int, torch.Tensor]:
    """Same-shaped models: vmap the forward pass over models, each on its padded test rows."""
    out = {k: torch.zeros(0) for g in groups for k in g if not _rows(datas, g)}
    groups = [g for g in groups if _rows(datas, g)]
    if not groups:
        return out
    forward, prepare = _forward(target)
    width = max(_rows(datas, g) for g in groups)
    per_call = max(1, ROWS_PER_CALL // width)
    batched = vmap(forward)
    for start in range(0, len(groups), per_call):
        chunk = groups[start:start + per_call]
        params = {n: torch.stack([deployed[g[0]][n] for g in chunk]).to(device)
                  for n in deployed[chunk[0][0]]}
        tests = tuple(datas[k].x_test for g in chunk for k in g)
        x = cache.get((str(device), width, *[len(g) for g in chunk]), (target, *tests),
                      _padded_builder(datas, chunk, width, device, prepare))
        logits = batched(params, x).cpu()
        for g, lg in zip(chunk, logits):
            sizes = [len(datas[k].x_test) for k in g]
            out.update(zip(g, lg[:sum(sizes)].split(sizes)))
    return out


def _padded_builder(datas: list[LocalData], chunk: list[list[int]], width: int, device: torch.device,
                    prepare: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], torch.Tensor]:
    return lambda: prepare(_padded(datas, chunk, width).to(device))


def _padded(datas: list[LocalData], chunk: list[list[int]], width: int) -> torch.Tensor:
    """(models, width, ...) test rows: each model's clients pooled, padded to `width`."""
    return torch.stack([_pad(torch.cat([datas[k].x_test for k in g]), width) for g in chunk])


def _rows(datas: list[LocalData], clients: list[int]) -> int:
    return sum(len(datas[k].x_test) for k in clients)


def _pad(x: torch.Tensor, width: int) -> torch.Tensor:
    """Repeat the first row up to `width` rows (padding is computed on, then cut off)."""
    if len(x) == width:
        return x
    return torch.cat([x, x[:1].expand(width - len(x), *x.shape[1:])])
