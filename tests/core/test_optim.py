"""Local optimisers: Adam's functional step is torch.optim.Adam's, bit for bit, on one client;
a method that declares Adam trains the same under the batched and the sequential executor."""

from __future__ import annotations

import torch

from fedattack import optim
from fedattack.data import load_dataset
from fedattack.data.partition import make_partition
from fedattack.federation.executors import ClientJob, make_executor
from fedattack.federation.loop import client_data
from fedattack.federation.train import build_target
from fedattack.target import ClientContext, LocalData, Target
from fedattack.training import Batch, sequential_train, step_batches
from tests.conftest import tiny_spec


def _with_adam(target: Target, lr: float = 1e-3, prefix: str = "fc1") -> Target:
    """The same target, declaring Adam for parameters under `prefix`, SGD (the recipe's) elsewhere."""
    base = type(target)

    class WithAdam(base):  # type: ignore[valid-type, misc]
        def optimizer(self, name: str) -> optim.Optimizer:
            return optim.Adam(lr) if name.startswith(prefix) else optim.SGD(self.recipe.lr)

    target.__class__ = WithAdam
    return target


def _setting() -> tuple[Target, list[LocalData]]:
    dataset = load_dataset("digits")
    spec = tiny_spec(num_clients=4)
    partition = make_partition(spec.partition, dataset.y_train.numpy(), 4, 0, "digits")
    datas = [client_data(dataset, partition, k) for k in range(4)]
    for k, d in enumerate(datas):  # uneven step counts and short last batches
        d.x_train, d.y_train = d.x_train[:23 + 11 * k], d.y_train[:23 + 11 * k]
    return build_target(spec, dataset, 4), datas


def test_adam_step_equals_torch_adam_on_one_client() -> None:
    target, datas = _setting()
    target = _with_adam(target, lr=3e-3, prefix="")
    data, ctx = datas[1], ClientContext(2, 1, 5, sequential_train)
    start = target.init_server(torch.Generator().manual_seed(0))
    problem = target.start_local(start, {}, data)
    ours = sequential_train(target, problem, data, ctx)

    params = {k: v.clone().requires_grad_(True) for k, v in start.items()}
    adam = torch.optim.Adam(list(params.values()), lr=3e-3, foreach=False)
    recipe = target.recipe
    for step, idx in enumerate(step_batches(data.size, recipe.epochs, recipe.batch_size, 5, 2, 1)):
        batch = Batch(data.x_train[idx], data.y_train[idx], torch.full((len(idx),), 1.0 / len(idx)))
        loss = target.local_loss(params, problem.consts, batch, {}, torch.tensor(step))
        adam.zero_grad()
        loss.backward()
        adam.step()
    for k, v in params.items():
        assert torch.equal(ours[k], v.detach()), k
    assert not torch.equal(ours["fc1.weight"], start["fc1.weight"])


def test_adam_in_place_step_equals_the_functional_one_on_a_stack() -> None:
    gen = torch.Generator().manual_seed(0)
    p, grads = torch.randn(3, 4, 5, generator=gen), torch.randn(6, 3, 4, 5, generator=gen)
    opt = optim.Adam(0.01)
    stacked, states = p.clone(), optim.init_state(opt, p)
    singles = [p[c].clone() for c in range(3)]
    single_states = [optim.init_state(opt, s) for s in singles]
    for t in range(1, 7):
        optim.step_(opt, stacked, grads[t - 1].clone(), states, t)
        for c in range(3):
            singles[c] = optim.step(opt, singles[c], grads[t - 1, c], single_states[c], t)
    for c in range(3):
        assert torch.equal(stacked[c], singles[c])


def test_batched_executor_equals_sequential_for_a_method_with_adam() -> None:
    target, datas = _setting()
    target = _with_adam(target)
    start = target.init_server(torch.Generator().manual_seed(0))
    assert target.step_kernel(target.start_local(start, {}, datas[0])) is None  # not plain SGD
    jobs = [ClientJob(k, start, {}, d, ClientContext(1, k, 3, sequential_train))
            for k, d in enumerate(datas)]
    seq = make_executor("sequential").run(target, jobs)
    bat = make_executor("batched").run(target, jobs)
    for (a, _), (b, _) in zip(seq, bat):
        for k in a:
            torch.testing.assert_close(a[k], b[k], atol=1e-5, rtol=1e-4, msg=k)
    moved = (seq[0][0]["fc1.weight"] - start["fc1.weight"]).abs().max()
    assert 1e-3 < float(moved) < 0.5  # Adam's steps are about lr each
