"""`batched-native`: `batched`, with the elementwise work of WAFFLe's step compiled to C.

Opt-in because it compiles C when it starts (gcc or cc, with glibc's libmvec; about half a
second, once per process) and because its float32 results are not the `batched` executor's bits:
see `fedattack.models.ibp_native`. Every other target, and WAFFLe off the CPU or in float64,
trains exactly as under `batched`. A run records the executor it was trained with in its spec.
"""

from __future__ import annotations

from fedattack.federation.executor_plugins.batched import BatchedExecutor
from fedattack.federation.executors import EXECUTORS
from fedattack.models.ibp_native import library


@EXECUTORS.register("batched-native")
class BatchedNativeExecutor(BatchedExecutor):
    """All sampled clients of a round at once, WAFFLe's step partly compiled C (needs gcc)."""

    native = True

    def __init__(self, device: str = "cpu", fast: bool = True, group_size: int | None = None) -> None:
        super().__init__(device, fast, group_size)
        library()  # build it now: a missing compiler is a one-line error before anything trains
