"""`batched-native`: `batched`, with the kernel option "native" (a kernel's compiled variant).

A kernel that has a compiled variant uses it under this option; every other method trains
exactly as under `batched`. Among the built-in methods WAFFLe's kernel has one (its factor
selection and the elementwise work of its step compiled to C when it first runs, needing gcc
and glibc's libmvec: `targets/waffle/native.py`), whose float32 results are not `batched`'s
bits, which is why this is a separate executor: a run records the executor it was trained with
in its spec (and so in an experiment cell's address).
"""

from __future__ import annotations

from fedattack.federation.executor_plugins.batched import BatchedExecutor
from fedattack.federation.executors import EXECUTORS


@EXECUTORS.register("batched-native")
class BatchedNativeExecutor(BatchedExecutor):
    """All sampled clients of a round at once, with the kernels' compiled variants (WAFFLe's: gcc)."""

    options = frozenset({"native"})
