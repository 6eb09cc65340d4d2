"""The proximal pull the built-in kernels add to the cross-entropy: (mu/2)|w - anchor|^2.

FedProx's local objective is the default cross-entropy plus (mu/2)|w - w^t|^2. Its gradient is
the default one plus mu (w - w^t), so the dense and conv kernels train it by adding that term
(before, FedProx fell back to `vmap(grad(local_loss))`, measured 1.4x slower on the
Fashion-MNIST CNN, benchmarks/README.md). A method declares the pull as its objective's
`proximal` weight (`Target.local_objective`), keeping the anchor of parameter `n` in its
problem's consts as `anchor.<n>`.
"""

from __future__ import annotations

from fedattack.kernels.base import State

ANCHOR = "anchor."
Pull = tuple[float, State]  # (mu, each parameter's anchor, stacked like the parameters)


def has_anchors(params: State, consts: State) -> bool:
    """Whether every parameter has its anchor (and the consts hold nothing else)."""
    return set(consts) == {ANCHOR + k for k in params}


def pull_of(mu: float, consts: State) -> Pull | None:
    """(mu, the anchors by their parameter's name) from stacked consts; None without a pull."""
    if not mu:
        return None
    return mu, {k[len(ANCHOR):]: v for k, v in consts.items() if k.startswith(ANCHOR)}


def first(pull: Pull | None, a: int) -> Pull | None:
    """The pull of the first `a` stacked clients (those still training at a step)."""
    return None if pull is None else (pull[0], {k: v[:a] for k, v in pull[1].items()})
