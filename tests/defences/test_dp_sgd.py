"""DP-SGD on the clients: per-sample gradients equal autograd's, each sample's pull is clipped,
the noise has the stated scale, models that mix samples are refused in one line, and the
accountant's epsilon moves the right way."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedattack.defences import make_target
from fedattack.defences.dp_sgd import DPSGD, DPSGDSettings
from fedattack.registry import UserError
from fedattack.target import ClientContext, TargetContext
from fedattack.training import Batch, local_gradients, sequential_train
from tests.defences._federate import federate

CTX = TargetContext(model="digits-mlp", input_shape=(1, 8, 8), num_classes=10, num_clients=4, rounds=2)


def _step(clip: float, sigma: float, size: int = 16, step: int = 0):  # type: ignore[no-untyped-def]
    target = make_target("fedavg", {}, CTX, [{"name": "dp-sgd", "settings": {"clip_norm": clip,
                                                                          "noise_multiplier": sigma}}])
    gen = torch.Generator().manual_seed(0)
    params = {k: v.requires_grad_(True) for k, v in target.init_server(gen).items()}
    batch = Batch(torch.rand(size, 1, 8, 8, generator=gen), torch.randint(0, 10, (size,), generator=gen),
                  torch.full((size,), 1 / size))
    ctx = ClientContext(1, 0, 0, sequential_train)
    grads = local_gradients(target, params, {}, batch, {}, torch.tensor(step), ctx)
    return target, params, batch, dict(zip(params, grads))


def test_without_clipping_or_noise_the_gradient_is_the_batch_mean() -> None:
    target, params, batch, grads = _step(clip=1e9, sigma=0.0)
    loss = target.local_loss(params, {}, batch, {}, torch.tensor(0))
    plain = dict(zip(params, torch.autograd.grad(loss, list(params.values()))))
    for n in params:
        torch.testing.assert_close(grads[n], plain[n], atol=1e-6, rtol=1e-5)


def test_each_sample_is_clipped_on_its_own_before_the_mean() -> None:
    target, params, batch, grads = _step(clip=0.01, sigma=0.0)
    expected = {n: torch.zeros_like(p) for n, p in params.items()}
    for i in range(len(batch.y)):  # one sample at a time, by autograd, scaled to norm 0.01
        one = Batch(batch.x[i:i + 1], batch.y[i:i + 1], torch.ones(1))
        g = torch.autograd.grad(target.local_loss(params, {}, one, {}, torch.tensor(0)), list(params.values()))
        norm = torch.sqrt(sum((t ** 2).sum() for t in g))
        for n, t in zip(params, g):
            expected[n] += t * min(1.0, 0.01 / float(norm)) / len(batch.y)
    for n in params:
        torch.testing.assert_close(grads[n], expected[n], atol=1e-8, rtol=1e-4)


def test_the_noise_std_is_sigma_clip_over_batch() -> None:
    _, _, _, grads = _step(clip=1e-6, sigma=2.0, size=10)  # clipped signal ~0: noise only
    flat = torch.cat([g.flatten() for g in grads.values()])
    assert abs(float(flat.std()) / (2.0 * 1e-6 / 10) - 1) < 0.05
    _, _, _, again = _step(clip=1e-6, sigma=2.0, size=10)
    assert all(torch.equal(grads[n], again[n]) for n in grads)  # keyed noise: reproducible
    _, _, _, later = _step(clip=1e-6, sigma=2.0, size=10, step=1)
    assert not any(torch.equal(grads[n], later[n]) for n in grads)  # fresh noise every step


def test_a_model_that_mixes_samples_is_refused_in_one_line() -> None:
    target = make_target("fedavg", {}, CTX)
    target.model = nn.Sequential(nn.Flatten(), nn.Linear(64, 10), nn.BatchNorm1d(10))
    with pytest.raises(UserError, match=r"layer 2 \(BatchNorm1d\)") as err:
        DPSGD(DPSGDSettings(), CTX).bind(target)
    assert "\n" not in str(err.value)


def test_the_federation_is_accounted_from_what_its_clients_did() -> None:
    entry = [{"name": "dp-sgd", "settings": {"noise_multiplier": 1.0}}]
    target, _, _ = federate("fedavg", entry)
    acc = target.defences[0].accounting()  # type: ignore[attr-defined]
    assert acc["level"] == "sample" and acc["epsilon"] is not None and acc["worst_client"]["rounds"] >= 1
    assert target.trains_in_stacks is False  # trained client by client, through the sequential loop's hook
    more = DPSGD(DPSGDSettings(noise_multiplier=2.0), target.ctx)
    more.trained = dict(target.defences[0].trained)  # type: ignore[attr-defined]
    assert more.accounting()["epsilon"] < acc["epsilon"]
