"""WAFFLe: the IBP math, the factorisation, and what crosses the wire versus what stays home."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import torch

from fedattack.federation.rundir import Federation
from fedattack.models import count_parameters
from fedattack.target import LocalData
from fedattack.targets.waffle import ibp
from fedattack.targets.waffle.layers import FactorizedLinear, LowRankLinear
from tests.conftest import build

GEN = torch.Generator().manual_seed(0)


def _target(model: str = "mnist-mlp", shape=(1, 28, 28), **hyper):  # type: ignore[no-untyped-def]
    return build("waffle-ibp", hyper, model, shape)


def test_kumaraswamy_equal_to_the_beta_prior_has_zero_kl() -> None:
    for a in (0.5, 3.0, 120.0):
        assert abs(float(ibp.kumaraswamy_beta_kl(torch.tensor([a]), torch.tensor([1.0]), a))) < 1e-5
    assert float(ibp.kumaraswamy_beta_kl(torch.tensor([3.0]), torch.tensor([1.0]), 0.5)) > 0.1


def test_kumaraswamy_beta_kl_matches_monte_carlo() -> None:
    c, d, alpha = torch.tensor([2.0]), torch.tensor([3.0]), 5.0
    u = torch.rand(400_000, generator=GEN, dtype=torch.float64)
    v = ibp.kumaraswamy_sample(c.double(), d.double(), u)
    log_q = torch.log(c * d) + (c - 1) * torch.log(v) + (d - 1) * torch.log1p(-v ** c)
    log_p = math.log(alpha) + (alpha - 1) * torch.log(v)
    mc = float((log_q - log_p).mean())
    closed = float(ibp.kumaraswamy_beta_kl(c, d, alpha))
    assert closed > 0.1 and abs(closed - mc) < 0.02 * closed


def test_relaxed_bernoulli_is_positive_with_probability_pi() -> None:
    logit = torch.tensor([-2.0, 0.0, 1.5]).repeat(200_000, 1)
    y = ibp.relaxed_bernoulli_logit(logit, torch.rand(logit.shape, generator=GEN), 0.5)
    assert torch.allclose((y > 0).float().mean(0), torch.sigmoid(logit[0]), atol=0.005)


def test_kl_of_b_is_zero_against_itself_and_positive_otherwise() -> None:
    q = torch.tensor([0.3, -1.0, 2.0])
    y = ibp.relaxed_bernoulli_logit(q, torch.rand(3, generator=GEN), 2 / 3)
    assert abs(float(ibp.concrete_kl_mc(y, q, q, 2 / 3))) < 1e-6
    assert float(ibp.bernoulli_kl(q, q)) < 1e-7 and float(ibp.bernoulli_kl(q, -q)) > 0.1


def test_paper_factorisations_and_parameter_counts() -> None:
    mnist = _target()
    assert mnist.factorized == {"fc1": 120}
    # W_a (785 x 120) + W_b (120 x 200) + r (120) + the plain output layer (200 x 10 + 10)
    assert count_parameters(mnist.model) == 785 * 120 + 120 * 200 + 120 + 2010
    cifar = _target("cifar-cnn", (3, 32, 32))
    assert cifar.factorized == {"conv1": 10, "conv2": 10, "fc1": 80, "fc2": 40}
    assert _target("fmnist-cnn").factorized == {"conv1": 25, "conv2": 25}
    assert _target("digits-mlp", (1, 8, 8)).factorized == {"fc1": 64}
    assert _target("digits-mlp", (1, 8, 8), factors=7).factorized == {"fc1": 7}


def test_low_rank_order_computes_the_factorised_layer() -> None:
    fast, plain = LowRankLinear(30, 20, 8), FactorizedLinear(30, 20, 8)
    plain.load_state_dict(fast.state_dict())
    fast.b.copy_(torch.rand(8, generator=GEN))
    plain.b.copy_(fast.b)
    x = torch.randn(5, 30, generator=GEN)
    assert torch.allclose(fast(x), plain(x), atol=1e-6)


def test_uplink_is_the_dictionary_and_selection_stays_private(target_run: Callable[[str], Path]) -> None:
    fed = Federation(target_run("waffle-ibp"))
    ups = fed.transcript().load(kind="uplink")
    assert len(ups) > 0
    for m in ups:
        assert set(m.payload) == {"fc1.W_a", "fc1.W_b", "fc1.r", "fc2.weight", "fc2.bias"}
    trained = {m.client for m in ups}
    for k in range(fed.num_clients):
        names = set(fed.private_state(k))
        assert names == ({"fc1.pi_logit", "fc1.log_c", "fc1.log_d"} if k in trained else set())


def test_deployed_selection_is_pi_for_trained_clients_and_all_on_otherwise() -> None:
    target = _target("digits-mlp", (1, 8, 8), selection_lr_scale=9.0)
    server = target.init_server(torch.Generator().manual_seed(1))
    assert torch.equal(target.deployed(server, {})["fc1.b"], torch.ones(64))
    data = LocalData(torch.rand(12, 1, 8, 8, generator=GEN), torch.arange(12) % 10,
                     torch.zeros(0, 1, 8, 8), torch.zeros(0, dtype=torch.long))
    problem = target.start_local(server, {}, data)
    up, private = target.finish_local(problem.params, problem, server, {}, data)
    prior = ibp.prior_mean_probs(64.0, 64).clamp(1e-3, 1 - 1e-3)
    assert torch.allclose(torch.sigmoid(private["fc1.pi_logit"]), prior, atol=1e-5)  # true units
    assert torch.allclose(target.deployed(server, private)["fc1.b"], prior, atol=1e-5)
    assert set(up) == set(target.param_names)
