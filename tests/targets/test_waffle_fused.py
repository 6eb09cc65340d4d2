"""WAFFLe's kernel (`targets/waffle/kernel.py`; its gradients are held to the written-out
derivation in test_waffle_derivation.py) trains the same federation as the vmap path and the
sequential executor under both recipes, and is deterministic whatever the grouping of clients."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fedattack import optim
from fedattack.federation.executor_plugins._stacked import TrainRequest
from fedattack.federation.executor_plugins.batched import BatchedExecutor
from fedattack.federation.executors import ClientJob, Executor, make_executor
from fedattack.target import ClientContext, LocalData, LocalProblem, Recipe, State, Target
from fedattack.targets.waffle.kernel import IBPStepSpec, WaffleKernel
from fedattack.training import sequential_train
from tests.conftest import build
from tests.targets.test_waffle_recipe import uneven_clients

ROOT = Path(__file__).resolve().parents[2]
RECIPE = Recipe(epochs=3, batch_size=8, lr=0.1)
HYPERS = [{},  # literal: SGD, constant temperature, no fine-tuning
          {"kl_b": "bernoulli", "selection_lr_scale": 9.0},
          {"recipe": "ibp-wf", "temperature_start": 5.0},  # Adam, annealing, fine-tuning
          {"recipe": "ibp-wf", "optimizer": "adam-selection", "temperature_clock": "round"},
          {"recipe": "ibp-wf", "optimizer": "adam-selection", "kl_weight": 0.1}]  # a weaker KL


def ibp_spec(target: Target, problem: LocalProblem) -> IBPStepSpec | None:
    """What WAFFLe's kernel knows of the loss, if the method hands the problem to that kernel."""
    kernel = target.step_kernel(problem)
    return kernel.spec if isinstance(kernel, WaffleKernel) else None


def _problems(target: Target, datas: list[LocalData]) -> list:  # type: ignore[type-arg]
    server = target.init_server(torch.Generator().manual_seed(0))
    problems = [target.start_local(server, {}, d) for d in datas]
    for k, p in enumerate(problems):  # clients far apart in their selections and sticks
        gen = torch.Generator().manual_seed(k)
        for name in p.params:
            if not name.startswith("fc1.W"):
                p.params[name] = p.params[name] + torch.randn(p.params[name].shape, generator=gen)
        if "waffle.steps" in p.consts:
            p.consts["waffle.steps"] = torch.tensor(7.0 * k)
    return problems


def _train(executor: Executor, target: Target, rounds: int = 2) -> list[State]:
    datas = uneven_clients()
    server = target.init_server(torch.Generator().manual_seed(0))
    private: list[State] = [{} for _ in datas]
    for rnd in range(1, rounds + 1):
        jobs = [ClientJob(k, server, private[k], d, ClientContext(rnd, k, 3, sequential_train))
                for k, d in enumerate(datas)]
        out = executor.run(target, jobs)
        private = [p for _, p in out]
    return [{**up, **priv} for up, priv in out]


@pytest.mark.parametrize("hyper", HYPERS[::2])
def test_fused_federation_equals_vmap_path_and_sequential(hyper: dict[str, object]) -> None:
    target = build("waffle-ibp", dict(hyper), recipe=RECIPE)
    fused = _train(BatchedExecutor(), target)
    for other in (BatchedExecutor(fast=False), make_executor("sequential")):
        for a, b in zip(fused, _train(other, target)):
            for k in a:
                torch.testing.assert_close(a[k], b[k], atol=1e-5, rtol=1e-4, msg=k)


def test_fused_step_is_deterministic_and_independent_of_grouping() -> None:
    """Bit for bit across runs; whether clients train in one stack or in groups (as they do side
    by side in threads when torch has two), bit for bit on AVX2 CPUs and within a few float32
    ulps on AVX-512 ones, where torch's batched products take other kernels for other stack
    sizes (measured: one client's selection logits 3e-8 apart)."""
    target = build("waffle-ibp", {"recipe": "ibp-wf", "temperature_start": 5.0}, recipe=RECIPE)
    runs = [_train(BatchedExecutor(), target, rounds=1), _train(BatchedExecutor(), target, rounds=1),
            _train(BatchedExecutor(group_size=2), target, rounds=1)]
    for a, b in zip(runs[0], runs[1]):
        assert all(torch.equal(a[k], b[k]) for k in a)
    exact = torch.backends.cpu.get_cpu_capability() != "AVX512"
    for a, b in zip(runs[0], runs[2]):
        for k in a:
            if exact:
                assert torch.equal(a[k], b[k]), k
            else:
                torch.testing.assert_close(a[k], b[k], atol=1e-6, rtol=1e-6, msg=k)


def max_grouping_difference() -> float:
    """The largest difference between one round trained in one stack and in groups of two."""
    target = build("waffle-ibp", {"recipe": "ibp-wf", "temperature_start": 5.0}, recipe=RECIPE)
    one, pairs = (_train(BatchedExecutor(group_size=g), target, rounds=1) for g in (None, 2))
    return max(float((a[k] - b[k]).abs().max()) for a, b in zip(one, pairs) for k in a)


@pytest.mark.skipif(not torch.backends.mkl.is_available(), reason="torch without MKL")
def test_mkl_strict_mode_makes_the_fused_step_independent_of_grouping_on_every_cpu() -> None:
    """The remedy docs/architecture.md gives for AVX-512 CPUs: MKL's conditional numerical
    reproducibility, which has to be set before torch first calls MKL, hence a fresh process."""
    code = ("import sys; sys.path.insert(0, '.'); "
            "from tests.targets.test_waffle_fused import max_grouping_difference as d; print(d())")
    env = {**os.environ, "MKL_CBWR": "AUTO,STRICT", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert float(out.stdout.split()[-1]) == 0.0


def test_selection_parameters_on_different_optimisers_leave_the_fused_step() -> None:
    """The fused step steps a layer's pi, c and d as one tensor: a target that gives them
    different optimisers is trained by the vmap path instead, not stepped wrongly."""
    target = build("waffle-ibp", {"recipe": "ibp-wf", "optimizer": "adam-selection"}, recipe=RECIPE)
    problem = _problems(target, uneven_clients()[:1])[0]
    assert ibp_spec(target, problem) is not None
    shared = target.optimizer
    target.optimizer = lambda name: optim.SGD(0.1) if name.endswith("log_c") else shared(name)  # type: ignore[method-assign]
    assert ibp_spec(target, problem) is None


@pytest.mark.parametrize(("clients", "chunks"), [(10, [10]), (20, [10, 10]), (50, [13, 13, 13, 11])])
def test_waffle_stacks_train_in_threads_only_when_each_gets_enough_clients(clients: int,
                                                                          chunks: list[int]) -> None:
    """With two torch threads a plain MLP's clients split over two Python threads at any size,
    but WAFFLe's step, holding the GIL for ~95 small operations a step, keeps a stack of 10 whole
    (torch's threads work inside its products instead); see the kernel's THREAD_MIN."""
    data = uneven_clients()[0]
    waffle, fedavg = build("waffle-ibp", {}, recipe=RECIPE), build("fedavg", {}, recipe=RECIPE)
    ctx = ClientContext(1, 0, 3, sequential_train)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        sizes = {}
        for name, target in (("waffle", waffle), ("fedavg", fedavg)):
            problem = _problems(target, [data])[0]
            reqs = [TrainRequest(target, problem, data, ctx)] * clients
            sizes[name] = [len(c.members) for c in BatchedExecutor()._chunks(reqs, list(range(clients)))]
    finally:
        torch.set_num_threads(before)
    assert sizes["waffle"] == chunks
    assert len(sizes["fedavg"]) >= 2 and sum(sizes["fedavg"]) == clients


def test_floor_on_log_pi_changes_no_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    """`selection.LOG_P_MIN` keeps exp's results out of the subnormals; pi is clamped to
    PROB_EPS after it, so the floor must leave b and every gradient as they were without it.
    Sticks of 120 small v take log pi far below the floor (and below float32's subnormal edge)."""
    from fedattack.targets.waffle import selection as ibp_grad

    gen = torch.Generator().manual_seed(0)
    c, f = 4, 120
    sel = torch.randn(3, c, f, generator=gen)
    sel[1] -= 2.0  # small c: small v, steep sticks
    logistic, log_1mu_v = torch.randn(c, f, generator=gen), -torch.rand(c, f, generator=gen)
    k, g_b = torch.full((c, 1), 1e-3), torch.randn(c, f, generator=gen)

    def step() -> tuple[torch.Tensor, torch.Tensor, float]:
        prior = ibp_grad.LayerPrior.of(5.0, 1.0, "concrete", 0.0, sel[0])
        s = ibp_grad.SelectionStep(sel, logistic, log_1mu_v, torch.tensor(2 / 3), k, prior, None)
        out = torch.empty_like(sel)
        s.grads(g_b, out)
        return s.b, out, float((s.ratio.clamp_min(ibp_grad.LOG_V_MIN) @ prior.upper).min())

    b, grads, lowest = step()
    assert lowest < -100  # the floor is reached
    monkeypatch.setattr(ibp_grad, "LOG_P_MIN", -math.inf)
    b0, grads0, _ = step()
    assert torch.equal(b, b0) and torch.equal(grads, grads0)



DEEP_HYPERS = [{}, {"recipe": "ibp-wf", "optimizer": "adam-selection"}]


def deep_target(hyper: dict[str, object]) -> Target:
    """WAFFLe on an MLP of two hidden layers, which factorises both (24 and 16 factors): the
    second reads its input with a column of ones, passes a gradient below and has a prior of
    its own size, paths the MNIST MLP never takes. Needs `isolated_registries`."""
    from fedattack.models.zoo.mlp import MLP
    from fedattack.registry import MODELS

    MODELS.add("deep-mlp", lambda shape, classes, layers: MLP(64, [24, 16], classes, layers))
    target = build("waffle-ibp", dict(hyper), model="deep-mlp", recipe=RECIPE)
    spec = ibp_spec(target, _problems(target, uneven_clients())[0])
    assert spec is not None and spec.chain == (("fc1", True), ("fc2", True), ("fc3", False))
    return target


def assert_trains_as_vmap(executor: Executor, target: Target) -> None:
    for a, b in zip(_train(executor, target), _train(BatchedExecutor(fast=False), target)):
        for k in a:
            torch.testing.assert_close(a[k], b[k], atol=1e-4, rtol=1e-3, msg=k)


@pytest.mark.parametrize("hyper", DEEP_HYPERS)
def test_deeper_chains_train_as_the_vmap_path(hyper: dict[str, object], isolated_registries: None) -> None:
    assert_trains_as_vmap(BatchedExecutor(), deep_target(hyper))
