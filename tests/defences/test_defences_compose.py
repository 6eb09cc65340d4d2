"""Every defence wraps every batchable method, and the batched executor gives the sequential
one's federation (the wire, the server, the clients' private states) bit for bit.

Bit for bit holds for the batched executor's vmap path (`vmap(grad(local_loss))`), which every
method can take: a defence runs per client, after the executor, on the same floats either way.
The `dense` kernel the batched executor takes for plain-loss MLPs (`fedattack.kernels.dense`: one
`baddbmm` over the stacked clients) sums its matrix products in another order than the
per-client autograd step, so its runs differ in the last bits (2-3e-7 at most on this tiny
federation, with or without defences: docs/defences.md); those are compared within the
batched executor's tolerance (tests/core/test_batched_executor.py)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from fedattack.defences import DEFENCES, defence_entries
from fedattack.registry import TARGETS, UserError
from tests.defences._federate import federate

# settings beside each defence's defaults that take another path (client-side randomness)
VARIANTS: dict[str, list[dict[str, Any]]] = {"dp-fedavg": [{"noise": "client"}],
                                             "compression": [{"bits": 3}]}
CASES = [(d, s) for d in DEFENCES.names() for s in [{}, *VARIANTS.get(d, [])]]
BATCHABLE = [n for n, cls in TARGETS.items() if cls.batchable]
ATOL = 1e-5
# Top-k and stochastic quantisation make discrete choices (which entry is kept, which way a value
# rounds): where the fast path differs from the sequential run in the last bits, a choice may
# flip and one coordinate moves by a whole quantum, so those runs are compared on structure and
# on the share of coordinates that agree, not value by value.
DISCRETE = {"compression"}


# settings under which a defence changes this tiny federation (the check refuses from round 2 on)
BITE = {"clip": {"max_norm": 0.01}, "downlink-check": {"min_similarity": 0.999999},
        "layer-check": {"max_cosine": 1e-6}, "consistency-check": {"quorum": 1.0}}
# checks that judge a downlink alone: biting, they refuse the method's own first downlink at once
BITES_AT_BIND = {"layer-check"}


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Within tolerance; an encoding that is not a float (masked ring elements) amplifies any
    last-bit difference, so only the server state it decodes to is compared."""
    return torch.allclose(a, b, atol=ATOL, rtol=1e-4) if a.is_floating_point() else True


def _mostly_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], share: float = 0.99) -> bool:
    """At least `share` of all coordinates within the batched executor's tolerance."""
    close = sum(int(torch.isclose(a[n], b[n], atol=ATOL, rtol=1e-4).sum()) for n in a)
    return close >= share * sum(a[n].numel() for n in a)


def _identical(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)


def _same_run(a: Any, b: Any) -> bool:
    (_, sa, wa), (_, sb, wb) = a, b
    return (_identical(sa.server, sb.server) and all(_identical(p, q) for p, q in zip(sa.private, sb.private))
            and len(wa) == len(wb) and all(_identical(m.payload, n.payload) for m, n in zip(wa, wb)))


@pytest.mark.parametrize("method", BATCHABLE)
@pytest.mark.parametrize(("defence", "settings"), CASES, ids=lambda x: str(x) if x else "defaults")
def test_defence_composes_and_batched_equals_sequential(method: str, defence: str,
                                                        settings: dict[str, Any]) -> None:
    entry = [{"name": defence, "settings": settings}]
    try:
        sequential = federate(method, entry, "sequential")
    except UserError as refusal:  # a defence may refuse a method, in one line, at construction
        assert "\n" not in str(refusal) and method in str(refusal)
        return
    target = sequential[0]
    assert [e["name"] for e in defence_entries(target)] == [defence] and target.name == method
    wires = [(m.round, m.sender, m.receiver, m.kind) for m in sequential[2]]
    assert _same_run(sequential, federate(method, entry, "batched-vmap"))  # bit for bit
    if _same_run(federate(method, [], "sequential"), federate(method, [], "batched")):
        return  # the default batched path is the vmap one for this method
    _, seq, seq_wire = sequential
    _, bat, bat_wire = federate(method, entry, "batched")
    assert [(m.round, m.sender, m.receiver, m.kind) for m in bat_wire] == wires
    for a, b in zip(seq_wire, bat_wire):
        assert a.payload.keys() == b.payload.keys()
        if defence in DISCRETE:
            assert _mostly_same(a.payload, b.payload), (a.round, a.client)
        else:
            assert all(_close(a.payload[n], b.payload[n]) for n in a.payload), (a.round, a.client)
    if defence in DISCRETE:
        assert _mostly_same(seq.server, bat.server)
        return
    assert all(_close(seq.server[n], bat.server[n]) for n in seq.server)
    for p, q in zip(seq.private, bat.private):
        assert all(_close(p[n], q[n]) for n in p)


@pytest.mark.parametrize("defence", DEFENCES.names())
def test_a_defended_wire_differs_from_the_undefended_one(defence: str) -> None:
    _, _, plain = federate("fedavg", [])
    try:
        _, _, wire = federate("fedavg", [{"name": defence, "settings": BITE.get(defence, {})}])
    except UserError as refused:  # the bite is the one-line refusal of a federation that would train nothing
        assert defence in BITES_AT_BIND and "own first downlink" in str(refused) and "\n" not in str(refused)
        return
    ups = [(a, b) for a, b in zip(plain, wire) if a.kind == "uplink"]
    assert ups and any(not torch.equal(a.payload[n], b.payload[n].to(a.payload[n].dtype))
                       for a, b in ups for n in a.payload)
