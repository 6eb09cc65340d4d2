"""WAFFLe's batched step on a CPU with its elementwise work compiled: opt-in, `batched-native`.

`ibp_grad.SelectionStep` is ~60 torch operations on (C, F) tensors and the step around the
products ~25 more, and at the MNIST setting's sizes each costs its dispatch (2-5 us), not its
arithmetic: about half of a step. Here the same formulas (`ibp_native.c`: the selection and its
backward, the loss gradient, ReLU, the low-rank layer's elementwise part, the batch gather) run
as eight C calls a step, their loops vectorised by gcc with glibc's vector maths library
(libmvec); the matrix products stay torch's.
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

from fedattack.models import ibp
from fedattack.models.ibp_grad import LOG_P_MIN, LOG_V_MIN, LayerPrior
from fedattack.registry import UserError

SOURCE = Path(__file__).with_name("ibp_native.c")
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
    """Every C function's argument types (all return void), as ibp_native.c declares them."""
    i, f, L = ctypes.c_int, ctypes.c_float, ctypes.c_long
    signatures = {
        "selection_forward": [i, i, _P, L, _P, _P, _P, _P, f, f, f, f, f, _P, _P],
        "selection_backward": [i, i, _P, L, _P, _P, _P, _P, _P, f, f, f, i, f, f, f, _P, _P],
        "loss_gradient": [L, i, _P, _P, _P, _P],
        "relu_forward": [L, _P, _P],
        "relu_backward": [L, _P, _P, _P],
        "lowrank_forward": [i, i, i, _P, _P, _P, _P, _P],
        "lowrank_backward": [i, i, i, _P, _P, _P, _P, _P, _P],
        "gather_normalized": [L, L, i, _P, _P, _P, _P, i, _P],
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


def selection_buffers(clients: int, factors: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """b, the forward's cache and the backward's scratch of `NativeSelection`, kept across steps."""
    return (torch.empty(clients, factors), torch.empty(CACHE_PLANES, clients, factors),
            torch.empty(clients, factors))


class NativeSelection:
    """`SelectionStep`'s interface (`b`, `grads`) over the compiled functions, for float32 CPU
    tensors. `tau`, `k` and `tuning` are per client, (C,) contiguous (tuning as uint8); `b`,
    `cache` and `scratch` are buffers the caller keeps across steps."""

    def __init__(self, sel: torch.Tensor, logistic: torch.Tensor, log_1mu_v: torch.Tensor, tau: torch.Tensor,
                 k: torch.Tensor, tuning: torch.Tensor, prior: LayerPrior, b: torch.Tensor,
                 cache_buf: torch.Tensor, scratch: torch.Tensor) -> None:
        self.sel, self.tau, self.k, self.tuning, self.prior = sel, tau, k, tuning, prior
        self.cache, self.scratch, self.b = cache_buf, scratch, b
        clients, factors = logistic.shape
        self.shape = (clients, factors)
        library().selection_forward(clients, factors, sel.data_ptr(), sel.stride(0), logistic.data_ptr(),
                                    log_1mu_v.data_ptr(), tau.data_ptr(), tuning.data_ptr(), prior.scale,
                                    prior.kappa, ibp.LOGIT_MAX, LOG_V_MIN, LOG_P_MIN, b.data_ptr(),
                                    cache_buf.data_ptr())

    def grads(self, g_b: torch.Tensor, out: torch.Tensor) -> None:
        """Gradients of the stored parameters into `out` (3, C, F), contiguous, given dNLL/db."""
        clients, factors = self.shape
        g_b = g_b.contiguous()
        prior = self.prior
        library().selection_backward(clients, factors, self.sel.data_ptr(), self.sel.stride(0), g_b.data_ptr(),
                                     self.cache.data_ptr(), self.tau.data_ptr(), self.k.data_ptr(),
                                     self.tuning.data_ptr(), prior.scale, prior.kappa, prior.alpha,
                                     int(prior.kl_b == "concrete"), ibp.LOGIT_MAX, ibp.PROB_EPS, LOG_V_MIN,
                                     out.data_ptr(), self.scratch.data_ptr())


def loss_gradient(z: torch.Tensor, neg_target: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """softmax(z) * w + neg_target (= -onehot * w): the loss's gradient in the logits (C, B, K)."""
    z, neg_target, w = z.contiguous(), neg_target.contiguous(), w.contiguous()
    grad = torch.empty_like(z)
    library().loss_gradient(z.numel() // z.shape[-1], z.shape[-1], z.data_ptr(), neg_target.data_ptr(),
                            w.data_ptr(), grad.data_ptr())
    return grad


def relu(z: torch.Tensor) -> torch.Tensor:
    z = z.contiguous()
    act = torch.empty_like(z)
    library().relu_forward(z.numel(), z.data_ptr(), act.data_ptr())
    return act


def relu_backward(below: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    below, z = below.contiguous(), z.contiguous()
    grad = torch.empty_like(below)
    library().relu_backward(z.numel(), below.data_ptr(), z.data_ptr(), grad.data_ptr())
    return grad


def lowrank_forward(h: torch.Tensor, r: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Into g = h diag(r b): (rb as (C, 1, F), g (C, B, F))."""
    clients, batch, factors = h.shape
    assert h.is_contiguous() and r.is_contiguous() and b.is_contiguous()
    rb, g = torch.empty(clients, 1, factors), torch.empty_like(h)
    library().lowrank_forward(clients, batch, factors, h.data_ptr(), r.data_ptr(), b.data_ptr(), rb.data_ptr(),
                              g.data_ptr())
    return rb, g


def lowrank_backward(d_g: torch.Tensor, h: torch.Tensor, rb: torch.Tensor,
                     r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Through g = h diag(r b): (g_rb, g_b = g_rb * r), and d_g scaled by rb in place (d_h)."""
    clients, batch, factors = d_g.shape
    assert d_g.is_contiguous() and h.is_contiguous() and rb.is_contiguous() and r.is_contiguous()
    g_rb, g_b = torch.empty(clients, factors), torch.empty(clients, factors)
    library().lowrank_backward(clients, batch, factors, d_g.data_ptr(), h.data_ptr(), rb.data_ptr(),
                               r.data_ptr(), g_rb.data_ptr(), g_b.data_ptr())
    return g_rb, g_b


def gather_normalized(x: torch.Tensor, rows: torch.Tensor, mean: torch.Tensor, std: torch.Tensor,
                      ones: bool) -> torch.Tensor:
    """(x[rows] - mean) / std per channel, flattened, with a trailing column of ones if `ones`.
    x: (N, D) raw float32, contiguous; mean, std: (channels,) float32."""
    assert x.is_contiguous() and rows.is_contiguous() and rows.dtype == torch.int64
    out = torch.empty(len(rows), x.shape[1] + int(ones))
    library().gather_normalized(len(rows), x.shape[1], len(mean), x.data_ptr(), rows.data_ptr(),
                                mean.data_ptr(), std.data_ptr(), int(ones), out.data_ptr())
    return out
