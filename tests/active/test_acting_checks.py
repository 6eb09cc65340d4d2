"""What every registered client check decides on an acting round's downlink (`client_checks.judged`,
the verdict's "which checks would refuse it", issue #44): on a tiny real federation, the round the
server actually sent, with the victim's earlier downlink as its memory."""

from __future__ import annotations

import pytest

from fedattack.attacks.active.acting_client import Round
from fedattack.attacks.active.client_checks import judged, registered_checks
from fedattack.federation.active import Downlinks
from tests.active.conftest import Acted, acted


def acting_round(run: Acted, rnd: int = 2) -> tuple[Round, dict]:
    """Round `rnd` as it was sent, and the victim's downlink of the round before."""
    victim = run.adversary.acted[0]["victim"]
    sent = {m.receiver: dict(m.payload) for m in run.messages if m.round == rnd and m.kind == "downlink"}
    before = next(dict(m.payload) for m in run.messages if m.round == rnd - 1 and m.kind == "downlink"
                  and m.receiver == victim)
    samples = {k: len(run.datas[k].x_train) for k in sent}
    return Round(rnd, victim, samples, Downlinks(run.target, sent), isolates=len(sent) > 1), before


def test_every_registered_check_is_asked() -> None:
    assert {"downlink-check", "layer-check", "consistency-check"} <= set(registered_checks())


@pytest.mark.parametrize(("active", "defences", "compared"), [
    ("imprint", (), "accepted"),  # the same imprint to every client: nothing to disagree with
    ("imprint:isolate=true", ("secure-aggregation",), "refused"),  # the victim's differs from the zeros
])
def test_the_checks_judge_the_round_the_server_sent(active: str, defences: tuple[str, ...], compared: str) -> None:
    run = acted("fedavg", active, defences)
    design, before = acting_round(run)
    checks = judged(design, run.target, before)
    assert set(checks) == set(registered_checks())
    assert checks["downlink-check"]["refused"] and "is not in the method's model" in checks["downlink-check"]["why"]
    assert checks["layer-check"]["refused"] and "parallel rows" in checks["layer-check"]["why"]
    assert checks["consistency-check"]["refused"] is (compared == "refused"), checks["consistency-check"]
    assert not checks["consistency-check"]["alone"] and checks["layer-check"]["alone"]


def test_an_honest_round_passes_every_check() -> None:
    """The same federation's honest round 3 (the server restored its model after acting)."""
    run = acted("fedavg", "imprint")
    design, before = acting_round(run, rnd=3)
    checks = judged(design, run.target, before)
    assert all(c["refused"] is False and c["why"] == "accepted" for c in checks.values()), checks
