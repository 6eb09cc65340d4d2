"""The transcript on disk: one tensor file per recorded round plus a JSON index of messages.

A downlink that is broadcast identically to many clients is stored once per round (tensors
are de-duplicated by content), which is most of the transcript's size for FedAvg-like methods.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch

from fedattack.federation import trust
from fedattack.federation.storage import load_tensors, read_json, save_tensors, write_json
from fedattack.registry import UserError
from fedattack.wire import Message, RecordingPolicy, Transcript


def _digest(t: torch.Tensor) -> str:
    """Content hash of a tensor: its dtype, shape and bytes (read in place, not copied)."""
    t = t.detach().contiguous()
    digest = hashlib.blake2b(f"{t.dtype}:{tuple(t.shape)}:".encode(), digest_size=16)
    digest.update(t.numpy().reshape(-1).view("u1").data)
    return digest.hexdigest()


class TranscriptWriter:
    """Receives messages from the round loop and keeps what the recording policy asks for."""

    def __init__(self, folder: Path, policy: RecordingPolicy, total_rounds: int) -> None:
        self.folder, self.policy, self.total_rounds = folder, policy, total_rounds
        self.folder.mkdir(parents=True, exist_ok=True)
        self.index: list[dict] = []
        self.pending: list[Message] = []
        self.latest: dict[int, list[Message]] = {}
        self.bytes_on_wire = 0

    def add(self, msg: Message) -> None:
        self.bytes_on_wire += msg.nbytes
        if self.policy.per_client_final:
            kept = self.latest.get(msg.client, [])
            if kept and kept[0].round != msg.round:
                kept = []
            self.latest[msg.client] = kept + [msg]
        elif self.policy.keeps_round(msg.round, self.total_rounds):
            self.pending.append(msg)

    def end_round(self, rnd: int) -> None:
        if self.pending:
            self._write_round(rnd, self.pending)
            self.pending = []

    def close(self) -> dict:
        if self.policy.per_client_final:
            by_round: dict[int, list[Message]] = {}
            for msgs in self.latest.values():
                by_round.setdefault(msgs[0].round, []).extend(msgs)
            for rnd in sorted(by_round):
                self._write_round(rnd, by_round[rnd])
        write_json(self.folder / "index.json", self.index)
        return {"policy": self.policy.spec, "messages": len(self.index),
                "rounds": sorted({m["round"] for m in self.index}),
                "bytes_on_wire": self.bytes_on_wire}

    def _write_round(self, rnd: int, msgs: list[Message]) -> None:
        name = f"round_{rnd:05d}.pt"
        keys: dict[str, str] = {}
        tensors: dict[str, torch.Tensor] = {}
        seen: dict[int, tuple[torch.Tensor, str]] = {}  # a broadcast's tensors: hashed once a round
        for msg in msgs:
            stored: dict[str, dict[str, Any]] = {}
            for tname, t in msg.payload.items():
                if id(t) not in seen:  # one object is one file entry whatever its bytes
                    seen[id(t)] = (t, _digest(t))
                d = seen[id(t)][1]
                if d not in keys:
                    keys[d] = f"t{len(keys)}"
                    tensors[keys[d]] = t
                stored[tname] = {"key": keys[d], "shape": list(t.shape)}
            self.index.append({"round": msg.round, "sender": msg.sender, "receiver": msg.receiver,
                               "kind": msg.kind, "file": name, "bytes": msg.nbytes,
                               "samples": msg.samples, "tensors": stored})
        save_tensors(self.folder / name, tensors)


class TranscriptReader:
    """Reads recorded messages back, one round file at a time, filtered before loading.

    The index and every loaded tensor are checked against the run's manifest (`trust`): a
    message names a real client and a listed round file, and carries what the wire schema
    declares, with its shapes.
    """

    def __init__(self, folder: Path, schema: dict[str, Any], files: dict[str, Any],
                 num_clients: int) -> None:
        self.folder, self.schema = folder, schema
        self.index: list[dict[str, Any]] = read_json(folder / "index.json")
        trust.check_index(folder / "index.json", self.index, files, num_clients)

    def load(self, *, client: int | None = None, kind: str | None = None,
             rounds: set[int] | None = None) -> Transcript:
        wanted = [e for e in self.index if _matches(e, client, kind, rounds)]
        files: dict[str, dict[str, torch.Tensor]] = {}
        msgs = []
        for e in wanted:
            if e["file"] not in files:
                files[e["file"]] = load_tensors(self.folder / e["file"])
            payload = self._payload(e, files[e["file"]])
            msgs.append(Message(e["round"], e["sender"], e["receiver"], e["kind"], payload, e.get("samples")))
        return Transcript(msgs)

    def verify_all(self, finite: bool = True) -> None:
        """Check every round file as `load` would (tensors only, the index's names and shapes, the
        wire schema, and `finite` values), one file in memory at a time."""
        by_file: dict[str, list[dict[str, Any]]] = {}
        for e in self.index:
            by_file.setdefault(e["file"], []).append(e)
        for name, entries in by_file.items():
            store = load_tensors(self.folder / name)
            for e in entries:
                self._payload(e, store, finite=False)
            if finite:  # each stored tensor once (a broadcast is one tensor for every client)
                for key, t in store.items():
                    trust.check_finite(self.folder / name, key, t)

    def _payload(self, e: dict[str, Any], store: dict[str, torch.Tensor],
                 finite: bool = True) -> dict[str, torch.Tensor]:
        """One message's tensors from its round file, checked against the index and the schema."""
        payload = {}
        for tname, info in e["tensors"].items():
            t = store.get(info["key"]) if isinstance(info, dict) else None
            if t is None or list(t.shape) != info.get("shape"):
                raise UserError(f"{self.folder / e['file']} does not match the transcript index; re-create the run")
            payload[tname] = t
        trust.check_payload(f"{self.folder / e['file']}", e["kind"], payload, self.schema, finite)
        return payload

    def clients(self) -> list[int]:
        return sorted({e["receiver"] if e["kind"] == "downlink" else e["sender"] for e in self.index})


def _matches(e: dict, client: int | None, kind: str | None, rounds: set[int] | None) -> bool:
    c = e["receiver"] if e["kind"] == "downlink" else e["sender"]
    return ((client is None or c == client) and (kind is None or e["kind"] == kind)
            and (rounds is None or e["round"] in rounds))
