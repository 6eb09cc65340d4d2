"""Model inversion's stacked step (issue #47): one backward over every victim's vmapped forward.

`invert_many` used `vmap(grad(cost))`; it now differentiates `vmap(forward)` once, which spares
functorch's per-call wrapping. Held here, bit for bit, to the previous formulation (the step's
gradients and costs) for every registered model and every registered method (on the digits
model); `test_inversion_batched` holds `invert_many` to `invert`, one victim at a time.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch.func import grad, vmap

from fedattack.attacks.model_inversion.inversion import _stacked_step
from fedattack.federation.train import build_target
from fedattack.registry import MODELS, TARGETS, UserError
from fedattack.rng import generator
from fedattack.target import Recipe, State, Target
from tests.conftest import tiny_spec
from tests.core.test_executor_conformance import dataset_for

VICTIMS = 3


def settings() -> Iterator[tuple[str, str]]:
    """(method, model): every model under FedAvg, every method on the digits MLP."""
    yield from (("fedavg", m) for m in MODELS.names())
    yield from ((t, "digits-mlp") for t in TARGETS.names() if t != "fedavg")


def victims(method: str, model: str) -> tuple[Target, list[State], list[torch.Tensor]]:
    dataset = dataset_for(model)
    try:
        target = build_target(tiny_spec(method=method, model=model, num_clients=3,
                                        recipe=Recipe(epochs=1, batch_size=8, lr=0.05)), dataset, 3)
    except UserError as exc:
        pytest.skip(f"{method} on {model}: {exc}")
    params = []
    for seed in range(VICTIMS):
        server = target.init_server(generator(seed, "init"))
        state = target.deployed(server, target.init_private(0, server, generator(seed, "private")))
        params.append({k: v.detach().float() for k, v in state.items() if v.is_floating_point()})
    shape = (target.num_classes, *target.ctx.input_shape)
    starts = [torch.rand(shape, generator=torch.Generator().manual_seed(v)) for v in range(VICTIMS)]
    return target, params, starts


def previous_step(target: Target, loss: str):  # type: ignore[no-untyped-def]
    """The step as `invert_many` took it before: `vmap(grad(...))`."""
    def costs(p: State, xv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logp = target.forward(p, xv).log_softmax(1).diagonal()
        cost = 1.0 - logp.exp() if loss == "fredrikson" else -logp
        return cost.sum(), cost
    return vmap(grad(costs, argnums=1, has_aux=True))


@pytest.mark.parametrize("method, model", list(settings()))
@pytest.mark.parametrize("loss", ["fredrikson", "ce"])
def test_the_stacked_step_is_the_previous_one(method: str, model: str, loss: str) -> None:
    target, params, starts = victims(method, model)
    stacked = {k: torch.stack([p[k] for p in params]) for k in params[0]}
    x = torch.stack(starts)
    try:
        g_old, c_old = previous_step(target, loss)(stacked, x)
    except (RuntimeError, ValueError, TypeError) as exc:  # not vmappable: invert_many never held it
        pytest.skip(f"{method} on {model}: {exc}")
    g_new, c_new = _stacked_step(target, target.num_classes, loss == "fredrikson")(stacked, x)
    assert torch.equal(c_new, c_old), f"{method} on {model}: costs differ"
    assert torch.equal(g_new, g_old), f"{method} on {model}: gradients differ by {(g_new - g_old).abs().max()}"
    assert g_new.abs().sum() > 0
