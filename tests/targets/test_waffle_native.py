"""`batched-native`: WAFFLe's factor selection compiled to C (`targets/waffle/native.py`)
computes what `selection.SelectionStep` computes, within float32 rounding, trains the federation
the `batched` executor trains, same bits run after run, and says in one line when it cannot be
built. Skipped where no C compiler with glibc's libmvec is found."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fedattack.federation.executor_plugins.batched import BatchedExecutor
from fedattack.federation.executors import make_executor
from fedattack.registry import UserError
from fedattack.targets.waffle import native as ibp_native
from fedattack.targets.waffle.selection import LayerPrior, SelectionStep
from tests.conftest import build
from tests.targets.test_waffle_fused import DEEP_HYPERS, HYPERS, RECIPE, _train, assert_trains_as_vmap, deep_target

pytestmark = pytest.mark.skipif(not ibp_native.available(), reason="no C compiler with libmvec here")

CASES = [  # kl_b, scale, fine-tuning clients, one temperature per client, a prefix of the stack
    ("concrete", 1.0, False, False, False),
    ("bernoulli", 1.0, False, False, False),
    ("concrete", 0.5, True, True, False),
    ("bernoulli", 2.0, True, False, True),
    ("concrete", 1.0, False, True, True),
]


def _selection_inputs(spread: float, seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    c, f = 6, 40
    return {"sel": torch.randn(3, c, f, generator=gen) * spread, "logistic": torch.randn(c, f, generator=gen),
            "log_1mu_v": -3 * torch.rand(c, f, generator=gen), "g_b": torch.randn(c, f, generator=gen),
            "tau": torch.rand(c, 1, generator=gen) + 0.3}


@pytest.mark.parametrize(("kl_b", "scale", "tuning", "per_client_tau", "prefix"), CASES)
@pytest.mark.parametrize("spread", [0.5, 4.0])  # 4: many parameters at their clamps
def test_native_selection_equals_the_eager_one(kl_b: str, scale: float, tuning: bool, per_client_tau: bool,
                                               prefix: bool, spread: float) -> None:
    t = _selection_inputs(spread)
    a = 4 if prefix else t["sel"].shape[1]  # the clients still training: a slice of the stack
    sel = t["sel"][:, :a]
    logistic, log_1mu_v, g_b = t["logistic"][:a], t["log_1mu_v"][:a], t["g_b"][:a]
    tau = t["tau"][:a] if per_client_tau else torch.tensor(2 / 3)
    flags = (torch.arange(a) % 2 == 0).unsqueeze(1) if tuning else None
    k = torch.full((a, 1), 1e-2) if flags is None else torch.where(flags, 0.0, 1e-2)
    prior = LayerPrior.of(5.0, scale, kl_b, 0.3, sel[0])

    eager = SelectionStep(sel, logistic, log_1mu_v, tau, k, prior, flags)
    want = torch.empty(3, a, sel.shape[2])
    eager.grads(g_b, want)
    rows = {"tau": tau.expand(a, 1).reshape(a).contiguous(), "k": k.reshape(a).contiguous(),
            "tuning": (flags if flags is not None else torch.zeros(a, 1, dtype=torch.bool)).reshape(a).to(torch.uint8)}
    native = ibp_native.NativeSelection(sel, prior)
    native.draw(logistic.contiguous().data_ptr(), log_1mu_v.contiguous().data_ptr(), rows["tau"].data_ptr(),
                rows["tuning"].data_ptr())
    got = torch.empty(3, a, sel.shape[2])
    native.grads(g_b.contiguous().data_ptr(), rows["tau"].data_ptr(), rows["k"].data_ptr(), rows["tuning"].data_ptr(),
                 got.data_ptr())
    torch.testing.assert_close(native.b, eager.b, atol=1e-6, rtol=1e-5)
    scale_of = want.abs().amax(dim=(1, 2), keepdim=True) + 1e-3  # each parameter's own magnitude
    torch.testing.assert_close(got / scale_of, want / scale_of, atol=2e-5, rtol=0)
    assert ((got == 0) == (want == 0)).float().mean() > 0.99  # the clamps' masks agree


@pytest.mark.parametrize("hyper", HYPERS)
def test_native_federation_is_the_batched_one_within_float32(hyper: dict[str, object]) -> None:
    target = build("waffle-ibp", dict(hyper), recipe=RECIPE)
    native = _train(make_executor("batched-native", "cpu"), target)
    for a, b in zip(native, _train(BatchedExecutor(), target)):
        for k in a:
            torch.testing.assert_close(a[k], b[k], atol=1e-4, rtol=1e-3, msg=k)


def test_native_federation_is_deterministic() -> None:
    target = build("waffle-ibp", {"recipe": "ibp-wf", "temperature_start": 5.0}, recipe=RECIPE)
    first, second = (_train(make_executor("batched-native", "cpu"), target, rounds=1) for _ in range(2))
    for a, b in zip(first, second):
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_double_precision_keeps_the_eager_selection() -> None:
    """The C functions are float32; a float64 stack trains through `SelectionStep` unchanged."""
    target = build("waffle-ibp", {}, recipe=RECIPE)
    from fedattack.target import ClientContext
    from fedattack.targets.waffle.kernel import IBPRun
    from fedattack.training import sequential_train
    from tests.targets.test_waffle_fused import ibp_spec
    from tests.targets.test_waffle_recipe import uneven_clients

    data = uneven_clients()[0]
    problem = target.start_local(target.init_server(torch.Generator().manual_seed(0)), {}, data)
    spec = ibp_spec(target, problem)
    assert spec is not None and ClientContext(1, 0, 3, sequential_train)
    params = {k: v.double().unsqueeze(0) for k, v in problem.params.items()}
    consts = {k: v.unsqueeze(0) for k, v in problem.consts.items()}
    noise = {k: torch.rand(1, 1, *s, dtype=torch.float64) for k, s in target.noise_shapes(problem).items()}
    x = data.x_train[:4].double().flatten(1)
    run = IBPRun(spec, params, consts, noise, x, data.y_train[:4], torch.arange(4).view(1, 1, 4),
                 torch.full((1, 1, 4), 0.25, dtype=torch.float64), {k: target.optimizer(k) for k in params},
                 torch.tensor([0]), native=True)
    assert not run.native


def test_no_compiler_is_a_one_line_error_and_no_run_directory(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    out = tmp_path / "run"
    env = {**os.environ, "PATH": str(empty)}
    args = ["train", "--method", "waffle-ibp", "--rounds", "1", "--executor", "batched-native", "--out", str(out),
            "--quiet"]
    code = f"import sys; from fedattack.cli import main; sys.argv = ['fedattack', *{args!r}]; main()"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "gcc" in done.stderr and "--executor batched" in done.stderr
    assert not out.exists()


def test_missing_compiler_refused_when_waffle_first_trains(monkeypatch: pytest.MonkeyPatch) -> None:
    """"native" is WAFFLe's kernel's option: without a compiler a WAFFLe stack is refused in one
    line before it trains, and every other method trains under `batched-native` as under `batched`."""
    monkeypatch.setattr(ibp_native.shutil, "which", lambda name: None)
    ibp_native.library.cache_clear()
    try:
        executor = make_executor("batched-native", "cpu")
        with pytest.raises(UserError, match="no gcc or cc"):
            _train(executor, build("waffle-ibp", {}, recipe=RECIPE), rounds=1)
        fedavg = build("fedavg", {}, recipe=RECIPE)
        for a, b in zip(_train(executor, fedavg, rounds=1), _train(BatchedExecutor(), fedavg, rounds=1)):
            assert all(torch.equal(a[k], b[k]) for k in a)
    finally:
        monkeypatch.undo()
        ibp_native.library.cache_clear()
    assert ibp_native.available()


@pytest.mark.parametrize("ones", [True, False])
def test_native_gather_is_normalise_pad_and_index_select_bit_for_bit(ones: bool) -> None:
    """The native step gathers each batch normalised and padded in one pass instead of
    normalising and padding the round's whole input: the same bits, per channel."""
    from fedattack.data.normalization import Normalization

    gen = torch.Generator().manual_seed(0)
    x = torch.rand(50, 3, 4, 5, generator=gen)
    norm = Normalization((0.49, 0.48, 0.45), (0.25, 0.24, 0.26))
    rows = torch.randint(0, 50, (12,), generator=gen)
    whole = norm.apply(x).reshape(50, -1)
    want = (torch.nn.functional.pad(whole, (0, 1), value=1.0) if ones else whole).index_select(0, rows)
    gather = ibp_native.NativeGather(x.reshape(50, -1).contiguous(), torch.tensor(norm.mean), torch.tensor(norm.std),
                                     ones, len(rows))
    got = gather(rows.data_ptr())
    assert torch.equal(got, want)


@pytest.mark.parametrize(("clients", "chunks"), [(10, [10]), (20, [20]), (50, [25, 25]), (60, [30, 30])])
def test_native_stacks_are_larger(clients: int, chunks: list[int]) -> None:
    """Its compiled step releases the GIL and pays less per stack, so it keeps up to 50 clients
    in a stack, and splits over two threads only when each gets 25 (the kernel's NATIVE_*)."""
    from fedattack.federation.executor_plugins._stacked import TrainRequest
    from fedattack.target import ClientContext
    from fedattack.training import sequential_train
    from tests.targets.test_waffle_fused import _problems
    from tests.targets.test_waffle_recipe import uneven_clients

    data = uneven_clients()[0]
    target = build("waffle-ibp", {}, recipe=RECIPE)
    problem = _problems(target, [data])[0]
    reqs = [TrainRequest(target, problem, data, ClientContext(1, 0, 3, sequential_train))] * clients
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        sizes = [len(c.members) for c in make_executor("batched-native", "cpu")._chunks(reqs, list(range(clients)))]
    finally:
        torch.set_num_threads(before)
    assert sizes == chunks


@pytest.mark.parametrize("hyper", DEEP_HYPERS)
def test_native_deeper_chains_train_as_the_vmap_path(hyper: dict[str, object], isolated_registries: None) -> None:
    assert_trains_as_vmap(make_executor("batched-native", "cpu"), deep_target(hyper))


@pytest.mark.parametrize("sgd", [True, False])
def test_dense_head_is_the_output_layer_and_loss_of_autograd(sgd: bool) -> None:
    """The C output layer: the gradient it passes below and its SGD step, or the gradients it
    writes out for other optimisers, are autograd's on relu(z) W^T + bias under the weighted
    cross-entropy (odd sizes, so vector loops end in remainders)."""
    gen = torch.Generator().manual_seed(1)
    c, b, d, k, lr = 3, 5, 37, 7, 0.3
    z, weight = torch.randn(c, b, d, generator=gen), torch.randn(c, k, d, generator=gen) * 0.3
    bias, y = torch.randn(c, k, generator=gen), torch.randint(0, k, (c, b), generator=gen)
    w = torch.rand(c, b, generator=gen)
    zz, ww, bb = (t.clone().requires_grad_() for t in (z, weight, bias))
    logits = torch.baddbmm(bb.unsqueeze(1), zz.relu(), ww.transpose(1, 2))
    losses = torch.nn.functional.cross_entropy(logits.reshape(-1, k), y.reshape(-1), reduction="none")
    (losses * w.reshape(-1)).sum().backward()

    neg_target = -torch.nn.functional.one_hot(y, k).float() * w.unsqueeze(-1)
    act, scratch, below = torch.empty(c, b, d), torch.empty(c, b, k), torch.empty(c, b, d)
    g_weight, g_bias = (None, None) if sgd else (torch.empty(c, k, d), torch.empty(c, k))
    stepped_w, stepped_b = weight.clone(), bias.clone()
    ibp_native.library().dense_head(c, b, d, k, z.data_ptr(), act.data_ptr(), stepped_w.data_ptr(),
                                    stepped_b.data_ptr(), neg_target.data_ptr(), w.data_ptr(), lr, lr,
                                    None if g_weight is None else g_weight.data_ptr(),
                                    None if g_bias is None else g_bias.data_ptr(), scratch.data_ptr(),
                                    below.data_ptr())
    torch.testing.assert_close(below, zz.grad, atol=1e-5, rtol=1e-4)
    if sgd:
        torch.testing.assert_close(stepped_w, weight - lr * ww.grad, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(stepped_b, bias - lr * bb.grad, atol=1e-5, rtol=1e-4)
    else:
        assert g_weight is not None and g_bias is not None
        torch.testing.assert_close(g_weight, ww.grad, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(g_bias, bb.grad, atol=1e-5, rtol=1e-4)
        assert torch.equal(stepped_w, weight) and torch.equal(stepped_b, bias)


def test_native_step_without_the_native_gather(monkeypatch: pytest.MonkeyPatch) -> None:
    """A target that normalises its own way gets its round's input normalised as under
    `batched`, and the native step gathers each batch by index instead."""
    import fedattack.targets.waffle.kernel as fast

    monkeypatch.setattr(fast, "native_statistics", lambda target, x: None)
    target = build("waffle-ibp", {}, recipe=RECIPE)
    for a, b in zip(_train(make_executor("batched-native", "cpu"), target), _train(BatchedExecutor(), target)):
        for k in a:
            torch.testing.assert_close(a[k], b[k], atol=1e-4, rtol=1e-3, msg=k)


def test_native_stacks_train_side_by_side_in_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two stacks handed to a pool of two Python threads, as at 50 clients: each keeps its own
    buffers and the C functions keep no state, so the clients train as in one stack (within
    the products' rounding for other stack sizes). (Whether the pool runs them at the same time
    depends on timing: a stack this small can finish before the second is handed over.)"""
    import threading

    import fedattack.federation.executor_plugins.batched as batched

    target = build("waffle-ibp", {"recipe": "ibp-wf", "optimizer": "adam-selection"}, recipe=RECIPE)
    one = _train(make_executor("batched-native", "cpu"), target, rounds=1)
    seen: list[str] = []
    stacked = batched.train_stacked

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(threading.current_thread().name)
        return stacked(*args, **kwargs)

    monkeypatch.setattr(batched, "train_stacked", spy)
    import fedattack.targets.waffle.kernel as kernel

    monkeypatch.setattr(kernel, "NATIVE_THREAD_MIN", 2)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        threaded = _train(make_executor("batched-native", "cpu"), target, rounds=1)
    finally:
        torch.set_num_threads(before)
    assert len(seen) == 2 and threading.main_thread().name not in seen
    for a, b in zip(one, threaded):
        for k in a:
            torch.testing.assert_close(a[k], b[k], atol=1e-6, rtol=1e-5, msg=k)
