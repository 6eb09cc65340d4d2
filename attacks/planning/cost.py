"""What an attack costs, known before it runs: the interface every attack declares.

An evaluation plans every call (attack x threat model x victim x reconstruction strategy)
before any of them runs, from a `Workload`: what the call's cost depends on, read from the run
directory and the partition's sizes (the planner is the user's tool, not the adversary: it may
count the victim's images, which the attack itself may not know), and a `Probe` of the model,
measured once per evaluation on random inputs (`attacks.planning.probe`: the generic units every
family uses; a family's own, `Units`, measured by that family when one of its attacks is
planned). Each attack answers
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
from typing import TYPE_CHECKING, Any, TypeVar

from fedattack.resources import human_bytes, human_seconds

if TYPE_CHECKING:
    from fedattack.target import Target


class Units:
    """Unit costs a family of attacks measures for itself (its `measure`), on the attacked model
    and this machine, the first time a planned attack asks for them (`Probe.unit`): what only
    gradient matching or a simulated local run needs is never measured for an audit that runs
    neither."""

    @classmethod
    def measure(cls: type[U], target: Target, executor: str, seed: int) -> U:
        raise NotImplementedError


U = TypeVar("U", bound=Units)


@dataclass(frozen=True)
class Probe:
    """The attacked model's generic unit costs, measured on this machine for every evaluation
    (`attacks.planning.probe.measure`), and a family's own (`unit`) when one is asked for.

    params: parameters (floats). step_seconds: one local SGD step on a batch of the recipe's
    size, through the evaluation's executor (setup per model in `job_seconds`).
    stacked_step_seconds: what each further model adds to a step when the executor trains
    models side by side in one stack (the batched executor); None: it trains them one after
    another (the sequential one), so a step of k models costs k steps.
    forward_seconds: one image through the model without a graph, in large batches.
    input_numel: the numbers in one input image. `target`, `executor` and `seed` are what a
    family's units are measured on; `measured` holds them once measured (or given, in a test).
    Each time is on CPUs free for the evaluation; threads: the torch threads it was measured
    with (the evaluation's); slowdown: how much longer the probe's runs took on the wall clock
    than that, on the machine as it was (1.0: free cores), and load: the 1-minute load average
    then, per core."""

    params: int
    step_seconds: float
    job_seconds: float
    forward_seconds: float
    input_numel: int
    target: Target | None = field(default=None, compare=False, repr=False)
    executor: str = "sequential"
    seed: int = 0
    measured: dict[type[Units], Units] = field(default_factory=dict, compare=False, repr=False)
    threads: int = 1
    slowdown: float = 1.0
    load: float | None = None
    stacked_step_seconds: float | None = None

    @property
    def stacks(self) -> bool:
        """Whether the executor trains several models in one stack (one step for all of them)."""
        return self.stacked_step_seconds is not None

    @property
    def param_bytes(self) -> int:
        return 4 * self.params

    def unit(self, kind: type[U]) -> U:
        """The family's units `kind`, measured now if no one measured them yet."""
        if kind not in self.measured:
            if self.target is None:
                raise ValueError(f"no {kind.__name__} were given and no model is at hand to measure them")
            self.measured[kind] = kind.measure(self.target, self.executor, self.seed)
        found = self.measured[kind]
        assert isinstance(found, kind)
        return found


@dataclass(frozen=True)
class Workload:
    """What one attack call's cost depends on.

    samples: the victim's training images (what one local run goes over; its class mix is
    not here). rounds: the victim's uplinks the threat model sees; clients: the uplinks per
    round it sees (1 for one client's channel). queries: membership queries (members and
    non-members). aux: the adversary's auxiliary images. epochs, batch_size: the local recipe.
    first_layer: (units, inputs) of a fully connected first layer on the wire, or None.
    models: how many models the call attacks (an upper bound's held models, else 1).
    evaluation: the test-split images an attack may score against (chance baselines draw from them)."""

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
    evaluation: int = 0  # the evaluation pool's test-split images (0: not known)

    def local_steps(self, n: int | None = None) -> int:
        """SGD steps of one local run over n images (default: the victim's)."""
        n = self.samples if n is None else n
        return self.epochs * max(1, math.ceil(n / max(1, self.batch_size)))

    def training_seconds(self, models: int, n: int | None = None, stack: int | None = None) -> float:
        """`models` local runs over n images each, through the executor: one after another, or,
        on an executor that stacks them, in stacks of `stack` models (None: all in one), each
        step paying a fixed part once per stack and `stacked_step_seconds` per model."""
        p, steps = self.probe, self.local_steps(n)
        if p.stacked_step_seconds is None or models <= 1:
            return models * (p.job_seconds + steps * p.step_seconds)
        size = max(1, min(models, stack or models))
        fixed = max(0.0, p.step_seconds - p.stacked_step_seconds)
        return models * p.job_seconds + steps * (math.ceil(models / size) * fixed + models * p.stacked_step_seconds)


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
