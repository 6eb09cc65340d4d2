"""The batched executor's own paths against the sequential one: the vmap path where a kernel
would apply, clients split into groups, chunks in threads, jobs outside a federation, the plan.

Every registered model x method x executor is held to the sequential reference by
tests/core/test_conformance.py; these are the paths a default federation does not take.
Clients get deliberately uneven amounts of data (different step counts and short last
batches), so the masking and padding paths are exercised, not just the equal-size case.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

import pytest
import torch

from fedattack.data import load_dataset
from fedattack.data.partition import make_partition
from fedattack.federation.executor_plugins._stacked import bulk_draws_match, draw_steps, step_grid
from fedattack.federation.executor_plugins.batched import BatchedExecutor
from fedattack.federation.executors import ClientJob, make_executor
from fedattack.federation.loop import client_data
from fedattack.federation.train import build_target
from fedattack.target import ClientContext, Recipe, Target
from fedattack.training import draw_noise, epoch_orders, sequential_train, step_batches
from tests.conftest import run_rounds, tiny_spec

SPEC = tiny_spec(num_clients=4, fraction=1.0, rounds=2, recipe=Recipe(epochs=2, batch_size=8, lr=0.1))
ATOL = 1e-5


@lru_cache(maxsize=1)
def _setting():  # type: ignore[no-untyped-def]
    dataset = load_dataset("digits")
    partition = make_partition(SPEC.partition, dataset.y_train.numpy(), SPEC.num_clients,
                               SPEC.seed, SPEC.dataset, **SPEC.partition_options)
    return dataset, partition


def _federate(method: str, executor: str, fast: bool = True,  # type: ignore[no-untyped-def]
              group_size: int | None = None):
    dataset, partition = _setting()
    spec = dataclasses.replace(SPEC, method=method, executor=executor)
    target = build_target(spec, dataset, partition.num_clients)
    datas = [client_data(dataset, partition, k) for k in range(partition.num_clients)]
    for k, d in enumerate(datas):  # 21, 36, 51, 66 samples: 3 to 9 steps, all with a short batch
        d.x_train, d.y_train = d.x_train[:21 + 15 * k], d.y_train[:21 + 15 * k]
    runner = BatchedExecutor(fast=fast, group_size=group_size) if executor == "batched" \
        else make_executor(executor)
    loop, state, messages = run_rounds(spec, target, datas, runner)
    return target, state, messages, loop.evaluate(state)


def _close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], exact: bool) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if exact:
            assert torch.equal(a[k], b[k]), k
        else:
            torch.testing.assert_close(a[k], b[k], atol=ATOL, rtol=1e-4, msg=k)


def test_vmap_path_matches_sequential_where_the_mlp_fast_path_would_apply() -> None:
    target, _, _, _ = _federate("fedavg", "sequential")
    problem = target.start_local(target.init_server(torch.Generator().manual_seed(0)), {},
                                 client_data(*_setting(), 0))
    kernel = target.step_kernel(problem)
    assert kernel is not None and kernel.label == "dense"  # so the kernel is what fedavg tests
    _check_against_sequential("fedavg", fast=False)


def test_fedprox_takes_the_mlp_fast_path_with_its_pull() -> None:
    """FedProx (mu = 1, the pull lr * mu = 0.1 a step) through the hand-written step, not vmap:
    `test_batched_matches_sequential` then holds its proximal term to the sequential loop."""
    target, _, _, _ = _federate("fedprox", "sequential")
    problem = target.start_local(target.init_server(torch.Generator().manual_seed(0)), {},
                                 client_data(*_setting(), 0))
    kernel = target.step_kernel(problem)
    assert kernel is not None and kernel.label == "dense" and target.local_objective().proximal == 1.0


@pytest.mark.parametrize("method", ["fedavg", "fedprox"])
def test_clients_split_into_groups_match_sequential(method: str) -> None:
    """Groups of 3 out of 4 clients: one stacked group and one lone client, fast path or vmap."""
    _check_against_sequential(method, fast=True, group_size=3)


def test_chunks_trained_side_by_side_equal_chunks_trained_in_turn() -> None:
    """With two torch threads the MLP chunks train in two Python threads, one torch thread each;
    that must change the speed only, not a bit of the federation."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        _, one, one_msgs, _ = _federate("fedavg", "batched", group_size=2)
        torch.set_num_threads(2)
        _, two, two_msgs, _ = _federate("fedavg", "batched", group_size=2)
        assert torch.get_num_threads() == 2  # restored after the threaded section
    finally:
        torch.set_num_threads(before)
    _close(one.server, two.server, exact=True)
    for m, n in zip(one_msgs, two_msgs):
        _close(m.payload, n.payload, exact=True)


def _check_against_sequential(method: str, fast: bool, group_size: int | None = None) -> None:
    target, seq, seq_msgs, seq_acc = _federate(method, "sequential")
    _, bat, bat_msgs, bat_acc = _federate(method, "batched", fast, group_size)
    exact = not target.batchable  # a target that cannot batch falls back to the reference
    _close(seq.server, bat.server, exact)
    for p, q in zip(seq.private, bat.private):
        _close(p, q, exact)
    assert [(m.round, m.sender, m.receiver, m.kind) for m in seq_msgs] == \
        [(m.round, m.sender, m.receiver, m.kind) for m in bat_msgs]
    for m, n in zip(seq_msgs, bat_msgs):
        _close(m.payload, n.payload, exact)
    assert sum(abs(x - y) > 0.02 for x, y in zip(seq_acc, bat_acc)) <= 1  # near-ties may flip


def test_uplinks_do_not_share_storage_with_other_clients() -> None:
    """A view into the stacked tensor would save every client's weights in one client's file."""
    _, _, messages, _ = _federate("fedavg", "batched")
    for m in messages:
        if m.kind == "uplink":
            for t in m.payload.values():
                assert t.untyped_storage().nbytes() == t.numel() * t.element_size()


def test_jobs_outside_a_federation_train_like_the_sequential_loop() -> None:
    """What an attack's shadow and reference models go through: ClientJobs, equal to sequential_train."""
    dataset, partition = _setting()
    target = build_target(SPEC, dataset, partition.num_clients)
    datas = [client_data(dataset, partition, k) for k in range(3)]
    for k, d in enumerate(datas):
        d.x_train, d.y_train = d.x_train[:30 + 9 * k], d.y_train[:30 + 9 * k]
    start = target.init_server(torch.Generator().manual_seed(0))
    jobs = [ClientJob(k, start, {}, d, ClientContext(0, k, 7, sequential_train))
            for k, d in enumerate(datas)]
    trained = make_executor("batched").run(target, jobs)
    for job, (up, _) in zip(jobs, trained):
        problem = target.start_local(job.down, job.private, job.data)
        ref = sequential_train(target, problem, job.data, job.ctx)
        _close(ref, {k: up[k] for k in ref}, exact=False)
        assert not torch.equal(up["fc1.weight"], start["fc1.weight"])


def test_one_bulk_noise_draw_equals_successive_draws() -> None:
    shapes = {"a": (3, 5), "b": (1,), "c": (257,)}
    assert bulk_draws_match(shapes)
    gen = torch.Generator().manual_seed(5)
    bulk = draw_steps(shapes, gen, 4, bulk=True)
    gen = torch.Generator().manual_seed(5)
    for s in range(4):
        step = draw_noise(shapes, gen)
        assert all(torch.equal(bulk[k][s], step[k]) for k in shapes)


def test_a_batchable_method_cannot_write_its_own_client_update() -> None:
    """Executors own the local sequence of batchable methods, so overriding it must be declared."""
    with pytest.raises(TypeError, match="batchable = False"):
        class Sneaky(Target):  # noqa: F841 - the class statement itself must fail
            def client_update(self, down, private, data, ctx):  # type: ignore[no-untyped-def]
                return down, private


@pytest.mark.parametrize("n,epochs,batch", [(510, 5, 10), (33, 2, 5), (7, 3, 10), (10, 2, 10), (1, 2, 4), (0, 2, 4)])
def test_step_grid_holds_the_sequential_loops_batches(n: int, epochs: int, batch: int) -> None:
    """The batched plan's rows, built from whole epochs at once, are the sequential loop's
    batches in order (short last batches included), padded with -1."""
    grid = step_grid(epoch_orders(n, epochs, 3, 2, 1), batch)
    steps = step_batches(n, epochs, batch, 3, 2, 1)
    assert len(grid) == len(steps)
    for row, idx in zip(grid, steps):
        assert torch.equal(row[row >= 0], idx)
        assert bool((row[len(idx):] == -1).all())
