"""The long loops of model inversion and update inversion on a named `device` (issue #47): on
`cpu`, named explicitly, the same bits as the default; on `cuda` (skipped where torch sees no
GPU) the guesses come back to the CPU and agree with the CPU's within float32; a device torch
cannot see is refused in one line."""

from __future__ import annotations

import pytest
import torch

from fedattack.attacks.model_inversion.inversion import InversionSettings, invert, invert_many
from fedattack.data import load_dataset
from fedattack.federation.train import build_target
from fedattack.registry import ATTACKS, UserError
from fedattack.rng import generator
from tests.attacks.test_update_inversion_attack import adversary, one_step_case
from tests.attacks.test_update_inversion_attack import digits as digits  # noqa: F401  (the fixture)
from tests.conftest import tiny_spec

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible to torch")
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]


def inversions(device: str) -> tuple[list, list]:  # type: ignore[type-arg]
    """Three victims' models inverted alone (`invert`) and together (`invert_many`) on `device`."""
    target = build_target(tiny_spec(), load_dataset("digits"), 10)
    victims = [target.deployed(target.init_server(generator(seed, "init")), {}) for seed in range(3)]
    starts = [torch.rand(10, 1, 8, 8, generator=torch.Generator().manual_seed(v)) for v in range(3)]
    settings = InversionSettings(steps=60, lr=5.0, patience=3, device=device)
    return [invert(target, p, x0, settings) for p, x0 in zip(victims, starts)], \
        invert_many(target, victims, starts, settings)


@pytest.mark.parametrize("device", DEVICES)
def test_model_inversion_runs_on_the_device_and_answers_on_the_cpu(device: str) -> None:
    alone, together = inversions(device)
    reference = inversions("cpu") if device != "cpu" else None
    plain_target = build_target(tiny_spec(), load_dataset("digits"), 10)
    plain = invert(plain_target, plain_target.deployed(plain_target.init_server(generator(0, "init")), {}),
                   torch.rand(10, 1, 8, 8, generator=torch.Generator().manual_seed(0)),
                   InversionSettings(steps=60, lr=5.0, patience=3))  # the default device
    for got in alone + together:
        assert got.images.device.type == "cpu" and got.images.shape == (10, 1, 8, 8)
    if reference is None:  # cpu named: the default's bits
        assert torch.equal(alone[0].images, plain.images) and alone[0].steps == plain.steps
        return
    for got, cpu in zip(alone + together, reference[0] + reference[1]):
        torch.testing.assert_close(got.images, cpu.images, atol=1e-3, rtol=0)
        assert got.confidence == pytest.approx(cpu.confidence, abs=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_update_inversion_runs_on_the_device(device: str, digits) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    target, down, up = one_step_case(digits, 2)
    runs = {d: ATTACKS.get("update-inversion").from_options({"iterations": 20, "device": d})
            .run(adversary(target, down, up, 2), torch.Generator().manual_seed(0)) for d in {"cpu", device}}
    got = runs[device].images
    assert got.device.type == "cpu" and got.shape == (2, 1, 8, 8)
    torch.testing.assert_close(got, runs["cpu"].images, atol=1e-3, rtol=0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible: cuda is a valid device here")
def test_model_inversion_on_a_device_torch_cannot_see_is_refused_in_one_line() -> None:
    with pytest.raises(UserError, match="device 'cuda': use cpu, or cuda where a GPU is visible"):
        ATTACKS.get("inversion").from_options({"device": "cuda"})
    with pytest.raises(UserError, match="device 'cdu'.*cuda"):
        ATTACKS.get("inversion").from_options({"device": "cdu"})
