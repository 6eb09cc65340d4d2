"""WAFFLe's written-out gradient (`targets/waffle/derivation.py`) against everything that computes it.

The derivation is checked against autograd of the method's own loss (so it is right), and the
hand-written backward (`selection.SelectionStep`), the batched step (`kernel.IBPRun`, which runs
`step.ibp_step`) and the compiled step (`native.c` through `NativeSelection` and the whole
native step) are each checked against the derivation: in float64 for the torch code, so a
wrong term shows and rounding does not, and within float32 for the C step, which is float32.
"""

from __future__ import annotations

import pytest
import torch

from fedattack import optim
from fedattack.target import LocalProblem, Recipe, State, Target
from fedattack.targets.waffle import derivation as d
from fedattack.targets.waffle import ibp
from fedattack.targets.waffle import native as ibp_native
from fedattack.targets.waffle.kernel import IBPRun, IBPStepSpec
from fedattack.targets.waffle.selection import LayerPrior, SelectionNoise, SelectionStep
from fedattack.training import Batch
from tests.conftest import build
from tests.targets.test_waffle_fused import HYPERS, _problems, ibp_spec
from tests.targets.test_waffle_recipe import uneven_clients

RECIPE = Recipe(epochs=3, batch_size=8, lr=0.1)
LAYERS = [d.Layer(alpha=5.0), d.Layer(alpha=3.0, scale=2.0, kl_b="bernoulli"), d.Layer(alpha=8.0, scale=0.5, kappa=0.4)]


def _inputs(spread: float, seed: int, f: int = 30) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {"sel": torch.randn(3, f, generator=gen, dtype=torch.float64) * spread,
            "u_b": torch.rand(f, generator=gen, dtype=torch.float64),
            "u_v": torch.rand(f, generator=gen, dtype=torch.float64),
            "g_b": torch.randn(f, generator=gen, dtype=torch.float64)}


def _autograd_selection(layer: d.Layer, t: dict[str, torch.Tensor], tau: float, k: float,
                        tuning: bool) -> torch.Tensor:
    """d(g_b . b + k KL) / d(stored parameters) by autograd through `ibp.py`, as `local_loss` calls it."""
    sel = t["sel"].clone().requires_grad_(True)
    q = ibp.clip_logit(sel[0] * layer.scale)
    y = ibp.relaxed_bernoulli_logit(q, t["u_b"], tau)
    pi = torch.sigmoid(q)
    b = pi * (pi >= layer.kappa).to(pi.dtype) if tuning else torch.sigmoid(y)
    c = torch.exp((sel[1] * layer.scale).clamp(-7.0, 7.0))
    dd = torch.exp((sel[2] * layer.scale).clamp(-7.0, 7.0))
    kl = ibp.ibp_layer_kl(q, c, dd, y, t["u_v"], layer.alpha, tau, layer.kl_b)
    loss = (t["g_b"] * b).sum() + (0.0 if tuning else k) * kl
    return torch.autograd.grad(loss, sel)[0]


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("tuning", [False, True])
@pytest.mark.parametrize("spread", [0.5, 4.0])  # 4: many parameters at their clamps
def test_the_derivation_is_autograd_of_the_loss(layer: d.Layer, tuning: bool, spread: float) -> None:
    for seed in range(3):
        t = _inputs(spread, seed)
        b, derived = d.selection_gradients(layer, t["sel"], t["u_b"], t["u_v"], 0.7, 0.05, t["g_b"], tuning)
        want = _autograd_selection(layer, t, 0.7, 0.05, tuning)
        assert want.abs().max() > 0
        torch.testing.assert_close(derived, want, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("tuning", [False, True])
def test_the_hand_written_backward_is_the_derivation(layer: d.Layer, tuning: bool) -> None:
    """`SelectionStep`, stacked over clients, with its rearranged formulas (F6's products with
    a triangular matrix, B2's cancelled logistic terms, B6-B8 folded)."""
    ts = [_inputs(3.0, seed) for seed in range(4)]
    sel = torch.stack([t["sel"] for t in ts], 1)  # (3, C, F)
    noise = SelectionNoise.of(torch.stack([t["u_b"] for t in ts]), torch.stack([t["u_v"] for t in ts]))
    flags = torch.full((4, 1), tuning)
    k = torch.full((4, 1), 0.0 if tuning else 0.05, dtype=torch.float64)
    prior = LayerPrior.of(layer.alpha, layer.scale, layer.kl_b, layer.kappa, sel[0])
    step = SelectionStep(sel, noise.logistic, noise.log_1mu_v, torch.tensor(0.7, dtype=torch.float64), k, prior,
                         flags if tuning else None)
    got = torch.empty_like(sel)
    step.grads(torch.stack([t["g_b"] for t in ts]), got)
    for c, t in enumerate(ts):
        b, want = d.selection_gradients(layer, t["sel"], t["u_b"], t["u_v"], 0.7, 0.05, t["g_b"], tuning)
        torch.testing.assert_close(step.b[c], b, atol=1e-12, rtol=1e-10)
        torch.testing.assert_close(got[:, c], want, atol=1e-10, rtol=1e-8)


def derived_step(target: Target, spec: IBPStepSpec, params: State, consts: State, batch: Batch, noise: State,
                 step: int) -> State:
    """One client's gradient of `local_loss` in every local parameter, from the derivation alone."""
    tau = spec.temperature(consts, torch.tensor(float(step), dtype=torch.float64))
    tau = float(tau)
    tuning = spec.kappa is not None and step >= float(consts["finetune_from"])
    k = spec.kl_weight / float(consts["n_train"])
    layers = {name: d.Layer(spec.alpha[name], spec.scale, spec.kl_b, spec.kappa or 0.0)
              for name, factored in spec.chain if factored}
    sel = {name: torch.stack([params[f"{name}.{p}"] for p in ("pi_logit", "log_c", "log_d")]) for name in layers}
    zero = {name: torch.zeros_like(s[0]) for name, s in sel.items()}
    b = {name: d.selection_gradients(layer, sel[name], noise[f"{name}.u_b"], noise[f"{name}.u_v"], tau, k,
                                     zero[name], tuning)[0] for name, layer in layers.items()}
    acts, inputs, pres = [target.normalized(batch.x).flatten(1)], [], []
    for i, (name, factored) in enumerate(spec.chain):
        if factored:
            inputs.append(torch.cat([acts[-1], torch.ones(len(acts[-1]), 1, dtype=acts[-1].dtype)], 1))
            z = ((inputs[-1] @ params[f"{name}.W_a"]) * (params[f"{name}.r"] * b[name])) @ params[f"{name}.W_b"]
        else:
            inputs.append(acts[-1])
            z = acts[-1] @ params[f"{name}.weight"].t() + params[f"{name}.bias"]
        pres.append(z)
        if i < len(spec.chain) - 1:
            acts.append(z.relu())
    dz = d.weighted_cross_entropy_grad(pres[-1], batch.y, batch.w)                 # N1
    out: State = {}
    for i in range(len(spec.chain) - 1, -1, -1):
        name, factored = spec.chain[i]
        if factored:                                                                # N3
            g = d.lowrank_gradients(inputs[i], params[f"{name}.W_a"], params[f"{name}.W_b"], params[f"{name}.r"],
                                    b[name], dz)
            out.update({f"{name}.W_a": g["W_a"], f"{name}.W_b": g["W_b"], f"{name}.r": g["r"]})
            _, s = d.selection_gradients(layers[name], sel[name], noise[f"{name}.u_b"], noise[f"{name}.u_v"], tau,
                                         k, g["b"], tuning)
            out.update({f"{name}.{p}": s[j] for j, p in enumerate(("pi_logit", "log_c", "log_d"))})
            below = g["x"]
        else:                                                                       # N2
            g = d.dense_gradients(inputs[i], params[f"{name}.weight"], dz)
            out.update({f"{name}.weight": g["weight"], f"{name}.bias": g["bias"]})
            below = g["a"]
        if i > 0:
            dz = below * (pres[i - 1] > 0)
    return out


def _one_step(hyper: dict[str, object], phase: str, dtype: torch.dtype):  # type: ignore[no-untyped-def]
    target = build("waffle-ibp", dict(hyper), recipe=RECIPE)
    datas = uneven_clients()
    problems: list[LocalProblem] = _problems(target, datas)
    spec = ibp_spec(target, problems[0])
    assert spec is not None
    step = 0 if phase == "variational" else int(problems[0].consts.get("finetune_from", 0)) + 1
    gen = torch.Generator().manual_seed(3)
    noise = [{k: torch.rand(s, generator=gen, dtype=dtype) for k, s in target.noise_shapes(p).items()}
             for p in problems]
    batches = [Batch(dt.x_train[:8].to(dtype), dt.y_train[:8], torch.full((8,), 1 / 8, dtype=dtype)) for dt in datas]
    return target, problems, spec, step, noise, batches


def _batched_gradients(target: Target, problems: list[LocalProblem], spec: IBPStepSpec, step: int, noise: list[State],
                       batches: list[Batch], dtype: torch.dtype, native: bool = False) -> State:
    """Every client's gradient from one step of the kernel's `IBPRun` at SGD lr 1: minus the update."""
    stacked = {k: torch.stack([p.params[k] for p in problems]).to(dtype) for k in problems[0].params}
    before = {k: v.clone() for k, v in stacked.items()}
    consts = {k: torch.stack([p.consts[k] for p in problems]) for k in problems[0].consts}
    x = torch.stack([b.x for b in batches])
    raw = x.flatten(0, 1).flatten(1).contiguous()
    run = IBPRun(spec, stacked, consts, {k: torch.stack([n[k] for n in noise]).unsqueeze(0) for k in noise[0]},
                 raw if native else target.normalized(x).flatten(2).flatten(0, 1), torch.cat([b.y for b in batches]),
                 torch.arange(x.shape[0] * x.shape[1]).view(1, *x.shape[:2]),
                 torch.stack([b.w for b in batches]).unsqueeze(0), {k: optim.SGD(1.0) for k in stacked},
                 torch.tensor([step]), native=native, raw=_statistics(target) if native else None)
    assert run.native == native
    run.step(0, len(batches))
    run.finish()
    return {k: before[k] - stacked[k] for k in stacked}


def _statistics(target: Target) -> tuple[torch.Tensor, torch.Tensor]:
    norm = target.ctx.normalization
    if norm is None:
        return torch.zeros(1), torch.ones(1)
    return torch.tensor(norm.mean, dtype=torch.float32), torch.tensor(norm.std, dtype=torch.float32)


@pytest.mark.parametrize("hyper", HYPERS)
@pytest.mark.parametrize("phase", ["variational", "fine-tuning"])
def test_the_derived_step_is_autograd_and_the_batched_step_is_the_derivation(hyper: dict[str, object],
                                                                             phase: str) -> None:
    target, problems, spec, step, noise, batches = _one_step(hyper, phase, torch.float64)
    derived = []
    for p, n, b in zip(problems, noise, batches):
        params = {k: v.double().requires_grad_(True) for k, v in p.params.items()}
        loss = target.local_loss(params, p.consts, b, n, torch.tensor(step))
        want = dict(zip(params, torch.autograd.grad(loss, list(params.values()))))
        got = derived_step(target, spec, {k: v.detach() for k, v in params.items()}, p.consts, b, n, step)
        assert got.keys() == want.keys()
        for k in want:
            torch.testing.assert_close(got[k], want[k], atol=1e-10, rtol=1e-8, msg=k)
        derived.append(got)
    batched = _batched_gradients(target, problems, spec, step, noise, batches, torch.float64)
    for k in batched:
        want = torch.stack([g[k] for g in derived])
        assert want.abs().max() > 0, k
        torch.testing.assert_close(batched[k], want, atol=1e-10, rtol=1e-8, msg=k)


pytest_native = pytest.mark.skipif(not ibp_native.available(), reason="no C compiler with libmvec here")


@pytest_native
@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("tuning", [False, True])
def test_the_compiled_selection_is_the_derivation(layer: d.Layer, tuning: bool) -> None:
    ts = [_inputs(3.0, seed) for seed in range(4)]
    sel = torch.stack([t["sel"] for t in ts], 1).float().contiguous()
    noise = SelectionNoise.of(torch.stack([t["u_b"] for t in ts]).float(), torch.stack([t["u_v"] for t in ts]).float())
    rows = {"tau": torch.full((4,), 0.7), "k": torch.full((4,), 0.0 if tuning else 0.05),
            "tuning": torch.full((4,), int(tuning), dtype=torch.uint8)}
    native = ibp_native.NativeSelection(sel, LayerPrior.of(layer.alpha, layer.scale, layer.kl_b, layer.kappa, sel[0]))
    native.draw(noise.logistic.contiguous().data_ptr(), noise.log_1mu_v.contiguous().data_ptr(),
                rows["tau"].data_ptr(), rows["tuning"].data_ptr())
    got, g_b = torch.empty_like(sel), torch.stack([t["g_b"] for t in ts]).float().contiguous()  # kept alive
    native.grads(g_b.data_ptr(), rows["tau"].data_ptr(), rows["k"].data_ptr(), rows["tuning"].data_ptr(),
                 got.data_ptr())
    for c, t in enumerate(ts):  # the derivation at the float32 inputs the C code saw
        b, want = d.selection_gradients(layer, sel[:, c].double(), t["u_b"].float().double(),
                                        t["u_v"].float().double(), 0.7, 0.05, t["g_b"].float().double(), tuning)
        torch.testing.assert_close(native.b[c].double(), b, atol=1e-6, rtol=1e-5)
        scale = want.abs().amax(1, keepdim=True) + 1e-3  # each parameter's own magnitude; float32 rounding:
        torch.testing.assert_close(got[:, c].double() / scale, want / scale, atol=1e-4, rtol=0)  # eager's is 6e-5


@pytest_native
@pytest.mark.parametrize("hyper", HYPERS[:3])
def test_the_compiled_step_is_the_derivation(hyper: dict[str, object]) -> None:
    """The whole native step (gather, products, selection, output layer and loss in C), float32."""
    target, problems, spec, step, noise, batches = _one_step(hyper, "variational", torch.float32)
    got = _batched_gradients(target, problems, spec, step, noise, batches, torch.float32, native=True)
    for c, (p, n, b) in enumerate(zip(problems, noise, batches)):
        want = derived_step(target, spec, {k: v.double() for k, v in p.params.items()}, p.consts,
                            Batch(b.x.double(), b.y, b.w.double()), {k: v.double() for k, v in n.items()}, step)
        for k in want:
            scale = float(want[k].abs().max()) + 1e-6
            torch.testing.assert_close(got[k][c].double() / scale, want[k] / scale, atol=2e-5, rtol=0, msg=k)
