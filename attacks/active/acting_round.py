"""`acting-imprint`, `acting-trap-weights`: what one acting round would take from this federation.

Under the `malicious-server` threat model (`attacks/threat_models/malicious_server.py`) the
server designs one round per victim from the run's recorded downlinks, with an active server of
`attacks/active/servers/` built with what a server holds (the recorded downlinks, every n_k on
the wire, public test-split images): the round after the victim's last recorded one, sent to the
clients sampled in that round. Under a defence that masks the uplinks (secure aggregation) it
isolates the victim (`isolate=true`: model inconsistency), the strongest design measured in
docs/active-server.md. Its guesses (`run`) are that design and nothing else. The victim's reply
is then simulated on the scorer's side (`acting_client.replies`: the run's recipe on the
victim's own data, through the run's defences), and the server's own reading (`read`) gets the
round as the server holds it (`readout.held`: what it sent, what came back after its defences'
server side, n_k). Scored as `readout` scores (the share of the victim's training images
matched above 20 dB and 40 dB, beside chance), plus what every registered client-side check
would decide on the downlink the round sent the victim (`client_checks`: `downlink-check` against
the downlink it last accepted, its recorded one; `consistency-check` with the round's others).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from fedattack.attacks.active.acting_client import Round, replies
from fedattack.attacks.active.client_checks import judged
from fedattack.attacks.active.readout import READOUT_METRICS, Readout, held
from fedattack.attacks.base import Adversary, AuditRole, NoSettings, NotApplicable, Scored
from fedattack.attacks.data_reconstruction.family import Reconstructions
from fedattack.attacks.evaluation.truth import GroundTruth
from fedattack.attacks.planning.cost import Cost, Workload
from fedattack.attacks.planning.probe import fastest
from fedattack.attacks.threat_models.malicious_server import ActingView
from fedattack.defences.downlink_check import DownlinkCheck
from fedattack.federation.active import ActiveThreatModel, Downlinks, ServerKnowledge, build_active
from fedattack.registry import UserError
from fedattack.results import Metric
from fedattack.target import Target
from fedattack.wire import Payload

FLAGGED = Metric(key="flagged_downlink_check", label="acting round refused by downlink-check", unit="%",
                 scale=100.0, bounds=(0.0, 1.0), leak="none", headline=False)
FLAGGED_ALONE = Metric(key="flagged_single_client_check", label="acting round refused by a check one client runs alone",
                       unit="%", scale=100.0, bounds=(0.0, 1.0), leak="none", headline=False)
CALIBRATION_RUNS = 10  # the imprint's alpha search trains a public client per candidate (`imprint.ALPHAS`)


@dataclass(frozen=True, kw_only=True)
class ActingSettings:
    """bins: the imprint's units (0: four per image of the victim's n_k, which the server sees on the
    wire, and at least 100); unused by trap weights."""

    bins: int = 0

    def __post_init__(self) -> None:
        if self.bins < 0 or self.bins == 1:
            raise UserError(f"acting bins={self.bins} must be 0 (four per image of the victim) or at least 2")


@dataclass
class Design:
    """What the server decided (its guesses): the round it sends, and the server that reads it."""

    round: Round
    server: ActiveThreatModel
    target: Target  # the method as the server's view holds it (defences included)
    aux: torch.Tensor
    honest: Payload  # the victim's recorded downlink: the model it last accepted
    info: dict[str, Any]


class ActingRound(Readout):
    """Base: `server` names the active threat model that designs and reads the round."""

    server: ClassVar[str] = ""
    acting: ClassVar[bool] = True
    requires: ClassVar[frozenset[str]] = frozenset({"aux"})
    Settings: ClassVar[type] = ActingSettings
    metrics = (*READOUT_METRICS, FLAGGED, FLAGGED_ALONE)  # type: ignore[assignment]  # readout's, and the checks
    fast_settings: ClassVar[dict[str, Any]] = {}

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        """The victim's local run through the designed model (wider by the module), the server's
        own calibration runs on public data, and `readout`'s matching."""
        runs = 1 + (CALIBRATION_RUNS if self.server == "imprint" else 0)
        pixels, bins = work.probe.input_numel, self.bins(work.samples)
        module = module_seconds(bins, pixels, work.batch_size) if self.server == "imprint" else 0.0
        # one run after another (the victim's, then the calibration's, each through sequential_train),
        # every step paying the designed module's own, measured at its width: it is memory-bound at
        # thousands of bins, where scaling the model's step by FLOPs under-counted it
        training = runs * (work.training_seconds(1) + work.local_steps() * module)
        match = super().cost(work, chunk)
        return Cost(training + match.seconds, match.peak_bytes + 16 * bins * pixels,
                    f"{runs} local run(s) of {work.local_steps():,} steps; {match.detail}")

    def bins(self, samples: int) -> int:
        return getattr(self.settings, "bins", 0) or max(100, 4 * samples)

    def for_audit(self, work: Workload) -> dict[str, Any] | str:
        return {}

    def run(self, adv: Adversary, gen: torch.Generator) -> Design:  # type: ignore[override]
        view, victim = adv.view, adv.view.victim
        if isinstance(view, ActingView) and view.undeclared:
            raise NotApplicable(f"the run does not declare its local recipe's {view.undeclared}, so the victim's "
                                "training cannot be simulated; record it with Recorder(epochs=, batch_size=, lr=)")
        downs = [e for e in view.entries() if e["kind"] == "downlink" and e["receiver"] == victim]
        if not downs:
            raise NotApplicable(f"client {victim} received no recorded downlink to design an acting round from")
        rnd = max(e["round"] for e in downs)
        msgs = view.messages(rounds={rnd})
        honest = {m.receiver: dict(m.payload) for m in msgs if m.kind == "downlink"}
        samples = sample_counts(view.entries())
        if victim not in samples:
            raise NotApplicable(f"client {victim} never sent an uplink, so its n_k is unknown to the server")
        target, hidden = view.target, bool(view.target.uplinks_hidden)
        sampled = {k: samples.get(k, samples[victim]) for k in honest}
        knowledge = ServerKnowledge(aux=adv.knowledge.aux.x, aux_labels=adv.knowledge.aux.y,
                                    num_clients=target.ctx.num_clients,
                                    train_size=round(sum(samples.values()) / len(samples) * target.ctx.num_clients),
                                    rounds=rnd + 1, seed=int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        settings = {"rounds": str(rnd + 1), "victim": victim, "isolate": hidden,
                    **({"bins": self.bins(samples[victim])} if self.server == "imprint" else {})}
        try:
            server = build_active({"name": self.server, "settings": settings}, target, knowledge)
            sent = server.act(rnd + 1, sorted(honest), honest[victim], Downlinks(target, honest))
        except UserError as why:
            raise NotApplicable(f"{self.server} cannot act on {target.name}: {why}") from None
        if sent is None:
            raise NotApplicable(f"the {self.server} server did not act on client {victim}")
        design = Round(rnd + 1, victim, sampled, sent, isolates=hidden)
        info = {"designed_from_round": rnd, "server": self.server, "settings": settings,
                "isolated": hidden, "sampled": len(sampled)}
        return Design(design, server, target, adv.knowledge.aux.x, honest[victim], info)

    def score(self, guesses: Design, truth: GroundTruth) -> Scored:  # type: ignore[override]
        """The client's reply (scorer's side), the server's reading of what it holds, then matching."""
        design = guesses.round
        wire = replies(design, truth, seed=0)  # the client's own minibatch order
        seen = held(guesses.target, wire, design.round, design.victim, guesses.aux)
        try:
            read = guesses.server.read(seen)
        except UserError as why:
            scored = super().score(Reconstructions(guesses.aux[:0], {}), truth)
            scored.extra["acting_round"] = {**guesses.info, "read": f"nothing: {why}"}
            return with_flag(scored, guesses, design)
        scored = super().score(Reconstructions(read.images, {**read.info, **guesses.info}), truth)
        scored.extra["acting_round"] = {**guesses.info, "reply": "simulated: the run's recipe on the victim's data"}
        return with_flag(scored, guesses, design)


MEASURED_WEIGHTS = 2**24  # the widest module timed (64 MB of weights); wider ones scale by their bins


def module_seconds(bins: int, pixels: int, batch: int) -> float:
    """The module's step at `bins`: timed up to MEASURED_WEIGHTS, beyond that the timed step scaled
    by the bins (its cost is the weights it reads and writes), so pricing a module too large for
    the memory budget allocates nothing: the plan then refuses it."""
    timed = max(2, min(bins, MEASURED_WEIGHTS // max(pixels, 1)))
    return module_step_seconds(timed, pixels, batch) * bins / timed


@functools.lru_cache(maxsize=32)
def module_step_seconds(bins: int, pixels: int, batch: int) -> float:
    """One SGD step through the imprint's module alone (`Imprint.applying`'s shape: bins units on
    the pixels, summed back onto them), on this machine's free CPUs; what the victim's step adds."""
    weight = torch.zeros(bins, pixels, requires_grad=True)
    bias = torch.zeros(bins, requires_grad=True)
    z = torch.rand(max(1, batch), pixels)

    def step() -> None:
        out = z + 1e-3 * torch.relu(z @ weight.T + bias).sum(1, keepdim=True)
        grads = torch.autograd.grad(out.square().sum(), (weight, bias))
        with torch.no_grad():
            weight.sub_(1e-3 * grads[0])
            bias.sub_(1e-3 * grads[1])

    step()  # the allocator's first touch, not the step's
    return fastest(step)


def with_flag(scored: Scored, guesses: Design, design: Round) -> Scored:
    """The score with what every registered client check decides on the designed downlink
    (`client_checks.judged`, in `extra["client_checks"]`), and downlink-check's and the single-
    client checks' refusals as metrics (NaN where none applies)."""
    checks = judged(design, guesses.target, guesses.honest)
    scored.extra["client_checks"] = checks
    own = checks.get(DownlinkCheck.name, {"refused": None, "why": "not registered"})
    scored.extra["downlink_check"] = own["why"]
    scored.metrics[FLAGGED.key] = float("nan") if own["refused"] is None else float(own["refused"])
    alone = [c["refused"] for c in checks.values() if c["alone"] and c["refused"] is not None]
    scored.metrics[FLAGGED_ALONE.key] = float(any(alone)) if alone else float("nan")
    return scored


def sample_counts(entries: list[dict[str, Any]]) -> dict[int, int]:
    """Every client's n_k as its uplinks report it (the latest), which the server reads off the wire."""
    out: dict[int, int] = {}
    for e in sorted(entries, key=lambda e: e["round"]):
        if e["kind"] == "uplink" and e.get("samples") is not None:
            out[int(e["sender"])] = int(e["samples"])
    return out


class ActingImprint(ActingRound):
    """The imprint of Fowl et al. (2022), isolated by model inconsistency under secure aggregation."""

    name = "acting-imprint"
    server = "imprint"
    audit = AuditRole("active server", strength=20)  # docs/active-server.md: 85% of 600-image clients
    fast_settings: ClassVar[dict[str, Any]] = {"bins": 100}


class ActingTrapWeights(ActingRound):
    """The trap weights of Boenisch et al. (2023), isolated likewise."""

    name = "acting-trap-weights"
    server = "trap-weights"
    Settings = NoSettings  # no units to choose: `--set bins=` is refused, not ignored
    audit = AuditRole("active server", strength=10)  # docs/active-server.md: 12% of 600-image clients

    def for_audit(self, work: Workload) -> dict[str, Any] | str:
        """Left out, with the reason, where the traps have no dense first layer to sit in (a CNN):
        the plan once priced it there and the call then read nothing, not applicable."""
        if work.first_layer is None:
            return "the model has no dense first layer on the pixels for the traps (it starts with a convolution)"
        return {}
