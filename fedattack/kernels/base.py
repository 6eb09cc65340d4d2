"""Step kernels: a method's own way of training many clients' local problems at once.

The batched executors own what is the same for every method: which clients stack together
(problems of equal shapes), the minibatches and noise the sequential loop would give each
client, the stacked parameters, how many clients share a stack and whether stacks run side by
side in threads (`Chunking`, as the kernel asks), and handing each stack over. What a step
computes belongs to the method: `Target.step_kernel(problem)` returns a `StepKernel`, which
trains a `Stack` through all its local steps in place, or None, and then every step is
`vmap(grad(local_loss))` with the declared optimisers. The executors never ask which method,
or which kernel, they run.

A kernel computes what the sequential loop computes, within float32 tolerance: the test suite
holds every kernel a registered method returns to the sequential executor, and a contributor's
kernel the same way (`tests/examples/` has one). Built in: `dense` and `conv`
(`fedattack.kernels.dense`, `.conv`: the zoo's MLP and CNNs on the cross-entropy, with a
proximal pull, by plain SGD), chosen from what a method declares (`fedattack.kernels.standard`);
WAFFLe's lives beside WAFFLe (`targets/waffle/kernel.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

if TYPE_CHECKING:
    from fedattack.target import Target

State = dict[str, torch.Tensor]


@dataclass
class Stack:
    """C clients' local problems, stacked, with every step laid out: what a kernel trains.

    Clients are sorted by their number of steps, so the clients still training at step s are
    the first `active[s]`. Step s of client c trains on the rows `rows[s, c]` of `x` and `y`
    with the sample weights `weights[s, c]` (zero on padding: a short batch is padded with its
    first row) and the noise `noise[k][s, c]`. `x` holds the raw inputs, as the dataset has them
    (`target.normalized` gives what the model reads). `options` are the executor's kernel
    options (`batched-native` passes "native": a kernel with a compiled variant uses it).
    """

    target: Target
    params: State            # (C, ...) each; trained in place
    consts: State            # (C, ...) each
    noise: State             # (S, C, ...) each
    x: torch.Tensor          # (N, ...) every stacked client's training inputs, concatenated
    y: torch.Tensor          # (N,)
    rows: torch.Tensor       # (S, C, B)
    weights: torch.Tensor    # (S, C, B)
    active: list[int]        # (S,)
    options: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Chunking:
    """How a round's clients are split for a kernel on a CPU: at most `group` clients a stack
    (None: all of them in one), and stacks side by side in Python threads, one torch thread
    each, where every thread gets at least `thread_min` clients (None: never in threads)."""

    group: int | None = None
    thread_min: int | None = None


class StepKernel:
    """Base class of step kernels (see the module docstring); `label` says which one it is."""

    label: ClassVar[str] = ""

    def chunking(self, options: frozenset[str]) -> Chunking:
        """How the executor should split clients for this kernel (one stack by default)."""
        return Chunking()

    def prepare(self, options: frozenset[str]) -> None:
        """Called by the executor before it hands out a round's stacks, in its own thread: what
        must happen once before stacks train side by side (a compiled variant built)."""

    def train(self, stack: Stack) -> None:
        """Every local step of every stacked client, in place on `stack.params`."""
        raise NotImplementedError


def gather(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """x[rows] for a (clients, batch) index, by index_select (a third of advanced indexing's cost)."""
    flat = x.reshape(x.shape[0], -1).index_select(0, rows.reshape(-1))
    return flat.view(*rows.shape, *x.shape[1:])
