"""The server's membership attacks have no signal where there is no membership, by a test that
could fail.

The test this replaces scored records nobody trained on and called random halves of them
"members": the AUC of any score against labels drawn at random after the fact is 0.5 whatever
the score, so it could not fail (issue #39). Here the labels come first and from the real
pipeline: the query set is built by the attacks' own `membership_queries` (class mix matched,
shuffled), with the training records of clients that were never sampled as its "members" (in
the training split, like real members, but in no model) and the test split as non-members. An
attack that reads anything but membership (the split the record came from, its class, its place
in the query set) moves this AUC away from 0.5, and so would a query builder that mixed classes
unevenly. That the procedure can reject at all is shown on the same federation with the victim's
own records as members: then every attack is far above chance.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from fedattack.attacks.base import Adversary
from fedattack.attacks.evaluation.data import Samples
from fedattack.attacks.evaluation.truth import membership_queries
from fedattack.attacks.hidden_parts.base import Reconstructor
from fedattack.attacks.hidden_parts.generic import Decoded
from fedattack.attacks.membership.metrics import auc_of
from fedattack.attacks.threat_models.server import Server
from fedattack.attacks.view import Knowledge
from fedattack.data import load_dataset
from fedattack.federation.loop import client_data
from fedattack.federation.rundir import Federation
from fedattack.registry import ATTACKS
from tests.attacks.test_lira import membership_attacks

SERVER_ATTACKS = membership_attacks(every_client=True)


def auc_with_members(run: Path, name: str, owners: list[int]) -> tuple[float, float]:
    """The attack's mean AUC on queries whose members are `owners`' training records (the victim's
    own, or clients' that nobody trained on), each owner's query set built as the pipeline builds
    it; and the AUC's standard error under no membership (no ties: Var = (n0 + n1 + 1) / (12 n0 n1)),
    with the non-members every owner shares counted once."""
    fed = Federation(run)
    victim = sorted(fed.transcript().clients())[0]
    digits = load_dataset(fed.spec.dataset)
    test = Samples(digits.x_test, digits.y_test)
    pool, aux = test.take(np.arange(0, len(test), 2)), test.take(np.arange(1, len(test), 2))
    view = Server().view(fed, victim)
    aucs, members = [], 0
    for owner in owners:
        data = client_data(digits, fed.partition(), owner)
        queries, is_member = membership_queries(Samples(data.x_train, data.y_train), pool, seed=0, victim=owner,
                                                max_queries=1000)
        know = Knowledge(aux=aux, queries=queries, victim_size=None, victim_class_counts=[])
        rec = Reconstructor(Decoded(), view.target, know, 0, victim)
        adv = Adversary(view, know, view.observation(), rec(view.observation()), rec)
        scores = ATTACKS.get(name)().scores(adv, torch.Generator().manual_seed(owner))
        scores = np.asarray(getattr(scores, "scores", scores), dtype=float)
        aucs.append(float(auc_of(scores[is_member], scores[~is_member])))
        members += int(is_member.sum())
    n0 = len(pool)
    return float(np.mean(aucs)), float(np.sqrt((n0 + members + 1) / (12 * n0 * members)))


@pytest.mark.parametrize("name", SERVER_ATTACKS)
def test_no_membership_gives_chance_and_membership_does_not(overfit_run: Path, name: str) -> None:
    trained = set(Federation(overfit_run).transcript().clients())
    unseen = [c for c in range(20) if c not in trained]
    victim = sorted(trained)[0]
    null, se = auc_with_members(overfit_run, name, unseen)
    assert abs(null - 0.5) < 3 * se, f"{name}: AUC {null:.3f} with no member among the queries (SE {se:.3f})"
    real, se = auc_with_members(overfit_run, name, [victim])
    assert real > 0.5 + 3 * se, f"{name}: AUC {real:.3f} on the victim's own records: the procedure cannot reject"
