"""Damaged and forged run directories (issue #13), each given to `fedattack evaluate`.

A run directory is untrusted input. Each forgery below is made on a copy of one tiny digits
run; "resealed" forgeries also rewrite the manifest's sizes and checksums, as an adversary
would, so that the deeper checks (tensor loading, wire schema, partition, finiteness) are the
ones tested. Every one is refused in one line, the run is left exactly as it was, and no result
folder appears. No file is ever executed: a planted pickle would create a marker file.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.hostile._cli import MARKER, Planted, Workspace, refused

EVALUATE = ("evaluate", "run", "--attack", "membership", "--set", "shadows=1",
            "--set", "classifier=logreg", "--max-queries", "20", "--out", "results", "--quiet")
LAST_ROUND = "transcript/round_00004.pt"  # the session's run has 4 rounds; attacks read the last one


def manifest(run: Path) -> dict[str, Any]:
    return json.loads((run / "federation.json").read_text())


def write_manifest(run: Path, data: dict[str, Any]) -> None:
    (run / "federation.json").write_text(json.dumps(data))


def reseal(run: Path) -> None:
    """Make the manifest's sizes and checksums match the files again, as a forger would."""
    data = manifest(run)
    for rel in data["files"]:
        if (run / rel).is_file():
            raw = (run / rel).read_bytes()
            data["files"][rel] = {"bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    write_manifest(run, data)


def edit_manifest(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    def forge(run: Path) -> None:
        data = manifest(run)
        change(data)
        write_manifest(run, data)
    return forge


def edit_tensors(rel: str, change: Callable[[dict[str, torch.Tensor]], Any]) -> Callable[[Path], None]:
    def forge(run: Path) -> None:
        tensors = torch.load(run / rel, weights_only=True)
        change(tensors)
        torch.save(tensors, run / rel)
        reseal(run)
    return forge


def edit_index(change: Callable[[list[dict[str, Any]]], Any]) -> Callable[[Path], None]:
    def forge(run: Path) -> None:
        index = json.loads((run / "transcript" / "index.json").read_text())
        change(index)
        (run / "transcript" / "index.json").write_text(json.dumps(index))
        reseal(run)
    return forge


def truncate(rel: str, sealed: bool) -> Callable[[Path], None]:
    def forge(run: Path) -> None:
        raw = (run / rel).read_bytes()
        (run / rel).write_bytes(raw[: len(raw) // 2])
        if sealed:
            reseal(run)
    return forge


def plant_pickle(rel: str) -> Callable[[Path], None]:
    def forge(run: Path) -> None:
        torch.save({"fc1.weight": Planted(run.parent / MARKER)}, run / rel)
        reseal(run)
    return forge


def raw_pickle(rel: str) -> Callable[[Path], None]:
    """The file's tensors pickled by `pickle` itself (not torch.save's zip): torch warned about
    the pickle protocol on the terminal before fedattack's refusal (#43)."""
    def forge(run: Path) -> None:
        tensors = torch.load(run / rel, weights_only=True)
        with open(run / rel, "wb") as fh:
            pickle.dump(tensors, fh, protocol=4)
        reseal(run)
    return forge


def first(key: str, value: Any) -> Callable[[dict[str, torch.Tensor]], None]:
    """Set the first tensor whose name ends with `key` to `value` (a function of the old tensor)."""
    def change(tensors: dict[str, torch.Tensor]) -> None:
        name = next(n for n in tensors if n.endswith(key))
        tensors[name] = value(tensors[name])
    return change


def _link(rel: str, target: str) -> Callable[[Path], None]:
    def forge(run: Path) -> None:
        path = run / rel
        if path.is_dir():
            shutil.move(str(path), str(run.parent / "moved-away"))
            os.symlink(run.parent / "moved-away", path)
        else:
            path.unlink()
            os.symlink(target, path)
    return forge


def _remove(rel: str) -> Callable[[Path], None]:
    def forge(run: Path) -> None:
        path = run / rel
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return forge


def _empty(run: Path) -> None:
    for child in run.iterdir():
        shutil.rmtree(child) if child.is_dir() else child.unlink()


FORGERIES: dict[str, tuple[Callable[[Path], None], str] | tuple[Callable[[Path], None], str, str]] = {
    "tensor-file-truncated": (truncate("server.pt", sealed=False), "wrong size"),
    "tensor-file-truncated-resealed": (truncate("server.pt", sealed=True), "corrupt or truncated"),
    "transcript-file-truncated-resealed": (truncate(LAST_ROUND, sealed=True), "corrupt"),
    "pickle-with-code-in-server-state": (plant_pickle("server.pt"), "objects other than tensors"),
    "pickle-with-code-in-transcript": (plant_pickle(LAST_ROUND), "objects other than tensors"),
    "pickle-with-code-in-partition": (plant_pickle("partition.pt"), "objects other than tensors"),
    "tensor-altered-same-size": (lambda run: (run / "server.pt").write_bytes(
        bytes(b ^ 1 for b in (run / "server.pt").read_bytes())), "checksum"),
    "tensor-wrong-shape-resealed": (edit_tensors(LAST_ROUND, first("", lambda t: t[:1])), "does not match"),
    "tensor-integer-dtype-resealed": (edit_tensors(LAST_ROUND, first("", lambda t: t.long())),
                                      "dtype"),
    "server-state-float64-resealed": (edit_tensors("server.pt", lambda ts: ts.update({k: v.double() for k, v in
                                                                                      ts.items()})),
                                      "dtype torch.float64, the wire schema says torch.float32"),
    "server-state-raw-pickle-resealed": (raw_pickle("server.pt"), "raw pickle"),
    "server-weights-nan-resealed": (edit_tensors("server.pt", first("weight", lambda t: t * float("nan"))),
                                    "NaN", "oracle"),
    "uplink-weights-inf-resealed": (edit_tensors(LAST_ROUND,
                                                 first("", lambda t: t * float("inf"))), "NaN"),
    "transcript-messages-missing-resealed": (edit_index(lambda index: index.__delitem__(slice(1, None, 2))),
                                             "messages"),
    "transcript-entry-leaves-folder": (edit_index(lambda index: index[0].update(file="../server.pt")),
                                       "malformed message entry"),
    "transcript-entry-unknown-client": (edit_index(lambda index: index[0].update(receiver=99)), "client 99"),
    "transcript-index-not-a-list": (edit_index(lambda index: index.clear() or index.append([])),
                                    "malformed message entry"),
    "partition-negative-index-resealed": (edit_tensors("partition.pt", first("client0/train", lambda t: -t - 1)),
                                          "outside the training split"),
    "partition-duplicated-client-resealed": (
        edit_tensors("partition.pt", lambda ts: ts.__setitem__("client1/train", ts["client0/train"].clone())),
        "more than one place"),
    "partition-client-missing-resealed": (edit_tensors("partition.pt", lambda ts: ts.pop("client3/test")),
                                          "client3/test"),
    "manifest-num-clients-a-string": (edit_manifest(lambda m: m.update(num_clients="10")), "'num_clients'"),
    "manifest-files-a-list": (edit_manifest(lambda m: m.update(files=list(m["files"]))), "'files'"),
    "manifest-recording-null": (edit_manifest(lambda m: m.update(recording=None)), "'recording'"),
    "manifest-input-shape-strings": (edit_manifest(lambda m: m["dataset"].update(input_shape=["1", "8", "8"])),
                                     "input_shape"),
    "manifest-without-files": (edit_manifest(lambda m: m.pop("files")), "'files'"),
    "manifest-unsafe-path": (edit_manifest(lambda m: m["files"].update({"../outside.pt": m["files"]["server.pt"]})),
                             "unsafe path"),
    "manifest-spec-unreadable": (edit_manifest(lambda m: m["spec"].update(rounds="many")), "rounds='many'"),
    "manifest-incomplete": (edit_manifest(lambda m: m.update(complete=False)), "incomplete"),
    "manifest-future-schema": (edit_manifest(lambda m: m.update(schema_version=999)), "schema"),
    "manifest-says-diverged": (edit_manifest(lambda m: m.update(diverged=["fc1.weight"])), "diverged"),
    "manifest-not-json": (lambda run: (run / "federation.json").write_text("{"), "not valid JSON"),
    "manifest-empty": (lambda run: (run / "federation.json").write_text(""), "not valid JSON"),
    "manifest-nested-deeply": (lambda run: (run / "federation.json").write_text("[" * 50_000 + "]" * 50_000),
                               "nested too deeply"),
    "manifest-missing": (_remove("federation.json"), "federation.json is missing"),
    "file-missing": (_remove("private.pt"), "is missing"),
    "extra-file": (lambda run: (run / "notes.pt").write_bytes(b"x"), "not listed in the manifest"),
    "link-to-a-file-outside": (_link("metrics.json", "/etc/hostname"), "symbolic link"),
    "link-to-a-folder-outside": (_link("transcript", ""), "symbolic link"),
    "empty-folder": (_empty, "federation.json is missing"),
}


def last_client(run: Path) -> str:
    """The client of the transcript's last message (in LAST_ROUND, which forgeries alter)."""
    e = json.loads((run / "transcript" / "index.json").read_text())[-1]
    assert f"transcript/{e['file']}" == LAST_ROUND
    return str(e["receiver"] if e["kind"] == "downlink" else e["sender"])


@pytest.mark.parametrize("case", FORGERIES.values(), ids=FORGERIES.keys())
def test_a_forged_run_directory_is_refused(ws: Workspace, run: Path, case: tuple[Any, ...]) -> None:
    forge, words, threat = (*case, "eavesdropper")[:3]
    victim = last_client(run)  # a victim whose messages the attack must read
    forge(run)
    ws.seal()
    refused(ws.fedattack(*EVALUATE, "--victim", victim, "--threat-model", threat), words)
    assert not (ws.root / MARKER).exists()  # nothing in the run directory was executed
    ws.unchanged()


def test_an_unfinished_run_is_refused(ws: Workspace, run: Path) -> None:
    """A staging folder left by a killed `train` is not a run, even though its files look right."""
    run.rename(ws.root / ".run.partial-x1")
    ws.seal()
    refused(ws.fedattack(*(".run.partial-x1" if a == "run" else a for a in EVALUATE)), "unfinished run")
    ws.unchanged()
