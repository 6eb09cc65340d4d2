"""What an attack costs, known before it runs: the interface every attack declares.

An evaluation plans every call (attack x threat model x victim x reconstruction strategy)
before any of them runs, from a `Workload`: what the call's cost depends on, read from the run
directory and the partition's sizes (the planner is the user's tool, not the adversary: it may
count the victim's images, which the attack itself may not know), and a `Probe` of the model,
measured once per evaluation on random inputs (`attacks.probe`). Each attack answers
`Attack.cost(work, chunk) -> Cost`: seconds and the peak memory it adds to the process, for one
call, processing `chunk` units at once (`Attack.chunk_unit`: images, models, local steps; None:
all at once). The planner picks the largest chunk that fits the memory budget, hands it to the
call (`Adversary.chunk`), and refuses, in one line naming a cheaper setting
(`Attack.cheaper`), a call that fits at no chunk size or runs past `--time`.

Estimates are arithmetic on the probe, not guesses: e.g. reference models cost their local SGD
steps times the probe's measured step time, a double backward the probe's measured
saved-tensor bytes per image. `benchmarks/bench_audit.py` holds them against measurements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fedattack.resources import human_bytes, human_seconds


@dataclass(frozen=True)
class Probe:
    """The attacked model's unit costs, measured on this machine (`attacks.probe.measure`).

    params: parameters (floats). step_seconds: one local SGD step on a batch of the recipe's
    size, through the evaluation's executor (setup per model in `job_seconds`).
    forward_seconds: one image through the model without a graph, in large batches.
    grad_seconds / grad_bytes: per image, a forward and backward with a graph (what model
    inversion's input gradient does), and the tensors that graph holds; grad_fixed_seconds: what
    such a pass costs whatever its batch (as second_fixed_seconds for the double backward). second_seconds /
    second_bytes: per image, the parameter gradient kept differentiable and a backward
    through it (gradient matching), and what it holds; second_fixed_bytes: what that graph holds
    whatever the batch (parameter-sized tensors). sim_step_seconds / sim_step_bytes: one step of
    update inversion's simulated local run at the recipe's batch size, its share of the outer
    backward included, and what its graph holds until that backward. inversion_step_seconds:
    one step of model inversion, every class's image at once. Each is the time on CPUs free for
    the evaluation; threads: the torch threads it was measured with (the evaluation's);
    slowdown: how much longer the probe's runs took on the wall clock than that, on the machine
    as it was (1.0: free cores), and load: the 1-minute load average then, per core."""

    params: int
    step_seconds: float
    job_seconds: float
    forward_seconds: float
    grad_seconds: float
    grad_fixed_seconds: float
    grad_bytes: int
    second_seconds: float
    second_fixed_seconds: float
    second_bytes: int
    second_fixed_bytes: int
    sim_step_seconds: float
    sim_step_bytes: int
    inversion_step_seconds: float
    input_numel: int
    threads: int = 1
    slowdown: float = 1.0
    load: float | None = None

    @property
    def param_bytes(self) -> int:
        return 4 * self.params


@dataclass(frozen=True)
class Workload:
    """What one attack call's cost depends on.

    samples: the victim's training images (what one local run goes over; its class mix is
    not here). rounds: the victim's uplinks the threat model sees; clients: the uplinks per
    round it sees (1 for one client's channel). queries: membership queries (members and
    non-members). aux: the adversary's auxiliary images. epochs, batch_size: the local recipe.
    first_layer: (units, inputs) of a fully connected first layer on the wire, or None.
    models: how many models the call attacks (an upper bound's held models, else 1)."""

    samples: int
    rounds: int
    clients: int
    queries: int
    aux: int
    classes: int
    epochs: int
    batch_size: int
    probe: Probe
    first_layer: tuple[int, int] | None = None
    models: int = 1

    def local_steps(self, n: int | None = None) -> int:
        """SGD steps of one local run over n images (default: the victim's)."""
        n = self.samples if n is None else n
        return self.epochs * max(1, math.ceil(n / max(1, self.batch_size)))

    def training_seconds(self, models: int, n: int | None = None) -> float:
        """`models` local runs over n images each, through the executor."""
        return models * (self.probe.job_seconds + self.local_steps(n) * self.probe.step_seconds)


@dataclass(frozen=True)
class Cost:
    """One call's estimate: seconds, and the bytes it adds to the process at its peak.

    `detail` says what dominates, for the plan ("16 reference models x 1,200 steps"). `once`:
    the seconds (of `seconds`) paid once per victim however many reconstruction strategies
    and held models the call covers (reference models, trained once and rebuilt per strategy)."""

    seconds: float
    peak_bytes: int
    detail: str = ""
    once: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.seconds + other.seconds, max(self.peak_bytes, other.peak_bytes),
                    "; ".join(d for d in (self.detail, other.detail) if d), self.once + other.once)

    def times(self, k: float) -> Cost:
        """The cost over k strategies or models: `once` paid once, the rest k times."""
        return Cost(self.once + (self.seconds - self.once) * k, self.peak_bytes, self.detail, self.once)


UNKNOWN = Cost(float("nan"), 0, "cost not declared")
# The process's peak over the bytes a graph saves for backward (the backward's own gradients and
# the allocator's slack): measured 2.0-2.7 on the double backward of mnist-mlp at 600-2,400 images.
GRAPH_PEAK = 3.0


@dataclass(frozen=True)
class Budget:
    """What an evaluation may spend: the process's resident memory (bytes), and seconds (None:
    no limit). `source` says where the memory figure came from, for the plan."""

    memory: int
    seconds: float | None = None
    source: str = "--memory"
    time_source: str = "--time"

    def describe(self) -> str:
        time = "no time limit" if self.seconds is None else f"{human_seconds(self.seconds)} ({self.time_source})"
        return f"memory {human_bytes(self.memory)} ({self.source}), {time}"


@dataclass
class Decision:
    """The planner's answer for one call: run it (with `chunk`, None: unchunked) or refuse it."""

    cost: Cost
    chunk: int | None = None
    refused: str = ""  # the one-line reason, with the cheaper setting that would fit
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def runs(self) -> bool:
        return not self.refused


def largest_chunk(fits: Any, most: int) -> int | None:
    """The largest chunk in 1..most for which `fits(chunk)` holds (fits is monotone: smaller
    chunks need less memory), or None when even 1 does not fit."""
    if most < 1 or not fits(1):
        return None
    lo, hi = 1, most
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def cheaper_setting(attack: Any, work: Workload, memory: int, seconds: float | None, setting: str,
                    values: list[Any]) -> str:
    """"--set setting=v fits" for the first of `values` (cheapest last) at which the attack's
    cost fits `memory` and `seconds`, or "" if none does."""
    import dataclasses

    for value in values:
        if value == getattr(attack.settings, setting):
            continue
        trial = type(attack)(dataclasses.replace(attack.settings, **{setting: value}))
        cost = trial.cost(work, None)
        if cost.peak_bytes <= memory and (seconds is None or cost.seconds <= seconds):
            return (f"--set {setting}={value} fits (~{human_seconds(cost.seconds)}, "
                    f"~{human_bytes(cost.peak_bytes)} a victim)")
    return ""
