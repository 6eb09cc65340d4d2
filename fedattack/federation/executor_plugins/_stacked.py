"""Local SGD of several clients as one computation over stacked parameters.

Each client keeps exactly the minibatches and noise the sequential loop would give it (its own
generators, keyed by seed, round and client); only the arithmetic is shared. Clients are sorted
by their number of steps, so the clients still training at any step are a prefix of the stack:
a finished client simply drops out of the batch instead of burning compute on masked steps.
A client's short last batch is padded with zero-weight samples (`Batch.w`), which leaves its
loss, and so its gradient, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.func import grad, vmap

from fedattack import optim
from fedattack.kernels import Stack, StepKernel, gather
from fedattack.rng import generator
from fedattack.target import ClientContext, LocalData, LocalProblem, State, Target
from fedattack.training import Batch, draw_noise, epoch_orders


@dataclass
class TrainRequest:
    """One call of `ctx.train`: a client's local problem and the data it trains on."""

    target: Target
    problem: LocalProblem
    data: LocalData
    ctx: ClientContext


@dataclass
class StepPlan:
    """Every step of a group of clients, laid out for gathering (clients sorted by steps)."""

    order: list[int]          # position in the request list of each stacked client
    rows: torch.Tensor        # (S, C, B) rows of the concatenated training data
    weights: torch.Tensor     # (S, C, B) per-sample weights, zero for padding
    active: list[int]         # clients still training at each step (a prefix of the stack)
    counts: list[int]         # number of steps of each stacked client


def signature(req: TrainRequest) -> tuple:
    """Requests with equal signatures can be stacked into one computation."""
    def shapes(state: State) -> tuple:
        return tuple((k, tuple(v.shape), v.dtype) for k, v in state.items())

    x, y = req.data.x_train, req.data.y_train
    noise = tuple(sorted(req.target.noise_shapes(req.problem).items()))
    return (shapes(req.problem.params), shapes(req.problem.consts), noise,
            tuple(x.shape[1:]), x.dtype, y.dtype)


def plan_steps(reqs: list[TrainRequest]) -> StepPlan:
    """The sequential loop's batch order for every client, padded to the widest batch."""
    recipe = reqs[0].target.recipe
    grids = [step_grid(epoch_orders(r.data.size, recipe.epochs, r.ctx.seed, r.ctx.round, r.ctx.client),
                       recipe.batch_size) for r in reqs]
    order = sorted(range(len(reqs)), key=lambda i: -len(grids[i]))
    total = len(grids[order[0]])
    # the widest batch: a client's first batch of an epoch holds min(batch_size, its samples)
    width = max([min(recipe.batch_size, r.data.size) for r, g in zip(reqs, grids) if len(g)] or [1])
    rows = torch.zeros(total, len(reqs), width, dtype=torch.long)
    weights = torch.zeros(total, len(reqs), width)
    offset = 0
    for col, i in enumerate(order):
        if len(grids[i]):
            r, w = client_rows(grids[i], width)
            rows[:len(r), col], weights[:len(w), col] = r + offset, w
        offset += reqs[i].data.size
    active = [sum(len(grids[i]) > s for i in order) for s in range(total)]
    counts = [len(grids[i]) for i in order]
    return StepPlan(order, rows, weights, active, counts)


def step_grid(orders: list[torch.Tensor], batch_size: int) -> torch.Tensor:
    """`step_batches` as one (steps, batch_size) tensor, short batches padded with -1: each
    epoch's order padded to whole batches and viewed as rows, instead of a slice per step
    (a client's few hundred slices cost more than its share of a round's arithmetic)."""
    if not orders or not len(orders[0]):
        return torch.zeros(0, batch_size, dtype=torch.long)
    n = len(orders[0])
    per_epoch = -(-n // batch_size)
    padded = F.pad(torch.stack(orders), (0, per_epoch * batch_size - n), value=-1)
    return padded.view(len(orders) * per_epoch, batch_size)


def client_rows(grid: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(steps, width) sample rows, short batches padded with their first row, and their weights.

    Weights are 1/len of the step's batch, computed like the sequential loop's (in double,
    then rounded to float32), and zero on padding.
    """
    rows = grid[:, :width]  # width <= batch_size: the columns cut hold only padding
    valid = rows >= 0
    weights = (valid.double() / valid.sum(1, keepdim=True)).float()
    return torch.where(valid, rows, rows[:, :1]), weights


def round_noise(reqs: list[TrainRequest], plan: StepPlan) -> dict[str, torch.Tensor]:
    """Each client's per-step noise for the whole round, as (S, C, *shape) tensors."""
    shapes = reqs[0].target.noise_shapes(reqs[0].problem)
    if not shapes:
        return {}
    out = {k: torch.zeros(len(plan.active), len(reqs), *s) for k, s in shapes.items()}
    bulk = bulk_draws_match(shapes)
    for col, (i, count) in enumerate(zip(plan.order, plan.counts)):
        ctx = reqs[i].ctx
        draws = draw_steps(shapes, generator(ctx.seed, "noise", ctx.round, ctx.client), count, bulk)
        for k in shapes:
            out[k][:count, col] = draws[k]
    return out


def draw_steps(shapes: dict[str, tuple[int, ...]], gen: torch.Generator, count: int,
               bulk: bool) -> dict[str, torch.Tensor]:
    """`count` successive `draw_noise` calls, in one draw when the generator allows it."""
    if not bulk:
        per_step = [draw_noise(shapes, gen) for _ in range(count)]
        return {k: torch.stack([d[k] for d in per_step]) if per_step else torch.zeros(0, *s)
                for k, s in shapes.items()}
    sizes = [torch.Size(s).numel() for s in shapes.values()]
    flat = torch.rand(count, sum(sizes), generator=gen)
    parts = flat.split(sizes, dim=1)
    return {k: p.reshape(count, *s) for (k, s), p in zip(shapes.items(), parts)}


_BULK_OK: dict[tuple, bool] = {}


def bulk_draws_match(shapes: dict[str, tuple[int, ...]]) -> bool:
    """Whether one big uniform draw equals successive small ones (checked once per layout)."""
    key = tuple(shapes.items())
    if key not in _BULK_OK:
        a, b = torch.Generator().manual_seed(12345), torch.Generator().manual_seed(12345)
        seq = [draw_noise(shapes, a) for _ in range(3)]
        bulk = draw_steps(shapes, b, 3, bulk=True)
        _BULK_OK[key] = all(torch.equal(bulk[k][s], seq[s][k]) for k in shapes for s in range(3))
    return _BULK_OK[key]


def stack(states: list[State], device: torch.device) -> State:
    return {k: torch.stack([s[k] for s in states]).to(device) for k in states[0]}


def train_stacked(reqs: list[TrainRequest], device: torch.device, kernel: StepKernel | None = None,
                  options: frozenset[str] = frozenset()) -> list[State]:
    """Run the sequential loop of every request at once; returns trained params per request.

    `kernel` (the method's `step_kernel`, with the executor's kernel `options`) trains the
    stack; None: each step is `vmap(grad(local_loss))`.
    """
    target = reqs[0].target
    plan = plan_steps(reqs)
    ordered = [reqs[i] for i in plan.order]
    params = stack([r.problem.params for r in ordered], device)
    x = torch.cat([r.data.x_train for r in ordered]).to(device)
    y = torch.cat([r.data.y_train for r in ordered]).to(device)
    rows, weights = plan.rows.to(device), plan.weights.to(device)
    consts = stack([r.problem.consts for r in ordered], device) if reqs[0].problem.consts else {}
    noise = {k: v.to(device) for k, v in round_noise(reqs, plan).items()}
    if kernel is not None:
        kernel.train(Stack(target, params, consts, noise, x, y, rows, weights, plan.active, options))
    else:
        vmap_steps(target, plan, params, consts, noise, x, y, rows, weights)
    out: list[State] = [{}] * len(reqs)
    for col, i in enumerate(plan.order):  # copies: a view would drag every client's weights along
        out[i] = {k: v[col].to("cpu", copy=True) for k, v in params.items()}
    return out


def vmap_steps(target: Target, plan: StepPlan, params: State, consts: State, noise: State,
               x: torch.Tensor, y: torch.Tensor, rows: torch.Tensor, weights: torch.Tensor) -> None:
    """Every step as one vmap(grad(local_loss)) over the clients still training, in place, each
    parameter stepped by its declared optimiser (state stacked like the parameters)."""
    step_grads = vmap(grad(_loss_fn(target)), in_dims=(0, 0, 0, 0, 0, 0, None))
    opts = {k: target.optimizer(k) for k in params}
    states = {k: optim.init_state(opts[k], p) for k, p in params.items()}
    for s, a in enumerate(plan.active):
        r = rows[s, :a]
        g = step_grads({k: v[:a] for k, v in params.items()},
                       {k: v[:a] for k, v in consts.items()}, gather(x, r), y[r], weights[s, :a],
                       {k: v[s, :a] for k, v in noise.items()}, torch.tensor(s, device=x.device))
        for k, p in params.items():  # in place: no new parameter-sized tensors per step
            optim.step_(opts[k], p[:a], g[k], {n: t[:a] for n, t in states[k].items()}, s + 1)


def _loss_fn(target: Target):
    def loss(params: State, consts: State, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor,
             noise: State, step: torch.Tensor) -> torch.Tensor:
        return target.local_loss(params, consts, Batch(x, y, w), noise, step)
    return loss
