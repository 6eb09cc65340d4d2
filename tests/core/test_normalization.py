"""Input normalisation: statistics of the training split, applied inside the model, recorded in
the manifest; `normalize="none"` is the federation as it was before normalisation existed."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest
import torch

from fedattack.data import load_dataset, normalization
from fedattack.data.normalization import Normalization, channel_statistics, resolve
from fedattack.federation.rundir import Federation
from fedattack.federation.spec import FederationSpec
from fedattack.federation.train import train_federation
from fedattack.registry import UserError
from fedattack.target import Recipe

# The federations whose unnormalised form is checked: the plain and the batched paths, and the two
# WAFFLe variants whose forward passes differ most from FedAvg's.
CASES = [("fedavg", "sequential"), ("fedavg", "batched"), ("waffle-ibp", "sequential"),
         ("waffle-wavg", "sequential")]


def _spec(method: str, executor: str, normalize: str) -> FederationSpec:
    return FederationSpec(method=method, dataset="digits", partition="shards", num_clients=6,
                          model="digits-mlp", rounds=2, fraction=0.5,
                          recipe=Recipe(epochs=1, batch_size=10, lr=0.1), seed=0, record="all",
                          executor=executor, normalize=normalize)


def _digest(run: Path) -> str:
    fed = Federation(run)
    h = hashlib.sha256()
    for k, v in sorted(fed.server_state().items()):
        h.update(k.encode()), h.update(v.contiguous().numpy().tobytes())
    for m in fed.transcript().load():
        for k, v in sorted(m.payload.items()):
            h.update(f"{m.round}/{m.kind}/{m.client}/{k}".encode())
            h.update(v.contiguous().numpy().tobytes())
    for c in range(fed.num_clients):
        for k, v in sorted(fed.private_state(c).items()):
            h.update(k.encode()), h.update(v.contiguous().numpy().tobytes())
    h.update(repr(fed.metrics()["rounds"]).encode())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("method,executor", CASES)
def test_normalize_none_is_the_unnormalised_federation_bit_for_bit(method: str, executor: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`normalize="none"` must be the federation as it was before normalisation existed: the model
    sees the raw pixels. Compared with runs made here, never with a digest from another CPU (torch's
    kernels give other bits on other instruction sets): the identity statistics (mean 0, std 1)
    give x exactly in IEEE arithmetic, so a federation normalised by them must equal the
    unnormalised one bit for bit, and any step that treats "none" differently shows up."""
    plain = train_federation(_spec(method, executor, "none"), tmp_path / "none", progress=False)
    assert Federation(plain).manifest["normalization"] is None
    assert "normalize" not in Federation(plain).manifest["spec"]  # the old identity
    identity = Normalization((0.0,), (1.0,))
    monkeypatch.setattr(normalization, "channel_statistics", lambda x: identity)
    unit = train_federation(_spec(method, executor, "dataset"), tmp_path / "unit", progress=False)
    assert Federation(unit).manifest["normalization"] == identity.to_json()
    assert _digest(plain) == _digest(unit)


def test_statistics_are_per_channel_over_every_training_pixel() -> None:
    x = torch.rand(10_000, 3, 4, 4, generator=torch.Generator().manual_seed(0))
    x[:, 1] = x[:, 1] * 0.5 + 0.2
    norm = channel_statistics(x)
    expected_mean = x.double().transpose(0, 1).reshape(3, -1).mean(1)
    expected_std = x.double().transpose(0, 1).reshape(3, -1).std(1, unbiased=False)
    assert torch.allclose(torch.tensor(norm.mean, dtype=torch.float64), expected_mean, atol=1e-9)
    assert torch.allclose(torch.tensor(norm.std, dtype=torch.float64), expected_std, atol=1e-9)
    out = norm.apply(x)
    assert out.transpose(0, 1).reshape(3, -1).mean(1).abs().max() < 1e-4
    assert (out.transpose(0, 1).reshape(3, -1).std(1) - 1).abs().max() < 1e-3
    assert torch.equal(norm.apply(x[:7]), out[:7])  # elementwise: batches give the same bits


def test_bad_mode_and_statistics_are_user_errors() -> None:
    with pytest.raises(UserError):
        resolve("per-image", torch.zeros(2, 1, 2, 2))
    with pytest.raises(UserError):
        Normalization((0.5,), (0.0,))
    for malformed in ({"mean": [0.1]}, {"mean": "x", "std": [1.0]}, {"mean": [0.1], "std": [float("nan")]},
                      [0.1, 0.3]):
        with pytest.raises(UserError):
            Normalization.from_json(malformed)


def test_normalised_federation_records_and_rebuilds_its_statistics(tmp_path: Path) -> None:
    spec = _spec("fedavg", "batched", "dataset")
    run = train_federation(spec, tmp_path / "norm", progress=False)
    fed = Federation(run)
    digits = load_dataset("digits")
    assert fed.manifest["normalization"] == channel_statistics(digits.x_train).to_json()
    assert fed.spec == spec and fed.manifest["spec"]["normalize"] == "dataset"
    target = fed.target()
    assert target.ctx.normalization == channel_statistics(digits.x_train)
    params = fed.server_state()
    x = digits.x_test[:5]
    plain = torch.func.functional_call(target.model, params, (target.ctx.normalization.apply(x),))
    assert torch.equal(target.forward(params, x), plain)
    unnormalised = train_federation(_spec("fedavg", "batched", "none"), tmp_path / "none", progress=False)
    assert _digest(run) != _digest(unnormalised)


def test_a_spec_written_before_normalisation_reads_as_none() -> None:
    data = _spec("fedavg", "sequential", "none").to_json()
    assert "normalize" not in data
    assert FederationSpec.from_json(data).normalize == "none"
    assert FederationSpec().normalize == "dataset"
    assert dataclasses.replace(FederationSpec(), normalize="none").to_json() == \
        {k: v for k, v in FederationSpec().to_json().items() if k != "normalize"}


def test_cli_and_experiment_files_choose_the_normalisation(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from fedattack.cli import cli
    from fedattack.experiments.plan import federation_spec

    args = ["train", "--dataset", "digits", "--clients", "4", "--fraction", "0.5", "--epochs", "1",
            "--rounds", "1", "--record", "none", "--quiet"]
    for mode, expected in (("none", None), ("dataset", dict)):
        out = tmp_path / mode
        result = CliRunner().invoke(cli, [*args, "--normalize", mode, "--out", str(out)])
        assert result.exit_code == 0, result.output
        recorded = Federation(out).manifest["normalization"]
        assert recorded is None if expected is None else isinstance(recorded, dict)
    bad = CliRunner().invoke(cli, [*args, "--normalize", "per-image", "--out", str(tmp_path / "x")])
    assert bad.exit_code != 0 and "per-image" in bad.output
    assert federation_spec({"normalize": "none"}, "fedavg", "shards", 0).normalize == "none"
    assert federation_spec({}, "fedavg", "shards", 0).normalize == "dataset"


def test_a_method_that_never_normalises_records_none() -> None:
    """CGAU feeds its frozen extractor raw pixels: recording statistics it never applied would
    make attacks normalise inputs the model never saw normalised."""
    from fedattack.federation.train import build_target

    dataset = load_dataset("digits")
    built = {m: build_target(dataclasses.replace(_spec(m, "sequential", "dataset"), method=m), dataset, 6)
             for m in ("fedavg", "cgau")}
    assert built["fedavg"].ctx.normalization is not None
    assert built["cgau"].ctx.normalization is None


def test_apply_gives_the_bits_of_the_formula_and_gradients_after_a_first_use_in_inference_mode() -> None:
    norm = Normalization((0.1307, 0.5), (0.3081, 0.25))
    x = torch.rand(4, 2, 3, 3, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        norm.apply(x.clone())  # the statistics are built (and kept) here first
    expected = (x - torch.tensor(norm.mean).view(2, 1, 1)) / torch.tensor(norm.std).view(2, 1, 1)
    assert torch.equal(norm.apply(x), expected)
    leaf = x.clone().requires_grad_(True)
    norm.apply(leaf).sum().backward()  # an inference tensor here would refuse to be saved for backward
    assert leaf.grad is not None and torch.allclose(leaf.grad[:, 1], torch.full((4, 3, 3), 4.0))
