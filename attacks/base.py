"""The attack contract (Foolbox-style): the base class owns the loop, an attack writes `run`.

`Attack.__call__` is final. It checks what the attack requires, derives the attack's random
generator from the seed, times it, calls `run` with the adversary's inputs only (`Adversary`:
view, knowledge, reconstructed model; never ground truth), hands the guesses to the attack's
`score` together with the `GroundTruth`, scores the reconstruction's guesses too, and builds the
one `AttackResult`. An attack registers itself by defining `name`, and declares the metrics it
reports (`metrics`, `fedattack.results.Metric`): results carry them, so reports, the CLI's
summary and the conformance tests read labels and headlines from there, never from a list.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, final

import torch

from fedattack.attacks.evaluation.truth import GroundTruth
from fedattack.attacks.hidden_parts.base import Reconstructed, Reconstructor
from fedattack.attacks.planning.cost import UNKNOWN, Cost, Workload
from fedattack.attacks.view import Knowledge, Observation, View
from fedattack.provenance import software
from fedattack.registry import ATTACKS, UserError
from fedattack.results import AttackResult, Metric, metric_table
from fedattack.rng import generator
from fedattack.target import build_dataclass


class NotApplicable(Exception):
    """Raised by `run` when this attack cannot work on this model; the result says why."""


@dataclass(frozen=True, kw_only=True)
class NoSettings:
    """An attack without settings."""


@dataclass
class Adversary:
    """Everything an attack's `run` may use: what the threat model let it see, and its guesses."""

    view: View
    knowledge: Knowledge
    obs: Observation  # the victim's observation the model was rebuilt from
    model: Reconstructed  # the victim's model as the adversary rebuilt it
    reconstructor: Reconstructor  # the same strategy, to rebuild shadow models
    executor: str = "sequential"
    # Shadow clients already trained for this victim (`shadow.train_shadows`): shared by every
    # reconstruction strategy and every model the upper bound holds, which all start the shadows
    # from the same downlink, so each set is trained once, not once per strategy and held model.
    trained: dict[tuple[object, ...], list[Observation]] = field(default_factory=dict, repr=False,
                                                                compare=False)
    # How many units (`Attack.chunk_unit`) the call may process at once, chosen by the planner
    # from the memory budget (`attacks.planning.cost`); None: all at once.
    chunk: int | None = None


@dataclass(frozen=True, kw_only=True)
class ResultContext:
    """What every result of one (victim, threat model, reconstruction) records beside its numbers."""

    run: dict[str, Any]  # the attacked federation (path, method, dataset, partition, seed, utility)
    pools: dict[str, Any]  # sizes of the adversary's and the scorer's pools
    max_queries: int
    executor: str
    reconstruction_request: str
    threat_model: dict[str, Any]  # ThreatModel.describe(): what it observes and knows
    knowledge: dict[str, Any]  # Knowledge.describe(): what this adversary was handed
    reconstruction: str | None = None  # the strategy, once one is chosen
    observation: dict[str, Any] | None = None  # the round and parts the model was rebuilt from
    reconstruction_seconds: float = 0.0

    def settings(self) -> dict[str, Any]:
        out = {"pools": self.pools, "max_queries": self.max_queries, "executor": self.executor,
               "reconstruction_request": self.reconstruction_request,
               "threat_model": self.threat_model["name"]}
        return out if self.reconstruction is None else {**out, "reconstruction": self.reconstruction}

    def extra(self) -> dict[str, Any]:
        out = {"threat_model": self.threat_model, "knowledge": self.knowledge, "software": software()}
        return out if self.observation is None else {**out, "observation": self.observation}


@dataclass
class Scored:
    """A scorer's output: numbers for the result, images and tensors to save beside it."""

    metrics: dict[str, float] = field(default_factory=dict)
    curves: dict[str, list[float]] = field(default_factory=dict)
    baselines: dict[str, dict[str, float]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    images: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> (N, C, H, W) grid rows
    tensors: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)


@dataclass(frozen=True)
class AttackCall:
    """One attack on one model: the adversary's inputs, the scorer's truth, where it is saved."""

    adv: Adversary
    truth: GroundTruth
    path: Path
    context: ResultContext


@dataclass(frozen=True)
class AuditRole:
    """Where an attack stands in the default audit (`attacks.planning.default_audit`): per threat
    model, the strongest attack of each `family` that the threat model can run and the budget
    fits is run, plus every `paper` attack (the seed papers', for their comparison). `strength`
    orders a family, from measurements (docs/privacy.md); higher is stronger. `complements`: the
    attack reads the victim by other means than its family's others, so a stronger one does not
    subsume it (on some workloads it finds what they miss: docs/privacy.md); it then runs, where
    it applies, in the time left after everything else the audit chose, or the plan says why not."""

    family: str
    strength: int = 0
    paper: bool = False
    complements: bool = False


class Attack:
    """Base class: set `name`, `requires`, `Settings`, `metrics`; write `run` (guess), `score` (judge);
    declare `cost` (and `chunk_unit` if the attack can work in chunks)."""

    name: ClassVar[str] = ""
    requires: ClassVar[frozenset[str]] = frozenset()  # "aux", "queries", "evaluation"
    Settings: ClassVar[type] = NoSettings
    metrics: ClassVar[tuple[Metric, ...]] = ()  # what `score` reports, in display order
    fast_settings: ClassVar[dict[str, Any]] = {}  # settings that keep a smoke test to seconds
    audit: ClassVar[AuditRole | None] = None  # its place in the default audit (None: not in it)
    chunk_unit: ClassVar[str] = ""  # what `Adversary.chunk` counts ("images", "models"); "": no chunks
    reads_wire: ClassVar[bool] = False  # it reads the wire itself: no model is rebuilt for it (`readout`)
    reads_every_client: ClassVar[bool] = False  # it compares the victim with the other clients' uplinks
    stacks_victims: ClassVar[bool] = False  # its run_many stacks several victims' work (batched: after the loop)
    acting: ClassVar[bool] = False  # it designs an acting round: runs only under a threat model that `acts`

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            ATTACKS.add(cls.name, cls)

    def __init__(self, settings: Any = None) -> None:
        self.settings = settings if settings is not None else self.Settings()

    @classmethod
    def setting_names(cls) -> set[str]:
        """The names of its settings (`Settings` is a dataclass, `NoSettings` without any)."""
        return {f.name for f in dataclasses.fields(cls.Settings)}

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> Attack:
        return cls(build_dataclass(cls.Settings, options, f"attack {cls.name}"))

    def run(self, adv: Adversary, gen: torch.Generator) -> Any:
        """Make the attack's guesses from the adversary's inputs only."""
        raise NotImplementedError

    def run_many(self, advs: list[Adversary], gens: list[torch.Generator]) -> list[Any]:
        """Guesses for several adversaries, a `NotApplicable` in place of any that cannot be
        attacked. An attack whose optimisation stacks across victims' models (model inversion)
        overrides it; a batched evaluation then hands it every victim of a federation at once."""
        out: list[Any] = []
        for adv, gen in zip(advs, gens):
            try:
                out.append(self.run(adv, gen))
            except NotApplicable as exc:
                out.append(exc)
        return out

    def score(self, guesses: Any, truth: GroundTruth) -> Scored:
        """Judge the guesses against the ground truth (the only place truth is read)."""
        raise NotImplementedError

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        """Seconds and peak added memory of one call on `work`, processing `chunk` units
        (`chunk_unit`) at once (None: all at once); see `attacks.planning.cost`. Undeclared: unknown."""
        return UNKNOWN

    def chunks(self, work: Workload) -> int:
        """The most units one call has to process (the chunk that means "all at once")."""
        return 1

    def cheaper(self, work: Workload, memory: int, seconds: float | None) -> str:
        """A setting of this attack that would fit `memory` bytes of added memory and `seconds`
        per call (None: no limit), for a refusal's one line ("" if none is known)."""
        return ""

    def for_audit(self, work: Workload) -> dict[str, Any] | str:
        """The settings the default audit runs this attack with on `work` (its strongest), or
        why the default audit leaves it out (a string)."""
        return {}

    @final
    def __call__(self, adv: Adversary, truth: GroundTruth, seed: int, result_path: Path,
                 context: ResultContext) -> AttackResult:
        return self.call_many([AttackCall(adv, truth, result_path, context)], seed)[0]

    @final
    def call_many(self, calls: list[AttackCall], seed: int) -> list[AttackResult]:
        """Every call's guesses in one `run_many` (the adversary's side: no ground truth in
        reach), then each scored. A result's seconds are its share of the guessing, its own
        scoring and its model's reconstruction."""
        for call in calls:
            self.check(call.adv, call.truth)
        started = time.perf_counter()
        gens = [generator(seed, f"attack:{self.name}", call.adv.view.victim) for call in calls]
        guesses = self.run_many([call.adv for call in calls], gens)
        share = (time.perf_counter() - started) / max(len(calls), 1)
        return [self._scored_result(call, g, seed, share) for call, g in zip(calls, guesses)]

    def _scored_result(self, call: AttackCall, guesses: Any, seed: int, guess_seconds: float) -> AttackResult:
        adv, context = call.adv, call.context
        if isinstance(guesses, NotApplicable):
            return self._result(adv, seed, context, applicable=False, note=str(guesses))
        started = time.perf_counter()
        scored = self.score(guesses, call.truth)  # the scorer's side, after the guesses are made
        rec_score = adv.reconstructor.strategy.score(adv.view.target, adv.model, call.truth.private,
                                                     call.truth.deployed)
        seconds = guess_seconds + time.perf_counter() - started + context.reconstruction_seconds
        note = "upper bound: a model the victim held, private state included" if adv.view.upper_bound else ""
        result = self._result(adv, seed, context, seconds=round(seconds, 3), metrics=scored.metrics,
                              curves=scored.curves, baselines=scored.baselines, note=note,
                              extra={**context.extra(), **scored.extra,
                                     "reconstruction": {"strategy": adv.model.strategy,
                                                        "details": adv.model.details, "score": rec_score}})
        result.artifacts = save_artifacts(scored, call.path)
        return result

    def _result(self, adv: Adversary, seed: int, context: ResultContext, **fields: Any) -> AttackResult:
        fields.setdefault("extra", context.extra())
        return AttackResult(attack=self.name, threat_model=adv.view.threat_model, run=context.run,
                            victim=adv.view.victim, reconstruction=adv.model.strategy, seed=seed,
                            settings={"attack": dataclasses.asdict(self.settings), **context.settings()},
                            metric_info=metric_table(self.metrics), upper_bound=adv.view.upper_bound,
                            **fields)

    def check(self, adv: Adversary, truth: GroundTruth) -> None:
        """Refuse, in one line, an evaluation that lacks what this attack needs."""
        if "aux" in self.requires and len(adv.knowledge.aux) == 0:
            raise UserError(f"{self.name} needs auxiliary data; pass --aux-size > 0")
        if "queries" in self.requires and len(adv.knowledge.queries) < 2:
            raise UserError(f"{self.name} found no non-members of victim {adv.view.victim}'s classes; "
                            "leave more of the test split to them (lower --aux-size / --eval-size)")
        if "evaluation" in self.requires and len(truth.shared.evaluation) < 10:
            raise UserError(f"{self.name} needs an evaluation classifier; pass --eval-size of at least 10")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.settings!r})"


def acting_mismatch(attack: type[Attack] | Attack, tm: Any) -> str:
    """Why the attack does not run under the threat model ("" if it may): an attack that designs
    an acting round runs only under a threat model that acts, and a passive one under no such."""
    if attack.acting and not tm.acts:
        return f"{attack.name} designs what a server sends; the {tm.name} only reads the wire"
    if tm.acts and not attack.acting:
        return f"the {tm.name} acts for one round; {attack.name} reads a passive adversary's wire"
    return ""


def sees_every_uplink(view: View) -> bool:
    """Whether the view holds every client's uplinks (what `reads_every_client` attacks need)."""
    return any(ch.client is None and ch.kind == "uplink" for ch in view.channels)


def save_png_row(images: torch.Tensor, path: Path) -> None:
    """Images in [0, 1] side by side with 1-pixel white gaps: the PNG torchvision's
    `save_image(images, nrow=len(images), padding=1, pad_value=1)` writes (a test holds the two
    equal), without importing torchvision, whose models and torch._dynamo cost 1.3 s a process."""
    from PIL import Image

    x = images.detach().cpu().clamp(0, 1)
    while x.dim() < 4:
        x = x.unsqueeze(0)
    if x.size(1) == 1:  # grey images become three equal channels, as torchvision's grid makes them
        x = x.expand(-1, 3, -1, -1)
    n, c, h, w = x.shape
    grid = x[0] if n == 1 else x.new_full((c, h + 2, n * (w + 1) + 1), 1.0)
    for k in range(n if n > 1 else 0):
        grid[:, 1:1 + h, k * (w + 1) + 1:(k + 1) * (w + 1)] = x[k]
    pixels = grid.mul(255).add_(0.5).clamp_(0, 255).permute(1, 2, 0).to(torch.uint8).numpy()
    Image.fromarray(pixels).save(path)


def save_artifacts(scored: Scored, result_path: Path) -> dict[str, str]:
    """Images as PNG grids (one row each) and tensors as .pt, in a folder named after the result."""
    if not scored.images and not scored.tensors:
        return {}
    folder = result_path.with_suffix("")
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, images in scored.images.items():
        path = folder / f"{name}.png"
        save_png_row(images, path)
        out[name] = path.relative_to(result_path.parent).as_posix()
    for name, tensors in scored.tensors.items():
        path = folder / f"{name}.pt"
        torch.save({k: v.detach().contiguous().clone() for k, v in tensors.items()}, path)
        out[name] = path.relative_to(result_path.parent).as_posix()
    return out
