"""Every client's local test accuracy, with alike deployed models evaluated together.

The round loop evaluates all clients after every round, which at 100 clients costs as much as
the training itself when done one forward call per client. Clients that deploy the very same
tensors (FedAvg: everyone deploys the global model) need one forward pass over their pooled
test sets; clients with different models of the same shapes (WAFFLe: a private factor
selection each) are stacked and run under `vmap`. Accuracy is then taken per client with
`fedattack.metrics.accuracy`, exactly as the sequential evaluation does.
"""

from __future__ import annotations

import torch
from torch.func import vmap

from fedattack.metrics import accuracy
from fedattack.target import LocalData, State, Target

ROWS_PER_CALL = 4096  # bounds activation memory (a CNN over 100 clients' test sets is large)


def evaluate_clients(target: Target, deployed: list[State], datas: list[LocalData],
                     device: torch.device) -> list[float]:
    """Accuracy of client k's deployed model on its local test set, for every k."""
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
            logits.update(_shared_model(target, deployed[groups[0][0]], groups[0], datas, device))
        else:
            logits.update(_stacked_models(target, deployed, groups, datas, device))
    return [accuracy(logits[k], datas[k].y_test) for k in range(len(datas))]


def _shared_model(target: Target, state: State, clients: list[int], datas: list[LocalData],
                  device: torch.device) -> dict[int, torch.Tensor]:
    """One model, many clients: forward over the pooled test sets in chunks, then split."""
    params = {n: t.to(device) for n, t in state.items()}
    x = torch.cat([datas[k].x_test for k in clients])
    out = torch.cat([target.forward(params, chunk.to(device)).cpu()
                     for chunk in x.split(ROWS_PER_CALL)]) if len(x) else None
    sizes = [len(datas[k].x_test) for k in clients]
    parts = out.split(sizes) if out is not None else [torch.zeros(0)] * len(clients)
    return dict(zip(clients, parts))


def _stacked_models(target: Target, deployed: list[State], groups: list[list[int]],
                    datas: list[LocalData], device: torch.device) -> dict[int, torch.Tensor]:
    """Same-shaped models: vmap the forward pass over models, each on its padded test rows."""
    out = {k: torch.zeros(0) for g in groups for k in g if not _rows(datas, g)}
    groups = [g for g in groups if _rows(datas, g)]
    if not groups:
        return out
    width = max(_rows(datas, g) for g in groups)
    per_call = max(1, ROWS_PER_CALL // width)
    forward = vmap(target.forward)
    for start in range(0, len(groups), per_call):
        chunk = groups[start:start + per_call]
        params = {n: torch.stack([deployed[g[0]][n] for g in chunk]).to(device)
                  for n in deployed[chunk[0][0]]}
        xs = [torch.cat([datas[k].x_test for k in g]) for g in chunk]
        x = torch.stack([_pad(t, width) for t in xs]).to(device)
        logits = forward(params, x).cpu()
        for g, lg in zip(chunk, logits):
            sizes = [len(datas[k].x_test) for k in g]
            out.update(zip(g, lg[:sum(sizes)].split(sizes)))
    return out


def _rows(datas: list[LocalData], clients: list[int]) -> int:
    return sum(len(datas[k].x_test) for k in clients)


def _pad(x: torch.Tensor, width: int) -> torch.Tensor:
    """Repeat the first row up to `width` rows (padding is computed on, then cut off)."""
    if len(x) == width:
        return x
    return torch.cat([x, x[:1].expand(width - len(x), *x.shape[1:])])
