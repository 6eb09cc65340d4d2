"""Issue #50's matrix: every registered method x every registered active threat model x no defence
or each registered defence (its default settings; the imprint at a fixed alpha behind a defence,
so that only the undefended column pays for its calibration). Each cell either is refused in one
line before any round, or trains: the server's model moves in every honest round, the clients end
above the untrained model's accuracy unless a defence adds noise for a privacy budget (it says
its epsilon), and the server reads the round it acted in as `readout` reads it, never calling an
update on the wire "not applicable". Read from the registries, so a new method, server or
defence is in the matrix the moment it registers.

The federations are tiny (3 clients of 40 digits, all sampled every round, 3 rounds with the
server acting in round 2 on clients it has seen before) and run in memory (`conftest.acted`).
"""

from __future__ import annotations

import math

import pytest
import torch

from fedattack.attacks.active.readout import matched
from fedattack.defences.base import DEFENCES
from fedattack.federation.active import ACTIVE
from fedattack.registry import TARGETS, UserError
from tests.active.conftest import Acted, acted, built

COLUMNS = [(), *((name,) for name in DEFENCES.names())]
CELLS = [(m, a, d) for m in TARGETS.names() for a in ACTIVE.names() for d in COLUMNS]
FIXED_ALPHA = "alpha=0.001"  # behind a defence; the undefended column calibrates (the default)


def settings(active: str, defences: tuple[str, ...]) -> str:
    fields = ACTIVE.get(active).Settings.__dataclass_fields__
    return f"{active}:{FIXED_ALPHA}" if defences and "alpha" in fields else active


def noised(cell: Acted) -> bool:
    """A defence of the run accounts a privacy budget: its noise may hold accuracy where it was."""
    return any("epsilon" in (d.accounting() or {}) for d in cell.target.defences)


# Why a server may refuse a method: it sends nothing; its model does not read the pixels (a module
# in front, or traps in the first layer, would see nothing); isolating needs a secure sum to isolate from.
SERVER_REASONS = ("puts nothing on the wire", "does not read", "no defence of this federation hides the uplinks")


def refused_for_a_stated_reason(method: str, active: str, defences: tuple[str, ...], refusal: UserError) -> None:
    """A one-line refusal, by the defences (their honest federation is refused alike) or by the
    server for a stated reason: never a method it could read refused for nothing."""
    text = str(refusal)
    assert text.strip() and "\n" not in text, repr(refusal)
    try:
        built(method, None, defences)
    except UserError as alike:
        assert str(alike) == text, (str(alike), text)  # the defences refuse the method, server or not
        return
    assert any(reason in text for reason in SERVER_REASONS), f"{active} refused {method}: {text}"


IDS = [f"{m}-{a}-{'+'.join(d) or 'none'}" for m, a, d in CELLS]


@pytest.mark.parametrize("method, active, defences", CELLS, ids=IDS)
def test_every_method_active_server_and_defence_trains_or_is_refused_in_one_line(
        method: str, active: str, defences: tuple[str, ...]) -> None:
    try:
        cell = acted(method, settings(active, defences), defences)
    except UserError as refusal:
        refused_for_a_stated_reason(method, active, defences, refusal)
        return
    assert all(cell.moved), f"an honest round left the server's model where it was: {cell.moved}"
    if not noised(cell):
        assert cell.accuracy > cell.untrained + 0.1, (cell.untrained, cell.accuracy)
    assert [a["round"] for a in cell.adversary.acted] == [2]
    seen = cell.exchange(2)
    assert seen.victim in seen.received, "the victim's update is not on the wire"
    read = cell.adversary.read(seen)  # reads the update that is on the wire, whatever the method sends
    assert read.images.dim() == 4 and bool(torch.isfinite(read.images).all())
    score = matched(read.images, cell.datas[seen.victim].x_train).metrics
    assert all(math.isfinite(score[k]) for k in ("recovered_20", "recovered_40"))
    if not defences:  # undefended, every server that acts reads some of the victim's images
        assert score["recovered_20"] > 0, score
