"""Recovering the client's labels from its update, through the last layer's bias.

With softmax cross-entropy the bias gradient of one sample is p - onehot(y): only the true
class is negative (iDLG, Zhao et al. 2020), so one step on one image gives the label exactly.
Over a whole local run (Dimitrov et al. 2022; Wainakh et al. 2022's LLG for a batch) the bias
moves by -lr * sum over steps of the batch mean of (p - onehot(y)); each sample is seen once per
epoch, so with T = E * N / B steps and p_bar the softmax averaged over the run,

    delta_b = -lr * (T * p_bar - E * n / B)   =>   n = B * delta_b / (lr * E) + N * p_bar.

p_bar is unknown; we estimate it from the model's softmax on probe inputs at weights interpolated
between the downlink and the uplink (the run's path, assumed straight): on noise by default, or
per class on labelled auxiliary images, which makes N * p_bar = Q n and n a small linear solve.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedattack.attacks.data_reconstruction.objectives import Forward, State


@dataclass(frozen=True)
class LabelEstimate:
    """Labels sorted by class (one per sample) and the per-class counts they come from."""

    labels: torch.Tensor
    counts: torch.Tensor


def output_bias_key(params: State, num_classes: int) -> str:
    """The last 1-D parameter of length `num_classes`: the output layer's bias in every zoo model."""
    keys = [k for k, v in params.items() if v.dim() == 1 and v.numel() == num_classes]
    if not keys:
        raise ValueError(f"no output bias of length {num_classes} among {list(params)}")
    return keys[-1]


def label_from_gradient(grad: State, bias_key: str) -> int:
    """iDLG: the one class whose bias gradient is negative (exact for one image, one step)."""
    return int(grad[bias_key].argmin())


def labels_from_counts(counts: torch.Tensor) -> torch.Tensor:
    """One label per sample, sorted by class."""
    return torch.repeat_interleave(torch.arange(len(counts), device=counts.device), counts)


def round_counts(raw: torch.Tensor, total: int) -> torch.Tensor:
    """Non-negative integers summing to `total`, closest to `raw` (largest remainder)."""
    raw = raw.clamp(min=0)
    raw = raw * (total / raw.sum()) if raw.sum() > 0 else torch.full_like(raw, total / len(raw))
    counts = raw.floor().long()
    short = total - int(counts.sum())
    if short > 0:
        counts[torch.argsort(raw - counts, descending=True)[:short]] += 1
    return counts


def path_points(down: State, up: State, points: int) -> list[State]:
    """Weights along the straight line down -> up (the run's path, assumed straight)."""
    return [{k: down[k] + t * (up[k] - down[k]) for k in down} for t in torch.linspace(0, 1, points).tolist()]


def class_softmax(forward: Forward, path: list[State], probes: torch.Tensor,
                  probe_labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Q[:, c]: the softmax averaged over the path and over probes of class c (all probes when
    there is none of class c), so N * p_bar = Q @ n for a client with counts n."""
    with torch.no_grad():
        soft = torch.stack([forward(p, probes).softmax(1) for p in path]).mean(0)
    overall = soft.mean(0)
    columns = [soft[probe_labels == c].mean(0) if (probe_labels == c).any() else overall
               for c in range(num_classes)]
    return torch.stack(columns, dim=1)


def solve_counts(q: torch.Tensor, residual: torch.Tensor, total: int) -> torch.Tensor:
    """n >= 0 with (I - Q) n = residual and sum n = total, in the least-squares sense."""
    from scipy.optimize import nnls  # deferred: discovery stays light

    system = torch.eye(len(residual), dtype=torch.float64) - q.double().cpu()
    a = torch.cat([system, 10.0 * torch.ones(1, len(residual), dtype=torch.float64)])
    b = torch.cat([residual.double().cpu(), torch.tensor([10.0 * total], dtype=torch.float64)])
    solution, _ = nnls(a.cpu().numpy(), b.cpu().numpy())
    return torch.as_tensor(solution, dtype=torch.float32, device=residual.device)


def estimate_label_counts(forward: Forward, down: State, up: State, num_samples: int, *, lr: float,
                          epochs: int, batch_size: int, bias_key: str, gen: torch.Generator,
                          input_shape: tuple[int, ...], probes: torch.Tensor | None = None,
                          probe_labels: torch.Tensor | None = None, num_probes: int = 64,
                          points: int = 8) -> LabelEstimate:
    """Label counts of the client's `num_samples` images from its bias update (see module doc).

    Assumes the adversary knows the sample count and the recipe (lr, epochs, batch size): the
    threat model's "recipe known" and "sample count known". `bias_key`: see `output_bias_key`.
    Probes estimate the client's mean softmax: by default `num_probes` uniform-noise images drawn
    from `gen` (good while the model is untrained, biased once it predicts confidently);
    auxiliary images with their labels (`probe_labels`) instead give per-class softmax means and
    the counts solve n - Q n = residual, which stays right on a trained model. A FedProx pull on
    the bias is ignored (it shrinks delta_b by about mu * lr * T / 2)."""
    if probes is None:
        probes = torch.rand((num_probes, *input_shape), generator=gen, device=gen.device)
        probes = probes.to(up[bias_key].device)
    path = path_points(down, up, points)
    num_classes = up[bias_key].numel()
    batch = min(batch_size, num_samples)
    residual = batch * (up[bias_key] - down[bias_key]) / (lr * epochs)
    if probe_labels is None:
        unlabelled = torch.full((len(probes),), -1, device=probes.device)
        q = class_softmax(forward, path, probes, unlabelled, num_classes)
        raw = residual + num_samples * q[:, 0]
    else:
        q = class_softmax(forward, path, probes, probe_labels, num_classes)
        raw = solve_counts(q, residual, num_samples)
    counts = round_counts(raw, num_samples)
    return LabelEstimate(labels_from_counts(counts), counts)


def count_accuracy(estimated: torch.Tensor, true: torch.Tensor) -> float:
    """Share of the samples whose label is accounted for: sum_c min(n_hat_c, n_c) / N."""
    return float(torch.minimum(estimated, true).sum()) / float(true.sum())
