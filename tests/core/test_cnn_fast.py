"""The `conv` kernel (`fedattack.kernels.conv`) trains the zoo's CNNs as the sequential loop does.

Models are trained as an attack's reference models are (`ClientJob`s outside a federation) on
the embedded digits, with uneven data (different step counts and short last batches), and as a
small federation; both against the vmap path and the sequential loop, within the batched
executor's tolerance.
"""

from __future__ import annotations

from functools import cache

import pytest
import torch

from fedattack.data import load_dataset
from fedattack.data.partition import make_partition
from fedattack.federation.executor_plugins._stacked import TrainRequest, train_stacked
from fedattack.federation.executors import ClientJob, make_executor
from fedattack.federation.loop import client_data
from fedattack.federation.train import build_target
from fedattack.optim import Adam
from fedattack.registry import MODELS, UserError
from fedattack.target import ClientContext, LocalData, LocalProblem, Recipe, State, Target
from fedattack.training import sequential_train
from fedattack.wire import Message
from tests.conftest import run_rounds, tiny_spec

ATOL, RTOL = 1e-5, 1e-4  # the batched executor's tolerance (tests/core/test_batched_executor.py)
SIZES = (23, 40, 31)  # 3, 5 and 4 steps an epoch, each with a short last batch


@cache
def _target(model: str, method: str = "fedavg") -> Target:
    spec = tiny_spec(method=method, model=model, recipe=Recipe(epochs=2, batch_size=8, lr=0.1))
    return build_target(spec, load_dataset("digits"), 10)


def _requests(target: Target, sizes: tuple[int, ...] = SIZES) -> list[TrainRequest]:
    dataset = load_dataset("digits")
    start = target.init_server(torch.Generator().manual_seed(3))
    reqs, offset = [], 0
    for k, n in enumerate(sizes):
        x, y = dataset.x_train[offset:offset + n], dataset.y_train[offset:offset + n]
        offset += n
        data = LocalData(x, y, x[:0], y[:0])
        reqs.append(TrainRequest(target, target.start_local(start, {}, data), data,
                                 ClientContext(0, 0, 11 + k, sequential_train)))
    return reqs


def kernel_of(target: Target, problem: LocalProblem) -> str | None:
    """The name of the kernel the method declares for `problem` (None: the vmap path)."""
    kernel = target.step_kernel(problem)
    return None if kernel is None else kernel.label


def _close(a: State, b: State) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=ATOL, rtol=RTOL, msg=k)


def conv_models() -> list[str]:
    """Every registered model FedAvg trains through the `conv` kernel on the digits."""
    def on_conv(model: str) -> bool:
        try:
            target = _target(model)
        except (UserError, RuntimeError, ValueError):  # a model the digits' 8x8 images do not fit
            return False
        return kernel_of(target, _requests(target, (8,))[0].problem) == "conv"
    return [m for m in MODELS.names() if on_conv(m)]


def test_the_conv_kernel_trains_the_zoos_cnns() -> None:
    """So the tests below hold something: max- and average-pooled CNNs, one and three linear layers."""
    assert {"fmnist-cnn", "lenet5", "cifar-cnn", "dimitrov-cnn"} <= set(conv_models())


@pytest.mark.parametrize("model, method", [(m, method) for m in conv_models() for method in ("fedavg", "fedprox")])
def test_grouped_step_equals_vmap_and_the_sequential_loop(model: str, method: str) -> None:
    """Every CNN the kernel trains: fmnist-cnn, two pooled convolutions and one linear layer;
    lenet5, three linear layers; dimitrov-cnn, average pooling; FedProx: the default loss plus
    its proximal pull (`fedattack.kernels.proximal`)."""
    target = _target(model, method)
    reqs = _requests(target)
    assert kernel_of(target, reqs[0].problem) == "conv"  # so this tests the grouped step
    fast = train_stacked(reqs, torch.device("cpu"), target.step_kernel(reqs[0].problem))
    vmapped = train_stacked(reqs, torch.device("cpu"))
    for r, f, v in zip(reqs, fast, vmapped):
        _close(f, v)
        _close(f, sequential_train(target, r.problem, r.data, r.ctx))
        assert not torch.equal(f["conv1.weight"], r.problem.params["conv1.weight"])


@pytest.mark.parametrize("model", conv_models())
def test_grouped_step_is_reproducible_and_independent_of_the_group(model: str) -> None:
    """Bit for bit: the same models run to run, and a model's result does not depend on which
    other models share its grouped convolution (so neither on the executor's chunks nor on the
    number of torch threads, which sets them)."""
    reqs = _requests(_target(model))
    kernel = reqs[0].target.step_kernel(reqs[0].problem)
    once = train_stacked(reqs, torch.device("cpu"), kernel)
    again = train_stacked(reqs, torch.device("cpu"), kernel)
    pair = train_stacked(reqs[1:], torch.device("cpu"), kernel)
    for a, b in zip(once, again):
        assert all(torch.equal(a[k], b[k]) for k in a)
    for a, b in zip(once[1:], pair):
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_reference_jobs_through_the_batched_executor_use_it_with_two_threads() -> None:
    """What `ShadowModels` hands the executor; with two torch threads the groups train side by side."""
    target = _target("fmnist-cnn")
    reqs = _requests(target, SIZES + (17,))
    jobs = [ClientJob(0, r.problem.params, {}, r.data, r.ctx) for r in reqs]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        trained = make_executor("batched").run(target, jobs)
    finally:
        torch.set_num_threads(before)
    for r, (up, _) in zip(reqs, trained):
        _close({k: up[k] for k in r.problem.params}, sequential_train(target, r.problem, r.data, r.ctx))


def test_it_declines_what_it_does_not_compute(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another loss (a FedProx whose loss changed without declaring it again), another
    optimiser, a non-CNN model: not this step."""
    prox = _target("fmnist-cnn", "fedprox")
    problem = _requests(prox)[0].problem
    assert kernel_of(prox, problem) == "conv"

    class Changed(type(prox)):  # type: ignore[misc]
        def local_loss(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            return 2 * super().local_loss(*args, **kwargs)

    monkeypatch.setattr(prox, "__class__", Changed)
    assert kernel_of(prox, problem) is None
    target = _target("fmnist-cnn")
    problem = _requests(target)[0].problem
    monkeypatch.setattr(target, "optimizer", lambda name: Adam())
    assert kernel_of(target, problem) is None
    mlp = _target("mnist-mlp")
    problem = _requests(mlp)[0].problem
    assert kernel_of(mlp, problem) == "dense"  # MLP references


def _federate(executor: str) -> tuple[State, list[Message]]:
    spec = tiny_spec(model="fmnist-cnn", num_clients=4, fraction=1.0, rounds=2, executor=executor,
                     recipe=Recipe(epochs=1, batch_size=8, lr=0.1))
    dataset = load_dataset("digits")
    partition = make_partition(spec.partition, dataset.y_train.numpy(), spec.num_clients, spec.seed,
                               spec.dataset, **spec.partition_options)
    target = build_target(spec, dataset, partition.num_clients)
    datas = [client_data(dataset, partition, k) for k in range(partition.num_clients)]
    for k, d in enumerate(datas):  # 21, 30, 39, 48 samples: uneven steps, short batches
        d.x_train, d.y_train = d.x_train[:21 + 9 * k], d.y_train[:21 + 9 * k]
    _, state, messages = run_rounds(spec, target, datas, make_executor(executor))
    return state.server, messages


def test_a_cnn_federation_in_the_batched_executor_matches_the_sequential_one() -> None:
    """FedAvg on fmnist-cnn: the batched executor's clients go through the grouped step too."""
    seq, seq_msgs = _federate("sequential")
    bat, bat_msgs = _federate("batched")
    _close(seq, bat)
    assert len(seq_msgs) == len(bat_msgs)
    for m, n in zip(seq_msgs, bat_msgs):
        _close(m.payload, n.payload)
