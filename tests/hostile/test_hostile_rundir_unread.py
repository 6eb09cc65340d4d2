"""Run directories opened for evaluate (issue #39): forgeries that the earlier checks let through.

All are resealed (the manifest's sizes and checksums rewritten, as a forger would). A server
state of the wrong shape or dtype reached the model ("unexpected RuntimeError ... bug"); a
transcript round that the chosen attack never reads was never checked (NaN, int64, flattened
shapes, even a pickle that would run code, accepted with exit 0); a manifest with a 100 MiB
string, or an input shape that contradicts the dataset, was accepted; a schema version "1"
gave a message that contradicted itself. Each is now refused in one line when the run is
opened, nothing is executed, and the user's folder stays as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.hostile._cli import MARKER, Planted, Workspace, refused
from tests.hostile.test_hostile_rundir import EVALUATE, edit_manifest, edit_tensors, first, manifest, reseal


def unread_round(run: Path) -> tuple[str, str]:
    """A round file that a victim (a client on the wire) has no message in, and that victim:
    an eavesdropper on the victim's channel never loads that file."""
    index = json.loads((run / "transcript" / "index.json").read_text())
    files = sorted({e["file"] for e in index})
    for victim in sorted({e["receiver"] if e["kind"] == "downlink" else e["sender"] for e in index}):
        seen = {e["file"] for e in index if victim in (e["sender"], e["receiver"])}
        unread = [f for f in files if f not in seen]
        if unread:
            return f"transcript/{unread[0]}", str(victim)
    raise AssertionError("every client is in every round of the session's run")


def in_unread_round(change: Callable[[dict[str, torch.Tensor]], Any]) -> Callable[[Path], None]:
    def forge(run: Path) -> None:
        edit_tensors(unread_round(run)[0], change)(run)
    return forge


def flattened(run: Path) -> None:
    """Every tensor of the round flattened, and the index told so: consistent, but not the wire."""
    rel, _ = unread_round(run)
    tensors = torch.load(run / rel, weights_only=True)
    torch.save({k: t.flatten() for k, t in tensors.items()}, run / rel)
    index = json.loads((run / "transcript" / "index.json").read_text())
    for e in index:
        if f"transcript/{e['file']}" == rel:
            for info in e["tensors"].values():
                info["shape"] = [int(torch.tensor(info["shape"]).prod())]
    (run / "transcript" / "index.json").write_text(json.dumps(index))
    reseal(run)


def pickled(run: Path) -> None:
    torch.save({"t0": Planted(run.parent / MARKER)}, run / unread_round(run)[0])
    reseal(run)


def huge_string(size: int) -> Callable[[Path], None]:
    def forge(run: Path) -> None:
        data = manifest(run)
        data["spec"]["description"] = "x" * size
        (run / "federation.json").write_text(json.dumps(data))
    return forge


FORGERIES: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "server-state-wrong-shape-resealed": (edit_tensors("server.pt", first("weight", lambda t: t[:1])),
                                          ("server.pt", "shape")),
    "server-state-integer-dtype-resealed": (edit_tensors("server.pt", first("weight", lambda t: t.long())),
                                            ("server.pt", "dtype")),
    "unread-round-nan-resealed": (in_unread_round(first("", lambda t: t * float("nan"))), ("NaN",)),
    "unread-round-int64-resealed": (in_unread_round(first("", lambda t: t.long())), ("dtype",)),
    "unread-round-flattened-shapes-resealed": (flattened, ("of shape",)),
    "unread-round-pickle-resealed": (pickled, ("objects other than tensors",)),
    "manifest-with-a-100-mib-string": (huge_string(100 * 2**20), ("larger than 64 MiB",)),
    "manifest-with-a-1-mib-string": (huge_string(2**20), ("1,048,576 characters",)),
    "manifest-input-shape-contradicts-the-dataset": (
        edit_manifest(lambda m: m["dataset"].update(input_shape=[1, 4, 16])), ("input_shape [1, 4, 16]", "[1, 8, 8]")),
    "manifest-num-classes-contradicts-the-dataset": (
        edit_manifest(lambda m: m["dataset"].update(num_classes=12)), ("num_classes 12",)),
    "manifest-schema-version-a-string": (edit_manifest(lambda m: m.update(schema_version="1")),
                                         ("schema version '1'", "not a number")),
}


@pytest.mark.parametrize("forge, words", FORGERIES.values(), ids=FORGERIES.keys())
def test_a_forgery_the_attack_would_not_read_is_refused_when_the_run_is_opened(
        ws: Workspace, run: Path, forge: Callable[[Path], None], words: tuple[str, ...]) -> None:
    victim = unread_round(run)[1]
    forge(run)
    ws.seal()
    line = refused(ws.fedattack(*EVALUATE, "--victim", victim), *words)
    assert "this fedattack reads 1" not in line  # the schema message no longer contradicts itself
    assert not (ws.root / MARKER).exists()  # nothing in the run directory was executed
    ws.unchanged()
