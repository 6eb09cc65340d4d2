"""`membership`: shadow-model membership inference (Shokri et al., S&P 2017).

k shadow clients repeat the victim's local training (method, model, recipe, data size and class
mix) on auxiliary data; each is rebuilt with the victim's reconstruction strategy and queried on
its own training records ("in") and on same-class records it never saw ("out"). Per class, an
attack classifier (scikit-learn) learns in/out from the shadows' output vectors and then judges
the victim model's outputs on the queries. Beside it, the loss-threshold attack (Yeom et al.
2018) with its threshold set on the shadows: the sanity baseline.

Deviation, stated: features are log-probabilities by default (`features=probs` gives Shokri's
raw probability vectors); near 1 a probability loses the digits that separate members.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from fedattack import progress
from fedattack.attacks.base import Adversary, AuditRole, NotApplicable
from fedattack.attacks.hidden_parts.base import log_probs
from fedattack.attacks.membership.adam_mlp import AdamMLP
from fedattack.attacks.membership.family import Calibrated
from fedattack.attacks.membership.metrics import best_threshold
from fedattack.attacks.membership.reference_models import TrainsModels, offline_size, references_cost
from fedattack.attacks.membership.shadow import ShadowData, shadow_splits, train_shadows
from fedattack.attacks.membership.torch_mlp import AdamFit, fit_stacked
from fedattack.attacks.planning.cost import Cost, Workload, cheaper_setting
from fedattack.interrupts import honour_interrupts
from fedattack.options import one_of
from fedattack.registry import UserError
from fedattack.target import Target

CLASSIFIERS = ("mlp", "mlp-lbfgs", "torch-mlp", "logreg", "gbdt")
MLPS = ("mlp", "torch-mlp")  # classifiers whose cost grows with `epochs` (mlp-lbfgs: with `iterations`)
# and a pass of the Adam MLP (adam_mlp.py) costs about 0.09 ms whatever its records (a few dozen
# records a class on 60-image clients: that fixed part is most of the fit; scikit-learn's own fit
# paid 0.35 ms)
MLP_EPOCH_SECONDS = 9e-5
# seconds per training record at 500 passes, measured on the MNIST setting of
# benchmarks/bench_audit.py (one thread). The plan charges each record twice, by its class's model
# and the all-class one; the all-class model is fitted only where a query's class has no model of
# its own, which the plan cannot know, so it prices the larger case. mlp: 2e-4 since adam_mlp.py
# (MNIST-20, 5 victims, 9,600 records each: 27.4 s for `membership` at load 2, against 48.6 s with
# scikit-learn's fit and its 5e-4); torch-mlp (torch_mlp.py, every model at once) measured 16.8
# CPU s on 9,600 records against scikit-learn's fit's 12.5 s (issue #47).
FIT_SECONDS = {"torch-mlp": 9e-4, "mlp": 2e-4, "logreg": 5e-5, "gbdt": 2e-4}
# mlp-lbfgs (the same MLP, full-batch L-BFGS): an iteration of one model costs a fixed part and a
# part per record. Set from the membership calls of the search (docs/membership.md, one thread,
# MNIST-20 selection victims, ~9,600 records in 10 per-class models): 50, 100, 200, 500
# iterations took 1.85, 2.0, 2.5, 4.1 CPU s a victim, ~5 ms an iteration of the 10 models;
# the split between the parts is a lone model's (0.4 ms an iteration at 60 records, 9.2 at
# 9,582, measured on a loaded machine, so halved here). The plan charges every iteration up to
# `iterations` and, as for mlp, the all-class model too (planned 17.3 s, measured 8.1 s for
# the 4 selection victims at 100 iterations before these were set from them; after, on the
# default audit's 5 victims: planned 13.1 and 11.4 s, measured 10.3 and 18.2 s wall, 10.2 and 11.0 CPU s).
LBFGS_ITER_SECONDS = 2e-4
LBFGS_RECORD_SECONDS = 4e-7
MIN_PER_SIDE = 4  # fewer in or out records of a class than this: use the all-class model


@dataclass(frozen=True, kw_only=True)
class MembershipSettings:
    """shadows: k. classifier: mlp (scikit-learn's Adam MLP, bit for bit, adam_mlp.py), mlp-lbfgs
    (the same MLP fitted full batch by L-BFGS), torch-mlp (the Adam MLP, every model fitted at once
    in torch), logreg or gbdt.
    features: log-probs or probs.
    shadow_in_fraction: the largest share of an auxiliary class one shadow trains on.
    epochs: the Adam MLP attack classifiers' most passes over their records (scikit-learn's max_iter).
    iterations, alpha: mlp-lbfgs's most L-BFGS iterations (its max_iter) and L2 penalty; 100 was
    chosen on MNIST-20's selection victims (docs/membership.md), where more overfit the shadows."""

    shadows: int = 3
    classifier: str = "mlp"
    features: str = "log-probs"
    shadow_in_fraction: float = 0.75
    epochs: int = 500
    iterations: int = 100
    alpha: float = 1e-4

    def __post_init__(self) -> None:
        if self.shadows < 1:
            raise UserError(f"membership shadows={self.shadows} must be at least 1")
        one_of(self.classifier, CLASSIFIERS, "membership classifier")
        one_of(self.features, ("log-probs", "probs"), "membership features")
        if not 0.0 < self.shadow_in_fraction < 1.0:
            raise UserError("membership shadow_in_fraction must be between 0 and 1")
        if self.epochs < 1:
            raise UserError(f"membership epochs={self.epochs} must be at least 1")
        if self.iterations < 1:
            raise UserError(f"membership iterations={self.iterations} must be at least 1")
        if not self.alpha >= 0.0:
            raise UserError(f"membership alpha={self.alpha} must be at least 0")


class Membership(TrainsModels):
    """Shadow-model membership inference (Shokri et al. 2017) with a loss-threshold baseline."""

    name = "membership"
    requires = frozenset({"aux", "queries"})
    Settings = MembershipSettings
    fast_settings = {"shadows": 1, "classifier": "logreg"}
    low_fpr = False  # classifiers fit for accuracy: the issue-20 baseline, weak at low FPR
    audit = AuditRole("membership", strength=0, paper=True)  # Shokri et al., the seed papers' attack
    models_setting = "shadows"

    def cost(self, work: Workload, chunk: int | None = None) -> Cost:
        s = self.settings
        trained_on = offline_size(work, work.aux, s.shadow_in_fraction)
        shadows = references_cost(work, s.shadows, trained_on, work.queries + work.aux, "shadow models",
                                  chunk=chunk)
        # `records` balances in and out per class: as many of each as the smaller side holds
        records = 2 * s.shadows * min(trained_on, max(1, work.aux - trained_on))
        if s.classifier == "mlp-lbfgs":  # per model-iteration: the fixed part, and every record once
            seconds = s.iterations * ((work.classes + 1) * LBFGS_ITER_SECONDS + 2 * records * LBFGS_RECORD_SECONDS)
        else:
            per_record = FIT_SECONDS[s.classifier] * (s.epochs / 500 if s.classifier in MLPS else 1.0)
            fixed = (work.classes + 1) * s.epochs * MLP_EPOCH_SECONDS if s.classifier == "mlp" else 0.0
            seconds = 2 * records * per_record + fixed
        fit = Cost(seconds, 3 * records * work.classes * 8, f"attack classifiers on {records:,} records")
        return shadows + fit

    def cheaper(self, work: Workload, memory: int, seconds: float | None) -> str:
        return (cheaper_setting(self, work, memory, seconds, "classifier", ["logreg"])
                or cheaper_setting(self, work, memory, seconds, "shadows", [2, 1]))

    def scores(self, adv: Adversary, gen: torch.Generator) -> Calibrated:
        s, target, know = self.settings, adv.view.target, adv.knowledge
        if not know.recipe_known:
            raise NotApplicable("shadow models repeat the victim's local training, and this threat "
                                "model does not know the local recipe")
        seed = int(torch.randint(2**62, (1,), generator=gen))
        aux = self.labelled(adv, know.aux)
        counts = know.victim_class_counts or aux.class_counts(target.num_classes)
        splits = shadow_splits(aux, counts, s.shadows, s.shadow_in_fraction, seed)
        solo = "deployed" in adv.reconstructor.strategy.needs
        shadows = train_shadows(adv, seed, splits, solo)
        rows = [self.records(target, adv.reconstructor(sh.obs, key=j + 1).params, sh.data, seed + j)
                for j, sh in enumerate(shadows)]
        feats, labels, member, losses = (np.concatenate(parts) for parts in zip(*rows))
        q_logp = self.query_log_probs(adv)
        q_labels = self.query_labels(adv, q_logp)
        models = fit_attack_models(feats, labels, member, s.classifier, seed, q_labels, s.epochs,
                                   LbfgsFit(s.iterations, s.alpha))
        scores = predict_membership(models, self.features(q_logp), q_labels)
        threshold = best_threshold(-losses, member)
        info = {"shadow_sizes": [{"in": len(d.trained), "out": len(d.held_out)} for d in splits],
                "attack_training_records": int(len(member)), "per_class_models": sorted(models["per_class"]),
                "loss_threshold": -threshold}
        return Calibrated(scores, threshold, info)

    def decide(self, scores: np.ndarray, member_share: float = 0.5) -> np.ndarray:
        """The attack classifiers' own rule: a member when P(member) >= 0.5."""
        return (scores >= 0.5).astype(int)

    def features(self, logp: torch.Tensor) -> np.ndarray:
        out = logp.clamp_min(-50.0) if self.settings.features == "log-probs" else logp.exp()
        return out.numpy().astype(np.float64)

    def records(self, target: Target, params: dict, data: ShadowData, seed: int) -> tuple[np.ndarray, ...]:
        """A shadow's balanced in/out records per class: features, class, membership, loss."""
        both = [data.trained, data.held_out]
        logps = [log_probs(target, params, d.x) for d in both]
        rng = np.random.default_rng(seed)
        keep: list[list[np.ndarray]] = [[], []]
        for c in np.unique(data.trained.y.numpy()):
            idx = [np.flatnonzero(d.y.numpy() == c) for d in both]
            k = min(len(i) for i in idx)
            for side in (0, 1):
                keep[side].append(rng.choice(idx[side], size=k, replace=False))
        parts = []
        for side, (d, lp) in enumerate(zip(both, logps)):
            sel = np.concatenate(keep[side]) if keep[side] else np.zeros(0, np.int64)
            y = d.y.numpy()[sel]
            loss = -lp[torch.as_tensor(sel), torch.as_tensor(y)].numpy() if len(sel) else np.zeros(0)
            parts.append((self.features(lp[torch.as_tensor(sel)]), y, np.full(len(sel), 1 - side), loss))
        return tuple(np.concatenate(p) for p in zip(*parts))


@dataclass(frozen=True)
class LbfgsFit:
    """`classifier=mlp-lbfgs`: L-BFGS's most iterations (scikit-learn's max_iter) and the L2 penalty."""

    iterations: int = 100
    alpha: float = 1e-4


def make_classifier(kind: str, seed: int, epochs: int = 500, lbfgs: LbfgsFit = LbfgsFit()) -> Any:
    rs = seed % (2**32)
    if kind == "mlp":  # scikit-learn's Adam MLP, fitted by the same steps without its per-step overhead
        return AdamMLP(rs, epochs)
    if kind == "mlp-lbfgs":  # the same MLP fitted full batch by L-BFGS: `iterations` of it
        return make_pipeline(StandardScaler(), MLPClassifier((64,), solver="lbfgs", max_iter=lbfgs.iterations,
                                                             alpha=lbfgs.alpha, random_state=rs))
    if kind == "logreg":
        return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    return HistGradientBoostingClassifier(random_state=rs)


def fit_attack_models(feats: np.ndarray, labels: np.ndarray, member: np.ndarray, kind: str,
                      seed: int, queried: np.ndarray | None = None, epochs: int = 500,
                      lbfgs: LbfgsFit = LbfgsFit()) -> dict[str, Any]:
    """One classifier per class with enough in and out records, and one over all classes.

    The all-class model judges only the classes without their own; when every class in
    `queried` (the queries' labels) has its own, it would judge nothing and is not fitted
    (on MNIST it was half of the fitting: it sees every record)."""
    if len(np.unique(member)) < 2:
        raise UserError("the shadow models produced no in/out pair of records; raise --aux-size")
    classes = [int(c) for c in np.unique(labels)
               if min((member[labels == c] == 1).sum(), (member[labels == c] == 0).sum()) >= MIN_PER_SIDE]
    overall_needed = queried is None or not set(np.unique(queried).tolist()) <= set(classes)
    if kind == "torch-mlp":  # every model in one stacked fit; the all-class model is the last
        groups = [(feats[labels == c], member[labels == c]) for c in classes]
        with honour_interrupts():
            stack = fit_stacked(groups + [(feats, member)] * overall_needed, seed, AdamFit(max_iter=epochs))
        return {"per_class": {c: stack.model(m) for m, c in enumerate(classes)},
                "overall": stack.model(len(classes)) if overall_needed else None}
    per_class = {}
    # honour_interrupts: scikit-learn's MLP swallows Ctrl-C and returns a part-trained model
    with warnings.catch_warnings(), threadpool_limits(1), honour_interrupts():  # threads only contend
        warnings.simplefilter("ignore", ConvergenceWarning)  # small shadow sets stop the MLP early
        # the interrupt it swallowed is raised again by honour_interrupts: its warning is noise
        warnings.filterwarnings("ignore", message="Training interrupted by user")
        for c in progress.steps(classes, "attack classifiers"):
            rows = labels == c
            per_class[c] = make_classifier(kind, seed + c, epochs, lbfgs).fit(feats[rows], member[rows])
        overall = make_classifier(kind, seed, epochs, lbfgs).fit(feats, member) if overall_needed else None
    return {"per_class": per_class, "overall": overall}


def predict_membership(models: dict[str, Any], feats: np.ndarray, labels: np.ndarray) -> np.ndarray:
    scores = np.zeros(len(labels))
    for c in np.unique(labels):
        rows = labels == c
        model = models["per_class"].get(int(c), models["overall"])
        scores[rows] = model.predict_proba(feats[rows])[:, 1]
    return scores
