"""What the active servers' readings share: an image is the ratio of a neuron's weight update to
its bias update, whenever one image alone moved that neuron.

A unit u = relu(w . z + b) of a dense layer on the (normalised) input z gets, in every SGD step,
the update -lr sum_i d_i(t) z_i on w and -lr sum_i d_i(t) on b, summed over the images i that
activate it; if only one image ever does, the ratio of the two whole-run updates is that image's
z exactly, whatever its per-step factors d(t) were, over any number of epochs and batches (Fowl
et al. 2022 read bins of such units, Boenisch et al. 2023 single units). Everything here reads
tensors only: which units to divide is the attack's business; what a client trained is read
off the wire as its method declares it (`trained`), so every method whose uplink carries the
layer is read alike (FedAvg's model, SCAFFOLD's dy, q-FFL's scaled delta).

No de-duplication: several units can read the same image (trap weights catch one image in
several units; an imprint bin and its neighbour can hold the same one), and the score's one-to-
one matching (`readout.matched`) pairs each of the victim's images with one candidate at most,
the best, so a repeat can neither count twice nor hide the exact read. (Dropping the later of
two candidates within a cosine of 0.999 kept the first one found, not the exact one, and
under-reported verbatim reads by 7-9 points; docs/active-server.md has the before and after.)
`distinct` counts the candidates that are not such repeats, for the result.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from fedattack.registry import TARGETS, UserError
from fedattack.target import State, Target
from fedattack.wire import Payload

PLAUSIBLE = (-0.1, 1.1)  # pixel range (after undoing the normalisation) of a candidate image
PLAUSIBLE_SHARE = 0.95  # share of its pixels that must lie in that range
SAME = 0.999  # cosine above which two candidates count as one image (`distinct`)
FLOOR = 1e-7  # bias updates below this share of the largest carry no image (float rounding)


def ratio_images(d_weight: torch.Tensor, d_bias: torch.Tensor, target: Target) -> tuple[torch.Tensor, dict[str, Any]]:
    """Candidate images (N, C, H, W) in [0, 1] from rows of weight updates (U, P) and bias
    updates (U,) of units on the input: each row divided by its bias, the normalisation undone,
    implausible ones (pixels far outside [0, 1]: several images mixed with factors of both signs)
    set aside unless nothing else is left; repeats kept (the module docstring)."""
    d_weight, d_bias = d_weight.double(), d_bias.double()
    moved = d_bias.abs() > FLOOR * float(d_bias.abs().max()) if d_bias.numel() else d_bias.bool()
    z = d_weight[moved] / d_bias[moved, None]
    x = pixels(z, target)
    flat = x.flatten(1)
    inside = ((flat >= PLAUSIBLE[0]) & (flat <= PLAUSIBLE[1])).double().mean(1) >= PLAUSIBLE_SHARE
    images = (x[inside] if bool(inside.any()) else x).clamp(0, 1)
    info = {"units": int(d_bias.numel()), "moved": int(moved.sum()), "plausible": int(inside.sum()),
            "candidates": len(images), "distinct": distinct(images)}
    return images.float(), info


def pixels(z: torch.Tensor, target: Target) -> torch.Tensor:
    """Normalised inputs (N, P) back to images (N, C, H, W) in pixel units (not clamped)."""
    shape = tuple(target.ctx.input_shape)
    x = z.view(-1, *shape)
    norm = target.ctx.normalization
    if norm is None:
        return x
    mean = torch.as_tensor(norm.mean, dtype=x.dtype).view(-1, 1, 1)
    std = torch.as_tensor(norm.std, dtype=x.dtype).view(-1, 1, 1)
    return x * std + mean


def normalised(x: torch.Tensor, target: Target) -> torch.Tensor:
    """Images (N, C, H, W) as the model's first layer sees them, flattened (N, P)."""
    return target.normalized(x).flatten(1)


def distinct(images: torch.Tensor) -> int:
    """How many of the images are not a repeat of an earlier one (within cosine `SAME`)."""
    if len(images) < 2:
        return len(images)
    flat = images.flatten(1).double()
    unit = flat / flat.norm(dim=1, keepdim=True).clamp_min(1e-12)
    repeated = (torch.tril(unit @ unit.T, diagonal=-1) > SAME).any(1)
    return int((~repeated).sum())


def trained(target: Target, down: Payload, up: Payload) -> State:
    """The parameters a client trained, from its downlink and an uplink the server holds in the
    clear (its own; a secure sum the server unmasked; the victim's uplink solved out of one), as
    the method declares its wire (`Target.decode`: FedAvg's model as sent, SCAFFOLD's x + dy,
    q-FFL's w - delta / (L F^q)). It is the registered method's own decode: a defence that masks
    the recorded uplinks makes the defended method's answer None, and these are not masked. A
    positive factor on a whole update (q-FFL's F^q, a clip) leaves every reading here unchanged,
    since each is a ratio of two parts of one update."""
    found = TARGETS.get(target.name).decode(target, down, up)
    if not found:
        raise UserError(f"{target.name}'s uplink decodes to no parameters a server could read")
    return found


def share_read(images: torch.Tensor, truth: torch.Tensor, db: float = 40.0) -> float:
    """The share of `truth` that some image matches above `db` (the server's check of a read on
    images it knows, e.g. when it calibrates its module on public data)."""
    if len(images) == 0 or len(truth) == 0:
        return 0.0
    a, b = images.flatten(1).double(), truth.flatten(1).double()
    mse = ((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T).clamp_min(1e-12) / a.shape[1]
    return float(((-10 * torch.log10(mse)).max(0).values > db).double().mean())


def first_dense(target: Target) -> tuple[str, str]:
    """The first dense layer on the pixels: its weight's name and layout ("linear": (out, P) with
    a bias beside it; "factors": WAFFLe's W_a of (P + 1, F), bias row last), or a one-line refusal."""
    if not target.plain_forward:
        raise UserError(f"{target.name}'s model does not read the pixels through its first layer (its forward "
                        "is its own), so no unit of that layer sees an image; choose another method")
    pixels = math.prod(target.ctx.input_shape)
    for name, shape in target.param_shapes().items():
        if len(shape) == 2 and shape[1] == pixels and name.endswith("weight"):
            return name, "linear"
        if len(shape) == 2 and shape[0] == pixels + 1 and name.endswith("W_a"):
            return name, "factors"
        if len(shape) > 2:
            break
    raise UserError(f"{target.name} on {target.ctx.model} has no dense first layer on the pixels (it starts with "
                    "a convolution); the imprint module works in front of any model")


def layer_update(start: State, after: State, target: Target) -> tuple[torch.Tensor, torch.Tensor]:
    """The first dense layer's update as (U, P) weight rows and (U,) biases, in float64."""
    name, layout = first_dense(target)
    delta = after[name].double() - start[name].double()
    if layout == "factors":
        return delta[:-1].T, delta[-1]
    bias = name[:-len("weight")] + "bias"
    return delta, after[bias].double() - start[bias].double()
