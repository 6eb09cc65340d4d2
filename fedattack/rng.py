"""Independent random generators derived from (seed, purpose, round, client).

Every random draw in a federation comes from a generator keyed by what it is for, so changing
how many clients train, or in which order an executor runs them, never shifts anyone else's
randomness: the same seed gives the same federation bit for bit on CPU.
"""

from __future__ import annotations

import zlib

import numpy as np
import torch


def derive_seed(seed: int, purpose: str, *keys: int) -> int:
    """A 63-bit seed from the run seed, a purpose label and integer keys."""
    tag = zlib.crc32(purpose.encode())
    state = np.random.SeedSequence([seed, tag, *[k + 1 for k in keys]]).generate_state(2)
    return int((int(state[0]) << 31) ^ int(state[1])) & ((1 << 63) - 1)


def generator(seed: int, purpose: str, *keys: int) -> torch.Generator:
    """A CPU torch generator for (seed, purpose, keys)."""
    return torch.Generator().manual_seed(derive_seed(seed, purpose, *keys))


def numpy_rng(seed: int, purpose: str, *keys: int) -> np.random.Generator:
    """A numpy generator for (seed, purpose, keys)."""
    return np.random.default_rng(derive_seed(seed, purpose, *keys))
