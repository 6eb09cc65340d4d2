"""Costs the update-inversion attacks share (`gradient-inversion`, `update-inversion`): reading
the images off a fully connected first layer (`unmix`), and scoring the reconstructions.

The constants are measured, not derived: `unmix` solves one linear program per lit pixel over
the images' span (scipy's HiGHS), which benchmarks/README.md timed idle at 15.4 s for 50 MNIST
images and their 473 lit pixels (0.033 s a program; `LIT_SHARE` of the pixels); scoring matches
N reconstructions to N images by their N x N PSNR (elementwise, `image_metrics.psnr_matrix`), a
linear assignment and one SSIM per pair.
"""

from __future__ import annotations

from fedattack.attacks.data_reconstruction.image_metrics import CHUNK_FLOATS
from fedattack.attacks.planning.cost import Cost, Workload

LP_SECONDS_AT_50 = 0.033  # one of unmix's linear programs over the span of 50 images (MNIST)
LIT_SHARE = 0.6  # of the pixels, lit by some image of a 50-image MNIST client (473 of 784)
PAIR_SECONDS = 1.5e-9  # one pixel of one (reconstruction, image) pair's squared difference
ASSIGN_SECONDS = 2e-10  # scipy's linear assignment, per N^3
SSIM_SECONDS = 4e-4  # one pair's SSIM on 28x28 (scales with the pixels)


def scoring_cost(work: Workload) -> Cost:
    """Matching `work.samples` reconstructions to as many real images, then scoring each pair."""
    n, pixels = work.samples, work.probe.input_numel
    seconds = n * n * pixels * PAIR_SECONDS + n**3 * ASSIGN_SECONDS + n * SSIM_SECONDS * pixels / 784
    pairs = 4 * min(CHUNK_FLOATS, n * n * pixels)  # the pairwise differences held at once
    return Cost(seconds, 3 * n * n * 8 + pairs, f"scoring {n:,} images")


def first_layer_applies(work: Workload) -> str:
    """Why the first layer's update cannot give the images ("" if it can): it must be fully
    connected on the pixels and have more units than the victim has images."""
    if work.first_layer is None:
        return "the model's first layer is not fully connected on the pixels"
    units, _ = work.first_layer
    if work.samples >= units:
        return (f"the victim's {work.samples:,} images are more than its first layer's {units} units "
                "(the update's row space is then every image)")
    return ""


def unmix_cost(work: Workload, programs: int) -> Cost:
    """One linear program per candidate pixel (`programs`, 0: every pixel), each over the span
    of the victim's images."""
    n, pixels = work.samples, work.probe.input_numel
    count = programs or int(LIT_SHARE * pixels)
    seconds = count * LP_SECONDS_AT_50 * max(1.0, n / 50) * pixels / 784
    return Cost(seconds, 8 * (pixels + 1) * (n + 1) * 20 + 2**24, f"{count:,} linear programs over {n:,} images")

