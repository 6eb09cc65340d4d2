"""`readout`: the images a server reads in closed form off one round it holds.

On a federation whose server acted (`fedattack train --active ...`), the server reads the round
in which it acted on the victim with its own design (`ActiveThreatModel.read`: the imprint's
bins, the traps, the victim's update solved out of a secure sum). On an honest federation it is
the honest server's reading of the same kind: every unit of the first dense layer, weight
update over bias update, from the victim's uplink or, under secure aggregation, from the round's
aggregate, which is all the server holds there. The view decides what it may use: only what the
threat model sees of the wire, and a secure aggregate only with every uplink of the round.

The score is per victim image: the share of the victim's training images that some returned
image matches (one to one, the assignment of highest total PSNR) above 20 dB, and above 40 dB
(verbatim), beside the same shares for as many images drawn from data no client trained on
(`baselines["chance"]`: what matching alone finds, averaged over up to `DRAWS` disjoint draws).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np
import torch

from fedattack.attacks.active._reading import layer_update, ratio_images
from fedattack.attacks.active.servers.inconsistency import victim_model
from fedattack.attacks.base import Adversary, NotApplicable, Scored
from fedattack.attacks.data_reconstruction.cost import scoring_cost
from fedattack.attacks.data_reconstruction.family import DataReconstruction, Reconstructions
from fedattack.attacks.data_reconstruction.image_metrics import assignment, psnr_matrix, ssim
from fedattack.attacks.evaluation.truth import GroundTruth
from fedattack.attacks.planning.cost import Cost, Workload
from fedattack.federation.active import Exchange, build_active
from fedattack.registry import UserError
from fedattack.results import Metric
from fedattack.target import Target
from fedattack.wire import Message

VERBATIM_DB, RECOVERED_DB, CAP_DB = 40.0, 20.0, 100.0
DRAWS = 20  # disjoint draws of public images that estimate the chance baseline
SHARE = (0.0, 1.0)
READOUT_METRICS = (
    Metric(key="recovered_20", label="images recovered (PSNR > 20 dB)", unit="%", scale=100.0, bounds=SHARE,
           primary=True, chance=None),
    Metric(key="recovered_40", label="images verbatim (PSNR > 40 dB)", unit="%", scale=100.0, bounds=SHARE),
    Metric(key="psnr_mean", label="PSNR of matched images", unit="dB", bounds=(0.0, CAP_DB), headline=False),
    Metric(key="ssim_mean", label="SSIM of matched images", bounds=(-1.0, 1.0), digits=3, headline=False),
    Metric(key="candidates", label="images returned", leak="none", headline=False, digits=0),
)


def draws(pool: int, size: int) -> int:
    """The chance baseline's disjoint draws of `size` public images from a pool of `pool`, as `score`
    cuts them and `cost` prices them: at least one (the whole pool, if smaller), at most `DRAWS`;
    an unknown pool (0, a workload that does not say) is priced at `DRAWS`."""
    return DRAWS if pool <= 0 else max(1, min(DRAWS, pool // max(1, size)))


class Readout(DataReconstruction):
    """The server's closed-form reading of a round it holds (its own design, if it acted)."""

    name = "readout"
    metrics = READOUT_METRICS
    reads_wire: ClassVar[bool] = True  # needs no model rebuilt from the wire: it reads the wire itself

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        """One pass over a round's tensors, then the matching that dominates: the victim's
        images against the returned ones, and against as many public images `DRAWS` times."""
        match = scoring_cost(work)
        times = 1 + draws(work.evaluation, work.samples)
        return Cost(match.seconds * times, match.peak_bytes,
                    f"one round read; {work.samples:,} images matched {times} times")

    def reconstruct(self, adv: Adversary, gen: torch.Generator) -> Reconstructions:
        active, victim = adv.view.active, adv.view.victim
        if active is None:
            if adv.obs.round is None:
                raise NotApplicable(f"client {victim} sent nothing the {adv.view.threat_model} sees")
            return honest_readout(exchange(adv, adv.obs.round, victim))
        adversary = build_active({"name": active["name"], "settings": active["settings"]}, adv.view.target, None)
        adversary.acted = list(active.get("acted", []))
        acted = adversary.acted_on(victim)
        if acted is None:
            raise NotApplicable(f"the {active['name']} server did not act on client {victim}")
        seen = exchange(adv, int(acted["round"]), victim)
        try:
            read = adversary.read(seen)
        except UserError as why:  # the uplink carries nothing of what the server reads (a decode of nothing)
            raise NotApplicable(f"round {acted['round']}: {why}") from None
        return Reconstructions(read.images, {"round": acted["round"], "adversary": active["name"], **read.info})

    def score(self, guesses: Reconstructions, truth: GroundTruth) -> Scored:
        recs, real = guesses.images.detach().clamp(0, 1), truth.members.x
        found = matched(recs, real)
        pool, size = truth.shared.evaluation.x, max(len(recs), 1)
        chance = [matched(pool[i * size:(i + 1) * size], real) for i in range(draws(len(pool), size))]
        metrics = {**found.metrics, "candidates": float(len(recs))}
        baselines = {"chance": {k: float(np.mean([d.metrics[k] for d in chance]))
                                for k in ("recovered_20", "recovered_40")}}
        extra = {"reconstruction_match": {**guesses.info, "pairs": found.pairs, "psnr": found.psnr.tolist()},
                 "chance": f"{len(chance)} draws of {min(size, len(pool))} test-split images (no client trained "
                           "on them), matched alike; the mean"}
        images = {} if not found.pairs else {
            "reconstructions": recs[torch.as_tensor([i for i, _ in found.pairs])],
            "matched": real[torch.as_tensor([j for _, j in found.pairs])]}
        return Scored(metrics=metrics, baselines=baselines, extra=extra, images=images)


class Matched:
    """Returned images paired one to one with the victim's (highest total PSNR) and scored."""

    def __init__(self, pairs: list[list[int]], psnr: np.ndarray, ssims: np.ndarray, total: int) -> None:
        self.pairs, self.psnr = pairs, psnr
        share = (lambda db: float((psnr > db).sum()) / total) if total else (lambda db: 0.0)
        self.metrics = {"recovered_20": share(RECOVERED_DB), "recovered_40": share(VERBATIM_DB),
                        "psnr_mean": float(psnr.mean()) if len(psnr) else float("nan"),
                        "ssim_mean": float(ssims.mean()) if len(ssims) else float("nan")}


def matched(recs: torch.Tensor, real: torch.Tensor) -> Matched:
    """Pair and score (the project's PSNR, `image_metrics.psnr_matrix`)."""
    if len(recs) == 0 or len(real) == 0:
        return Matched([], np.zeros(0), np.zeros(0), len(real))
    table = psnr_matrix(recs, real, cap_db=CAP_DB)
    rows, cols = assignment(table, maximize=True)
    psnr = table[rows, cols]
    ssims = np.array([ssim(recs[i], real[j]) for i, j in zip(rows, cols)])
    return Matched([[int(i), int(j)] for i, j in zip(rows, cols)], psnr, ssims, len(real))


def exchange(adv: Adversary, rnd: int, victim: int) -> Exchange:
    """Round `rnd` as this adversary holds it (see `Exchange`); not applicable where its view
    lacks what the reading needs (the victim's messages; every uplink of a secure sum)."""
    target, msgs = adv.view.target, adv.view.messages(rounds={rnd})
    ups = [m for m in msgs if m.kind == "uplink"]
    every = target.ctx.clients_per_round  # the protocol's m (the view holds its own channels only)
    if target.uplinks_hidden and len(ups) < every:
        raise NotApplicable(f"{target.uplinks_hidden}: only the sum of all {every} uplinks of round {rnd} says "
                            f"anything, and the {adv.view.threat_model} sees {len(ups)}")
    seen = held(target, msgs, rnd, victim, adv.knowledge.aux.x)
    if victim not in seen.sent or victim not in seen.received:
        raise NotApplicable(f"the {adv.view.threat_model} does not see client {victim}'s messages of round {rnd}")
    return seen


def held(target: Target, msgs: Iterable[Message], rnd: int, victim: int, aux: torch.Tensor) -> Exchange:
    """Round `rnd` as a server holding `msgs` (its downlinks and uplinks) holds it: each uplink
    as sent, or, where a defence masks them, the aggregate its server side hands the method."""
    msgs = [m for m in msgs if m.round == rnd]
    sent = {m.receiver: dict(m.payload) for m in msgs if m.kind == "downlink"}
    ups = [m for m in msgs if m.kind == "uplink"]
    hidden = target.uplinks_hidden
    received = ({m.sender: dict(target.receive(ups, rnd)[0].payload) for m in ups}
                if hidden and ups else {m.sender: dict(m.payload) for m in ups})
    unweighted = any(d.sums_unweighted for d in target.defences)
    return Exchange(round=rnd, victim=victim, sent=sent, received=received,
                    samples={m.sender: int(m.samples or 1) for m in ups}, aggregated=bool(hidden),
                    unweighted=unweighted, target=target, aux=aux)


def honest_readout(seen: Exchange) -> Reconstructions:
    """An honest server's reading: every unit of the first dense layer, weight over bias update,
    from the victim's decoded uplink (or the round's aggregate under secure aggregation)."""
    try:
        d_weight, d_bias = layer_update(seen.sent[seen.victim], victim_model(seen, isolate=False), seen.target)
    except (UserError, KeyError) as why:
        raise NotApplicable(f"{seen.target.name}'s uplink of round {seen.round} carries no dense first layer on "
                            f"the pixels to read ({why})") from None
    images, read = ratio_images(d_weight, d_bias, seen.target)
    source = "the round's secure aggregate" if seen.aggregated else "the victim's uplink"
    info: dict[str, Any] = {"round": seen.round, "adversary": None, "reading": f"unit ratios of {source}", **read}
    return Reconstructions(images, info)
