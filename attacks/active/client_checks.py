"""Would the victim have refused the acting round? Every registered client-side check, asked.

An acting round is only worth what the server gets from a client that trains on it: a client
running a check that refuses the downlink sends a zero update instead. The verdict therefore says,
beside what the round would recover, which checks would have refused it. The checks are the
registry's (every subclass of `downlink-check`, a user's plugin included), each with its default
settings, judged on the downlink the designed round actually sent the victim:
  - a check with memory (`downlink-check`) compares it with the victim's recorded downlink, the
    one it last accepted;
  - a check that compares clients (`compares_clients`: `consistency-check`) gets the round's
    other downlinks too, as their gossip would give it. That presumes a channel among the round's
    clients the server cannot forge or filter; no client can run it alone, and the verdict says so.
A check the method's own first downlink would fail (`bind` refuses it) is not applicable: no
client of that method can run it.
"""

from __future__ import annotations

from typing import Any

from fedattack.attacks.active.acting_client import Round
from fedattack.defences import DEFENCES
from fedattack.defences.base import build_defence
from fedattack.defences.downlink_check import DownlinkCheck
from fedattack.registry import UserError
from fedattack.target import Target
from fedattack.wire import Payload


def registered_checks() -> list[str]:
    """Every registered client-side check, by name."""
    return [n for n in sorted(DEFENCES.names())
            if isinstance(DEFENCES.get(n), type) and issubclass(DEFENCES.get(n), DownlinkCheck)]


def judged(design: Round, target: Target, honest: Payload) -> dict[str, dict[str, Any]]:
    """Each check's decision on the victim's designed downlink: {"refused": True, False or None
    (not applicable), "why": its reason, "accepted" or why it does not apply, "alone": whether one
    client can run it without the others' downlinks}."""
    out: dict[str, dict[str, Any]] = {}
    for name in registered_checks():
        check = build_defence({"name": name}, target.ctx)
        assert isinstance(check, DownlinkCheck)
        alone = not check.compares_clients
        try:
            check.bind(target)
        except UserError as refused:  # the method's own first downlink would fail it: no client runs it
            out[name] = {"refused": None, "why": f"not applicable: {refused}", "alone": alone}
            continue
        check.last[design.victim] = {n: t.detach().clone() for n, t in honest.items() if n in check.weights}
        check.on_downlinks(design.round, design.sent.payloads)
        why = check.judge(design.sent.payloads[design.victim], design.victim, design.round)
        out[name] = {"refused": why is not None, "why": why or "accepted", "alone": alone}
    return out
