"""What happens to a WAFFLe client's selection pi during one local run (issue #14 diagnostic).

Takes a finished `waffle-ibp` run, and for some clients of each group replays one more local
round from the run's final server state and the client's own private state, with the run's
recipe (its optimisers, temperature, fine-tuning), recording at every local step how far pi has
moved since the round began and the two forces on pi's logit: the gradient of the NLL and the
gradient of the KL / |D_i| (the loss's two terms, split by evaluating it once more without the
KL). Printed per local epoch, per group: whether the NLL pushes the selection somewhere, the KL
pulls it back, and whether the two groups are pushed in different directions.

    python benchmarks/lab/waffle_pi_trace.py RUN_DIR --data-root DIR [--clients 4]

The replay uses its own batch order and noise (seeded), not the run's: it asks what a round
does to pi from where the federation ended, not to reproduce a particular round.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from fedattack import optim
from fedattack.data import load_dataset
from fedattack.data.partition import make_partition
from fedattack.federation.loop import client_data
from fedattack.federation.rundir import Federation
from fedattack.federation.train import build_target
from fedattack.target import LocalData, State, Target
from fedattack.training import Batch, draw_noise, step_batches


def replay(target: Target, server: State, private: State, data: LocalData, client: int,
           seed: int) -> list[dict[str, torch.Tensor]]:
    """One local round; per step: pi, and d NLL / d logit and d KL / d logit (first layer)."""
    layer = next(iter(target.factorized))  # type: ignore[attr-defined]
    name = f"{layer}.pi_logit"
    problem = target.start_local(target.broadcast(server, client, 0), private, data)
    params = {k: v.detach().clone().requires_grad_(True) for k, v in problem.params.items()}
    opts = {k: target.optimizer(k) for k in params}
    states = {k: optim.init_state(opts[k], v) for k, v in params.items()}
    no_kl = {**problem.consts, "n_train": torch.tensor(float("inf"))}
    gen = torch.Generator().manual_seed(seed)
    rec = target.recipe
    trace = []
    for step, idx in enumerate(step_batches(data.size, rec.epochs, rec.batch_size, seed, 0, client)):
        batch = Batch(data.x_train[idx], data.y_train[idx], torch.full((len(idx),), 1.0 / len(idx)))
        noise = draw_noise(target.noise_shapes(problem), gen)
        s = torch.tensor(step)
        keys = list(params)
        grads = torch.autograd.grad(target.local_loss(params, problem.consts, batch, noise, s),
                                    [params[k] for k in keys])
        g_nll = torch.autograd.grad(target.local_loss(params, no_kl, batch, noise, s), params[name])[0]
        g_all = dict(zip(keys, grads))
        trace.append({"pi": torch.sigmoid(params[name].detach()), "g_nll": g_nll,
                      "g_kl": g_all[name] - g_nll})
        params = {k: optim.step(opts[k], p.detach(), g_all[k], states[k], step + 1)
                  .detach().requires_grad_(True) for k, p in params.items()}
    trace.append({"pi": torch.sigmoid(params[name].detach())})
    return trace


def epoch_rows(trace: list[dict[str, torch.Tensor]], epochs: int) -> list[tuple[float, ...]]:
    """Per epoch: mean |pi - pi at round start|, mean |g_nll|, mean |g_kl|, their cosine."""
    steps = len(trace) - 1
    per = steps // epochs
    pi0 = trace[0]["pi"]
    rows = []
    for e in range(epochs):
        part = trace[e * per:(e + 1) * per]
        g_n = torch.stack([t["g_nll"] for t in part]).mean(0)
        g_k = torch.stack([t["g_kl"] for t in part]).mean(0)
        moved = float((trace[(e + 1) * per]["pi"] - pi0).abs().mean())
        cos = float(torch.nn.functional.cosine_similarity(g_n, g_k, dim=0))
        rows.append((moved, float(g_n.abs().mean()), float(g_k.abs().mean()), cos))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--clients", type=int, default=4, help="per group")
    args = parser.parse_args()
    torch.set_num_threads(1)
    fed = Federation(args.run, deep_verify=False)
    spec = fed.spec
    dataset = load_dataset(spec.dataset, args.data_root, False)
    partition = make_partition(spec.partition, dataset, spec.num_clients, spec.seed,
                               **spec.partition_options)
    target = build_target(spec, dataset, partition.num_clients, args.data_root)
    server = fed.server_state()
    groups = partition.groups()
    drift: dict[str, list[torch.Tensor]] = {}
    for group in sorted(set(groups)):
        trained = [k for k, g in enumerate(groups) if g == group and fed.private_state(k)]
        for k in trained[:args.clients]:
            trace = replay(target, server, fed.private_state(k), client_data(dataset, partition, k),
                           k, spec.seed)
            drift.setdefault(group, []).append(torch.stack([t["g_nll"] for t in trace[:-1]]).mean(0))
            print(f"{group} client {k}: epoch, moved |pi - pi_start|, mean |dNLL/dlogit|, "
                  f"mean |dKL/dlogit|, cos(NLL, KL) of the epoch-mean gradients")
            for e, row in enumerate(epoch_rows(trace, target.recipe.epochs)):
                print(f"  {e + 1}  {row[0]:.4f}  {row[1]:.2e}  {row[2]:.2e}  {row[3]:+.2f}")
    if len(drift) == 2:
        a, b = (torch.stack(v).mean(0) for v in drift.values())
        within = [float(torch.nn.functional.cosine_similarity(x, y, dim=0))
                  for v in drift.values() for i, x in enumerate(v) for y in v[i + 1:]]
        print(f"cos(round-mean NLL gradient on pi of group A, of group B): "
              f"{float(torch.nn.functional.cosine_similarity(a, b, dim=0)):+.2f}; "
              f"within a group, mean over pairs: {sum(within) / max(len(within), 1):+.2f}")


if __name__ == "__main__":
    main()
