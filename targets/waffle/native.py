"""WAFFLe's batched step on a CPU with its elementwise work compiled: the kernel option "native".

`selection.SelectionStep` is ~60 torch operations on (C, F) tensors and the step around the
products ~25 more, and at the MNIST setting's sizes each costs its dispatch (2-5 us), not its
arithmetic: about half of a step. Here the same formulas (`native.c`: the selection and its
backward, ReLU, the low-rank layer's elementwise part, the batch gather) and the small output
layer with the loss, whose three products cost torch more in dispatch and threading than in
arithmetic, run as six C calls a step (MNIST MLP), their loops vectorised by gcc with glibc's
vector maths library (libmvec); the low-rank layer's products stay torch's. What calls them,
with buffers kept across steps: `native_step.py`.
Measured on the 2-core machine: benchmarks/README.md.

Why opt-in: it needs a C compiler when it runs, and its float32 results are not the eager
path's bits (libmvec's expf and this order of operations round differently; tests hold the two
within float32 tolerance). The library is compiled from the package's own source into a fresh
temporary folder once per process (about half a second), so nothing compiled earlier is ever
loaded from disk; a run names the executor it was trained with in its spec.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import torch

from fedattack import optim
from fedattack.registry import UserError

from . import ibp
from .selection import LOG_P_MIN, LOG_V_MIN, LayerPrior

SOURCE = Path(__file__).with_name("native.c")
FLAGS = ["-O3", "-march=native", "-fopenmp-simd", "-fno-math-errno", "-shared", "-fPIC"]
CACHE_PLANES = 8
_P = ctypes.c_void_p


class NativeUnavailable(UserError):
    """No C compiler, or no libmvec: the native selection cannot be built here."""


@cache
def library() -> ctypes.CDLL:
    """The compiled selection, built once per process; a one-line error where it cannot be."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise NativeUnavailable("the batched-native executor compiles C at run time and found no gcc or cc "
                                "on PATH; install one, or use --executor batched")
    try:
        folder = Path(tempfile.mkdtemp(prefix="fedattack-native-"))
    except OSError as exc:
        raise NativeUnavailable(f"the batched-native executor compiles C into a temporary folder and could not "
                                f"make one ({exc.strerror}); set TMPDIR, or use --executor batched") from None
    target = folder / "ibp_native.so"
    try:
        done = subprocess.run([compiler, *FLAGS, str(SOURCE), "-o", str(target), "-lmvec", "-lm"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise NativeUnavailable(f"compiling the native WAFFLe step failed ({first}); it needs gcc and "
                                    "glibc's libmvec: use --executor batched")
        lib = ctypes.CDLL(str(target))
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # the loaded library stays mapped
    _declare(lib)
    return lib


def _declare(lib: ctypes.CDLL) -> None:
    """Every C function's argument types (all return void), as native.c declares them."""
    i, f, L = ctypes.c_int, ctypes.c_float, ctypes.c_long
    signatures = {
        "selection_forward": [i, i, _P, L, _P, _P, _P, _P, f, f, f, f, f, _P, _P],
        "selection_backward": [i, i, _P, L, _P, _P, _P, _P, _P, f, f, f, i, f, f, f, f, _P, _P, _P, _P, _P],
        "relu_forward": [L, _P, _P],
        "relu_backward": [L, _P, _P, _P],
        "lowrank_forward": [i, i, i, _P, _P, _P, _P, _P],
        "lowrank_backward": [i, i, i, _P, _P, _P, _P, _P, f, _P, _P, _P],
        "gather_normalized": [L, L, i, _P, _P, _P, _P, i, _P],
        "dense_head": [i, i, i, i, _P, _P, _P, _P, _P, _P, f, f, _P, _P, _P, _P],
    }
    for name, argtypes in signatures.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = argtypes, None


def available() -> bool:
    try:
        library()
    except NativeUnavailable:
        return False
    return True


def per_step_rows(taus: Sequence[torch.Tensor], ks: Sequence[torch.Tensor], tuning: Sequence[torch.Tensor | None],
                  clients: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each step's temperature, KL weight and fine-tuning flag per client as (S, C) contiguous
    rows (float32, float32, uint8), from the eager step's 0-d or (C, 1) tensors."""
    def rows(values: Sequence[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
        return torch.stack([v.expand(clients, 1).reshape(clients) for v in values]).to(dtype).contiguous()

    flags = [torch.zeros(clients, 1, dtype=torch.bool) if t is None else t for t in tuning]
    return rows(taus, torch.float32), rows(ks, torch.float32), rows(flags, torch.uint8)


class NativeSelection:
    """One factorised layer's selection for a fixed stack of clients, over the compiled
    functions: `draw` writes the step's b, `grads` the gradients of the stored parameters.
    Everything fixed for the stack (the parameters' address, the prior, the buffers b, the
    forward's cache and the backward's scratch) is bound once; a step passes only the
    addresses of its rows: the noise (C, F), and per client tau, k (float32) and the
    fine-tuning flag (uint8), each contiguous. `sel` (3, C, F) must stay where it is."""

    def __init__(self, sel: torch.Tensor, prior: LayerPrior,
                 moments: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        """`moments`: Adam's m and v for `sel`, laid out as it is, when Adam steps it in `grads`."""
        _, clients, factors = sel.shape
        assert sel.dtype == torch.float32 and sel.stride(2) == 1 and sel.stride(1) == factors
        assert moments is None or all(t.stride() == sel.stride() for t in moments)
        self._moments = (None, None) if moments is None else tuple(t.data_ptr() for t in moments)
        self.b = torch.empty(clients, factors)
        self.cache = torch.empty(CACHE_PLANES, clients, factors)
        self.scratch = torch.empty(clients, factors)
        lib = library()
        self._forward, self._backward = lib.selection_forward, lib.selection_backward
        self._head = (clients, factors, sel.data_ptr(), sel.stride(0))
        self._drawn = (prior.scale, prior.kappa, ibp.LOGIT_MAX, LOG_V_MIN, LOG_P_MIN, self.b.data_ptr(),
                       self.cache.data_ptr())
        self._prior = (prior.scale, prior.kappa, prior.alpha, int(prior.kl_b == "concrete"), ibp.LOGIT_MAX,
                       ibp.PROB_EPS, LOG_V_MIN)

    def draw(self, logistic: int, log_1mu_v: int, tau: int, tuning: int) -> None:
        """b for one step, from the addresses of its noise and per-client rows."""
        self._forward(*self._head, logistic, log_1mu_v, tau, tuning, *self._drawn)

    def grads(self, g_b: int, tau: int, k: int, tuning: int, out: int, lr: float = 0.0,
              adam: int | None = None) -> None:
        """Gradients of NLL + k KL in the stored parameters into `out` (3, C, F), given dNLL/db
        (C, F), after `draw` with the same tau and tuning. Then a step of the parameters: Adam's,
        with this step's constants at address `adam` (`adam_constants`), if made with moments;
        else SGD's if `lr` > 0."""
        self._backward(*self._head, g_b, self.cache.data_ptr(), tau, k, tuning, *self._prior, lr, adam,
                       *self._moments, out, self.scratch.data_ptr())


def adam_constants(opt: optim.Adam, steps: int) -> torch.Tensor:
    """Per local step t = 1..steps, what the C Adam step reads (S, 6): lr / bias1, 1 - beta1,
    beta2, 1 - beta2, sqrt(bias2), eps, with the biases in double precision as `optim` has them."""
    rows = [[opt.lr / (1 - opt.beta1 ** float(t)), 1 - opt.beta1, opt.beta2, 1 - opt.beta2,
             (1 - opt.beta2 ** float(t)) ** 0.5, opt.eps] for t in range(1, steps + 1)]
    return torch.tensor(rows, dtype=torch.float32)


class NativeGather:
    """A step's batch, gathered from the rows of the raw input (N, D) float32, normalised per
    channel as (x - mean) / std and padded with W_a's column of ones (`ones`) in one pass, into
    one buffer of `rows` rows that every step reuses."""

    def __init__(self, x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, ones: bool, rows: int) -> None:
        assert x.is_contiguous() and x.dtype == torch.float32 and mean.is_contiguous() and std.is_contiguous()
        self.keep = (x, mean, std)
        self.out = torch.empty(rows, x.shape[1] + int(ones))
        self._gather = library().gather_normalized
        self._head = (rows, x.shape[1], len(mean), x.data_ptr())
        self._tail = (mean.data_ptr(), std.data_ptr(), int(ones), self.out.data_ptr())

    def __call__(self, rows: int) -> torch.Tensor:
        """The batch of the int64 row numbers at address `rows`."""
        self._gather(*self._head, rows, *self._tail)
        return self.out
