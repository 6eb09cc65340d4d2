"""WAFFLe's recipes: the literal one stays as it was; IBP-WF's (Adam, temperature schedule,
fine-tuning on the thresholded selection) trains the same under both executors; the manifest
reports the selection's health."""

from __future__ import annotations

import pytest
import torch

from fedattack import optim
from fedattack.data import load_dataset
from fedattack.data.partition import make_partition
from fedattack.federation.executors import ClientJob, make_executor
from fedattack.federation.loop import client_data
from fedattack.federation.train import build_target
from fedattack.registry import UserError
from fedattack.target import ClientContext, LocalData, Recipe, Target
from fedattack.targets.waffle import recipe as recipes
from fedattack.training import Batch, sequential_train
from tests.conftest import build, tiny_spec

RECIPE = Recipe(epochs=3, batch_size=8, lr=0.1)


def _target(**hyper: object) -> Target:
    return build("waffle-ibp", dict(hyper), recipe=RECIPE)


def uneven_clients() -> list[LocalData]:
    """Four digits clients of 21, 34, 47 and 60 samples: uneven step counts, short last batches."""
    dataset = load_dataset("digits")
    partition = make_partition("shards", dataset.y_train.numpy(), 4, 0, "digits")
    datas = [client_data(dataset, partition, k) for k in range(4)]
    for k, d in enumerate(datas):  # uneven step counts and short last batches
        d.x_train, d.y_train = d.x_train[:21 + 13 * k], d.y_train[:21 + 13 * k]
    return datas


def test_recipe_defaults_and_their_overrides() -> None:
    literal, ibp_wf = _target().rec, _target(recipe="ibp-wf").rec
    assert (literal.optimizer, literal.finetune_epochs, literal.kappa, literal.anneals) == \
        ("sgd", 0, 0.0, False)
    assert (ibp_wf.optimizer, ibp_wf.finetune_epochs, ibp_wf.kappa, ibp_wf.anneals) == \
        ("adam", 1, 0.5, False)  # grey images: IBP-WF's MNIST temperature is constant
    cifar = build("waffle-ibp", {"recipe": "ibp-wf"}, "cifar-cnn", (3, 32, 32)).rec
    assert cifar.temperature_start == 10.0 and cifar.anneals
    mixed = _target(recipe="ibp-wf", optimizer="adam-selection", eval_threshold=0.6).rec
    assert mixed.optimizer == "adam-selection" and mixed.kappa == 0.6
    with pytest.raises(UserError):
        _target(recipe="paper")
    with pytest.raises(UserError):
        _target(finetune_epochs=3)  # no variational epoch left of 3


def test_optimizers_per_parameter_group() -> None:
    assert _target().optimizer("fc1.W_a") == optim.SGD(RECIPE.lr)
    assert _target(recipe="ibp-wf").optimizer("fc1.W_a") == optim.Adam(1e-3)
    mixed = _target(recipe="ibp-wf", optimizer="adam-selection", adam_lr=0.01)
    assert mixed.optimizer("fc1.W_a") == optim.SGD(RECIPE.lr)
    assert mixed.optimizer("fc1.pi_logit") == optim.Adam(0.01)


def test_temperature_anneals_per_step_over_the_clients_rounds() -> None:
    target = _target(recipe="ibp-wf", temperature_start=10.0)
    rec = target.rec
    consts = {recipes.STEPS: torch.tensor(0.0)}
    taus = [float(recipes.temperature(rec, consts, torch.tensor(s))) for s in (0, 1, 300)]
    assert taus[0] == pytest.approx(10.0) and taus[1] == pytest.approx(9.9)
    assert taus[2] == pytest.approx(2 / 3)
    data = uneven_clients()[0]
    problem = target.start_local(target.init_server(torch.Generator().manual_seed(0)), {}, data)
    _, kept = target.finish_local(problem.params, problem, {}, {}, data)
    steps = RECIPE.epochs * -(-data.size // RECIPE.batch_size)
    assert float(kept[recipes.STEPS]) == steps  # the next round continues the schedule
    again = target.start_local(target.init_server(torch.Generator().manual_seed(0)), kept, data)
    assert float(again.consts[recipes.STEPS]) == steps and recipes.STEPS not in again.params


def test_fine_tuning_phase_uses_the_thresholded_selection_without_kl() -> None:
    target = _target(recipe="ibp-wf")
    data = uneven_clients()[2]
    server = target.init_server(torch.Generator().manual_seed(0))
    problem = target.start_local(server, {}, data)
    start = int(problem.consts["finetune_from"])
    assert start == (RECIPE.epochs - 1) * -(-data.size // RECIPE.batch_size)
    batch = Batch(data.x_train[:8], data.y_train[:8], torch.full((8,), 1 / 8))
    shapes = target.noise_shapes(problem)
    noises = [{k: torch.rand(s, generator=torch.Generator().manual_seed(i)) for k, s in shapes.items()}
              for i in (1, 2)]
    tuned = [target.local_loss(problem.params, problem.consts, batch, n, torch.tensor(start))
             for n in noises]
    assert torch.equal(tuned[0], tuned[1])  # deterministic: no draw, no KL
    private = {k: v for k, v in problem.params.items() if k not in target.param_names}
    deployed = target.deployed(server, private)
    assert torch.equal(tuned[0], batch.cross_entropy(target.forward(deployed, batch.x)))
    early = [target.local_loss(problem.params, problem.consts, batch, n, torch.tensor(start - 1))
             for n in noises]
    assert not torch.equal(early[0], early[1])


@pytest.mark.parametrize("hyper", [{"recipe": "ibp-wf", "temperature_start": 5.0},
                                   {"recipe": "ibp-wf", "optimizer": "adam-selection"}])
def test_ibp_wf_batched_equals_sequential_over_two_rounds(hyper: dict[str, object]) -> None:
    target = build_target(tiny_spec(method="waffle-ibp", hyper=hyper, recipe=RECIPE),
                          load_dataset("digits"), 4)
    datas = uneven_clients()
    server = target.init_server(torch.Generator().manual_seed(0))
    results = {}
    for name in ("sequential", "batched"):
        private: list[dict[str, torch.Tensor]] = [{} for _ in datas]
        for rnd in (1, 2):
            jobs = [ClientJob(k, server, private[k], d, ClientContext(rnd, k, 3, sequential_train))
                    for k, d in enumerate(datas)]
            out = make_executor(name).run(target, jobs)
            private = [p for _, p in out]
        results[name] = out
    for (up_s, priv_s), (up_b, priv_b) in zip(results["sequential"], results["batched"]):
        for k in {**up_s, **priv_s}:
            torch.testing.assert_close({**up_s, **priv_s}[k], {**up_b, **priv_b}[k],
                                       atol=1e-5, rtol=1e-4, msg=k)
    moved = (results["sequential"][0][1]["fc1.pi_logit"] - target.init_selection("fc1", target.factorized["fc1"])[
        "fc1.pi_logit"]).abs().max()
    assert float(moved) > 1e-3  # Adam moves the selection


def test_selection_health_per_layer_and_group() -> None:
    target = _target()
    prior = recipes.prior_mean(target.alpha("fc1"), target.factorized["fc1"])
    at_prior = {"fc1.pi_logit": torch.logit(prior)}
    moved = {"fc1.pi_logit": torch.logit(prior.flip(0))}
    summary = target.summarize({}, [at_prior, {}, moved, at_prior], ["a", "a", "b", "b"])
    health = summary["selection_health"]["layers"]["fc1"]
    assert health["all"]["clients"] == 3 and health["all"]["distinct_factor_sets"] == 2
    assert health["groups"]["a"]["mean_abs_from_prior"] == pytest.approx(0.0, abs=1e-6)
    assert health["groups"]["a"]["share_with_the_priors_set"] == 1.0
    assert health["groups"]["b"]["between_client_std"] > 0.05
    assert health["all"]["mean_abs_from_prior"] > 0.05
    assert target.summarize({}, [{}, {}], ["a", "a"]) == {}


def test_kl_weight_scales_the_prior_term_and_pi_init_sets_the_start() -> None:
    data = uneven_clients()[1]
    batch = Batch(data.x_train[:8], data.y_train[:8], torch.full((8,), 1 / 8))
    losses = {}
    for weight in (1.0, 0.1, 0.0):
        target = _target(recipe="ibp-wf", kl_weight=weight)
        problem = target.start_local(target.init_server(torch.Generator().manual_seed(0)), {}, data)
        noise = {k: torch.rand(s, generator=torch.Generator().manual_seed(5))
                 for k, s in target.noise_shapes(problem).items()}
        losses[weight] = target.local_loss(problem.params, problem.consts, batch, noise, torch.tensor(0))
    kl = losses[1.0] - losses[0.0]
    assert float(kl.abs()) > 1e-4  # the KL is there at the paper's weight, and scales
    torch.testing.assert_close(losses[0.1] - losses[0.0], 0.1 * kl, rtol=1e-4, atol=1e-7)
    start = _target(pi_init=0.5).init_selection("fc1", 6)["fc1.pi_logit"]
    assert torch.equal(start, torch.zeros(6))
    prior = _target().init_selection("fc1", 6)["fc1.pi_logit"]
    assert bool((prior.diff() < 0).all())  # the default: the stick-breaking prior's mean
    with pytest.raises(UserError):
        _target(kl_weight=-1.0)
    with pytest.raises(UserError):
        _target(pi_init=1.0)


def test_named_recipe_personal_is_its_spelled_out_settings() -> None:
    """`recipe=personal` fills what the user left unset, and an explicit setting wins."""
    spelled = dict(recipes.PRESETS["personal"])
    named = _target(recipe="personal")
    assert {k: getattr(named.hyper, k) for k in spelled} == spelled
    assert named.rec == _target(recipe="ibp-wf", **spelled).rec
    assert _target(recipe="personal", kl_weight=1.0).hyper.kl_weight == 1.0
    assert _target(**{"recipe": "personal", "adam-lr": 0.1}).hyper.adam_lr == 0.1
    with pytest.raises(UserError, match="personal"):
        _target(recipe="nonesuch")
