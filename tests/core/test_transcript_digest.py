"""The transcript's content hash and its de-duplication, after they stopped copying bytes and
hashing a broadcast's tensors once per receiver: the same keys and the same files as before."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from fedattack.federation.storage import load_tensors
from fedattack.federation.transcript_io import TranscriptWriter, _digest
from fedattack.wire import SERVER, Message, RecordingPolicy


@pytest.mark.parametrize("t", [torch.tensor(3.0), torch.zeros(0, 4), torch.tensor([True, False]),
                               torch.arange(12.0).reshape(3, 4).t(), torch.arange(6)[::2]])
def test_digest_is_the_hash_of_dtype_shape_and_bytes(t: torch.Tensor) -> None:
    spelled = f"{t.dtype}:{tuple(t.shape)}:".encode() + t.contiguous().numpy().tobytes()
    assert _digest(t) == hashlib.blake2b(spelled, digest_size=16).hexdigest()


def test_one_broadcast_and_equal_uplinks_are_stored_once(tmp_path: Path) -> None:
    server = {"w": torch.arange(6.0).reshape(2, 3)}
    writer = TranscriptWriter(tmp_path, RecordingPolicy("all"), 1)
    for k in range(3):
        writer.add(Message(1, SERVER, k, "downlink", server))
        writer.add(Message(1, k, SERVER, "uplink", {"w": server["w"] + (k == 2)}, samples=1))
    writer.end_round(1)
    stored = load_tensors(tmp_path / "round_00001.pt")
    assert len(stored) == 2  # the broadcast (also clients 0 and 1's equal uplinks) and client 2's
    keys = [e["tensors"]["w"]["key"] for e in writer.index]
    assert keys == ["t0", "t0", "t0", "t0", "t0", "t1"]
    assert torch.equal(stored["t1"], server["w"] + 1)
