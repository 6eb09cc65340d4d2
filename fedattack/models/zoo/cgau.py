"""Classifiers of conditional gated activation units over features of a frozen extractor (CGAU,
Rieger, Hoegh, Hansen: "Client Adaptation improves Federated Learning with Simulated Non-IID
Clients", FL-ICML 2020, sections 3.1 and 3.2).

A CGAU layer computes z = tanh(W_f x + b_f + v_f) * sigmoid(W_g x + b_g + v_g) (eq. 1), where
v_f, v_g are the client's conditioning: the row of V_f, V_g that its one-hot id selects. Each
client holds only its own row, so here a layer owns one vector `v_f`, `v_g` and a client
supplies its own through `torch.func.functional_call`; they start at zero (the unconditioned
network). Without conditioning the layer is the plain gated unit; `units="relu"` gives the
paper's baseline (Dense + ReLU).

The extractor is frozen: its tensors are buffers, never parameters, so they never train and
never cross the wire (every party holds the same extractor, as with a published pretrained
network). `build_extractor` gives one of
  - `central` / `central:<zoo model>`: that architecture (default per dataset below) trained
    centrally on the dataset's *test* split, which no client ever receives, with its last layer
    removed; trained once and cached (weights loaded back with `weights_only=True`);
  - `torchvision:<arch>` with a user-supplied weights file (e.g. resnet18-f37072fd.pth from
    download.pytorch.org, fetched by the user: nothing is downloaded here), last layer removed,
    grey images repeated to three channels, optionally resized, ImageNet-normalised;
  - `pixels`: the flattened images (no extractor).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from fedattack.atomic import save_tensors
from fedattack.data.types import Dataset
from fedattack.registry import UserError
from fedattack.suggest import did_you_mean

CENTRAL_ARCH = {"digits": "digits-mlp", "mnist": "lenet5", "fmnist": "fmnist-cnn", "cifar10": "cifar-cnn"}
MIN_STEPS = 2000
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class CGAULayer(nn.Module):
    """One layer of gated (or ReLU) units, optionally shifted by the client's conditioning."""

    def __init__(self, d_in: int, d_out: int, conditioned: bool, units: str) -> None:
        super().__init__()
        self.units = units
        self.filter = nn.Linear(d_in, d_out)
        self.gate = nn.Linear(d_in, d_out) if units == "gated" else None
        if conditioned:
            self.v_f = nn.Parameter(torch.zeros(d_out))
            if units == "gated":
                self.v_g = nn.Parameter(torch.zeros(d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.filter(x) + getattr(self, "v_f", 0.0)
        if self.gate is None:
            return f.relu()
        return torch.tanh(f) * torch.sigmoid(self.gate(x) + getattr(self, "v_g", 0.0))


class CGAUNet(nn.Module):
    """Frozen extractor, then `layers` CGAU layers (`cgau1`, ...) and a linear output (`out`).

    `forward` takes images (4-D, passed through the extractor) or features (2-D), and optional
    dropout masks, one per hidden layer, applied between layers.
    """

    def __init__(self, extractor: nn.Module, feature_dim: int, num_classes: int, hidden: int,
                 layers: int, conditioned: bool, units: str) -> None:
        super().__init__()
        if units not in ("gated", "relu"):
            raise UserError(f"units={units!r} is not known; use gated or relu")
        self.extractor = extractor
        self.depth = layers
        d = feature_dim
        for i in range(1, layers + 1):
            self.add_module(f"cgau{i}", CGAULayer(d, hidden, conditioned, units))
            d = hidden
        self.out = nn.Linear(d, num_classes)

    def forward(self, x: torch.Tensor, masks: list[torch.Tensor] | None = None) -> torch.Tensor:
        z = x if x.dim() == 2 else self.extractor(x)
        for i in range(1, self.depth + 1):
            z = getattr(self, f"cgau{i}")(z)
            if masks is not None:
                z = z * masks[i - 1]
        return self.out(z)


class FrozenExtractor(nn.Module):
    """A network whose tensors are buffers, kept in eval mode, with optional image preprocessing."""

    def __init__(self, net: nn.Module, key: str, imagenet: bool = False, size: int = 0) -> None:
        super().__init__()
        for module in net.modules():
            for name, p in list(module.named_parameters(recurse=False)):
                delattr(module, name)
                module.register_buffer(name, p.detach())
            # re-initialising a model must not touch the extractor
            module.reset_parameters = _keep  # type: ignore[assignment]  # Module types attributes as Tensor | Module
        self.net, self.key, self.imagenet, self.size = net, key, imagenet, size
        self.eval()

    def train(self, mode: bool = True) -> FrozenExtractor:
        return super().train(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.imagenet:
            x = x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x
            if self.size:
                x = F.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False)
            mean = torch.tensor(IMAGENET_MEAN, dtype=x.dtype).view(1, 3, 1, 1)
            x = (x - mean) / torch.tensor(IMAGENET_STD, dtype=x.dtype).view(1, 3, 1, 1)
        return self.net(x).flatten(1)


def _keep() -> None:
    """Stands in for `reset_parameters` on frozen modules."""


@dataclass(frozen=True)
class ExtractorSpec:
    """What to extract features with (see the module docstring); `dataset` trains `central`."""

    kind: str = "central"
    dataset: str = "digits"
    weights: str = ""
    size: int = 0
    epochs: int = 30
    seed: int = 0
    data_root: str = ""


def build_extractor(spec: ExtractorSpec, input_shape: tuple[int, int, int],
                    num_classes: int, data: Dataset | None = None) -> FrozenExtractor:
    """`data`: the dataset already in memory, used when it is the one the extractor trains on."""
    head, _, arch = spec.kind.partition(":")
    if head == "pixels":
        return FrozenExtractor(nn.Flatten(), "pixels")
    if head == "central":
        return central_extractor(spec, arch or CENTRAL_ARCH.get(spec.dataset, "lenet5"),
                                 input_shape, num_classes, data)
    if head == "torchvision" and arch:
        return torchvision_extractor(arch, spec.weights, spec.size)
    raise UserError(f"extractor {spec.kind!r}{did_you_mean(head, ('central', 'torchvision', 'pixels'))} is not "
                    "known; use central, central:<model>, "
                    "torchvision:<arch> (with extractor_weights=<file>) or pixels")


def strip_head(net: nn.Module) -> nn.Module:
    """Replace the network's last linear layer by the identity, leaving penultimate features."""
    last = [name for name, m in net.named_modules() if isinstance(m, nn.Linear)]
    if not last:
        raise UserError("the extractor has no final linear layer to remove")
    parent_name, _, child = last[-1].rpartition(".")
    parent = net.get_submodule(parent_name) if parent_name else net
    setattr(parent, child, nn.Identity())
    return net


def torchvision_extractor(arch: str, weights: str, size: int) -> FrozenExtractor:
    """A torchvision architecture with the user's weights file, its classifier removed."""
    import torchvision

    path = Path(weights).expanduser() if weights else None
    if path is None or not path.is_file():
        raise UserError(f"torchvision:{arch} needs its weights file: add --set extractor_weights="
                        "<path to a .pth state dict> (download it yourself; nothing is fetched here)")
    try:
        net = torchvision.models.get_model(arch, weights=None)
    except ValueError:
        raise UserError(f"torchvision has no architecture {arch!r}") from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        net.load_state_dict(state)
    except Exception as exc:  # unsafe pickle, wrong architecture, corrupt file
        raise UserError(f"cannot load {path} into {arch}: {str(exc).splitlines()[0][:120]}") from None
    stat = path.stat()
    key = hashlib.sha1(f"{arch}|{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{size}".encode())
    return FrozenExtractor(strip_head(net), f"tv-{arch}-{key.hexdigest()[:12]}", True, size)


def central_extractor(spec: ExtractorSpec, arch: str, input_shape: tuple[int, int, int],
                      num_classes: int, data: Dataset | None = None) -> FrozenExtractor:
    """The zoo model `arch` trained on the test split of `spec.dataset`, cached after the first time."""
    from fedattack.data.cache import cache_root
    from fedattack.models import build_model

    shape = "x".join(map(str, input_shape))
    key = f"{spec.dataset}-{arch}-{shape}-e{spec.epochs}m{MIN_STEPS}-s{spec.seed}"
    path = cache_root() / "extractors" / f"{key}.pt"
    net = build_model(arch, input_shape, num_classes)
    try:
        net.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    except Exception:  # missing, stale or corrupt: train it again
        train_central(net, spec, input_shape, data)
        save_tensors(path, net.state_dict())
    return FrozenExtractor(strip_head(net), f"central-{key}")


def train_central(net: nn.Module, spec: ExtractorSpec, input_shape: tuple[int, int, int],
                  given: Dataset | None = None) -> None:
    """Adam (lr 1e-3, batch 64) on the test split for `epochs` (at least 2,000 steps), seeded."""
    from fedattack.data import load_dataset
    from fedattack.rng import generator
    from fedattack.target import initial_weights

    data = given if given is not None and given.name == spec.dataset else \
        load_dataset(spec.dataset, spec.data_root or None)
    if data.input_shape != tuple(input_shape):
        raise UserError(f"the extractor is trained on {spec.dataset} ({data.input_shape}) but these "
                        f"images are {tuple(input_shape)}; set extractor_data to the dataset you use")
    gen = generator(spec.seed, "extractor")
    net.load_state_dict(initial_weights(net, gen), strict=False)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x, y = data.x_test, data.y_test
    for _ in range(max(spec.epochs, math.ceil(MIN_STEPS / math.ceil(len(y) / 64)))):
        order = torch.randperm(len(y), generator=gen)
        for i in range(0, len(y), 64):
            idx = order[i:i + 64]
            opt.zero_grad()
            F.cross_entropy(net(x[idx]), y[idx]).backward()
            opt.step()


@torch.no_grad()
def embed(extractor: nn.Module, x: torch.Tensor, batch: int = 512) -> torch.Tensor:
    """Features of every image, in batches (the extractor never trains)."""
    return torch.cat([extractor(x[i:i + batch]) for i in range(0, len(x), batch)] or
                     [torch.zeros(0, 0)])
